// The tensors of a GPT-NeoX checkpoint as transformers' GPTNeoXForCausalLM saves them, and the
// non-parameter buffers that older checkpoints (Pythia, 2023 uploads) also carry.
//
// Names and shapes (d = hidden_size, f = intermediate_size, V = vocab_size), PyTorch Linear
// convention: weight [out, in].
//   gpt_neox.embed_in.weight                                   [V, d]
//   gpt_neox.layers.N.input_layernorm.{weight,bias}            [d]
//   gpt_neox.layers.N.post_attention_layernorm.{weight,bias}   [d]
//   gpt_neox.layers.N.attention.query_key_value.weight         [3d, d]  rows per head [q|k|v]
//   gpt_neox.layers.N.attention.query_key_value.bias           [3d]     (if attention_bias)
//   gpt_neox.layers.N.attention.dense.weight                   [d, d]
//   gpt_neox.layers.N.attention.dense.bias                     [d]      (if attention_bias)
//   gpt_neox.layers.N.mlp.dense_h_to_4h.{weight [f, d], bias [f]}
//   gpt_neox.layers.N.mlp.dense_4h_to_h.{weight [d, f], bias [d]}
//   gpt_neox.final_layer_norm.{weight,bias}                    [d]
//   embed_out.weight                                           [V, d]   (absent if tied)
// Buffers to skip: gpt_neox.layers.N.attention.bias (bool causal mask),
// gpt_neox.layers.N.attention.masked_bias (scalar), gpt_neox.layers.N.attention.rotary_emb.inv_freq
// (recomputed in fp32 instead: the stored copy is often fp16).
#pragma once

#include <cstdint>
#include <emergent/io/hf_config.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace emergent::neox {

struct CheckpointTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

inline std::string layer_prefix(int layer) {
  return "gpt_neox.layers." + std::to_string(layer) + ".";
}

// Every parameter tensor the config implies, in the order HF's state_dict lists them.
inline std::vector<CheckpointTensor> checkpoint_tensors(const NeoxConfig& c) {
  const std::int64_t d = c.hidden_size, f = c.intermediate_size, v = c.vocab_size;
  std::vector<CheckpointTensor> out;
  out.push_back({"gpt_neox.embed_in.weight", {v, d}});
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = layer_prefix(layer);
    out.push_back({p + "input_layernorm.weight", {d}});
    out.push_back({p + "input_layernorm.bias", {d}});
    out.push_back({p + "post_attention_layernorm.weight", {d}});
    out.push_back({p + "post_attention_layernorm.bias", {d}});
    out.push_back({p + "attention.query_key_value.weight", {3 * d, d}});
    if (c.attention_bias) out.push_back({p + "attention.query_key_value.bias", {3 * d}});
    out.push_back({p + "attention.dense.weight", {d, d}});
    if (c.attention_bias) out.push_back({p + "attention.dense.bias", {d}});
    out.push_back({p + "mlp.dense_h_to_4h.weight", {f, d}});
    out.push_back({p + "mlp.dense_h_to_4h.bias", {f}});
    out.push_back({p + "mlp.dense_4h_to_h.weight", {d, f}});
    out.push_back({p + "mlp.dense_4h_to_h.bias", {d}});
  }
  out.push_back({"gpt_neox.final_layer_norm.weight", {d}});
  out.push_back({"gpt_neox.final_layer_norm.bias", {d}});
  if (!c.tie_word_embeddings) out.push_back({"embed_out.weight", {v, d}});
  return out;
}

// True for gpt_neox.layers.<N>.attention.{bias, masked_bias, rotary_emb.inv_freq}: buffers that
// transformers < 4.3x saved with the parameters and that a loader must skip.
inline bool is_ignored_buffer(std::string_view name) {
  constexpr std::string_view prefix = "gpt_neox.layers.";
  if (!name.starts_with(prefix)) return false;
  name.remove_prefix(prefix.size());
  std::size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0) return false;
  name.remove_prefix(digits);
  return name == ".attention.bias" || name == ".attention.masked_bias" ||
         name == ".attention.rotary_emb.inv_freq";
}

}  // namespace emergent::neox
