// ListOps of the Long Range Arena (Tay et al. 2021; lra_benchmarks/data/listops.py), the
// classification task of "Towards Understanding Self-Pretraining for Sequence Classification"
// and of Amos et al. 2024 (docs/paper-notes.md §7).
//
// A random expression tree of the operators MIN, MAX, MED (median of the arguments, the mean of
// the two middle values truncated for an even count, as int(np.median)) and SM (sum mod 10) over
// the digits 0-9; the label is its value, 0-9. LRA's sampler, node by node, from depth 1 at the
// root:
//   below max_depth, with probability 0.25 the node is an operator (uniform of the 4) with
//   2..max_args children (uniform, inclusive), else a digit (uniform 0..9); at max_depth it is a
//   digit. A tree is kept when min_length < length < max_length (strict, as LRA), its length
//   counting operators, closing brackets and digits.
// Tokens are LRA's model-side ones after its bracket fix: "[MIN 8 2 [MIN 8 6 ] ]" (the
// serialisation's parentheses dropped, the closing bracket a token of its own), with two special
// tokens first: <pad> = 0 and <mask> = 1 (for masked reconstruction).
//
// Example i of a split is a pure function of (data_seed, split, i): its trees are drawn from the
// Philox stream of that example, one after another, until one is kept. LRA deduplicates its
// 100,000 trees; here the train and test splits are different streams and not deduplicated
// (at lengths above ~50 a repeat is vanishingly rare; at very short lengths repeats occur).
// A tree that grows past max_length is abandoned as soon as it does: the kept trees have
// exactly LRA's distribution.
#pragma once

#include <algorithm>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/settings/parameters.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace emergent {

namespace listops {

enum Token : std::int32_t {
  pad = 0,
  mask = 1,
  op_min = 2,
  op_max = 3,
  op_median = 4,
  op_sum_mod = 5,
  close = 6,
  digit_0 = 7,  // digits 0..9 are 7..16
};
inline constexpr int kVocab = 17;
inline constexpr int kClasses = 10;
inline constexpr int kOperators = 4;
inline constexpr double kOperatorProbability = 0.25;  // LRA's VALUE_P

inline bool is_operator(std::int32_t t) { return t >= op_min && t <= op_sum_mod; }
inline bool is_digit(std::int32_t t) { return t >= digit_0 && t < digit_0 + 10; }

// The LRA spelling of a token ("[MIN", "]", "7"); <pad> and <mask> as such.
inline std::string_view spelling(std::int32_t t) {
  static constexpr std::string_view names[kVocab] = {
      "<pad>", "<mask>", "[MIN", "[MAX", "[MED", "[SM", "]", "0", "1",
      "2",     "3",      "4",    "5",    "6",    "7",   "8", "9"};
  require(t >= 0 && t < kVocab, "listops token", "id " + std::to_string(t) + " is not in 0..16");
  return names[t];
}

// Tokens separated by single spaces, as LRA's input pipeline reads them.
inline std::string to_text(const std::vector<std::int32_t>& tokens) {
  std::string text;
  for (std::int32_t t : tokens) (text += text.empty() ? "" : " ") += spelling(t);
  return text;
}

// The inverse of to_text; "]" and LRA's "X" both close. Unknown words are refused by name.
inline std::vector<std::int32_t> from_text(std::string_view text) {
  std::vector<std::int32_t> tokens;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    const std::size_t end = std::min(text.find(' ', i), text.size());
    const std::string_view word = text.substr(i, end - i);
    std::int32_t id = -1;
    for (std::int32_t t = op_min; t < kVocab; ++t)
      if (spelling(t) == word) id = t;
    if (word == "X") id = close;
    require(id >= 0, "listops expression",
            "word '" + std::string(word) + "' is not one of [MIN [MAX [MED [SM ] X 0-9");
    tokens.push_back(id);
    i = end;
  }
  return tokens;
}

// The value of one operator over its arguments, as LRA's to_value computes it.
inline int apply(std::int32_t op, std::vector<int> args) {
  require(is_operator(op) && !args.empty(), "listops apply", "needs an operator and arguments");
  switch (op) {
    case op_min:
      return *std::min_element(args.begin(), args.end());
    case op_max:
      return *std::max_element(args.begin(), args.end());
    case op_median: {
      std::sort(args.begin(), args.end());
      const std::size_t n = args.size();
      // int(np.median): the middle value, or the mean of the two middle ones truncated (all are
      // non-negative, so truncation is the floor).
      return n % 2 == 1 ? args[n / 2] : (args[n / 2 - 1] + args[n / 2]) / 2;
    }
    default: {
      int sum = 0;
      for (int a : args) sum += a;
      return sum % 10;
    }
  }
}

// The value of a whole expression, 0..9. A malformed one (an unclosed list, a stray "]", an
// operator without arguments, tokens after the end) is refused with the position.
inline int evaluate(const std::vector<std::int32_t>& tokens) {
  struct Open {
    std::int32_t op;
    std::vector<int> args;
  };
  std::vector<Open> stack;
  int value = -1;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::int32_t t = tokens[i];
    const std::string where = "listops expression token " + std::to_string(i);
    require(value < 0, where, "comes after the end of the expression");
    int finished = -1;
    if (is_operator(t)) {
      stack.push_back({t, {}});
    } else if (is_digit(t)) {
      finished = t - digit_0;
    } else if (t == close) {
      require(!stack.empty(), where, "']' closes no open list");
      require(!stack.back().args.empty(), where, "closes a list without arguments");
      finished = apply(stack.back().op, stack.back().args);
      stack.pop_back();
    } else {
      throw Error(where + ": '" + std::string(spelling(t)) + "' is not part of an expression");
    }
    if (finished >= 0) {
      if (stack.empty())
        value = finished;
      else
        stack.back().args.push_back(finished);
    }
  }
  require(stack.empty() && value >= 0, "listops expression",
          stack.empty() ? "is empty" : "ends with an unclosed list");
  return value;
}

// LRA's serialisation of the tree (the Source column of its TSV files): each list a left-nested
// pair ((((op, a1), a2), ...), "]") printed as "( left right )", so "[MIN 8 2 ]" is
// "( ( ( [MIN 8 ) 2 ) ] )".
inline std::string to_lra_source(const std::vector<std::int32_t>& tokens) {
  evaluate(tokens);               // well formed, or refused with the position
  std::vector<std::string> open;  // per open list, its text so far
  std::string whole;
  for (std::int32_t t : tokens) {
    std::string finished;
    if (is_operator(t)) {
      open.emplace_back(spelling(t));
      continue;
    }
    if (is_digit(t)) {
      finished = std::string(spelling(t));
    } else {
      finished = "( " + open.back() + " ] )";
      open.pop_back();
    }
    if (open.empty())
      whole = finished;
    else
      open.back() = "( " + open.back() + " " + finished + " )";
  }
  return whole;
}

struct Example {
  std::vector<std::int32_t> tokens;
  int label = 0;
};

}  // namespace listops

class ListOps {
 public:
  enum class Split : std::uint64_t { train = 0, test = 1 };

  ListOps(int min_length, int max_length, int max_depth, int max_args)
      : min_length_(min_length),
        max_length_(max_length),
        max_depth_(max_depth),
        max_args_(max_args) {
    require(min_length >= 0, "listops min_length", "must be >= 0");
    require(max_length > min_length + 1, "listops max_length",
            "must exceed min_length + 1 (lengths are strictly between them)");
    require(max_depth >= 2, "listops max_depth", "must be >= 2 (depth 1 alone is a single digit)");
    require(max_args >= 2, "listops max_args", "must be >= 2");
  }

  // LRA's flags: min_length 500, max_length 2000, max_depth 10, max_args 10. Sweeps pick shorter
  // lengths (for example 100 to 500) for CPU-sized runs.
  static std::vector<Parameter> parameters() {
    return {integer("min_length", 500, between(0, limits::kPositions),
                    "kept trees are longer than this (strict, as LRA)"),
            integer("max_length", 2000, between(2, limits::kPositions),
                    "kept trees are shorter than this (strict, as LRA)"),
            integer("max_depth", 10, between(2, 1000), "operators occur at depths 1..max_depth-1"),
            integer("max_args", 10, between(2, 1000), "an operator has 2..max_args arguments")};
  }

  int min_length() const { return min_length_; }
  int max_length() const { return max_length_; }

  // Example `index` of `split`.
  listops::Example example(std::uint64_t data_seed, Split split, std::uint64_t index) const {
    const PhiloxStream stream(data_seed, (static_cast<std::uint64_t>(split) << 40) ^ index ^
                                             stream_id_from_name("listops.example"));
    std::uint64_t word = 0;
    listops::Example e;
    for (int attempt = 0;; ++attempt) {
      require(attempt < 1000000, "listops", "no tree within the length bounds after 10^6 tries");
      e.tokens.clear();
      const int value = grow(stream, word, 1, e.tokens);
      const int length = static_cast<int>(e.tokens.size());
      if (value >= 0 && length > min_length_ && length < max_length_) {
        e.label = value;
        return e;
      }
    }
  }

 private:
  // Appends one node's tokens; returns its value, or -1 once the tree is longer than allowed.
  int grow(const PhiloxStream& stream, std::uint64_t& word, int depth,
           std::vector<std::int32_t>& tokens) const {
    const bool leaf = depth >= max_depth_ || stream.uniform(word++) > listops::kOperatorProbability;
    if (leaf) {
      tokens.push_back(listops::digit_0 + static_cast<std::int32_t>(stream.u32(word++) % 10));
      return static_cast<int>(tokens.size()) < max_length_ ? tokens.back() - listops::digit_0 : -1;
    }
    const int args = 2 + static_cast<int>(stream.u32(word++) % (max_args_ - 1));
    const std::int32_t op =
        listops::op_min + static_cast<std::int32_t>(stream.u32(word++) % listops::kOperators);
    tokens.push_back(op);
    std::vector<int> values;
    for (int a = 0; a < args; ++a) {
      const int v = grow(stream, word, depth + 1, tokens);
      if (v < 0) return -1;
      values.push_back(v);
    }
    tokens.push_back(listops::close);
    if (static_cast<int>(tokens.size()) >= max_length_) return -1;
    return listops::apply(op, std::move(values));
  }

  int min_length_, max_length_, max_depth_, max_args_;
};

}  // namespace emergent
