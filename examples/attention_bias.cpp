// The attention-bias intervention: the linear map (S = 16, s = 3) trained twice from one seed, as
// it is and with c times its true attention pattern added to the attention logits.
#include <cstdio>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>
#include <sstream>
#include <string>

constexpr emergent::Shape linmap{
    .vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
using Net = emergent::Model<emergent::DotAttention, linmap>;  // every size a compile-time constant

template <class T>
T arg(int argc, char** argv, int i, T fallback) {  // argv[i], all of it a T, else an error
  std::istringstream in(i < argc ? argv[i] : "");
  if (i < argc && (!(in >> fallback) || !in.eof()))
    throw emergent::Error("bad argument '" + in.str() + "' (attention_bias [RUNS [STEPS [C]]])");
  return fallback;
}

int main(int argc, char** argv) try {  // attention_bias [RUNS [STEPS [C]]]
  const std::string runs = argc > 1 ? argv[1] : "runs/attention_bias";
  emergent::TrainConfig config;                // AdamW at lr 1e-3, 4,096 tokens a step
  config.task_params = {{"S", 16}, {"s", 3}};  // the linear map's declared parameters
  config.shape = linmap;
  config.steps = arg<long long>(argc, argv, 2, 3000);  // the trainer checks every setting
  for (const double c : {0.0, arg<double>(argc, argv, 3, 5.0)}) {
    config.bias = c;  // attention logits += c * (the true pattern)
    char name[64];
    std::snprintf(name, sizeof name, "/bias_%g", c);
    const emergent::RunSummary r = emergent::Trainer<Net>(config, runs + name).run();
    const std::string emergence = r.emergence_step ? std::to_string(*r.emergence_step) : "none";
    std::printf("bias %g  steps %lld  x1 loss %.4f  emergence step %s", c, (long long)r.steps_done,
                r.final_metric, emergence.c_str());
    const emergent::AttentionAnalysis& a = r.eval.attention;  // of a held-out batch
    std::printf("  attention IoU %.3f (chance %.3f)\n", a.iou, a.iou_chance);
  }
} catch (const std::exception& e) {
  std::fprintf(stderr, "attention_bias: %s\n", e.what());
  return 1;
}
