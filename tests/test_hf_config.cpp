// Tests of io/hf_config.hpp: GPT-NeoX config.json in the spellings transformers has used (the
// 2023 Pythia files, transformers 5's rope_parameters, the fixtures of tests/golden/neox),
// defaults, and an error naming the file and the field for every bad value.
#include <doctest/doctest.h>

#include <emergent/io/hf_config.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace fs = std::filesystem;
using emergent::Error;
using emergent::NeoxActivation;
using emergent::NeoxConfig;
using nlohmann::json;

namespace {

const fs::path kGolden = fs::path(EMERGENT_SOURCE_DIR) / "tests" / "golden" / "neox";

// The config.json of EleutherAI/pythia-160m as the hub serves it (2023 field names).
json pythia_160m() {
  return json::parse(R"({
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
    "hidden_act": "gelu", "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "model_type": "gpt_neox",
    "num_attention_heads": 12, "num_hidden_layers": 12, "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "tie_word_embeddings": false, "torch_dtype": "float16", "transformers_version": "4.24.0",
    "use_cache": true, "use_parallel_residual": true, "vocab_size": 50304})");
}

std::string error_of(const json& config) {
  try {
    emergent::parse_neox_config(config, "dir/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("hf_config: the 2023 Pythia config") {
  const NeoxConfig c = emergent::parse_neox_config(pythia_160m(), "config.json");
  CHECK(c.vocab_size == 50304);
  CHECK(c.hidden_size == 768);
  CHECK(c.num_hidden_layers == 12);
  CHECK(c.num_attention_heads == 12);
  CHECK(c.intermediate_size == 3072);
  CHECK(c.rotary_pct == 0.25);
  CHECK(c.rotary_emb_base == 10000.0);
  CHECK(c.max_position_embeddings == 2048);
  CHECK(c.layer_norm_eps == 1e-5);
  CHECK(c.use_parallel_residual);
  CHECK(c.activation == NeoxActivation::gelu_erf);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.attention_bias);
  CHECK(c.head_dim() == 64);
  CHECK(c.rotary_ndims() == 16);
}

TEST_CASE("hf_config: the fixtures, in transformers 5 spelling and the old one") {
  const NeoxConfig parallel = emergent::read_neox_config(kGolden / "parallel_f32" / "config.json");
  CHECK(parallel.hidden_size == 64);
  CHECK(parallel.rotary_ndims() == 4);  // rope_parameters.partial_rotary_factor 0.25 of d_head 16
  const NeoxConfig legacy =
      emergent::read_neox_config(kGolden / "parallel_legacy_f16" / "config.json");
  CHECK(legacy.rotary_pct == 0.25);
  CHECK(legacy.rotary_emb_base == 10000.0);
  CHECK(legacy.max_position_embeddings == 128);
  const NeoxConfig sequential =
      emergent::read_neox_config(kGolden / "sequential_f32" / "config.json");
  CHECK_FALSE(sequential.use_parallel_residual);
  CHECK(sequential.activation == NeoxActivation::gelu_tanh);
  CHECK(sequential.rotary_ndims() == 8);
  const NeoxConfig tied = emergent::read_neox_config(kGolden / "tied_f32" / "config.json");
  CHECK(tied.tie_word_embeddings);
  CHECK_FALSE(tied.attention_bias);
  CHECK(tied.rotary_emb_base == 500.0);
  CHECK(tied.rotary_ndims() == 8);
}

TEST_CASE("hf_config: defaults and alternative spellings") {
  const json minimal = {{"model_type", "gpt_neox"}, {"vocab_size", 10},
                        {"hidden_size", 16},        {"num_hidden_layers", 1},
                        {"num_attention_heads", 2}, {"intermediate_size", 64}};
  const NeoxConfig c = emergent::parse_neox_config(minimal, "config.json");
  CHECK(c.rotary_pct == 0.25);
  CHECK(c.rotary_ndims() == 2);
  CHECK(c.rotary_emb_base == 10000.0);
  CHECK(c.max_position_embeddings == 2048);
  CHECK(c.layer_norm_eps == 1e-5);
  CHECK(c.use_parallel_residual);
  CHECK(c.hidden_act == "gelu");
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.attention_bias);

  json spelled = minimal;
  spelled["partial_rotary_factor"] = 0.5;
  spelled["rope_theta"] = 20000;
  spelled["rope_scaling"] = nullptr;
  spelled["head_dim"] = 8;
  NeoxConfig s = emergent::parse_neox_config(spelled, "config.json");
  CHECK(s.rotary_ndims() == 4);
  CHECK(s.rotary_emb_base == 20000.0);

  json nested = minimal;
  nested["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 500.0}, {"partial_rotary_factor", 1.0}};
  nested["rotary_pct"] = 1.0;  // agrees
  s = emergent::parse_neox_config(nested, "config.json");
  CHECK(s.rotary_ndims() == 8);
  CHECK(s.rotary_emb_base == 500.0);

  for (const char* act : {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"}) {
    json tanh = minimal;
    tanh["hidden_act"] = act;
    CHECK(emergent::parse_neox_config(tanh, "config.json").activation == NeoxActivation::gelu_tanh);
  }
}

TEST_CASE("hf_config: every bad value is an error naming the file and the field") {
  const auto with = [](const char* field, const json& value) {
    json c = pythia_160m();
    c[field] = value;
    return c;
  };
  const auto without = [](const char* field) {
    json c = pythia_160m();
    c.erase(field);
    return c;
  };
  CHECK(error_of(without("model_type")) ==
        "dir/config.json: field 'model_type' is missing (expected \"gpt_neox\")");
  CHECK(error_of(with("model_type", "llama"))
            .find("dir/config.json: field 'model_type' = \"llama\": only GPT-NeoX") == 0);
  CHECK(error_of(without("hidden_size")).find("dir/config.json: field 'hidden_size' is missing") ==
        0);
  CHECK(error_of(with("vocab_size", -3)) ==
        "dir/config.json: field 'vocab_size': expected a positive integer, got -3");
  CHECK(error_of(with("num_hidden_layers", 2.5))
            .find("field 'num_hidden_layers': expected a positive integer") != std::string::npos);
  CHECK(error_of(with("intermediate_size", "big")).find("field 'intermediate_size'") !=
        std::string::npos);
  CHECK(error_of(with("num_attention_heads", 7))
            .find("field 'num_attention_heads' = 7 does not divide hidden_size") !=
        std::string::npos);
  CHECK(error_of(with("head_dim", 32)).find("field 'head_dim' = 32") != std::string::npos);
  CHECK(error_of(with("partial_rotary_factor", 0.5))
            .find("field 'partial_rotary_factor' = 0.5 disagrees with field 'rotary_pct' = 0.25") !=
        std::string::npos);
  CHECK(error_of(with("rope_theta", 500))
            .find("field 'rope_theta' = 500 disagrees with field 'rotary_emb_base'") !=
        std::string::npos);
  CHECK(error_of(with("rope_scaling", {{"type", "linear"}, {"factor", 2.0}}))
            .find("field 'rope_scaling.type' = \"linear\": only the default") != std::string::npos);
  CHECK(error_of(with("rope_parameters", {{"rope_type", "yarn"}}))
            .find("field 'rope_parameters.rope_type'") != std::string::npos);
  CHECK(error_of(with("rope_parameters", 3))
            .find("field 'rope_parameters': expected an object or null") != std::string::npos);
  CHECK(error_of(with("rotary_pct", 0.3))
            .find("field 'rotary_pct' = 0.3 gives an odd number of rotary dimensions") !=
        std::string::npos);
  CHECK(error_of(with("rotary_pct", 1.5))
            .find("field 'rotary_pct' = 1.5: expected a fraction in [0, 1]") != std::string::npos);
  CHECK(error_of(with("rotary_pct", "a")).find("field 'rotary_pct': expected a number") !=
        std::string::npos);
  CHECK(error_of(with("rotary_emb_base", 0))
            .find("field 'rotary_emb_base' = 0.0: expected a positive number") !=
        std::string::npos);
  CHECK(error_of(with("layer_norm_eps", -1e-5)).find("field 'layer_norm_eps'") !=
        std::string::npos);
  CHECK(error_of(with("use_parallel_residual", "yes"))
            .find("field 'use_parallel_residual': expected true or false") != std::string::npos);
  CHECK(error_of(with("tie_word_embeddings", 1)).find("field 'tie_word_embeddings'") !=
        std::string::npos);
  CHECK(error_of(with("hidden_act", "relu"))
            .find("field 'hidden_act' = \"relu\" is not supported (supported: \"gelu\"") !=
        std::string::npos);
  CHECK(error_of(json::array()).find("dir/config.json: expected a JSON object") == 0);
}

TEST_CASE("hf_config: unreadable files") {
  CHECK_THROWS_WITH_AS(emergent::read_neox_config("/nonexistent/config.json"),
                       doctest::Contains("/nonexistent/config.json: cannot open"), Error);
  CHECK_THROWS_WITH_AS(emergent::parse_neox_config_text("{\"model_type\": ", "c.json"),
                       doctest::Contains("c.json: config is not valid JSON"), Error);
}
