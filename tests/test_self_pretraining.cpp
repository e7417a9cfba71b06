// The self-pretraining run (train/self_pretraining.hpp) and the proximity analysis
// (analysis/proximity.hpp): masking statistics, micro-batches, the config's checks, the
// proximity report against brute force and its fixed points, and whole tiny runs: supervised
// and SPT, the stage switch, a killed run resumed to the same bits, the QK-only transplant and
// the directional derivatives against central differences.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <emergent/analysis/proximity.hpp>
#include <emergent/mixers/bidirectional_attention.hpp>
#include <emergent/train/self_pretraining.hpp>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace {

using emergent::ListOps;
namespace listops = emergent::listops;

constexpr emergent::Shape kTiny{
    .vocab = listops::kVocab, .d_model = 16, .heads = 2, .layers = 2, .d_ff = 24, .max_len = 64};
using TinyEncoder = emergent::Encoder<emergent::BidirectionalAttention, kTiny, listops::kClasses>;
using DoubleEncoder =
    emergent::Encoder<emergent::BidirectionalAttention, kTiny, listops::kClasses, double>;

std::vector<listops::Example> examples(int n, int min_length = 10, int max_length = 60) {
  const ListOps task(min_length, max_length, 6, 5);
  std::vector<listops::Example> out;
  for (int i = 0; i < n; ++i) out.push_back(task.example(4, ListOps::Split::train, i));
  return out;
}

nlohmann::json tiny_config() {
  return {{"min_length", 10},     {"max_length", 60},    {"max_depth", 6},
          {"max_args", 5},        {"d_model", 16},       {"heads", 2},
          {"layers", 2},          {"d_ff", 24},          {"max_len", 64},
          {"train_examples", 64}, {"test_examples", 40}, {"eval_examples", 20},
          {"batch", 8},           {"steps", 12},         {"pretrain_steps", 6},
          {"warmup_steps", 2},    {"eval_every", 4},     {"checkpoint_every", 3},
          {"threads", 1},         {"mask_rate", 0.2}};
}

nlohmann::json run(const nlohmann::json& given, const std::filesystem::path& out) {
  return emergent::SelfPretrainingRun<TinyEncoder>(
             emergent::resolve_self_pretraining(given, "test"), out, false)
      .run();
}

std::vector<nlohmann::json> rows(const std::filesystem::path& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json row = nlohmann::json::parse(line);
    row.erase("wall_s");
    out.push_back(row);
  }
  return out;
}

std::vector<float> final_parameters(const std::filesystem::path& run_dir, std::int64_t step) {
  std::vector<float> p(TinyEncoder::parameter_count);
  emergent::load_parameters(emergent::SafetensorsFile(emergent::checkpoint_path(run_dir, step)),
                            TinyEncoder::tensors(), p);
  return p;
}

}  // namespace

TEST_CASE("Masking: i.i.d. at the rate, real tokens only, originals kept") {
  const std::vector<listops::Example> set = examples(200);
  std::vector<std::size_t> indices(set.size());
  std::iota(indices.begin(), indices.end(), 0);
  const std::vector<std::uint64_t> keys(indices.begin(), indices.end());
  const emergent::PhiloxStream stream(1, 2);
  const emergent::PaddedBatch b = emergent::pad_batch(set, indices, 0.1, &stream, keys);
  std::int64_t real = 0, masked = 0;
  for (int s = 0; s < b.batch; ++s) {
    const listops::Example& e = set[s];
    REQUIRE(b.lengths[s] == static_cast<int>(e.tokens.size()));
    for (int t = 0; t < b.length; ++t) {
      const std::size_t at = static_cast<std::size_t>(s) * b.length + t;
      if (t >= b.lengths[s]) {
        CHECK(b.tokens[at] == listops::pad);
        CHECK(b.originals[at] == -1);
        continue;
      }
      ++real;
      if (b.tokens[at] == listops::mask) {
        ++masked;
        CHECK(b.originals[at] == e.tokens[t]);
      } else {
        CHECK(b.tokens[at] == e.tokens[t]);
        CHECK(b.originals[at] == -1);
      }
    }
  }
  CHECK(masked == b.masked);
  const double rate = double(masked) / real, sd = std::sqrt(0.1 * 0.9 / real);
  CHECK(std::abs(rate - 0.1) < 4 * sd);
  // The same keys give the same masks; other keys others.
  CHECK(emergent::pad_batch(set, indices, 0.1, &stream, keys).tokens == b.tokens);
}

TEST_CASE("Micro-batches: every slot once, shortest first, within the token budget") {
  const std::vector<listops::Example> set = examples(50);
  std::vector<std::size_t> indices = {3, 7, 7, 1, 40, 22, 9, 13, 0, 5};  // a repeat included
  const auto groups = emergent::micro_batches(set, indices, 120);
  std::vector<std::size_t> seen;
  std::size_t previous = 0;
  for (const auto& g : groups) {
    std::size_t longest = 0;
    for (std::size_t slot : g) {
      seen.push_back(slot);
      longest = std::max(longest, set[indices[slot]].tokens.size());
      CHECK(set[indices[slot]].tokens.size() >= previous);
      previous = set[indices[slot]].tokens.size();
    }
    CHECK((g.size() == 1 || g.size() * longest <= 120));
  }
  std::sort(seen.begin(), seen.end());
  std::vector<std::size_t> all(indices.size());
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
}

TEST_CASE("Self-pretraining configs are checked, naming the field") {
  nlohmann::json c = tiny_config();
  c["pretrain_steps"] = 20;
  CHECK_THROWS_WITH(emergent::resolve_self_pretraining(c, "f"),
                    doctest::Contains("pretrain_steps"));
  c = tiny_config();
  c["max_len"] = 30;
  CHECK_THROWS_WITH(emergent::resolve_self_pretraining(c, "f"), doctest::Contains("max_len"));
  c = tiny_config();
  c["take"] = "qk";
  CHECK_THROWS_WITH(emergent::resolve_self_pretraining(c, "f"), doctest::Contains("warm_start"));
  c = tiny_config();
  c["colours"] = 3;
  CHECK_THROWS_WITH(emergent::resolve_self_pretraining(c, "f"),
                    doctest::Contains("unknown field 'colours'"));
  c = tiny_config();
  c["positions"] = "rotary";
  CHECK_THROWS_WITH(emergent::resolve_self_pretraining(c, "f"), doctest::Contains("positions"));
}

TEST_CASE("Proximity report: brute force, uniform attention, the position form") {
  using M = DoubleEncoder;
  std::vector<double> params(M::parameter_count);
  M::init(params, 3, emergent::PositionEncoding::sinusoidal);
  const std::vector<listops::Example> set = examples(4);
  std::vector<std::size_t> indices = {0, 1, 2, 3};
  const std::vector<std::uint64_t> keys = {0, 1, 2, 3};
  const emergent::PaddedBatch b = emergent::pad_batch(set, indices, 0.0, nullptr, keys);
  typename M::Workspace ws;
  const emergent::EncoderBatch in{b.batch, b.length, b.tokens, b.lengths, b.labels,
                                  {},      1,        0,        {},        0};
  M::forward(params, in, ws);
  const emergent::ProximityReport r = emergent::proximity_report<M>(params, ws, 4);
  // The distance of layer 1, head 0 by brute force.
  double distance = 0;
  int queries = 0;
  for (int s = 0; s < b.batch; ++s)
    for (int i = 0; i < b.lengths[s]; ++i, ++queries)
      for (int j = 0; j < b.lengths[s]; ++j)
        distance +=
            ws.layers[1].mixer.att[((std::size_t(s) * 2 + 0) * b.length + i) * b.length + j] *
            std::abs(i - j);
  CHECK(r.heads[1][0].distance == doctest::Approx(distance / queries).epsilon(1e-12));
  // The mass profile at offset 0 is the mean of the diagonal.
  double diagonal = 0;
  for (int s = 0; s < b.batch; ++s)
    for (int i = 0; i < b.lengths[s]; ++i)
      diagonal += ws.layers[0].mixer.att[((std::size_t(s) * 2 + 1) * b.length + i) * b.length + i];
  CHECK(r.heads[0][1].mass_profile[4] == doctest::Approx(diagonal / queries).epsilon(1e-12));

  // Zero query and key weights: uniform attention, proximity 0, flat scores and form.
  for (int l = 0; l < kTiny.layers; ++l)
    std::fill_n(params.begin() + M::mixer_offset(l) + M::Mixer::qkv_weight,
                2 * kTiny.d_model * kTiny.d_model, 0.0);
  std::fill_n(params.begin() + M::mixer_offset(0) + M::Mixer::qkv_bias, 2 * kTiny.d_model, 0.0);
  std::fill_n(params.begin() + M::mixer_offset(1) + M::Mixer::qkv_bias, 2 * kTiny.d_model, 0.0);
  M::forward(params, in, ws);
  const emergent::ProximityReport u = emergent::proximity_report<M>(params, ws, 4);
  for (const auto& layer : u.heads)
    for (const emergent::HeadProximity& h : layer) {
      CHECK(std::abs(h.proximity) < 1e-12);
      for (double s : h.score_profile) CHECK(std::abs(s) < 1e-12);
    }

  // W_Q = W_K = identity on head 0's columns: the form is the sinusoids' own p_i . p_j over
  // those columns, largest at offset 0.
  std::fill_n(params.begin() + M::mixer_offset(0) + M::Mixer::qkv_weight,
              3 * kTiny.d_model * kTiny.d_model, 0.0);
  for (int e = 0; e < 8; ++e) {
    params[M::mixer_offset(0) + M::Mixer::qkv_weight + e * kTiny.d_model + e] = 1.0;
    params[M::mixer_offset(0) + M::Mixer::qkv_weight + (kTiny.d_model + e) * kTiny.d_model + e] =
        1.0;
  }
  M::forward(params, in, ws);
  const emergent::ProximityReport f = emergent::proximity_report<M>(params, ws, 4);
  const std::vector<double>& form = f.position_form[0];
  CHECK(std::max_element(form.begin(), form.end()) - form.begin() == 4);
  CHECK(form[3] == doctest::Approx(form[5]).epsilon(1e-9));  // symmetric in the offset
}

TEST_CASE("A tiny SPT run: stages, rows, and a killed run resumes to the same bits") {
  TempDir dir;
  const nlohmann::json config = tiny_config();
  const nlohmann::json summary = run(config, dir.path / "whole");
  CHECK(summary["steps_done"] == 12);
  const std::vector<nlohmann::json> whole = rows(dir.path / "whole");
  REQUIRE(whole.size() == 4);  // steps 0, 4, 8 and the last, 11
  CHECK(whole[0]["stage"] == "reconstruction");
  CHECK(whole[1]["stage"] == "reconstruction");
  CHECK(whole[2]["stage"] == "label");
  CHECK(whole[3]["step"] == 11);
  for (const nlohmann::json& r : whole) {
    CHECK(r["test_accuracy"].get<double>() >= 0.0);
    CHECK(r["proximity"].size() == 2);
    CHECK(r["d_label_d_proximity"].size() == 2);
    CHECK(r["d_reconstruction_d_proximity"][0].size() == 2);
    CHECK(r["position_form"].size() == 2);
  }
  CHECK(std::filesystem::exists(emergent::checkpoint_path(dir.path / "whole", 6)));

  // Stopped after 7 steps (a checkpoint at 6), then resumed to 12: the same rows and weights.
  nlohmann::json first = config;
  first["steps"] = 7;
  run(first, dir.path / "resumed");
  std::filesystem::remove(emergent::checkpoint_path(dir.path / "resumed", 7));
  run(config, dir.path / "resumed");
  std::vector<nlohmann::json> resumed = rows(dir.path / "resumed");
  REQUIRE(resumed.size() == 4);  // the first row after the resume records the extension
  CHECK(resumed[2]["changed_on_resume"] == nlohmann::json{{"steps", {{"from", 7}, {"to", 12}}}});
  resumed[2].erase("changed_on_resume");
  CHECK(resumed == whole);
  CHECK(final_parameters(dir.path / "resumed", 12) == final_parameters(dir.path / "whole", 12));

  // Another configuration in the same folder is refused.
  nlohmann::json other = config;
  other["lr"] = 0.01;
  CHECK_THROWS_WITH(run(other, dir.path / "whole"), doctest::Contains("another configuration"));
  // So is an edited config.json: the checkpoint says what the run is.
  {
    nlohmann::json edited = config;
    edited["lr"] = 0.01;
    std::ofstream(dir.path / "whole" / "config.json") << edited.dump(2);
    nlohmann::json longer = edited;
    longer["steps"] = 20;
    CHECK_THROWS_WITH(run(longer, dir.path / "whole"),
                      doctest::Contains("lr: 0.0005 (step_000012.safetensors), 0.01 (config.json), "
                                        "0.01 (given)"));
  }
}

TEST_CASE("A warm start that cannot be read leaves no folder, so the retry starts clean") {
  TempDir dir;
  nlohmann::json c = tiny_config();
  c["warm_start"] = (dir.path / "nonexistent.safetensors").string();
  CHECK_THROWS_WITH(run(c, dir.path / "typo"), doctest::Contains("nonexistent.safetensors"));
  CHECK_FALSE(std::filesystem::exists(dir.path / "typo"));
  c.erase("warm_start");
  CHECK(run(c, dir.path / "typo")["steps_done"] == 12);
}

TEST_CASE("Warm starts: all, only the query-key projections, all but them") {
  TempDir dir;
  nlohmann::json source = tiny_config();
  source["steps"] = 6;
  run(source, dir.path / "source");
  const std::vector<float> pretrained = final_parameters(dir.path / "source", 6);
  std::vector<float> fresh(TinyEncoder::parameter_count);
  TinyEncoder::init(fresh, 9, emergent::PositionEncoding::sinusoidal);
  for (const char* take : {"all", "qk", "all_but_qk"}) {
    CAPTURE(take);
    nlohmann::json c = tiny_config();
    c["steps"] = 1;
    c["pretrain_steps"] = 0;
    c["lr"] = 1e-30;  // one update that moves nothing measurable: the start is what we see
    c["warmup_steps"] = 0;
    c["seed"] = 9;
    c["warm_start"] = emergent::checkpoint_path(dir.path / "source", 6).string();
    c["take"] = take;
    run(c, dir.path / take);
    const std::vector<float> start = final_parameters(dir.path / take, 1);
    for (const auto& t : TinyEncoder::tensors()) {
      const bool qkv = t.name.find("mixer.qkv") != std::string::npos;
      for (std::size_t i = 0; i < t.size; i += 7) {
        const std::size_t at = t.offset + i;
        const bool query_key = qkv && i < (t.shape.size() == 2 ? 2u * 16 * 16 : 2u * 16);
        const bool from_source =
            std::string(take) == "all" || (std::string(take) == "qk" ? query_key : !query_key);
        CAPTURE(t.name);
        CHECK(start[at] == doctest::Approx(from_source ? pretrained[at] : fresh[at]).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("The blindness measurement is the derivative along the proximity profile") {
  // d(loss)/da of adding a f(j - i) to head h of layer l, against central differences.
  using M = DoubleEncoder;
  std::vector<double> params(M::parameter_count);
  M::init(params, 11, emergent::PositionEncoding::sinusoidal);
  const std::vector<listops::Example> set = examples(6);
  std::vector<std::size_t> indices = {0, 1, 2, 3, 4, 5};
  const std::vector<std::uint64_t> keys(indices.begin(), indices.end());
  const emergent::PhiloxStream stream(2, 3);
  const emergent::PaddedBatch b = emergent::pad_batch(set, indices, 0.2, &stream, keys);
  const std::vector<float> pattern = emergent::proximity_pattern(b.length);
  for (const bool label : {true, false}) {
    CAPTURE(label);
    const emergent::EncoderBatch in{b.batch,  b.length,    b.tokens,          b.lengths,
                                    b.labels, b.originals, label ? 1.0 : 0.0, label ? 0.0 : 1.0,
                                    pattern,  0.0f};
    typename M::Workspace ws;
    M::forward(params, in, ws);
    std::vector<double> grads(M::parameter_count, 0.0);
    M::backward(params, grads, ws, false);
    for (int l = 0; l < kTiny.layers; ++l)
      for (int h = 0; h < kTiny.heads; ++h) {
        double& slope = params[M::slope_offset(l) + h];
        slope = 1e-5;
        const double up = M::forward(params, in, ws).total;
        slope = -1e-5;
        const double down = M::forward(params, in, ws).total;
        slope = 0;
        CHECK(grads[M::slope_offset(l) + h] ==
              doctest::Approx((up - down) / 2e-5).epsilon(1e-5).scale(1e-9));
      }
  }
}
