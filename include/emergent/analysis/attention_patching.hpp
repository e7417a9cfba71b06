// Attention-pattern patching between two checkpoints (arXiv 2606.25010 §2, Fig. 1 right): which
// heads carry a capability that appeared between a pre-emergence and a post-emergence checkpoint?
//
// On one prompt, with target token y after its last position:
//   p_pre, p_post      p(y) under each model unpatched
//   per head (l, h):   run the pre model with head (l, h)'s attention probabilities [T, T]
//                      replaced by the post model's on the same tokens (its values, MLPs and
//                      everything else stay the pre model's); delta_p = p_patched - p_pre
//   top K:             the K heads of largest delta_p patched together; the share of the gap
//                      they recover is (p_topK - p_pre) / (p_post - p_pre)
// The paper ranks heads by delta_p and reports that the top two recover most of the gain; its
// K and whether delta_p is averaged over prompts are not published (docs/paper-notes.md
// §5). This is the single-prompt form (prompt_set_patching.hpp averages over a prompt set); the
// two models must share the architecture.
#pragma once

#include <algorithm>
#include <cstdint>
#include <emergent/analysis/next_token.hpp>
#include <emergent/core/error.hpp>
#include <emergent/neox/network.hpp>
#include <span>
#include <vector>

namespace emergent {

struct HeadPatch {
  int layer = 0, head = 0;
  double p_patched = 0, delta_p = 0;
};

struct PatchingResult {
  double p_pre = 0, p_post = 0;
  std::vector<HeadPatch> heads;  // every head, by delta_p, largest first
  int top_k = 0;
  double p_top_k = 0;          // p(y) with the top K heads patched together
  double recovered_share = 0;  // (p_top_k - p_pre) / (p_post - p_pre); 0 when there is no gap
};

// The post model's attention patterns on one prompt, every layer [H * T * T], and its p(target).
struct RecordedPatterns {
  double p_target = 0;
  std::size_t tokens = 0;
  std::vector<std::vector<float>> layers;

  // Head (layer, head)'s pattern as an override for another model's forward on the same tokens.
  neox::PatternOverride override_of(int layer, int head) const {
    const std::size_t size = tokens * tokens;
    const float* p =
        layers[static_cast<std::size_t>(layer)].data() + static_cast<std::size_t>(head) * size;
    return neox::PatternOverride{layer, head, std::vector<float>(p, p + size)};
  }
};

inline RecordedPatterns record_patterns(const neox::Network& network,
                                        std::span<const std::int32_t> tokens, std::int32_t target) {
  RecordedPatterns r;
  r.tokens = tokens.size();
  r.layers.resize(static_cast<std::size_t>(network.layers()));
  neox::ForwardHooks record;
  record.on_pattern = [&](int layer, std::span<const float> p) {
    r.layers[static_cast<std::size_t>(layer)].assign(p.begin(), p.end());
  };
  r.p_target = predict_next(network, tokens, target, record).p_target;
  return r;
}

inline PatchingResult patch_attention_heads(const neox::Network& pre, const neox::Network& post,
                                            std::span<const std::int32_t> tokens,
                                            std::int32_t target, int top_k) {
  require(pre.shape() == post.shape(), "patch_attention_heads",
          "the two checkpoints have different architectures");
  const int L = pre.layers(), H = pre.heads();
  require(top_k >= 1 && top_k <= L * H, "patch_attention_heads",
          "top K must be in [1, layers * heads = " + std::to_string(L * H) + "]");
  // One forward of the post model gives p_post and every head's pattern.
  const RecordedPatterns post_patterns = record_patterns(post, tokens, target);
  PatchingResult r;
  r.p_post = post_patterns.p_target;

  r.p_pre = predict_next(pre, tokens, target).p_target;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      neox::ForwardHooks hooks;
      hooks.overrides.push_back(post_patterns.override_of(l, h));
      const double p = predict_next(pre, tokens, target, hooks).p_target;
      r.heads.push_back({l, h, p, p - r.p_pre});
    }
  std::stable_sort(r.heads.begin(), r.heads.end(),
                   [](const HeadPatch& a, const HeadPatch& b) { return a.delta_p > b.delta_p; });

  r.top_k = top_k;
  neox::ForwardHooks together;
  for (int k = 0; k < top_k; ++k)
    together.overrides.push_back(post_patterns.override_of(r.heads[k].layer, r.heads[k].head));
  r.p_top_k = predict_next(pre, tokens, target, together).p_target;
  const double gap = r.p_post - r.p_pre;
  r.recovered_share = gap != 0 ? (r.p_top_k - r.p_pre) / gap : 0.0;
  return r;
}

}  // namespace emergent
