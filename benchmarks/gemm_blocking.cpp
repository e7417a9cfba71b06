// The GEMM blockings of nn/gemm.hpp measured against each other on this CPU, on the twelve
// Linear products of one training slice (D = 128, MLP 512: qkv, out, fc, proj; forward, input
// gradient, weight gradient), one thread. A plain program, not a Google Benchmark suite: the
// candidates run interleaved, product by product and round by round, and each keeps its best
// rate, because on a shared VM the machine's speed drifts by 10-20% over seconds.
//
//   gemm_blocking                          chosen blocking against in-place/packed at 128, 256
//   gemm_blocking --tokens 1984 --rounds 20 --candidates 128:packed,256:in-place,96:packed
//
// Prints the CPU, the blocking this process would choose (nn::gemm_blocking()), a table of
// GFLOP/s per product and candidate, and the FLOP-weighted rate of each candidate over all twelve
// (the total FLOPs divided by the summed time).
#include <chrono>
#include <cstdio>
#include <emergent/core/cpu.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/nn/gemm.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#if EMERGENT_SIMD_LANES > 0
namespace {

using emergent::nn::StridedMatrix;
using Blocking = emergent::nn::gemm_detail::Blocking;

std::string label(const Blocking& b) {
  return std::to_string(b.kc) + (b.b_in_place ? ":in-place" : ":packed");
}

std::vector<Blocking> parse_candidates(const std::string& text) {
  std::vector<Blocking> out;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    const auto colon = item.find(':');
    const std::string layout = colon == std::string::npos ? "" : item.substr(colon + 1);
    int kc = 0;
    try {
      kc = std::stoi(item.substr(0, colon));
    } catch (const std::exception&) {
    }
    if (kc < 16 || kc > 4096 || (layout != "packed" && layout != "in-place"))
      throw std::invalid_argument("--candidates '" + item +
                                  "': expected KC:packed or KC:in-place, KC from 16 to 4096");
    out.push_back({kc, layout == "in-place"});
  }
  return out;
}

struct Product {
  std::string name;
  int M, N, K;
  StridedMatrix a, b;
  float* c;
  int ldc;
  bool accumulate;
  const float* bias;
  double flops() const { return 2.0 * M * N * K; }
};

int run(int tokens, int rounds, const std::vector<Blocking>& candidates) {
  emergent::set_thread_count(1);  // the data-parallel step runs each slice's GEMMs on one thread
  std::mt19937 engine(1);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> storage;
  auto values = [&](std::size_t n) {
    storage.emplace_back(n);
    for (float& x : storage.back()) x = normal(engine);
    return storage.back().data();
  };
  struct Layer {
    const char* name;
    int in, out;
  };
  std::vector<Product> products;
  for (const Layer l : {Layer{"qkv", 128, 384}, Layer{"out", 128, 128}, Layer{"fc", 128, 512},
                        Layer{"proj", 512, 128}}) {
    const std::size_t t = tokens;
    float *x = values(t * l.in), *w = values(std::size_t(l.out) * l.in), *bias = values(l.out),
          *y = values(t * l.out), *dy = values(t * l.out), *dx = values(t * l.in),
          *dw = values(std::size_t(l.out) * l.in);
    const std::string n = l.name;
    // The three products of nn/linear.hpp: Y = X W^T + b, dX = dY W, dW += dY^T X.
    products.push_back(
        {n + " forward", tokens, l.out, l.in, {x, l.in, 1}, {w, 1, l.in}, y, l.out, false, bias});
    products.push_back(
        {n + " dX", tokens, l.in, l.out, {dy, l.out, 1}, {w, l.in, 1}, dx, l.in, false, nullptr});
    products.push_back(
        {n + " dW", l.out, l.in, tokens, {dy, 1, l.out}, {x, l.in, 1}, dw, l.in, true, nullptr});
  }
  std::vector<std::vector<double>> best(products.size(), std::vector<double>(candidates.size()));
  using Clock = std::chrono::steady_clock;
  for (int round = 0; round < rounds; ++round)
    for (std::size_t p = 0; p < products.size(); ++p)
      for (std::size_t c = 0; c < candidates.size(); ++c) {
        const Product& P = products[p];
        const auto start = Clock::now();
        double elapsed = 0;
        int calls = 0;
        do {
          emergent::nn::gemm(P.M, P.N, P.K, P.a, P.b, P.c, P.ldc, P.accumulate, P.bias,
                             candidates[c]);
          ++calls;
          elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        } while (elapsed < 0.01);
        best[p][c] = std::max(best[p][c], P.flops() * calls / elapsed / 1e9);
      }

  const auto& cpu = emergent::cpu::info();
  std::printf("cpu: %s (%s, L1d %d KiB), kernel %s, chosen blocking %s, %d tokens, %d rounds\n",
              cpu.model.c_str(), emergent::cpu::name(cpu.vendor), cpu.l1d_bytes / 1024,
              emergent::simd::kName, label(emergent::nn::gemm_blocking()).c_str(), tokens, rounds);
  std::printf("%-14s", "GFLOP/s");
  for (const Blocking& b : candidates) std::printf(" %14s", label(b).c_str());
  std::printf("\n");
  std::vector<double> seconds(candidates.size());
  double flops = 0;
  for (std::size_t p = 0; p < products.size(); ++p) {
    std::printf("%-14s", products[p].name.c_str());
    flops += products[p].flops();
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      std::printf(" %14.1f", best[p][c]);
      seconds[c] += products[p].flops() / (best[p][c] * 1e9);
    }
    std::printf("\n");
  }
  std::printf("%-14s", "all twelve");
  for (double s : seconds) std::printf(" %14.1f", flops / s / 1e9);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int tokens = 3968, rounds = 10;
  std::string candidates = "256:in-place,256:packed,128:in-place,128:packed";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--tokens" && has_value)
      tokens = std::atoi(argv[++i]);
    else if (arg == "--rounds" && has_value)
      rounds = std::atoi(argv[++i]);
    else if (arg == "--candidates" && has_value)
      candidates = argv[++i];
    else {
      std::fprintf(stderr,
                   "gemm_blocking: unknown argument '%s' (known: --tokens N, --rounds N, "
                   "--candidates KC:packed|KC:in-place,...)\n",
                   arg.c_str());
      return 2;
    }
  }
  if (tokens < 1 || rounds < 1) {
    std::fprintf(stderr, "gemm_blocking: --tokens and --rounds must be at least 1\n");
    return 2;
  }
  try {
    return run(tokens, rounds, parse_candidates(candidates));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_blocking: %s\n", e.what());
    return 2;
  }
}
#else
int main() {
  std::fprintf(stderr, "gemm_blocking: this build has no GEMM kernel (neither AVX-512 nor AVX2)\n");
  return 1;
}
#endif
