// Causal token-mixing matrix: the "MLP-Mixer" of the paper's architecture comparison (arXiv
// 2606.25010 App. B.6 and blog Fig. 6: dot-product attention replaced by "a static learned matrix
// that mixes information across sequence positions"), in the masked-mixer form of Badger, arXiv
// 2409.01482. The paper does not say whether its mixer is masked; it must be for next-token
// prediction (seewhy's replication shows an unmasked one reading its own target).
//
//   W~ = M ⊙ W,  M_ij = 1[j <= i]       W [T_max, T_max] learned, stored packed (below)
//   Y[i,:] = sum_{j<=i} W_ij X[j,:] + b_i                X, Y [T, D] per sequence, T <= T_max
//   i.e.  Y = W~[:T,:T] X + b[:T] 1^T   (one matrix shared over the D channels and the batch)
// Backward (L scalar; dY = dL/dY):
//   dX  = W~[:T,:T]^T dY                 dX[j,:] = sum_{i>=j} W_ij dY[i,:]
//   dW_ij += sum_batch dY[i,:] . X[j,:]  for j <= i only (masked entries have no gradient)
//   db_i  += sum_batch sum_d dY[i,d]
//
// Parameters (T_max = S.max_len; S.heads is not used: one matrix, as in the paper and in
// Badger's masked mixer, not one per head):
//   weight [T_max (T_max + 1) / 2]  the lower triangle of W, packed by rows: row i holds
//                                   W[i, 0..i] at packed_index(i, j) = i (i + 1) / 2 + j.
//                                   The masked entries have no storage, so no gradient, no AdamW
//                                   moments and no weight decay act on them.
//   bias   [T_max]                  per-position bias, shared over the channels.
// Row i reads only W[i, <=i] and b_i, so a length-T sequence uses the top-left T x T block and a
// prefix computes what it computes inside a longer sequence (gMLP relies on the same). The
// packed index of (i, j) does not depend on T_max either.
// Parameter count (T_max + 1)(T_max + 2)/2 - 1 plus alignment padding, independent of D: 2,144
// at max_len 64, 525,824 at 1024 (dot attention: 4 D^2 + 4 D = 66,048 at D = 128, any max_len).
//
// Relation to the original MLP-Mixer (Tolstikhin et al., arXiv 2105.01601): its token mixing is
// an MLP along the token axis, shared over channels, U = X + W2 GELU(W1 LN(X) + b1) + b2 with
// W1 [D_S, S], W2 [S, D_S]: two matrices, non-causal, and for one fixed S. For next-token
// prediction an unmasked matrix lets position i read the target x_{i+1}, and two matrices around
// a GELU stay causal only if both are lower-triangular with hidden width T and aligned indices
// (research notes A4.2). The masked mixer keeps a single learned T x T map, lower-triangular,
// plus a per-position bias: Badger's Conv1d(T, T, 1) across the sequence axis, masked with tril.
// Here the mask is structural (packed storage) rather than Badger's in-place re-masking of
// weight.data, which still feeds gradients of the masked entries into Adam's moments and weight
// decay (research notes A4.3). The block around it is the model's pre-LN residual block
// (x += Mixer(LN1 x); x += MLP(LN2 x)), as in Badger; the mixer has no channel projections.
//
// Init (Init::custom, see init(); not from a source, the paper gives none): each row i as
// PyTorch's default for a Linear(i + 1, 1) over the positions it may read, W_ij and b_i ~
// U(-1/sqrt(i+1), 1/sqrt(i+1)). For inputs of unit variance (LN1's output) every position then
// starts with output variance (i + 1) * (1 / (3 (i + 1))) = 1/3, as a Linear layer's output, and
// row i's distribution does not depend on max_len. Badger's Conv1d(T, T, 1) default,
// U(+-1/sqrt(T_max)) for every row, starts position i at variance (i + 1) / (3 T_max), near
// silent for early positions, and rescales the whole mixer whenever max_len changes (a model
// built with max_len 1024 would start 4x smaller at T = 31 than one built with 64). The research
// notes' causal mean W_ij = 1/(i+1) would give every seed the same mixer. The weight is a weight
// matrix, decayed by AdamW like every Linear weight (weight_decay true); the bias is not.
//
// Fast path. Each forward unpacks the T x T block of W into a dense lower-triangular scratch and
// its transpose (zero outside the triangle), kept for the backward. Y_b = W~ X_b and
// dX_b = W~^T dY_b are Eigen triangular products per (sequence, column panel). The weight
// gradient sum_b dY_b X_b^T is one GEMM over the batch: X and dY are copied into [T, B*D] layout
// (sequence b in columns b*D..), the product is split into (row block, batch chunk) tasks that
// compute only the lower part of their [rows, T] block, and the chunks are summed in a fixed
// order and packed into the gradient. Every task decomposition depends on (B, T, D) only, and
// every Eigen product runs single-threaded with fixed blocking (triangular products never
// thread; the plain GEMMs run only inside a parallel_for region, where Eigen does not thread),
// so results do not depend on the thread count.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/layout.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/mixer.hpp>
#include <string_view>

namespace emergent {

template <Shape S, class Real = float>
class MlpMixer {
 public:
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  static constexpr std::string_view name = "mlp_mixer";
  static constexpr int D = S.d_model, T_max = S.max_len;
  static constexpr int packed_size = T_max * (T_max + 1) / 2;

  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"weight", 0, packed_size, true, Init::custom},
      TensorSpec{"bias", 0, T_max, false, Init::custom},
  });
  static constexpr std::size_t weight = offset_of(layout, "weight");
  static constexpr std::size_t bias = offset_of(layout, "bias");

  // Position of W[i, j] (j <= i) in the packed weight: rows 0..i-1 hold 1 + 2 + ... + i values.
  static constexpr std::size_t packed_index(int i, int j) {
    return static_cast<std::size_t>(i) * (i + 1) / 2 + static_cast<std::size_t>(j);
  }

  struct Activations {
    Real* mix = nullptr;         // [T, T] W~[:T,:T], dense, zero above the diagonal
    Real* mix_t = nullptr;       // [T, T] its transpose, row-major (Eigen's upper-triangular
                                 // product is about twice as fast on it as on mix.transpose())
    Real* x_by_time = nullptr;   // [T, B*D] backward scratch: x with sequence b in columns b*D..
    Real* dy_by_time = nullptr;  // [T, B*D] backward scratch: dy likewise
    Real* d_mix = nullptr;       // [chunks, T, T] backward scratch: per batch chunk, lower part of
                                 // sum_b dY_b X_b^T
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t tokens = static_cast<std::size_t>(batch) * length;
    const std::size_t square = static_cast<std::size_t>(length) * length;
    acts.mix = arena.take(square);
    acts.mix_t = arena.take(square);
    acts.x_by_time = arena.take(tokens * D);
    acts.dy_by_time = arena.take(tokens * D);
    acts.d_mix = arena.take(square * batch_chunks(batch));
  }

  // Each row i as PyTorch's Linear(i + 1, 1) default: W[i, 0..i] and b_i ~ U(-1/sqrt(i+1),
  // 1/sqrt(i+1)), drawn from Philox words base + local index (the same law at every depth).
  static void init(Real* params, std::uint64_t seed, std::size_t base, int /*layer*/) {
    const PhiloxStream uniform(seed, stream_id_from_name("mlp_mixer.init"));
    auto draw = [&](std::size_t local, double bound) {
      return Real(bound * (2.0 * uniform.uniform(base + local) - 1.0));
    };
    for (int i = 0; i < T_max; ++i) {
      const double bound = 1.0 / std::sqrt(double(i + 1));
      for (int j = 0; j <= i; ++j)
        params[weight + packed_index(i, j)] = draw(weight + packed_index(i, j), bound);
      params[bias + i] = draw(bias + i, bound);
    }
  }

  // y[B*T,D] <- x[B*T,D]
  static void forward(const Real* params, const Real* x, Real* y, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length;
    unpack(params + weight, acts.mix, acts.mix_t, T);
    const ConstStridedMap mix(acts.mix, T, T, OuterStride(T));
    const Real* b = params + bias;
    const int width = panel_width(B, T), panels = (D + width - 1) / width;
    parallel_for(static_cast<std::int64_t>(B) * panels, [&](std::int64_t task) {
      const std::int64_t sequence = task / panels;
      const int c0 = static_cast<int>(task % panels) * width, cols = std::min(width, D - c0);
      const std::size_t at = static_cast<std::size_t>(sequence) * T * D + c0;
      StridedMap Y(y + at, T, cols, OuterStride(D));
      Y.noalias() = mix.template triangularView<Eigen::Lower>() *
                    ConstStridedMap(x + at, T, cols, OuterStride(D));
      for (int i = 0; i < T; ++i) Y.row(i).array() += b[i];
    });
  }

  // dx[B*T,D] = dL/dx; grads += dL/dparams   <- x[B*T,D], dy[B*T,D]
  static void backward(const Real* /*params*/, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length;
    const ConstStridedMap mix_t(acts.mix_t, T, T, OuterStride(T));
    const int width = panel_width(B, T), panels = (D + width - 1) / width;
    // dX_b = W~^T dY_b, and the copies of x and dy into [T, B*D].
    parallel_for(static_cast<std::int64_t>(B) * panels, [&](std::int64_t task) {
      const std::int64_t sequence = task / panels;
      const int c0 = static_cast<int>(task % panels) * width, cols = std::min(width, D - c0);
      const std::size_t at = static_cast<std::size_t>(sequence) * T * D + c0;
      StridedMap(dx + at, T, cols, OuterStride(D)).noalias() =
          mix_t.template triangularView<Eigen::Upper>() *
          ConstStridedMap(dy + at, T, cols, OuterStride(D));
      const std::size_t row_stride = static_cast<std::size_t>(B) * D;
      for (int t = 0; t < T; ++t) {
        const std::size_t from = at + static_cast<std::size_t>(t) * D;
        const std::size_t to = t * row_stride + static_cast<std::size_t>(sequence) * D + c0;
        std::copy(x + from, x + from + cols, acts.x_by_time + to);
        std::copy(dy + from, dy + from + cols, acts.dy_by_time + to);
      }
    });

    // Partial products: chunk c, row block r -> d_mix[c][i0..i1, 0..i1], lower part.
    const int blocks = (T + kRowBlock - 1) / kRowBlock, chunks = batch_chunks(B),
              per_chunk = sequences_per_chunk();
    const std::size_t square = static_cast<std::size_t>(T) * T;
    const OuterStride by_time(static_cast<Eigen::Index>(B) * D);
    parallel_for(static_cast<std::int64_t>(blocks) * chunks, [&](std::int64_t task) {
      const int r = balanced_block(static_cast<int>(task / chunks), blocks),
                c = static_cast<int>(task % chunks);
      const int i0 = r * kRowBlock, rows = std::min(kRowBlock, T - i0);
      const int b0 = c * per_chunk, depth = std::min(per_chunk, B - b0) * D;
      const ConstStridedMap dY(acts.dy_by_time + static_cast<std::size_t>(b0) * D, T, depth,
                               by_time);
      const ConstStridedMap X(acts.x_by_time + static_cast<std::size_t>(b0) * D, T, depth, by_time);
      StridedMap partial(acts.d_mix + c * square, T, T, OuterStride(T));
      if (i0 > 0)
        partial.block(i0, 0, rows, i0).noalias() =
            dY.middleRows(i0, rows) * X.topRows(i0).transpose();
      partial.block(i0, i0, rows, rows).template triangularView<Eigen::Lower>() =
          dY.middleRows(i0, rows) * X.middleRows(i0, rows).transpose();
    });

    // Sum the chunks in order, pack into the weight gradient; bias gradient from the row sums.
    parallel_for(blocks, [&](std::int64_t r) {
      const int i0 = static_cast<int>(r) * kRowBlock, i1 = std::min(T, i0 + kRowBlock);
      for (int i = i0; i < i1; ++i) {
        Real* total = acts.d_mix + static_cast<std::size_t>(i) * T;
        for (int c = 1; c < chunks; ++c) {
          const Real* part = acts.d_mix + c * square + static_cast<std::size_t>(i) * T;
          for (int j = 0; j <= i; ++j) total[j] += part[j];
        }
        Real* g = grads + weight + packed_index(i, 0);
        for (int j = 0; j <= i; ++j) g[j] += total[j];
        grads[bias + i] += ConstRowMap(acts.dy_by_time + static_cast<std::size_t>(i) * B * D,
                                       static_cast<Eigen::Index>(B) * D)
                               .sum();
      }
    });
  }

 private:
  // Rows of the weight gradient per task: a [64, T] block of the product keeps the triangular
  // waste of its diagonal block small and gives T / 64 tasks at the long lengths.
  static constexpr int kRowBlock = 64;
  // Depth (batch * D columns) of one chunk of the weight-gradient GEMM: enough for efficient
  // GEMM panels, few enough chunks that T=31, B=128 still splits into 8 tasks.
  static constexpr int kChunkDepth = 2048;
  // From this length on, forward and dX split D into column panels (at least 32 wide, a
  // multiple of 16) until B * panels reaches 16 tasks, so that a small batch of long sequences
  // (B = 4, T = 1024: 4 panels of 32) still fills the cores. Wider panels are faster per core
  // (the T x T matrix is streamed once per panel), so large batches keep one panel.
  static constexpr int kPanelMinLength = 128;
  static constexpr int kPanelMinWidth = 32;
  static constexpr int kMinTasks = 16;

  using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using OuterStride = Eigen::OuterStride<>;
  using StridedMap = Eigen::Map<RowMatrix, Eigen::Unaligned, OuterStride>;
  using ConstStridedMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, OuterStride>;
  using ConstRowMap = Eigen::Map<const Eigen::Matrix<Real, 1, Eigen::Dynamic>>;

  static constexpr int sequences_per_chunk() { return std::max(1, kChunkDepth / D); }
  static constexpr int batch_chunks(int batch) {
    return (batch + sequences_per_chunk() - 1) / sequences_per_chunk();
  }
  // Columns per panel of forward and dX; a function of (B, T) only, never of the thread count.
  static constexpr int panel_width(int batch, int length) {
    if (length < kPanelMinLength) return D;
    const int panels =
        std::clamp((kMinTasks + batch - 1) / batch, 1, std::max(1, D / kPanelMinWidth));
    return std::min(D, ((D + panels - 1) / panels + 15) / 16 * 16);
  }

  // Task k of n -> row block 0, n-1, 1, n-2, ...: a row block's cost grows with its index, so a
  // static schedule's contiguous share pairs cheap blocks with expensive ones.
  static constexpr int balanced_block(int k, int n) { return k % 2 == 0 ? k / 2 : n - 1 - k / 2; }

  // mix[T,T] <- W~[:T,:T] from the packed weight, zero above the diagonal; mix_t <- its transpose.
  static void unpack(const Real* packed, Real* mix, Real* mix_t, int T) {
    const int blocks = (T + kRowBlock - 1) / kRowBlock;
    parallel_for(blocks, [&](std::int64_t r) {
      const int i0 = static_cast<int>(r) * kRowBlock, i1 = std::min(T, i0 + kRowBlock);
      for (int i = i0; i < i1; ++i) {
        Real* row = mix + static_cast<std::size_t>(i) * T;
        std::copy(packed + packed_index(i, 0), packed + packed_index(i, 0) + i + 1, row);
        std::fill(row + i + 1, row + T, Real(0));
      }
    });
    // Rows j0..j1 of mix_t from columns j0..j1 of mix, in tiles of 16 rows of mix so that both
    // sides are read and written in runs of contiguous values.
    parallel_for(blocks, [&](std::int64_t r) {
      const int j0 = static_cast<int>(r) * kRowBlock, j1 = std::min(T, j0 + kRowBlock);
      for (int j = j0; j < j1; ++j)
        std::fill(mix_t + static_cast<std::size_t>(j) * T,
                  mix_t + static_cast<std::size_t>(j) * T + j0, Real(0));
      for (int i0 = j0; i0 < T; i0 += 16) {
        const int i1 = std::min(T, i0 + 16);
        for (int j = j0; j < j1; ++j)
          for (int i = i0; i < i1; ++i)
            mix_t[static_cast<std::size_t>(j) * T + i] = mix[static_cast<std::size_t>(i) * T + j];
      }
    });
  }
};

}  // namespace emergent
