// DotAttention through the generic mixer suite (tests/mixer_suite.hpp), the same checks the
// other mixers pass. Its reference is the qkv Linear, reference::dot_attention and the out
// Linear (tests/dot_attention_checks.hpp). test_model_reference.cpp also checks it inside whole
// models, with the bias. This build is portable: beyond T = 64 it runs the Eigen blocked path;
// tests/native/test_causal_attention_long.cpp runs the same checks on the AVX-512 kernels.
// Then the two generic forms of causal attention alone (tests/reference_checks.hpp), each at the
// lengths where select_causal_attention takes it and where it takes the other one, and the rule.
#include <doctest/doctest.h>

#include <emergent/mixers/causal_attention_blocked.hpp>
#include <emergent/mixers/causal_attention_direct.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <string>
#include <type_traits>

#include "dot_attention_checks.hpp"
#include "mixer_suite.hpp"
#include "reference_checks.hpp"

namespace {

using dot_attention_checks::DotAttentionReference;

constexpr emergent::Shape kShape{
    .vocab = 5, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 16, .max_len = 80};
using dot_attention_checks::kHead16;

}  // namespace

TEST_CASE("mixer suite: DotAttention") {
  // T = 70 crosses from the direct path (T <= 64) to the blocked one.
  mixer_suite::run_all<emergent::DotAttention, kShape>(DotAttentionReference{kShape.heads},
                                                       {1, 5, 17, 70});
}

TEST_CASE(
    "DotAttention with the attention bias on long sequences: reference, att, row sums, "
    "determinism") {
  dot_attention_checks::check_mixer_with_bias<kShape>(2, 70, 0.7);
  for (int T : {65, 129, 200}) dot_attention_checks::check_mixer_with_bias<kHead16>(2, T, 0.7);
}

namespace {

using reference_checks::AttentionCase;
using reference_checks::check_attention_form;

// Form<Real, Dh> alone at lengths on both sides of the selector's switch (64), with and without
// the bias: d_head 1 and 3 (no SIMD packet), 16 (the training shapes'); double and float.
template <template <class, int> class Form>
void check_generic_form(std::initializer_list<int> lengths) {
  for (int T : lengths)
    for (bool bias : {false, true}) {
      check_attention_form<Form, double, 1>(AttentionCase{T, bias}, 1e-12);
      check_attention_form<Form, double, 3>(AttentionCase{T, bias}, 1e-12);
      check_attention_form<Form, double, 16>(AttentionCase{T, bias, 0.7, 1.5}, 1e-12);
      check_attention_form<Form, float, 16>(AttentionCase{T, bias, 0.7, 1.5}, 1e-5);
    }
}

template <class Real, int Dh>
std::string selected(int T) {
  std::string name;
  emergent::select_causal_attention<Real, Dh>(
      T, [&]<class Form>(std::type_identity<Form>) { name = Form::name; });
  return name;
}

}  // namespace

TEST_CASE("causal attention form: direct, alone against the reference") {
  // Up to 64 the selector takes it here; from 65 on the blocked form (129, 200: past one and
  // two query blocks of 128).
  check_generic_form<emergent::CausalAttentionDirect>({1, 2, 17, 64, 65, 129, 200});
}

TEST_CASE("causal attention form: blocked, alone against the reference") {
  // From 65 on the selector takes it here; up to 64 the direct form. 128, 129, 257: at and past
  // the query blocks' edges.
  check_generic_form<emergent::CausalAttentionBlocked>({1, 2, 17, 64, 65, 128, 129, 200, 257});
}

TEST_CASE("select_causal_attention: short forms up to T = 64, long ones after") {
  CHECK(selected<double, 16>(1) == "direct");
  CHECK(selected<double, 16>(64) == "direct");
  CHECK(selected<double, 16>(65) == "blocked");
  CHECK(selected<float, 3>(64) == "direct");
  CHECK(selected<float, 3>(65) == "blocked");
  const bool kernels = emergent::CausalAttentionShort<float, 16>::available;
  CHECK(kernels == emergent::CausalAttentionLong<float, 16>::available);
  CHECK(selected<float, 16>(64) == (kernels ? "short" : "direct"));
  CHECK(selected<float, 16>(65) == (kernels ? "long" : "blocked"));
}

TEST_CASE("the mixer catalog's dot_attention line matches the type") {
  mixer_suite::check_catalog_line<emergent::DotAttention>("dot_attention");
}
