// The multi-rule cellular automaton task of "Emergent Capabilities Arise Randomly from Learning
// Sparse Attention Patterns" (docs/paper-notes.md §1). A state is a
// ring of S cells, each one of C colours. A rule is a lookup table of C^W colours applied to the
// window of W cells around each cell; between two recorded states the rule is applied k times
// (the "recursive depth", INFERRED as seewhy reads it), so a recorded cell depends on the
// k(W-1)+1 cells around it in the previous recorded state. A pool of N tables is drawn once per
// run and every sequence uses one of them, picked at random: the model has to infer the rule from
// the context before it can predict, unlike the linear map whose matrix is learned into the
// weights. The paper's setting is C=4, T=16, k=1, W=3, N=256 (Appendix B.1); S is swept.
//
// Unstated in the paper and assumed here, as in both replications: periodic boundary (cell
// indices mod S) and tables uniform over all C^(C^W) tables (every entry uniform in [0, C)).
//
// Sequence layout (no separators, no BOS):
//   tokens   = s_0[0..S-1], s_1[0..S-1], ..., s_{T-1}[0..S-1]          S*T tokens in [0, C)
//   inputs   = tokens[0 .. S*T-2],  targets = tokens[1 .. S*T-1]        length() = S*T-1
// Position p predicts token p+1. If token p+1 is cell i of state t >= 1 (p+1 = t*S + i), its
// ideal attention is the dependency window of state t-1: keys (t-1)*S + ((i+d) mod S) for
// |d| <= k(W-1)/2. The S-1 predictions inside s_0 are uniform noise.
//
// Window index: the window around cell i, read left to right (cell i-(W-1)/2 first), is a
// base-C number with the leftmost cell as the most significant digit; table[index] is the next
// colour of cell i. For C=2, W=3 this is Wolfram's numbering: bit n of the rule number is
// table[n] (rule 110 is table {0,1,1,1,0,1,1,0}).
//
// The pool is drawn once from task_seed and fixed for the run. Data is fresh every step:
// sequence b of step t is a pure function of (data_seed, t, b), never of batch size, thread count
// or backend.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/frames.hpp>
#include <emergent/tasks/task.hpp>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

class CellularAutomaton {
 public:
  // C^W, the table size, is capped at 2^20 entries, and the pool (N tables) at 2^28 entries.
  static constexpr std::int64_t kMaxTableSize = std::int64_t{1} << 20;
  static constexpr std::int64_t kMaxPoolEntries = std::int64_t{1} << 28;

  CellularAutomaton(int state_size, int states = 16, int colours = 4, int window = 3, int depth = 1,
                    int rules = 256, std::uint64_t task_seed = 0)
      : state_size_(state_size),
        states_(states),
        colours_(colours),
        window_(window),
        depth_(depth),
        rules_(rules) {
    require(state_size >= 1, "CellularAutomaton S",
            "state size S must be >= 1, got " + std::to_string(state_size));
    require(states >= 2, "CellularAutomaton T",
            "states per sequence T must be >= 2, got " + std::to_string(states));
    require(colours >= 2, "CellularAutomaton C",
            "colours C must be >= 2, got " + std::to_string(colours));
    require(window >= 1 && window % 2 == 1, "CellularAutomaton W",
            "window W must be odd and >= 1, got " + std::to_string(window));
    table_size_ = checked_table_size(colours, window);
    require(table_size_ > 0, "CellularAutomaton C^W",
            "the lookup table of C^W entries (C=" + std::to_string(colours) +
                ", W=" + std::to_string(window) + ") must hold at most 2^20 entries");
    require(depth >= 1, "CellularAutomaton k",
            "depth k must be >= 1, got " + std::to_string(depth));
    require(rules >= 1, "CellularAutomaton N",
            "rules N must be >= 1, got " + std::to_string(rules));
    require(static_cast<std::int64_t>(rules) * table_size_ <= kMaxPoolEntries,
            "CellularAutomaton N",
            "the pool of N*C^W = " + std::to_string(rules) + "*" + std::to_string(table_size_) +
                " entries exceeds 2^28");
    require(static_cast<std::int64_t>(state_size) * states <= std::numeric_limits<int>::max(),
            "CellularAutomaton S*T",
            "S*T = " + std::to_string(state_size) + "*" + std::to_string(states) +
                " tokens must fit an int");
    radius_ = static_cast<std::int64_t>(depth) * (window - 1) / 2;
    draw_rules(task_seed);
  }

  // The declaration (tasks/task.hpp). Emergence is read off the loss (chance ln C): emergence
  // < 1.3, the paper's plateau threshold for C = 4 (scaled as 1.3 / ln 4 * ln C for other C);
  // midpoint < ln C / 2; solved < 0.2. The paper's model has 4 layers.
  static constexpr const char* task_name = "cellular-automaton";
  static std::vector<Parameter> parameters() {
    return {
        integer("S", 16, between(1, limits::kPositions), "state size S: cells per recorded state"),
        integer("states", 16, between(2, limits::kPositions), "recorded states T per sequence"),
        integer("colours", 4, between(2, limits::kPositions), "colours C"),
        integer("window", 3, between(1, 1023), "window W of a rule (odd)"),
        integer("depth", 1, between(1, limits::kPositions),
                "rule applications k between recorded states"),
        integer("rules", 256, between(1, 268435456),
                "pool of N lookup tables, one drawn per sequence"),
        integer(
            "task_seed", 0, between(0, limits::kSeed),
            "draws the rule pool; fixed across seeds, so that seeds differ only in init and data")};
  }
  static Shape default_shape() {
    return {.vocab = 0, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 0};
  }
  static TaskSetup setup(const ParameterValues& v) {
    const double chance = std::log(double(v.integer("colours")));
    return {std::make_unique<TaskAdapter<CellularAutomaton>>(CellularAutomaton(
                int(v.integer("S")), int(v.integer("states")), int(v.integer("colours")),
                int(v.integer("window")), int(v.integer("depth")), int(v.integer("rules")),
                std::uint64_t(v.integer("task_seed")))),
            "next_state",
            {"loss", 1.3 / std::log(4.0) * chance, chance / 2, 0.2}};
  }

  int vocab() const { return colours_; }
  int state_size() const { return state_size_; }
  int states() const { return states_; }
  int colours() const { return colours_; }
  int window() const { return window_; }
  int depth() const { return depth_; }
  int rules() const { return rules_; }
  FrameLayout frame_layout() const { return {state_size_, states_}; }
  int length() const { return frame_layout().length(); }
  // C^W, the entries of one table.
  int table_size() const { return static_cast<int>(table_size_); }
  // k(W-1)/2: a recorded cell depends on cells i-r .. i+r (mod S) of the previous recorded state.
  std::int64_t dependency_radius() const { return radius_; }
  // The pool: N tables of C^W colours each.
  const std::vector<std::vector<int>>& rule_tables() const { return tables_; }

  // One automaton step on raw arrays of S cells, no validation (sample() and the device's
  // sampler, cuda/cellular_automaton.cuh, run it). The window index is built incrementally,
  // leftmost cell most significant.
  static constexpr void advance(const int* from, int* to, int S, const int* table, int C, int W) {
    const int h = (W - 1) / 2;
    for (int i = 0; i < S; ++i) {
      std::int64_t index = 0;
      for (int d = -h; d <= h; ++d) index = index * C + from[((i + d) % S + S) % S];
      to[i] = table[index];
    }
  }
  // tokens [T, S]: the recorded states 1 .. T-1 from s_0 in tokens[0 .. S-1], each `depth`
  // applications of the table after the one before; scratch: 2 S cells for the states between.
  static constexpr void record_states(int* tokens, int* scratch, int S, int T, const int* table,
                                      int C, int W, int depth) {
    for (int t = 1; t < T; ++t) {
      const int* from = tokens + std::int64_t(t - 1) * S;
      for (int applied = 0; applied < depth; ++applied) {
        int* to = applied + 1 == depth ? tokens + std::int64_t(t) * S
                                       : scratch + (applied % 2 == 0 ? 0 : S);
        advance(from, to, S, table, C, W);
        from = to;
      }
    }
  }

  // One step of the automaton with periodic boundary: next[i] = table[window of `state` around i].
  // Validates its arguments (sizes, colours), so it is meant for tests and tools.
  static std::vector<int> step_state(const std::vector<int>& state, const std::vector<int>& table,
                                     int C, int W) {
    require(C >= 2, "CellularAutomaton::step_state C", "must be >= 2, got " + std::to_string(C));
    require(W >= 1 && W % 2 == 1, "CellularAutomaton::step_state W",
            "must be odd and >= 1, got " + std::to_string(W));
    const std::int64_t size = checked_table_size(C, W);
    require(size > 0 && static_cast<std::int64_t>(table.size()) == size,
            "CellularAutomaton::step_state table",
            "size " + std::to_string(table.size()) + ", expected C^W");
    require(!state.empty(), "CellularAutomaton::step_state state", "must hold at least one cell");
    for (int cell : state) {
      require(cell >= 0 && cell < C, "CellularAutomaton::step_state state",
              "cell colour " + std::to_string(cell) + " outside [0, C)");
    }
    for (int entry : table) {
      require(entry >= 0 && entry < C, "CellularAutomaton::step_state table",
              "entry " + std::to_string(entry) + " outside [0, C)");
    }
    std::vector<int> next(state.size());
    advance(state.data(), next.data(), static_cast<int>(state.size()), table.data(), C, W);
    return next;
  }

  // step_state applied `depth` times: one recorded transition.
  static std::vector<int> evolve(std::vector<int> state, const std::vector<int>& table, int C,
                                 int W, int depth) {
    require(depth >= 0, "CellularAutomaton::evolve depth",
            "must be >= 0, got " + std::to_string(depth));
    for (int step = 0; step < depth; ++step) state = step_state(state, table, C, W);
    return state;
  }

  // The pool index of the rule of sequence b of step `step`.
  int rule_of_sequence(std::uint64_t data_seed, std::uint64_t step, int b) const {
    require(b >= 0, "CellularAutomaton::rule_of_sequence b",
            "must be >= 0, got " + std::to_string(b));
    const PhiloxStream stream(data_seed, step);
    return draw_rule(stream, b);
  }

  // Fills inputs and targets, each [batch, length()] row-major, with fresh sequences of step
  // `step`. Random layout, on the Philox stream (key = data_seed, stream id = step), all draws by
  // below(): sequence b owns below-indices (b << 30) .. (b << 30) + S, i.e. words (b << 32) ..
  // (b << 32) + 4S + 3:
  //   rule       = below((b << 30),         N)
  //   s_0[i]     = below((b << 30) + 1 + i, C)      i = 0 .. S-1   (S < 2^30 by the S*T check)
  // The indices depend only on b and i, hence sequence b is the same for every batch size and
  // thread count.
  void sample(std::uint64_t data_seed, std::uint64_t step, int batch,
              std::span<std::int32_t> inputs, std::span<std::int32_t> targets) const {
    require(batch >= 0, "CellularAutomaton::sample batch",
            "must be >= 0, got " + std::to_string(batch));
    const std::size_t L = static_cast<std::size_t>(length());
    const std::size_t expected = static_cast<std::size_t>(batch) * L;
    require(inputs.size() == expected, "CellularAutomaton::sample inputs",
            "size " + std::to_string(inputs.size()) +
                ", expected batch*length = " + std::to_string(expected));
    require(targets.size() == expected, "CellularAutomaton::sample targets",
            "size " + std::to_string(targets.size()) +
                ", expected batch*length = " + std::to_string(expected));

    const std::size_t S = static_cast<std::size_t>(state_size_);
    const PhiloxStream stream(data_seed, step);
    std::vector<int> tokens(S * static_cast<std::size_t>(states_)), scratch(2 * S);
    for (int b = 0; b < batch; ++b) {
      const std::uint64_t base = static_cast<std::uint64_t>(b) << 30;
      const std::vector<int>& table = tables_[static_cast<std::size_t>(draw_rule(stream, b))];
      for (std::size_t i = 0; i < S; ++i) {
        tokens[i] =
            static_cast<int>(stream.below(base + 1 + i, static_cast<std::uint32_t>(colours_)));
      }
      record_states(tokens.data(), scratch.data(), state_size_, states_, table.data(), colours_,
                    window_, depth_);
      const std::size_t row = static_cast<std::size_t>(b) * L;
      for (std::size_t p = 0; p < L; ++p) {
        inputs[row + p] = static_cast<std::int32_t>(tokens[p]);
        targets[row + p] = static_cast<std::int32_t>(tokens[p + 1]);
      }
    }
  }

  // The keys the query at position `query` should attend to, ascending: empty for the S-1
  // queries that predict cells of s_0; for a query predicting cell i of state t >= 1, the
  // distinct cells (t-1)*S + ((i+d) mod S), |d| <= k(W-1)/2 (all S cells of s_{t-1} when the
  // window wraps the whole ring).
  std::vector<int> target_keys(int query) const {
    return frame_layout().target_keys(
        query,
        [&](int i, std::vector<char>& marked) {
          const int S = state_size_;
          if (2 * radius_ + 1 >= S) {
            marked.assign(marked.size(), 1);
            return;
          }
          const int r = static_cast<int>(radius_);
          for (int d = -r; d <= r; ++d) marked[static_cast<std::size_t>(((i + d) % S + S) % S)] = 1;
        },
        "CellularAutomaton");
  }

  // The frames' view (tasks/frames.hpp): the attention-bias intervention (§3.2) adds c times
  // attention_target() to the logits; dense, at S=512, T=16 it is 8191^2 floats (268 MB), and
  // target_keys() is the sparse form. The full loss starts at ln C (ln 4 = 1.386) and its plateau
  // ends when it falls below 1.3 (§3.3); the predictions of s_0 are noise.
  std::vector<float> attention_target() const {
    return frame_layout().attention_target([&](int query) { return target_keys(query); });
  }
  std::vector<float> full_loss_weights() const { return frame_layout().full_loss_weights(); }
  std::vector<float> predictable_loss_weights() const {
    return frame_layout().predictable_loss_weights();
  }
  std::vector<int> analysis_queries() const { return frame_layout().analysis_queries(); }
  std::pair<int, int> analysis_key_range(int query) const {
    return frame_layout().analysis_key_range(query, "CellularAutomaton");
  }

  // The minimum full-sequence loss if every prediction of states 1 .. T-1 were certain:
  // (S-1)/(S*T-1) * ln C, the S-1 predictions of s_0 being uniform over C colours. The true floor
  // is a bit higher: the rule must first be identified from context, so the first cells of s_1
  // (and, if the model does not memorise the pool, any window pattern not yet seen in the
  // sequence) are predicted with some uncertainty.
  double loss_floor() const {
    return static_cast<double>(state_size_ - 1) / static_cast<double>(length()) *
           std::log(static_cast<double>(colours_));
  }

 private:
  // C^W, or 0 if it exceeds kMaxTableSize.
  static std::int64_t checked_table_size(int C, int W) {
    std::int64_t size = 1;
    for (int w = 0; w < W; ++w) {
      size *= C;
      if (size > kMaxTableSize) return 0;
    }
    return size;
  }

  int draw_rule(const PhiloxStream& stream, int b) const {
    return static_cast<int>(
        stream.below(static_cast<std::uint64_t>(b) << 30, static_cast<std::uint32_t>(rules_)));
  }

  // Entry e of table r is below(r * C^W + e, C) on stream "rules" of task_seed: every entry
  // uniform in [0, C), so each table is uniform over all C^(C^W) tables, and table r never
  // depends on N.
  void draw_rules(std::uint64_t task_seed) {
    const PhiloxStream stream(task_seed, stream_id_from_name("rules"));
    const std::size_t size = static_cast<std::size_t>(table_size_);
    tables_.assign(static_cast<std::size_t>(rules_), std::vector<int>(size));
    for (std::size_t r = 0; r < tables_.size(); ++r) {
      for (std::size_t e = 0; e < size; ++e) {
        tables_[r][e] =
            static_cast<int>(stream.below(r * size + e, static_cast<std::uint32_t>(colours_)));
      }
    }
  }

  int state_size_;
  int states_;
  int colours_;
  int window_;
  int depth_;
  int rules_;
  std::int64_t table_size_ = 0;
  std::int64_t radius_ = 0;
  std::vector<std::vector<int>> tables_;
};

}  // namespace emergent
