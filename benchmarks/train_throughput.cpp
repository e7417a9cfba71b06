// Training throughput of the fast CPU model on named configurations, for the side-by-side
// comparison with PyTorch (benchmarks/compare_pytorch.py). A plain program, not a Google
// Benchmark suite: each run prints one JSON line.
//
//   train_throughput --config linmap_S16_4096 --threads 2 --steps 50 --warmup 20
//   train_throughput --gemm-peak --threads 2        # fp32 GEMM at 1024^3 and 2048^3: Eigen and
//   nn/gemm.hpp train_throughput --list train_throughput                                # (make
//   bench) a short default run
//
// Every configuration: pre-LN GPT with dot attention, D = 128, 8 heads, MLP 512, full-sequence
// loss (weight 1 at every position), AdamW lr 1e-3 (default betas, weight decay 0.01 on the
// Linear weights, gradient clipping at norm 1), random tokens drawn fresh for every step.
//   linmap_S{S}_{tokens}: 1 layer, vocab 2; sequences of 2S tokens, so the model runs on
//                         length T = 2S-1 positions and batch = tokens / (2S) sequences.
//   ca_L4_{T}:            4 layers, vocab 4, 4,096 positions per step: length 1024, batch 4
//                         (the automaton at S = 64); 2048, batch 2 (S = 128); 4096, batch 1
//                         (S = 256), the long contexts of the paper's Fig. 5b.
// tokens_per_step counts the positions the model is trained on, batch * T (3968 for
// linmap_S16_4096), and tokens_per_s is that per second; compare_pytorch.py counts the same.
//
// FLOPs per token (per trained position), forward + backward, counted analytically:
//   matmul parameters  P = L (4 D^2 + 2 D F) + V D      (qkv 3D^2, out D^2, fc D F, proj F D;
//                                                         head V D; biases, LN, embeddings not
//                                                         counted)
//   forward            2 P  +  L * 2 D (T + 1)
//     where the attention term is Q K^T and A V over the causal triangle: query i meets i + 1
//     keys, so the two products cost 2 * 2 * D * (i + 1) FLOPs (all heads together, H d_head =
//     D); averaged over i in [0, T) that is 4 D (T + 1) / 2 = 2 D (T + 1) per token and layer.
//   forward + backward  3 x forward (the backward does two products per forward product):
//     flops_per_token = 6 P + 6 L D (T + 1)
// Softmax, LayerNorm, GELU, cross-entropy and the AdamW update are elementwise and left out, so
// gflops = flops_per_token * tokens_per_s / 1e9 is the useful matmul rate, directly comparable
// with the GEMM peak that --gemm-peak measures.
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <emergent/core/arena.hpp>
#include <emergent/core/cpu.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/simd.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/model/data_parallel.hpp>
#include <emergent/model/model.hpp>
#include <emergent/nn/gemm.hpp>
#include <emergent/optim/adamw.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

// The GEMM and attention kernels this build uses (core/simd.hpp), printed with every result.
#if EMERGENT_SIMD_LANES > 0
constexpr const char* kKernel = emergent::simd::kName;
#else
constexpr const char* kKernel = "eigen";
#endif

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

constexpr emergent::Shape linmap_shape(int S) {
  return {.vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 2 * S - 1};
}
constexpr emergent::Shape kLinmapS16 = linmap_shape(16);
constexpr emergent::Shape kLinmapS32 = linmap_shape(32);
constexpr emergent::Shape ca_shape(int length) {
  return {.vocab = 4, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = length};
}
constexpr emergent::Shape kCaL4 = ca_shape(1024);
constexpr emergent::Shape kCaL4Long = ca_shape(2048);
constexpr emergent::Shape kCaL4Longest = ca_shape(4096);

struct Options {
  std::string config = "linmap_S16_4096";
  int threads = 0;  // 0: OpenMP's default
  int steps = -1;   // -1: the configuration's default
  int warmup = -1;
  bool gemm_peak = false;
  bool list = false;
};

// Peak resident set of this process so far (VmHWM), in bytes; 0 where /proc is missing.
std::size_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// Floats of the model's Workspace for (B, T), mirroring Model::Workspace::carve (without its
// 16-float alignment of each tensor); the mixer's own part is measured with a sizing arena.
template <class Net>
std::size_t workspace_floats(int B, int T) {
  constexpr std::size_t D = Net::D, F = Net::F, V = Net::V, L = Net::L;
  const std::size_t N = static_cast<std::size_t>(B) * T;
  emergent::Arena<float> arena;
  typename Net::Mixer::Activations acts;
  Net::Mixer::carve(arena, acts, B, T);
  arena.allocate_and_rewind();
  const std::size_t mixer = arena.capacity();
  const std::size_t per_layer = 2 * N * D + 4 * N + mixer + 2 * N * D + 2 * N * F;
  return (L + 1) * N * D + L * per_layer + N * D + 2 * N + 2 * N * V + 2 * N + T +
         static_cast<std::size_t>(T) * T + 2 * N * D + N * std::max(F, D) + N * V;
}

template <emergent::Shape S>
nlohmann::json run_config(const std::string& name, int batch, int length, int steps, int warmup) {
  using Net = emergent::Model<emergent::DotAttention, S>;
  const int V = Net::V, L = Net::L, D = Net::D, F = Net::F;
  const std::size_t N = static_cast<std::size_t>(batch) * length;

  std::vector<float> params(Net::parameter_count), grads(Net::parameter_count);
  Net::init(params, 1234);
  std::vector<emergent::DecayRange> ranges;
  for (const auto& t : Net::tensors()) ranges.push_back({t.offset, t.size, t.weight_decay});
  emergent::AdamW<float> optimizer(emergent::AdamWConfig{}, ranges, Net::parameter_count);
  emergent::DataParallelStep<Net>
      parallel_step;  // what the Trainer runs: one slice of the batch a thread

  // Random tokens, fresh for every step: a few pre-drawn batches, cycled (drawing is not timed).
  constexpr int kBatches = 4;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> token(0, V - 1);
  std::vector<std::vector<std::int32_t>> inputs(kBatches), targets(kBatches);
  for (int k = 0; k < kBatches; ++k) {
    inputs[k].resize(N);
    targets[k].resize(N);
    for (std::size_t n = 0; n < N; ++n) {
      inputs[k][n] = token(rng);
      targets[k][n] = token(rng);
    }
  }
  const std::vector<float> loss_weights(length, 1.0f);

  double loss = 0;
  auto step = [&](int i) {
    const int k = i % kBatches;
    loss = parallel_step.run(params, grads,
                             {batch, length, inputs[k], targets[k], loss_weights, {}, 0.0f});
    optimizer.step(params, grads, 1e-3);
  };
  for (int i = 0; i < warmup; ++i) step(i);
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) step(warmup + i);
  const double elapsed = seconds(start, Clock::now());

  const double matmul_params = double(L) * (4.0 * D * D + 2.0 * D * F) + double(V) * D;
  const double flops_per_token = 6.0 * matmul_params + 6.0 * L * D * (length + 1.0);
  const double tokens_per_step = double(N);
  const double tokens_per_s = steps > 0 ? tokens_per_step * steps / elapsed : 0.0;
  // params, grads, m, v, and the gradient buffer of every thread but the first; one workspace per
  // thread (its slices share it)
  const auto workspaces = parallel_step.held_workspaces();
  const std::size_t state_bytes =
      (4 + workspaces.size() - 1) * Net::parameter_count * sizeof(float);
  std::size_t workspace_count = 0;
  for (const auto* ws : workspaces) workspace_count += workspace_floats<Net>(ws->batch, length);
  const std::size_t workspace_bytes = workspace_count * sizeof(float);
  return {{"config", name},
          {"kernel", kKernel},
          {"gemm", emergent::nn::gemm_description()},
          {"cpu", emergent::cpu::info().model},
          {"threads", emergent::thread_count()},
          {"batch", batch},
          {"length", length},
          {"layers", L},
          {"vocab", V},
          {"parameter_count", Net::parameter_count},
          {"tokens_per_step", tokens_per_step},
          {"warmup", warmup},
          {"steps", steps},
          {"seconds", elapsed},
          {"tokens_per_s", tokens_per_s},
          {"flops_per_token", flops_per_token},
          {"gflops", flops_per_token * tokens_per_s / 1e9},
          {"final_loss", loss},
          {"estimated_bytes", state_bytes + workspace_bytes},
          {"state_bytes", state_bytes},
          {"workspace_bytes", workspace_bytes},
          {"peak_rss_bytes", peak_rss_bytes()}};
}

nlohmann::json run_named(const Options& o) {
  // name -> (shape, batch, length, default steps, default warmup)
  if (o.config == "linmap_S16_4096" || o.config == "linmap_S16_512" ||
      o.config == "linmap_S32_4096" || o.config == "linmap_S32_512") {
    const int S = o.config.find("S16") != std::string::npos ? 16 : 32;
    const int tokens = o.config.ends_with("_4096") ? 4096 : 512;
    const int batch = tokens / (2 * S), length = 2 * S - 1;
    // A step of 512 tokens takes a few milliseconds: enough of them to time reliably.
    const int steps = o.steps >= 0 ? o.steps : (tokens == 512 ? 400 : 100);
    const int warmup = o.warmup >= 0 ? o.warmup : (tokens == 512 ? 50 : 20);
    if (S == 16) return run_config<kLinmapS16>(o.config, batch, length, steps, warmup);
    return run_config<kLinmapS32>(o.config, batch, length, steps, warmup);
  }
  if (o.config == "ca_L4_1024") {
    const int steps = o.steps >= 0 ? o.steps : 6, warmup = o.warmup >= 0 ? o.warmup : 2;
    return run_config<kCaL4>(o.config, 4, 1024, steps, warmup);
  }
  if (o.config == "ca_L4_2048" || o.config == "ca_L4_4096") {
    const int steps = o.steps >= 0 ? o.steps : 3, warmup = o.warmup >= 0 ? o.warmup : 1;
    if (o.config == "ca_L4_2048") return run_config<kCaL4Long>(o.config, 2, 2048, steps, warmup);
    return run_config<kCaL4Longest>(o.config, 1, 4096, steps, warmup);
  }
  throw std::invalid_argument("unknown --config " + o.config + " (see --list)");
}

// Best-of-`reps` rate of an fp32 C = A B at n x n x n, in GFLOP/s (2 n^3 FLOPs): Eigen's, and
// emergent's own kernel (nn/gemm.hpp) where it is built.
template <class Product>
double best_gflops(int n, int reps, Product&& product) {
  product();  // warm up (packing buffers, threads)
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    product();
    best = std::min(best, seconds(start, Clock::now()));
  }
  return 2.0 * double(n) * n * n / best / 1e9;
}

double eigen_gemm_gflops(int n, int reps) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const M a = M::Random(n, n), b = M::Random(n, n);
  M c(n, n);
  return best_gflops(n, reps, [&] { c.noalias() = a * b; });
}

double emergent_gemm_gflops(int n, int reps) {
  if constexpr (!emergent::nn::kGemmKernel) return 0.0;
  const std::vector<float> a(std::size_t(n) * n, 0.5f), b(std::size_t(n) * n, 0.25f);
  std::vector<float> c(std::size_t(n) * n);
  return best_gflops(n, reps, [&] {
    emergent::nn::gemm(n, n, n, {a.data(), n, 1}, {b.data(), n, 1}, c.data(), n, false);
  });
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--config")
      o.config = value();
    else if (arg == "--threads")
      o.threads = std::stoi(value());
    else if (arg == "--steps")
      o.steps = std::stoi(value());
    else if (arg == "--warmup")
      o.warmup = std::stoi(value());
    else if (arg == "--gemm-peak")
      o.gemm_peak = true;
    else if (arg == "--list")
      o.list = true;
    else if (arg == "-h" || arg == "--help") {
      std::cout << "train_throughput [--config NAME] [--threads N] [--steps N] [--warmup N]\n"
                   "train_throughput --gemm-peak [--threads N]\n"
                   "train_throughput --list\n";
      std::exit(0);
    } else
      throw std::invalid_argument("unknown argument " + arg);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (o.list) {
      for (const char* name : {"linmap_S16_4096", "linmap_S16_512", "linmap_S32_4096",
                               "linmap_S32_512", "ca_L4_1024", "ca_L4_2048", "ca_L4_4096"})
        std::cout << name << '\n';
      return 0;
    }
    if (o.threads > 0) {
      emergent::set_thread_count(o.threads);
      Eigen::setNbThreads(o.threads);
    }
    if (o.gemm_peak) {
      const double g1024 = eigen_gemm_gflops(1024, 5), g2048 = eigen_gemm_gflops(2048, 3);
      const double own1024 = emergent_gemm_gflops(1024, 5), own2048 = emergent_gemm_gflops(2048, 3);
      std::cout << nlohmann::json{{"gemm", "fp32"},
                                  {"threads", emergent::thread_count()},
                                  {"gflops_1024", g1024},
                                  {"gflops_2048", g2048},
                                  {"emergent_gflops_1024", own1024},
                                  {"emergent_gflops_2048", own2048},
                                  {"gflops", std::max({g1024, g2048, own1024, own2048})}}
                       .dump()
                << std::endl;
      return 0;
    }
    std::cout << run_named(o).dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_throughput: " << e.what() << '\n';
    return 1;
  }
}
