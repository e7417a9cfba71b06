// Attention snapshots: the batch-averaged attention of one training step, saved when a run asks
// for it (`save_attention_at`, train/config.hpp) so that the maps before and after a loss jump
// can be drawn beside the true pattern (the paper's Fig. 4; scripts/plot.py attention).
//
// <run>/attention/step_NNNNNN.safetensors:
//   "attention"  F16 [layers, heads, T, T]: row q is query position q's distribution over keys,
//                averaged over the step's training batch (measured before its update, as the
//                metrics rows are)
//   "target"     F16 [T, T]: the task's true pattern (1 on the keys each query should attend)
//   metadata     step, loss (the step's batch loss)
// F16 keeps them small: the linear map at S = 16 with 8 heads is 16 KB, the 4-layer automaton at
// S = 16 (T = 256) 4 MB.
#pragma once

#include <cstdint>
#include <cstdio>
#include <emergent/core/error.hpp>
#include <emergent/io/safetensors.hpp>
#include <filesystem>
#include <span>
#include <string>

namespace emergent {

inline std::filesystem::path attention_snapshot_path(const std::filesystem::path& run_dir,
                                                     std::int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "step_%06lld.safetensors", static_cast<long long>(step));
  return run_dir / "attention" / name;
}

inline void write_attention_snapshot(const std::filesystem::path& run_dir, std::int64_t step,
                                     int layers, int heads, int length,
                                     std::span<const float> attention,
                                     std::span<const float> target, double loss) {
  const std::int64_t L = layers, H = heads, T = length;
  const auto path = attention_snapshot_path(run_dir, step);
  require(attention.size() == std::size_t(L * H * T * T) && target.size() == std::size_t(T * T),
          path.string(), "attention snapshot of the wrong size");
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  require(!error, path.parent_path().string(), "cannot create (" + error.message() + ")");
  write_safetensors(
      path, {{"attention", {L, H, T, T}, attention, "F16"}, {"target", {T, T}, target, "F16"}},
      {{"step", std::to_string(step)}, {"loss", std::to_string(loss)}});
}

}  // namespace emergent
