// Mamba-1 block: input projection, causal depthwise conv, selective state-space scan with
// input-dependent step size, SiLU gate, output projection (Gu & Dao, arXiv:2312.00752; the
// code of state-spaces/mamba, mamba_simple.py and selective_scan_ref; research notes §A1).
//
// Sizes: D = d_model, E = expand D (d_inner), N = d_state, K = d_conv, R = dt_rank = ceil(D/16),
// P = R + 2N. Defaults (Mamba's): expand 2, d_state 16, d_conv 4. Shape::heads is not used.
//
//   [xc | z]      = x in_proj^T                                   x [B,T,D] -> [B,T,E] each
//   c[t,e]        = conv_b[e] + sum_j conv_w[e,j] xc[t-K+1+j, e]  (xc = 0 before t = 0)
//   u             = SiLU(c)                                       [B,T,E]
//   [dl | Bm | Cm]= u x_proj^T                                    [B,T,R], [B,T,N], [B,T,N]
//   delta         = softplus(dl dt_proj^T + dt_b)                 [B,T,E]
//   A             = -exp(A_log)                                   [E,N]
//   h[t,e,n]      = exp(delta[t,e] A[e,n]) h[t-1,e,n] + delta[t,e] Bm[t,n] u[t,e],  h[-1] = 0
//   y[t,e]        = sum_n Cm[t,n] h[t,e,n] + Dskip[e] u[t,e]
//   out           = (y * SiLU(z)) out_proj^T                      [B,T,D]
//
// Backward (§A1.3, verified there against finite differences), with g = dout out_proj:
//   dy = g SiLU(z),  dz = g y SiLU'(z),  SiLU'(v) = s(v)(1 + v(1 - s(v))),  s = sigmoid
//   G[t] = dy[t,e] Cm[t,n] + exp(delta[t+1,e] A[e,n]) G[t+1],  G[T] = 0   (adjoint of h[t])
//   dCm[t,n] = sum_e dy[t,e] h[t,e,n]          dBm[t,n] = sum_e G[t,e,n] delta[t,e] u[t,e]
//   du[t,e]  = Dskip[e] dy[t,e] + delta[t,e] sum_n G[t,e,n] Bm[t,n]   (+ x_proj's share)
//   ddelta[t,e] = sum_n G (Bm[t,n] u[t,e] + A[e,n] exp(delta A) h[t-1,e,n])
//   dA[e,n]  = sum_t G delta exp(delta A) h[t-1],  dA_log = dA * A,  dDskip = sum_t dy u
//   d(dl dt_proj^T + dt_b) = ddelta * sigmoid(.),  then the Linear backwards, and
//   dc = du SiLU'(c),  dxc[s,e] = sum_j conv_w[e,j] dc[s+K-1-j, e],  dconv_w[e,j] = sum_t dc[t,e]
//   xc[t-K+1+j,e].
//
// Parameters (names as Mamba's state dict; conv1d.weight is stored [E, K], PyTorch's [E, 1, K]):
//   in_proj.weight [2E,D]   Linear default, no bias (Mamba's bias=False)
//   conv1d.weight [E,K], conv1d.bias [E]   PyTorch Conv1d default U(+-1/sqrt(K)) (fan_in = K)
//   x_proj.weight [P,E]     Linear default, no bias
//   dt_proj.weight [E,R]    U(+-R^-1/2) (Mamba's dt_init "random", dt_scale 1 = Linear default)
//   dt_proj.bias [E]        inverse softplus of dt = exp(U(log 1e-3, log 1e-1)), floored at 1e-4
//   A_log [E,N]             log(1..N) in every row (S4D-real: A = -[1..N])
//   D [E]                   ones
//   out_proj.weight [D,E]   Linear default, no bias
// Weight decay on the four matrices (in/x/dt/out proj) and the conv weight; none on A_log, D,
// dt_proj.bias and conv1d.bias (Mamba's _no_weight_decay on A_log and D; biases by convention).
//
// Deviations from the reference code, and why:
//   - out_proj keeps the Linear default; mixer_seq_simple's GPT-2 rescale by 1/sqrt(n_layer)
//     belongs to Mamba's own model init, and Model here is PyTorch-default throughout.
//   - Discretisation as the code (and §A1.1): A-bar = exp(delta A), B-bar = delta B (not ZOH).
//   - No fused residual/RMSNorm: Model's pre-LN block wraps the mixer like every other mixer.
//
// Fast path. Projections are Eigen GEMMs over all B*T rows; the conv, softplus and gate are
// row-wise array loops. The scan runs per (sequence, block of W channels), vectorised over the
// channels (W = 32 when it divides E) with the N states of each channel in registers/L1; Eigen's
// vectorised exp computes exp(delta A) (delta >= 0 and A < 0, so it never overflows; softplus is
// max(v,0) + log1p(exp(-|v|)) and sigmoid 1/(1+exp(-v)), both finite for any finite v).
// Memory: the forward keeps the state only every kTimeChunk = 16 tokens (E N / 16 values per
// token); the backward re-runs the scan of each chunk from its checkpoint, then walks it in
// reverse. Per token the forward keeps 8E + P + EN/16 values and the backward adds 5E + P +
// 2N E/W of scratch: 9.4 KB + 6.3 KB in float at D = 128 (attention's T x T probabilities
// alone are 4 H T bytes per token, 32 KB at T = 1024). Reductions over channels (dBm, dCm) and over
// sequences (dA_log, D) go through per-block partial buffers summed in a fixed order, so results do
// not depend on thread count.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <emergent/core/layout.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/nn/linear.hpp>
#include <emergent/nn/softplus.hpp>
#include <memory>
#include <string_view>
#include <vector>

namespace emergent {

template <Shape S, class Real = float, int StateSize = 16, int Expand = 2, int ConvWidth = 4>
class MambaMixer {
 public:
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  static constexpr std::string_view name = "mamba";
  static constexpr int D = S.d_model;
  static constexpr int E = Expand * D;     // d_inner
  static constexpr int N = StateSize;      // d_state
  static constexpr int K = ConvWidth;      // d_conv
  static constexpr int R = (D + 15) / 16;  // dt_rank "auto" = ceil(D / 16)
  static constexpr int P = R + 2 * N;      // x_proj width: [dl | Bm | Cm]
  static_assert(N >= 1 && Expand >= 1 && K >= 1,
                "Mamba: d_state, expand and d_conv must be positive");

  // Mamba's dt init range (mamba_simple.py; nn/softplus.hpp draws from it).
  static constexpr double dt_min = nn::kStepSizeMin, dt_max = nn::kStepSizeMax;

  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"in_proj.weight", 2 * E, D, true},
      TensorSpec{"conv1d.weight", E, K, true},
      TensorSpec{"conv1d.bias", 0, E, false, Init::linear, K},
      TensorSpec{"x_proj.weight", P, E, true},
      TensorSpec{"dt_proj.weight", E, R, true},
      TensorSpec{"dt_proj.bias", 0, E, false, Init::custom},
      TensorSpec{"A_log", E, N, false, Init::custom},
      TensorSpec{"D", 0, E, false, Init::ones},
      TensorSpec{"out_proj.weight", D, E, true},
  });
  static constexpr std::size_t in_weight = offset_of(layout, "in_proj.weight");
  static constexpr std::size_t conv_weight = offset_of(layout, "conv1d.weight");
  static constexpr std::size_t conv_bias = offset_of(layout, "conv1d.bias");
  static constexpr std::size_t x_weight = offset_of(layout, "x_proj.weight");
  static constexpr std::size_t dt_weight = offset_of(layout, "dt_proj.weight");
  static constexpr std::size_t dt_bias = offset_of(layout, "dt_proj.bias");
  static constexpr std::size_t a_log = offset_of(layout, "A_log");
  static constexpr std::size_t d_skip = offset_of(layout, "D");
  static constexpr std::size_t out_weight = offset_of(layout, "out_proj.weight");

  // The scan's time chunk: the forward keeps h every kTimeChunk tokens, the backward recomputes
  // the states inside a chunk from there.
  static constexpr int kTimeChunk = 16;
  // Channels per scan work item, vectorised: the largest of 32, 16, ..., 1 that divides E.
  static constexpr int W = E % 32 == 0   ? 32
                           : E % 16 == 0 ? 16
                           : E % 8 == 0  ? 8
                           : E % 4 == 0  ? 4
                           : E % 2 == 0  ? 2
                                         : 1;
  static constexpr int Blocks = E / W;

  static constexpr int time_chunks(int length) { return (length + kTimeChunk - 1) / kTimeChunk; }

  struct Activations {
    Real* xz = nullptr;              // [B*T, 2E] in_proj output: xc (conv input) | z (gate)
    Real* conv = nullptr;            // [B*T, E] conv output c, before SiLU
    Real* u = nullptr;               // [B*T, E] SiLU(c), the scan input
    Real* dbc = nullptr;             // [B*T, P] x_proj output: dl | Bm | Cm
    Real* dt_pre = nullptr;          // [B*T, E] dl dt_proj^T + dt_b
    Real* delta = nullptr;           // [B*T, E] softplus(dt_pre)
    Real* y = nullptr;               // [B*T, E] scan output including Dskip u
    Real* gated = nullptr;           // [B*T, E] y SiLU(z), the out_proj input
    Real* states = nullptr;          // [B, chunks-1, N, E] h after tokens 16k-1, k = 1..chunks-1
    Real* rates = nullptr;           // [N, E] A = -exp(A_log), transposed
    Real* d_y = nullptr;             // [B*T, E] backward: dL/d gated, then dL/dy
    Real* d_xz = nullptr;            // [B*T, 2E] backward: dL/dxc | dL/dz
    Real* d_u = nullptr;             // [B*T, E] backward: dL/du, then dL/dc
    Real* d_dt_pre = nullptr;        // [B*T, E] backward: dL/delta, then dL/dt_pre
    Real* d_dbc = nullptr;           // [B*T, P] backward
    Real* d_bc_partial = nullptr;    // [B, Blocks, T, 2N] dBm | dCm of each channel block
    Real* d_a_partial = nullptr;     // [B, N, E] dA of each sequence
    Real* d_skip_partial = nullptr;  // [B, E] dDskip of each sequence
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t tokens = static_cast<std::size_t>(batch) * length;
    acts.xz = arena.take(tokens * 2 * E);
    acts.conv = arena.take(tokens * E);
    acts.u = arena.take(tokens * E);
    acts.dbc = arena.take(tokens * P);
    acts.dt_pre = arena.take(tokens * E);
    acts.delta = arena.take(tokens * E);
    acts.y = arena.take(tokens * E);
    acts.gated = arena.take(tokens * E);
    acts.states = arena.take(static_cast<std::size_t>(batch) * (time_chunks(length) - 1) * N * E);
    acts.rates = arena.take(static_cast<std::size_t>(N) * E);
    acts.d_y = arena.take(tokens * E);
    acts.d_xz = arena.take(tokens * 2 * E);
    acts.d_u = arena.take(tokens * E);
    acts.d_dt_pre = arena.take(tokens * E);
    acts.d_dbc = arena.take(tokens * P);
    acts.d_bc_partial = arena.take(tokens * Blocks * 2 * N);
    acts.d_a_partial = arena.take(static_cast<std::size_t>(batch) * N * E);
    acts.d_skip_partial = arena.take(static_cast<std::size_t>(batch) * E);
  }

  // Fills dt_proj.bias and A_log (the rest is Init::linear / Init::ones, done by Model::init).
  static void init(Real* params, std::uint64_t seed, std::size_t base, int /*layer*/) {
    for (int e = 0; e < E; ++e)
      for (int n = 0; n < N; ++n)
        params[a_log + static_cast<std::size_t>(e) * N + n] = Real(std::log(double(n + 1)));
    const PhiloxStream stream(seed, stream_id_from_name("mamba.init"));
    for (int e = 0; e < E; ++e)
      params[dt_bias + e] = Real(nn::initial_step_bias(stream.uniform(base + dt_bias + e)));
  }

  // y[B*T,D] <- x[B*T,D]
  static void forward(const Real* params, const Real* x, Real* out, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length, rows = B * T;
    nn::linear_forward(acts.xz, x, params + in_weight, static_cast<const Real*>(nullptr), rows, D,
                       2 * E);
    const std::array<Real, K* E> conv_w = transposed_conv_weight(params);
    parallel_for(rows, [&](std::int64_t row) {
      conv_row(params, conv_w.data(), acts.xz, acts.conv + row * E, row, static_cast<int>(row % T));
      const ConstArrayMap c(acts.conv + row * E);
      ArrayMap(acts.u + row * E) = c / (Real(1) + (-c).exp());
    });
    nn::linear_forward(acts.dbc, acts.u, params + x_weight, static_cast<const Real*>(nullptr), rows,
                       E, P);
    MatrixMap(acts.dt_pre, rows, E).noalias() =
        ConstStridedMap(acts.dbc, rows, R, Stride(P)) *
        ConstMatrixMap(params + dt_weight, E, R).transpose();
    parallel_for(rows, [&](std::int64_t row) {
      ArrayMap pre(acts.dt_pre + row * E);
      pre += ConstArrayMap(params + dt_bias);
      ArrayMap(acts.delta + row * E) = pre.max(Real(0)) + (-pre.abs()).exp().log1p();  // softplus
    });
    decay_rates(params, acts.rates);
    parallel_for(static_cast<std::int64_t>(B) * Blocks, [&](std::int64_t item) {
      scan_forward(params, acts, static_cast<int>(item / Blocks), static_cast<int>(item % Blocks),
                   T);
    });
    parallel_for(rows, [&](std::int64_t row) {
      const ConstArrayMap z(acts.xz + row * 2 * E + E);
      ArrayMap(acts.gated + row * E) = ConstArrayMap(acts.y + row * E) * z / (Real(1) + (-z).exp());
    });
    nn::linear_forward(out, acts.gated, params + out_weight, static_cast<const Real*>(nullptr),
                       rows, E, D);
  }

  // dx[B*T,D] = dL/dx; grads += dL/dparams   <- x[B*T,D], dy[B*T,D]
  static void backward(const Real* params, Real* grads, const Real* x, const Real* dout, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length, rows = B * T;
    // Output projection and gate: d_y <- dL/d gated, then dL/dy; d_xz[:, E:] <- dL/dz.
    nn::linear_backward(acts.d_y, grads + out_weight, static_cast<Real*>(nullptr), dout, acts.gated,
                        params + out_weight, rows, E, D);
    parallel_for(rows, [&](std::int64_t row) {
      const ConstArrayMap z(acts.xz + row * 2 * E + E), y(acts.y + row * E);
      ArrayMap g(acts.d_y + row * E);
      const Array s = Real(1) / (Real(1) + (-z).exp());
      ArrayMap(acts.d_xz + row * 2 * E + E) = g * y * s * (Real(1) + z * (Real(1) - s));
      g *= z * s;
    });
    // Selective scan: d_u (scan share), d_delta, and per-block partials of dBm, dCm, dA, dDskip.
    decay_rates(params, acts.rates);
    parallel_for(static_cast<std::int64_t>(B) * Blocks, [&](std::int64_t item) {
      scan_backward(params, acts, static_cast<int>(item / Blocks), static_cast<int>(item % Blocks),
                    T);
    });
    parallel_for(rows, [&](std::int64_t row) {
      const std::int64_t b = row / T, t = row % T;
      Real sum[2 * N] = {};
      for (int block = 0; block < Blocks; ++block) {
        const Real* part = acts.d_bc_partial + ((b * Blocks + block) * T + t) * 2 * N;
        for (int i = 0; i < 2 * N; ++i) sum[i] += part[i];
      }
      std::copy(sum, sum + 2 * N, acts.d_dbc + row * P + R);
      const ConstArrayMap pre(acts.dt_pre + row * E);
      ArrayMap(acts.d_dt_pre + row * E) /= Real(1) + (-pre).exp();  // softplus' = sigmoid
    });
    for (int b = 0; b < B; ++b) {
      for (int e = 0; e < E; ++e)
        grads[d_skip + e] += acts.d_skip_partial[static_cast<std::size_t>(b) * E + e];
    }
    for (int e = 0; e < E; ++e)
      for (int n = 0; n < N; ++n) {
        Real dA = 0;
        for (int b = 0; b < B; ++b)
          dA += acts.d_a_partial[(static_cast<std::size_t>(b) * N + n) * E + e];
        grads[a_log + static_cast<std::size_t>(e) * N + n] +=
            dA * acts.rates[static_cast<std::size_t>(n) * E + e];  // dA_log = dA A
      }
    // dt_proj: d_dbc[:, :R] = d_dt_pre dt_proj; grads += d_dt_pre^T dl, column sums.
    const ConstMatrixMap d_pre(acts.d_dt_pre, rows, E);
    StridedMap(acts.d_dbc, rows, R, Stride(P)).noalias() =
        d_pre * ConstMatrixMap(params + dt_weight, E, R);
    MatrixMap(grads + dt_weight, E, R).noalias() +=
        d_pre.transpose() * ConstStridedMap(acts.dbc, rows, R, Stride(P));
    VectorMap(grads + dt_bias, E) += d_pre.colwise().sum();
    // x_proj: d_u += d_dbc x_proj; grads += d_dbc^T u.
    const ConstMatrixMap d_dbc(acts.d_dbc, rows, P);
    MatrixMap(acts.d_u, rows, E).noalias() += d_dbc * ConstMatrixMap(params + x_weight, P, E);
    MatrixMap(grads + x_weight, P, E).noalias() +=
        d_dbc.transpose() * ConstMatrixMap(acts.u, rows, E);
    // SiLU, then the conv: d_u <- dL/dc; d_xz[:, :E] <- dL/dxc; conv grads per channel block.
    parallel_for(rows, [&](std::int64_t row) {
      const ConstArrayMap c(acts.conv + row * E);
      const Array s = Real(1) / (Real(1) + (-c).exp());
      ArrayMap(acts.d_u + row * E) *= s * (Real(1) + c * (Real(1) - s));
    });
    const std::array<Real, K* E> conv_w = transposed_conv_weight(params);
    parallel_for(rows, [&](std::int64_t row) {
      const int t = static_cast<int>(row % T);
      Real* d_xc = acts.d_xz + row * 2 * E;
      std::fill(d_xc, d_xc + E, Real(0));
      for (int j = 0; j < K; ++j) {  // xc[t] feeds c[t + K-1-j] through tap j
        const int target = t + K - 1 - j;
        if (target >= T) continue;
        const Real* dc = acts.d_u + (row + K - 1 - j) * E;
        const Real* w = conv_w.data() + j * E;
        for (int e = 0; e < E; ++e) d_xc[e] += w[e] * dc[e];
      }
    });
    parallel_for(Blocks, [&](std::int64_t block) {
      conv_weight_backward(grads, acts, static_cast<int>(block) * W, B, T);
    });
    nn::linear_backward(dx, grads + in_weight, static_cast<Real*>(nullptr), acts.d_xz, x,
                        params + in_weight, rows, D, 2 * E);
  }

  // Token-by-token decoding of one sequence: the last K-1 conv inputs and the SSM state.
  struct State {
    std::vector<Real>
        window;           // [K-1, E] xc of the previous K-1 tokens, oldest first (0 at the start)
    std::vector<Real> h;  // [E, N]
  };

  static State initial_state() {
    return State{std::vector<Real>(static_cast<std::size_t>(K - 1) * E, Real(0)),
                 std::vector<Real>(static_cast<std::size_t>(E) * N, Real(0))};
  }

  // y_t[D] <- x_t[D], advancing `state` by one token.
  static void step(const Real* params, const Real* x_t, Real* y_t, State& state) {
    std::vector<Real> xz(2 * E), u(E), dbc(P), gated(E);
    for (int o = 0; o < 2 * E; ++o) {
      Real s = 0;
      for (int i = 0; i < D; ++i)
        s += params[in_weight + static_cast<std::size_t>(o) * D + i] * x_t[i];
      xz[o] = s;
    }
    for (int e = 0; e < E; ++e) {
      Real c = params[conv_bias + e];
      for (int j = 0; j < K - 1; ++j)
        c += params[conv_weight + e * K + j] * state.window[static_cast<std::size_t>(j) * E + e];
      c += params[conv_weight + e * K + K - 1] * xz[e];
      u[e] = c / (Real(1) + std::exp(-c));
    }
    if constexpr (K > 1) {
      std::copy(state.window.begin() + E, state.window.end(), state.window.begin());
      std::copy(xz.begin(), xz.begin() + E, state.window.end() - E);
    }
    for (int o = 0; o < P; ++o) {
      Real s = 0;
      for (int e = 0; e < E; ++e)
        s += params[x_weight + static_cast<std::size_t>(o) * E + e] * u[e];
      dbc[o] = s;
    }
    const Real* Bm = dbc.data() + R;
    const Real* Cm = Bm + N;
    for (int e = 0; e < E; ++e) {
      Real pre = 0;
      for (int r = 0; r < R; ++r) pre += dbc[r] * params[dt_weight + e * R + r];
      pre += params[dt_bias + e];
      const Real delta = nn::softplus(pre);
      const Real delta_u = delta * u[e];
      Real y = params[d_skip + e] * u[e];
      for (int n = 0; n < N; ++n) {
        Real& h = state.h[static_cast<std::size_t>(e) * N + n];
        const Real A = -std::exp(params[a_log + e * N + n]);
        h = std::exp(delta * A) * h + delta_u * Bm[n];
        y += Cm[n] * h;
      }
      const Real z = xz[E + e];
      gated[e] = y * z / (Real(1) + std::exp(-z));
    }
    for (int o = 0; o < D; ++o) {
      Real s = 0;
      for (int e = 0; e < E; ++e)
        s += params[out_weight + static_cast<std::size_t>(o) * E + e] * gated[e];
      y_t[o] = s;
    }
  }

 private:
  using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using MatrixMap = Eigen::Map<RowMatrix>;
  using ConstMatrixMap = Eigen::Map<const RowMatrix>;
  using Stride = Eigen::OuterStride<>;
  using StridedMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
  using ConstStridedMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
  using VectorMap = Eigen::Map<Eigen::Matrix<Real, 1, Eigen::Dynamic>>;
  // One row of E channels (fixed size: row temporaries live on the stack).
  using Array = Eigen::Array<Real, E, 1>;
  using ArrayMap = Eigen::Map<Array>;
  using ConstArrayMap = Eigen::Map<const Array>;
  // W channels of one scan work item.
  using Vec = Eigen::Array<Real, W, 1>;
  using VecMap = Eigen::Map<Vec>;
  using ConstVecMap = Eigen::Map<const Vec>;

  // conv1d.weight [E, K] -> [K, E], so that the conv loops run over contiguous channels.
  static std::array<Real, K * E> transposed_conv_weight(const Real* params) {
    std::array<Real, K * E> w;
    for (int e = 0; e < E; ++e)
      for (int j = 0; j < K; ++j) w[j * E + e] = params[conv_weight + e * K + j];
    return w;
  }

  // c[row] = conv_b + sum_j w[j] xc[row - (K-1-j)] over taps inside the sequence (t = row's
  // position).
  static void conv_row(const Real* params, const Real* w, const Real* xz, Real* c, std::int64_t row,
                       int t) {
    std::copy(params + conv_bias, params + conv_bias + E, c);
    for (int j = 0; j < K; ++j) {
      const int back = K - 1 - j;
      if (t < back) continue;
      const Real* xc = xz + (row - back) * 2 * E;
      const Real* wj = w + j * E;
      for (int e = 0; e < E; ++e) c[e] += wj[e] * xc[e];
    }
  }

  // rates [N, E] = -exp(A_log)^T: channels contiguous for the scan.
  static void decay_rates(const Real* params, Real* rates) {
    for (int e = 0; e < E; ++e)
      for (int n = 0; n < N; ++n)
        rates[static_cast<std::size_t>(n) * E + e] =
            -std::exp(params[a_log + static_cast<std::size_t>(e) * N + n]);
  }

  // Checkpoint k (1 .. chunks-1): h after token k*kTimeChunk - 1, [N, E] per sequence.
  static Real* checkpoint(const Activations& acts, int b, int k, int T) {
    return acts.states + (static_cast<std::size_t>(b) * (time_chunks(T) - 1) + (k - 1)) * N * E;
  }

  // The scan of sequence b, channels [block*W, block*W + W): y, and the chunk checkpoints.
  static void scan_forward(const Real* params, const Activations& acts, int b, int block, int T) {
    const int e0 = block * W;
    Vec A[N], h[N];
    for (int n = 0; n < N; ++n)
      A[n] = ConstVecMap(acts.rates + static_cast<std::size_t>(n) * E + e0);
    for (Vec& v : h) v.setZero();
    const ConstVecMap skip(params + d_skip + e0);
    for (int t = 0; t < T; ++t) {
      const std::size_t row = static_cast<std::size_t>(b) * T + t;
      const ConstVecMap delta(acts.delta + row * E + e0), u(acts.u + row * E + e0);
      const Real* Bm = acts.dbc + row * P + R;
      const Real* Cm = Bm + N;
      const Vec delta_u = delta * u;
      Vec y = skip * u;
      for (int n = 0; n < N; ++n) {
        h[n] = (delta * A[n]).exp() * h[n] + delta_u * Bm[n];
        y += Cm[n] * h[n];
      }
      VecMap(acts.y + row * E + e0) = y;
      if ((t + 1) % kTimeChunk == 0 && t + 1 < T) {
        Real* saved = checkpoint(acts, b, (t + 1) / kTimeChunk, T);
        for (int n = 0; n < N; ++n) VecMap(saved + static_cast<std::size_t>(n) * E + e0) = h[n];
      }
    }
  }

  // The reverse scan of sequence b, channels [block*W, block*W + W), chunk by chunk from the
  // last: re-run the chunk's forward from its checkpoint (keeping h and exp(delta A)), then walk
  // it backwards carrying exp(delta[t+1] A) G[t+1].
  static void scan_backward(const Real* params, const Activations& acts, int b, int block, int T) {
    const int e0 = block * W;
    Vec A[N], carry[N], dA[N];
    for (int n = 0; n < N; ++n)
      A[n] = ConstVecMap(acts.rates + static_cast<std::size_t>(n) * E + e0);
    for (int n = 0; n < N; ++n) {
      carry[n].setZero();
      dA[n].setZero();
    }
    Vec d_skip_sum = Vec::Zero();
    const ConstVecMap skip(params + d_skip + e0);
    // h[t0-1 .. t1-1] and exp(delta[t] A) of one chunk, N per token (left uninitialised: written
    // first).
    const std::unique_ptr<Vec[]> states(new Vec[static_cast<std::size_t>(kTimeChunk + 1) * N]);
    const std::unique_ptr<Vec[]> decays(new Vec[static_cast<std::size_t>(kTimeChunk) * N]);
    for (int k = time_chunks(T) - 1; k >= 0; --k) {
      const int t0 = k * kTimeChunk, steps = std::min(kTimeChunk, T - t0);
      for (int n = 0; n < N; ++n) {
        if (k == 0)
          states[n].setZero();
        else
          states[n] = ConstVecMap(checkpoint(acts, b, k, T) + static_cast<std::size_t>(n) * E + e0);
      }
      for (int i = 0; i < steps; ++i) {
        const std::size_t row = static_cast<std::size_t>(b) * T + t0 + i;
        const ConstVecMap delta(acts.delta + row * E + e0), u(acts.u + row * E + e0);
        const Real* Bm = acts.dbc + row * P + R;
        const Vec delta_u = delta * u;
        for (int n = 0; n < N; ++n) {
          Vec& decay = decays[static_cast<std::size_t>(i) * N + n];
          decay = (delta * A[n]).exp();
          states[static_cast<std::size_t>(i + 1) * N + n] =
              decay * states[static_cast<std::size_t>(i) * N + n] + delta_u * Bm[n];
        }
      }
      for (int i = steps - 1; i >= 0; --i) {
        const int t = t0 + i;
        const std::size_t row = static_cast<std::size_t>(b) * T + t;
        const ConstVecMap delta(acts.delta + row * E + e0), u(acts.u + row * E + e0);
        const ConstVecMap dy(acts.d_y + row * E + e0);
        const Real* Bm = acts.dbc + row * P + R;
        const Real* Cm = Bm + N;
        Real* d_bc =
            acts.d_bc_partial + ((static_cast<std::size_t>(b) * Blocks + block) * T + t) * 2 * N;
        const Vec delta_u = delta * u;
        Vec d_delta = Vec::Zero(),
            g_b = Vec::Zero();  // sum_n G (Bm u + A decay h[t-1]); sum_n G Bm
        for (int n = 0; n < N; ++n) {
          const Vec& decay = decays[static_cast<std::size_t>(i) * N + n];
          const Vec& before = states[static_cast<std::size_t>(i) * N + n];
          const Vec& after = states[static_cast<std::size_t>(i + 1) * N + n];
          const Vec G = dy * Cm[n] + carry[n];
          const Vec decayed = decay * before;
          d_bc[n] = (G * delta_u).sum();     // dBm
          d_bc[N + n] = (dy * after).sum();  // dCm
          g_b += G * Bm[n];
          d_delta += G * (Bm[n] * u + A[n] * decayed);
          dA[n] += G * delta * decayed;
          carry[n] = decay * G;
        }
        VecMap(acts.d_u + row * E + e0) = skip * dy + delta * g_b;
        d_skip_sum += dy * u;
        VecMap(acts.d_dt_pre + row * E + e0) = d_delta;  // times softplus' after the scan
      }
    }
    for (int n = 0; n < N; ++n)
      VecMap(acts.d_a_partial + (static_cast<std::size_t>(b) * N + n) * E + e0) = dA[n];
    VecMap(acts.d_skip_partial + static_cast<std::size_t>(b) * E + e0) = d_skip_sum;
  }

  // conv1d grads of channels [e0, e0+W): sums over sequences and tokens in a fixed order.
  static void conv_weight_backward(Real* grads, const Activations& acts, int e0, int B, int T) {
    Vec dw[K], db = Vec::Zero();
    for (Vec& v : dw) v.setZero();
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const std::size_t row = static_cast<std::size_t>(b) * T + t;
        const ConstVecMap dc(acts.d_u + row * E + e0);
        db += dc;
        for (int j = 0; j < K; ++j) {
          const int back = K - 1 - j;
          if (t >= back) dw[j] += dc * ConstVecMap(acts.xz + (row - back) * 2 * E + e0);
        }
      }
    for (int w = 0; w < W; ++w) {
      grads[conv_bias + e0 + w] += db[w];
      for (int j = 0; j < K; ++j)
        grads[conv_weight + static_cast<std::size_t>(e0 + w) * K + j] += dw[j][w];
    }
  }
};

// Mamba with its defaults (d_state 16, expand 2, d_conv 4), in the form Model takes.
template <Shape S, class Real = float>
using Mamba = MambaMixer<S, Real, 16, 2, 4>;

}  // namespace emergent
