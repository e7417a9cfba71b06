// The device model beside its mixers (whose own checks are
// tests/device/test_device_mixer_<name>.cpp): the opt-in tf32 precision of dot attention's ensemble
// against the CPU model, the device samplers (linear map, automaton, padded) against the tasks'
// own, the ensemble AdamW against AdamW, and the same bits on a rerun.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <emergent/cuda/adamw.cuh>
#include <emergent/cuda/cellular_automaton.cuh>
#include <emergent/cuda/dot_attention.cuh>
#include <emergent/cuda/linear_map.cuh>
#include <emergent/cuda/model.cuh>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/optim/adamw.hpp>
#include <emergent/tasks/cellular_automaton.hpp>
#include <emergent/tasks/linear_map.hpp>
#include <span>
#include <vector>

#include "device_checks.hpp"
#include "device_mixer_checks.hpp"

namespace {

using namespace device_checks;
using device_mixer_checks::check_ensemble_against_cpu;
using device_mixer_checks::Curves;
using device_mixer_checks::decay_ranges;
using device_mixer_checks::initial_parameters;
using device_mixer_checks::train_on_device;
using device_mixer_shapes::kEnsembleShape;
using device_mixer_shapes::kTrainingShape;
namespace cuda = emergent::cuda;
using cuda::copy_to_host;
using cuda::raw;
using emergent::DotAttention;
using emergent::Shape;

#if EMERGENT_DEVICE_IS_CUDA
// The opt-in tf32 precision (TF32 inputs to the tensor cores, float accumulation: about 3e-4
// relative per product) against the same float CPU model: loss within 1e-3, every gradient tensor
// within 1e-2, relative. (The OpenMP build has fp32 only.)
TEST_CASE("device ensemble in tf32: each member's loss and gradients within tf32's tolerance") {
  struct Restore {
    ~Restore() { cuda::gemm_precision() = cuda::Precision::fp32; }
  } restore;
  cuda::gemm_precision() = cuda::Precision::tf32;
  check_ensemble_against_cpu<DotAttention, kEnsembleShape>(1e-3, 1e-2);
}
#endif

TEST_CASE("device linear-map sampler: every member's batch is LinearMap::sample's") {
  const emergent::LinearMap task(13, 4, 99);
  const cuda::DeviceLinearMap device(task);
  const std::vector<std::uint64_t> seeds = {0, 7, (std::uint64_t(1) << 40) + 3};
  cuda::DeviceVector<std::uint64_t> seeds_device;
  cuda::copy_to_device<std::uint64_t>(seeds, seeds_device);
  const int B = 9, T = task.length();
  for (std::uint64_t step : {std::uint64_t(0), std::uint64_t(5), std::uint64_t(1) << 33}) {
    CAPTURE(step);
    cuda::DeviceVector<std::int32_t> inputs(seeds.size() * B * T), targets(inputs.size());
    device.sample(raw(seeds_device), int(seeds.size()), step, B, raw(inputs), raw(targets));
    const auto in_host = copy_to_host(inputs), out_host = copy_to_host(targets);
    for (std::size_t e = 0; e < seeds.size(); ++e) {
      std::vector<std::int32_t> in(B * T), out(B * T);
      task.sample(seeds[e], step, B, in, out);
      CHECK(std::equal(in.begin(), in.end(), in_host.begin() + e * B * T));
      CHECK(std::equal(out.begin(), out.end(), out_host.begin() + e * B * T));
    }
  }
}

TEST_CASE("device automaton sampler: every member's batch is CellularAutomaton::sample's") {
  // three automata of one length (23): S x T = 4 x 6, 2 x 12 and 8 x 3, the last with 3 colours,
  // a window of 5 and 3 applications between recorded states; each member at its own step
  const emergent::CellularAutomaton a(4, 6), b(2, 12, 4, 3, 2, 16, 5), c(8, 3, 3, 5, 3, 8, 9);
  const std::vector<const emergent::CellularAutomaton*> tasks = {&a, &b, &c};
  const int B = 7, T = a.length();
  const cuda::DeviceCellularAutomaton device(tasks, B);
  const std::vector<std::uint64_t> seeds = {0, 7, (std::uint64_t(1) << 40) + 3},
                                   steps = {0, 5, std::uint64_t(1) << 33};
  DeviceVector<std::uint64_t> seeds_device, steps_device;
  cuda::copy_to_device<std::uint64_t>(seeds, seeds_device);
  cuda::copy_to_device<std::uint64_t>(steps, steps_device);
  cuda::DeviceVector<std::int32_t> inputs(seeds.size() * B * T), targets(inputs.size());
  device.sample(raw(seeds_device), int(seeds.size()), raw(steps_device), B, raw(inputs),
                raw(targets));
  const auto in_host = copy_to_host(inputs), out_host = copy_to_host(targets);
  for (std::size_t e = 0; e < seeds.size(); ++e) {
    CAPTURE(e);
    std::vector<std::int32_t> in(B * T), out(B * T);
    tasks[e]->sample(seeds[e], steps[e], B, in, out);
    CHECK(std::equal(in.begin(), in.end(), in_host.begin() + e * B * T));
    CHECK(std::equal(out.begin(), out.end(), out_host.begin() + e * B * T));
  }
  const emergent::CellularAutomaton other_length(5, 6);
  const std::vector<const emergent::CellularAutomaton*> unequal = {&a, &other_length};
  CHECK_THROWS_WITH_AS(cuda::DeviceCellularAutomaton(unequal, B),
                       doctest::Contains("sequence lengths"), emergent::Error);
}

// Member e's own batch [B_e, T_e] written into the corner of its block [B, T] of `tokens` by a
// padded sampler; every other value is still `padding`.
void check_padded_block(const std::vector<std::int32_t>& tokens, std::size_t e, int B, int T,
                        const std::vector<std::int32_t>& own, int own_batch, int own_length,
                        std::int32_t padding) {
  CAPTURE(e);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const std::int32_t value = tokens[(e * B + b) * T + t];
      if (b < own_batch && t < own_length)
        CHECK(value == own[std::size_t(b) * own_length + t]);
      else
        CHECK(value == padding);
    }
}

TEST_CASE("padded device samplers: each member's own batch in its corner, the padding as it was") {
  const std::vector<std::uint64_t> seeds = {3, 11, 5}, steps = {2, 9, 0};
  DeviceVector<std::uint64_t> seeds_device, steps_device;
  cuda::copy_to_device<std::uint64_t>(seeds, seeds_device);
  cuda::copy_to_device<std::uint64_t>(steps, steps_device);
  const std::vector<int> batches = {6, 4, 5};
  const int B = 6;
  const std::int32_t padding = -7;  // never a token: what the samplers must not touch
  auto run = [&](const auto& device, const auto& tasks) {
    const int T = device.length();
    DeviceVector<std::int32_t> inputs(seeds.size() * B * T, padding),
        targets(inputs.size(), padding);
    device.sample(raw(seeds_device), int(seeds.size()), raw(steps_device), B, raw(inputs),
                  raw(targets));
    const auto in_host = copy_to_host(inputs), out_host = copy_to_host(targets);
    for (std::size_t e = 0; e < seeds.size(); ++e) {
      const int length = tasks[e]->length();
      std::vector<std::int32_t> in(std::size_t(batches[e]) * length), out(in.size());
      tasks[e]->sample(seeds[e], steps[e], batches[e], in, out);
      check_padded_block(in_host, e, B, T, in, batches[e], length, padding);
      check_padded_block(out_host, e, B, T, out, batches[e], length, padding);
    }
  };
  // linear maps of S = 4, 6 and 5 (7, 11 and 9 positions)
  const emergent::LinearMap m4(4, 2, 1), m6(6, 3, 2), m5(5, 5, 3);
  const std::vector<const emergent::LinearMap*> maps = {&m4, &m6, &m5};
  const cuda::DeviceLinearMap device_maps(maps, batches);
  CHECK(device_maps.length() == 11);
  run(device_maps, maps);
  // automata of 23, 15 and 17 positions (S x T = 4 x 6, 2 x 8 and 3 x 6 with 3 colours)
  const emergent::CellularAutomaton a(4, 6), b(2, 8), c(3, 6, 3, 3, 1, 8, 4);
  const std::vector<const emergent::CellularAutomaton*> automata = {&a, &b, &c};
  const cuda::DeviceCellularAutomaton device_automata(automata, B, batches);
  CHECK(device_automata.length() == 23);
  run(device_automata, automata);
  const std::vector<const emergent::LinearMap*> unequal = {&m4, &m6};
  CHECK_THROWS_WITH_AS(cuda::DeviceLinearMap{unequal}, doctest::Contains("state sizes differ"),
                       emergent::Error);
}

template <Shape S>
void check_adamw_against_cpu() {
  const int E = 2;
  const std::size_t n = emergent::Model<DotAttention, S, float>::parameter_count;
  const emergent::AdamWConfig config{0.9, 0.99, 1e-8, 0.1, 1.0};
  std::vector<float> params = initial_parameters<DotAttention, S>(E, 3);
  cuda::EnsembleAdamW device(config, decay_ranges<DotAttention, S>(), n, E);
  DeviceVector<float> p = to_device(params);
  std::vector<emergent::AdamW<float>> cpu(
      E, emergent::AdamW<float>(config, decay_ranges<DotAttention, S>(), n));
  for (int step = 0; step < 3; ++step) {
    std::vector<float> grads = random_floats(E * n, 50 + step, 0.01);
    for (std::size_t i = n; i < 2 * n; ++i) grads[i] *= 100;  // member 1 is clipped
    DeviceVector<float> g = to_device(grads);
    const std::vector<double> norms = device.step(raw(p), raw(g), 1e-2);
    for (int e = 0; e < E; ++e) {
      const double norm = cpu[e].step(std::span<float>(params).subspan(e * n, n),
                                      std::span<const float>(grads).subspan(e * n, n), 1e-2);
      CHECK(norms[e] == doctest::Approx(norm).epsilon(1e-12));
    }
    CHECK(norms[1] > 1.0);
  }
  const auto p_host = copy_to_host(p);
  const std::vector<double> expected(params.begin(), params.end());
  CHECK(relative_error(p_host, 0, expected.data(), expected.size()) < 1e-6);
}

TEST_CASE("device AdamW: each member's update is AdamW's, clipped by its own norm") {
  check_adamw_against_cpu<kEnsembleShape>();
}

TEST_CASE("device training: a rerun gives the same bits") {
  const emergent::LinearMap task(6, 2, 1);
  const Curves a = train_on_device<DotAttention, kTrainingShape>(task, 2, 8, 10),
               b = train_on_device<DotAttention, kTrainingShape>(task, 2, 8, 10);
  CHECK(a.loss == b.loss);
  CHECK(a.params == b.params);
}

}  // namespace
