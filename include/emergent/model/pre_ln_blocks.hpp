// The stack of pre-LN blocks that Model (a causal LM) and Encoder (a classifier) share:
//   per layer l: x = x + Mixer(LN1(x));  x = x + Channel(LN2(x))
// Layer l's parameters start at layer_offset(l) from the stack's start, in the order
// [ln1, mixer, ln2, channel, extra]: `Extra` floats per layer are the owner's (the encoder's
// proximity slopes), placed and named by it. Activations per layer live in LayerActivations,
// carved from the owner's Arena.
#pragma once

#include <array>
#include <cstddef>
#include <emergent/core/arena.hpp>
#include <emergent/core/layout.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/model/parameter_tensors.hpp>
#include <emergent/nn/layernorm.hpp>
#include <string>
#include <vector>

namespace emergent {

template <class Mixer, class Channel, Shape S, class Real, std::size_t Extra = 0>
struct PreLnBlocks {
  static constexpr int D = S.d_model, L = S.layers;

  static constexpr auto norm1_layout = layout_of(std::array{
      TensorSpec{"ln1.weight", 0, D, false, Init::ones},
      TensorSpec{"ln1.bias", 0, D, false, Init::zeros},
  });
  static constexpr auto norm2_layout = layout_of(std::array{
      TensorSpec{"ln2.weight", 0, D, false, Init::ones},
      TensorSpec{"ln2.bias", 0, D, false, Init::zeros},
  });
  static constexpr std::size_t layer_size =
      norm1_layout.total + Mixer::layout.total + norm2_layout.total + Channel::layout.total + Extra;
  static constexpr std::size_t total = L * layer_size;

  // Offsets from the start of the stack.
  static constexpr std::size_t layer_offset(int l) { return l * layer_size; }
  static constexpr std::size_t mixer_offset(int l) { return layer_offset(l) + norm1_layout.total; }
  static constexpr std::size_t norm2_offset(int l) { return mixer_offset(l) + Mixer::layout.total; }
  static constexpr std::size_t channel_offset(int l) {
    return norm2_offset(l) + norm2_layout.total;
  }
  static constexpr std::size_t extra_offset(int l) {
    return channel_offset(l) + Channel::layout.total;
  }
  static constexpr std::size_t ln1_w = offset_of(norm1_layout, "ln1.weight");
  static constexpr std::size_t ln1_b = offset_of(norm1_layout, "ln1.bias");
  static constexpr std::size_t ln2_w = offset_of(norm2_layout, "ln2.weight");
  static constexpr std::size_t ln2_b = offset_of(norm2_layout, "ln2.bias");

  // Layer l's tensors ("layers.l.ln1.weight", "layers.l.mixer.*", ..., "layers.l.mlp.*"), the
  // stack placed at `base` of the whole buffer; the owner appends its extras after them.
  static void append_layer_tensors(std::vector<ParameterTensor>& out, int l, std::size_t base) {
    const std::string prefix = "layers." + std::to_string(l) + ".";
    append_tensors(out, norm1_layout, prefix, base + layer_offset(l));
    append_tensors(out, Mixer::layout, prefix + "mixer.", base + mixer_offset(l));
    append_tensors(out, norm2_layout, prefix, base + norm2_offset(l));
    append_tensors(out, Channel::layout, prefix + "mlp.", base + channel_offset(l));
  }

  struct LayerActivations {
    Real* norm1 = nullptr;  // [B*T, D] LN1 output, the mixer's input
    Real* norm1_mean = nullptr;
    Real* norm1_rstd = nullptr;
    typename Mixer::Activations mixer;
    Real* residual_mid = nullptr;  // [B*T, D] x after the mixer
    Real* norm2 = nullptr;
    Real* norm2_mean = nullptr;
    Real* norm2_rstd = nullptr;
    typename Channel::Activations channel;
  };
  using Layers = std::array<LayerActivations, L>;
  using Residuals = std::array<Real*, L + 1>;  // [l]: input of layer l; [L]: the stack's output

  static void carve(Arena<Real>& arena, Residuals& residual, Layers& layers, int batch,
                    int length) {
    const std::size_t N = static_cast<std::size_t>(batch) * length;
    for (auto& r : residual) r = arena.take(N * D);
    for (auto& a : layers) {
      a.norm1 = arena.take(N * D);
      a.norm1_mean = arena.take(N);
      a.norm1_rstd = arena.take(N);
      Mixer::carve(arena, a.mixer, batch, length);
      a.residual_mid = arena.take(N * D);
      a.norm2 = arena.take(N * D);
      a.norm2_mean = arena.take(N);
      a.norm2_rstd = arena.take(N);
      Channel::carve(arena, a.channel, batch, length);
    }
  }

  // residual[1..L] from residual[0]; `context(l)` is layer l's MixerContext. p: the stack.
  template <class Context>
  static void forward(const Real* p, const Residuals& residual, Layers& layers, std::size_t N,
                      Context context) {
    for (int l = 0; l < L; ++l) {
      LayerActivations& a = layers[l];
      const Real* pl = p + layer_offset(l);
      const Real* pn = p + norm2_offset(l);
      const MixerContext<Real> ctx = context(l);
      nn::layernorm_forward(a.norm1, a.norm1_mean, a.norm1_rstd, residual[l], pl + ln1_w,
                            pl + ln1_b, static_cast<int>(N), D);
      Mixer::forward(p + mixer_offset(l), a.norm1, a.residual_mid, a.mixer, ctx);
      add_into(a.residual_mid, residual[l], N * D);
      nn::layernorm_forward(a.norm2, a.norm2_mean, a.norm2_rstd, a.residual_mid, pn + ln2_w,
                            pn + ln2_b, static_cast<int>(N), D);
      Channel::forward(p + channel_offset(l), a.norm2, residual[l + 1], a.channel, ctx);
      add_into(residual[l + 1], a.residual_mid, N * D);
    }
  }

  // d_residual: dL/d residual[L] on entry, dL/d residual[0] on return; d_norm is scratch.
  // Parameter gradients accumulate into g (the stack's part of the gradient buffer).
  template <class Context>
  static void backward(const Real* p, Real* g, const Residuals& residual, Layers& layers,
                       Real* d_residual, Real* d_norm, std::size_t N, Context context) {
    for (int l = L - 1; l >= 0; --l) {
      LayerActivations& a = layers[l];
      const Real* pl = p + layer_offset(l);
      const Real* pn = p + norm2_offset(l);
      Real* gl = g + layer_offset(l);
      Real* gn = g + norm2_offset(l);
      const MixerContext<Real> ctx = context(l);
      // Channel branch: residual[l+1] = residual_mid + Channel(LN2(residual_mid))
      Channel::backward(p + channel_offset(l), g + channel_offset(l), a.norm2, d_residual, d_norm,
                        a.channel, ctx);
      nn::layernorm_backward(d_residual, gn + ln2_w, gn + ln2_b, d_norm, a.residual_mid,
                             a.norm2_mean, a.norm2_rstd, pn + ln2_w, static_cast<int>(N), D);
      // Mixer branch: residual_mid = residual[l] + Mixer(LN1(residual[l]))
      Mixer::backward(p + mixer_offset(l), g + mixer_offset(l), a.norm1, d_residual, d_norm,
                      a.mixer, ctx);
      nn::layernorm_backward(d_residual, gl + ln1_w, gl + ln1_b, d_norm, residual[l], a.norm1_mean,
                             a.norm1_rstd, pl + ln1_w, static_cast<int>(N), D);
    }
  }

  static void add_into(Real* y, const Real* x, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) y[i] += x[i];
  }
};

// The token and position embeddings in front of a PreLnBlocks stack, and where the stack's
// layers sit in the whole buffer [embedding, blocks, the owner's final tensors]: the layout that
// Model and Encoder share, and so their checkpoint names "embed.*" and "layers.l.*". Both derive
// from it; `extra(out, l)` appends the owner's tensors of layer l (the encoder's slopes).
template <class Blocks, Shape S>
struct EmbeddedBlocks {
  static constexpr auto embedding_layout = layout_of(std::array{
      TensorSpec{"embed.token.weight", S.vocab, S.d_model, false, Init::normal},
      TensorSpec{"embed.position.weight", S.max_len, S.d_model, false, Init::normal},
  });
  static constexpr std::size_t tok = offset_of(embedding_layout, "embed.token.weight");
  static constexpr std::size_t pos = offset_of(embedding_layout, "embed.position.weight");
  static constexpr std::size_t blocks_offset = embedding_layout.total;
  static constexpr std::size_t layer_size = Blocks::layer_size;
  static constexpr std::size_t layer_offset(int l) {
    return blocks_offset + Blocks::layer_offset(l);
  }
  static constexpr std::size_t mixer_offset(int l) {
    return blocks_offset + Blocks::mixer_offset(l);
  }
  static constexpr std::size_t norm2_offset(int l) {
    return blocks_offset + Blocks::norm2_offset(l);
  }
  static constexpr std::size_t channel_offset(int l) {
    return blocks_offset + Blocks::channel_offset(l);
  }
  static constexpr std::size_t extra_offset(int l) {
    return blocks_offset + Blocks::extra_offset(l);
  }
  static constexpr std::size_t final_offset = blocks_offset + Blocks::total;

  // The embedding's tensors and every layer's, in buffer order (docs/model.md).
  template <class Extra>
  static void append_embedding_and_layers(std::vector<ParameterTensor>& out, Extra extra) {
    append_tensors(out, embedding_layout, "", 0);
    for (int l = 0; l < S.layers; ++l) {
      Blocks::append_layer_tensors(out, l, blocks_offset);
      extra(out, l);
    }
  }
};

}  // namespace emergent
