// Training and evaluating a registered shape (registry.hpp): the trainer and checkpoints are
// compiled once per program here, whatever the shape.
#pragma once

#include <emergent/train/trainer.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "registry.hpp"

namespace emergent::cli {

struct EvalRequest {
  std::filesystem::path checkpoint;
  TrainConfig config;  // from the checkpoint's metadata
  int batch = 256;
  std::filesystem::path write_batch;  // empty: do not write
};

inline RunSummary train_entry(const ShapeEntry& entry, const TrainConfig& config,
                              const std::filesystem::path& out, bool progress) {
  TrainConfig c = config;
  c.shape = entry.shape;
  RunTrainer trainer(c, out, entry.make(), progress);
  return trainer.run();
}

inline EvalResult eval_entry(const ShapeEntry& entry, const EvalRequest& request) {
  const std::unique_ptr<TrainableModel> model = entry.make();
  const SafetensorsFile file(request.checkpoint);
  std::vector<float> params(model->parameter_count());
  load_parameters(file, model->tensors(), params);
  const TrainConfig& c = request.config;
  const TaskSetup setup = make_task(c);
  std::vector<std::int32_t> inputs, targets;
  EvalResult r =
      model->evaluate(params, *setup.task, c.seed, request.batch, float(c.bias), &inputs, &targets);
  if (!request.write_batch.empty()) {
    const nlohmann::json batch = {{"batch", request.batch},
                                  {"length", setup.task->length()},
                                  {"inputs", inputs},
                                  {"targets", targets}};
    std::ofstream out(request.write_batch);
    out << batch.dump() << "\n";
    out.close();
    require(out.good(), request.write_batch.string(),
            "cannot write the batch (does the folder exist?)");
  }
  return r;
}

}  // namespace emergent::cli
