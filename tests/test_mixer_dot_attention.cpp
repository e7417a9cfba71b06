// DotAttention through the generic mixer suite (tests/mixer_suite.hpp), the same checks the
// other mixers pass. Its reference is the qkv Linear, reference::dot_attention and the out
// Linear. (test_model_reference.cpp also checks it inside whole models, with the bias.)
#include <doctest/doctest.h>

#include <emergent/mixers/dot_attention.hpp>
#include <emergent/reference/dot_attention.hpp>
#include <emergent/reference/linear.hpp>

#include "mixer_suite.hpp"

namespace {

namespace ref = emergent::reference;

struct DotAttentionReference {
  int heads;

  ref::Matrix forward(const ref::MixerParameters& p, const ref::Matrix& x) const {
    const ref::Matrix qkv = ref::linear_forward(x, p.at("qkv.weight"), p.at("qkv.bias").row(0).transpose());
    const ref::Matrix o = ref::dot_attention_forward(qkv, heads, ref::Matrix(), 0.0).out;
    return ref::linear_forward(o, p.at("out.weight"), p.at("out.bias").row(0).transpose());
  }

  ref::MixerGradients backward(const ref::MixerParameters& p, const ref::Matrix& x, const ref::Matrix& dy) const {
    ref::MixerGradients g{ref::Matrix(), ref::zeros_like(p)};
    const ref::Matrix qkv = ref::linear_forward(x, p.at("qkv.weight"), p.at("qkv.bias").row(0).transpose());
    const ref::DotAttentionOutput att = ref::dot_attention_forward(qkv, heads, ref::Matrix(), 0.0);
    ref::Vector d_out_bias = ref::Vector::Zero(dy.cols()), d_qkv_bias = ref::Vector::Zero(qkv.cols());
    const ref::Matrix d_o = ref::linear_backward(dy, att.out, p.at("out.weight"), g.dparams["out.weight"], d_out_bias);
    const ref::Matrix d_qkv = ref::dot_attention_backward(d_o, qkv, heads, att.probabilities);
    g.dx = ref::linear_backward(d_qkv, x, p.at("qkv.weight"), g.dparams["qkv.weight"], d_qkv_bias);
    g.dparams["out.bias"] = d_out_bias.transpose();
    g.dparams["qkv.bias"] = d_qkv_bias.transpose();
    return g;
  }
};

constexpr emergent::Shape kShape{.vocab = 5, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 16, .max_len = 80};

}  // namespace

TEST_CASE("mixer suite: DotAttention") {
  // T = 70 crosses from the direct path (T <= 64) to the blocked one.
  mixer_suite::run_all<emergent::DotAttention, kShape>(DotAttentionReference{kShape.heads}, {1, 5, 17, 70});
}
