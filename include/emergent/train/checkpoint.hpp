// Training checkpoints as safetensors files: `<run>/step_000100.safetensors` holds
//   <parameter name>             the model's parameters (docs/model.md names), F32
//   optimizer.m.<parameter name> AdamW first moment
//   optimizer.v.<parameter name> AdamW second moment
// and metadata {"step": updates done, "optimizer_steps", "config": config.json text,
// "shape", "mixer"}. Files are written atomically (write to .tmp, fsync, rename), so a kill
// never leaves a half-written checkpoint and never destroys the previous one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <emergent/core/error.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/model/model.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace emergent {

inline std::filesystem::path checkpoint_path(const std::filesystem::path& run_dir,
                                             std::int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step_%06lld.safetensors", static_cast<long long>(step));
  return run_dir / name;
}

// The step of a file named step_NNNNNN.safetensors (any number of digits), if it is one.
inline std::optional<long long> checkpoint_step(const std::string& file_name) {
  constexpr std::string_view prefix = "step_", suffix = ".safetensors";
  if (file_name.size() <= prefix.size() + suffix.size() || !file_name.starts_with(prefix) ||
      !file_name.ends_with(suffix))
    return std::nullopt;
  const std::string digits =
      file_name.substr(prefix.size(), file_name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

// The checkpoint of the highest step in run_dir, if any.
inline std::optional<std::filesystem::path> latest_checkpoint(
    const std::filesystem::path& run_dir) {
  if (!std::filesystem::is_directory(run_dir)) return std::nullopt;
  std::optional<std::filesystem::path> best;
  long long best_step = -1;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir)) {
    const std::optional<long long> step = checkpoint_step(entry.path().filename().string());
    if (step && *step > best_step) {
      best_step = *step;
      best = entry.path();
    }
  }
  return best;
}

struct CheckpointState {
  std::int64_t step = 0;  // updates applied
  std::int64_t optimizer_steps = 0;
  std::string config_json;
};

inline void save_checkpoint(const std::filesystem::path& path,
                            const std::vector<ParameterTensor>& list, std::span<const float> params,
                            std::span<const float> first_moment,
                            std::span<const float> second_moment, const CheckpointState& state,
                            const std::map<std::string, std::string>& more_metadata = {}) {
  std::vector<TensorToWrite> tensors;
  for (const auto& t : list) tensors.push_back({t.name, t.shape, params.subspan(t.offset, t.size)});
  for (const auto& t : list)
    tensors.push_back({"optimizer.m." + t.name, t.shape, first_moment.subspan(t.offset, t.size)});
  for (const auto& t : list)
    tensors.push_back({"optimizer.v." + t.name, t.shape, second_moment.subspan(t.offset, t.size)});
  std::map<std::string, std::string> metadata = more_metadata;
  metadata["step"] = std::to_string(state.step);
  metadata["optimizer_steps"] = std::to_string(state.optimizer_steps);
  metadata["config"] = state.config_json;
  metadata["format"] = "emergent training checkpoint v1";
  write_safetensors(path, tensors, metadata);
}

template <class Net>
void save_checkpoint(const std::filesystem::path& path, std::span<const float> params,
                     std::span<const float> first_moment, std::span<const float> second_moment,
                     const CheckpointState& state) {
  save_checkpoint(path, Net::tensors(), params, first_moment, second_moment, state);
}

// Loads the parameters of a checkpoint (or of any safetensors file with the model's names).
// Every tensor must be present with the model's shape; the error names the file and tensor.
inline void load_parameters(const SafetensorsFile& file, const std::vector<ParameterTensor>& list,
                            std::span<float> params, const std::string& prefix = "") {
  std::size_t count = 0;
  for (const auto& t : list) count = std::max(count, t.offset + t.size);
  require(params.size() >= count, file.path().string(), "parameter buffer is too small");
  std::fill(params.begin(), params.end(), 0.0f);
  for (const auto& t : list) {
    const std::string name = prefix + t.name;
    require(file.contains(name), file.path().string(),
            "tensor '" + name + "' is missing (is this a checkpoint of another shape or mixer?)");
    const std::span<float> values = params.subspan(t.offset, t.size);
    file.read_f32_into(name, values, t.shape);
    // Training never writes a non-finite parameter (it stops first), so one means damage.
    require_finite_values(values, file.path().string(), name,
                          "the file is damaged or was not written by a finished training step");
  }
}

template <class Net>
void load_parameters(const SafetensorsFile& file, std::span<float> params,
                     const std::string& prefix = "") {
  require(params.size() == Net::parameter_count, file.path().string(),
          "parameter buffer has the wrong size");
  load_parameters(file, Net::tensors(), params, prefix);
}

inline CheckpointState load_checkpoint(const std::filesystem::path& path,
                                       const std::vector<ParameterTensor>& list,
                                       std::span<float> params, std::span<float> first_moment,
                                       std::span<float> second_moment) {
  const SafetensorsFile file(path);
  load_parameters(file, list, params);
  load_parameters(file, list, first_moment, "optimizer.m.");
  load_parameters(file, list, second_moment, "optimizer.v.");
  const auto metadata = file.metadata();
  CheckpointState state;
  auto field = [&](const std::string& key) {
    const auto it = metadata.find(key);
    require(it != metadata.end(), path.string(), "metadata field '" + key + "' is missing");
    return it->second;
  };
  try {
    state.step = std::stoll(field("step"));
    state.optimizer_steps = std::stoll(field("optimizer_steps"));
  } catch (const std::logic_error&) {
    throw Error(path.string() + ": metadata field 'step' or 'optimizer_steps' is not an integer");
  }
  state.config_json = field("config");
  return state;
}

template <class Net>
CheckpointState load_checkpoint(const std::filesystem::path& path, std::span<float> params,
                                std::span<float> first_moment, std::span<float> second_moment) {
  return load_checkpoint(path, Net::tensors(), params, first_moment, second_moment);
}

}  // namespace emergent
