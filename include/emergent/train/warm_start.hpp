// A new run that starts from another run's parameters: the stages of pre-pretraining (a model
// trained on Dyck or on neural cellular automata, then on the real task) and the transplants of
// the self-pretraining study (train/self_pretraining.hpp). One mechanism for both:
//
//   the model is initialised from its own seed as usual; then every tensor whose name and shape
//   the source checkpoint also holds is overwritten by the source's, as `take` says:
//     all          the whole tensor
//     qk           only the query and key rows of a fused projection (a tensor named
//                  "...qkv.weight" [3D, D] or "...qkv.bias" [3D]: its first 2D rows), nothing else
//     all_but_qk   everything but those rows
//
// A tensor the source lacks, or holds with other rows (the token embedding and the output head
// when the vocabulary changes, the positions when max_len does), keeps its fresh initialisation;
// one it holds with another width is refused (a checkpoint of another d_model takes nothing).
// The optimizer state is never taken: a stage starts with fresh AdamW moments, as a fine-tuning
// run does. What was taken and what stayed fresh is returned, so that the run records it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <emergent/core/error.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/model/parameter_tensors.hpp>
#include <span>
#include <string>
#include <vector>

namespace emergent {

inline const std::vector<std::string>& warm_start_takes() {
  static const std::vector<std::string> takes = {"all", "qk", "all_but_qk"};
  return takes;
}

struct WarmStartReport {
  std::vector<std::string> taken;       // tensors taken, whole or in part
  std::vector<std::string> fresh;       // tensors left at their fresh initialisation
  std::vector<std::string> mismatched;  // of those, the ones the source lacks or shapes otherwise
};

namespace warm_start_detail {
// Elements [0, n) of a tensor that are its query and key rows (0 if it has none).
inline std::size_t query_key_elements(const ParameterTensor& t) {
  const bool fused = t.name.ends_with("qkv.weight") || t.name.ends_with("qkv.bias");
  return fused && t.shape.front() % 3 == 0 ? t.size / 3 * 2 : 0;
}

// A tensor the source holds with another shape may differ only in its rows (a vocabulary,
// positions, classes): any other difference means a model of another width (d_model, d_ff,
// heads), whose tensors would be taken by coincidence of shape, so it is refused.
inline void require_rows_differ(const SafetensorsFile& source, const ParameterTensor& t) {
  const std::vector<std::int64_t>& held = source.info(t.name).shape;
  const bool rows_only = held.size() == t.shape.size() && !held.empty() &&
                         std::equal(held.begin() + 1, held.end(), t.shape.begin() + 1);
  require(rows_only, source.path().string(),
          "tensor '" + t.name + "' is " + safetensors_detail::shape_string(held) + " there and " +
              safetensors_detail::shape_string(t.shape) +
              " in this model: a checkpoint of another width (d_model, d_ff or heads) cannot "
              "start this run; only a vocabulary's or the positions' rows may differ");
}
}  // namespace warm_start_detail

// Overwrites `params` (already initialised) with the tensors of `source` that `take` selects.
// `field` names the setting in errors ("init_take"); an Error if `take` selects nothing that the
// model has (qk for a model without a fused query-key-value projection) or a taken value is not
// finite.
template <class Real>
WarmStartReport take_parameters(const SafetensorsFile& source,
                                const std::vector<ParameterTensor>& tensors, std::span<Real> params,
                                const std::string& take, const std::string& field) {
  require(std::find(warm_start_takes().begin(), warm_start_takes().end(), take) !=
              warm_start_takes().end(),
          field, "'" + take + "' is not allowed: expected all, qk or all_but_qk");
  const bool wants_qk = take != "all_but_qk", wants_rest = take != "qk";
  WarmStartReport report;
  bool model_has_qk = false;
  for (const ParameterTensor& t : tensors) {
    const std::size_t qk = warm_start_detail::query_key_elements(t);
    model_has_qk |= qk > 0;
    const bool same = source.contains(t.name) && source.info(t.name).shape == t.shape;
    if (source.contains(t.name) && !same) warm_start_detail::require_rows_differ(source, t);
    const std::size_t begin = wants_qk ? 0 : qk, end = wants_rest ? t.size : qk;
    if (!same) report.mismatched.push_back(t.name);
    if (!same || begin >= end) {
      report.fresh.push_back(t.name);
      continue;
    }
    const std::vector<float> values = source.read_f32(t.name);
    for (std::size_t i = begin; i < end; ++i) {
      require(std::isfinite(values[i]), source.path().string(),
              "tensor '" + t.name + "' holds a non-finite value at index " + std::to_string(i));
      params[t.offset + i] = Real(values[i]);
    }
    report.taken.push_back(t.name);
  }
  require(model_has_qk || take == "all", field,
          "'" + take +
              "' is not allowed for this model: it has no fused query-key-value projection "
              "(qkv) to split; use all");
  require(!report.taken.empty(), source.path().string(),
          "shares no tensor of the same name and shape with this model: nothing to take (a "
          "checkpoint of another width, depth or mixer?)");
  return report;
}

}  // namespace emergent
