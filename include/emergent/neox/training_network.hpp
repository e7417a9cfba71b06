// NeoxTrainingNetwork<Real>: GPT-NeoX (Pythia) with a backward pass, for training language
// models here. The forward is the one of model.hpp and of transformers' GPTNeoXForCausalLM:
//
//   x = embed_in[tokens]
//   per layer, parallel residual (every Pythia):  x = x + attn(ln1(x)) + mlp(ln2(x))
//   per layer, sequential residual:               a = x + attn(ln1(x));  x = a + mlp(ln2(a))
//   attn(u) = dense(causal softmax attention of rotary(query_key_value(u)))   (rotary.hpp)
//   mlp(u)  = dense_4h_to_h(gelu_erf(dense_h_to_4h(u)))
//   logits  = final_layer_norm(x) embed_out^T   (embed_in^T when tied)
//
// and the loss is the mean next-token cross-entropy over every position of a batch of
// sequences: inputs [B, T], targets [B, T] (targets = the inputs shifted by one, as HF's
// labels = input_ids computes over B (T - 1) positions when the inputs are T - 1 tokens of a
// T-token sequence). forward_backward() returns the loss and overwrites the gradients; the
// tests check every gradient against transformers' autograd (tests/golden/neox_train/).
//
// Shapes are run-time here (unlike NeoxModel<Shape>, the inference model that analyses them):
// a suite trains several sizes from one program, and a step of these models is GEMM-bound, so
// compile-time dimensions buy nothing measurable. The ops are the library's own, templated on
// the precision (nn/: linear, layernorm, gelu, cross-entropy); Real = double for the gradient
// tests, float for training.
//
// Parameters and gradients are each one flat buffer, a tensor per HF name in the order of
// checkpoint_tensors(config), each starting on a 64-byte boundary (core/layout.hpp's
// alignment), so that AdamW is one loop and a checkpoint is a list of (name, slice).
// Supported configs: hidden_act "gelu" (erf) and layer_norm_eps 1e-5 (Pythia's); biases,
// tying and the residual kind as the config says.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/layout.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/io/hf_config.hpp>
#include <emergent/neox/checkpoint_tensors.hpp>
#include <emergent/neox/rotary.hpp>
#include <emergent/nn/cross_entropy.hpp>
#include <emergent/nn/gelu.hpp>
#include <emergent/nn/layernorm.hpp>
#include <emergent/nn/linear.hpp>
#include <emergent/optim/adamw.hpp>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace emergent::neox {

// One tensor of the flat buffers: its HF name and shape, where it starts, and whether AdamW
// decays it (the matrices, embeddings included, as GPT-NeoX's optimizer groups have it).
struct TrainingTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t offset = 0, size = 0;
  bool weight_decay = false;
};

// The checks a config must pass to be trained here; `where` names the config.
inline void require_trainable(const NeoxConfig& c, const std::string& where) {
  require(c.activation == NeoxActivation::gelu_erf, where,
          "hidden_act '" + c.hidden_act + "': training supports \"gelu\" (erf, Pythia's) only");
  require(std::abs(c.layer_norm_eps - nn::kLayerNormEps) <= 1e-12, where,
          "layer_norm_eps must be 1e-5 (Pythia's) for training");
  require(c.hidden_size % c.num_attention_heads == 0, where,
          "num_attention_heads must divide hidden_size");
  require(c.rotary_ndims() % 2 == 0, where, "int(head_dim * rotary_pct) must be even");
}

// Every buffer starts on Eigen's widest alignment: Eigen's vectorised sums (LayerNorm's row
// statistics) peel to an aligned address first, so their order, and the bits, would otherwise
// depend on where the allocator put a buffer, which differs between a run and its resume.
template <class Real>
using AlignedBuffer = std::vector<Real, Eigen::aligned_allocator<Real>>;

template <class Real>
class NeoxTrainingNetwork {
 public:
  explicit NeoxTrainingNetwork(const NeoxConfig& config, const std::string& where = "config")
      : c_(config),
        D(config.hidden_size),
        H(config.num_attention_heads),
        Dh(config.head_dim()),
        F(config.intermediate_size),
        L(config.num_hidden_layers),
        V(config.vocab_size) {
    require_trainable(config, where);
    std::size_t offset = 0;
    for (CheckpointTensor& t : checkpoint_tensors(config)) {
      std::size_t size = 1;
      for (const std::int64_t d : t.shape) size *= static_cast<std::size_t>(d);
      tensors_.push_back({t.name, t.shape, offset, size, t.shape.size() == 2});
      offset += align_up(size);
    }
    params_.assign(offset, Real(0));
    grads_.assign(offset, Real(0));
    embed_in_ = index("gpt_neox.embed_in.weight");
    for (int layer = 0; layer < L; ++layer) {
      const std::string p = layer_prefix(layer);
      LayerSlots s;
      s.ln1_w = index(p + "input_layernorm.weight");
      s.ln1_b = index(p + "input_layernorm.bias");
      s.ln2_w = index(p + "post_attention_layernorm.weight");
      s.ln2_b = index(p + "post_attention_layernorm.bias");
      s.qkv_w = index(p + "attention.query_key_value.weight");
      s.dense_w = index(p + "attention.dense.weight");
      if (c_.attention_bias) {
        s.qkv_b = index(p + "attention.query_key_value.bias");
        s.dense_b = index(p + "attention.dense.bias");
      }
      s.fc_w = index(p + "mlp.dense_h_to_4h.weight");
      s.fc_b = index(p + "mlp.dense_h_to_4h.bias");
      s.proj_w = index(p + "mlp.dense_4h_to_h.weight");
      s.proj_b = index(p + "mlp.dense_4h_to_h.bias");
      layers_.push_back(s);
    }
    final_w_ = index("gpt_neox.final_layer_norm.weight");
    final_b_ = index("gpt_neox.final_layer_norm.bias");
    unembed_ = c_.tie_word_embeddings ? embed_in_ : index("embed_out.weight");
  }

  const NeoxConfig& config() const { return c_; }
  const std::vector<TrainingTensor>& tensors() const { return tensors_; }
  std::span<Real> parameters() { return params_; }
  std::span<const Real> parameters() const { return params_; }
  std::span<const Real> gradients() const { return grads_; }
  std::span<Real> parameter(std::string_view name) { return slice(params_, name); }
  std::span<const Real> parameter(std::string_view name) const { return slice(params_, name); }
  std::span<const Real> gradient(std::string_view name) const { return slice(grads_, name); }

  // AdamW's decay ranges over the flat buffers.
  std::vector<DecayRange> decay_ranges() const {
    std::vector<DecayRange> out;
    for (const TrainingTensor& t : tensors_) out.push_back({t.offset, t.size, t.weight_decay});
    return out;
  }

  // GPT-NeoX's initialisation, as Pythia's configs name it (init_method "small_init",
  // output_layer_init_method "wang_init"): every matrix N(0, sqrt(2 / (5 d))), except the two
  // that write into the residual stream (attention.dense, dense_4h_to_h), N(0, 2 / (L sqrt d));
  // biases 0, LayerNorm weights 1. Draws from a Philox stream of `seed`, indexed by position in
  // the buffer, so the same on every machine.
  void initialize(std::uint64_t seed) {
    std::fill(params_.begin(), params_.end(), Real(0));
    const PhiloxStream normal(seed, stream_id_from_name("neox.init.normal"));
    const double small = std::sqrt(2.0 / (5.0 * D));
    const double wang = 2.0 / (L * std::sqrt(double(D)));
    for (const TrainingTensor& t : tensors_) {
      const bool output = t.name.ends_with("attention.dense.weight") ||
                          t.name.ends_with("mlp.dense_4h_to_h.weight");
      const bool norm_weight =
          t.name.ends_with("layernorm.weight") || t.name.ends_with("final_layer_norm.weight");
      for (std::size_t i = 0; i < t.size; ++i) {
        Real& value = params_[t.offset + i];
        if (norm_weight) value = Real(1);
        if (t.shape.size() == 2)
          value = Real((output ? wang : small) * normal.normal(t.offset + i));
      }
    }
  }

  // Mean next-token loss of inputs [batch, T] against targets [batch, T]; every gradient
  // overwritten with its derivative.
  double forward_backward(std::span<const std::int32_t> inputs,
                          std::span<const std::int32_t> targets, int batch, int T) {
    const double loss = forward(inputs, targets, batch, T);
    backward(inputs, targets, batch, T);
    return loss;
  }

  // The loss alone (the activations of the last call are kept).
  double forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                 int batch, int T) {
    check_tokens(targets, batch, T, "targets");
    run_logits(inputs, batch, T);
    const int N = batch * T;
    AlignedBuffer<Real> ce(N), correct(N);
    nn::cross_entropy_forward(act_.probs.data(), ce.data(), correct.data(), act_.logits.data(),
                              targets.data(), N, V);
    double sum = 0;
    for (int n = 0; n < N; ++n) sum += double(ce[n]);
    return sum / N;
  }

  // logits [batch, T, V] of inputs [batch, T].
  std::vector<Real> logits(std::span<const std::int32_t> inputs, int batch, int T) {
    run_logits(inputs, batch, T);
    return std::vector<Real>(act_.logits.begin(), act_.logits.end());
  }

 private:
  struct LayerSlots {
    std::size_t ln1_w = 0, ln1_b = 0, ln2_w = 0, ln2_b = 0, qkv_w = 0, dense_w = 0, fc_w = 0,
                fc_b = 0, proj_w = 0, proj_b = 0;
    std::size_t qkv_b = kNone, dense_b = kNone;  // kNone without attention_bias
  };
  static constexpr std::size_t kNone = ~std::size_t(0);

  // Activations of one batch, per layer where the backward needs them. x holds L + 1 residual
  // streams: the input of each layer, then the final one.
  struct Activations {
    int batch = 0, T = 0;
    AlignedBuffer<Real> x, mid;            // [(L+1) N D]; [L N D] a = x + attn (sequential)
    AlignedBuffer<Real> normed1, normed2;  // [L N D]
    AlignedBuffer<Real> mean1, rstd1, mean2, rstd2;            // [L N]
    AlignedBuffer<Real> qkv;                                   // [L N 3D] rotary applied
    AlignedBuffer<Real> pattern;                               // [L B H T T]
    AlignedBuffer<Real> heads;                                 // [L N D]
    AlignedBuffer<Real> pre, hidden;                           // [L N F] before and after the GELU
    AlignedBuffer<Real> final_normed, final_mean, final_rstd;  // [N D], [N], [N]
    AlignedBuffer<Real> logits, probs;                         // [N V] logits and their softmax
  };

  Real* p(std::size_t offset) { return params_.data() + offset; }
  Real* g(std::size_t offset) { return grads_.data() + offset; }
  const Real* bias(std::size_t offset) { return offset == kNone ? nullptr : p(offset); }
  Real* bias_grad(std::size_t offset) { return offset == kNone ? nullptr : g(offset); }

  std::size_t index(const std::string& name) const {
    for (const TrainingTensor& t : tensors_)
      if (t.name == name) return t.offset;
    throw Error("NeoxTrainingNetwork: no tensor '" + name + "'");
  }

  // The values of tensor `name` in `buffer` (the parameters or the gradients).
  template <class Buffer>
  auto slice(Buffer& buffer, std::string_view name) const {
    for (const TrainingTensor& t : tensors_)
      if (t.name == name) return std::span(buffer.data() + t.offset, t.size);
    throw Error("NeoxTrainingNetwork: no parameter named '" + std::string(name) +
                "' (checkpoint_tensors.hpp lists the names a config has)");
  }

  void check_tokens(std::span<const std::int32_t> tokens, int batch, int T,
                    const char* what) const {
    require(batch >= 1 && T >= 1, "NeoxTrainingNetwork", "batch and T must be positive");
    require(tokens.size() == std::size_t(batch) * T, "NeoxTrainingNetwork",
            std::string(what) + " must hold batch * T tokens");
    require(T <= c_.max_position_embeddings, "NeoxTrainingNetwork",
            "T = " + std::to_string(T) + " exceeds max_position_embeddings " +
                std::to_string(c_.max_position_embeddings));
    for (const std::int32_t t : tokens)
      require(t >= 0 && t < V, "NeoxTrainingNetwork",
              std::string(what) + " hold token id " + std::to_string(t) +
                  " outside the vocabulary [0, " + std::to_string(V) + ")");
  }

  // The forward up to the logits (act_.logits), every activation kept for the backward.
  void run_logits(std::span<const std::int32_t> inputs, int batch, int T) {
    check_tokens(inputs, batch, T, "inputs");
    carve(batch, T);
    const int N = batch * T;
    const RotaryTable rotary(T, c_.rotary_ndims(), c_.rotary_emb_base);
    for (int n = 0; n < N; ++n)
      std::copy_n(p(embed_in_) + std::size_t(inputs[n]) * D, D, act_.x.data() + std::size_t(n) * D);
    for (int layer = 0; layer < L; ++layer) layer_forward(layer, rotary, batch, T);
    nn::layernorm_forward(act_.final_normed.data(), act_.final_mean.data(), act_.final_rstd.data(),
                          act_.x.data() + std::size_t(L) * N * D, p(final_w_), p(final_b_), N, D);
    nn::linear_forward<Real>(act_.logits.data(), act_.final_normed.data(), p(unembed_), nullptr, N,
                             D, V);
  }

  void carve(int batch, int T) {
    if (act_.batch == batch && act_.T == T) return;
    // Training and its validation (one window at a time) alternate between two shapes: the
    // other shape's buffers are kept for the next switch instead of allocated again.
    std::swap(act_, other_act_);
    if (act_.batch == batch && act_.T == T) return;
    act_.batch = batch;
    act_.T = T;
    const std::size_t N = std::size_t(batch) * T, l = L;
    act_.x.assign((l + 1) * N * D, 0);
    act_.mid.assign(c_.use_parallel_residual ? 0 : l * N * D, 0);
    act_.normed1.assign(l * N * D, 0);
    act_.normed2.assign(l * N * D, 0);
    for (auto* v : {&act_.mean1, &act_.rstd1, &act_.mean2, &act_.rstd2}) v->assign(l * N, 0);
    act_.qkv.assign(l * N * 3 * D, 0);
    act_.pattern.assign(l * std::size_t(batch) * H * T * T, 0);
    act_.heads.assign(l * N * D, 0);
    act_.pre.assign(l * N * F, 0);
    act_.hidden.assign(l * N * F, 0);
    act_.final_normed.assign(N * D, 0);
    act_.final_mean.assign(N, 0);
    act_.final_rstd.assign(N, 0);
    act_.logits.assign(N * V, 0);
    act_.probs.assign(N * V, 0);
  }

  // Layer `layer` reads residual stream `layer` and writes stream `layer + 1`.
  void layer_forward(int layer, const RotaryTable& rotary, int batch, int T) {
    const LayerSlots& s = layers_[layer];
    const int N = batch * T;
    const std::size_t nd = std::size_t(N) * D, l = layer;
    const Real* x = act_.x.data() + l * nd;
    Real* out = act_.x.data() + (l + 1) * nd;
    Real* n1 = act_.normed1.data() + l * nd;
    Real* n2 = act_.normed2.data() + l * nd;
    Real* qkv = act_.qkv.data() + l * nd * 3;
    Real* heads = act_.heads.data() + l * nd;
    Real* pre = act_.pre.data() + l * N * std::size_t(F);
    Real* hidden = act_.hidden.data() + l * N * std::size_t(F);
    nn::layernorm_forward(n1, act_.mean1.data() + l * N, act_.rstd1.data() + l * N, x, p(s.ln1_w),
                          p(s.ln1_b), N, D);
    nn::linear_forward<Real>(qkv, n1, p(s.qkv_w), bias(s.qkv_b), N, D, 3 * D);
    attention_forward(qkv, heads, act_.pattern.data() + l * std::size_t(batch) * H * T * T, rotary,
                      batch, T);
    AlignedBuffer<Real> attn(nd);
    nn::linear_forward<Real>(attn.data(), heads, p(s.dense_w), bias(s.dense_b), N, D, D);
    const Real* mlp_in_source = x;
    if (!c_.use_parallel_residual) {
      Real* mid = act_.mid.data() + l * nd;
      for (std::size_t i = 0; i < nd; ++i) mid[i] = attn[i] + x[i];
      mlp_in_source = mid;
    }
    nn::layernorm_forward(n2, act_.mean2.data() + l * N, act_.rstd2.data() + l * N, mlp_in_source,
                          p(s.ln2_w), p(s.ln2_b), N, D);
    nn::linear_forward<Real>(pre, n2, p(s.fc_w), p(s.fc_b), N, D, F);
    nn::gelu_forward(hidden, pre, std::int64_t(N) * F);
    nn::linear_forward<Real>(out, hidden, p(s.proj_w), p(s.proj_b), N, F, D);
    if (c_.use_parallel_residual) {
      for (std::size_t i = 0; i < nd; ++i) out[i] = (out[i] + attn[i]) + x[i];  // HF's order
    } else {
      const Real* mid = act_.mid.data() + l * nd;
      for (std::size_t i = 0; i < nd; ++i) out[i] = out[i] + mid[i];
    }
  }

  // Per (sequence, head): rotary on q and k in place, pattern = softmax(q k^T / sqrt(Dh) + causal
  // mask), heads = pattern v.
  void attention_forward(Real* qkv, Real* heads, Real* pattern, const RotaryTable& rotary,
                         int batch, int T) {
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    const int rd = c_.rotary_ndims();
    parallel_for(std::int64_t(batch) * H, [&](std::int64_t bh) {
      const int b = int(bh / H), h = int(bh % H);
      Real* base = qkv + std::size_t(b) * T * 3 * D + std::size_t(h) * 3 * Dh;
      if (rd > 0)
        for (int t = 0; t < T; ++t) {
          rotary.rotate(base + std::size_t(t) * 3 * D, t);
          rotary.rotate(base + std::size_t(t) * 3 * D + Dh, t);
        }
      Real* P = pattern + std::size_t(bh) * T * T;
      for (int i = 0; i < T; ++i) {
        const Real* q = base + std::size_t(i) * 3 * D;
        Real* row = P + std::size_t(i) * T;
        Real max = -std::numeric_limits<Real>::infinity();
        for (int j = 0; j <= i; ++j) {
          const Real* k = base + std::size_t(j) * 3 * D + Dh;
          Real dot = 0;
          for (int e = 0; e < Dh; ++e) dot += q[e] * k[e];
          row[j] = dot * scale;
          max = std::max(max, row[j]);
        }
        Real sum = 0;
        for (int j = 0; j <= i; ++j) sum += (row[j] = std::exp(row[j] - max));
        for (int j = 0; j <= i; ++j) row[j] /= sum;
        for (int j = i + 1; j < T; ++j) row[j] = 0;
        Real* o = heads + (std::size_t(b) * T + i) * D + std::size_t(h) * Dh;
        std::fill_n(o, Dh, Real(0));
        for (int j = 0; j <= i; ++j) {
          const Real* v = base + std::size_t(j) * 3 * D + 2 * Dh;
          for (int e = 0; e < Dh; ++e) o[e] += row[j] * v[e];
        }
      }
    });
  }

  void backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                int batch, int T) {
    std::fill(grads_.begin(), grads_.end(), Real(0));
    const int N = batch * T;
    const std::size_t nd = std::size_t(N) * D;
    const RotaryTable rotary(T, c_.rotary_ndims(), c_.rotary_emb_base);
    // logits -> final LayerNorm
    AlignedBuffer<Real> dlogits(std::size_t(N) * V);
    const AlignedBuffer<Real> ones(std::size_t(T), Real(1));
    nn::cross_entropy_backward(dlogits.data(), act_.probs.data(), targets.data(), ones.data(), N, T,
                               V, Real(1) / Real(N));
    AlignedBuffer<Real> dnormed(nd), dx(nd, 0);
    nn::linear_backward<Real>(dnormed.data(), g(unembed_), nullptr, dlogits.data(),
                              act_.final_normed.data(), p(unembed_), N, D, V);
    nn::layernorm_backward(dx.data(), g(final_w_), g(final_b_), dnormed.data(),
                           act_.x.data() + std::size_t(L) * nd, act_.final_mean.data(),
                           act_.final_rstd.data(), p(final_w_), N, D);
    for (int layer = L - 1; layer >= 0; --layer) layer_backward(layer, rotary, dx, batch, T);
    Real* dembed = g(embed_in_);
    for (int n = 0; n < N; ++n) {
      Real* row = dembed + std::size_t(inputs[n]) * D;
      const Real* d = dx.data() + std::size_t(n) * D;
      for (int e = 0; e < D; ++e) row[e] += d[e];
    }
  }

  // dx: the gradient of layer `layer`'s output on entry, of its input on return.
  void layer_backward(int layer, const RotaryTable& rotary, AlignedBuffer<Real>& dx, int batch,
                      int T) {
    const LayerSlots& s = layers_[layer];
    const int N = batch * T;
    const std::size_t nd = std::size_t(N) * D, l = layer, nf = std::size_t(N) * F;
    const Real* x = act_.x.data() + l * nd;
    const Real* n1 = act_.normed1.data() + l * nd;
    const Real* n2 = act_.normed2.data() + l * nd;
    const Real* heads = act_.heads.data() + l * nd;
    // MLP: out = proj(gelu(fc(ln2(u)))), u = x (parallel) or mid (sequential)
    AlignedBuffer<Real> dhidden(nf), dn2(nd), dattn_in(nd);
    nn::linear_backward<Real>(dhidden.data(), g(s.proj_w), g(s.proj_b), dx.data(),
                              act_.hidden.data() + l * nf, p(s.proj_w), N, F, D);
    nn::gelu_backward(dhidden.data(), dhidden.data(), act_.pre.data() + l * nf, std::int64_t(nf));
    nn::linear_backward<Real>(dn2.data(), g(s.fc_w), g(s.fc_b), dhidden.data(), n2, p(s.fc_w), N, D,
                              F);
    // d(stream feeding ln2): the residual's gradient plus ln2's
    AlignedBuffer<Real> du = dx;
    const Real* ln2_in = c_.use_parallel_residual ? x : act_.mid.data() + l * nd;
    nn::layernorm_backward(du.data(), g(s.ln2_w), g(s.ln2_b), dn2.data(), ln2_in,
                           act_.mean2.data() + l * N, act_.rstd2.data() + l * N, p(s.ln2_w), N, D);
    // The attention's output gradient: dx (parallel: attn adds into the output) or du
    // (sequential: attn adds into mid).
    const AlignedBuffer<Real>& dattn = c_.use_parallel_residual ? dx : du;
    AlignedBuffer<Real> dheads(nd), dqkv(nd * 3), dn1(nd);
    nn::linear_backward<Real>(dheads.data(), g(s.dense_w), bias_grad(s.dense_b), dattn.data(),
                              heads, p(s.dense_w), N, D, D);
    attention_backward(dqkv.data(), dheads.data(), act_.qkv.data() + l * nd * 3,
                       act_.pattern.data() + l * std::size_t(batch) * H * T * T, rotary, batch, T);
    nn::linear_backward<Real>(dn1.data(), g(s.qkv_w), bias_grad(s.qkv_b), dqkv.data(), n1,
                              p(s.qkv_w), N, D, 3 * D);
    // The input's gradient: parallel dx + ln2's + ln1's (du holds dx + ln2's);
    // sequential du (= d mid) + ln1's.
    nn::layernorm_backward(du.data(), g(s.ln1_w), g(s.ln1_b), dn1.data(), x,
                           act_.mean1.data() + l * N, act_.rstd1.data() + l * N, p(s.ln1_w), N, D);
    dx.swap(du);
  }

  // dqkv from dheads, per (sequence, head); q and k are stored rotated, so their gradients are
  // rotated back (the transpose of the rotation) at the end.
  void attention_backward(Real* dqkv, const Real* dheads, const Real* qkv, const Real* pattern,
                          const RotaryTable& rotary, int batch, int T) {
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    const int rd = c_.rotary_ndims();
    parallel_for(std::int64_t(batch) * H, [&](std::int64_t bh) {
      const int b = int(bh / H), h = int(bh % H);
      const std::size_t head = std::size_t(b) * T * 3 * D + std::size_t(h) * 3 * Dh;
      const Real* base = qkv + head;
      Real* dbase = dqkv + head;
      for (int t = 0; t < T; ++t) std::fill_n(dbase + std::size_t(t) * 3 * D, 3 * Dh, Real(0));
      const Real* P = pattern + std::size_t(bh) * T * T;
      AlignedBuffer<Real> dscore(static_cast<std::size_t>(T));
      for (int i = 0; i < T; ++i) {
        const Real* row = P + std::size_t(i) * T;
        const Real* dout = dheads + (std::size_t(b) * T + i) * D + std::size_t(h) * Dh;
        // dP[j] = dout . v_j;  dv_j += P[i][j] dout
        Real weighted = 0;
        for (int j = 0; j <= i; ++j) {
          const Real* v = base + std::size_t(j) * 3 * D + 2 * Dh;
          Real* dv = dbase + std::size_t(j) * 3 * D + 2 * Dh;
          Real dp = 0;
          for (int e = 0; e < Dh; ++e) {
            dp += dout[e] * v[e];
            dv[e] += row[j] * dout[e];
          }
          dscore[j] = dp;
          weighted += dp * row[j];
        }
        // dS = P (dP - sum_j P dP) scale;  dq_i += dS k_j;  dk_j += dS q_i
        const Real* q = base + std::size_t(i) * 3 * D;
        Real* dq = dbase + std::size_t(i) * 3 * D;
        for (int j = 0; j <= i; ++j) {
          const Real ds = row[j] * (dscore[j] - weighted) * scale;
          const Real* k = base + std::size_t(j) * 3 * D + Dh;
          Real* dk = dbase + std::size_t(j) * 3 * D + Dh;
          for (int e = 0; e < Dh; ++e) {
            dq[e] += ds * k[e];
            dk[e] += ds * q[e];
          }
        }
      }
      if (rd > 0)
        for (int t = 0; t < T; ++t) {
          rotary.rotate_back(dbase + std::size_t(t) * 3 * D, t);
          rotary.rotate_back(dbase + std::size_t(t) * 3 * D + Dh, t);
        }
    });
  }

  NeoxConfig c_;
  int D, H, Dh, F, L, V;
  std::vector<TrainingTensor> tensors_;
  AlignedBuffer<Real> params_, grads_;
  std::size_t embed_in_ = 0, final_w_ = 0, final_b_ = 0, unembed_ = 0;
  std::vector<LayerSlots> layers_;
  Activations act_, other_act_;  // the current shape's; the previous shape's (carve)
};

}  // namespace emergent::neox
