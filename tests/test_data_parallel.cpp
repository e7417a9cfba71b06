// DataParallelStep: splitting a batch across threads gives the gradient and metrics of the
// whole batch, and is deterministic for a given thread count.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <emergent/core/parallel.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/model/data_parallel.hpp>
#include <emergent/model/model.hpp>
#include <random>
#include <vector>

namespace {

template <class Real>
using SplitNet = emergent::Model<
    emergent::DotAttention,
    emergent::Shape{.vocab = 3, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 10, .max_len = 9},
    Real>;

template <class Real>
struct SplitBatch {
  int batch, length = 8;
  std::vector<std::int32_t> inputs, targets;
  std::vector<float> weights, pattern;
  explicit SplitBatch(int sequences = 5) : batch(sequences) {
    std::mt19937 rng(7);
    for (int i = 0; i < batch * length; ++i)
      inputs.push_back(int(rng() % 3)), targets.push_back(int(rng() % 3));
    for (int t = 0; t < length; ++t) weights.push_back(t % 3 == 0 ? 0.0f : 1.0f + 0.25f * t);
    for (int i = 0; i < length * length; ++i) pattern.push_back(float(rng() % 2));
  }
  emergent::ForwardInput input() const {
    return {batch, length, inputs, targets, weights, pattern, 0.7f};
  }
};

}  // namespace

TEST_CASE("data-parallel step equals the whole-batch forward and backward") {
  using N = SplitNet<double>;
  std::vector<double> params(N::parameter_count);
  N::init(params, 3);
  // 5 sequences: one slice per thread; 200 (1,600 tokens): 4 slices of about kSliceTokens, run
  // two after another by each of 2 threads, or all four by one.
  for (int sequences : {5, 200}) {
    CAPTURE(sequences);
    const SplitBatch<double> data(sequences);
    std::vector<double> expected(N::parameter_count, 0.0);
    N::Workspace ws;
    const double expected_loss = N::forward(params, data.input(), ws);
    N::backward(params, expected, ws);
    const std::vector<float> x1(data.weights.size(), 1.0f);

    for (int threads : {1, 2, 3, 5, 8})  // 8 > batch: some threads get no slice
      for (bool keep : {false, true}) {  // one workspace per thread, or every slice's kept
        CAPTURE(threads);
        CAPTURE(keep);
        emergent::DataParallelStep<N> step(threads);
        std::vector<double> grads(N::parameter_count, 123.0);  // run() overwrites
        const double loss = step.run(params, grads, data.input(), keep);
        CHECK(loss == doctest::Approx(expected_loss).epsilon(1e-12));
        CHECK(step.weighted_mean(x1) == doctest::Approx(N::weighted_mean(ws, x1)).epsilon(1e-12));
        CHECK(step.weighted_mean(data.weights) ==
              doctest::Approx(N::weighted_mean(ws, data.weights)).epsilon(1e-12));
        CHECK(step.weighted_accuracy(x1) ==
              doctest::Approx(N::weighted_accuracy(ws, x1)).epsilon(1e-12));
        double worst = 0;
        for (std::size_t i = 0; i < grads.size(); ++i)
          worst = std::max(worst, std::abs(grads[i] - expected[i]));
        CHECK(worst < 1e-12);
        const int slices = sequences == 200 ? std::max(threads, 4) : std::min(threads, sequences);
        const int workers = std::min(threads, slices);
        CHECK(step.held_workspaces().size() == std::size_t(keep ? slices : workers));
        if (!keep) {
          CHECK_THROWS_WITH_AS(step.workspaces(), doctest::Contains("keep_every_slice"),
                               emergent::Error);
          continue;
        }
        std::size_t slices_batch = 0;
        for (const auto* w : step.workspaces()) slices_batch += w->batch;
        CHECK(slices_batch == std::size_t(sequences));
      }
  }
}

TEST_CASE("data-parallel step: sharing a workspace across a thread's slices changes no bit") {
  using N = SplitNet<float>;
  std::vector<float> params(N::parameter_count);
  N::init(params, 5);
  const SplitBatch<float> data(200);  // 4 slices
  const std::vector<float> x1(data.weights.size(), 1.0f);
  emergent::DataParallelStep<N> shared(2), kept(2);
  std::vector<float> gs(N::parameter_count), gk(N::parameter_count);
  for (int step = 0; step < 3; ++step) {  // kept, shared, kept: workspaces freed and made again
    const bool keep = step % 2 == 0;
    CHECK(shared.run(params, gs, data.input(), !keep) == kept.run(params, gk, data.input(), keep));
    CHECK(gs == gk);
    CHECK(shared.weighted_mean(x1) == kept.weighted_mean(x1));
    CHECK(shared.weighted_accuracy(data.weights) == kept.weighted_accuracy(data.weights));
  }
}

TEST_CASE("data-parallel step is bit-identical across calls with the same thread count") {
  using N = SplitNet<float>;
  std::vector<float> params(N::parameter_count);
  N::init(params, 4);
  const SplitBatch<float> data;
  emergent::DataParallelStep<N> a(2), b(2);
  std::vector<float> ga(N::parameter_count), gb(N::parameter_count);
  const double la = a.run(params, ga, data.input());
  const double lb = b.run(params, gb, data.input());
  CHECK(la == lb);
  CHECK(ga == gb);
}
