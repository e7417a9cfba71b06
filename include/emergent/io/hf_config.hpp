// A GPT-NeoX (Pythia) `config.json` as Hugging Face transformers reads it -> NeoxConfig.
//
//   emergent::NeoxConfig c = emergent::read_neox_config("pythia-160m/config.json");
//
// Fields, with the defaults HF uses when one is absent (the sizes have no default: they are
// required):
//   model_type               must be "gpt_neox"
//   vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size
//                            required positive integers; hidden_size % num_attention_heads == 0
//   rotary_pct               0.25; also spelled partial_rotary_factor or
//                            rope_parameters.partial_rotary_factor (transformers >= 4.45 / 5)
//   rotary_emb_base          10000; also spelled rope_theta or rope_parameters.rope_theta
//   rope_parameters / rope_scaling
//                            absent, null, or of rope_type (or type) "default": scaled RoPE
//                            variants (linear, dynamic, yarn, ...) are refused
//   max_position_embeddings  2048 (recorded; HF computes rotary angles for any position)
//   layer_norm_eps           1e-5
//   use_parallel_residual    true   (x + attn(ln1 x) + mlp(ln2 x); false: sequential)
//   hidden_act               "gelu" = exact erf GELU; the tanh approximation under its HF names
//                            "gelu_new", "gelu_pytorch_tanh", "gelu_fast"; anything else is refused
//   tie_word_embeddings      false  (true: the unembedding is embed_in.weight)
//   attention_bias           true   (false: query_key_value and attention.dense have no bias)
//   head_dim                 optional; if present it must equal hidden_size / num_attention_heads
// When a value is spelled more than one way in one file, the spellings must agree. Other fields
// (dropouts, dtype, bos/eos ids, ...) do not change the fp32 forward pass and are ignored.
//
// rotary_ndims = int(head_dim * rotary_pct) with Python's truncation, as HF computes it; it must
// be even. Every error is an emergent::Error that names the file and the field.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/io/safetensors.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace emergent {

enum class NeoxActivation { gelu_erf, gelu_tanh };

struct NeoxConfig {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int intermediate_size = 0;
  double rotary_pct = 0.25;
  double rotary_emb_base = 10000.0;
  int max_position_embeddings = 2048;
  double layer_norm_eps = 1e-5;
  bool use_parallel_residual = true;
  std::string hidden_act = "gelu";
  NeoxActivation activation = NeoxActivation::gelu_erf;  // what hidden_act names
  bool tie_word_embeddings = false;
  bool attention_bias = true;

  int head_dim() const { return hidden_size / num_attention_heads; }
  // int(head_dim * rotary_pct), truncated as Python's int() does.
  int rotary_ndims() const {
    return static_cast<int>(static_cast<double>(head_dim()) * rotary_pct);
  }
};

namespace hf_config_detail {

inline std::string field_at(const std::string& where, std::string_view field) {
  return where + ": field '" + std::string(field) + "'";
}

inline const nlohmann::json* find(const nlohmann::json& object, std::string_view key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

inline int positive_int(const nlohmann::json& config, std::string_view field,
                        const std::string& where) {
  const nlohmann::json* value = find(config, field);
  if (value == nullptr)
    throw Error(field_at(where, field) + " is missing (a positive integer is required)");
  if (!value->is_number_integer() || value->get<std::int64_t>() <= 0 ||
      value->get<std::int64_t>() > std::numeric_limits<int>::max()) {
    throw Error(field_at(where, field) + ": expected a positive integer, got " + value->dump());
  }
  return static_cast<int>(value->get<std::int64_t>());
}

inline void optional_int(const nlohmann::json& config, std::string_view field,
                         const std::string& where, int& out) {
  const nlohmann::json* value = find(config, field);
  if (value == nullptr) return;
  if (!value->is_number_integer() || value->get<std::int64_t>() <= 0 ||
      value->get<std::int64_t>() > std::numeric_limits<int>::max()) {
    throw Error(field_at(where, field) + ": expected a positive integer, got " + value->dump());
  }
  out = static_cast<int>(value->get<std::int64_t>());
}

inline void optional_bool(const nlohmann::json& config, std::string_view field,
                          const std::string& where, bool& out) {
  const nlohmann::json* value = find(config, field);
  if (value == nullptr) return;
  if (!value->is_boolean())
    throw Error(field_at(where, field) + ": expected true or false, got " + value->dump());
  out = value->get<bool>();
}

inline double number(const nlohmann::json& value, const std::string& at) {
  if (!value.is_number()) throw Error(at + ": expected a number, got " + value.dump());
  return value.get<double>();
}

// One value that a config may spell in several places, e.g. rotary_pct / partial_rotary_factor /
// rope_parameters.partial_rotary_factor. Returns the value if any spelling is present; throws if
// two present spellings disagree.
inline std::optional<double> agreed_number(
    const std::vector<std::pair<std::string, const nlohmann::json*>>& spellings,
    const std::string& where) {
  std::optional<double> value;
  std::string first;
  for (const auto& [name, json] : spellings) {
    if (json == nullptr || json->is_null()) continue;
    const double v = number(*json, field_at(where, name));
    if (!value) {
      value = v;
      first = name;
    } else if (v != *value) {
      throw Error(field_at(where, name) + " = " + json->dump() + " disagrees with field '" + first +
                  "' = " + nlohmann::json(*value).dump() + " (both set the same parameter)");
    }
  }
  return value;
}

// rope_parameters / rope_scaling: null, or an object whose rope_type (or type) is "default".
inline const nlohmann::json* rope_object(const nlohmann::json& config, std::string_view field,
                                         const std::string& where) {
  const nlohmann::json* value = find(config, field);
  if (value == nullptr || value->is_null()) return nullptr;
  if (!value->is_object())
    throw Error(field_at(where, field) + ": expected an object or null, got " + value->dump());
  for (const char* type_key : {"rope_type", "type"}) {
    const nlohmann::json* type = find(*value, type_key);
    if (type == nullptr) continue;
    if (!type->is_string() || type->get<std::string>() != "default") {
      throw Error(field_at(where, std::string(field) + "." + type_key) + " = " + type->dump() +
                  ": only the default (unscaled) rotary embedding is supported");
    }
  }
  return value;
}

}  // namespace hf_config_detail

// Reads a parsed config.json; `where` (the file path) prefixes every error.
inline NeoxConfig parse_neox_config(const nlohmann::json& config, const std::string& where) {
  namespace d = hf_config_detail;
  if (!config.is_object())
    throw Error(where + ": expected a JSON object, got " + std::string(config.type_name()));

  const nlohmann::json* model_type = d::find(config, "model_type");
  if (model_type == nullptr)
    throw Error(d::field_at(where, "model_type") + " is missing (expected \"gpt_neox\")");
  if (!model_type->is_string() || model_type->get<std::string>() != "gpt_neox") {
    throw Error(d::field_at(where, "model_type") + " = " + model_type->dump() +
                ": only GPT-NeoX (\"gpt_neox\") checkpoints are supported");
  }

  NeoxConfig c;
  c.vocab_size = d::positive_int(config, "vocab_size", where);
  c.hidden_size = d::positive_int(config, "hidden_size", where);
  c.num_hidden_layers = d::positive_int(config, "num_hidden_layers", where);
  c.num_attention_heads = d::positive_int(config, "num_attention_heads", where);
  c.intermediate_size = d::positive_int(config, "intermediate_size", where);
  if (c.hidden_size % c.num_attention_heads != 0) {
    throw Error(d::field_at(where, "num_attention_heads") + " = " +
                std::to_string(c.num_attention_heads) +
                " does not divide hidden_size = " + std::to_string(c.hidden_size));
  }
  if (const nlohmann::json* head_dim = d::find(config, "head_dim");
      head_dim != nullptr && !head_dim->is_null()) {
    if (!head_dim->is_number_integer() || head_dim->get<std::int64_t>() != c.head_dim()) {
      throw Error(d::field_at(where, "head_dim") + " = " + head_dim->dump() +
                  ": GPT-NeoX needs hidden_size / " +
                  "num_attention_heads = " + std::to_string(c.head_dim()));
    }
  }

  const nlohmann::json* rope_parameters = d::rope_object(config, "rope_parameters", where);
  const nlohmann::json* rope_scaling = d::rope_object(config, "rope_scaling", where);
  const auto nested = [&](const nlohmann::json* object, std::string_view key) {
    return object == nullptr ? nullptr : d::find(*object, key);
  };
  if (const auto pct = d::agreed_number(
          {{"rotary_pct", d::find(config, "rotary_pct")},
           {"partial_rotary_factor", d::find(config, "partial_rotary_factor")},
           {"rope_parameters.partial_rotary_factor",
            nested(rope_parameters, "partial_rotary_factor")},
           {"rope_scaling.partial_rotary_factor", nested(rope_scaling, "partial_rotary_factor")}},
          where)) {
    c.rotary_pct = *pct;
  }
  if (!(c.rotary_pct >= 0.0 && c.rotary_pct <= 1.0)) {
    throw Error(d::field_at(where, "rotary_pct") + " = " + nlohmann::json(c.rotary_pct).dump() +
                ": expected a fraction in [0, 1]");
  }
  if (c.rotary_ndims() % 2 != 0) {
    throw Error(d::field_at(where, "rotary_pct") + " = " + nlohmann::json(c.rotary_pct).dump() +
                " gives an odd number of rotary dimensions, int(" + std::to_string(c.head_dim()) +
                " * rotary_pct) = " + std::to_string(c.rotary_ndims()) + " (it must be even)");
  }
  if (const auto base =
          d::agreed_number({{"rotary_emb_base", d::find(config, "rotary_emb_base")},
                            {"rope_theta", d::find(config, "rope_theta")},
                            {"rope_parameters.rope_theta", nested(rope_parameters, "rope_theta")},
                            {"rope_scaling.rope_theta", nested(rope_scaling, "rope_theta")}},
                           where)) {
    c.rotary_emb_base = *base;
  }
  if (!(c.rotary_emb_base > 0.0) || !std::isfinite(c.rotary_emb_base)) {
    throw Error(d::field_at(where, "rotary_emb_base") + " = " +
                nlohmann::json(c.rotary_emb_base).dump() + ": expected a positive number");
  }

  d::optional_int(config, "max_position_embeddings", where, c.max_position_embeddings);
  if (const nlohmann::json* eps = d::find(config, "layer_norm_eps"); eps != nullptr) {
    c.layer_norm_eps = d::number(*eps, d::field_at(where, "layer_norm_eps"));
    if (!(c.layer_norm_eps > 0.0) || !std::isfinite(c.layer_norm_eps)) {
      throw Error(d::field_at(where, "layer_norm_eps") + " = " + eps->dump() +
                  ": expected a positive number");
    }
  }
  d::optional_bool(config, "use_parallel_residual", where, c.use_parallel_residual);
  d::optional_bool(config, "tie_word_embeddings", where, c.tie_word_embeddings);
  d::optional_bool(config, "attention_bias", where, c.attention_bias);

  if (const nlohmann::json* act = d::find(config, "hidden_act"); act != nullptr) {
    if (!act->is_string())
      throw Error(d::field_at(where, "hidden_act") + ": expected a string, got " + act->dump());
    c.hidden_act = act->get<std::string>();
  }
  if (c.hidden_act == "gelu") {
    c.activation = NeoxActivation::gelu_erf;
  } else if (c.hidden_act == "gelu_new" || c.hidden_act == "gelu_pytorch_tanh" ||
             c.hidden_act == "gelu_fast") {
    c.activation = NeoxActivation::gelu_tanh;
  } else {
    throw Error(d::field_at(where, "hidden_act") + " = \"" + c.hidden_act +
                "\" is not supported (supported: \"gelu\" (erf), \"gelu_new\", "
                "\"gelu_pytorch_tanh\", \"gelu_fast\" "
                "(tanh approximation))");
  }
  return c;
}

inline NeoxConfig parse_neox_config_text(std::string_view text, const std::string& where) {
  return parse_neox_config(safetensors_detail::parse_json_strict(text, where, "config"), where);
}

inline NeoxConfig read_neox_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path.string() + ": cannot open (a GPT-NeoX checkpoint folder needs a config.json)");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_neox_config_text(text, path.string());
}

}  // namespace emergent
