// The CUDA-only kernels against their Thrust twins (use_thrust_twins(), cuda/device_system.cuh),
// on fresh random inputs at the sizes the ensembles run (rows of 128 and of an awkward 13; score
// rows of 31 and 255 keys, with the bias): LayerNorm's forward and its backward dx, the causal
// softmax and its backward. Under CUDA the two differ only in the order of their sums (warp
// butterflies against a loop), so they agree to float rounding: bounded at 1e-6 relative. Under
// OpenMP both are the twin, and the comparison is exact.
#include <doctest/doctest.h>

#include <cstdint>
#include <emergent/cuda/dot_attention.cuh>
#include <emergent/cuda/layernorm.cuh>
#include <functional>
#include <vector>

#include "device_checks.hpp"

namespace {

using namespace device_checks;
namespace cuda = emergent::cuda;
using cuda::copy_to_host;
using cuda::raw;

constexpr double kTwinTolerance = 1e-6;

// Runs `op` with the twins and with the CUDA kernels, from the same inputs (`reset` restores
// them), and returns the relative difference of what `result` reads after each.
double twin_difference(const std::function<void()>& reset, const std::function<void()>& op,
                       const std::function<std::vector<float>()>& result) {
  cuda::use_thrust_twins() = true;
  reset();
  op();
  const std::vector<float> twin = result();
  cuda::use_thrust_twins() = false;
  reset();
  op();
  const std::vector<float> kernel = result();
  REQUIRE(twin.size() == kernel.size());
  std::size_t unwritten = 0;  // outputs are poisoned with NaN first where that matters
  for (float v : kernel) unwritten += v != v;
  REQUIRE(unwritten == 0);
  const std::vector<double> expected(twin.begin(), twin.end());
  return relative_error(kernel, 0, expected.data(), expected.size());
}

TEST_CASE("CUDA kernels against their Thrust twins: LayerNorm forward and backward") {
  for (int dim : {128, 13}) {
    CAPTURE(dim);
    const int members = 3, rows = 37;
    const std::int64_t stride = 2 * dim + 5;
    const std::vector<float> params = random_floats(members * stride, 11, 1.0),
                             x = random_floats(std::size_t(members) * rows * dim, 12, 3.0),
                             dy = random_floats(x.size(), 13), dx0 = random_floats(x.size(), 14);
    DeviceVector<float> p = to_device(params), xd = to_device(x), dyd = to_device(dy), y(x.size()),
                        mean(members * rows), rstd(members * rows), dx(x.size()), g(params.size());
    auto forward = [&] {
      cuda::layernorm_forward(raw(y), raw(mean), raw(rstd), raw(xd), raw(p), raw(p) + dim, stride,
                              members, rows, dim);
    };
    auto poison = [&] {
      cuda::fill(raw(y), std::int64_t(y.size()), NAN);
      cuda::fill(raw(mean), std::int64_t(mean.size()), NAN);
    };
    CHECK(twin_difference(poison, forward, [&] { return copy_to_host(y); }) < kTwinTolerance);
    CHECK(twin_difference(poison, forward, [&] { return copy_to_host(mean); }) < kTwinTolerance);
    forward();
    auto reset_dx = [&] {
      dx = to_device(dx0);
      cuda::fill(raw(g), std::int64_t(g.size()), 0.0f);
    };
    auto backward = [&] {
      cuda::layernorm_backward(raw(dx), raw(g), raw(g) + dim, raw(dyd), raw(xd), raw(mean),
                               raw(rstd), raw(p), stride, members, rows, dim);
    };
    CHECK(twin_difference(reset_dx, backward, [&] { return copy_to_host(dx); }) < kTwinTolerance);
  }
}

TEST_CASE("CUDA kernels against their Thrust twins: causal softmax and its backward") {
  for (const bool per_sequence : {false, true})
    for (int T : {31, 255}) {
      CAPTURE(T);
      CAPTURE(per_sequence);
      // each member its own strength, and its own pattern or one per sequence (4 of 2 heads)
      const std::int64_t problems = 24, members = 3, heads = 2;
      const std::vector<float> scores = random_floats(problems * T * T, 21, 4.0),
                               patterns = random_floats(
                                   (per_sequence ? problems / heads : members) * T * T, 22, 1.0),
                               d_att = random_floats(scores.size(), 23);
      DeviceVector<float> att(scores.size()),
          bias = to_device(patterns), strengths = to_device({1.5f, 0.0f, -2.0f}), ds(scores.size());
      auto reset = [&] { att = to_device(scores); };
      auto softmax = [&] {
        cuda::causal_softmax(raw(att), {raw(bias), raw(strengths), per_sequence}, problems,
                             problems / members, T, heads);
      };
      CHECK(twin_difference(reset, softmax, [&] { return copy_to_host(att); }) < kTwinTolerance);
      reset();
      softmax();
      auto reset_ds = [&] { ds = to_device(d_att); };
      auto backward = [&] { cuda::softmax_backward(raw(ds), raw(att), 0.25f, problems, T); };
      CHECK(twin_difference(reset_ds, backward, [&] { return copy_to_host(ds); }) < kTwinTolerance);
    }
}

}  // namespace
