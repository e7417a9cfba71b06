// model/model.hpp's Model<Mixer, S> on the device, for an ensemble of E members of one shape
// trained in lockstep: every op is one set of launches over all members (one grid over
// members x rows; strided-batched GEMMs over members, and over members x sequences x heads in
// the attention). The token mixer is the CPU mixer's device twin (cuda/mixer.cuh): dot
// attention (cuda/dot_attention.cuh), the causal MLP-Mixer (cuda/mlp_mixer.cuh) or Mamba
// (cuda/mamba.cuh), Gated DeltaNet (cuda/gated_deltanet.cuh) or RWKV's time mixing
// (cuda/rwkv.cuh); the channel block is the twin of the
// CPU Model's channel block under the same contract: the transformer's GELU MLP (cuda/mlp.cuh,
// the default) or RWKV's channel mixing (cuda/rwkv_channel_mix.cuh). Only the default channel
// block's twin comes with this header: a user includes the twins it trains (apps/device/
// ensemble.cpp all of them), so that an edit of one twin or its CPU mixer rebuilds only the
// units that train it; a twin not included stops the build at `device_twin<...>` (incomplete).
//
// Member e's parameters, gradients and AdamW moments are values [e * P, (e + 1) * P) of one
// device buffer each, laid out exactly as the CPU's Model lays out its one buffer (the offsets
// below are Model's own constants), so a member's slice is a CPU checkpoint and back.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <emergent/cuda/cross_entropy.cuh>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/embedding.cuh>
#include <emergent/cuda/layernorm.cuh>
#include <emergent/cuda/linear.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/mlp.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/mixers/mixer.hpp>
#include <emergent/model/model.hpp>
#include <emergent/nn/mlp.hpp>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

namespace emergent::cuda {

template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = ::emergent::GeluMlp>
class EnsembleModel {
 public:
  using Cpu = Model<MixerT, S, float, ChannelT>;  // the layout, and the CPU twin tests compare with
  using Mixer = typename device_twin<typename Cpu::Mixer>::type;
  static_assert(DeviceMixer<Mixer>);
  using Channel = typename device_twin<typename Cpu::Channel>::type;
  static_assert(DeviceMixer<Channel>);
  using Blocks = typename Cpu::Blocks;
  static constexpr int V = S.vocab, D = S.d_model, L = S.layers;
  static constexpr std::size_t P = Cpu::parameter_count;

  EnsembleModel(int members, int batch, int length)
      : members_(members), batch_(batch), length_(length) {
    require(members >= 1 && batch >= 1, "EnsembleModel", "members and batch must be at least 1");
    require(length >= 1 && length <= S.max_len, "EnsembleModel",
            "length " + std::to_string(length) +
                " is outside [1, max_len = " + std::to_string(S.max_len) + "] of this Shape");
    const std::size_t N = tokens();
    params.resize(P * members);
    grads.resize(P * members);
    inputs.resize(N);
    targets.resize(N);
    loss_weights.resize(std::size_t(members) * length);
    for (auto& r : residual_) r.resize(N * D);
    layers_.reserve(L);
    for (int l = 0; l < L; ++l) {
      Layer& a = layers_.emplace_back(geometry());
      for (auto* v : {&a.norm1, &a.residual_mid, &a.norm2}) v->resize(N * D);
      for (auto* v : {&a.mean1, &a.rstd1, &a.mean2, &a.rstd2}) v->resize(N);
    }
    mixer_scratch_.emplace(geometry());
    channel_scratch_.emplace(geometry());
    for (auto* v : {&final_norm_, &d_residual_, &d_norm_}) v->resize(N * D);
    for (auto* v : {&final_mean_, &final_rstd_, &token_loss_, &token_correct_}) v->resize(N);
    logits_.resize(N * V);
    probs_.resize(N * V);
    d_logits_.resize(N * V);
    losses_.resize(members);
    loss_scale_.resize(members);
  }

  std::size_t tokens() const { return std::size_t(members_) * batch_ * length_; }

  // Device buffers the caller fills: parameters [E * P], tokens [E, B, T], each member's loss
  // weights over positions [E, T] (the members of a mixed ensemble may train different tasks),
  // or after set_weights_per_token, over tokens [E, B, T].
  DeviceVector<float> params, grads;
  DeviceVector<std::int32_t> inputs, targets;
  DeviceVector<float> loss_weights;

  // Loss weights per token, [E, B, T] (a task whose learnable positions depend on the sampled
  // tokens, Dyck: cuda/cross_entropy.cuh), for loss_weights and the weights that
  // weighted_loss_on_device and weighted_accuracy_on_device take. Before the first step.
  void set_weights_per_token() {
    per_token_ = true;
    loss_weights.resize(tokens());
    loss_scale_.resize(std::size_t(members_) * batch_);
    sequence_means_.resize(std::size_t(members_) * batch_);
  }
  // With weights per token: each member's own count of sequences, [E] (the rest of its B rows are
  // padding with weight 0, as its positions past its own length: members of different lengths
  // and batches in one ensemble; cuda/cross_entropy.cuh). Before the first step.
  void set_member_batches(std::span<const int> batches) {
    require(per_token_ && batches.size() == std::size_t(members_), "EnsembleModel",
            "member batches need weights per token and one count per member");
    copy_to_device<int>(batches, member_batches_);
  }

  // The attention-bias intervention: member e adds strengths[e] * patterns[e] ([E, T, T]) to its
  // scores, or with patterns per sequence ([E, B, T, T], a task whose target moves with the
  // sequence) each sequence its own; all strengths 0 (the default) leave it off. Called again
  // with new patterns of the same size, it overwrites them in place (a captured step reads them).
  void set_bias(std::span<const float> patterns, std::span<const float> strengths) {
    const std::size_t TT = std::size_t(length_) * length_;
    require((patterns.size() == members_ * TT || patterns.size() == tokens() * length_) &&
                strengths.size() == std::size_t(members_),
            "EnsembleModel::set_bias",
            "needs a T x T pattern per member or per sequence, and a strength per member");
    biased_ = std::any_of(strengths.begin(), strengths.end(), [](float c) { return c != 0; });
    per_sequence_bias_ = patterns.size() != members_ * TT;
    copy_to_device<float>(patterns, bias_patterns_);
    copy_to_device<float>(strengths, bias_strengths_);
  }

  // Each member's weighted loss (the host waits for them); keeps what backward needs.
  std::vector<double> forward() {
    forward_on_device();
    return copy_to_host(losses_);
  }

  // The forward pass, each member's weighted loss left on the device (losses()); nothing waits.
  void forward_on_device() {
    const std::int64_t rows = std::int64_t(batch_) * length_, N = std::int64_t(tokens());
    const float* p = raw(params);
    {
      OpScope scope("embedding.forward");
      embedding_forward(raw(residual_[0]), raw(inputs), p + Cpu::tok, p + Cpu::pos, P, members_,
                        batch_, length_, D);
    }
    for (int l = 0; l < L; ++l) {
      Layer& a = layers_[l];
      const float* pl = p + Cpu::layer_offset(l);
      const float* pn = p + Cpu::norm2_offset(l);
      const float* pc = p + Cpu::channel_offset(l);
      {
        OpScope scope("layernorm.forward");
        layernorm_forward(raw(a.norm1), raw(a.mean1), raw(a.rstd1), raw(residual_[l]),
                          pl + Blocks::ln1_w, pl + Blocks::ln1_b, P, members_, rows, D);
      }
      // residual_mid = residual + mixer(norm1)
      Mixer::forward(
          p + Cpu::mixer_offset(l), raw(a.norm1), raw(a.residual_mid), raw(residual_[l]), a.mixer,
          *mixer_scratch_, geometry(),
          biased_ ? AttentionBias{raw(bias_patterns_), raw(bias_strengths_), per_sequence_bias_}
                  : AttentionBias{});
      {
        OpScope scope("layernorm.forward");
        layernorm_forward(raw(a.norm2), raw(a.mean2), raw(a.rstd2), raw(a.residual_mid),
                          pn + Blocks::ln2_w, pn + Blocks::ln2_b, P, members_, rows, D);
      }
      // residual_{l+1} = residual_mid + channel(norm2)
      Channel::forward(pc, raw(a.norm2), raw(residual_[l + 1]), raw(a.residual_mid), a.channel,
                       *channel_scratch_, geometry(), AttentionBias{});
    }
    {
      OpScope scope("layernorm.forward");
      layernorm_forward(raw(final_norm_), raw(final_mean_), raw(final_rstd_), raw(residual_[L]),
                        p + Cpu::lnf_w, p + Cpu::lnf_b, P, members_, rows, D);
    }
    {
      OpScope scope("head.forward");
      linear_forward(raw(logits_), raw(final_norm_), p + Cpu::head_w, nullptr, P, members_, rows, D,
                     V);
    }
    {
      OpScope scope("cross_entropy.forward");
      cross_entropy_forward(raw(probs_), raw(token_loss_), raw(token_correct_), raw(logits_),
                            raw(targets), N, V);
    }
    OpScope scope("loss.member_means");
    member_means(raw(losses_), 1, raw(token_loss_), raw(loss_weights));
  }

  // Whether the mixer keeps attention probabilities (dot attention: its twin's [E, B, H, T, T]
  // per layer), as the CPU's KeepsAttention (mixers/mixer.hpp) says of the CPU mixer.
  static constexpr bool kKeepsAttention = KeepsAttention<typename Cpu::Mixer>;

  // Each member's attention of the last forward averaged over its batch (its own sequences, with
  // member batches), in double in batch order (analysis/attention_entropy.hpp's
  // batch_averaged_pattern on each member's slice): [E][layer][head][query][key] flattened, copied
  // to the host (it waits); empty for a mixer without attention probabilities.
  std::vector<double> batch_averaged_attention() {
    if constexpr (!kKeepsAttention) {
      return {};
    } else {
      OpScope scope("attention.batch_average");
      const int B = batch_, T = length_, H = S.heads;
      const std::int64_t per_sample = std::int64_t(H) * T * T;
      DeviceVector<double> out(std::size_t(members_) * L * per_sample);
      double* averaged = raw(out);
      const int* batches = member_batches();
      for (int l = 0; l < L; ++l) {
        const float* att = raw(layers_[l].mixer.att);
        for_each_index(members_ * per_sample, [=] EMERGENT_HD(std::int64_t i) {
          const std::int64_t e = i / per_sample, r = i % per_sample;
          const int own = batches ? batches[e] : B;  // its own sequences, not the padding
          double sum = 0;
          for (int b = 0; b < own; ++b) sum += att[(e * B + b) * per_sample + r];
          averaged[(e * L + l) * per_sample + r] = sum / own;
        });
      }
      return copy_to_host(out);
    }
  }

  // Each layer's attention of the last forward, every sequence's [E, B, H, T, T], copied to the
  // host (it waits): what the analysis of a task with targets per sequence reads (one map per
  // sequence against its own target); empty for a mixer without attention probabilities.
  std::vector<std::vector<float>> sequence_attention() {
    std::vector<std::vector<float>> layers;
    if constexpr (kKeepsAttention)
      for (int l = 0; l < L; ++l) layers.push_back(copy_to_host(layers_[l].mixer.att));
    return layers;
  }

  // [E] each member's loss of the last forward, on the device.
  const double* losses() const { return raw(losses_); }

  // out[e * out_stride] = member e's mean per-token loss (or accuracy) of the last forward under
  // weights [E, T] (or per token [E, B, T]), on the device.
  void weighted_loss_on_device(double* out, std::int64_t out_stride,
                               const DeviceVector<float>& weights) {
    OpScope scope("loss.member_means");
    member_means(out, out_stride, raw(token_loss_), raw(weights));
  }
  void weighted_accuracy_on_device(double* out, std::int64_t out_stride,
                                   const DeviceVector<float>& weights) {
    OpScope scope("loss.member_means");
    member_means(out, out_stride, raw(token_correct_), raw(weights));
  }

  // grads += dL/dparams of the last forward's loss, for every member.
  void backward() {
    const std::int64_t rows = std::int64_t(batch_) * length_, N = std::int64_t(tokens());
    const float* p = raw(params);
    float* g = raw(grads);
    {
      OpScope scope("cross_entropy.backward");
      loss_scale(raw(loss_scale_), raw(loss_weights), members_, batch_, length_, per_token_);
      cross_entropy_backward(raw(d_logits_), raw(probs_), raw(targets), raw(loss_weights), N,
                             batch_, length_, V, raw(loss_scale_), per_token_, member_batches());
    }
    {
      OpScope scope("head.backward");
      linear_backward(raw(d_norm_), g + Cpu::head_w, nullptr, raw(d_logits_), raw(final_norm_),
                      p + Cpu::head_w, P, members_, rows, D, V);
    }
    {
      OpScope scope("zero_d_residual");
      fill(raw(d_residual_), std::int64_t(d_residual_.size()), 0.0f);
    }
    {
      OpScope scope("layernorm.backward");
      layernorm_backward(raw(d_residual_), g + Cpu::lnf_w, g + Cpu::lnf_b, raw(d_norm_),
                         raw(residual_[L]), raw(final_mean_), raw(final_rstd_), p + Cpu::lnf_w, P,
                         members_, rows, D);
    }
    for (int l = L - 1; l >= 0; --l) {
      Layer& a = layers_[l];
      const std::size_t lo = Cpu::layer_offset(l), no = Cpu::norm2_offset(l),
                        co = Cpu::channel_offset(l), mo = Cpu::mixer_offset(l);
      Channel::backward(p + co, g + co, raw(a.norm2), raw(d_residual_), raw(d_norm_), a.channel,
                        *channel_scratch_, geometry());
      {
        OpScope scope("layernorm.backward");
        layernorm_backward(raw(d_residual_), g + no + Blocks::ln2_w, g + no + Blocks::ln2_b,
                           raw(d_norm_), raw(a.residual_mid), raw(a.mean2), raw(a.rstd2),
                           p + no + Blocks::ln2_w, P, members_, rows, D);
      }
      Mixer::backward(p + mo, g + mo, raw(a.norm1), raw(d_residual_), raw(d_norm_), a.mixer,
                      *mixer_scratch_, geometry());
      {
        OpScope scope("layernorm.backward");
        layernorm_backward(raw(d_residual_), g + lo + Blocks::ln1_w, g + lo + Blocks::ln1_b,
                           raw(d_norm_), raw(residual_[l]), raw(a.mean1), raw(a.rstd1),
                           p + lo + Blocks::ln1_w, P, members_, rows, D);
      }
    }
    {
      OpScope scope("embedding.backward");
      embedding_backward(g + Cpu::tok, g + Cpu::pos, raw(d_residual_), raw(inputs), P, members_, V,
                         batch_, length_, D);
    }
  }

  void zero_gradients() {
    OpScope scope("zero_gradients");
    fill(raw(grads), std::int64_t(grads.size()), 0.0f);
  }

 private:
  struct Layer {
    explicit Layer(const MixerGeometry& geometry) : mixer(geometry), channel(geometry) {}
    DeviceVector<float> norm1, mean1, rstd1, residual_mid;
    typename Mixer::Activations mixer;
    DeviceVector<float> norm2, mean2, rstd2;
    typename Channel::Activations channel;
  };

  MixerGeometry geometry() const { return {members_, batch_, length_, std::int64_t(P)}; }
  const int* member_batches() const {
    return member_batches_.size() > 0 ? raw(member_batches_) : nullptr;
  }
  // out[e * out_stride] = member e's mean of `values` [E, B, T] under `weights`
  // (cross_entropy.cuh's weighted_member_means in this ensemble's layout: per token or not, its
  // members' own batches).
  void member_means(double* out, std::int64_t out_stride, const float* values,
                    const float* weights) {
    weighted_member_means(out, out_stride, values, weights, members_, batch_, length_, per_token_,
                          member_batches(), per_token_ ? raw(sequence_means_) : nullptr);
  }

  int members_, batch_, length_;
  bool biased_ = false, per_sequence_bias_ = false, per_token_ = false;
  DeviceVector<float> bias_patterns_, bias_strengths_;
  DeviceVector<int> member_batches_;  // [E] with padded members, else empty
  std::array<DeviceVector<float>, L + 1> residual_;
  std::vector<Layer> layers_;
  std::optional<typename Mixer::Scratch> mixer_scratch_;      // shared by the layers
  std::optional<typename Channel::Scratch> channel_scratch_;  // likewise
  DeviceVector<float> final_norm_, final_mean_, final_rstd_, logits_, probs_, token_loss_,
      token_correct_;
  DeviceVector<float> d_residual_, d_norm_, d_logits_;
  DeviceVector<double> losses_;
  DeviceVector<float> loss_scale_;
  DeviceVector<double> sequence_means_;  // [E * B] with weights per token
};

}  // namespace emergent::cuda
