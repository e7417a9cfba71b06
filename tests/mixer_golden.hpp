// A mixer against its outside oracle, run by each mixer's test (tests/test_mixer_<name>.cpp):
// forward output and every gradient (input and parameters) of one layer, as
// tests/golden/make_mixer_golden.py computed them with Hugging Face transformers' layers (Mamba,
// RWKV time and channel mixing, the gated delta rule and its gated RMSNorm) and plain PyTorch (the
// MLP-Mixer's masked matrix). The script's header says where the fixture bridges a deliberate
// difference of layout.
//
// Tolerances: error = max |ours - theirs| / max |theirs| per tensor. The oracles compute parts in
// float32 even in their float64 run (see the script), and the fixtures hold float32. Measured
// (EMERGENT_REPORT_ERRORS=1 prints the worst error per fixture): double 4e-8 to 9e-8, Gated
// DeltaNet 2.1e-6; float 2.8e-7 to 6.4e-7, Gated DeltaNet 6.9e-6. Tolerances: double 1e-6, float
// 1e-5, 10x those for Gated DeltaNet's longer chain. A wrong term anywhere gives errors of order
// 1e-2 to 1.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <emergent/core/shape.hpp>
#include <emergent/io/safetensors.hpp>
#include <string>
#include <vector>

#include "fixture_error.hpp"
#include "mixer_suite.hpp"

#ifndef EMERGENT_SOURCE_DIR
#error "EMERGENT_SOURCE_DIR must be defined (CMakeLists.txt)"
#endif

namespace mixer_golden {

using mixer_suite::FastRun;
using mixer_suite::run_fast;

// The fixtures' sizes (make_mixer_golden.py): B = 2, T = 21, D = 16, 2 heads, d_ff 24, max_len 24.
constexpr emergent::Shape kGoldenShape{
    .vocab = 2, .d_model = 16, .heads = 2, .layers = 1, .d_ff = 24, .max_len = 24};
constexpr int kBatch = 2, kLength = 21;

using fixture_error::relative_error;

template <class Real>
std::vector<double> as_double(const std::vector<Real>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Runs Mixer on the fixture's input and weights and compares y, dx and every parameter gradient.
template <class Mixer>
void check_against_fixture(const std::string& file, double tolerance) {
  using Real = typename Mixer::Scalar;
  const emergent::SafetensorsFile fixture(std::string(EMERGENT_SOURCE_DIR) +
                                          "/tests/golden/mixers/" + file);
  const auto to_real = [](const std::vector<float>& v) {
    return std::vector<Real>(v.begin(), v.end());
  };
  std::vector<Real> params(Mixer::layout.total, Real(0));
  for (std::size_t k = 0; k < Mixer::layout.count; ++k) {
    const emergent::TensorSpec& spec = Mixer::layout.specs[k];
    const std::vector<float> values = fixture.read_f32("param." + std::string(spec.name));
    REQUIRE_MESSAGE(values.size() == spec.size(), std::string(spec.name));
    std::copy(values.begin(), values.end(),
              params.begin() + static_cast<std::ptrdiff_t>(Mixer::layout.offsets[k]));
  }
  const std::vector<Real> x = to_real(fixture.read_f32("x")), dy = to_real(fixture.read_f32("dy"));
  const FastRun<Mixer> run = run_fast<Mixer>(params, x, dy, kBatch, kLength);
  CAPTURE(file);
  const double y_error = relative_error(as_double(run.y), fixture.read_f32("y"));
  const double dx_error = relative_error(as_double(run.dx), fixture.read_f32("dx"));
  CHECK(y_error < tolerance);
  CHECK(dx_error < tolerance);
  double worst = std::max(y_error, dx_error);
  for (std::size_t k = 0; k < Mixer::layout.count; ++k) {
    const emergent::TensorSpec& spec = Mixer::layout.specs[k];
    const auto begin = run.grads.begin() + static_cast<std::ptrdiff_t>(Mixer::layout.offsets[k]);
    const std::vector<double> grad(begin, begin + static_cast<std::ptrdiff_t>(spec.size()));
    const double error = relative_error(grad, fixture.read_f32("grad." + std::string(spec.name)));
    CAPTURE(std::string(spec.name));
    CAPTURE(error);
    CHECK(error < tolerance);
    worst = std::max(worst, error);
  }
  if (std::getenv("EMERGENT_REPORT_ERRORS"))
    MESSAGE(file << " (" << sizeof(Real) * 8 << "-bit): worst relative error " << worst);
}

template <template <emergent::Shape, class> class Mixer>
void check_both(const std::string& file, double scale = 1) {
  SUBCASE("double") { check_against_fixture<Mixer<kGoldenShape, double>>(file, 1e-6 * scale); }
  SUBCASE("float") { check_against_fixture<Mixer<kGoldenShape, float>>(file, 1e-5 * scale); }
}

}  // namespace mixer_golden
