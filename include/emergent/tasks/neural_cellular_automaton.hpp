// Neural cellular automaton ("nca") sequences: pre-pretraining data after Lee et al., "NCA
// pre-pretraining" (arXiv 2603.10055), at a size a CPU model can learn. Every SEQUENCE has its own
// random rule, a tiny neural network, so the model has to infer the rule in context (unlike
// tasks/cellular_automaton.hpp, whose rules come from a fixed pool). The reference's public JAX
// port uses a 12x12 grid, 2x2 patches, 10 colours (vocabulary 10^4 + 2), sequences of 1,024 tokens
// and keeps rules whose gzip compression ratio lies in [0.5, 1.0]; the defaults here are 8x8, 2x2
// patches, 2 colours (vocabulary 16), 4 frames (64 tokens). Where the reference is not known to us
// the choice below is marked "our choice".
//
// Grid: G x G cells, each one of C colours, periodic boundary (row and column indices mod G).
//
// Rule (per sequence): a one-hidden-layer network applied at every cell.
//   x      = one-hot of the C colours of the 3x3 neighbourhood, 9*C values; neighbour n = 3*(dr+1)
//            + (dc+1) for dr, dc in {-1, 0, 1} (row-major, the cell itself is n = 4), and
//            x[n*C + colour of neighbour n] = 1
//   h      = relu(W1 x + b1)                 W1 [hidden, 9C], b1 [hidden]
//   logits = W2 h + b2                       W2 [C, hidden],  b2 [C]
//   next   = argmax logits, ties to the lowest colour
// Every weight and bias ~ N(0, 1) (our choice; the reference's initialisation is unknown to us).
// Arithmetic is in double, summed in the order written above (W1 x is the sum of the 9 selected
// columns in neighbour order), so that an argmax tie can only flip where two logits agree to
// rounding.
//
// Tokens: a frame is cut into (G/P)^2 non-overlapping P x P patches, in row-major patch order; the
// token of a patch is sum_k colour_k * C^k over its cells k = 0 .. P*P-1 in row-major order within
// the patch (the top-left cell is the least significant digit). vocab = C^(P*P) <= 4096. No
// separators or BOS (the reference's two extra tokens are left out: our choice).
//   tokens  = frame_0 patches, frame_1 patches, ..., frame_{F-1} patches     F*(G/P)^2 tokens
//   inputs  = tokens[0 .. n-2],  targets = tokens[1 .. n-1]                  length() = n-1
// frame_0 is uniform random (each cell uniform in [0, C)); frame_{f+1} = rule(frame_f).
//
// Complexity filter (the reference's gzip filter; the measure itself is our choice): from the
// sequence's own frame_0 the candidate rule is run for K = max(F, 16) frames (frame_0 included),
// the K*G*G cells are written one byte per cell (frame, row, column order) and deflated with zlib
// (compress2, level 9). complexity = that compressed size / R, where R is the mean compressed size
// of 4 uniformly random trajectories of the same K*G*G cells and C colours (drawn once per task
// from a fixed stream, so R depends only on G, C and K). Why normalised rather than compressed /
// raw bytes: with one byte per cell and few colours, even noise compresses to about log2(C)/8 of
// its bytes (plus zlib's header and Huffman tables, which dominate at 1 KB), so the raw ratio's
// scale would depend on C and the grid size; bit packing instead would hide cell-aligned repeats
// (a shift by one cell is not byte-aligned) from zlib's matcher. Normalised, complexity is about 1
// for noise and falls towards 1/K for a rule that freezes after frame_0 (frame_0 is always noise),
// whatever C and G. K >= 16 because 4 frames of 8x8 are too few bytes for deflate to tell
// patterns from noise. A rule is kept when min_complexity <= complexity <= max_complexity
// (defaults 0.5 and 1.0, the reference's numbers on our scale: they drop rules that die out or
// freeze into a fixed or short-period pattern, and rules that look noisier than noise, which at
// the defaults none of the 1,000 below did).
//
// Measured over 1,000 rules (data_seed 0, step 0, sequences 0 .. 999, attempt 0) at the defaults
// (G=8, P=2, C=2, F=4, hidden=16, so K=16 and R = 210.8 bytes for 1,024 cells): complexity
// quantiles 10% 0.20, 25% 0.23, 50% 0.39, 75% 0.68, 90% 0.84, max 0.98; 41.2% of rules lie in
// [0.5, 1.0] (the rest below: 0.1 .. 0.3 are rules that freeze within a few frames), so a sequence
// takes 2.4 candidates on average and all 256 fail with probability 0.588^256 < 1e-58. Uniform
// noise trajectories score 0.98 .. 1.03 (5% .. 95%). With K = F = 4 the share would be 86.9%,
// and with K = 8 58%: short trajectories cannot tell a rule that freezes at frame 3 from one that
// keeps moving. Cost at the defaults: about 140 us per candidate, 20 ms per batch of 64 (one core,
// -O3 -march=native, on the 2-core development machine).
//
// Rejection sampling: candidates attempt = 0, 1, ..., 255 (kMaxAttempts); the first one within the
// band is the sequence's rule. If none is, sample() throws an Error naming min_complexity and
// max_complexity (the band accepts too few rules); it never loops forever.
//
// Random layout, all from Philox (core/philox.hpp), key = data_seed:
//   frame_0 cell i of sequence b   below((b << 32) + i, C)          stream id = step
//   weight w of candidate a of b   normal((b << 32) + (a << 24) + w) stream id =
//                                  stream_id_from_name("nca-rule") ^ step
// with w running over W1 (row-major), b1, W2 (row-major), b2; hidden <= 256 and C <= 256 keep
// the weight count below 2^24 and a < 256 keeps the candidates of b below 2^32. Every index depends
// only on (b, a, i or w), so sequence b of step t is a pure function of (data_seed, t, b), never of
// batch size or thread count. One caveat: acceptance depends on zlib's compressed sizes, and the
// deflate format does not fix them: another implementation (zlib-ng, say) can compress to other
// sizes and so accept another candidate. The numbers here are with zlib 1.2.13.
//
// Attention target: the query at position p predicts token p+1. If token p+1 is patch q of frame
// f >= 1, its keys are the positions of frame f-1's patches that contain a cell of the 3x3
// neighbourhood of one of q's cells (periodic): the patches the next state of q depends on, i.e.
// the 3x3 block of patches around q (fewer when G/P < 3). Rows of queries predicting frame_0 are 0.
// The analysed key range of such a query is the whole previous frame (our choice, as the
// automaton's).
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/frames.hpp>
#include <emergent/tasks/task.hpp>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

class NeuralCellularAutomaton {
 public:
  static constexpr int kMaxVocab = 4096;
  static constexpr int kMaxColours = 256;  // one byte per cell in the complexity filter
  static constexpr int kMaxHidden = 256;
  static constexpr int kMaxAttempts = 256;
  static constexpr int kMinFilterFrames = 16;
  static constexpr int kReferenceTrajectories = 4;

  // One rule's weights, row-major as in the opening comment.
  struct Rule {
    int colours = 2;
    int hidden = 1;
    std::vector<double> w1;  // [hidden, 9*colours]
    std::vector<double> b1;  // [hidden]
    std::vector<double> w2;  // [colours, hidden]
    std::vector<double> b2;  // [colours]
  };

  NeuralCellularAutomaton(int grid = 8, int patch = 2, int colours = 2, int frames = 4,
                          int hidden = 16, double min_complexity = 0.5, double max_complexity = 1.0)
      : grid_(grid),
        patch_(patch),
        colours_(colours),
        frames_(frames),
        hidden_(hidden),
        min_complexity_(min_complexity),
        max_complexity_(max_complexity) {
    require(grid >= 1 && grid <= 1024, "NeuralCellularAutomaton grid",
            "grid side G must be in [1, 1024], got " + std::to_string(grid));
    require(patch >= 1 && patch <= grid, "NeuralCellularAutomaton patch",
            "patch side P must be in [1, G=" + std::to_string(grid) + "], got " +
                std::to_string(patch));
    require(grid % patch == 0, "NeuralCellularAutomaton patch",
            "patch side P=" + std::to_string(patch) +
                " must divide grid side G=" + std::to_string(grid));
    require(colours >= 2 && colours <= kMaxColours, "NeuralCellularAutomaton colours",
            "colours C must be in [2, " + std::to_string(kMaxColours) + "], got " +
                std::to_string(colours));
    vocab_ = checked_vocab(colours, patch);
    require(vocab_ > 0, "NeuralCellularAutomaton colours",
            "vocabulary C^(P*P) (C=" + std::to_string(colours) + ", P=" + std::to_string(patch) +
                ") must be at most " + std::to_string(kMaxVocab));
    require(frames >= 2, "NeuralCellularAutomaton frames",
            "frames F must be >= 2, got " + std::to_string(frames));
    require(hidden >= 1 && hidden <= kMaxHidden, "NeuralCellularAutomaton hidden",
            "hidden width must be in [1, " + std::to_string(kMaxHidden) + "], got " +
                std::to_string(hidden));
    require(std::isfinite(min_complexity) && std::isfinite(max_complexity) &&
                min_complexity <= max_complexity,
            "NeuralCellularAutomaton min_complexity",
            "must be finite and <= max_complexity, got [" + std::to_string(min_complexity) + ", " +
                std::to_string(max_complexity) + "]");
    patches_ = (grid / patch) * (grid / patch);
    const std::int64_t tokens = static_cast<std::int64_t>(frames) * patches_;
    require(tokens >= 2 && tokens <= static_cast<std::int64_t>(limits::kPositions),
            "NeuralCellularAutomaton frames",
            "tokens per sequence F*(G/P)^2 = " + std::to_string(tokens) +
                " must be in [2, 2^20] (length() >= 1)");
    filter_frames_ = std::max(frames, kMinFilterFrames);
    reference_size_ = random_reference_size(grid, colours, filter_frames_);
  }

  // The declaration (tasks/task.hpp). The learnable predictions are those of frames 1 .. F-1
  // ("next_frame"); chance is ln V (V = vocab). The population marginal of their tokens is close
  // to uniform (measured at the defaults: 0.99 ln V), but counting the tokens of the sequence so
  // far already helps (the plug-in entropy of each sequence's own next-frame tokens: 0.81 ln V).
  // Thresholds on next_frame_loss (our choice): emergence < 0.75 ln V, below what token counts
  // alone give, so that leaving the plateau means reading the neighbourhood; midpoint
  // < 0.5 ln V; solved < 0.05 (as the other tasks; a rule seen for F-1 transitions is not always
  // identifiable, so many runs will not reach it).
  static constexpr const char* task_name = "nca";
  static std::vector<Parameter> parameters() {
    return {integer("grid", 8, between(1, 1024), "grid side G: a frame has G x G cells"),
            integer("patch", 2, between(1, 1024), "patch side P (divides G): one token per P x P"),
            integer("colours", 2, between(2, kMaxColours), "colours C; vocab C^(P*P) <= 4096"),
            integer("frames", 4, between(2, limits::kPositions),
                    "frames F per sequence: F*(G/P)^2 tokens"),
            integer("hidden", 16, between(1, kMaxHidden), "hidden width of the rule network"),
            real("min_complexity", 0.5, between(0, 100),
                 "keep rules whose compressed trajectory / noise's is >= this"),
            real("max_complexity", 1.0, between(0, 100),
                 "keep rules whose compressed trajectory / noise's is <= this")};
  }
  static Shape default_shape() {
    return {.vocab = 0, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 0};
  }
  static TaskSetup setup(const ParameterValues& v) {
    NeuralCellularAutomaton task(int(v.integer("grid")), int(v.integer("patch")),
                                 int(v.integer("colours")), int(v.integer("frames")),
                                 int(v.integer("hidden")), v.real("min_complexity"),
                                 v.real("max_complexity"));
    const double chance = std::log(double(task.vocab()));
    return {std::make_unique<TaskAdapter<NeuralCellularAutomaton>>(std::move(task)),
            "next_frame",
            {"next_frame_loss", 0.75 * chance, 0.5 * chance, 0.05}};
  }

  int vocab() const { return vocab_; }
  int grid() const { return grid_; }
  int patch() const { return patch_; }
  int colours() const { return colours_; }
  int frames() const { return frames_; }
  int hidden() const { return hidden_; }
  double min_complexity() const { return min_complexity_; }
  double max_complexity() const { return max_complexity_; }
  // (G/P)^2, the tokens of one frame.
  int patches_per_frame() const { return patches_; }
  FrameLayout frame_layout() const { return {patches_, frames_}; }
  int length() const { return frame_layout().length(); }
  // K = max(F, 16): the frames the complexity filter runs a candidate for.
  int filter_frames() const { return filter_frames_; }
  // R: the mean compressed size of uniformly random trajectories of K*G*G cells.
  double reference_size() const { return reference_size_; }

  // The next frame of `frame` (G*G colours, row-major) under `rule`, periodic boundary.
  // Validates its arguments, so it is meant for tests and tools.
  static std::vector<int> next_frame(const std::vector<int>& frame, int grid, const Rule& rule) {
    check_rule(rule, "NeuralCellularAutomaton::next_frame");
    check_frame(frame, grid, rule.colours, "NeuralCellularAutomaton::next_frame");
    std::vector<int> next(frame.size());
    std::vector<double> scratch;
    advance(frame.data(), next.data(), grid, rule, scratch);
    return next;
  }

  // The tokens of one frame (G*G colours, row-major): (G/P)^2 patch tokens, row-major patches.
  static std::vector<int> frame_tokens(const std::vector<int>& frame, int grid, int patch,
                                       int colours) {
    require(patch >= 1 && grid >= patch && grid % patch == 0,
            "NeuralCellularAutomaton::frame_tokens patch",
            "patch side P=" + std::to_string(patch) +
                " must divide grid side G=" + std::to_string(grid));
    require(checked_vocab(colours, patch) > 0, "NeuralCellularAutomaton::frame_tokens colours",
            "C^(P*P) must be in [2, " + std::to_string(kMaxVocab) + "]");
    check_frame(frame, grid, colours, "NeuralCellularAutomaton::frame_tokens");
    std::vector<int> tokens(static_cast<std::size_t>((grid / patch) * (grid / patch)));
    tokenise(frame.data(), tokens.data(), grid, patch, colours);
    return tokens;
  }

  // The deflated size in bytes of `bytes` (zlib compress2, level 9).
  static std::size_t deflated_size(std::span<const std::uint8_t> bytes) {
    uLongf size = compressBound(static_cast<uLong>(bytes.size()));
    std::vector<Bytef> out(size);
    const int status = compress2(out.data(), &size, bytes.data(), static_cast<uLong>(bytes.size()),
                                 Z_BEST_COMPRESSION);
    require(status == Z_OK, "NeuralCellularAutomaton zlib",
            "compress2 failed with status " + std::to_string(status));
    return static_cast<std::size_t>(size);
  }

  // R for G, C, K: the mean deflated size of kReferenceTrajectories uniformly random trajectories
  // of K*G*G cells (trajectory r, cell i: below(r * K*G*G + i, C) on stream "nca-reference" of
  // seed 0).
  static double random_reference_size(int grid, int colours, int frames) {
    const PhiloxStream stream(0, stream_id_from_name("nca-reference"));
    const std::size_t cells = static_cast<std::size_t>(frames) * static_cast<std::size_t>(grid) *
                              static_cast<std::size_t>(grid);
    std::vector<std::uint8_t> bytes(cells);
    double total = 0.0;
    for (int r = 0; r < kReferenceTrajectories; ++r) {
      for (std::size_t i = 0; i < cells; ++i) {
        bytes[i] = static_cast<std::uint8_t>(stream.below(static_cast<std::uint64_t>(r) * cells + i,
                                                          static_cast<std::uint32_t>(colours)));
      }
      total += static_cast<double>(deflated_size(bytes));
    }
    return total / kReferenceTrajectories;
  }

  // The complexity of `rule` run from `initial` (G*G colours): the deflated size of its K-frame
  // trajectory over reference_size().
  double complexity(const Rule& rule, const std::vector<int>& initial) const {
    check_rule(rule, "NeuralCellularAutomaton::complexity");
    require(
        rule.colours == colours_, "NeuralCellularAutomaton::complexity rule",
        "has " + std::to_string(rule.colours) + " colours, the task " + std::to_string(colours_));
    check_frame(initial, grid_, colours_, "NeuralCellularAutomaton::complexity");
    std::vector<int> cells(static_cast<std::size_t>(filter_frames_) * initial.size());
    std::vector<std::uint8_t> bytes;
    std::vector<double> scratch;
    std::copy(initial.begin(), initial.end(), cells.begin());
    return trajectory_complexity(rule, cells, bytes, scratch);
  }

  // frame_0 of sequence b of step `step`: G*G colours, row-major.
  std::vector<int> initial_frame(std::uint64_t data_seed, std::uint64_t step, int b) const {
    require(b >= 0, "NeuralCellularAutomaton::initial_frame b",
            "must be >= 0, got " + std::to_string(b));
    std::vector<int> frame(static_cast<std::size_t>(grid_) * static_cast<std::size_t>(grid_));
    draw_initial(PhiloxStream(data_seed, step), b, frame.data());
    return frame;
  }

  // Candidate `attempt` of sequence b of step `step` (accepted or not).
  Rule candidate_rule(std::uint64_t data_seed, std::uint64_t step, int b, int attempt) const {
    require(b >= 0, "NeuralCellularAutomaton::candidate_rule b",
            "must be >= 0, got " + std::to_string(b));
    require(attempt >= 0 && attempt < kMaxAttempts, "NeuralCellularAutomaton::candidate_rule",
            "attempt must be in [0, " + std::to_string(kMaxAttempts) + "), got " +
                std::to_string(attempt));
    Rule rule;
    draw_rule(rule_stream(data_seed, step), b, attempt, rule);
    return rule;
  }

  // The attempt whose candidate is sequence b's rule (the first within the band); throws the
  // band's Error if none of kMaxAttempts is.
  int accepted_attempt(std::uint64_t data_seed, std::uint64_t step, int b) const {
    require(b >= 0, "NeuralCellularAutomaton::accepted_attempt b",
            "must be >= 0, got " + std::to_string(b));
    Scratch s(*this);
    return generate(PhiloxStream(data_seed, step), rule_stream(data_seed, step), b, s);
  }

  // Fills inputs and targets, each [batch, length()] row-major, with fresh sequences of step
  // `step` (layout in the opening comment).
  void sample(std::uint64_t data_seed, std::uint64_t step, int batch,
              std::span<std::int32_t> inputs, std::span<std::int32_t> targets) const {
    require(batch >= 0, "NeuralCellularAutomaton::sample batch",
            "must be >= 0, got " + std::to_string(batch));
    const std::size_t L = static_cast<std::size_t>(length());
    const std::size_t expected = static_cast<std::size_t>(batch) * L;
    require(inputs.size() == expected, "NeuralCellularAutomaton::sample inputs",
            "size " + std::to_string(inputs.size()) +
                ", expected batch*length = " + std::to_string(expected));
    require(targets.size() == expected, "NeuralCellularAutomaton::sample targets",
            "size " + std::to_string(targets.size()) +
                ", expected batch*length = " + std::to_string(expected));
    const PhiloxStream grids(data_seed, step);
    const PhiloxStream rules = rule_stream(data_seed, step);
    Scratch s(*this);
    const std::size_t cells = static_cast<std::size_t>(grid_) * static_cast<std::size_t>(grid_);
    const std::size_t N = static_cast<std::size_t>(patches_);
    std::vector<int> tokens(static_cast<std::size_t>(frames_) * N);
    for (int b = 0; b < batch; ++b) {
      generate(grids, rules, b, s);
      for (std::size_t f = 0; f < static_cast<std::size_t>(frames_); ++f) {
        tokenise(s.cells.data() + f * cells, tokens.data() + f * N, grid_, patch_, colours_);
      }
      const std::size_t row = static_cast<std::size_t>(b) * L;
      for (std::size_t p = 0; p < L; ++p) {
        inputs[row + p] = static_cast<std::int32_t>(tokens[p]);
        targets[row + p] = static_cast<std::int32_t>(tokens[p + 1]);
      }
    }
  }

  // The keys the query at position `query` should attend to, ascending: empty for the N-1 queries
  // predicting frame_0 (N = patches per frame); for the query predicting patch q of frame f >= 1,
  // the positions (f-1)*N + q' of the patches q' of frame f-1 that hold a cell of the 3x3
  // neighbourhood of a cell of q.
  std::vector<int> target_keys(int query) const {
    return frame_layout().target_keys(
        query,
        [&](int q, std::vector<char>& marked) {
          const int side = grid_ / patch_;
          const int qr = q / side, qc = q % side;
          // Rows qr*P - 1 .. qr*P + P (mod G), likewise columns: their patches.
          for (int r = qr * patch_ - 1; r <= qr * patch_ + patch_; ++r) {
            for (int c = qc * patch_ - 1; c <= qc * patch_ + patch_; ++c) {
              const int pr = wrap(r, grid_) / patch_, pc = wrap(c, grid_) / patch_;
              marked[static_cast<std::size_t>(pr * side + pc)] = 1;
            }
          }
        },
        "NeuralCellularAutomaton");
  }

  // The frames' view (tasks/frames.hpp): the previous frame's neighbouring patches as the target,
  // every position in the loss, the predictions of frames 1 .. F-1 learnable.
  std::vector<float> attention_target() const {
    return frame_layout().attention_target([&](int query) { return target_keys(query); });
  }
  std::vector<float> full_loss_weights() const { return frame_layout().full_loss_weights(); }
  std::vector<float> predictable_loss_weights() const {
    return frame_layout().predictable_loss_weights();
  }
  std::vector<int> analysis_queries() const { return frame_layout().analysis_queries(); }
  std::pair<int, int> analysis_key_range(int query) const {
    return frame_layout().analysis_key_range(query, "NeuralCellularAutomaton");
  }

 private:
  // Buffers reused across the sequences of one sample() call.
  struct Scratch {
    explicit Scratch(const NeuralCellularAutomaton& task)
        : cells(static_cast<std::size_t>(task.filter_frames_) *
                static_cast<std::size_t>(task.grid_) * static_cast<std::size_t>(task.grid_)) {}
    std::vector<int> cells;  // K frames
    std::vector<std::uint8_t> bytes;
    std::vector<double> hidden;
    Rule rule;
  };

  static int wrap(int i, int n) { return ((i % n) + n) % n; }

  // C^(P*P), or 0 if it exceeds kMaxVocab.
  static int checked_vocab(int C, int P) {
    if (C < 2 || P < 1) return 0;
    std::int64_t v = 1;
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(P) * P; ++k) {
      v *= C;
      if (v > kMaxVocab) return 0;
    }
    return static_cast<int>(v);
  }

  static void check_rule(const Rule& rule, const std::string& where) {
    require(
        rule.colours >= 2 && rule.colours <= kMaxColours, where + " rule.colours",
        "must be in [2, " + std::to_string(kMaxColours) + "], got " + std::to_string(rule.colours));
    require(rule.hidden >= 1, where + " rule.hidden",
            "must be >= 1, got " + std::to_string(rule.hidden));
    const std::size_t C = static_cast<std::size_t>(rule.colours);
    const std::size_t H = static_cast<std::size_t>(rule.hidden);
    require(rule.w1.size() == H * 9 * C && rule.b1.size() == H && rule.w2.size() == C * H &&
                rule.b2.size() == C,
            where + " rule",
            "weights must be W1 [hidden, 9C], b1 [hidden], W2 [C, hidden], b2 [C]");
  }

  static void check_frame(const std::vector<int>& frame, int grid, int C,
                          const std::string& where) {
    require(
        grid >= 1 &&
            frame.size() == static_cast<std::size_t>(grid) * static_cast<std::size_t>(grid),
        where + " frame",
        "size " + std::to_string(frame.size()) + ", expected G*G with G=" + std::to_string(grid));
    for (int cell : frame) {
      require(cell >= 0 && cell < C, where + " frame",
              "cell colour " + std::to_string(cell) + " outside [0, C)");
    }
  }

  // One step on raw G*G arrays, no validation. `scratch` receives W1 transposed ([9C, hidden],
  // so that the loop over hidden units is contiguous) and the hidden activations; each hidden
  // unit still sums its 9 selected weights in neighbour order, then adds b1.
  static void advance(const int* from, int* to, int G, const Rule& rule,
                      std::vector<double>& scratch) {
    const std::size_t C = static_cast<std::size_t>(rule.colours);
    const std::size_t H = static_cast<std::size_t>(rule.hidden);
    const std::size_t inputs = 9 * C;
    scratch.resize(inputs * H + H);
    double* w1t = scratch.data();
    double* hidden = scratch.data() + inputs * H;
    for (std::size_t j = 0; j < H; ++j) {
      for (std::size_t i = 0; i < inputs; ++i) w1t[i * H + j] = rule.w1[j * inputs + i];
    }
    for (int r = 0; r < G; ++r) {
      const int rows[3] = {wrap(r - 1, G) * G, r * G, wrap(r + 1, G) * G};
      for (int c = 0; c < G; ++c) {
        const int columns[3] = {wrap(c - 1, G), c, wrap(c + 1, G)};
        std::fill(hidden, hidden + H, 0.0);
        for (std::size_t n = 0; n < 9; ++n) {
          const std::size_t colour = static_cast<std::size_t>(from[rows[n / 3] + columns[n % 3]]);
          const double* column = w1t + (n * C + colour) * H;
          for (std::size_t j = 0; j < H; ++j) hidden[j] += column[j];
        }
        for (std::size_t j = 0; j < H; ++j) {
          const double pre = hidden[j] + rule.b1[j];
          hidden[j] = pre > 0.0 ? pre : 0.0;
        }
        int best = 0;
        double best_logit = 0.0;
        for (std::size_t k = 0; k < C; ++k) {
          const double* w = rule.w2.data() + k * H;
          double logit = 0.0;
          for (std::size_t j = 0; j < H; ++j) logit += w[j] * hidden[j];
          logit += rule.b2[k];
          if (k == 0 || logit > best_logit) {
            best = static_cast<int>(k);
            best_logit = logit;
          }
        }
        to[r * G + c] = best;
      }
    }
  }

  static void tokenise(const int* frame, int* tokens, int G, int P, int C) {
    const int side = G / P;
    for (int pr = 0; pr < side; ++pr) {
      for (int pc = 0; pc < side; ++pc) {
        int token = 0, digit = 1;
        for (int i = 0; i < P; ++i) {
          for (int j = 0; j < P; ++j) {
            token += frame[(pr * P + i) * G + pc * P + j] * digit;
            digit *= C;
          }
        }
        tokens[pr * side + pc] = token;
      }
    }
  }

  static PhiloxStream rule_stream(std::uint64_t data_seed, std::uint64_t step) {
    return PhiloxStream(data_seed, stream_id_from_name("nca-rule") ^ step);
  }

  void draw_initial(const PhiloxStream& stream, int b, int* frame) const {
    const std::uint64_t base = static_cast<std::uint64_t>(b) << 32;
    const std::size_t cells = static_cast<std::size_t>(grid_) * static_cast<std::size_t>(grid_);
    for (std::size_t i = 0; i < cells; ++i) {
      frame[i] = static_cast<int>(stream.below(base + i, static_cast<std::uint32_t>(colours_)));
    }
  }

  void draw_rule(const PhiloxStream& stream, int b, int attempt, Rule& rule) const {
    const std::size_t C = static_cast<std::size_t>(colours_);
    const std::size_t H = static_cast<std::size_t>(hidden_);
    rule.colours = colours_;
    rule.hidden = hidden_;
    rule.w1.resize(H * 9 * C);
    rule.b1.resize(H);
    rule.w2.resize(C * H);
    rule.b2.resize(C);
    std::uint64_t index =
        (static_cast<std::uint64_t>(b) << 32) + (static_cast<std::uint64_t>(attempt) << 24);
    for (std::vector<double>* part : {&rule.w1, &rule.b1, &rule.w2, &rule.b2}) {
      for (double& w : *part) w = stream.normal(index++);
    }
  }

  // Runs `rule` from cells[0 .. G*G) (frame_0, already there) for K frames into `cells` and
  // returns the deflated size of the trajectory over R.
  double trajectory_complexity(const Rule& rule, std::vector<int>& cells,
                               std::vector<std::uint8_t>& bytes,
                               std::vector<double>& hidden) const {
    const std::size_t frame = static_cast<std::size_t>(grid_) * static_cast<std::size_t>(grid_);
    for (std::size_t f = 1; f < static_cast<std::size_t>(filter_frames_); ++f) {
      advance(cells.data() + (f - 1) * frame, cells.data() + f * frame, grid_, rule, hidden);
    }
    bytes.resize(cells.size());
    for (std::size_t i = 0; i < cells.size(); ++i) bytes[i] = static_cast<std::uint8_t>(cells[i]);
    return static_cast<double>(deflated_size(bytes)) / reference_size_;
  }

  // Sequence b into s.cells (its K-frame trajectory; the first F frames are the sequence) and
  // s.rule; returns the accepted attempt.
  int generate(const PhiloxStream& grids, const PhiloxStream& rules, int b, Scratch& s) const {
    draw_initial(grids, b, s.cells.data());
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      draw_rule(rules, b, attempt, s.rule);
      const double ratio = trajectory_complexity(s.rule, s.cells, s.bytes, s.hidden);
      if (ratio >= min_complexity_ && ratio <= max_complexity_) return attempt;
    }
    throw Error("NeuralCellularAutomaton min_complexity, max_complexity: none of " +
                std::to_string(kMaxAttempts) + " candidate rules of sequence " + std::to_string(b) +
                " has complexity in [" + std::to_string(min_complexity_) + ", " +
                std::to_string(max_complexity_) +
                "]: the bounds accept too few rules (defaults 0.5 and 1.0)");
  }

  int grid_;
  int patch_;
  int colours_;
  int frames_;
  int hidden_;
  double min_complexity_;
  double max_complexity_;
  int vocab_ = 0;
  int patches_ = 0;
  int filter_frames_ = 0;
  double reference_size_ = 0.0;
};

}  // namespace emergent
