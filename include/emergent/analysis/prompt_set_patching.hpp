// Attention-pattern patching averaged over a prompt set (attention_patching.hpp is the one-prompt
// form). Between a pre-emergence (early) and a post-emergence (late, solving) checkpoint of the
// same architecture, on prompts i = 1 .. N with targets y_i:
//
//   p_pre_i, p_post_i    p(y_i) under each model unpatched; mean_p_pre, mean_p_post their means
//   per head (l, h):     p_i(l, h) = p(y_i) under the pre model with head (l, h)'s attention
//                        probabilities replaced by the post model's on prompt i;
//                        delta_mean_p(l, h) = mean_i p_i(l, h) - mean_p_pre; heads ranked by it
//   top K:               the K best heads patched together on every prompt, K = 1, 2, 4, 8, 16
//                        capped at layers * heads (a K above it becomes layers * heads, listed
//                        once); recovery(K) = (mean_p_patched(K) - mean_p_pre) /
//                        (mean_p_post - mean_p_pre), a ratio of means over the set, absent when
//                        the gap mean_p_post - mean_p_pre is 0
//
// Heads are named "L<layer>H<head>" (0-based). Forwards: per prompt 1 + 1 + layers * heads + 1 +
// (number of K); the post patterns are recomputed for the top-K pass rather than kept for every
// prompt.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <emergent/analysis/attention_patching.hpp>
#include <emergent/analysis/capability_prompts.hpp>
#include <emergent/analysis/next_token.hpp>
#include <emergent/core/error.hpp>
#include <emergent/neox/network.hpp>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace emergent {

inline constexpr std::array<int, 5> kPatchingTopKs = {1, 2, 4, 8, 16};

inline std::string head_name(int layer, int head) {
  std::string name(1, 'L');  // appended piece by piece: GCC 12 warns (-Wrestrict) on "L" + ...
  name += std::to_string(layer);
  name += 'H';
  name += std::to_string(head);
  return name;
}

// The K of `ks` (each >= 1, increasing) capped at `heads`, each listed once.
inline std::vector<int> capped_top_ks(std::span<const int> ks, int heads) {
  require(heads >= 1, "top K", "the model has no attention heads");
  std::vector<int> out;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    require(ks[i] >= 1 && (i == 0 || ks[i] > ks[i - 1]), "top K",
            "the K must be positive and increasing");
    const int k = std::min(ks[i], heads);
    if (out.empty() || out.back() != k) out.push_back(k);
  }
  return out;
}

struct SetHeadPatch {
  int layer = 0, head = 0;
  std::vector<double> p_patched;  // per prompt
  double mean_p_patched = 0;
  double delta_mean_p = 0;  // mean_p_patched - mean_p_pre
  std::string name() const { return head_name(layer, head); }
};

struct TopKRecovery {
  int k = 0;
  std::vector<std::string> heads;  // the K best, best first
  std::vector<double> p_patched;   // per prompt, the K heads patched together
  double mean_p_patched = 0;
  std::optional<double> recovery;  // (mean_p_patched - mean_p_pre) / (mean_p_post - mean_p_pre)
};

struct SetPatchingResult {
  std::vector<double> p_pre, p_post;  // per prompt
  double mean_p_pre = 0, mean_p_post = 0;
  std::vector<SetHeadPatch> heads;  // every head, by delta_mean_p, largest first
  std::vector<TopKRecovery> top_k;  // by K
};

inline double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

inline std::optional<double> recovered_share(double p_patched, double p_pre, double p_post) {
  if (p_post == p_pre) return std::nullopt;
  return (p_patched - p_pre) / (p_post - p_pre);
}

namespace set_patching_detail {

// p_pre, p_post and every head's patched p on every prompt, heads in (layer, head) order.
inline SetPatchingResult patch_each_head(const neox::Network& pre, const neox::Network& post,
                                         std::span<const CapabilityTokens> set) {
  const int L = pre.layers(), H = pre.heads();
  SetPatchingResult r;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) r.heads.push_back({l, h, {}, 0, 0});
  for (const CapabilityTokens& t : set) {
    const RecordedPatterns post_patterns = record_patterns(post, t.prompt, t.target);
    r.p_post.push_back(post_patterns.p_target);
    r.p_pre.push_back(predict_next(pre, t.prompt, t.target).p_target);
    for (SetHeadPatch& head : r.heads) {
      neox::ForwardHooks hooks;
      hooks.overrides.push_back(post_patterns.override_of(head.layer, head.head));
      head.p_patched.push_back(predict_next(pre, t.prompt, t.target, hooks).p_target);
    }
  }
  r.mean_p_pre = mean_of(r.p_pre);
  r.mean_p_post = mean_of(r.p_post);
  for (SetHeadPatch& head : r.heads) {
    head.mean_p_patched = mean_of(head.p_patched);
    head.delta_mean_p = head.mean_p_patched - r.mean_p_pre;
  }
  return r;
}

// The ranked heads' top K patched together on every prompt.
inline void patch_top_k(const neox::Network& pre, const neox::Network& post,
                        std::span<const CapabilityTokens> set, std::span<const int> ks,
                        SetPatchingResult& r) {
  for (int k : ks) {
    TopKRecovery t{k, {}, {}, 0, std::nullopt};
    for (int i = 0; i < k; ++i) t.heads.push_back(r.heads[static_cast<std::size_t>(i)].name());
    r.top_k.push_back(std::move(t));
  }
  for (const CapabilityTokens& t : set) {
    const RecordedPatterns post_patterns = record_patterns(post, t.prompt, t.target);
    for (TopKRecovery& top : r.top_k) {
      neox::ForwardHooks together;
      for (int i = 0; i < top.k; ++i) {
        const SetHeadPatch& head = r.heads[static_cast<std::size_t>(i)];
        together.overrides.push_back(post_patterns.override_of(head.layer, head.head));
      }
      top.p_patched.push_back(predict_next(pre, t.prompt, t.target, together).p_target);
    }
  }
  for (TopKRecovery& top : r.top_k) {
    top.mean_p_patched = mean_of(top.p_patched);
    top.recovery = recovered_share(top.mean_p_patched, r.mean_p_pre, r.mean_p_post);
  }
}

}  // namespace set_patching_detail

inline SetPatchingResult patch_heads_over_prompt_set(const neox::Network& pre,
                                                     const neox::Network& post,
                                                     std::span<const CapabilityTokens> set,
                                                     std::span<const int> ks = kPatchingTopKs) {
  require(pre.shape() == post.shape(), "patch_heads_over_prompt_set",
          "the two checkpoints have different architectures");
  require(!set.empty(), "patch_heads_over_prompt_set", "the prompt set is empty");
  const std::vector<int> capped = capped_top_ks(ks, pre.layers() * pre.heads());
  SetPatchingResult r = set_patching_detail::patch_each_head(pre, post, set);
  std::stable_sort(
      r.heads.begin(), r.heads.end(),
      [](const SetHeadPatch& a, const SetHeadPatch& b) { return a.delta_mean_p > b.delta_mean_p; });
  set_patching_detail::patch_top_k(pre, post, set, capped, r);
  return r;
}

}  // namespace emergent
