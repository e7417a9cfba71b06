// The type-erased GPT-NeoX network: what programs that choose a checkpoint at run time hold.
// A Network is a NeoxModel<Shape> (model.hpp) behind this interface; load_checkpoint.hpp
// builds one from a Hugging Face folder.
//
// forward() runs one token sequence [T] in fp32 exactly as transformers' GPTNeoXForCausalLM
// does (eager attention) and returns the logits [T, vocab_size], row-major. Hooks, all optional:
//   on_scores(layer, [H, T, T])   scaled scores q.k / sqrt(d_head) before the softmax, query x
//                                 key, row-major per head; masked (future) entries are -inf
//   on_pattern(layer, [H, T, T])  attention probabilities after the softmax, and after any
//                                 override of that layer (TransformerLens' hook_pattern)
//   overrides                     {layer, head, pattern [T, T]}: that head's probabilities are
//                                 replaced by `pattern` before they weight the values. Every
//                                 entry is used, including any above the diagonal; a pattern
//                                 must have T * T values, and a (layer, head) may appear once.
// Hooks run on the calling thread, once per layer in layer order, on_scores before on_pattern,
// when the layer has been computed. Their spans are valid only during the call.
#pragma once

#include <cstdint>
#include <emergent/io/hf_config.hpp>
#include <emergent/neox/shape.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace emergent::neox {

// pattern [T, T] query x key, row-major, replaces the softmax output of that head.
struct PatternOverride {
  int layer = 0;
  int head = 0;
  std::vector<float> pattern;
};

struct ForwardHooks {
  std::function<void(int layer, std::span<const float> scores)>
      on_scores;  // [H, T, T], masked = -inf
  std::function<void(int layer, std::span<const float> pattern)>
      on_pattern;  // [H, T, T] after overrides
  std::vector<PatternOverride> overrides;
};

class Network {
 public:
  virtual ~Network() = default;
  virtual const NeoxConfig& config() const = 0;
  virtual NeoxShape shape() const = 0;
  virtual int layers() const = 0;
  virtual int heads() const = 0;
  // logits [T, vocab_size] for every position of one token sequence (token ids in [0, vocab)).
  virtual std::vector<float> forward(std::span<const std::int32_t> tokens,
                                     const ForwardHooks& hooks = {}) const = 0;
  // The fp32 values of a checkpoint tensor by its Hugging Face name (checkpoint_tensors.hpp),
  // row-major in the checkpoint's shape; throws Error for a name the config does not have.
  virtual std::span<const float> parameter(std::string_view name) const = 0;
  virtual std::span<float> parameter(std::string_view name) = 0;
};

// folder: config.json + model.safetensors, or model.safetensors.index.json + shards.
struct LoadedCheckpoint {
  std::filesystem::path folder;
  std::string
      sha256;  // CheckpointFolder::sha256(): sha256sum of model.safetensors (see there for shards)
  std::unique_ptr<Network> network;
};

}  // namespace emergent::neox
