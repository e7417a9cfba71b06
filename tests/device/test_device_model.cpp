// The whole device training step against the CPU path, which tests/test_model_reference.cpp and
// the golden tests check against the Eigen reference and PyTorch: an ensemble's losses and
// gradients against Model<Mixer> run member by member (dot attention, the causal MLP-Mixer,
// Mamba, Gated DeltaNet and RWKV-4 with its channel mixing), the device linear-map sampler
// against LinearMap::sample, the ensemble AdamW against AdamW, 100 training steps of an
// ensemble against the same seeds trained on the CPU, and the same bits on a rerun.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <emergent/cuda/adamw.cuh>
#include <emergent/cuda/cellular_automaton.cuh>
#include <emergent/cuda/dot_attention.cuh>
#include <emergent/cuda/gated_deltanet.cuh>
#include <emergent/cuda/linear_map.cuh>
#include <emergent/cuda/mamba.cuh>
#include <emergent/cuda/mlp_mixer.cuh>
#include <emergent/cuda/model.cuh>
#include <emergent/cuda/rwkv.cuh>
#include <emergent/cuda/rwkv_channel_mix.cuh>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/mixers/gated_deltanet.hpp>
#include <emergent/mixers/mamba.hpp>
#include <emergent/mixers/mlp_mixer.hpp>
#include <emergent/mixers/rwkv.hpp>
#include <emergent/mixers/rwkv_channel_mix.hpp>
#include <emergent/optim/adamw.hpp>
#include <emergent/tasks/cellular_automaton.hpp>
#include <emergent/tasks/linear_map.hpp>
#include <span>
#include <vector>

#include "device_checks.hpp"

// nvcc 13 cannot name Model<Mixer, S> in non-template code once a template on S has named it
// ("'__T0' was not declared"), so every function here that names a model is a template on its
// Shape (and mixer).
namespace device_model_shapes {
inline constexpr emergent::Shape kShape{
    .vocab = 3, .d_model = 16, .heads = 4, .layers = 2, .d_ff = 24, .max_len = 12};
// The linear map trained E seeds at a time on the device, and seed by seed on the CPU.
inline constexpr emergent::Shape kLinmap{
    .vocab = 2, .d_model = 32, .heads = 4, .layers = 1, .d_ff = 64, .max_len = 16};
}  // namespace device_model_shapes

namespace {

using namespace device_checks;
using device_model_shapes::kLinmap;
using device_model_shapes::kShape;
namespace cuda = emergent::cuda;
using cuda::copy_to_host;
using cuda::raw;
using emergent::DotAttention;
using emergent::GatedDeltaNet;
using emergent::Mamba;
using emergent::MlpMixer;
using emergent::Rwkv;
using emergent::RwkvChannelMix;
using emergent::Shape;

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
  const bool takes_bias = Cpu::Mixer::name == DotAttention<S, float>::name;
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

TEST_CASE("device ensemble: each member's loss and every gradient equal the CPU model's") {
  SUBCASE("dot attention") { check_ensemble_against_cpu<DotAttention, kShape>(); }
  SUBCASE("causal MLP-Mixer") { check_ensemble_against_cpu<MlpMixer, kShape>(); }
  SUBCASE("Mamba") { check_ensemble_against_cpu<Mamba, kShape>(); }
  SUBCASE("Gated DeltaNet") { check_ensemble_against_cpu<GatedDeltaNet, kShape>(); }
  SUBCASE("RWKV-4 (its time and channel mixing)") {
    check_ensemble_against_cpu<Rwkv, kShape, RwkvChannelMix>(1e-5, 1e-4, 0.1);
  }
}

#if EMERGENT_DEVICE_IS_CUDA
// The opt-in tf32 precision (TF32 inputs to the tensor cores, float accumulation: about 3e-4
// relative per product) against the same float CPU model: loss within 1e-3, every gradient tensor
// within 1e-2, relative. (The OpenMP build has fp32 only.)
TEST_CASE("device ensemble in tf32: each member's loss and gradients within tf32's tolerance") {
  struct Restore {
    ~Restore() { cuda::gemm_precision() = cuda::Precision::fp32; }
  } restore;
  cuda::gemm_precision() = cuda::Precision::tf32;
  check_ensemble_against_cpu<DotAttention, kShape>(1e-3, 1e-2);
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
  check_adamw_against_cpu<kShape>();
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

TEST_CASE("device training: 100 steps of a 2-seed ensemble follow the CPU runs of those seeds") {
  SUBCASE("dot attention") { check_training_against_cpu<DotAttention, kLinmap>(); }
  SUBCASE("causal MLP-Mixer") { check_training_against_cpu<MlpMixer, kLinmap>(); }
  SUBCASE("Mamba") { check_training_against_cpu<Mamba, kLinmap>(); }
  SUBCASE("Gated DeltaNet") { check_training_against_cpu<GatedDeltaNet, kLinmap>(); }
  SUBCASE("RWKV-4") { check_training_against_cpu<Rwkv, kLinmap, RwkvChannelMix>(); }
}

TEST_CASE("device training: a rerun gives the same bits") {
  const emergent::LinearMap task(6, 2, 1);
  const Curves a = train_on_device<DotAttention, kLinmap>(task, 2, 8, 10),
               b = train_on_device<DotAttention, kLinmap>(task, 2, 8, 10);
  CHECK(a.loss == b.loss);
  CHECK(a.params == b.params);
}

}  // namespace
