// Tests of the GPT-NeoX loader and forward pass (neox/, io/checkpoint_folder.hpp) against the
// golden fixtures of tests/golden/neox, which transformers made (make_neox_golden.py): logits
// and attention patterns of every fixture folder (fp32, fp16, sharded, the 2023 Pythia layout
// with its buffers, sequential residual with tanh GELU, tied embeddings without attention
// biases), attention-pattern patching between two models, the hooks' contract, and a clear
// error for every kind of bad checkpoint.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <emergent/io/checkpoint_folder.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/neox/checkpoint_tensors.hpp>
#include <emergent/neox/load_checkpoint.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "neox_fixtures.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using emergent::Error;
using emergent::neox::ForwardHooks;
using emergent::neox::load_checkpoint;
using emergent::neox::Network;
using emergent::neox::PatternOverride;

namespace {

const emergent::SafetensorsFile& expected_values() {
  static const emergent::SafetensorsFile file(kNeoxGolden / "expected.safetensors");
  return file;
}

std::vector<std::int32_t> tokens_of(const nlohmann::json& prompt) {
  return prompt.at("tokens").get<std::vector<std::int32_t>>();
}

// max |a - b| / (atol + rtol |b|) over the elements: <= 1 means within tolerance.
double tolerance_ratio(const std::vector<float>& a, const std::vector<float>& b, double atol,
                       double rtol) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = std::abs(static_cast<double>(a[i]) - b[i]);
    worst = std::max(worst, err / (atol + rtol * std::abs(static_cast<double>(b[i]))));
    if (std::isnan(a[i]) != std::isnan(b[i])) return std::numeric_limits<double>::infinity();
  }
  return worst;
}

// Runs the network and collects the patterns of every layer, [L, H, T, T].
std::pair<std::vector<float>, std::vector<float>> forward_with_patterns(
    const Network& net, const std::vector<std::int32_t>& tokens,
    std::vector<PatternOverride> overrides = {}) {
  std::vector<float> patterns;
  ForwardHooks hooks;
  hooks.on_pattern = [&](int, std::span<const float> p) {
    patterns.insert(patterns.end(), p.begin(), p.end());
  };
  hooks.overrides = std::move(overrides);
  std::vector<float> logits = net.forward(tokens, hooks);
  return {std::move(logits), std::move(patterns)};
}

double softmax_probability(const std::vector<float>& logits, int vocab, int position, int target) {
  const float* row = logits.data() + static_cast<std::size_t>(position) * vocab;
  const double max = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);
  return std::exp(row[target] - max) / sum;
}

// A writable copy of a fixture folder inside `tmp`.
fs::path writable_copy(const TempDir& tmp, const std::string& fixture) {
  const fs::path to = tmp / fixture;
  fs::copy(kNeoxGolden / fixture, to, fs::copy_options::recursive);
  for (const auto& entry : fs::directory_iterator(to)) {
    fs::permissions(entry.path(), fs::perms::owner_read | fs::perms::owner_write,
                    fs::perm_options::add);
  }
  return to;
}

std::string error_of(const fs::path& folder) {
  try {
    load_checkpoint(folder);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Rewrites <folder>/model.safetensors (an F32 fixture) through `edit` of its tensor list.
template <class Edit>
void rewrite_weights(const fs::path& folder, Edit edit) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> meta;
  std::vector<std::vector<float>> values;
  {
    const emergent::SafetensorsFile file(folder / "model.safetensors");
    for (const auto& t : file.tensors()) {
      meta.emplace_back(t.name, t.shape);
      values.push_back(file.read_f32(t.name));
    }
  }
  std::vector<emergent::TensorToWrite> tensors;
  for (std::size_t i = 0; i < meta.size(); ++i)
    tensors.push_back({meta[i].first, meta[i].second, values[i]});
  edit(tensors);
  emergent::write_safetensors(folder / "model.safetensors", tensors);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE(
    "neox golden: logits and attention patterns match transformers for every fixture folder") {
  const nlohmann::json m = neox_manifest();
  INFO("fixtures made with transformers " << m["versions"]["transformers"].get<std::string>());
  for (const auto& c : m["cases"]) {
    const std::string folder = c["folder"];
    CAPTURE(folder);
    const auto loaded = load_checkpoint(kNeoxGolden / folder);
    CHECK(loaded.sha256 == c["sha256"].get<std::string>());
    const Network& net = *loaded.network;
    const int L = net.layers(), H = net.heads(), V = net.config().vocab_size;
    for (std::size_t i = 0; i < c["prompts"].size(); ++i) {
      const auto& prompt = c["prompts"][i];
      const auto tokens = tokens_of(prompt);
      const int T = static_cast<int>(tokens.size());
      CAPTURE(T);
      const auto [logits, patterns] = forward_with_patterns(net, tokens);
      const std::string key = c["expected"].get<std::string>() + ".prompt" + std::to_string(i);
      REQUIRE(logits.size() == static_cast<std::size_t>(T) * V);
      CHECK(tolerance_ratio(logits, expected_values().read_f32(key + ".logits"), 1e-5, 1e-4) <=
            1.0);
      REQUIRE(patterns.size() == static_cast<std::size_t>(L) * H * T * T);
      if (prompt["patterns"].get<bool>()) {
        CHECK(tolerance_ratio(patterns, expected_values().read_f32(key + ".patterns"), 1e-6,
                              1e-4) <= 1.0);
      }
    }
  }
}

TEST_CASE("neox: the sharded checkpoint equals the unsharded one") {
  const auto single = load_checkpoint(kNeoxGolden / "parallel_f16");
  const auto sharded = load_checkpoint(kNeoxGolden / "parallel_f16_sharded");
  CHECK(emergent::CheckpointFolder(kNeoxGolden / "parallel_f16_sharded").sharded());
  CHECK(emergent::CheckpointFolder(kNeoxGolden / "parallel_f16_sharded").files().size() >= 2);
  CHECK(single.sha256 != sharded.sha256);  // the sharded hash covers the shards' bytes
  for (const auto& t : emergent::neox::checkpoint_tensors(single.network->config())) {
    CAPTURE(t.name);
    const auto a = single.network->parameter(t.name), b = sharded.network->parameter(t.name);
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
  const std::vector<std::int32_t> tokens = {5, 99, 3, 3, 127, 0, 64};
  CHECK(single.network->forward(tokens) == sharded.network->forward(tokens));
}

TEST_CASE("neox: the sha256 of one model.safetensors is that of its bytes") {
  const fs::path file = kNeoxGolden / "parallel_f32" / "model.safetensors";
  const std::string bytes = read_text(file);
  CHECK(load_checkpoint(kNeoxGolden / "parallel_f32").sha256 ==
        emergent::sha256_hex(std::string_view(bytes)));
}

TEST_CASE("neox golden: attention-pattern patching between two models matches transformers") {
  const nlohmann::json m = neox_manifest();
  for (const auto& p : m["patching"]) {
    const auto pre = load_checkpoint(kNeoxGolden / p["pre"].get<std::string>());
    const auto post = load_checkpoint(kNeoxGolden / p["post"].get<std::string>());
    const nlohmann::json* prompt = nullptr;
    for (const auto& c : m["cases"])
      if (c["folder"] == p["pre"]) prompt = &c["prompts"][p["prompt"].get<std::size_t>()];
    REQUIRE(prompt != nullptr);
    const auto tokens = tokens_of(*prompt);
    const int T = static_cast<int>(tokens.size()), last = T - 1;
    const int target = p["target"], V = pre.network->config().vocab_size, H = pre.network->heads();
    CAPTURE(T);
    CAPTURE(target);

    const auto [post_logits, post_patterns] = forward_with_patterns(*post.network, tokens);
    const auto pre_logits = pre.network->forward(tokens);
    CHECK(softmax_probability(pre_logits, V, last, target) ==
          doctest::Approx(p["p_pre"].get<double>()).epsilon(1e-4));
    CHECK(softmax_probability(post_logits, V, last, target) ==
          doctest::Approx(p["p_post"].get<double>()).epsilon(1e-4));
    const std::size_t tt = static_cast<std::size_t>(T) * T;
    for (int layer = 0; layer < pre.network->layers(); ++layer) {
      for (int head = 0; head < H; ++head) {
        CAPTURE(layer);
        CAPTURE(head);
        const auto begin =
            post_patterns.begin() +
            static_cast<std::ptrdiff_t>((static_cast<std::size_t>(layer) * H + head) * tt);
        PatternOverride o{layer, head,
                          std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(tt))};
        const auto [logits, patterns] = forward_with_patterns(*pre.network, tokens, {o});
        const double expected = p["p_patched"][layer][head];
        CHECK(softmax_probability(logits, V, last, target) ==
              doctest::Approx(expected).epsilon(1e-4));
        // on_pattern reports the override for the patched head.
        const auto reported =
            patterns.begin() +
            static_cast<std::ptrdiff_t>((static_cast<std::size_t>(layer) * H + head) * tt);
        CHECK(std::equal(o.pattern.begin(), o.pattern.end(), reported));
      }
    }
  }
}

TEST_CASE("neox: overriding every head with its own pattern changes nothing") {
  const auto loaded = load_checkpoint(kNeoxGolden / "parallel_f32");
  const Network& net = *loaded.network;
  // 70 tokens: two query blocks of the attention, so the override path covers both.
  std::vector<std::int32_t> tokens(70);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::int32_t>((i * 37 + 11) % 128);
  const int T = static_cast<int>(tokens.size()), H = net.heads();
  const auto [logits, patterns] = forward_with_patterns(net, tokens);
  std::vector<PatternOverride> own;
  const std::size_t tt = static_cast<std::size_t>(T) * T;
  for (int layer = 0; layer < net.layers(); ++layer) {
    for (int head = 0; head < H; ++head) {
      const auto begin = patterns.begin() + static_cast<std::ptrdiff_t>(
                                                (static_cast<std::size_t>(layer) * H + head) * tt);
      own.push_back(
          {layer, head, std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(tt))});
    }
  }
  const auto [overridden, reported] = forward_with_patterns(net, tokens, own);
  CHECK(tolerance_ratio(overridden, logits, 1e-6, 1e-6) <= 1.0);
  CHECK(reported == patterns);
}

TEST_CASE("neox: hooks are called per layer in order with [H, T, T] scores and patterns") {
  const auto loaded = load_checkpoint(kNeoxGolden / "sequential_f32");
  const Network& net = *loaded.network;
  const std::vector<std::int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  const int T = static_cast<int>(tokens.size()), H = net.heads();
  const std::size_t htt = static_cast<std::size_t>(H) * T * T;
  std::vector<std::pair<std::string, int>> calls;
  std::vector<float> scores;
  ForwardHooks hooks;
  hooks.on_scores = [&](int layer, std::span<const float> s) {
    calls.emplace_back("scores", layer);
    CHECK(s.size() == htt);
    scores.assign(s.begin(), s.end());
  };
  hooks.on_pattern = [&](int layer, std::span<const float> p) {
    calls.emplace_back("pattern", layer);
    REQUIRE(p.size() == htt);
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < T; ++i) {
        const float* srow = scores.data() + (static_cast<std::size_t>(h) * T + i) * T;
        const float* prow = p.data() + (static_cast<std::size_t>(h) * T + i) * T;
        double max = -INFINITY, sum = 0, psum = 0;
        for (int j = 0; j <= i; ++j) max = std::max(max, static_cast<double>(srow[j]));
        for (int j = 0; j <= i; ++j) sum += std::exp(srow[j] - max);
        for (int j = 0; j < T; ++j) {
          if (j > i) {
            CHECK(srow[j] == -std::numeric_limits<float>::infinity());
            CHECK(prow[j] == 0.0f);
          } else {
            CHECK(std::isfinite(srow[j]));
            CHECK(prow[j] == doctest::Approx(std::exp(srow[j] - max) / sum).epsilon(1e-5));
          }
          psum += prow[j];
        }
        CHECK(psum == doctest::Approx(1.0).epsilon(1e-5));
      }
    }
  };
  const auto logits = net.forward(tokens, hooks);
  CHECK(logits == net.forward(tokens));  // hooks observe without changing anything
  const std::vector<std::pair<std::string, int>> expected = {
      {"scores", 0}, {"pattern", 0}, {"scores", 1}, {"pattern", 1}};
  CHECK(calls == expected);
}

TEST_CASE("neox: bad forward inputs are errors") {
  const auto loaded = load_checkpoint(kNeoxGolden / "tied_f32");
  const Network& net = *loaded.network;
  const std::vector<std::int32_t> tokens = {1, 2, 3};
  CHECK_THROWS_WITH_AS(net.forward(std::vector<std::int32_t>{1, 80}),
                       doctest::Contains("token id 80 at position 1"), Error);
  CHECK_THROWS_WITH_AS(net.forward(std::vector<std::int32_t>{-1}),
                       doctest::Contains("outside the vocabulary"), Error);
  CHECK_THROWS_WITH_AS(net.forward(std::vector<std::int32_t>{}), doctest::Contains("empty"), Error);
  ForwardHooks hooks;
  hooks.overrides = {{0, 0, std::vector<float>(8, 0.0f)}};
  CHECK_THROWS_WITH_AS(net.forward(tokens, hooks), doctest::Contains("expected T * T = 9"), Error);
  hooks.overrides = {{1, 0, std::vector<float>(9, 0.0f)}};
  CHECK_THROWS_WITH_AS(net.forward(tokens, hooks), doctest::Contains("out of range"), Error);
  hooks.overrides = {{0, 2, std::vector<float>(9, 0.0f)}, {0, 2, std::vector<float>(9, 0.0f)}};
  CHECK_THROWS_WITH_AS(net.forward(tokens, hooks), doctest::Contains("given twice"), Error);
  CHECK_THROWS_WITH_AS(net.parameter("embed_out.weight"),
                       doctest::Contains("no parameter named 'embed_out.weight'"), Error);
}

TEST_CASE("neox: checkpoint tensor names and the buffers to skip") {
  emergent::NeoxConfig c;
  c.vocab_size = 50304;
  c.hidden_size = 768;
  c.num_hidden_layers = 12;
  c.num_attention_heads = 12;
  c.intermediate_size = 3072;
  const auto tensors = emergent::neox::checkpoint_tensors(c);
  CHECK(tensors.size() == 148);  // 12 L + 4, as pythia-160m's state dict
  std::int64_t params = 0;
  for (const auto& t : tensors) {
    std::int64_t n = 1;
    for (const auto d : t.shape) n *= d;
    params += n;
  }
  CHECK(params == 162'322'944);  // pythia-160m total parameters (docs/paper-notes.md §8)
  using emergent::neox::is_ignored_buffer;
  CHECK(is_ignored_buffer("gpt_neox.layers.0.attention.bias"));
  CHECK(is_ignored_buffer("gpt_neox.layers.11.attention.masked_bias"));
  CHECK(is_ignored_buffer("gpt_neox.layers.3.attention.rotary_emb.inv_freq"));
  CHECK_FALSE(is_ignored_buffer("gpt_neox.layers.3.attention.dense.bias"));
  CHECK_FALSE(is_ignored_buffer("gpt_neox.layers..attention.bias"));
  CHECK_FALSE(is_ignored_buffer("gpt_neox.layers.x.attention.bias"));
  CHECK_FALSE(is_ignored_buffer("gpt_neox.rotary_emb.inv_freq"));
}

TEST_CASE("neox: a bad checkpoint folder is an error naming the file and the tensor or field") {
  TempDir tmp;
  SUBCASE("missing tensor") {
    const fs::path f = writable_copy(tmp, "parallel_f32");
    rewrite_weights(f, [](std::vector<emergent::TensorToWrite>& t) {
      std::erase_if(
          t, [](const auto& x) { return x.name == "gpt_neox.layers.1.mlp.dense_4h_to_h.bias"; });
    });
    const std::string e = error_of(f);
    CHECK(e.find((f / "model.safetensors").string()) != std::string::npos);
    CHECK(e.find("missing tensor 'gpt_neox.layers.1.mlp.dense_4h_to_h.bias'") != std::string::npos);
  }
  SUBCASE("wrong shape") {
    const fs::path f = writable_copy(tmp, "parallel_f32");
    rewrite_weights(f, [](std::vector<emergent::TensorToWrite>& t) {
      for (auto& x : t)
        if (x.name == "gpt_neox.layers.0.attention.dense.bias") x.shape = {8, 8};
    });
    const std::string e = error_of(f);
    CHECK(e.find((f / "model.safetensors").string()) != std::string::npos);
    CHECK(
        e.find(
            "'gpt_neox.layers.0.attention.dense.bias': shape [8, 8] in the file, expected [64]") !=
        std::string::npos);
  }
  SUBCASE("a tensor the model does not have") {
    const fs::path f = writable_copy(tmp, "parallel_f32");
    const std::vector<float> extra(4, 1.0f);
    rewrite_weights(f, [&](std::vector<emergent::TensorToWrite>& t) {
      t.push_back({"gpt_neox.layers.0.mystery", {4}, extra});
    });
    const std::string e = error_of(f);
    CHECK(e.find("tensor 'gpt_neox.layers.0.mystery' is not a parameter") != std::string::npos);
  }
  SUBCASE("embed_out in a checkpoint whose config ties it") {
    const fs::path f = writable_copy(tmp, "tied_f32");
    const std::vector<float> extra(80 * 32, 0.5f);
    rewrite_weights(f, [&](std::vector<emergent::TensorToWrite>& t) {
      t.push_back({"embed_out.weight", {80, 32}, extra});
    });
    CHECK(error_of(f).find("tie_word_embeddings is true") != std::string::npos);
  }
  SUBCASE("missing shard") {
    const fs::path f = writable_copy(tmp, "parallel_f16_sharded");
    fs::remove(f / "model-00002-of-00003.safetensors");
    const std::string e = error_of(f);
    CHECK(e.find((f / "model.safetensors.index.json").string() +
                 ": shard 'model-00002-of-00003.safetensors' (holding tensor '") !=
          std::string::npos);
    CHECK(e.find("cannot be read") != std::string::npos);
  }
  SUBCASE("index maps a tensor to a shard that lacks it") {
    const fs::path f = writable_copy(tmp, "parallel_f16_sharded");
    auto index = nlohmann::json::parse(read_text(f / "model.safetensors.index.json"));
    const std::string moved = "gpt_neox.embed_in.weight";
    const std::string from = index["weight_map"][moved];
    const std::string to = from == "model-00001-of-00003.safetensors"
                               ? "model-00002-of-00003.safetensors"
                               : "model-00001-of-00003.safetensors";
    index["weight_map"][moved] = to;
    write_text(f / "model.safetensors.index.json", index.dump());
    const std::string e = error_of(f);
    CHECK(e.find("tensor '" + moved + "' is mapped to shard '" + to +
                 "', which does not contain it") != std::string::npos);
  }
  SUBCASE("a shard holds a tensor the index does not list") {
    const fs::path f = writable_copy(tmp, "parallel_f16_sharded");
    auto index = nlohmann::json::parse(read_text(f / "model.safetensors.index.json"));
    index["weight_map"].erase("gpt_neox.final_layer_norm.bias");
    write_text(f / "model.safetensors.index.json", index.dump());
    CHECK(
        error_of(f).find(
            "holds tensor 'gpt_neox.final_layer_norm.bias', which the weight_map does not list") !=
        std::string::npos);
  }
  SUBCASE("index names a file outside the folder") {
    const fs::path f = writable_copy(tmp, "parallel_f16_sharded");
    write_text(f / "model.safetensors.index.json",
               R"({"weight_map": {"a": "../model.safetensors"}})");
    CHECK(error_of(f).find("is not a plain file name") != std::string::npos);
  }
  SUBCASE("bad config field") {
    const fs::path f = writable_copy(tmp, "parallel_f32");
    auto config = nlohmann::json::parse(read_text(f / "config.json"));
    config["num_attention_heads"] = "four";
    write_text(f / "config.json", config.dump());
    const std::string e = error_of(f);
    CHECK(e.find((f / "config.json").string() +
                 ": field 'num_attention_heads': expected a positive integer") !=
          std::string::npos);
  }
  SUBCASE("no config.json, no weights") {
    const fs::path f = writable_copy(tmp, "parallel_f32");
    fs::remove(f / "model.safetensors");
    CHECK(error_of(f).find(
              ": no weights: expected model.safetensors or model.safetensors.index.json") !=
          std::string::npos);
    fs::remove(f / "config.json");
    CHECK(error_of(f).find((f / "config.json").string() + ": cannot open") != std::string::npos);
  }
  SUBCASE("a shape that is not compiled") {
    const fs::path f = writable_copy(tmp, "parallel_f32");
    auto config = nlohmann::json::parse(read_text(f / "config.json"));
    config["num_hidden_layers"] = 3;
    write_text(f / "config.json", config.dump());
    const std::string e = error_of(f);
    CHECK(e.find("no compiled GPT-NeoX shape matches this config") != std::string::npos);
    CHECK(e.find("pythia-160m {.d_model = 768, .heads = 12, .layers = 12, .d_ff = 3072, "
                 ".rotary_dims = 16}") != std::string::npos);
    CHECK(e.find("NamedNeoxShape{\"my-model\", {.d_model = 64, .heads = 4, .layers = 3, .d_ff = "
                 "256, .rotary_dims = 4}},") != std::string::npos);
  }
}

TEST_CASE("checkpoint folder: the index parser") {
  using emergent::parse_safetensors_index;
  const auto index = parse_safetensors_index(
      R"({"metadata": {"total_size": 8}, "weight_map": {"b": "s2.safetensors", )"
      R"("a": "s1.safetensors", "c": "s1.safetensors"}})",
      "idx.json");
  CHECK(index.shards == std::vector<std::string>{"s1.safetensors", "s2.safetensors"});
  CHECK(index.weight_map.at("b") == "s2.safetensors");
  const auto error = [](std::string_view text) {
    try {
      parse_safetensors_index(text, "idx.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(error("[1]").find("idx.json: index is not a JSON object") == 0);
  CHECK(error("{}").find("idx.json: missing field 'weight_map'") == 0);
  CHECK(error(R"({"weight_map": {}})").find("is empty") != std::string::npos);
  CHECK(error(R"({"weight_map": {"a": 3}})").find("weight_map['a'] is not a string") !=
        std::string::npos);
  CHECK(error(R"({"weight_map": {"a": "x", "a": "y"}})").find("duplicate key 'a'") !=
        std::string::npos);
  CHECK(error(R"({"weight_map": {"a": ".."}})").find("not a plain file name") != std::string::npos);
  CHECK(error(R"({"weight_map": {"a": "d/x"}})").find("not a plain file name") !=
        std::string::npos);
  CHECK(error(R"({"weight_map": {"a": "x\u0000y"}})").find("not a plain file name") !=
        std::string::npos);
  CHECK(error("{\"weight_map\": ").find("not valid JSON") != std::string::npos);
  CHECK(error(std::string(100, '[')).find("nested deeper") != std::string::npos);
}
