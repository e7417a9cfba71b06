// What each mixer's device test runs (tests/device/test_device_mixer_<name>.cpp, one file per
// mixer, so that an edit of one mixer recompiles its own file only), as the subcases of
// check_device_mixer at the end:
//   - check_twin_sizes: the mixer's device twin (cuda/mixer.cuh's contract) against the same
//     Eigen reference as its CPU mixer (tests/mixer_suite.hpp): an ensemble of members with their
//     own parameters, on awkward sizes, each member's y (less the residual the twin adds), dL/dx
//     and every parameter gradient; and a second forward and backward must add the same
//     gradients to what the buffers held;
//   - check_ensemble_against_cpu: the whole device step against the CPU path (which
//     tests/test_model_reference.cpp and the golden tests check against the Eigen reference and
//     PyTorch): an ensemble's losses and gradients against Model<Mixer> run member by member;
//   - check_training_against_cpu: 100 training steps of a 2-seed ensemble against the same seeds
//     trained on the CPU.
// (The attention bias is checked in test_device_ops.cpp.)
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/cuda/adamw.cuh>
#include <emergent/cuda/linear_map.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/model.cuh>
#include <emergent/optim/adamw.hpp>
#include <emergent/tasks/linear_map.hpp>
#include <span>
#include <vector>

#include "../mixer_suite.hpp"
#include "device_checks.hpp"

// nvcc 13 cannot name Model<Mixer, S> in non-template code once a template on S has named it
// ("'__T0' was not declared"), so every function here that names a model is a template on its
// Shape (and mixer), and the shapes live in a named namespace.
namespace device_mixer_shapes {
// The twins' checks.
inline constexpr emergent::Shape kMixerShape{
    .vocab = 2, .d_model = 12, .heads = 3, .layers = 1, .d_ff = 8, .max_len = 20};
// The whole model's step.
inline constexpr emergent::Shape kEnsembleShape{
    .vocab = 3, .d_model = 16, .heads = 4, .layers = 2, .d_ff = 24, .max_len = 12};
// The linear map trained E seeds at a time on the device, and seed by seed on the CPU.
inline constexpr emergent::Shape kTrainingShape{
    .vocab = 2, .d_model = 32, .heads = 4, .layers = 1, .d_ff = 64, .max_len = 16};
}  // namespace device_mixer_shapes

namespace device_mixer_checks {

using namespace device_checks;
using device_mixer_shapes::kEnsembleShape;
using device_mixer_shapes::kMixerShape;
using device_mixer_shapes::kTrainingShape;
namespace cuda = emergent::cuda;
using cuda::copy_to_host;
using cuda::DeviceVector;
using cuda::raw;
using emergent::Shape;

constexpr int kMixerMembers = 3;
constexpr double kMixerTolerance = 2e-5;  // relative, float against the double reference

// adjust(member's parameters) may set some of them before the check (the default leaves them).
template <template <Shape, class> class MixerT, class Reference,
          class Adjust = void (*)(std::span<float>)>
void check_twin(
    const Reference& reference, int batch, int length, Adjust adjust = [](std::span<float>) {}) {
  using Cpu = MixerT<kMixerShape, float>;
  using Twin = typename cuda::device_twin<Cpu>::type;
  static_assert(cuda::DeviceMixer<Twin>);
  constexpr int D = kMixerShape.d_model;
  CAPTURE(batch);
  CAPTURE(length);
  const std::int64_t stride = Cpu::layout.total + 24;  // members' parameters apart, not packed
  const std::size_t per_member = std::size_t(batch) * length * D, n = kMixerMembers * per_member;
  std::vector<float> params(kMixerMembers * stride, 0.0f);
  for (int e = 0; e < kMixerMembers; ++e) {
    const std::vector<double> p = mixer_suite::mixer_parameters<MixerT, kMixerShape>(30 + e, 0.1);
    std::copy(p.begin(), p.end(), params.begin() + e * stride);
    adjust(std::span<float>(params).subspan(e * stride, Cpu::layout.total));
  }
  const std::vector<float> x = random_floats(n, 1), dy = random_floats(n, 2),
                           residual = random_floats(n, 3), g0 = random_floats(params.size(), 4);
  DeviceVector<float> p = to_device(params), xd = to_device(x), dyd = to_device(dy),
                      rd = to_device(residual), g(params.size(), 0.0f), g_added = to_device(g0),
                      y(n), dx(n);
  const cuda::MixerGeometry geometry{kMixerMembers, batch, length, stride};
  typename Twin::Activations acts(geometry);
  typename Twin::Scratch scratch(geometry);
  Twin::forward(raw(p), raw(xd), raw(y), raw(rd), acts, scratch, geometry, {});
  Twin::backward(raw(p), raw(g), raw(xd), raw(dyd), raw(dx), acts, scratch, geometry);
  const std::vector<float> g_host = copy_to_host(g);
  Twin::forward(raw(p), raw(xd), raw(y), raw(rd), acts, scratch, geometry, {});
  Twin::backward(raw(p), raw(g_added), raw(xd), raw(dyd), raw(dx), acts, scratch, geometry);
  const std::vector<float> y_host = copy_to_host(y), dx_host = copy_to_host(dx),
                           added = copy_to_host(g_added);
  double worst_addition = 0;  // |added - (g0 + g)|, in units of float rounding of the sum
  for (std::size_t i = 0; i < added.size(); ++i)
    worst_addition = std::max(worst_addition, std::abs(double(added[i]) - (g0[i] + g_host[i])) /
                                                  (std::abs(g0[i]) + std::abs(g_host[i]) + 1e-30));
  CHECK(worst_addition < 1e-6);
  for (int e = 0; e < kMixerMembers; ++e) {
    CAPTURE(e);
    const auto member = [&](const std::vector<float>& v) {
      return std::span<const float>(v).subspan(e * per_member, per_member);
    };
    std::vector<float> mixed(per_member), grads(Cpu::layout.total);
    for (std::size_t i = 0; i < per_member; ++i)
      mixed[i] = y_host[e * per_member + i] - residual[e * per_member + i];
    std::copy_n(g_host.begin() + e * stride, grads.size(), grads.begin());
    const std::span<const float> member_params(params.data() + e * stride, Cpu::layout.total);
    reference_checks::check_mixer_close<Cpu, float>(
        mixed, member(dx_host), grads,
        reference_checks::reference_batch<Cpu, float>(reference, member_params, member(x),
                                                      member(dy), batch, length),
        kMixerTolerance);
  }
}

// The awkward sizes every twin is checked at: (batch, length) = (2, 9), (3, 1) and (1, 20).
template <template <Shape, class> class MixerT, class Reference>
void check_twin_sizes(const Reference& reference) {
  check_twin<MixerT>(reference, 2, 9);
  check_twin<MixerT>(reference, 3, 1);
  check_twin<MixerT>(reference, 1, 20);
}

template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = emergent::GeluMlp>
std::vector<float> initial_parameters(int members, std::uint64_t first_seed) {
  using Cpu = emergent::Model<MixerT, S, float, ChannelT>;
  std::vector<float> all(Cpu::parameter_count * members);
  for (int e = 0; e < members; ++e)
    Cpu::init(std::span<float>(all).subspan(e * Cpu::parameter_count, Cpu::parameter_count),
              first_seed + e);
  return all;
}

template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = emergent::GeluMlp>
std::vector<emergent::DecayRange> decay_ranges() {
  using Cpu = emergent::Model<MixerT, S, float, ChannelT>;
  std::vector<emergent::DecayRange> ranges;
  for (const auto& t : Cpu::tensors()) ranges.push_back({t.offset, t.size, t.weight_decay});
  return ranges;
}

// Tolerances: relative, of each member's loss and of each gradient tensor (fp32 by default; the
// tf32 case below states its own).
template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = emergent::GeluMlp>
void check_ensemble_against_cpu(double loss_tolerance = 1e-5, double gradient_tolerance = 1e-4,
                                double noise = 0) {
  using Ensemble = cuda::EnsembleModel<MixerT, S, ChannelT>;
  using Cpu = typename Ensemble::Cpu;
  const int E = 3, B = 2, T = 11;
  std::vector<float> params = initial_parameters<MixerT, S, ChannelT>(E, 40);
  if (noise != 0) {  // off the init (RWKV's zeroes weights, and with them most gradients)
    const std::vector<float> n = random_floats(params.size(), 41, noise);
    for (std::size_t i = 0; i < params.size(); ++i) params[i] += n[i];
  }
  std::vector<std::int32_t> inputs(E * B * T), targets(inputs.size());
  for (std::size_t n = 0; n < inputs.size(); ++n) {
    inputs[n] = std::int32_t((n * 5 + n / 7) % 3);
    targets[n] = std::int32_t((n * 2 + 1) % 3);
  }
  // Each member its own loss weights, bias pattern and strength (a mixed ensemble's members
  // may train different tasks): member e's weights are a rotation of these, its strength
  // bias * e (member 0 unbiased).
  const std::vector<float> base_weights = {0, 1, 1, 0.5f, 1, 1, 2, 1, 1, 0, 1};
  std::vector<float> weights;
  for (int e = 0; e < E; ++e)
    for (int t = 0; t < T; ++t) weights.push_back(base_weights[(t + 3 * e) % T]);
  const std::vector<float> patterns = random_floats(E * T * T, 3, 1.0);
  const bool takes_bias = emergent::KeepsAttention<typename Cpu::Mixer>;
  for (float bias : {0.0f, 1.5f}) {
    if (bias != 0 && !takes_bias) continue;
    CAPTURE(bias);
    std::vector<float> strengths;
    for (int e = 0; e < E; ++e) strengths.push_back(bias * float(e));
    Ensemble ensemble(E, B, T);
    ensemble.params = to_device(params);
    cuda::copy_to_device<std::int32_t>(inputs, ensemble.inputs);
    cuda::copy_to_device<std::int32_t>(targets, ensemble.targets);
    ensemble.loss_weights = to_device(weights);
    ensemble.set_bias(patterns, strengths);
    ensemble.zero_gradients();
    const std::vector<double> losses = ensemble.forward();
    ensemble.backward();
    const auto grads = copy_to_host(ensemble.grads);
    for (int e = 0; e < E; ++e) {
      CAPTURE(e);
      const std::size_t at = std::size_t(e) * Cpu::parameter_count,
                        tokens_at = std::size_t(e) * B * T;
      typename Cpu::Workspace ws;
      const std::span<const float> p(params.data() + at, Cpu::parameter_count);
      const std::span<const float> pattern = std::span(patterns).subspan(e * T * T, T * T);
      const double loss =
          Cpu::forward(p,
                       {B, T, std::span<const std::int32_t>(inputs).subspan(tokens_at, B * T),
                        std::span<const std::int32_t>(targets).subspan(tokens_at, B * T),
                        std::span(weights).subspan(e * T, T),
                        strengths[e] != 0 ? pattern : std::span<const float>(), strengths[e]},
                       ws);
      std::vector<float> g(Cpu::parameter_count, 0.0f);
      Cpu::backward(p, g, ws);
      CHECK(losses[e] == doctest::Approx(loss).epsilon(loss_tolerance));
      // Each tensor's difference relative to its own norm, or to 1% of the whole gradient's if
      // its own is smaller: a gradient that is zero in exact arithmetic holds rounding noise on
      // both sides (the MLP-Mixer's per-position bias shifts all D channels of a token alike,
      // which every LayerNorm after it removes).
      double whole = 0;
      for (float v : g) whole += double(v) * v;
      for (const auto& t : Cpu::tensors()) {
        CAPTURE(t.name);
        const std::vector<double> expected(g.begin() + t.offset, g.begin() + t.offset + t.size);
        double norm = 0, difference = 0;
        for (std::size_t i = 0; i < t.size; ++i) {
          norm += expected[i] * expected[i];
          difference +=
              (grads[at + t.offset + i] - expected[i]) * (grads[at + t.offset + i] - expected[i]);
        }
        CHECK(std::sqrt(difference) <
              gradient_tolerance * std::max(std::sqrt(norm), 1e-2 * std::sqrt(whole)));
      }
    }
  }
}

struct Curves {
  std::vector<std::vector<double>> loss;  // [member][step]
  std::vector<float> params;
};

template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = emergent::GeluMlp>
Curves train_on_device(const emergent::LinearMap& task, int members, int batch, int steps) {
  using Net = cuda::EnsembleModel<MixerT, S, ChannelT>;
  const std::size_t P = Net::P;
  Net model(members, batch, task.length());
  std::vector<float> init(P * members);
  std::vector<std::uint64_t> seeds(members);
  for (int e = 0; e < members; ++e) {
    seeds[e] = 100 + e;
    Net::Cpu::init(std::span<float>(init).subspan(e * P, P), seeds[e]);
  }
  model.params = to_device(init);
  model.loss_weights = to_device(for_each_member(task.full_loss_weights(), members));
  cuda::EnsembleAdamW optimizer({}, decay_ranges<MixerT, S, ChannelT>(), P, members);
  const cuda::DeviceLinearMap data(task);
  DeviceVector<std::uint64_t> seeds_device;
  cuda::copy_to_device<std::uint64_t>(seeds, seeds_device);
  Curves c{std::vector<std::vector<double>>(members), {}};
  for (int step = 0; step < steps; ++step) {
    data.sample(raw(seeds_device), members, step, batch, raw(model.inputs), raw(model.targets));
    model.zero_gradients();
    const std::vector<double> losses = model.forward();
    model.backward();
    optimizer.step(raw(model.params), raw(model.grads), 3e-3);
    for (int e = 0; e < members; ++e) c.loss[e].push_back(losses[e]);
  }
  c.params = copy_to_host(model.params);
  return c;
}

template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = emergent::GeluMlp>
void check_training_against_cpu() {
  using Net = emergent::Model<MixerT, S, float, ChannelT>;
  const emergent::LinearMap task(8, 2, 0);
  const int E = 2, B = 16, T = task.length(), steps = 100;
  const Curves device = train_on_device<MixerT, S, ChannelT>(task, E, B, steps);
  const std::vector<emergent::DecayRange> ranges = decay_ranges<MixerT, S, ChannelT>();
  const std::vector<float> weights = task.full_loss_weights();
  for (int e = 0; e < E; ++e) {
    CAPTURE(e);
    std::vector<float> params(Net::parameter_count), grads(Net::parameter_count);
    Net::init(params, 100 + e);
    emergent::AdamW<float> optimizer({}, ranges, Net::parameter_count);
    typename Net::Workspace ws;
    std::vector<std::int32_t> inputs(B * T), targets(B * T);
    double worst = 0;
    for (int step = 0; step < steps; ++step) {
      task.sample(100 + e, step, B, inputs, targets);
      const double loss = Net::forward(params, {B, T, inputs, targets, weights, {}, 0}, ws);
      std::fill(grads.begin(), grads.end(), 0.0f);
      Net::backward(params, grads, ws);
      optimizer.step(params, grads, 3e-3);
      worst = std::max(worst, std::abs(loss - device.loss[e][step]));
    }
    MESSAGE("member " << e << ": loss " << device.loss[e].front() << " -> " << device.loss[e].back()
                      << ", worst |device - cpu| " << worst);
    CHECK(device.loss[e].back() < device.loss[e].front() - 0.02);  // it trained
    CHECK(worst < 2e-3);
    const std::vector<double> expected(params.begin(), params.end());
    CHECK(relative_error(device.params, e * Net::parameter_count, expected.data(),
                         expected.size()) < 2e-3);
  }
}

// A mixer's three device checks as subcases: its twin against `reference` at the awkward sizes,
// the whole model's step against the CPU's (`noise` moves the parameters off their init, for a
// mixer whose init zeroes most gradients), and 100 training steps against the CPU's.
template <template <Shape, class> class MixerT,
          template <Shape, class> class ChannelT = emergent::GeluMlp, class Reference>
void check_device_mixer(const Reference& reference, double noise = 0) {
  SUBCASE("the twin: y, dx and every gradient against the reference") {
    check_twin_sizes<MixerT>(reference);
  }
  SUBCASE("the ensemble: each member's loss and every gradient equal the CPU model's") {
    check_ensemble_against_cpu<MixerT, kEnsembleShape, ChannelT>(1e-5, 1e-4, noise);
  }
  SUBCASE("training: 100 steps of a 2-seed ensemble follow the CPU runs") {
    check_training_against_cpu<MixerT, kTrainingShape, ChannelT>();
  }
}

}  // namespace device_mixer_checks
