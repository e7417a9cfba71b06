// The prompt-set mode of `emergent pythia curve | emergence | patch` (--count N > 1 or --kinds)
// and `emergent pythia prompts`: N prompts of each kind (analysis/prompt_set.hpp), evaluated or
// patched together (analysis/prompt_set_patching.hpp). docs/pythia.md describes the output.
#pragma once

#include <cstdio>
#include <emergent/analysis/checkpoint_search.hpp>
#include <emergent/analysis/prompt_set.hpp>
#include <emergent/analysis/prompt_set_patching.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/tokenizer.hpp>
#include <emergent/neox/load_checkpoint.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent::cli::pythia_sets {

struct KindSet {
  std::string kind;
  std::vector<SeededPrompt> prompts;
  std::vector<CapabilityTokens> tokens;
};

struct SetOptions {
  std::vector<std::string> kinds;
  int count = 1, length = 8;
  double threshold = 0.5;
};

// `emergent pythia prompts`: one JSON line {"kind","seed","text","target"} per prompt.
inline void print_prompt_lines(const SetOptions& o) {
  for (const std::string& kind : o.kinds)
    for (const SeededPrompt& p : make_prompt_set(kind, o.count, o.length)) {
      const nlohmann::ordered_json line = {
          {"kind", kind}, {"seed", p.seed}, {"text", p.prompt.text}, {"target", p.prompt.target}};
      std::printf("%s\n", line.dump().c_str());
    }
}

inline std::vector<KindSet> make_kind_sets(const SetOptions& o, const BpeTokenizer& tokenizer) {
  std::vector<KindSet> sets;
  for (const std::string& kind : o.kinds) {
    KindSet s{kind, make_prompt_set(kind, o.count, o.length), {}};
    s.tokens = prompt_set_tokens(tokenizer, s.prompts);
    const std::uint64_t last = s.prompts.back().seed;
    std::printf(
        "prompt set %s: %d prompts, seeds 0..%llu (%llu duplicates skipped), e.g. \"%s\" -> "
        "\"%s\"\n",
        kind.c_str(), o.count, (unsigned long long)last,
        (unsigned long long)(last + 1 - s.prompts.size()), s.prompts[0].prompt.text.c_str(),
        s.prompts[0].prompt.target.c_str());
    sets.push_back(std::move(s));
  }
  return sets;
}

inline nlohmann::json prompts_json(const KindSet& s) {
  nlohmann::json prompts = nlohmann::json::array();
  for (std::size_t i = 0; i < s.prompts.size(); ++i)
    prompts.push_back({{"seed", s.prompts[i].seed},
                       {"text", s.prompts[i].prompt.text},
                       {"target", s.prompts[i].prompt.target},
                       {"tokens", s.tokens[i].prompt},
                       {"target_token", s.tokens[i].target}});
  return prompts;
}

inline nlohmann::json options_json(const SetOptions& o) {
  return {{"count", o.count}, {"length", o.length}, {"threshold", o.threshold}};
}

inline nlohmann::json evaluation_json(const CheckpointSetEvaluation& e) {
  nlohmann::json p = nlohmann::json::array(), greedy = nlohmann::json::array(),
                 correct = nlohmann::json::array();
  for (const NextTokenPrediction& x : e.score.prompts) {
    p.push_back(x.p_target);
    greedy.push_back(x.greedy);
    correct.push_back(x.solved);
  }
  return {{"step", e.step},
          {"sha256", e.sha256},
          {"mean_p_target", e.score.mean_p_target},
          {"accuracy", e.score.accuracy},
          {"solved", e.score.solved},
          {"p_target", p},
          {"greedy", greedy},
          {"correct", correct}};
}

template <class Outcome>
nlohmann::json outcome_json(const Outcome& r) {
  return {{"outcome", r.outcome},
          {"last_failing_step", json_or_null(r.last_failing_step)},
          {"first_solving_step", json_or_null(r.first_solving_step)},
          {"emergence_step", json_or_null(r.emergence_step)}};
}

template <class Outcome>
void print_outcome(const std::string& kind, const Outcome& r, std::size_t evaluations) {
  std::printf("%s: %s after %zu evaluations", kind.c_str(), r.outcome.c_str(), evaluations);
  if (r.emergence_step)
    std::printf(": last failing step %lld, first solving step %lld, point of emergence %.1f",
                (long long)*r.last_failing_step, (long long)*r.first_solving_step,
                *r.emergence_step);
  std::printf("\n");
}

inline void print_set_header() {
  std::printf("%10s  %-12s  %-10s  %14s  %8s  %s\n", "step", "sha256", "kind", "mean p(target)",
              "accuracy", "solved");
}
inline void print_set_row(const std::string& kind, const CheckpointSetEvaluation& e) {
  std::printf("%10lld  %-12s  %-10s  %14.4g  %8.3f  %s\n", (long long)e.step,
              e.sha256.substr(0, 12).c_str(), kind.c_str(), e.score.mean_p_target, e.score.accuracy,
              e.score.solved ? "yes" : "no");
}

// Loads checkpoint i once and evaluates every kind's set on it.
class SuiteEvaluator {
 public:
  SuiteEvaluator(const std::vector<SuiteCheckpoint>& suite, const std::vector<KindSet>& sets,
                 double threshold)
      : suite_(suite), sets_(sets), threshold_(threshold) {}

  const CheckpointSetEvaluation& evaluate(std::size_t i, std::size_t kind) {
    auto found = cache_.find(i);
    if (found == cache_.end()) found = cache_.emplace(i, load_and_evaluate(i)).first;
    return found->second[kind];
  }
  std::size_t loads() const { return cache_.size(); }

 private:
  std::vector<CheckpointSetEvaluation> load_and_evaluate(std::size_t i) const {
    const neox::LoadedCheckpoint loaded = neox::load_checkpoint(suite_[i].folder);
    std::vector<CheckpointSetEvaluation> out;
    for (const KindSet& s : sets_)
      out.push_back({suite_[i].step, loaded.sha256,
                     evaluate_prompt_set(*loaded.network, s.tokens, threshold_)});
    return out;
  }

  const std::vector<SuiteCheckpoint>& suite_;
  const std::vector<KindSet>& sets_;
  double threshold_;
  std::map<std::size_t, std::vector<CheckpointSetEvaluation>> cache_;
};

// curve: every checkpoint, every kind; the first solving checkpoint read off each kind's curve.
inline nlohmann::json run_curve(const std::vector<SuiteCheckpoint>& suite,
                                const std::vector<KindSet>& sets, const SetOptions& o) {
  SuiteEvaluator evaluator(suite, sets, o.threshold);
  print_set_header();
  std::vector<nlohmann::json> rows(sets.size(), nlohmann::json::array());
  std::vector<std::vector<bool>> solved(sets.size());
  std::vector<std::int64_t> steps;
  for (std::size_t i = 0; i < suite.size(); ++i) {
    steps.push_back(suite[i].step);
    for (std::size_t k = 0; k < sets.size(); ++k) {
      const CheckpointSetEvaluation& e = evaluator.evaluate(i, k);
      print_set_row(sets[k].kind, e);
      rows[k].push_back(evaluation_json(e));
      solved[k].push_back(e.score.solved);
    }
  }
  nlohmann::json kinds = nlohmann::json::array();
  for (std::size_t k = 0; k < sets.size(); ++k) {
    const CurveEmergence c = emergence_in_curve(steps, solved[k]);
    print_outcome(sets[k].kind, c, suite.size());
    if (!c.monotone)
      std::printf("%s: not monotone (fails again after it first solves)\n", sets[k].kind.c_str());
    nlohmann::json j = outcome_json(c);
    j["kind"] = sets[k].kind;
    j["prompts"] = prompts_json(sets[k]);
    j["monotone"] = c.monotone;
    j["checkpoints"] = rows[k];
    kinds.push_back(j);
  }
  return {{"mode", "prompt set"}, {"options", options_json(o)}, {"kinds", kinds}};
}

// emergence: one binary search per kind; a checkpoint is loaded once for all kinds.
inline nlohmann::json run_emergence(const std::vector<SuiteCheckpoint>& suite,
                                    const std::vector<KindSet>& sets, const SetOptions& o) {
  SuiteEvaluator evaluator(suite, sets, o.threshold);
  std::printf("%zu checkpoints, steps %lld .. %lld; a set is solved when its accuracy >= %.3g\n",
              suite.size(), (long long)suite.front().step, (long long)suite.back().step,
              o.threshold);
  print_set_header();
  nlohmann::json kinds = nlohmann::json::array();
  for (std::size_t k = 0; k < sets.size(); ++k) {
    const auto r = search_emergence<CheckpointSetEvaluation>(suite, [&](std::size_t i) {
      const CheckpointSetEvaluation& e = evaluator.evaluate(i, k);
      print_set_row(sets[k].kind, e);
      return e;
    });
    print_outcome(sets[k].kind, r, r.evaluations.size());
    nlohmann::json evaluations = nlohmann::json::array();
    for (const auto& e : r.evaluations) evaluations.push_back(evaluation_json(e));
    nlohmann::json j = outcome_json(r);
    j["kind"] = sets[k].kind;
    j["prompts"] = prompts_json(sets[k]);
    j["evaluations"] = evaluations;
    kinds.push_back(j);
  }
  std::printf("%zu checkpoint loads for %zu kind%s\n", evaluator.loads(), sets.size(),
              sets.size() == 1 ? "" : "s");
  return {{"mode", "prompt set"},
          {"options", options_json(o)},
          {"checkpoint_loads", evaluator.loads()},
          {"kinds", kinds}};
}

inline std::string percent(const std::optional<double>& share) {
  if (!share) return "n/a";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * *share);
  return text;
}

inline void print_patching(const std::string& kind, const SetPatchingResult& r) {
  std::printf("%s: mean p(target) pre %.4g  post %.4g\n%6s  %-8s %15s %15s\n", kind.c_str(),
              r.mean_p_pre, r.mean_p_post, "rank", "head", "mean p patched", "delta mean p");
  const std::size_t shown = std::min<std::size_t>(r.heads.size(), 10);
  for (std::size_t i = 0; i < shown; ++i)
    std::printf("%6zu  %-8s %15.4g %+15.4g\n", i + 1, r.heads[i].name().c_str(),
                r.heads[i].mean_p_patched, r.heads[i].delta_mean_p);
  std::printf("%6s  %15s %9s  %s\n", "K", "mean p patched", "recovery", "heads");
  for (const TopKRecovery& t : r.top_k) {
    std::string names;
    for (const std::string& h : t.heads) names += (names.empty() ? "" : ",") + h;
    std::printf("%6d  %15.4g %9s  %s\n", t.k, t.mean_p_patched, percent(t.recovery).c_str(),
                names.c_str());
  }
}

inline nlohmann::json patching_json(const KindSet& s, const SetPatchingResult& r) {
  nlohmann::json heads = nlohmann::json::array(), top = nlohmann::json::array();
  for (const SetHeadPatch& h : r.heads)
    heads.push_back({{"name", h.name()},
                     {"layer", h.layer},
                     {"head", h.head},
                     {"mean_p_patched", h.mean_p_patched},
                     {"delta_mean_p", h.delta_mean_p},
                     {"p_patched", h.p_patched}});
  for (const TopKRecovery& t : r.top_k)
    top.push_back({{"k", t.k},
                   {"heads", t.heads},
                   {"mean_p_patched", t.mean_p_patched},
                   {"recovery", json_or_null(t.recovery)},
                   {"p_patched", t.p_patched}});
  return {{"kind", s.kind},
          {"prompts", prompts_json(s)},
          {"p_pre", r.p_pre},
          {"p_post", r.p_post},
          {"mean_p_pre", r.mean_p_pre},
          {"mean_p_post", r.mean_p_post},
          {"heads", heads},
          {"top_k", top}};
}

// patch: every kind's set between the two loaded checkpoints.
inline nlohmann::json run_patch(const neox::LoadedCheckpoint& pre,
                                const neox::LoadedCheckpoint& post,
                                const std::vector<KindSet>& sets, const SetOptions& o) {
  std::printf("recovery(K) = (mean p patched(K) - mean p pre) / (mean p post - mean p pre)\n");
  nlohmann::json kinds = nlohmann::json::array();
  for (const KindSet& s : sets) {
    const SetPatchingResult r = patch_heads_over_prompt_set(*pre.network, *post.network, s.tokens);
    print_patching(s.kind, r);
    kinds.push_back(patching_json(s, r));
  }
  nlohmann::json options = options_json(o);
  options.erase("threshold");
  return {{"mode", "prompt set"},
          {"options", options},
          {"recovery_formula",
           "(mean_p_patched - mean_p_pre) / (mean_p_post - mean_p_pre), null when the gap is 0"},
          {"kinds", kinds}};
}

}  // namespace emergent::cli::pythia_sets
