// Google Benchmark suite of the fast CPU path's ops, at the paper's shapes: D = 128, H = 8
// (d_head = 16), F = 512, on the two token counts the paper trains on:
//   linear map:          B = 128 sequences of T = 31 positions (N = 3968 tokens), vocab 2, 1 layer
//   cellular automaton:  B = 4 sequences of T = 1024 positions (N = 4096 tokens), vocab 4, 4 layers
//
//   ./build/benchmarks/ops                                   # everything
//   ./build/benchmarks/ops --benchmark_filter=Attention --benchmark_min_time=0.5
//
// Every benchmark runs single-threaded (emergent::set_thread_count(1)) except those with a
// "threads" argument in their name. Times are wall-clock (UseRealTime), so that the rates of the
// multi-threaded runs are not inflated by counting only the main thread's CPU time.
//
// Counters:
//   items_per_second  tokens/s (SetItemsProcessed(N * iterations)); parameters/s for AdamW
//   FLOP/s            analytic FLOP count per iteration (below, per benchmark) / time
//   bytes_per_second  (elementwise ops: GELU, AdamW) the minimum memory traffic / time
//
// FLOP-count conventions (as in benchmarks/train_throughput.cpp): a GEMM of [m,k] x [k,n] is
// 2 m k n; biases, softmax, LayerNorm, GELU and the like are left out of the matmul counts. The
// backward of a Linear is two GEMMs (dx and dW), twice its forward. Causal attention counts only
// the visible triangle: query i meets i + 1 keys, so Q K^T and A V cost 4 D (i + 1) per query over
// all heads, 4 D T (T + 1) / 2 = 2 D T (T + 1) per sequence. (The AVX-512 kernels compute
// whole tiles of queries and keys, including the masked part of each diagonal tile, so they do
// somewhat more work than counted.) The elementwise benchmarks (LayerNorm, GELU, AdamW) count their
// own arithmetic per element instead, with erf, exp, sqrt and division one FLOP each.
//
// Inputs are deterministic: Philox streams of fixed seeds (core/philox.hpp), the same on every
// machine.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <emergent/core/arena.hpp>
#include <emergent/core/cpu.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/attention_head_split.hpp>
#include <emergent/mixers/causal_attention_blocked.hpp>
#include <emergent/mixers/causal_attention_direct.hpp>
#include <emergent/mixers/causal_attention_long.hpp>
#include <emergent/mixers/causal_attention_short.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/model/data_parallel.hpp>
#include <emergent/model/model.hpp>
#include <emergent/nn/cross_entropy.hpp>
#include <emergent/nn/embedding.hpp>
#include <emergent/nn/gelu.hpp>
#include <emergent/nn/gemm.hpp>
#include <emergent/nn/layernorm.hpp>
#include <emergent/nn/linear.hpp>
#include <emergent/optim/adamw.hpp>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr int kD = 128, kH = 8, kF = 512;

// The two trained models (as train_throughput's linmap_S16_4096 and ca_L4_1024).
constexpr emergent::Shape kLinearMap = {
    .vocab = 2, .d_model = kD, .heads = kH, .layers = 1, .d_ff = kF, .max_len = 31};
constexpr emergent::Shape kCellularAutomaton = {
    .vocab = 4, .d_model = kD, .heads = kH, .layers = 4, .d_ff = kF, .max_len = 1024};
using LinearMapNet = emergent::Model<emergent::DotAttention, kLinearMap>;
using CellularAutomatonNet = emergent::Model<emergent::DotAttention, kCellularAutomaton>;
using Attention = emergent::DotAttention<kLinearMap, float>;  // the mixer depends on D and H only

// ---- helpers ------------------------------------------------------------------------------

// Every benchmark sets its thread count (OpenMP loops and Eigen's GEMMs alike).
void use_threads(int threads) {
  emergent::set_thread_count(threads);
  Eigen::setNbThreads(threads);
}

// count values uniform in [-bound, bound] from Philox stream `stream` of a fixed seed.
std::vector<float> uniform_values(std::size_t count, float bound, std::uint64_t stream) {
  const emergent::PhiloxStream rng(20260425, stream);
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = bound * (2.0f * rng.uniform(i) - 1.0f);
  return out;
}

// count standard-normal values from Philox stream `stream` of a fixed seed.
std::vector<float> normal_values(std::size_t count, std::uint64_t stream) {
  const emergent::PhiloxStream rng(20260425, stream);
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(rng.normal(i));
  return out;
}

// count tokens uniform in [0, vocab).
std::vector<std::int32_t> random_tokens(std::size_t count, int vocab, std::uint64_t stream) {
  const emergent::PhiloxStream rng(20260425, stream);
  std::vector<std::int32_t> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = static_cast<std::int32_t>(rng.u32(i) % static_cast<std::uint32_t>(vocab));
  return out;
}

// The token counts of the two tasks as (B, T) arguments.
void token_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"B", "T"})
      ->Args({128, 31})
      ->Args({4, 1024})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

struct Tokens {
  int batch, length;
  std::int64_t n;
  explicit Tokens(const benchmark::State& state)
      : batch(static_cast<int>(state.range(0))),
        length(static_cast<int>(state.range(1))),
        n(static_cast<std::int64_t>(batch) * length) {}
};

// FLOP/s and tokens/s from a per-iteration FLOP count and token count.
void report(benchmark::State& state, double flops_per_iteration,
            std::int64_t tokens_per_iteration) {
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_iteration * iterations, benchmark::Counter::kIsRate);
  state.SetItemsProcessed(tokens_per_iteration * state.iterations());
}

// ---- Linear: the qkv projection, N x 128 -> 384 -----------------------------------------------

// FLOPs: 2 N D (3D)  (bias add not counted). `through_eigen`: the same product through Eigen,
// what nn::linear_forward ran before nn/gemm.hpp (and still runs in builds without AVX-512).
void linear_forward_benchmark(benchmark::State& state, bool through_eigen) {
  use_threads(1);
  const Tokens tk(state);
  const int in = kD, out = 3 * kD;
  const auto x = normal_values(tk.n * in, 1), w = uniform_values(std::size_t(out) * in, 0.0884f, 2),
             b = uniform_values(out, 0.0884f, 3);
  std::vector<float> y(tk.n * out);
  for (auto _ : state) {
    if (through_eigen) {
      emergent::nn::MatrixMap<float> Y(y.data(), tk.n, out);
      Y.noalias() = emergent::nn::ConstMatrixMap<float>(x.data(), tk.n, in) *
                    emergent::nn::ConstMatrixMap<float>(w.data(), out, in).transpose();
      Y.rowwise() += emergent::nn::ConstVectorMap<float>(b.data(), out);
    } else {
      emergent::nn::linear_forward(y.data(), x.data(), w.data(), b.data(), static_cast<int>(tk.n),
                                   in, out);
    }
    benchmark::ClobberMemory();
  }
  report(state, 2.0 * tk.n * in * out, tk.n);
}
void BM_LinearForward(benchmark::State& state) { linear_forward_benchmark(state, false); }
void BM_EigenLinearForward(benchmark::State& state) { linear_forward_benchmark(state, true); }
BENCHMARK(BM_LinearForward)->Apply(token_args);
BENCHMARK(BM_EigenLinearForward)->Apply(token_args);

// FLOPs: dx = dy W  2 N (3D) D  +  dW += dy^T x  2 N (3D) D  =  4 N D (3D)  (db not counted)
void BM_LinearBackward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  const int in = kD, out = 3 * kD;
  const auto x = normal_values(tk.n * in, 1), w = uniform_values(std::size_t(out) * in, 0.0884f, 2),
             dy = normal_values(tk.n * out, 4);
  std::vector<float> dx(tk.n * in), dw(std::size_t(out) * in, 0.0f), db(out, 0.0f);
  for (auto _ : state) {
    emergent::nn::linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                                  static_cast<int>(tk.n), in, out);
    benchmark::ClobberMemory();
  }
  report(state, 4.0 * tk.n * in * out, tk.n);
}
BENCHMARK(BM_LinearBackward)->Apply(token_args);

// ---- LayerNorm over D = 128 -------------------------------------------------------------------

// FLOPs: 8 N D  (sum 1, variance 3, normalise + affine 4 per element; the per-row sqrt and
// divisions not counted)
void BM_LayerNormForward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  const auto x = normal_values(tk.n * kD, 1), gamma = uniform_values(kD, 1.0f, 2),
             beta = uniform_values(kD, 1.0f, 3);
  std::vector<float> y(tk.n * kD), mean(tk.n), rstd(tk.n);
  for (auto _ : state) {
    emergent::nn::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                                    beta.data(), static_cast<int>(tk.n), kD);
    benchmark::ClobberMemory();
  }
  report(state, 8.0 * tk.n * kD, tk.n);
}
BENCHMARK(BM_LayerNormForward)->Apply(token_args);

// FLOPs: 19 N D  (row reductions 6, dx 8, dgamma + dbeta 5 per element)
void BM_LayerNormBackward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  const auto x = normal_values(tk.n * kD, 1), gamma = uniform_values(kD, 1.0f, 2),
             beta = uniform_values(kD, 1.0f, 3), dy = normal_values(tk.n * kD, 4);
  std::vector<float> y(tk.n * kD), mean(tk.n), rstd(tk.n), dx(tk.n * kD, 0.0f), dgamma(kD, 0.0f),
      dbeta(kD, 0.0f);
  emergent::nn::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(),
                                  beta.data(), static_cast<int>(tk.n), kD);
  for (auto _ : state) {
    emergent::nn::layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                                     mean.data(), rstd.data(), gamma.data(), static_cast<int>(tk.n),
                                     kD);
    benchmark::ClobberMemory();
  }
  report(state, 19.0 * tk.n * kD, tk.n);
}
BENCHMARK(BM_LayerNormBackward)->Apply(token_args);

// ---- GELU on the MLP hidden layer, N x F --------------------------------------------------------

// FLOPs: 5 N F  (0.5 z (1 + erf(z / sqrt 2)): 3 multiplies, 1 add, erf)
// Bytes: 8 N F  (read z, write y)
void BM_GeluForward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  const std::int64_t count = tk.n * kF;
  const auto z = normal_values(count, 1);
  std::vector<float> y(count);
  for (auto _ : state) {
    emergent::nn::gelu_forward(y.data(), z.data(), count);
    benchmark::ClobberMemory();
  }
  report(state, 5.0 * double(count), tk.n);
  state.SetBytesProcessed(state.iterations() * count * 2 * std::int64_t(sizeof(float)));
}
BENCHMARK(BM_GeluForward)->Apply(token_args);

// FLOPs: 11 N F  (Phi: 2 + erf, phi: 3 + exp, dy (Phi + z phi): 3)
// Bytes: 12 N F  (read dy and z, write dz)
void BM_GeluBackward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  const std::int64_t count = tk.n * kF;
  const auto z = normal_values(count, 1), dy = normal_values(count, 2);
  std::vector<float> dz(count);
  for (auto _ : state) {
    emergent::nn::gelu_backward(dz.data(), dy.data(), z.data(), count);
    benchmark::ClobberMemory();
  }
  report(state, 11.0 * double(count), tk.n);
  state.SetBytesProcessed(state.iterations() * count * 3 * std::int64_t(sizeof(float)));
}
BENCHMARK(BM_GeluBackward)->Apply(token_args);

// ---- MLP: fc (D -> F) + GELU + proj (F -> D), as Model::forward/backward run it
// ------------------

struct Mlp {
  std::int64_t n;
  std::vector<float> x, fc_w, fc_b, proj_w, proj_b, fc, hidden, y;          // forward
  std::vector<float> dy, d_hidden, dx, d_fc_w, d_fc_b, d_proj_w, d_proj_b;  // backward
  explicit Mlp(std::int64_t tokens)
      : n(tokens),
        x(normal_values(n * kD, 1)),
        fc_w(uniform_values(std::size_t(kF) * kD, 0.0884f, 2)),
        fc_b(uniform_values(kF, 0.0884f, 3)),
        proj_w(uniform_values(std::size_t(kD) * kF, 0.0442f, 4)),
        proj_b(uniform_values(kD, 0.0442f, 5)),
        fc(n * kF),
        hidden(n * kF),
        y(n * kD),
        dy(normal_values(n * kD, 6)),
        d_hidden(n * kF),
        dx(n * kD),
        d_fc_w(fc_w.size(), 0.0f),
        d_fc_b(kF, 0.0f),
        d_proj_w(proj_w.size(), 0.0f),
        d_proj_b(kD, 0.0f) {}
  void forward() {
    const int rows = static_cast<int>(n);
    emergent::nn::linear_forward(fc.data(), x.data(), fc_w.data(), fc_b.data(), rows, kD, kF);
    emergent::nn::gelu_forward(hidden.data(), fc.data(), n * kF);
    emergent::nn::linear_forward(y.data(), hidden.data(), proj_w.data(), proj_b.data(), rows, kF,
                                 kD);
  }
  void backward() {
    const int rows = static_cast<int>(n);
    emergent::nn::linear_backward(d_hidden.data(), d_proj_w.data(), d_proj_b.data(), dy.data(),
                                  hidden.data(), proj_w.data(), rows, kF, kD);
    emergent::nn::gelu_backward(d_hidden.data(), d_hidden.data(), fc.data(), n * kF);
    emergent::nn::linear_backward(dx.data(), d_fc_w.data(), d_fc_b.data(), d_hidden.data(),
                                  x.data(), fc_w.data(), rows, kD, kF);
  }
};

// FLOPs: 2 N D F (fc) + 2 N F D (proj) = 4 N D F  (GELU and biases not counted)
void BM_MlpForward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  Mlp mlp(tk.n);
  for (auto _ : state) {
    mlp.forward();
    benchmark::ClobberMemory();
  }
  report(state, 4.0 * tk.n * kD * kF, tk.n);
}
BENCHMARK(BM_MlpForward)->Apply(token_args);

// FLOPs: 2 x forward = 8 N D F  (dx and dW of both Linears; GELU' and biases not counted)
void BM_MlpBackward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  Mlp mlp(tk.n);
  mlp.forward();
  for (auto _ : state) {
    mlp.backward();
    benchmark::ClobberMemory();
  }
  report(state, 8.0 * tk.n * kD * kF, tk.n);
}
BENCHMARK(BM_MlpBackward)->Apply(token_args);

// ---- Dot attention (DotAttention<Shape, float>), no bias pattern ------------------------------

struct AttentionRun {
  emergent::MixerContext<float> ctx;
  emergent::Arena<float> arena;
  Attention::Activations acts;
  std::vector<float> params, grads, x, y, dy, dx;
  AttentionRun(int batch, int length)
      : ctx{batch, length, nullptr, 0.0f},
        params(uniform_values(Attention::layout.total, 0.0884f, 1)),
        grads(Attention::layout.total, 0.0f),
        x(normal_values(std::size_t(batch) * length * kD, 2)),
        y(x.size()),
        dy(normal_values(x.size(), 3)),
        dx(x.size()) {
    Attention::carve(arena, acts, batch, length);  // sizing pass
    arena.allocate_and_rewind();
    Attention::carve(arena, acts, batch, length);  // carving pass
  }
  void forward() { Attention::forward(params.data(), x.data(), y.data(), acts, ctx); }
  void backward() {
    Attention::backward(params.data(), grads.data(), x.data(), dy.data(), dx.data(), acts, ctx);
  }
};

// Forward FLOPs per sequence: projections 2 T D (3D) + 2 T D D = 8 T D^2, plus causal Q K^T and
// A V 4 D T (T + 1) / 2; softmax not counted.
double attention_forward_flops(int batch, int length) {
  const double T = length, D = kD;
  return batch * (8.0 * T * D * D + 4.0 * D * T * (T + 1.0) / 2.0);
}

void BM_AttentionForward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  AttentionRun run(tk.batch, tk.length);
  run.forward();  // untimed: the first pass page-faults the arena in (att alone is B H T^2 floats)
  for (auto _ : state) {
    run.forward();
    benchmark::ClobberMemory();
  }
  report(state, attention_forward_flops(tk.batch, tk.length), tk.n);
}
BENCHMARK(BM_AttentionForward)->Apply(token_args);

// FLOPs: 2 x forward (dx, dW of both projections; dV, dA, dQ, dK over the causal triangle)
void BM_AttentionBackward(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  AttentionRun run(tk.batch, tk.length);
  run.forward();
  for (auto _ : state) {
    run.backward();
    benchmark::ClobberMemory();
  }
  report(state, 2.0 * attention_forward_flops(tk.batch, tk.length), tk.n);
}
BENCHMARK(BM_AttentionBackward)->Apply(token_args);

// ---- One head of causal attention through one form, forward then backward --------------------

// A form of mixers/dot_attention.hpp's select_causal_attention alone (causal_attention_direct.hpp,
// causal_attention_blocked.hpp, causal_attention_short.hpp, causal_attention_long.hpp) on one head
// of d_head 16, no bias, whatever the selector would take at that length. FLOPs: the forward's
// Q K^T and A V over the causal triangle, 2 d_head T (T + 1), and twice that for the backward.
template <class Form>
void BM_CausalAttentionForm(benchmark::State& state) {
  use_threads(1);
  constexpr int Dh = 16;
  const int T = static_cast<int>(state.range(0));
  const std::size_t n = static_cast<std::size_t>(T) * Dh;
  const auto q = normal_values(n, 4), k = normal_values(n, 5), v = normal_values(n, 6),
             d_out = normal_values(n, 7);
  std::vector<float> kt(n), vt(n), out(n), dq(n), dk(n), dv(n);
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < Dh; ++d) kt[d * T + t] = k[t * Dh + d], vt[d * T + t] = v[t * Dh + d];
  std::vector<float, Eigen::aligned_allocator<float>> att(static_cast<std::size_t>(T) * T);
  const emergent::attention_head::HeadInputs<float> in{q.data(), k.data(), v.data(), kt.data(),
                                                       vt.data()};
  const float scale = 0.25f;  // 1 / sqrt(16)
  for (auto _ : state) {
    Form::forward(in, att.data(), out.data(), Dh, T, scale, nullptr, 0.0f);
    Form::backward(in, att.data(), d_out.data(), Dh, dq.data(), dk.data(), dv.data(), T, scale);
    benchmark::ClobberMemory();
  }
  report(state, 3.0 * 2.0 * Dh * T * (T + 1.0), T);
}
void short_lengths(benchmark::internal::Benchmark* b) {
  b->ArgName("T")->Arg(31)->Arg(64)->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void all_lengths(benchmark::internal::Benchmark* b) {
  short_lengths(b);
  b->Arg(1024);
}
BENCHMARK_TEMPLATE(BM_CausalAttentionForm, emergent::CausalAttentionDirect<float, 16>)
    ->Apply(all_lengths);
BENCHMARK_TEMPLATE(BM_CausalAttentionForm, emergent::CausalAttentionBlocked<float, 16>)
    ->Apply(all_lengths);
#if EMERGENT_SIMD_LANES > 0
BENCHMARK_TEMPLATE(BM_CausalAttentionForm, emergent::CausalAttentionShort<float, 16>)
    ->Apply(short_lengths);
BENCHMARK_TEMPLATE(BM_CausalAttentionForm, emergent::CausalAttentionLong<float, 16>)
    ->Apply(all_lengths);
#endif

// ---- Embedding + head + cross-entropy, forward and backward -----------------------------------

// One iteration: embedding forward, head logits = x W_head^T (no bias; the transformer layers
// and final LayerNorm are skipped), cross-entropy forward and backward (weight 1 at every
// position), head backward (dx and dW) and embedding backward (scatter into both tables).
// FLOPs: head forward 2 N D V + backward 4 N D V = 6 N D V  (tiny: V = 2 or 4, so this is
// memory- and overhead-bound; the embedding, softmax and loss are not counted).
void BM_EmbeddingAndHead(benchmark::State& state) {
  use_threads(1);
  const Tokens tk(state);
  const int V = static_cast<int>(state.range(2)), B = tk.batch, T = tk.length;
  const int rows = static_cast<int>(tk.n);
  const auto token_table = normal_values(std::size_t(V) * kD, 1),
             position_table = normal_values(std::size_t(T) * kD, 2),
             head = uniform_values(std::size_t(V) * kD, 0.0884f, 3);
  const auto inputs = random_tokens(tk.n, V, 4), targets = random_tokens(tk.n, V, 5);
  const std::vector<float> weights(T, 1.0f);
  std::vector<float> x(tk.n * kD), logits(tk.n * V), probs(tk.n * V), ce(tk.n), correct(tk.n),
      dlogits(tk.n * V), dx(tk.n * kD), d_head(head.size(), 0.0f),
      d_token(token_table.size(), 0.0f), d_position(position_table.size(), 0.0f);
  const float scale = 1.0f / static_cast<float>(tk.n);
  for (auto _ : state) {
    emergent::nn::embedding_forward(x.data(), inputs.data(), token_table.data(),
                                    position_table.data(), B, T, kD);
    emergent::nn::linear_forward<float>(logits.data(), x.data(), head.data(), nullptr, rows, kD, V);
    emergent::nn::cross_entropy_forward(probs.data(), ce.data(), correct.data(), logits.data(),
                                        targets.data(), tk.n, V);
    emergent::nn::cross_entropy_backward(dlogits.data(), probs.data(), targets.data(),
                                         weights.data(), tk.n, T, V, scale);
    emergent::nn::linear_backward<float>(dx.data(), d_head.data(), nullptr, dlogits.data(),
                                         x.data(), head.data(), rows, kD, V);
    emergent::nn::embedding_backward(d_token.data(), d_position.data(), dx.data(), inputs.data(), B,
                                     T, kD);
    benchmark::ClobberMemory();
  }
  report(state, 6.0 * tk.n * kD * V, tk.n);
}
BENCHMARK(BM_EmbeddingAndHead)
    ->ArgNames({"B", "T", "V"})
    ->Args({128, 31, 2})
    ->Args({4, 1024, 4})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ---- AdamW over a whole model's parameters -----------------------------------------------------

template <class Net>
std::vector<emergent::DecayRange> decay_ranges() {
  std::vector<emergent::DecayRange> ranges;
  for (const auto& t : Net::tensors()) ranges.push_back({t.offset, t.size, t.weight_decay});
  return ranges;
}

// Items: parameters (items/s = parameters/s). Arg: layers (1: linear-map model, 4: CA model).
// FLOPs: 17 per parameter (gradient norm 2; clip 1, m 3, v 4, decay + update 7).
// Bytes: 32 per parameter (g read twice; p, m, v read and written).
void BM_AdamWStep(benchmark::State& state) {
  use_threads(1);
  const bool ca = state.range(0) == 4;
  const std::size_t count =
      ca ? CellularAutomatonNet::parameter_count : LinearMapNet::parameter_count;
  emergent::AdamW<float> optimizer(
      emergent::AdamWConfig{},
      ca ? decay_ranges<CellularAutomatonNet>() : decay_ranges<LinearMapNet>(), count);
  auto params = uniform_values(count, 0.0884f, 1);
  const auto grads = normal_values(count, 2);
  for (auto _ : state) {
    benchmark::DoNotOptimize(optimizer.step(params, grads, 1e-3));
    benchmark::ClobberMemory();
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["FLOP/s"] =
      benchmark::Counter(17.0 * double(count) * iterations, benchmark::Counter::kIsRate);
  state.SetItemsProcessed(static_cast<std::int64_t>(count) * state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(count) * 32 * state.iterations());
  state.SetLabel(std::to_string(count) + " parameters");
}
BENCHMARK(BM_AdamWStep)
    ->ArgName("layers")
    ->Arg(1)
    ->Arg(4)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ---- A whole training step: DataParallelStep::run + AdamW
// ----------------------------------------

// FLOPs per token as in train_throughput.cpp: 6 P + 6 L D (T + 1), P = L (4 D^2 + 2 D F) + V D.
template <class Net>
void train_step(benchmark::State& state, int batch, int length, int threads) {
  use_threads(threads);
  constexpr int V = Net::V, L = Net::L, D = Net::D, F = Net::F;
  const std::size_t N = static_cast<std::size_t>(batch) * length;
  std::vector<float> params(Net::parameter_count), grads(Net::parameter_count);
  Net::init(params, 1234);
  emergent::AdamW<float> optimizer(emergent::AdamWConfig{}, decay_ranges<Net>(),
                                   Net::parameter_count);
  emergent::DataParallelStep<Net> step(threads);
  // A few pre-drawn batches of random tokens, cycled, so that every step sees new data.
  constexpr int kBatches = 4;
  std::vector<std::vector<std::int32_t>> inputs, targets;
  for (int k = 0; k < kBatches; ++k) {
    inputs.push_back(random_tokens(N, V, 100 + 2 * k));
    targets.push_back(random_tokens(N, V, 101 + 2 * k));
  }
  const std::vector<float> loss_weights(length, 1.0f);
  auto one_step = [&](int k) {
    const emergent::ForwardInput in{batch, length, inputs[k], targets[k], loss_weights, {}, 0.0f};
    const double loss = step.run(params, grads, in);
    optimizer.step(params, grads, 1e-3);
    return loss;
  };
  // Untimed warm-up: the first step sizes and page-faults the workspaces (as in training, where
  // they are reused from step to step).
  double loss = one_step(kBatches - 1);
  int k = 0;
  for (auto _ : state) {
    loss = one_step(k);
    benchmark::ClobberMemory();
    k = (k + 1) % kBatches;
  }
  const double matmul_params = double(L) * (4.0 * D * D + 2.0 * D * F) + double(V) * D;
  const double flops_per_token = 6.0 * matmul_params + 6.0 * L * D * (length + 1.0);
  report(state, flops_per_token * double(N), static_cast<std::int64_t>(N));
  state.counters["loss"] = loss;
  state.SetLabel(std::string(L == 1 ? "linear map" : "cellular automaton") +
                 " B=" + std::to_string(batch) + " T=" + std::to_string(length));
}

// Args: layers (1: linear-map model, B = 128, T = 31; 4: CA model, B = 4, T = 1024), threads.
void BM_TrainStep(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  if (state.range(0) == 1)
    train_step<LinearMapNet>(state, 128, 31, threads);
  else
    train_step<CellularAutomatonNet>(state, 4, 1024, threads);
}
BENCHMARK(BM_TrainStep)
    ->ArgNames({"layers", "threads"})
    ->ArgsProduct({{1, 4}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

// Google Benchmark's main, with the CPU model and the kernel choices in the context it prints.
int main(int argc, char** argv) {
  benchmark::AddCustomContext("cpu", emergent::cpu::info().model);
  benchmark::AddCustomContext("gemm", emergent::nn::gemm_description());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
