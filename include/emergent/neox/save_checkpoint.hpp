// Writes a GPT-NeoX checkpoint folder as Hugging Face's save_pretrained lays it out, so that
// emergent's loader (load_checkpoint.hpp), `emergent pythia` and transformers'
// GPTNeoXForCausalLM.from_pretrained all read it:
//
//   folder/config.json          the fields of Pythia's published configs (rotary_pct and
//                               rotary_emb_base spelled as there), architectures and model_type
//   folder/model.safetensors    every tensor of checkpoint_tensors(config), F32, in that order
//
// Both files are written atomically (temporary file, fsync, rename); config.json last, so a
// folder with a config.json is complete.
#pragma once

#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/io/hf_config.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/io/text_file.hpp>
#include <emergent/neox/checkpoint_tensors.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace emergent::neox {

// config.json's object for `c`, as Pythia's configs on the hub spell it.
inline nlohmann::json hf_config_json(const NeoxConfig& c) {
  return {{"architectures", {"GPTNeoXForCausalLM"}},
          {"model_type", "gpt_neox"},
          {"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"intermediate_size", c.intermediate_size},
          {"hidden_act", c.hidden_act},
          {"rotary_pct", c.rotary_pct},
          {"rotary_emb_base", c.rotary_emb_base},
          {"max_position_embeddings", c.max_position_embeddings},
          {"layer_norm_eps", c.layer_norm_eps},
          {"use_parallel_residual", c.use_parallel_residual},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"attention_bias", c.attention_bias},
          {"initializer_range", 0.02},
          {"attention_dropout", 0.0},
          {"hidden_dropout", 0.0},
          {"bos_token_id", 0},
          {"eos_token_id", 0},
          {"use_cache", true},
          {"torch_dtype", "float32"}};
}

// `values(name)` gives each tensor's fp32 values, row-major in its checkpoint shape.
inline void save_checkpoint(const std::filesystem::path& folder, const NeoxConfig& config,
                            const std::function<std::span<const float>(std::string_view)>& values,
                            const std::map<std::string, std::string>& metadata = {}) {
  std::filesystem::create_directories(folder);
  std::vector<TensorToWrite> tensors;
  for (CheckpointTensor& t : checkpoint_tensors(config)) {
    std::span<const float> data = values(t.name);
    std::size_t count = 1;
    for (const std::int64_t d : t.shape) count *= static_cast<std::size_t>(d);
    require(data.size() == count, folder.string(),
            "tensor " + t.name + " has " + std::to_string(data.size()) + " values, expected " +
                std::to_string(count));
    tensors.push_back({t.name, t.shape, data});
  }
  std::map<std::string, std::string> meta = metadata;
  meta.emplace("format", "pt");  // what save_pretrained writes
  write_safetensors(folder / "model.safetensors", tensors, meta);
  write_text_atomically(folder / "config.json", hf_config_json(config).dump(2) + "\n");
}

}  // namespace emergent::neox
