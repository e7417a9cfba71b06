#include <cstdio>
#include <cstdlib>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>

constexpr emergent::Shape linmap{
    .vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
using Net = emergent::Model<emergent::DotAttention, linmap>;  // every size a compile-time constant

int main(int argc, char** argv) {  // readme_example [RUN_FOLDER [STEPS]]
  emergent::TrainConfig config;    // AdamW at lr 1e-3, 4,096 tokens a step, 10,000 steps
  config.task_params = {{"S", 16}, {"s", 3}};  // the linear map's declared parameters
  config.shape = linmap;
  if (argc > 2) config.steps = std::atoll(argv[2]);
  const emergent::RunSummary s =
      emergent::Trainer<Net>(config, argc > 1 ? argv[1] : "runs/mine").run();
  std::printf("steps %lld  x1 loss %.4f  emergence step %lld\n", (long long)s.steps_done,
              s.final_metric, (long long)s.emergence_step.value_or(-1));
}
