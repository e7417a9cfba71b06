// Encoder<Mixer, Shape, Classes, Real, Channel>: a pre-LN Transformer encoder for sequence
// classification and masked-token reconstruction, the model of the self-pretraining study
// (docs/paper-notes.md §7: Amos et al.'s Transformer with absolute positions and mean pooling).
//
//   x = E_tok[tokens] + P[t]            P learned, or fixed sinusoids (PositionEncoding)
//   per layer: x = x + Mixer(LN1(x));  x = x + Channel(LN2(x))      (the same blocks as Model)
//   h = LN_f(x)
//   label:          logits_b = mean_{t < n_b} h_bt W_cls^T + b_cls   (mean over real tokens)
//   reconstruction: logits_bt = h_bt W_head^T + b_head at the masked positions
//   loss = label_weight * mean_b CE(logits_b, label_b)
//        + reconstruction_weight * mean_{masked (b,t)} CE(logits_bt, token_bt)
//
// Sequences are padded to the batch's length with listops::pad; `lengths` says where each one
// ends, and the mixer gives padding keys no attention (BidirectionalAttention), so a padded
// sequence computes as if alone.
//
// Per layer l, "layers.l.proximity.slope" [H] adds slope_h * P_ij to head h's scores, P the
// bias pattern of the batch (a proximity profile f(j - i)): zero and untouched unless a run
// trains it, and its gradient is always dL/dc_h, the derivative of the loss along adding
// c f(j - i) to the head's scores. That is the blindness measurement of the study: backward
// with only the label loss, or only the reconstruction loss, and read the slope gradients.
//
// The tensor names are Model's where the tensors are the same ("embed.*", "layers.l.ln1.*",
// "layers.l.mixer.*", "layers.l.mlp.*", "final_ln.*", "head.weight"), so that weights move
// between the two by name; "head.bias", "classifier.*" and "layers.l.proximity.slope" are the
// encoder's own.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <emergent/core/arena.hpp>
#include <emergent/core/error.hpp>
#include <emergent/core/layout.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/model/parameter_tensors.hpp>
#include <emergent/model/pre_ln_blocks.hpp>
#include <emergent/nn/cross_entropy.hpp>
#include <emergent/nn/embedding.hpp>
#include <emergent/nn/layernorm.hpp>
#include <emergent/nn/linear.hpp>
#include <emergent/nn/mlp.hpp>
#include <span>
#include <string>
#include <vector>

namespace emergent {

enum class PositionEncoding { learned, sinusoidal };

// One batch for Encoder::forward; spans must outlive the backward pass.
struct EncoderBatch {
  int batch = 0;
  int length = 0;                           // the padded length T
  std::span<const std::int32_t> tokens;     // [batch * length], the model's inputs
  std::span<const int> lengths;             // [batch], real tokens of each sequence
  std::span<const std::int32_t> labels;     // [batch], or empty (no label loss)
  std::span<const std::int32_t> originals;  // [batch * length] true tokens where masked, else -1;
                                            // or empty (no reconstruction loss)
  double label_weight = 1;
  double reconstruction_weight = 0;
  std::span<const float> bias_pattern;  // [length * length] or empty
  float bias_strength = 0;              // c, added to each head's learned slope
};

struct EncoderLosses {
  double label_loss = 0, label_accuracy = 0;
  double reconstruction_loss = 0, reconstruction_accuracy = 0;
  std::int64_t masked = 0;  // reconstruction targets in the batch
  double total = 0;         // the weighted sum the backward differentiates
};

// The encoder's own tensors of each layer: a learned proximity slope per head.
template <Shape S>
inline constexpr auto kProximityLayout = layout_of(std::array{
    TensorSpec{"proximity.slope", 0, S.heads, false, Init::zeros},
});

template <template <Shape, class> class MixerTemplate, Shape S, int Classes, class Real = float,
          template <Shape, class> class ChannelTemplate = GeluMlp>
class Encoder : public EmbeddedBlocks<PreLnBlocks<MixerTemplate<S, Real>, ChannelTemplate<S, Real>,
                                                  S, Real, kProximityLayout<S>.total>,
                                      S> {
 public:
  static_assert(S.valid(), "Shape: heads must divide d_model and every size must be positive");
  static_assert(Classes >= 2, "a classifier needs at least two classes");
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  using Mixer = MixerTemplate<S, Real>;
  using Channel = ChannelTemplate<S, Real>;
  static_assert(TokenMixer<Mixer, Real> && TokenMixer<Channel, Real>);
  static_assert(!MixerWithInit<Mixer, Real> && !MixerWithInit<Channel, Real>,
                "the encoder initialises every tensor by its TensorSpec");
  static constexpr Shape shape = S;
  static constexpr int V = S.vocab, D = S.d_model, H = S.heads, L = S.layers, C = Classes;

  static constexpr auto proximity_layout = kProximityLayout<S>;
  static constexpr auto final_layout = layout_of(std::array{
      TensorSpec{"final_ln.weight", 0, D, false, Init::ones},
      TensorSpec{"final_ln.bias", 0, D, false, Init::zeros},
      TensorSpec{"head.weight", V, D, true},
      TensorSpec{"head.bias", 0, V, false, Init::linear, D},
      TensorSpec{"classifier.weight", C, D, true},
      TensorSpec{"classifier.bias", 0, C, false, Init::linear, D},
  });

  // Buffer order: embedding, then per layer [ln1, mixer, ln2, channel, proximity], then final.
  using Blocks = PreLnBlocks<Mixer, Channel, S, Real, proximity_layout.total>;
  using Stack = EmbeddedBlocks<Blocks, S>;
  using Stack::embedding_layout, Stack::tok, Stack::pos, Stack::layer_offset, Stack::mixer_offset,
      Stack::final_offset;
  static constexpr std::size_t slope_offset(int l) { return Stack::extra_offset(l); }
  static constexpr std::size_t parameter_count = final_offset + final_layout.total;

  static constexpr std::size_t lnf_w = final_offset + offset_of(final_layout, "final_ln.weight");
  static constexpr std::size_t lnf_b = final_offset + offset_of(final_layout, "final_ln.bias");
  static constexpr std::size_t head_w = final_offset + offset_of(final_layout, "head.weight");
  static constexpr std::size_t head_b = final_offset + offset_of(final_layout, "head.bias");
  static constexpr std::size_t cls_w = final_offset + offset_of(final_layout, "classifier.weight");
  static constexpr std::size_t cls_b = final_offset + offset_of(final_layout, "classifier.bias");

  static std::vector<ParameterTensor> tensors() {
    std::vector<ParameterTensor> out;
    Stack::append_embedding_and_layers(out, [](std::vector<ParameterTensor>& o, int l) {
      append_tensors(o, proximity_layout, "layers." + std::to_string(l) + ".", slope_offset(l));
    });
    append_tensors(out, final_layout, "", final_offset);
    return out;
  }

  // PyTorch's default init (init_parameter_tensors); with sinusoidal positions the position
  // table holds P[t, 2i] = sin(t / 10000^(2i/D)), P[t, 2i+1] = cos(t / 10000^(2i/D)) instead.
  static void init(std::span<Real> params, std::uint64_t seed, PositionEncoding positions) {
    require(params.size() == parameter_count, "Encoder::init",
            "parameter buffer has the wrong size");
    init_parameter_tensors(params, tensors(), seed);
    if (positions == PositionEncoding::sinusoidal) write_sinusoids(params.data() + pos);
  }

  static void write_sinusoids(Real* table) {
    for (int t = 0; t < S.max_len; ++t)
      for (int i = 0; 2 * i < D; ++i) {
        const double angle = t / std::pow(10000.0, 2.0 * i / D);
        table[t * D + 2 * i] = Real(std::sin(angle));
        if (2 * i + 1 < D) table[t * D + 2 * i + 1] = Real(std::cos(angle));
      }
  }

  class Workspace {
   public:
    int batch = 0, length = 0;
    typename Blocks::Residuals residual{};
    typename Blocks::Layers layers{};
    Real *final_norm = nullptr, *final_mean = nullptr, *final_rstd = nullptr;
    Real *pooled = nullptr, *class_logits = nullptr, *class_probs = nullptr;  // [B,D] [B,C] [B,C]
    Real *token_logits = nullptr, *token_probs = nullptr;                     // [B*T, V]
    Real *class_loss = nullptr, *class_correct = nullptr;  // [B] CE and argmax == label
    Real *token_loss = nullptr, *token_correct = nullptr;  // [B*T] the same per position
    Real *d_residual = nullptr, *d_norm = nullptr, *d_pooled = nullptr;
    Real *d_class_logits = nullptr, *d_token_logits = nullptr;
    Real* d_from_head = nullptr;        // [B*T, D] the reconstruction head's part of d_norm
    Real* d_position_unused = nullptr;  // [T, D] where fixed positions' gradient goes
    Real* bias_pattern = nullptr;       // [T, T]
    std::vector<std::int32_t> tokens, labels, originals;
    std::vector<std::int32_t> token_targets;  // originals with -1 read as 0 (its loss unused)
    std::vector<int> lengths;
    bool has_pattern = false;
    Real bias_strength = 0;
    double label_weight = 0, reconstruction_weight = 0;
    std::int64_t masked = 0;

    void resize(int batch_size, int sequence_length) {
      if (batch_size == batch && sequence_length == length && arena_.allocated()) return;
      require(batch_size >= 1, "Encoder workspace", "batch must be at least 1");
      require(sequence_length >= 1 && sequence_length <= S.max_len, "Encoder workspace",
              "length " + std::to_string(sequence_length) +
                  " is outside [1, max_len = " + std::to_string(S.max_len) + "] of this Shape");
      batch = batch_size;
      length = sequence_length;
      carve();
      arena_.allocate_and_rewind();
      carve();
    }

    // The context of layer l's mixer: padding lengths, the bias and that layer's slopes.
    MixerContext<Real> mixer_context(const Real* params, Real* grads, int l) const {
      MixerContext<Real> ctx{batch, length, has_pattern ? bias_pattern : nullptr, bias_strength};
      ctx.lengths = lengths.data();
      ctx.head_bias_strength = has_pattern ? params + slope_offset(l) : nullptr;
      ctx.bias_strength_grad = has_pattern && grads ? grads + slope_offset(l) : nullptr;
      return ctx;
    }

   private:
    void carve() {
      const std::size_t N = static_cast<std::size_t>(batch) * length;
      Blocks::carve(arena_, residual, layers, batch, length);
      final_norm = arena_.take(N * D);
      final_mean = arena_.take(N);
      final_rstd = arena_.take(N);
      pooled = arena_.take(static_cast<std::size_t>(batch) * D);
      class_logits = arena_.take(static_cast<std::size_t>(batch) * C);
      class_probs = arena_.take(static_cast<std::size_t>(batch) * C);
      token_logits = arena_.take(N * V);
      token_probs = arena_.take(N * V);
      class_loss = arena_.take(static_cast<std::size_t>(batch));
      class_correct = arena_.take(static_cast<std::size_t>(batch));
      token_loss = arena_.take(N);
      token_correct = arena_.take(N);
      d_residual = arena_.take(N * D);
      d_norm = arena_.take(N * D);
      d_pooled = arena_.take(static_cast<std::size_t>(batch) * D);
      d_class_logits = arena_.take(static_cast<std::size_t>(batch) * C);
      d_token_logits = arena_.take(N * V);
      d_from_head = arena_.take(N * D);
      d_position_unused = arena_.take(static_cast<std::size_t>(length) * D);
      bias_pattern = arena_.take(static_cast<std::size_t>(length) * length);
    }
    Arena<Real> arena_;
  };

  // The forward pass; keeps what the backward needs in `ws`.
  static EncoderLosses forward(std::span<const Real> params, const EncoderBatch& in,
                               Workspace& ws) {
    require(params.size() == parameter_count, "Encoder::forward",
            "parameter buffer has the wrong size");
    const int B = in.batch, T = in.length;
    ws.resize(B, T);
    const std::size_t N = static_cast<std::size_t>(B) * T;
    require(in.tokens.size() == N, "Encoder::forward", "tokens must hold batch * length");
    require(in.lengths.size() == static_cast<std::size_t>(B), "Encoder::forward",
            "lengths must hold one per sequence");
    require(in.labels.empty() || in.labels.size() == static_cast<std::size_t>(B),
            "Encoder::forward", "labels must hold one per sequence, or none");
    require(in.originals.empty() || in.originals.size() == N, "Encoder::forward",
            "originals must hold batch * length, or none");
    for (int b = 0; b < B; ++b) {
      require(
          in.lengths[b] >= 1 && in.lengths[b] <= T, "Encoder::forward",
          "sequence " + std::to_string(b) + " has length outside [1, " + std::to_string(T) + "]");
      if (!in.labels.empty())
        require(in.labels[b] >= 0 && in.labels[b] < C, "Encoder::forward",
                "label " + std::to_string(b) + " is outside [0, " + std::to_string(C) + ")");
    }
    for (std::size_t n = 0; n < N; ++n) {
      require(in.tokens[n] >= 0 && in.tokens[n] < V, "Encoder::forward",
              "token " + std::to_string(n) + " is outside the vocabulary");
      if (!in.originals.empty())
        require(in.originals[n] >= -1 && in.originals[n] < V, "Encoder::forward",
                "original " + std::to_string(n) + " is outside the vocabulary (or -1)");
    }
    ws.tokens.assign(in.tokens.begin(), in.tokens.end());
    ws.lengths.assign(in.lengths.begin(), in.lengths.end());
    ws.labels.assign(in.labels.begin(), in.labels.end());
    ws.originals.assign(in.originals.begin(), in.originals.end());
    ws.label_weight = in.labels.empty() ? 0.0 : in.label_weight;
    ws.reconstruction_weight = in.originals.empty() ? 0.0 : in.reconstruction_weight;
    ws.has_pattern = !in.bias_pattern.empty();
    if (ws.has_pattern) {
      require(in.bias_pattern.size() == static_cast<std::size_t>(T) * T, "Encoder::forward",
              "bias_pattern must be [length, length]");
      std::copy(in.bias_pattern.begin(), in.bias_pattern.end(), ws.bias_pattern);
    }
    ws.bias_strength = Real(in.bias_strength);
    const Real* p = params.data();

    nn::embedding_forward(ws.residual[0], ws.tokens.data(), p + tok, p + pos, B, T, D);
    Blocks::forward(p + embedding_layout.total, ws.residual, ws.layers, N,
                    [&](int l) { return ws.mixer_context(p, nullptr, l); });
    nn::layernorm_forward(ws.final_norm, ws.final_mean, ws.final_rstd, ws.residual[L], p + lnf_w,
                          p + lnf_b, static_cast<int>(N), D);

    EncoderLosses out;
    if (!ws.labels.empty()) {
      for (int b = 0; b < B; ++b) {
        Real* pooled = ws.pooled + static_cast<std::size_t>(b) * D;
        std::fill(pooled, pooled + D, Real(0));
        const int n = ws.lengths[b];
        for (int t = 0; t < n; ++t) {
          const Real* h = ws.final_norm + (static_cast<std::size_t>(b) * T + t) * D;
          for (int d = 0; d < D; ++d) pooled[d] += h[d];
        }
        for (int d = 0; d < D; ++d) pooled[d] /= Real(n);
      }
      nn::linear_forward<Real>(ws.class_logits, ws.pooled, p + cls_w, p + cls_b, B, D, C);
      nn::cross_entropy_forward(ws.class_probs, ws.class_loss, ws.class_correct, ws.class_logits,
                                ws.labels.data(), B, C);
      for (int b = 0; b < B; ++b)
        out.label_loss += ws.class_loss[b], out.label_accuracy += ws.class_correct[b];
      out.label_loss /= B;
      out.label_accuracy /= B;
    }
    ws.masked = 0;
    if (!ws.originals.empty()) {
      nn::linear_forward<Real>(ws.token_logits, ws.final_norm, p + head_w, p + head_b,
                               static_cast<int>(N), D, V);
      ws.token_targets.resize(N);
      for (std::size_t n = 0; n < N; ++n) ws.token_targets[n] = std::max(ws.originals[n], 0);
      nn::cross_entropy_forward(ws.token_probs, ws.token_loss, ws.token_correct, ws.token_logits,
                                ws.token_targets.data(), static_cast<std::int64_t>(N), V);
      for (std::size_t n = 0; n < N; ++n)
        if (ws.originals[n] >= 0) {
          out.reconstruction_loss += ws.token_loss[n];
          out.reconstruction_accuracy += ws.token_correct[n];
          ++ws.masked;
        }
      if (ws.masked > 0) {
        out.reconstruction_loss /= double(ws.masked);
        out.reconstruction_accuracy /= double(ws.masked);
      }
    }
    out.masked = ws.masked;
    out.total =
        ws.label_weight * out.label_loss + ws.reconstruction_weight * out.reconstruction_loss;
    return out;
  }

  // Accumulates loss_scale * d(total)/dparams of the last forward into grads (the slopes' part
  // is the directional derivative along the bias pattern, when the batch had one). With
  // `train_positions` false (fixed sinusoids) the position table gets no gradient.
  static void backward(std::span<const Real> params, std::span<Real> grads, Workspace& ws,
                       bool train_positions, Real loss_scale = 1) {
    require(grads.size() == parameter_count, "Encoder::backward",
            "gradient buffer has the wrong size");
    const int B = ws.batch, T = ws.length;
    const std::size_t N = static_cast<std::size_t>(B) * T;
    const Real* p = params.data();
    Real* g = grads.data();
    std::fill(ws.d_norm, ws.d_norm + N * D, Real(0));
    if (!ws.labels.empty() && ws.label_weight != 0) {
      const Real scale = Real(loss_scale * ws.label_weight / B);
      for (int b = 0; b < B; ++b) {
        const Real* prob = ws.class_probs + static_cast<std::size_t>(b) * C;
        Real* d = ws.d_class_logits + static_cast<std::size_t>(b) * C;
        for (int c = 0; c < C; ++c) d[c] = prob[c] * scale;
        d[ws.labels[b]] -= scale;
      }
      nn::linear_backward<Real>(ws.d_pooled, g + cls_w, g + cls_b, ws.d_class_logits, ws.pooled,
                                p + cls_w, B, D, C);
      for (int b = 0; b < B; ++b) {
        const int n = ws.lengths[b];
        const Real* dp = ws.d_pooled + static_cast<std::size_t>(b) * D;
        for (int t = 0; t < n; ++t) {
          Real* dh = ws.d_norm + (static_cast<std::size_t>(b) * T + t) * D;
          for (int d = 0; d < D; ++d) dh[d] += dp[d] / Real(n);
        }
      }
    }
    if (!ws.originals.empty() && ws.reconstruction_weight != 0 && ws.masked > 0) {
      const Real scale = Real(loss_scale * ws.reconstruction_weight / double(ws.masked));
      for (std::size_t n = 0; n < N; ++n) {
        const Real* prob = ws.token_probs + n * V;
        Real* d = ws.d_token_logits + n * V;
        if (ws.originals[n] < 0) {
          std::fill(d, d + V, Real(0));
          continue;
        }
        for (int v = 0; v < V; ++v) d[v] = prob[v] * scale;
        d[ws.originals[n]] -= scale;
      }
      nn::linear_backward<Real>(ws.d_from_head, g + head_w, g + head_b, ws.d_token_logits,
                                ws.final_norm, p + head_w, static_cast<int>(N), D, V);
      Blocks::add_into(ws.d_norm, ws.d_from_head, N * D);
    }
    std::fill(ws.d_residual, ws.d_residual + N * D, Real(0));
    nn::layernorm_backward(ws.d_residual, g + lnf_w, g + lnf_b, ws.d_norm, ws.residual[L],
                           ws.final_mean, ws.final_rstd, p + lnf_w, static_cast<int>(N), D);
    // The mixers add dL/dc_h into the slopes' gradient (from d_residual, already scaled).
    Blocks::backward(p + embedding_layout.total, g + embedding_layout.total, ws.residual, ws.layers,
                     ws.d_residual, ws.d_norm, N, [&](int l) { return ws.mixer_context(p, g, l); });
    nn::embedding_backward(g + tok, train_positions ? g + pos : ws.d_position_unused, ws.d_residual,
                           ws.tokens.data(), B, T, D);
  }
};

}  // namespace emergent
