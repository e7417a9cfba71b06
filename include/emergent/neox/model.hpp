// NeoxModel<Shape>: GPT-NeoX (Pythia) inference in fp32, as transformers' GPTNeoXForCausalLM
// computes it with eager attention.
//
//   x = embed_in[tokens]                                                   [T, d]
//   per layer (use_parallel_residual = true, every Pythia):
//     x = (mlp(ln2(x)) + attn(ln1(x))) + x
//   per layer (use_parallel_residual = false):
//     a = attn(ln1(x)) + x;   x = mlp(ln2(a)) + a
//   attn(u) = dense(CausalAttention(rotary(query_key_value(u))))          attention.hpp, rotary.hpp
//   mlp(u)  = dense_4h_to_h(act(dense_h_to_4h(u)))                         activation.hpp
//   logits  = final_layer_norm(x) embed_out^T     (embed_in^T when tied)   [T, vocab]
// The sums keep HF's operand order.
//
// Threads: one OpenMP parallel region per layer, in phases separated by barriers. Work is
// shared so that each thread reads a disjoint part of every weight matrix (the weights, 650 MB
// for pythia-160m, are read from memory once per forward, not once per thread):
//   A  rows             LN1(x) (and LN2(x) with the parallel residual)
//   B  heads            the qkv columns of the thread's heads (one GEMM), rotary, attention
//   C  MLP columns      dense_h_to_4h columns + activation (parallel residual; needs only A)
//   D  model columns    attention.dense and dense_4h_to_h columns, residual sums
// B and C run between the same two barriers. The sequential residual adds two barriers (LN2
// reads the whole attention output). The logits are a last region: final LayerNorm on rows,
// then vocabulary columns. Each GEMM is a single-threaded Eigen product on the thread's block.
//
// Parameters are one 64-byte-aligned fp32 buffer: embed_in [V, d], then per layer a block whose
// layout is fixed at compile time (`layer_layout`, tensors named by their HF suffix), then the
// final LayerNorm and embed_out [V, d]. Tensors keep the checkpoint's layout (query_key_value
// stays per-head interleaved), so loading converts each tensor once, straight into its slot.
// Biases that the config leaves out (attention_bias = false) stay zero and are skipped.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/arena.hpp>
#include <emergent/core/error.hpp>
#include <emergent/core/layout.hpp>
#include <emergent/io/hf_config.hpp>
#include <emergent/neox/activation.hpp>
#include <emergent/neox/attention.hpp>
#include <emergent/neox/checkpoint_tensors.hpp>
#include <emergent/neox/layer_norm.hpp>
#include <emergent/neox/network.hpp>
#include <emergent/neox/rotary.hpp>
#include <emergent/neox/shape.hpp>
#include <emergent/nn/linear.hpp>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace emergent::neox {

template <NeoxShape S>
class NeoxModel final : public Network {
 public:
  static_assert(
      S.valid(),
      "NeoxShape: heads must divide d_model, rotary_dims must be even and at most d_head");
  static constexpr NeoxShape kShape = S;
  static constexpr int D = S.d_model, H = S.heads, Dh = S.d_head(), L = S.layers, F = S.d_ff;

  static constexpr auto layer_layout = layout_of(std::array{
      TensorSpec{"input_layernorm.weight", 0, D, false, Init::ones},
      TensorSpec{"input_layernorm.bias", 0, D, false, Init::zeros},
      TensorSpec{"post_attention_layernorm.weight", 0, D, false, Init::ones},
      TensorSpec{"post_attention_layernorm.bias", 0, D, false, Init::zeros},
      TensorSpec{"attention.query_key_value.weight", 3 * D, D, true},
      TensorSpec{"attention.query_key_value.bias", 0, 3 * D, false, Init::linear, D},
      TensorSpec{"attention.dense.weight", D, D, true},
      TensorSpec{"attention.dense.bias", 0, D, false, Init::linear, D},
      TensorSpec{"mlp.dense_h_to_4h.weight", F, D, true},
      TensorSpec{"mlp.dense_h_to_4h.bias", 0, F, false, Init::linear, D},
      TensorSpec{"mlp.dense_4h_to_h.weight", D, F, true},
      TensorSpec{"mlp.dense_4h_to_h.bias", 0, D, false, Init::linear, F},
  });
  static constexpr std::size_t ln1_weight = offset_of(layer_layout, "input_layernorm.weight");
  static constexpr std::size_t ln1_bias = offset_of(layer_layout, "input_layernorm.bias");
  static constexpr std::size_t ln2_weight =
      offset_of(layer_layout, "post_attention_layernorm.weight");
  static constexpr std::size_t ln2_bias = offset_of(layer_layout, "post_attention_layernorm.bias");
  static constexpr std::size_t qkv_weight =
      offset_of(layer_layout, "attention.query_key_value.weight");
  static constexpr std::size_t qkv_bias = offset_of(layer_layout, "attention.query_key_value.bias");
  static constexpr std::size_t dense_weight = offset_of(layer_layout, "attention.dense.weight");
  static constexpr std::size_t dense_bias = offset_of(layer_layout, "attention.dense.bias");
  static constexpr std::size_t fc_weight = offset_of(layer_layout, "mlp.dense_h_to_4h.weight");
  static constexpr std::size_t fc_bias = offset_of(layer_layout, "mlp.dense_h_to_4h.bias");
  static constexpr std::size_t proj_weight = offset_of(layer_layout, "mlp.dense_4h_to_h.weight");
  static constexpr std::size_t proj_bias = offset_of(layer_layout, "mlp.dense_4h_to_h.bias");

  // All parameters zero; fill them with load_parameters (load_checkpoint.hpp) or parameter().
  explicit NeoxModel(const NeoxConfig& config) : config_(config) {
    if (shape_of(config) != S) {
      throw Error("NeoxModel" + to_string(S) + ": the config describes " +
                  to_string(shape_of(config)));
    }
    carve_parameters();
    parameters_.allocate_and_rewind();
    carve_parameters();
    std::fill(embed_in_, embed_in_ + parameters_.capacity(), 0.0f);  // embed_in_ is the first slice
    index_parameters();
  }

  const NeoxConfig& config() const override { return config_; }
  NeoxShape shape() const override { return S; }
  int layers() const override { return L; }
  int heads() const override { return H; }

  std::span<const float> parameter(std::string_view name) const override {
    return find_parameter(name);
  }
  std::span<float> parameter(std::string_view name) override { return find_parameter(name); }

  std::vector<float> forward(std::span<const std::int32_t> tokens,
                             const ForwardHooks& hooks = {}) const override {
    const int T = static_cast<int>(tokens.size());
    const int V = config_.vocab_size;
    if (T == 0) throw Error("NeoxModel::forward: the token sequence is empty");
    for (int t = 0; t < T; ++t) {
      if (tokens[t] < 0 || tokens[t] >= V) {
        throw Error("NeoxModel::forward: token id " + std::to_string(tokens[t]) + " at position " +
                    std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) +
                    ")");
      }
    }
    const std::vector<const float*> override_of = index_overrides(hooks.overrides, T);
    const bool keep_scores = static_cast<bool>(hooks.on_scores);
    const bool keep_pattern = static_cast<bool>(hooks.on_pattern);

    Arena<float> arena;
    Activations a;
    a.T = T;
    carve_activations(arena, a, keep_scores, keep_pattern);
    arena.allocate_and_rewind();
    carve_activations(arena, a, keep_scores, keep_pattern);

    const RotaryTable rotary(T, S.rotary_dims, config_.rotary_emb_base);
    const auto scale = static_cast<float>(std::pow(static_cast<double>(Dh), -0.5));
    const std::size_t tt = static_cast<std::size_t>(T) * T;
    std::vector<float> logits(static_cast<std::size_t>(T) * V);

    for (int layer = 0; layer < L; ++layer) {
      const float* const* overrides = override_of.data() + static_cast<std::size_t>(layer) * H;
#if defined(_OPENMP)
#pragma omp parallel
#endif
      run_layer(layers_[layer], a, tokens, layer == 0, rotary, scale, overrides);
      if (keep_scores) hooks.on_scores(layer, std::span<const float>(a.scores, H * tt));
      if (keep_pattern) hooks.on_pattern(layer, std::span<const float>(a.pattern, H * tt));
    }
#if defined(_OPENMP)
#pragma omp parallel
#endif
    {
      const auto rows = share(T, 1);
      const std::size_t r0 = static_cast<std::size_t>(rows.first) * D;
      layer_norm(a.normed1 + r0, a.x + r0, final_norm_weight_, final_norm_bias_, rows.count(), D,
                 eps());
      barrier();
      const auto vocab = share(V, 16);
      unembed(a.normed1, logits.data(), T, vocab.first, vocab.last);
    }
    return logits;
  }

 private:
  struct Activations {
    int T = 0;
    float* x = nullptr;        // [T, D] residual stream
    float* normed1 = nullptr;  // [T, D] LN1(x); the final LayerNorm's output at the end
    float* normed2 = nullptr;  // [T, D] LN2 of x (parallel) or of attn (sequential)
    float* qkv = nullptr;      // [T, 3D] per head [q|k|v], rotary applied in place
    float* heads = nullptr;    // [T, D] attention heads merged
    float* attn = nullptr;     // [T, D] attention output (plus x when sequential)
    float* hidden = nullptr;   // [T, F] MLP hidden layer
    float* mlp = nullptr;      // [T, D] MLP output
    float* scores = nullptr;   // [H, T, T] for on_scores, else null
    float* pattern = nullptr;  // [H, T, T] for on_pattern, else null
  };

  // A contiguous share [first, last) of some items, for this thread of the current team.
  struct Share {
    int first = 0, last = 0;
    int count() const { return last - first; }
  };

  // This thread's share of `count` items, in multiples of `granule` (the whole range outside a
  // parallel region, or without OpenMP).
  static Share share(int count, int granule) {
#if defined(_OPENMP)
    const int thread = omp_get_thread_num(), threads = omp_get_num_threads();
#else
    const int thread = 0, threads = 1;
#endif
    const int granules = (count + granule - 1) / granule;
    const int per = granules / threads, extra = granules % threads;
    const int first = thread * per + std::min(thread, extra);
    const int last = first + per + (thread < extra ? 1 : 0);
    return {std::min(count, first * granule), std::min(count, last * granule)};
  }

  static void barrier() {
#if defined(_OPENMP)
#pragma omp barrier
#endif
  }

  float eps() const { return static_cast<float>(config_.layer_norm_eps); }

  // y[:, c.first : c.last] = x [T, in] w[c.first : c.last, :]^T (+ b[c.first : c.last]); y has
  // rows of `out` values. One single-threaded GEMM on this thread's columns.
  static void linear_columns(float* y, const float* x, const float* w, const float* b, int T,
                             int in, int out, Share c) {
    if (c.count() <= 0) return;
    Eigen::Map<nn::RowMatrix<float>, Eigen::Unaligned, Eigen::OuterStride<>> Y(
        y + c.first, T, c.count(), Eigen::OuterStride<>(out));
    Y.noalias() =
        nn::ConstMatrixMap<float>(x, T, in) *
        nn::ConstMatrixMap<float>(w + static_cast<std::size_t>(c.first) * in, c.count(), in)
            .transpose();
    if (b) Y.rowwise() += nn::ConstVectorMap<float>(b + c.first, c.count());
  }

  // One layer, run by every thread of the team (see the header comment for the phases).
  void run_layer(const float* p, const Activations& a, std::span<const std::int32_t> tokens,
                 bool embed, const RotaryTable& rotary, float scale,
                 const float* const* overrides) const {
    const int T = a.T;
    const bool parallel_residual = config_.use_parallel_residual;
    const auto rows = share(T, 1);
    const std::size_t r0 = static_cast<std::size_t>(rows.first) * D;
    // A: rows
    if (embed) {
      for (int t = rows.first; t < rows.last; ++t) {
        std::copy_n(embed_in_ + static_cast<std::size_t>(tokens[t]) * D, D,
                    a.x + static_cast<std::size_t>(t) * D);
      }
    }
    layer_norm(a.normed1 + r0, a.x + r0, p + ln1_weight, p + ln1_bias, rows.count(), D, eps());
    if (parallel_residual)
      layer_norm(a.normed2 + r0, a.x + r0, p + ln2_weight, p + ln2_bias, rows.count(), D, eps());
    barrier();
    // B: heads
    const auto heads = share(H, 1);
    linear_columns(a.qkv, a.normed1, p + qkv_weight, bias(p + qkv_bias), T, D, 3 * D,
                   {heads.first * 3 * Dh, heads.last * 3 * Dh});
    for (int h = heads.first; h < heads.last; ++h) {
      if constexpr (S.rotary_dims > 0) {
        for (int t = 0; t < T; ++t) {
          float* q =
              a.qkv + static_cast<std::size_t>(t) * 3 * D + static_cast<std::size_t>(h) * 3 * Dh;
          rotary.rotate(q, t);
          rotary.rotate(q + Dh, t);
        }
      }
      const std::size_t tt = static_cast<std::size_t>(T) * T;
      CausalAttention<Dh>::head_forward(a.qkv, a.heads, T, H, h, scale,
                                        a.scores ? a.scores + h * tt : nullptr,
                                        a.pattern ? a.pattern + h * tt : nullptr, overrides[h]);
    }
    // C: MLP columns, when its input is ready
    const auto mlp_columns = share(F, 16);
    if (parallel_residual) mlp_hidden(p, a, mlp_columns);
    barrier();
    // D: model columns
    const auto columns = share(D, 16);
    linear_columns(a.attn, a.heads, p + dense_weight, bias(p + dense_bias), T, D, D, columns);
    if (!parallel_residual) {
      for_columns(a, columns, [](float& attn, float& x, float&) { attn = attn + x; });
      barrier();
      layer_norm(a.normed2 + r0, a.attn + r0, p + ln2_weight, p + ln2_bias, rows.count(), D, eps());
      barrier();
      mlp_hidden(p, a, mlp_columns);
      barrier();
    }
    linear_columns(a.mlp, a.hidden, p + proj_weight, p + proj_bias, T, F, D, columns);
    if (parallel_residual) {
      for_columns(a, columns, [](float& attn, float& x, float& mlp) { x = (mlp + attn) + x; });
    } else {
      for_columns(a, columns, [](float& attn, float& x, float& mlp) { x = mlp + attn; });
    }
  }

  // hidden[:, c] = activation(normed2 dense_h_to_4h[c]^T + b[c])
  void mlp_hidden(const float* p, const Activations& a, Share c) const {
    linear_columns(a.hidden, a.normed2, p + fc_weight, p + fc_bias, a.T, D, F, c);
    for (int t = 0; t < a.T && c.count() > 0; ++t) {
      apply_activation(config_.activation, a.hidden + static_cast<std::size_t>(t) * F + c.first,
                       c.count());
    }
  }

  // op(attn, x, mlp) on the elements of columns c of every row.
  template <class Op>
  static void for_columns(const Activations& a, Share c, Op op) {
    for (int t = 0; t < a.T; ++t) {
      const std::size_t row = static_cast<std::size_t>(t) * D;
      for (int j = c.first; j < c.last; ++j) op(a.attn[row + j], a.x[row + j], a.mlp[row + j]);
    }
  }

  // Columns [v0, v1) of logits [T, V] = normed [T, D] unembedding[v0:v1]^T: a column share
  // reads only its rows of the [V, D] unembedding, which is the largest matrix of the model.
  void unembed(const float* normed, float* logits, int T, int v0, int v1) const {
    linear_columns(logits, normed, unembedding(), nullptr, T, D, config_.vocab_size, {v0, v1});
  }

  static void carve_activations(Arena<float>& arena, Activations& a, bool keep_scores,
                                bool keep_pattern) {
    const std::size_t t = static_cast<std::size_t>(a.T);
    a.x = arena.take(t * D);
    a.normed1 = arena.take(t * D);
    a.normed2 = arena.take(t * D);
    a.qkv = arena.take(t * 3 * D);
    a.heads = arena.take(t * D);
    a.attn = arena.take(t * D);
    a.hidden = arena.take(t * F);
    a.mlp = arena.take(t * D);
    a.scores = keep_scores ? arena.take(static_cast<std::size_t>(H) * t * t) : nullptr;
    a.pattern = keep_pattern ? arena.take(static_cast<std::size_t>(H) * t * t) : nullptr;
  }

  void carve_parameters() {
    const std::size_t vd = static_cast<std::size_t>(config_.vocab_size) * D;
    embed_in_ = parameters_.take(vd);
    for (int layer = 0; layer < L; ++layer) layers_[layer] = parameters_.take(layer_layout.total);
    final_norm_weight_ = parameters_.take(D);
    final_norm_bias_ = parameters_.take(D);
    embed_out_ = config_.tie_word_embeddings ? nullptr : parameters_.take(vd);
  }

  const float* unembedding() const { return config_.tie_word_embeddings ? embed_in_ : embed_out_; }
  const float* bias(const float* slot) const { return config_.attention_bias ? slot : nullptr; }

  // Maps every name of checkpoint_tensors(config) to its slot.
  void index_parameters() {
    for (const CheckpointTensor& t : checkpoint_tensors(config_)) {
      std::size_t count = 1;
      for (const std::int64_t dim : t.shape) count *= static_cast<std::size_t>(dim);
      float* slot = nullptr;
      if (t.name == "gpt_neox.embed_in.weight") {
        slot = embed_in_;
      } else if (t.name == "embed_out.weight") {
        slot = embed_out_;
      } else if (t.name == "gpt_neox.final_layer_norm.weight") {
        slot = final_norm_weight_;
      } else if (t.name == "gpt_neox.final_layer_norm.bias") {
        slot = final_norm_bias_;
      } else {
        for (int layer = 0; layer < L && slot == nullptr; ++layer) {
          const std::string prefix = layer_prefix(layer);
          if (!t.name.starts_with(prefix)) continue;
          const std::string_view suffix = std::string_view(t.name).substr(prefix.size());
          for (std::size_t i = 0; i < layer_layout.count; ++i) {
            if (layer_layout.specs[i].name == suffix)
              slot = layers_[layer] + layer_layout.offsets[i];
          }
        }
      }
      if (slot == nullptr)
        throw Error("NeoxModel" + to_string(S) + ": no slot for tensor '" + t.name + "'");
      slots_.emplace(t.name, std::span<float>(slot, count));
    }
  }

  std::span<float> find_parameter(std::string_view name) const {
    const auto it = slots_.find(name);
    if (it == slots_.end()) {
      throw Error("NeoxModel" + to_string(S) + ": no parameter named '" + std::string(name) +
                  "' (checkpoint_tensors.hpp lists the names this config has)");
    }
    return it->second;
  }

  // [L * H] pointers to the override pattern of each (layer, head), null where none.
  std::vector<const float*> index_overrides(const std::vector<PatternOverride>& overrides,
                                            int T) const {
    std::vector<const float*> out(static_cast<std::size_t>(L) * H, nullptr);
    for (const PatternOverride& o : overrides) {
      const std::string at = "PatternOverride (layer " + std::to_string(o.layer) + ", head " +
                             std::to_string(o.head) + ")";
      if (o.layer < 0 || o.layer >= L || o.head < 0 || o.head >= H) {
        throw Error(at + ": out of range: the model has " + std::to_string(L) + " layers of " +
                    std::to_string(H) + " heads");
      }
      if (o.pattern.size() != static_cast<std::size_t>(T) * T) {
        throw Error(at + ": pattern has " + std::to_string(o.pattern.size()) +
                    " values, expected T * T = " + std::to_string(static_cast<std::size_t>(T) * T) +
                    " for T = " + std::to_string(T));
      }
      const float*& slot = out[static_cast<std::size_t>(o.layer) * H + o.head];
      if (slot != nullptr) throw Error(at + ": given twice");
      slot = o.pattern.data();
    }
    return out;
  }

  NeoxConfig config_;
  Arena<float> parameters_;
  float* embed_in_ = nullptr;                                   // [V, D]
  std::array<float*, L> layers_{};                              // each a layer_layout block
  float* final_norm_weight_ = nullptr;                          // [D]
  float* final_norm_bias_ = nullptr;                            // [D]
  float* embed_out_ = nullptr;                                  // [V, D], null when tied
  std::map<std::string, std::span<float>, std::less<>> slots_;  // HF name -> values
};

}  // namespace emergent::neox
