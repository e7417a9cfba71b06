// The Dyck task (tasks/dyck.hpp): hand-worked matching, balanced prefixes within the depth
// bound, determinism, the per-sequence weights and attention target, bad settings; and the
// per-token loss weights it needs in the model (model/model.hpp, model/data_parallel.hpp),
// checked against single-sequence runs with per-position weights.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/model/data_parallel.hpp>
#include <emergent/model/model.hpp>
#include <emergent/tasks/dyck.hpp>
#include <emergent/tasks/registry.hpp>
#include <emergent/train/compiled_model.hpp>
#include <emergent/train/config.hpp>
#include <nlohmann/json.hpp>
#include <vector>

using emergent::Dyck;

TEST_CASE("dyck: matching openers, hand-worked") {
  // k = 2: ( = 0, [ = 1, ) = 2, ] = 3.   ( [ ] ( ) ) [   -> ] at 2 matches 1, ) at 4 matches 3,
  // ) at 5 matches 0; the openers and the unclosed [ at 6 have none.
  const std::vector<std::int32_t> tokens = {0, 1, 3, 0, 2, 2, 1};
  CHECK(Dyck::matching_openers(tokens, 2) == std::vector<int>{-1, -1, 1, -1, 3, 0, -1});
  const Dyck task(2, 4, 0.5, 8, true);
  // inputs = tokens[0..6], targets = tokens[1..7]; with a closing 3 (]) appended as the last token
  const std::vector<std::int32_t> inputs = tokens, targets = {1, 3, 0, 2, 2, 1, 3};
  const std::vector<float> target = task.attention_target_of(inputs, targets);
  const int T = 7;
  std::vector<std::pair<int, int>> ones;
  for (int q = 0; q < T; ++q)
    for (int j = 0; j < T; ++j)
      if (target[q * T + j] > 0) ones.emplace_back(q, j);
  // query 1 predicts the ] at 2 (opener 1); query 3 the ) at 4 (opener 3); query 4 the ) at 5
  // (opener 0); query 6 the ] at 7 (opener 6)
  CHECK(ones == std::vector<std::pair<int, int>>{{1, 1}, {3, 3}, {4, 0}, {6, 6}});
}

TEST_CASE("dyck: every sequence is a balanced-or-open prefix within the depth bound") {
  for (int k : {2, 5})
    for (int depth : {1, 3, 8})
      for (double p : {0.2, 0.5, 0.8}) {
        const Dyck task(k, depth, p, 40, true);
        CHECK(task.vocab() == 2 * k);
        int opens = 0, closes = 0, at_bound = 0;
        for (int b = 0; b < 50; ++b) {
          const std::vector<std::int32_t> tokens = task.sequence(11, 3, b);
          std::vector<std::int32_t> stack;
          for (std::int32_t t : tokens) {
            REQUIRE((t >= 0 && t < 2 * k));
            if (t < k) {
              stack.push_back(t);
              ++opens;
              REQUIRE(int(stack.size()) <= depth);
              at_bound += int(stack.size()) == depth;
            } else {
              REQUIRE_FALSE(stack.empty());
              REQUIRE(stack.back() == t - k);  // closes the innermost open bracket
              stack.pop_back();
              ++closes;
            }
          }
        }
        CHECK(closes > 0);
        if (depth == 3 || p == 0.8)
          CHECK(at_bound > 0);  // the bound is reached, not only respected
        // below the bound and above 0 the walk opens with probability p
        if (depth == 8 && p == 0.5) CHECK(double(opens) / (opens + closes) > 0.5);
      }
}

TEST_CASE("dyck: a sample depends only on (seed, step, index), not on the batch") {
  const Dyck task(3, 5, 0.5, 33, true);
  std::vector<std::int32_t> one(32), one_t(32), five(5 * 32), five_t(5 * 32);
  task.sample(7, 12, 1, one, one_t);
  task.sample(7, 12, 5, five, five_t);
  CHECK(std::equal(one.begin(), one.end(), five.begin()));
  CHECK(std::equal(one_t.begin(), one_t.end(), five_t.begin()));
  CHECK(task.sequence(7, 12, 0) == task.sequence(7, 12, 0));
  CHECK(task.sequence(7, 12, 0) != task.sequence(7, 13, 0));
  CHECK(task.sequence(7, 12, 0) != task.sequence(8, 12, 0));
  CHECK(task.sequence(7, 12, 0) != task.sequence(7, 12, 1));
  // next-token shift
  const std::vector<std::int32_t> tokens = task.sequence(7, 12, 3);
  for (int p = 0; p < 32; ++p) {
    CHECK(five[3 * 32 + p] == tokens[p]);
    CHECK(five_t[3 * 32 + p] == tokens[p + 1]);
  }
}

TEST_CASE("dyck: weights per sequence mark the closers; the loss setting picks the objective") {
  const auto setup = [](const std::string& loss) {
    const emergent::TaskDeclaration& d = emergent::find_task("dyck", "test");
    return d.setup(emergent::ParameterValues(d.parameters, {{"tokens", 17}, {"loss", loss}}, "t"));
  };
  for (const std::string loss : {"closing", "all"}) {
    const emergent::TaskSetup s = setup(loss);
    const emergent::SequenceTask& task = *s.task;
    CHECK(task.weights_per_sequence());
    CHECK(task.vocab() == 4);
    CHECK(task.length() == 16);
    std::vector<std::int32_t> inputs(3 * 16), targets(inputs.size());
    task.sample(1, 2, 3, inputs, targets);
    const emergent::BatchWeights w = emergent::batch_weights(task, inputs, targets, 3);
    REQUIRE(w.full.size() == inputs.size());
    for (std::size_t n = 0; n < targets.size(); ++n) {
      CHECK(w.predictable[n] == (targets[n] >= 2 ? 1.0f : 0.0f));
      CHECK(w.full[n] == (loss == "closing" ? w.predictable[n] : 1.0f));
    }
    CHECK(s.thresholds.metric == "closing_loss");
  }
  CHECK(setup("closing").thresholds.solved_below == doctest::Approx(0.05));
  CHECK(setup("all").thresholds.solved_below == doctest::Approx(0.05 + std::log(2.0)));
  // tasks with fixed weights keep them
  const emergent::TaskDeclaration& lm = emergent::find_task("linear-map", "test");
  const emergent::TaskSetup fixed =
      lm.setup(emergent::ParameterValues(lm.parameters, nlohmann::json::object(), "t"));
  CHECK_FALSE(fixed.task->weights_per_sequence());
  CHECK(emergent::batch_weights(*fixed.task, {}, {}, 4).full.size() == 31);
}

TEST_CASE("dyck: bad settings are refused in one line naming the field") {
  CHECK_THROWS_WITH_AS(Dyck(1, 4, 0.5, 16, true), doctest::Contains("field 'k' = 1"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(Dyck(2, 20, 0.5, 16, true), doctest::Contains("field 'tokens' = 16"),
                       emergent::Error);
  const auto resolve = [](nlohmann::json j) {
    j["task"] = "dyck";
    return emergent::resolve_config(j, "sweep.toml");
  };
  CHECK_THROWS_WITH_AS(resolve({{"open_probability", 1.0}}), doctest::Contains("open_probability"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(resolve({{"loss", "most"}}), doctest::Contains("loss"), emergent::Error);
  // no fixed attention target: a batch-averaged snapshot would have none
  CHECK_THROWS_WITH_AS(resolve({{"save_attention_at", "10"}}),
                       doctest::Contains("its attention target differs per sequence"),
                       emergent::Error);
  CHECK(resolve({{"bias", 5.0}}).bias == 5.0);  // the bias takes each sequence's own pattern
  const emergent::TrainConfig c = resolve(nlohmann::json::object());
  CHECK(c.shape.vocab == 4);
  CHECK(c.shape.layers == 2);
}

TEST_CASE("per-token loss weights: the batch's loss and gradient are the mean of its sequences'") {
  // Each sequence's weighted mean, averaged over the batch: the same as running every sequence
  // alone with its weights as per-position weights and averaging, for the loss, the metrics and
  // every gradient, also split across threads.
  using Net = emergent::Model<
      emergent::DotAttention,
      emergent::Shape{.vocab = 4, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 10, .max_len = 9},
      double>;
  std::vector<double> params(Net::parameter_count);
  Net::init(params, 5);
  const Dyck task(2, 3, 0.5, 9, true);
  const int B = 6, T = 8;
  std::vector<std::int32_t> inputs(B * T), targets(B * T);
  task.sample(3, 4, B, inputs, targets);
  std::vector<float> full(B * T), predictable(B * T);
  task.sequence_weights(inputs, targets, B, full, predictable);
  for (std::size_t n = 0; n < full.size(); ++n) full[n] *= 1.0f + 0.1f * float(n % 5);  // uneven

  double expected_loss = 0, expected_metric = 0;
  std::vector<double> expected(Net::parameter_count, 0.0);
  for (int b = 0; b < B; ++b) {
    Net::Workspace ws;
    const std::span<const float> w(full.data() + b * T, T), p(predictable.data() + b * T, T);
    expected_loss += Net::forward(params,
                                  {1,
                                   T,
                                   std::span(inputs).subspan(b * T, T),
                                   std::span(targets).subspan(b * T, T),
                                   w,
                                   {},
                                   0},
                                  ws) /
                     B;
    expected_metric += Net::weighted_mean(ws, p) / B;
    Net::backward(params, expected, ws, 1.0 / B);
  }
  const emergent::ForwardInput whole{B, T, inputs, targets, full, {}, 0};
  Net::Workspace ws;
  CHECK(Net::forward(params, whole, ws) == doctest::Approx(expected_loss).epsilon(1e-12));
  CHECK(Net::weighted_mean(ws, predictable) == doctest::Approx(expected_metric).epsilon(1e-12));
  std::vector<double> grads(Net::parameter_count, 0.0);
  Net::backward(params, grads, ws);
  double worst = 0;
  for (std::size_t i = 0; i < grads.size(); ++i)
    worst = std::max(worst, std::abs(grads[i] - expected[i]));
  CHECK(worst < 1e-12);
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    emergent::DataParallelStep<Net> step(threads);
    std::vector<double> g(Net::parameter_count);
    CHECK(step.run(params, g, whole) == doctest::Approx(expected_loss).epsilon(1e-12));
    CHECK(step.weighted_mean(predictable) == doctest::Approx(expected_metric).epsilon(1e-12));
    double w = 0;
    for (std::size_t i = 0; i < g.size(); ++i) w = std::max(w, std::abs(g[i] - expected[i]));
    CHECK(w < 1e-12);
  }
}

TEST_CASE("dyck: the bias and the attention analysis read each sequence's own opener") {
  // A strong bias on each sequence's target puts every head's attention on the matching opener,
  // so the per-sequence IoU is 1; without it an untrained model is near chance. Both read the
  // same [batch, length, length] target, per slice of the batch.
  using Net = emergent::Model<
      emergent::DotAttention,
      emergent::Shape{
          .vocab = 4, .d_model = 16, .heads = 4, .layers = 1, .d_ff = 32, .max_len = 16},
      float>;
  std::vector<float> params(Net::parameter_count);
  Net::init(params, 2);
  const emergent::TaskDeclaration& d = emergent::find_task("dyck", "test");
  const emergent::TaskSetup setup =
      d.setup(emergent::ParameterValues(d.parameters, {{"tokens", 16}, {"max_depth", 3}}, "t"));
  const emergent::SequenceTask& task = *setup.task;
  const int B = 12, T = task.length();
  std::vector<std::int32_t> inputs(B * T), targets(B * T);
  task.sample(4, 0, B, inputs, targets);
  const std::vector<float> target = emergent::batch_attention_target(task, inputs, targets, B);
  REQUIRE(target.size() == std::size_t(B) * T * T);
  const emergent::BatchWeights w = emergent::batch_weights(task, inputs, targets, B);
  for (float bias : {0.0f, 30.0f}) {
    CAPTURE(bias);
    emergent::DataParallelStep<Net> step(3);  // slices of 4 sequences
    std::vector<float> grads(Net::parameter_count);
    step.run(params, grads, {B, T, inputs, targets, w.full, target, bias}, true);
    const emergent::AttentionAnalysis a =
        emergent::analyse_attention<Net>(step.workspaces(), task, target);
    REQUIRE(a.available);
    CHECK(a.iou_chance > 0);
    if (bias > 0) {
      CHECK(a.iou == doctest::Approx(1.0));
      for (double h : a.head_iou[0]) CHECK(h == doctest::Approx(1.0));
      for (double e : a.entropy[0]) CHECK(e < 1e-3);
    } else {
      CHECK(a.iou_above_chance < 0.5);
    }
  }
  // the fixed-target path refuses nothing and gives the linear map's columns as before
  CHECK_FALSE(emergent::batch_attention_target(*setup.task, inputs, targets, B).empty());
}
