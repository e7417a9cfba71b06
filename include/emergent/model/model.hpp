// Model<Mixer, Shape, Real, Channel>: a pre-LN GPT whose token mixer and channel mixer are
// compile-time policies.
//
//   x = E_tok[tokens] + E_pos[t]
//   per layer: x = x + Mixer(LN1(x));  x = x + Channel(LN2(x))
//   logits = LN_f(x) W_head^T;  loss = weighted next-token cross-entropy
//
// Channel defaults to the transformer's MLP, W2 GELU(W1 x + b1) + b2 (nn/mlp.hpp); RWKV's
// channel mixing (mixers/rwkv_channel_mix.hpp) is the other. Its tensors are named "mlp.*"
// whichever it is.
//
// docs/model.md is the exact contract (names, shapes, init) shared with the Eigen reference and
// the PyTorch golden script. Parameters, gradients and optimizer moments are flat buffers of
// `parameter_count` values whose layout is fixed at compile time; activations live in a
// Workspace sized once per (batch, length).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <emergent/core/arena.hpp>
#include <emergent/core/error.hpp>
#include <emergent/core/layout.hpp>
#include <emergent/core/philox.hpp>
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

// What a forward pass is asked to do; spans must outlive the backward pass.
struct ForwardInput {
  int batch = 0;
  int length = 0;
  std::span<const std::int32_t> inputs;   // [batch * length]
  std::span<const std::int32_t> targets;  // [batch * length]
  std::span<const float> loss_weights;    // [length], or [batch * length] per token
  std::span<const float> bias_pattern;    // [length * length], per sequence [batch * length *
                                          // length], or empty (no bias)
  float bias_strength = 0;
};

template <template <Shape, class> class MixerTemplate, Shape S, class Real = float,
          template <Shape, class> class ChannelTemplate = GeluMlp>
class Model
    : public EmbeddedBlocks<PreLnBlocks<MixerTemplate<S, Real>, ChannelTemplate<S, Real>, S, Real>,
                            S> {
 public:
  static_assert(S.valid(), "Shape: heads must divide d_model and every size must be positive");
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  using Mixer = MixerTemplate<S, Real>;
  using Channel = ChannelTemplate<S, Real>;
  static_assert(TokenMixer<Mixer, Real>);
  static_assert(TokenMixer<Channel, Real>);
  static_assert(
      MixerWithInit<Channel, Real> || !has_custom_init(Channel::layout),
      "a channel mixer with Init::custom tensors must provide init(params, seed, base, layer)");
  static_assert(MixerWithInit<Mixer, Real> || !has_custom_init(Mixer::layout),
                "a mixer with Init::custom tensors must provide init(params, seed, base, layer)");
  static constexpr Shape shape = S;
  static constexpr int V = S.vocab, D = S.d_model, F = S.d_ff, L = S.layers;

  using Blocks = PreLnBlocks<Mixer, Channel, S, Real>;
  using Stack = EmbeddedBlocks<Blocks, S>;
  using Stack::embedding_layout, Stack::tok, Stack::pos, Stack::layer_offset, Stack::mixer_offset,
      Stack::norm2_offset, Stack::channel_offset, Stack::final_offset;
  static constexpr auto final_layout = layout_of(std::array{
      TensorSpec{"final_ln.weight", 0, D, false, Init::ones},
      TensorSpec{"final_ln.bias", 0, D, false, Init::zeros},
      TensorSpec{"head.weight", V, D, true},
  });

  // Buffer order: embedding, then per layer [ln1, mixer, ln2, channel], then final LN and head.
  static constexpr std::size_t parameter_count =
      final_offset + final_layout.total;  // floats, with padding
  // The model's size as papers count it: values in its tensors, without the alignment padding.
  static constexpr std::size_t trainable_parameters =
      value_count(embedding_layout) + value_count(final_layout) +
      L * (value_count(Blocks::norm1_layout) + value_count(Mixer::layout) +
           value_count(Blocks::norm2_layout) + value_count(Channel::layout));

  // Named offsets in the whole buffer.
  static constexpr std::size_t lnf_w = final_offset + offset_of(final_layout, "final_ln.weight");
  static constexpr std::size_t lnf_b = final_offset + offset_of(final_layout, "final_ln.bias");
  static constexpr std::size_t head_w = final_offset + offset_of(final_layout, "head.weight");

  // Every tensor with its full name, in buffer order (docs/model.md).
  static std::vector<ParameterTensor> tensors() {
    std::vector<ParameterTensor> out;
    Stack::append_embedding_and_layers(out, [](auto&, int) {});
    append_tensors(out, final_layout, "", final_offset);
    return out;
  }

  // PyTorch's default initialisation (docs/model.md, init_parameter_tensors), then the mixer's
  // own `init` for its Init::custom tensors.
  static void init(std::span<Real> params, std::uint64_t seed) {
    require(params.size() == parameter_count, "Model::init", "parameter buffer has the wrong size");
    init_parameter_tensors(params, tensors(), seed);
    if constexpr (MixerWithInit<Mixer, Real>)
      for (int l = 0; l < L; ++l)
        Mixer::init(params.data() + mixer_offset(l), seed, mixer_offset(l), l);
    if constexpr (MixerWithInit<Channel, Real>)
      for (int l = 0; l < L; ++l)
        Channel::init(params.data() + channel_offset(l), seed, channel_offset(l), l);
  }

  using LayerActivations = typename Blocks::LayerActivations;

  // Activations and backward scratch for one (batch, length).
  class Workspace {
   public:
    int batch = 0, length = 0;
    typename Blocks::Residuals residual{};  // residual[l]: input of layer l; residual[L]: final
    typename Blocks::Layers layers{};
    Real *final_norm = nullptr, *final_mean = nullptr, *final_rstd = nullptr;
    Real *logits = nullptr, *probs = nullptr;
    Real *token_loss = nullptr, *token_correct = nullptr;  // [B*T] CE and argmax == target
    // [length], or per token [batch * length] with each sequence's weights normalised to sum 1
    Real *loss_weights = nullptr, *bias_pattern = nullptr;
    bool weights_per_token = false;
    Real *d_residual = nullptr, *d_norm = nullptr, *d_logits = nullptr;
    std::vector<std::int32_t> inputs, targets;
    Real bias_strength = 0;
    bool has_bias = false;
    std::vector<Real> sequence_bias;  // a bias pattern per sequence, when the input has one

    void resize(int batch_size, int sequence_length) {
      if (batch_size == batch && sequence_length == length && arena_.allocated()) return;
      require(batch_size >= 1, "Workspace", "batch must be at least 1");
      require(sequence_length >= 1 && sequence_length <= S.max_len, "Workspace",
              "length " + std::to_string(sequence_length) +
                  " is outside [1, max_len = " + std::to_string(S.max_len) + "] of this Shape");
      batch = batch_size;
      length = sequence_length;
      carve();  // sizing pass
      arena_.allocate_and_rewind();
      carve();  // carving pass
    }

    MixerContext<Real> mixer_context() const {
      const bool per_sequence = has_bias && !sequence_bias.empty();
      MixerContext<Real> ctx{batch, length,
                             !has_bias      ? nullptr
                             : per_sequence ? sequence_bias.data()
                                            : bias_pattern,
                             bias_strength};
      ctx.bias_stride = per_sequence ? long(length) * length : 0;
      return ctx;
    }

   private:
    void carve() {
      const std::size_t N = static_cast<std::size_t>(batch) * length;
      Blocks::carve(arena_, residual, layers, batch, length);
      final_norm = arena_.take(N * D);
      final_mean = arena_.take(N);
      final_rstd = arena_.take(N);
      logits = arena_.take(N * V);
      probs = arena_.take(N * V);
      token_loss = arena_.take(N);
      token_correct = arena_.take(N);
      loss_weights = arena_.take(N);
      bias_pattern = arena_.take(static_cast<std::size_t>(length) * length);
      d_residual = arena_.take(N * D);
      d_norm = arena_.take(N * D);
      d_logits = arena_.take(N * V);
    }
    Arena<Real> arena_;
  };

  // Runs the forward pass, keeps what the backward needs in `ws`, returns the weighted loss.
  static double forward(std::span<const Real> params, const ForwardInput& in, Workspace& ws) {
    require(params.size() == parameter_count, "Model::forward",
            "parameter buffer has the wrong size");
    const int B = in.batch, T = in.length;
    ws.resize(B, T);
    const std::size_t N = static_cast<std::size_t>(B) * T;
    require(in.inputs.size() == N && in.targets.size() == N, "Model::forward",
            "inputs and targets must hold batch * length tokens");
    ws.weights_per_token = in.loss_weights.size() == N && N != static_cast<std::size_t>(T);
    require(in.loss_weights.size() == static_cast<std::size_t>(T) || ws.weights_per_token,
            "Model::forward", "loss_weights must hold one weight per position or per token");
    for (std::size_t n = 0; n < N; ++n)
      require(in.inputs[n] >= 0 && in.inputs[n] < V && in.targets[n] >= 0 && in.targets[n] < V,
              "Model::forward", "token " + std::to_string(n) + " is outside the vocabulary");
    ws.inputs.assign(in.inputs.begin(), in.inputs.end());
    ws.targets.assign(in.targets.begin(), in.targets.end());
    std::copy(in.loss_weights.begin(), in.loss_weights.end(), ws.loss_weights);
    if (ws.weights_per_token)
      for (int b = 0; b < B; ++b) {
        Real* w = ws.loss_weights + static_cast<std::size_t>(b) * T;
        double sum = 0;
        for (int t = 0; t < T; ++t) sum += w[t];
        for (int t = 0; t < T; ++t) w[t] = sum > 0 ? Real(w[t] / sum) : Real(0);
      }
    ws.has_bias = !in.bias_pattern.empty() && in.bias_strength != 0;
    ws.sequence_bias.clear();
    if (ws.has_bias) {
      const std::size_t TT = static_cast<std::size_t>(T) * T;
      require(in.bias_pattern.size() == TT || in.bias_pattern.size() == N * T, "Model::forward",
              "bias_pattern must be [length, length] or, per sequence, [batch, length, length]");
      if (in.bias_pattern.size() == TT)
        std::copy(in.bias_pattern.begin(), in.bias_pattern.end(), ws.bias_pattern);
      else
        ws.sequence_bias.assign(in.bias_pattern.begin(), in.bias_pattern.end());
    }
    ws.bias_strength = Real(in.bias_strength);
    const Real* p = params.data();

    nn::embedding_forward(ws.residual[0], ws.inputs.data(), p + tok, p + pos, B, T, D);
    Blocks::forward(p + embedding_layout.total, ws.residual, ws.layers, N,
                    [&](int) { return ws.mixer_context(); });
    nn::layernorm_forward(ws.final_norm, ws.final_mean, ws.final_rstd, ws.residual[L], p + lnf_w,
                          p + lnf_b, static_cast<int>(N), D);
    nn::linear_forward<Real>(ws.logits, ws.final_norm, p + head_w, nullptr, static_cast<int>(N), D,
                             V);
    nn::cross_entropy_forward(ws.probs, ws.token_loss, ws.token_correct, ws.logits,
                              ws.targets.data(), static_cast<std::int64_t>(N), V);
    return weighted_mean(ws, in.loss_weights);
  }

  // Mean of the per-token losses of the last forward under other position weights (metrics).
  static double weighted_mean(const Workspace& ws, std::span<const float> weights) {
    return weighted_token_mean(ws, ws.token_loss, weights);
  }
  static double weighted_accuracy(const Workspace& ws, std::span<const float> weights) {
    return weighted_token_mean(ws, ws.token_correct, weights);
  }

  // Accumulates loss_scale * dL/dparams of the last forward's loss into grads. (A data-parallel
  // step runs each slice of a batch with loss_scale = slice batch / whole batch.)
  static void backward(std::span<const Real> params, std::span<Real> grads, Workspace& ws,
                       Real loss_scale = 1) {
    require(grads.size() == parameter_count, "Model::backward",
            "gradient buffer has the wrong size");
    const int B = ws.batch, T = ws.length;
    const std::size_t N = static_cast<std::size_t>(B) * T;
    const Real* p = params.data();
    Real* g = grads.data();
    double weight_sum = 0;  // per token: each sequence's weights already sum to 1 (or 0)
    if (!ws.weights_per_token)
      for (int t = 0; t < T; ++t) weight_sum += ws.loss_weights[t];
    const Real scale = ws.weights_per_token ? Real(loss_scale / B)
                       : weight_sum > 0     ? Real(loss_scale / (B * weight_sum))
                                            : Real(0);

    nn::cross_entropy_backward(ws.d_logits, ws.probs, ws.targets.data(), ws.loss_weights,
                               static_cast<std::int64_t>(N),
                               ws.weights_per_token ? static_cast<int>(N) : T, V, scale);
    nn::linear_backward<Real>(ws.d_norm, g + head_w, nullptr, ws.d_logits, ws.final_norm,
                              p + head_w, static_cast<int>(N), D, V);
    std::fill(ws.d_residual, ws.d_residual + N * D, Real(0));
    nn::layernorm_backward(ws.d_residual, g + lnf_w, g + lnf_b, ws.d_norm, ws.residual[L],
                           ws.final_mean, ws.final_rstd, p + lnf_w, static_cast<int>(N), D);
    Blocks::backward(p + embedding_layout.total, g + embedding_layout.total, ws.residual, ws.layers,
                     ws.d_residual, ws.d_norm, N, [&](int) { return ws.mixer_context(); });
    nn::embedding_backward(g + tok, g + pos, ws.d_residual, ws.inputs.data(), B, T, D);
  }

 private:
  static double weighted_token_mean(const Workspace& ws, const Real* values,
                                    std::span<const float> weights) {
    const std::size_t T = static_cast<std::size_t>(ws.length), N = ws.batch * T;
    require(weights.size() == T || weights.size() == N, "Model",
            "weights must hold one per position or one per token");
    return weights.size() == T && N != T
               ? nn::weighted_token_mean(values, ws.batch, ws.length, weights.data())
               : nn::sequence_weighted_mean(values, ws.batch, ws.length, weights.data());
  }
};

}  // namespace emergent
