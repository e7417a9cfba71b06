// Seed ensembles as statistics: the result rows of a sweep grouped by some of their settings
// (`emergent sweep summarize DIR --by S,s`), and per group what the paper's figures plot:
//   runs             how many rows the group has
//   solved           the share whose solved_step was reached, with its 95% Wilson interval
//   emergence        every run's emergence step (the plateau length), censored runs marked
//                    ">steps_done", never dropped
//   plateau_median   the Kaplan-Meier median of the emergence step, censored runs counted as
//                    censored (null: not reached, more than half still on the plateau), and its
//                    Brookmeyer-Crowley 95% interval
//   final_loss       mean, standard deviation, min and max of the smoothed final loss
//   logrank          with two groups or more: the log-rank test of "every group emerges at the
//                    same rate" over the same censored emergence steps as plateau_median, one
//                    test across ALL the groups (with --by S,s: every (S, s) pair is a group, not
//                    S alone; for pairwise or per-S comparisons summarize a subset or group by
//                    fewer fields). Each group holds its own observed and expected emergences and
//                    the test's statistic, df and p_value, the same in every group (the JSON stays
//                    a list of groups). The table ends with one line of it.
// A row (experiment/result_rows.hpp) is {"id", "label", "config": {...}, "result": {...}} with
// result the run's summary.json without its wall time.
#pragma once

#include <cstddef>
#include <cstdio>
#include <emergent/core/error.hpp>
#include <emergent/experiment/ensemble_statistics.hpp>
#include <emergent/io/json.hpp>
#include <emergent/train/language_model_config.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent {

inline nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// The groups of `rows` by the values of `keys` in their config, in order of first appearance.
// A key that a row written before its setting existed lacks takes its value from `older_defaults`
// (the defaults of settings declared added_later: settings/parameters.hpp).
inline nlohmann::json summarize_rows(
    const std::vector<nlohmann::json>& rows, const std::vector<std::string>& keys,
    const std::string& where, const nlohmann::json& older_defaults = nlohmann::json::object()) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const nlohmann::json*>> groups;
  std::map<std::string, nlohmann::json> group_values;
  for (const nlohmann::json& row : rows) {
    nlohmann::json values = nlohmann::json::object();
    for (const std::string& key : keys) {
      const nlohmann::json& config = row.at("config");
      require(
          config.contains(key) || older_defaults.contains(key), where,
          "--by field '" + key + "' is not a setting of run " + row.at("id").get<std::string>());
      values[key] = config.contains(key) ? config.at(key) : older_defaults.at(key);
    }
    const std::string name = values.dump();
    if (!groups.count(name)) order.push_back(name), group_values[name] = values;
    groups[name].push_back(&row);
  }
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::vector<CensoredTime>> plateaus_of_groups;
  for (const std::string& name : order) {
    const auto& members = groups[name];
    int solved = 0;
    std::vector<CensoredTime> plateaus;
    std::vector<double> losses;
    nlohmann::json emergence = nlohmann::json::array();
    for (const nlohmann::json* row : members) {
      const nlohmann::json& r = row->at("result");
      require(r.contains("solved_step"), where,
              "run " + row->at("id").get<std::string>() + " has no emergence steps to summarize (" +
                  (is_language_model(row->at("config"))
                       ? std::string("a language-model run: `emergent pythia emergence --suite` "
                                     "reads its checkpoints")
                       : std::string("a self-pretraining run: plot.py spt prints its table")) +
                  ")");
      const std::int64_t done = r.at("steps_done").get<std::int64_t>();
      solved += r.at("solved_step").is_null() ? 0 : 1;
      const std::optional<std::int64_t> step =
          r.at("emergence_step").is_null() ? std::nullopt
                                           : std::optional<std::int64_t>(r.at("emergence_step"));
      plateaus.push_back(emergence_outcome(step, done));
      losses.push_back(r.at("final_loss").get<double>());
      emergence.push_back({{"seed", row->at("config").value("seed", 0)},
                           {"emergence_step", json_or_null(step)},
                           {"censored", !step.has_value()},
                           {"steps_done", done}});
    }
    const Proportion share = wilson_interval(solved, static_cast<int>(members.size()));
    const KaplanMeierMedian median = kaplan_meier_median_with_interval(plateaus);
    const MeanSpread loss = mean_spread(losses);
    plateaus_of_groups.push_back(plateaus);
    out.push_back(
        {{"group", group_values[name]},
         {"runs", members.size()},
         {"solved",
          {{"count", solved}, {"share", share.share}, {"low", share.low}, {"high", share.high}}},
         {"emergence", emergence},
         {"plateau_median",
          {{"median", optional_number(median.median)},
           {"low", optional_number(median.low)},
           {"high", optional_number(median.high)}}},
         {"final_loss",
          {{"mean", loss.mean},
           {"standard_deviation", loss.standard_deviation},
           {"min", loss.min},
           {"max", loss.max}}}});
  }
  if (order.size() >= 2) {
    const LogRankTest test = log_rank_test(plateaus_of_groups);
    for (std::size_t g = 0; g < order.size(); ++g)
      out[g]["logrank"] = {{"observed", test.observed[g]}, {"expected", test.expected[g]},
                           {"statistic", test.statistic},  {"df", test.degrees_of_freedom},
                           {"p_value", test.p_value},      {"groups", order.size()}};
  }
  return out;
}

// The table `emergent sweep summarize` prints.
inline std::string summary_table(const nlohmann::json& groups) {
  const auto step_text = [](const nlohmann::json& v) {
    return v.is_null() ? std::string("not reached")
                       : std::to_string(static_cast<long long>(v.get<double>()));
  };
  std::string out;
  char line[512];
  for (const nlohmann::json& g : groups) {
    std::string label;
    for (const auto& [key, value] : g["group"].items())
      label += (label.empty() ? "" : " ") + key + "=" + value.dump();
    const auto& solved = g["solved"];
    std::snprintf(
        line, sizeof line,
        "%s: %d runs  solved %d/%d = %.2f [%.2f, %.2f]  plateau median %s [%s, %s]  final loss "
        "%.4f +- %.4f\n",
        label.empty() ? "all" : label.c_str(), g["runs"].get<int>(), solved["count"].get<int>(),
        g["runs"].get<int>(), solved["share"].get<double>(), solved["low"].get<double>(),
        solved["high"].get<double>(), step_text(g["plateau_median"]["median"]).c_str(),
        step_text(g["plateau_median"]["low"]).c_str(),
        step_text(g["plateau_median"]["high"]).c_str(), g["final_loss"]["mean"].get<double>(),
        g["final_loss"]["standard_deviation"].get<double>());
    out += line;
    std::string seeds = "    emergence step per seed:";
    for (const auto& e : g["emergence"])
      seeds += " " + std::to_string(e["seed"].get<long long>()) + ":" +
               (e["censored"].get<bool>() ? ">" + std::to_string(e["steps_done"].get<long long>())
                                          : std::to_string(e["emergence_step"].get<long long>()));
    out += seeds + "\n";
  }
  if (groups.size() >= 2 && groups[0].contains("logrank")) {
    const nlohmann::json& test = groups[0]["logrank"];
    if (test["df"].get<int>() == 0)
      std::snprintf(line, sizeof line,
                    "log-rank test of the emergence steps across the %zu groups: nothing to "
                    "compare (no emergence while two groups were running), p = 1\n",
                    groups.size());
    else
      std::snprintf(line, sizeof line,
                    "log-rank test of the emergence steps across the %zu groups: chi-square %.3f, "
                    "df %d, p = %.3g\n",
                    groups.size(), test["statistic"].get<double>(), test["df"].get<int>(),
                    test["p_value"].get<double>());
    out += line;
  }
  return out;
}

}  // namespace emergent
