// When does a checkpoint suite first solve a prompt? A suite is a folder of Hugging Face
// checkpoint folders named by training step, as Pythia's revisions are:
//
//   suite/step0/  suite/step1/ ... suite/step512/  suite/step1000/ ... suite/step143000/
//   (each: config.json + model.safetensors, or an index + shards; tokenizer.json in the suite
//   folder or in the checkpoint folders)
//
// find_emergence assumes the capability, once there, stays (a monotone solved/unsolved
// sequence over steps) and binary-searches for the first solving checkpoint: it evaluates the
// last checkpoint (none solves if it does not), the first (all solve if it does), then halves
// the interval between the last failing and the first solving checkpoint, about log2(count)
// evaluations in all (10 for Pythia's 154). The point of emergence is the midpoint of those two
// steps, as the paper's Fig. 1 values (750, 1.5k, 2.5k ...) read. Every evaluation is kept, so a
// non-monotone suite shows in the record; `curve` evaluates every checkpoint instead.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace emergent {

struct SuiteCheckpoint {
  std::int64_t step = 0;
  std::filesystem::path folder;
};

// The step<N> folders of a suite, by step. Other entries are ignored; none is an error.
inline std::vector<SuiteCheckpoint> list_suite(const std::filesystem::path& suite) {
  require(std::filesystem::is_directory(suite), suite.string(),
          "is not a folder (expected a checkpoint suite)");
  std::vector<SuiteCheckpoint> out;
  for (const auto& entry : std::filesystem::directory_iterator(suite)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    if (name.size() <= 4 || name.compare(0, 4, "step") != 0) continue;
    std::int64_t step = 0;
    const char* first = name.data() + 4;
    const char* last = name.data() + name.size();
    const auto [end, error] = std::from_chars(first, last, step);
    if (error != std::errc() || end != last || step < 0) continue;
    out.push_back({step, entry.path()});
  }
  require(!out.empty(), suite.string(),
          "holds no checkpoint folders named step<N> (e.g. step0, step1000)");
  std::sort(out.begin(), out.end(),
            [](const SuiteCheckpoint& a, const SuiteCheckpoint& b) { return a.step < b.step; });
  for (std::size_t i = 1; i < out.size(); ++i)
    require(out[i].step != out[i - 1].step, suite.string(),
            "two folders name step " + std::to_string(out[i].step) + " (e.g. step01 and step1)");
  return out;
}

// The tokenizer.json of a suite: in the suite folder, else in its first checkpoint folder.
inline std::filesystem::path suite_tokenizer(const std::filesystem::path& suite,
                                             const std::vector<SuiteCheckpoint>& checkpoints) {
  for (const auto& candidate :
       {suite / "tokenizer.json", checkpoints.front().folder / "tokenizer.json"})
    if (std::filesystem::exists(candidate)) return candidate;
  throw Error(suite.string() + ": no tokenizer.json in the suite folder or in " +
              checkpoints.front().folder.string() + " (pass --tokenizer)");
}

struct CheckpointEvaluation {
  std::int64_t step = 0;
  std::string sha256;
  double p_target = 0;
  std::int32_t greedy = -1;
  bool solved = false;
};

// The record of a search; `Evaluation` is what one checkpoint's evaluation gives
// (CheckpointEvaluation for one prompt, CheckpointSetEvaluation for a prompt set), and
// `is_solved(evaluation)` says whether it solves.
template <class Evaluation>
struct BasicEmergenceSearch {
  std::vector<Evaluation> evaluations;  // in the order they ran
  std::optional<std::int64_t> last_failing_step, first_solving_step;
  std::optional<double> emergence_step;  // midpoint of the two; absent when censored
  std::string outcome;  // "emerged", "solved at the first checkpoint", "never solved"
};
using EmergenceSearch = BasicEmergenceSearch<CheckpointEvaluation>;

inline bool is_solved(const CheckpointEvaluation& e) { return e.solved; }

// `evaluate(i)` runs checkpoint i (0 .. count - 1, in step order).
template <class Evaluation>
BasicEmergenceSearch<Evaluation> search_emergence(
    const std::vector<SuiteCheckpoint>& checkpoints,
    const std::function<Evaluation(std::size_t)>& evaluate) {
  require(!checkpoints.empty(), "find_emergence", "no checkpoints");
  BasicEmergenceSearch<Evaluation> s;
  auto run = [&](std::size_t i) {
    s.evaluations.push_back(evaluate(i));
    return is_solved(s.evaluations.back());
  };
  std::size_t hi = checkpoints.size() - 1;
  if (!run(hi)) {
    s.last_failing_step = checkpoints[hi].step;
    s.outcome = "never solved";
    return s;
  }
  if (hi == 0 || run(0)) {
    s.first_solving_step = checkpoints[0].step;
    s.outcome = "solved at the first checkpoint";
    return s;
  }
  std::size_t lo = 0;  // invariant: lo fails, hi solves
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (run(mid) ? hi : lo) = mid;
  }
  s.last_failing_step = checkpoints[lo].step;
  s.first_solving_step = checkpoints[hi].step;
  s.emergence_step = 0.5 * double(checkpoints[lo].step + checkpoints[hi].step);
  s.outcome = "emerged";
  return s;
}

inline EmergenceSearch find_emergence(
    const std::vector<SuiteCheckpoint>& checkpoints,
    const std::function<CheckpointEvaluation(std::size_t)>& evaluate) {
  return search_emergence<CheckpointEvaluation>(checkpoints, evaluate);
}

// The same outcome read off a whole curve (every checkpoint evaluated, in step order): the first
// solving checkpoint and the one before it, which is what the search reports on a monotone
// suite. `monotone` is false when a checkpoint after the first solving one fails again (the
// search may then report another boundary).
struct CurveEmergence {
  std::optional<std::int64_t> last_failing_step, first_solving_step;
  std::optional<double> emergence_step;
  std::string outcome;
  bool monotone = true;
};

inline CurveEmergence emergence_in_curve(const std::vector<std::int64_t>& steps,
                                         const std::vector<bool>& solved) {
  require(!steps.empty() && steps.size() == solved.size(), "emergence_in_curve",
          "needs one solved flag per checkpoint, and at least one checkpoint");
  CurveEmergence c;
  const auto first = std::find(solved.begin(), solved.end(), true);
  const std::size_t i = static_cast<std::size_t>(first - solved.begin());
  if (first == solved.end()) {
    c.last_failing_step = steps.back();
    c.outcome = "never solved";
    return c;
  }
  c.first_solving_step = steps[i];
  c.monotone = std::find(first, solved.end(), false) == solved.end();
  if (i == 0) {
    c.outcome = "solved at the first checkpoint";
    return c;
  }
  c.last_failing_step = steps[i - 1];
  c.emergence_step = 0.5 * double(steps[i - 1] + steps[i]);
  c.outcome = "emerged";
  return c;
}

}  // namespace emergent
