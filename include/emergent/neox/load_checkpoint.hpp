// Loads a GPT-NeoX (Pythia) checkpoint folder in the Hugging Face layout into a Network.
//
//   auto [folder, sha256, network] = emergent::neox::load_checkpoint("pythia-160m/step3000");
//   std::vector<float> logits = network->forward(tokens);   // [T, vocab_size]
//
// Steps: config.json -> NeoxConfig (errors name the file and field); then the weight files are
// mapped (CheckpointFolder: model.safetensors, or the index and its shards); the config's shape
// picks a compiled NeoxModel (registry.hpp); each tensor of checkpoint_tensors(config) is
// converted once from the mapping (F32, F16, BF16 or F64) into the model's fp32 buffer, after
// its shape is checked. A missing or mis-shaped tensor is an error naming the file and the
// tensor, as is a non-finite value in any of them and any tensor the model does not use, except the
// buffers old checkpoints carry (is_ignored_buffer). The SHA-256 is CheckpointFolder::sha256().
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/io/checkpoint_folder.hpp>
#include <emergent/io/hf_config.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/neox/checkpoint_tensors.hpp>
#include <emergent/neox/network.hpp>
#include <emergent/neox/registry.hpp>
#include <filesystem>
#include <set>
#include <string>

namespace emergent::neox {

// Fills every parameter of `network` from `folder`; see the header comment for the checks.
inline void load_parameters(Network& network, const CheckpointFolder& folder) {
  const NeoxConfig& config = network.config();
  std::set<std::string, std::less<>> expected;
  for (const CheckpointTensor& t : checkpoint_tensors(config)) {
    if (!folder.contains(t.name)) {
      std::string why;
      if (t.name == "embed_out.weight")
        why = " (tie_word_embeddings is false, so the unembedding must be stored)";
      if (t.name.ends_with("attention.query_key_value.bias") ||
          t.name.ends_with("attention.dense.bias")) {
        why = " (attention_bias is true in config.json)";
      }
      throw Error(folder.weights_path().string() + ": missing tensor " +
                  safetensors_detail::quoted(t.name) + why);
    }
    folder.read_f32_into(t.name, network.parameter(t.name), t.shape);
    require_finite_values(network.parameter(t.name), folder.file_of(t.name).path().string(), t.name,
                          "a model with a NaN or an infinity in its weights has no meaningful "
                          "outputs (a damaged file, or a run that diverged)");
    expected.insert(t.name);
  }
  for (const std::string& name : folder.tensor_names()) {
    if (expected.contains(name) || is_ignored_buffer(name)) continue;
    std::string why;
    if (name == "embed_out.weight") why = " (tie_word_embeddings is true in config.json)";
    if (name.ends_with("attention.query_key_value.bias") ||
        name.ends_with("attention.dense.bias")) {
      why = " (attention_bias is false in config.json)";
    }
    throw Error(folder.file_of(name).path().string() + ": tensor " +
                safetensors_detail::quoted(name) +
                " is not a parameter of GPT-NeoX with this config.json" + why);
  }
}

// folder: config.json + model.safetensors, or model.safetensors.index.json + shards.
inline LoadedCheckpoint load_checkpoint(const std::filesystem::path& folder) {
  const std::filesystem::path config_path = folder / CheckpointFolder::kConfigName;
  const NeoxConfig config = read_neox_config(config_path);
  const CheckpointFolder files(folder);
  std::unique_ptr<Network> network = make_network(config, config_path.string());
  load_parameters(*network, files);
  return {folder, files.sha256(), std::move(network)};
}

}  // namespace emergent::neox
