// `emergent pythia ...`: the paper's Pythia analysis on a folder of GPT-NeoX checkpoints
// (analysis/checkpoint_search.hpp describes the suite layout; docs/pythia.md is the guide).
//
//   emergent pythia curve     --suite DIR [prompt options] [--json F]
//       p(target) at every checkpoint
//   emergent pythia emergence --suite DIR [prompt options] [--json F]
//       binary search for the first solving checkpoint
//   emergent pythia patch     --pre DIR --post DIR [prompt options] [--top K] [--json F]
//                             (or --suite DIR --pre-step N --post-step M)
//   emergent pythia prompts   --kinds K1,K2 --count N [--length L]
//       the prompt sets as JSON lines {"kind","seed","text","target"}
//   emergent pythia attention --suite DIR --steps N1,N2 --heads L1H2,L0H3 [prompt options]
//                             [--json F]
//       the attention patterns [T x T] (query x key) of those heads on one prompt at those steps
// Prompt options: --kind repetition|induction|pattern|ioi [--prompt-seed N] [--length N]
// (analysis/capability_prompts.hpp; repetition, seed 0, length 8 is the paper's prompt), or
// --prompt TEXT --target TEXT. --tokenizer F overrides the suite's tokenizer.json.
// Prompt-set mode (pythia_prompt_sets.hpp): --count N > 1 or --kinds K1,K2: N prompts of each
// kind (seeds 0, 1, ...), solved when accuracy >= --threshold (0.5); patch reports top K = 1, 2,
// 4, 8, 16. --count 1 with --kind is the single-prompt form above, output unchanged.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <emergent/analysis/attention_patching.hpp>
#include <emergent/analysis/capability_prompts.hpp>
#include <emergent/analysis/checkpoint_search.hpp>
#include <emergent/analysis/next_token.hpp>
#include <emergent/analysis/prompt_set_patching.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/tokenizer.hpp>
#include <emergent/neox/load_checkpoint.hpp>
#include <emergent/settings/parameters.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pythia_prompt_sets.hpp"

namespace emergent::cli {

class PythiaCommands {
 public:
  explicit PythiaCommands(CLI::App& app) {
    pythia_ = app.add_subcommand(
        "pythia", "capability emergence and attention patching on GPT-NeoX checkpoints");
    pythia_->require_subcommand(1);
    curve_ = pythia_->add_subcommand(
        "curve", "p(target) and the greedy token at every checkpoint of a suite");
    emergence_ = pythia_->add_subcommand(
        "emergence", "binary search for the first checkpoint that solves the prompt");
    patch_ = pythia_->add_subcommand(
        "patch",
        "patch each head's attention pattern from a post- into a pre-emergence checkpoint");
    attention_ = pythia_->add_subcommand(
        "attention",
        "the attention patterns of chosen heads on one prompt at chosen checkpoints of a suite");
    for (CLI::App* command : {curve_, emergence_, patch_, attention_}) {
      command
          ->add_option("--kind", kind_,
                       "capability prompt kind: repetition, induction, pattern, ioi")
          ->capture_default_str();
      command->add_option("--prompt-seed", prompt_seed_, "seed of the generated prompt")
          ->check(CLI::Range(std::int64_t(0), std::int64_t(limits::kSeed)))
          ->capture_default_str();
      command
          ->add_option("--length", length_,
                       "repeated items in the generated prompt: repetition [2, 64], induction "
                       "[2, 24], pattern (letters shown) [4, 64]; ioi takes none")
          ->capture_default_str();
      command->add_option("--prompt", prompt_text_, "a prompt of your own (with --target)");
      command->add_option("--target", target_text_, "the expected next token's text, e.g. \" 3\"");
      command->add_option("--tokenizer", tokenizer_, "tokenizer.json (default: the suite's)");
      command->add_option("--json", json_, "also write the result as JSON to this file");
    }
    for (CLI::App* command : {curve_, emergence_, attention_})
      command->add_option("--suite", suite_, "folder of step<N> checkpoints")->required();
    attention_->add_option("--steps", steps_, "checkpoint steps of the suite, comma-separated")
        ->delimiter(',')
        ->required();
    attention_
        ->add_option("--heads", heads_,
                     "heads named L<layer>H<head> (0-based, as patch names them), comma-separated")
        ->delimiter(',')
        ->required();
    patch_->add_option("--suite", suite_,
                       "folder of step<N> checkpoints (with --pre-step and --post-step)");
    patch_->add_option("--pre", pre_, "pre-emergence checkpoint folder");
    patch_->add_option("--post", post_, "post-emergence checkpoint folder");
    patch_->add_option("--pre-step", pre_step_, "pre-emergence step in --suite");
    patch_->add_option("--post-step", post_step_, "post-emergence step in --suite");
    patch_->add_option("--top", top_k_, "heads patched together at the end")
        ->check(CLI::Range(1, int(limits::kHeads)))
        ->capture_default_str();
    prompts_ = pythia_->add_subcommand(
        "prompts", "print the prompt sets as JSON lines {\"kind\",\"seed\",\"text\",\"target\"}");
    for (CLI::App* command : {curve_, emergence_, patch_, prompts_}) add_set_options(command);
    prompts_->get_option("--count")->required();
    prompts_
        ->add_option("--length", length_,
                     "repeated items in the generated prompts: repetition [2, 64], induction "
                     "[2, 24], pattern (letters shown) [4, 64]; ioi takes none")
        ->capture_default_str();
    for (CLI::App* command : {curve_, emergence_})
      command
          ->add_option("--threshold", threshold_,
                       "prompt sets: solved when the accuracy (share of prompts whose greedy next "
                       "token is the target) is at least this")
          ->check(CLI::Range(0.0, 1.0))
          ->capture_default_str();
  }

  bool selected() const { return pythia_->parsed(); }

  void run() const {
    if (prompts_->parsed())
      pythia_sets::print_prompt_lines(set_options(prompts_));
    else if (curve_->parsed())
      set_mode() ? run_set_curve() : run_curve();
    else if (emergence_->parsed())
      set_mode() ? run_set_emergence() : run_emergence();
    else if (attention_->parsed())
      run_attention();
    else
      run_patch();
  }

 private:
  void add_set_options(CLI::App* command) {
    command
        ->add_option("--kinds", kinds_,
                     "prompt sets of these kinds, comma-separated (repetition, induction, "
                     "pattern, ioi)")
        ->delimiter(',')
        ->check(CLI::IsMember({"repetition", "induction", "pattern", "ioi"}));
    command->add_option("--count", count_, "prompts per kind (prompt-set mode when above 1)")
        ->check(CLI::Range(1, kMaxPromptSetCount))
        ->capture_default_str();
  }

  // --count N > 1 or --kinds: the prompt-set mode; otherwise today's single prompt.
  bool set_mode() const { return count_ > 1 || !kinds_.empty(); }

  static bool given(const CLI::App* command, const std::string& flag) {
    const CLI::Option* o = command->get_option_no_throw(flag);
    return o != nullptr && o->count() > 0;
  }

  // The options of the prompt-set mode, with the single-prompt ones it cannot take refused.
  pythia_sets::SetOptions set_options(const CLI::App* command) const {
    pythia_sets::SetOptions o{kinds_, count_, length_, threshold_};
    if (command == prompts_ && o.kinds.empty())
      o.kinds.assign(kCapabilityKinds.begin(), kCapabilityKinds.end());
    require(!given(command, "--prompt") && !given(command, "--target"), "--prompt",
            "a prompt of your own is the single-prompt form (drop --count and --kinds)");
    require(!given(command, "--prompt-seed"), "--prompt-seed",
            "a prompt set uses seeds 0, 1, 2, ... (drop --prompt-seed)");
    require(!given(command, "--top"), "--top",
            "prompt-set patching reports the top K = 1, 2, 4, 8, 16 (drop --top)");
    require(!(given(command, "--kind") && !kinds_.empty()), "--kind",
            "give --kind or --kinds, not both");
    if (o.kinds.empty()) o.kinds = {kind_};
    require_length(command, o.kinds, o.length);
    for (std::size_t i = 0; i < o.kinds.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        require(o.kinds[i] != o.kinds[j], "--kinds", "'" + o.kinds[i] + "' is listed twice");
    return o;
  }

  // --length as each of `kinds` takes it (capability_lengths): refused out of a kind's range, and
  // refused when given for kinds of which none takes a length (ioi), instead of being ignored.
  void require_length(const CLI::App* command, const std::vector<std::string>& kinds,
                      int length) const {
    bool taken = false;
    for (const std::string& kind : kinds) {
      require_capability_length(kind, length, "--length");
      taken |= capability_lengths(kind).high > 0;
    }
    require(taken || !given(command, "--length"), "--length",
            "is not allowed for " + kinds.front() + " prompts, which have no length: drop it");
  }

  // The single-prompt form takes no prompt-set option.
  void refuse_set_options(const CLI::App* command) const {
    require(!given(command, "--threshold"), "--threshold",
            "applies to prompt sets (--count N > 1 or --kinds)");
  }

  struct Setup {
    CapabilityPrompt prompt;
    CapabilityTokens tokens;
    std::unique_ptr<BpeTokenizer> tokenizer;
  };

  // `default_tokenizer` is looked up only when --tokenizer is not given (a suite need not hold
  // one).
  Setup prepare(const std::function<std::filesystem::path()>& default_tokenizer) const {
    for (const CLI::App* command : {curve_, emergence_, patch_})
      if (command->parsed()) refuse_set_options(command);
    Setup s;
    if (!prompt_text_.empty() || !target_text_.empty()) {
      require(!prompt_text_.empty() && !target_text_.empty(), "pythia",
              "--prompt and --target go together");
      s.prompt = {"custom", prompt_text_, target_text_};
    } else {
      for (const CLI::App* command : {curve_, emergence_, patch_, attention_})
        if (command->parsed()) require_length(command, {kind_}, length_);
      s.prompt = make_capability_prompt(kind_, static_cast<std::uint64_t>(prompt_seed_), length_);
    }
    s.tokenizer = load_tokenizer(default_tokenizer);
    s.tokens = capability_tokens(*s.tokenizer, s.prompt);
    std::printf("prompt (%s, %zu tokens): \"%s\" -> \"%s\" (token %d)\n", s.prompt.kind.c_str(),
                s.tokens.prompt.size(), s.prompt.text.c_str(), s.prompt.target.c_str(),
                s.tokens.target);
    return s;
  }

  std::unique_ptr<BpeTokenizer> load_tokenizer(
      const std::function<std::filesystem::path()>& default_tokenizer) const {
    return std::make_unique<BpeTokenizer>(tokenizer_.empty() ? default_tokenizer()
                                                             : std::filesystem::path(tokenizer_));
  }

  static CheckpointEvaluation evaluate(const SuiteCheckpoint& c, const Setup& s) {
    const neox::LoadedCheckpoint loaded = neox::load_checkpoint(c.folder);
    const NextTokenPrediction p = predict_next(*loaded.network, s.tokens.prompt, s.tokens.target);
    return {c.step, loaded.sha256, p.p_target, p.greedy, p.solved};
  }

  static void print_header() {
    std::printf("%10s  %-12s  %10s  %-14s  %s\n", "step", "sha256", "p(target)", "greedy",
                "solved");
  }
  // The greedy token's text, or its id where it has none: an embedding row past the tokenizer's
  // vocabulary (Pythia has 50,304 rows for 50,277 ids) can win, most likely early in training.
  static std::string token_text(std::int32_t id, const BpeTokenizer& tokenizer) {
    if (id < 0 || id >= tokenizer.vocab_size()) return "id " + std::to_string(id) + " (no token)";
    const std::int32_t ids[] = {id};
    return "\"" + tokenizer.decode(ids) + "\"";
  }
  static void print_row(const CheckpointEvaluation& e, const BpeTokenizer& tokenizer) {
    std::printf("%10lld  %-12s  %10.4f  %-14s  %s\n", (long long)e.step,
                e.sha256.substr(0, 12).c_str(), e.p_target, token_text(e.greedy, tokenizer).c_str(),
                e.solved ? "yes" : "no");
  }

  static nlohmann::json to_json(const CheckpointEvaluation& e) {
    return {{"step", e.step},
            {"sha256", e.sha256},
            {"p_target", e.p_target},
            {"greedy", e.greedy},
            {"solved", e.solved}};
  }
  static nlohmann::json to_json(const Setup& s) {
    return {{"kind", s.prompt.kind},
            {"text", s.prompt.text},
            {"target", s.prompt.target},
            {"tokens", s.tokens.prompt},
            {"target_token", s.tokens.target}};
  }
  void write_json(const nlohmann::json& j) const {
    if (json_.empty()) return;
    std::ofstream out(json_);
    out << j.dump(2) << "\n";
    require(out.good(), json_, "write failed");
    std::printf("wrote %s\n", json_.c_str());
  }

  void run_curve() const {
    const std::vector<SuiteCheckpoint> suite = list_suite(suite_);
    const Setup s = prepare([&] { return suite_tokenizer(suite_, suite); });
    print_header();
    nlohmann::json rows = nlohmann::json::array();
    for (const SuiteCheckpoint& c : suite) {
      const CheckpointEvaluation e = evaluate(c, s);
      print_row(e, *s.tokenizer);
      rows.push_back(to_json(e));
    }
    write_json({{"suite", suite_}, {"prompt", to_json(s)}, {"checkpoints", rows}});
  }

  void run_emergence() const {
    const std::vector<SuiteCheckpoint> suite = list_suite(suite_);
    const Setup s = prepare([&] { return suite_tokenizer(suite_, suite); });
    std::printf("%zu checkpoints, steps %lld .. %lld\n", suite.size(),
                (long long)suite.front().step, (long long)suite.back().step);
    print_header();
    const EmergenceSearch r = find_emergence(suite, [&](std::size_t i) {
      const CheckpointEvaluation e = evaluate(suite[i], s);
      print_row(e, *s.tokenizer);
      return e;
    });
    std::printf("%s after %zu evaluations", r.outcome.c_str(), r.evaluations.size());
    if (r.emergence_step)
      std::printf(": last failing step %lld, first solving step %lld, point of emergence %.1f",
                  (long long)*r.last_failing_step, (long long)*r.first_solving_step,
                  *r.emergence_step);
    std::printf("\n");
    nlohmann::json evaluations = nlohmann::json::array();
    for (const auto& e : r.evaluations) evaluations.push_back(to_json(e));
    write_json({{"suite", suite_},
                {"prompt", to_json(s)},
                {"outcome", r.outcome},
                {"last_failing_step", json_or_null(r.last_failing_step)},
                {"first_solving_step", json_or_null(r.first_solving_step)},
                {"emergence_step", json_or_null(r.emergence_step)},
                {"evaluations", evaluations}});
  }

  void run_set_curve() const {
    const pythia_sets::SetOptions o = set_options(curve_);
    const std::vector<SuiteCheckpoint> suite = list_suite(suite_);
    const auto tokenizer = load_tokenizer([&] { return suite_tokenizer(suite_, suite); });
    const auto sets = pythia_sets::make_kind_sets(o, *tokenizer);
    nlohmann::json j = pythia_sets::run_curve(suite, sets, o);
    j["suite"] = suite_;
    write_json(j);
  }

  void run_set_emergence() const {
    const pythia_sets::SetOptions o = set_options(emergence_);
    const std::vector<SuiteCheckpoint> suite = list_suite(suite_);
    const auto tokenizer = load_tokenizer([&] { return suite_tokenizer(suite_, suite); });
    const auto sets = pythia_sets::make_kind_sets(o, *tokenizer);
    nlohmann::json j = pythia_sets::run_emergence(suite, sets, o);
    j["suite"] = suite_;
    write_json(j);
  }

  void run_patch() const {
    std::filesystem::path pre = pre_, post = post_;
    std::function<std::filesystem::path()> default_tokenizer;
    if (!suite_.empty()) {
      require(pre_step_ && post_step_, "pythia patch", "--suite needs --pre-step and --post-step");
      const std::vector<SuiteCheckpoint> suite = list_suite(suite_);
      pre = find_step(suite, *pre_step_).folder;
      post = find_step(suite, *post_step_).folder;
      default_tokenizer = [this, suite] { return suite_tokenizer(suite_, suite); };
    } else {
      require(!pre.empty() && !post.empty(), "pythia patch",
              "give --pre and --post folders, or --suite with steps");
      default_tokenizer = [pre] {
        return std::filesystem::exists(pre / "tokenizer.json")
                   ? pre / "tokenizer.json"
                   : pre.parent_path() / "tokenizer.json";
      };
    }
    if (set_mode()) return run_set_patch(pre, post, default_tokenizer);
    const Setup s = prepare(default_tokenizer);
    const neox::LoadedCheckpoint a = neox::load_checkpoint(pre), b = neox::load_checkpoint(post);
    print_pre_post(pre, a, post, b);
    const PatchingResult r =
        patch_attention_heads(*a.network, *b.network, s.tokens.prompt, s.tokens.target, top_k_);
    std::printf("p(target): pre %.4f  post %.4f\n%6s %5s %10s %10s\n", r.p_pre, r.p_post, "layer",
                "head", "p patched", "delta p");
    const std::size_t shown = std::min<std::size_t>(r.heads.size(), 10);
    for (std::size_t i = 0; i < shown; ++i)
      std::printf("%6d %5d %10.4f %+10.4f\n", r.heads[i].layer, r.heads[i].head,
                  r.heads[i].p_patched, r.heads[i].delta_p);
    std::printf("top %d heads together: p %.4f, %.1f%% of the gap p_post - p_pre recovered\n",
                r.top_k, r.p_top_k, 100.0 * r.recovered_share);
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : r.heads)
      heads.push_back({{"layer", h.layer},
                       {"head", h.head},
                       {"p_patched", h.p_patched},
                       {"delta_p", h.delta_p}});
    write_json({{"pre", checkpoint_json(pre, a)},
                {"post", checkpoint_json(post, b)},
                {"prompt", to_json(s)},
                {"p_pre", r.p_pre},
                {"p_post", r.p_post},
                {"heads", heads},
                {"top_k", r.top_k},
                {"p_top_k", r.p_top_k},
                {"recovered_share", r.recovered_share}});
  }

  void run_set_patch(const std::filesystem::path& pre, const std::filesystem::path& post,
                     const std::function<std::filesystem::path()>& default_tokenizer) const {
    const pythia_sets::SetOptions o = set_options(patch_);
    const auto tokenizer = load_tokenizer(default_tokenizer);
    const auto sets = pythia_sets::make_kind_sets(o, *tokenizer);
    const neox::LoadedCheckpoint a = neox::load_checkpoint(pre), b = neox::load_checkpoint(post);
    print_pre_post(pre, a, post, b);
    nlohmann::json j = pythia_sets::run_patch(a, b, sets, o);
    j["pre"] = checkpoint_json(pre, a);
    j["post"] = checkpoint_json(post, b);
    write_json(j);
  }

  // The checkpoint of `step` in the suite; an unknown step is an error naming the steps beside it.
  const SuiteCheckpoint& find_step(const std::vector<SuiteCheckpoint>& suite,
                                   std::int64_t step) const {
    const SuiteCheckpoint *below = nullptr, *above = nullptr;
    for (const SuiteCheckpoint& c : suite) {
      if (c.step == step) return c;
      if (c.step < step) below = &c;
      if (c.step > step && above == nullptr) above = &c;
    }
    std::string nearest;
    for (const SuiteCheckpoint* c : {below, above})
      if (c != nullptr) {
        if (!nearest.empty()) nearest += ", ";
        nearest += std::to_string(c->step);
      }
    throw Error(suite_ + ": no checkpoint folder for step " + std::to_string(step) +
                " (nearest steps: " + nearest + ")");
  }

  struct HeadName {
    std::string name;
    int layer = 0, head = 0;
  };

  // "L<layer>H<head>", both 0-based decimal numbers.
  static HeadName parse_head(const std::string& name) {
    HeadName h;
    const char *p = name.data(), *end = name.data() + name.size();
    auto number = [&](char letter, int& value) {
      if (p == end || *p != letter) return false;
      ++p;
      if (p == end || *p < '0' || *p > '9') return false;
      const auto r = std::from_chars(p, end, value);
      p = r.ptr;
      return r.ec == std::errc();
    };
    require(number('L', h.layer) && number('H', h.head) && p == end, "--heads",
            "'" + name + "' is not a head name (expected L<layer>H<head>, 0-based, e.g. L1H2)");
    h.name = head_name(h.layer, h.head);
    return h;
  }

  // The float's shortest decimal, as a double that JSON writes as that decimal (a float widened
  // to double would print 17 digits).
  static double short_float(float value) {
    char text[32];
    const auto r = std::to_chars(text, text + sizeof text - 1, value);
    *r.ptr = '\0';
    return std::strtod(text, nullptr);
  }

  void run_attention() const {
    const std::vector<SuiteCheckpoint> suite = list_suite(suite_);
    std::vector<const SuiteCheckpoint*> chosen;
    for (const std::int64_t step : steps_) chosen.push_back(&find_step(suite, step));
    std::vector<HeadName> heads;
    for (const std::string& name : heads_) heads.push_back(parse_head(name));
    const Setup s = prepare([&] { return suite_tokenizer(suite_, suite); });
    const std::size_t T = s.tokens.prompt.size();

    nlohmann::json tokens = nlohmann::json::array();
    std::printf("tokens:");
    for (std::size_t i = 0; i < T; ++i) {
      const std::int32_t id[] = {s.tokens.prompt[i]};
      const std::string piece = s.tokenizer->decode(id);
      tokens.push_back(piece);
      std::printf(" %zu \"%s\"", i, piece.c_str());
    }
    std::printf("\n%10s  %-8s  %s\n", "step", "head",
                "the key each query attends to most (queries 0, 1, ...)");
    nlohmann::json checkpoints = nlohmann::json::array();
    for (const SuiteCheckpoint* c : chosen) {
      const neox::LoadedCheckpoint loaded = neox::load_checkpoint(c->folder);
      const int L = loaded.network->layers(), H = loaded.network->heads();
      for (const HeadName& h : heads)
        require(h.layer < L && h.head < H, "--heads",
                "'" + h.name + "' is not a head of " + c->folder.string() + " (" +
                    std::to_string(L) + " layers x " + std::to_string(H) + " heads, L0H0 .. " +
                    head_name(L - 1, H - 1) + ")");
      std::vector<std::vector<float>> layers(static_cast<std::size_t>(L));
      neox::ForwardHooks hooks;
      hooks.on_pattern = [&](int layer, std::span<const float> p) {
        layers[static_cast<std::size_t>(layer)].assign(p.begin(), p.end());
      };
      loaded.network->forward(s.tokens.prompt, hooks);
      nlohmann::json head_rows = nlohmann::json::array();
      for (const HeadName& h : heads) {
        const float* pattern = layers[static_cast<std::size_t>(h.layer)].data() +
                               static_cast<std::size_t>(h.head) * T * T;
        nlohmann::json rows = nlohmann::json::array();
        std::string most;
        for (std::size_t q = 0; q < T; ++q) {
          const std::span<const float> row(pattern + q * T, T);
          nlohmann::json values = nlohmann::json::array();
          std::size_t best = 0;
          for (std::size_t k = 0; k < T; ++k) {
            values.push_back(short_float(row[k]));
            if (row[k] > row[best]) best = k;
          }
          rows.push_back(std::move(values));
          if (q > 0) most += ' ';
          most += std::to_string(best);
        }
        std::printf("%10lld  %-8s  %s\n", (long long)c->step, h.name.c_str(), most.c_str());
        head_rows.push_back(
            {{"name", h.name}, {"layer", h.layer}, {"head", h.head}, {"pattern", rows}});
      }
      checkpoints.push_back({{"step", c->step}, {"sha256", loaded.sha256}, {"heads", head_rows}});
    }
    write_json({{"suite", suite_},
                {"kind", s.prompt.kind},
                {"prompt", {{"text", s.prompt.text}, {"target", s.prompt.target}}},
                {"tokens", tokens},
                {"token_ids", s.tokens.prompt},
                {"checkpoints", checkpoints}});
  }

  static void print_pre_post(const std::filesystem::path& pre, const neox::LoadedCheckpoint& a,
                             const std::filesystem::path& post, const neox::LoadedCheckpoint& b) {
    std::printf("pre  %s  sha256 %s\npost %s  sha256 %s\n", pre.string().c_str(), a.sha256.c_str(),
                post.string().c_str(), b.sha256.c_str());
  }
  static nlohmann::json checkpoint_json(const std::filesystem::path& folder,
                                        const neox::LoadedCheckpoint& c) {
    return {{"folder", folder.string()}, {"sha256", c.sha256}};
  }

  CLI::App *pythia_ = nullptr, *curve_ = nullptr, *emergence_ = nullptr, *patch_ = nullptr,
           *prompts_ = nullptr, *attention_ = nullptr;
  std::string kind_ = "repetition", prompt_text_, target_text_, tokenizer_, json_, suite_, pre_,
              post_;
  std::int64_t prompt_seed_ = 0;
  int length_ = 8, top_k_ = 2, count_ = 1;
  std::vector<std::string> kinds_, heads_;
  std::vector<std::int64_t> steps_;
  double threshold_ = 0.5;
  std::optional<std::int64_t> pre_step_, post_step_;
};

}  // namespace emergent::cli
