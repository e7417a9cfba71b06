// Capability prompts for the Pythia analysis: a text whose next token is a known target.
//
// The paper publishes one prompt, for string repetition: "0 7 3 1 2 0 2 3 0 7 3 1 2 0 2" with
// target "3" (8 digits, repeated, the last to be predicted; arXiv 2606.25010 Fig. 1). Its other
// prompts are not public (docs/paper-notes.md §5), so the other kinds here are our
// choices, made in the same single-prompt style, each drawn from a seed:
//
//   repetition     n random digits, then the same digits again, the last one is the target:
//                  "0 7 3 1 2 0 2 3 0 7 3 1 2 0 2" -> " 3"   (seed 0 with n = 8 is the paper's)
//   induction      in-context repetition of n random common words:
//                  "river apple stone ... river apple" -> " stone"
//   pattern        a period-3 letter pattern continued: "c a f c a f c a" -> " f"
//   ioi            indirect object identification, a BABA template of Wang et al.:
//                  "Then, Mary and John went to the store. Mary gave a drink to" -> " John"
//
// Targets carry their leading space, as GPT-NeoX's tokenizer puts it on the word. The caller
// checks that the target is one token (capability_tokens).
#pragma once

#include <array>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/io/tokenizer.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace emergent {

struct CapabilityPrompt {
  std::string kind;    // repetition | induction | pattern | ioi | custom
  std::string text;    // the prompt
  std::string target;  // the expected next text, one token
};

inline constexpr std::array<std::string_view, 4> kCapabilityKinds = {"repetition", "induction",
                                                                     "pattern", "ioi"};

namespace capability_detail {

inline constexpr std::array<std::string_view, 24> kWords = {
    "apple", "river", "stone", "cloud", "paper", "green", "music", "table",
    "light", "horse", "water", "chair", "bread", "glass", "night", "money",
    "dream", "plant", "house", "sugar", "train", "smile", "field", "story"};
inline constexpr std::array<std::string_view, 8> kNames = {"John",  "Mary",  "Tom",  "Anna",
                                                           "David", "Sarah", "Paul", "Kate"};
inline constexpr std::array<std::string_view, 4> kPlaces = {"store", "park", "school", "market"};
inline constexpr std::array<std::string_view, 4> kObjects = {"drink", "book", "ring", "ball"};

// Draws k distinct indices below n from the stream (a partial Fisher-Yates shuffle).
inline std::vector<int> distinct(const PhiloxStream& stream, std::uint64_t& counter, int n, int k) {
  std::vector<int> pool(n);
  for (int i = 0; i < n; ++i) pool[i] = i;
  for (int i = 0; i < k; ++i)
    std::swap(pool[i], pool[i + static_cast<int>(stream.below(counter++, n - i))]);
  pool.resize(k);
  return pool;
}

}  // namespace capability_detail

// The paper's string-repetition prompt, exactly.
inline CapabilityPrompt paper_repetition_prompt() {
  return {"repetition", "0 7 3 1 2 0 2 3 0 7 3 1 2 0 2", " 3"};
}

// The lengths a kind takes: repetition 2-64 digits, induction 2-24 words (its word list),
// pattern 4-64 letters (at least one letter repeated, so that the period shows); ioi has none.
struct LengthRange {
  int low = 0, high = 0;  // high 0: the kind takes no length
};
inline LengthRange capability_lengths(std::string_view kind) {
  if (kind == "induction") return {2, static_cast<int>(capability_detail::kWords.size())};
  if (kind == "pattern") return {4, 64};
  if (kind == "ioi") return {};
  return {2, 64};
}

// An Error naming `where` if `kind` does not take `length` (never clamped: two lengths never
// give one prompt).
inline void require_capability_length(std::string_view kind, int length, const std::string& where) {
  const LengthRange r = capability_lengths(kind);
  require(r.high == 0 || (length >= r.low && length <= r.high), where,
          std::to_string(length) + " is not allowed for " + std::string(kind) +
              " prompts: expected a length in [" + std::to_string(r.low) + ", " +
              std::to_string(r.high) + "]");
}

// A prompt of `kind` from `seed`; `length` is the number of repeated items (digits, words) or the
// pattern's letters shown (capability_lengths); ioi takes none. repetition with seed 0 and
// length 8 is the paper's prompt.
inline CapabilityPrompt make_capability_prompt(std::string_view kind, std::uint64_t seed,
                                               int length = 8) {
  using namespace capability_detail;
  require_capability_length(kind, length, "capability prompt: length");
  const PhiloxStream stream(seed, stream_id_from_name("capability." + std::string(kind)));
  std::uint64_t counter = 0;
  CapabilityPrompt p;
  p.kind = std::string(kind);
  if (kind == "repetition") {
    if (seed == 0 && length == 8) return paper_repetition_prompt();
    std::vector<std::string> digits;
    for (int i = 0; i < length; ++i) digits.push_back(std::to_string(stream.below(counter++, 10)));
    for (int i = 0; i < 2 * length - 1; ++i) p.text += (i ? " " : "") + digits[i % length];
    p.target = " " + digits[length - 1];
  } else if (kind == "induction") {
    const std::vector<int> words =
        distinct(stream, counter, static_cast<int>(kWords.size()), length);
    const int n = static_cast<int>(words.size());
    for (int i = 0; i < 2 * n - 1; ++i)
      p.text += (i ? " " : "") + std::string(kWords[words[i % n]]);
    p.target = " " + std::string(kWords[words[n - 1]]);
  } else if (kind == "pattern") {
    const std::vector<int> letters = distinct(stream, counter, 26, 3);
    const int steps = length;
    auto letter = [&](int i) { return std::string(1, static_cast<char>('a' + letters[i % 3])); };
    for (int i = 0; i < steps; ++i) p.text += (i ? " " : "") + letter(i);
    p.target = " " + letter(steps);
  } else if (kind == "ioi") {
    const std::vector<int> names = distinct(stream, counter, static_cast<int>(kNames.size()), 2);
    const std::string a(kNames[names[0]]), b(kNames[names[1]]);
    const std::string place(kPlaces[stream.below(counter++, kPlaces.size())]);
    const std::string object(kObjects[stream.below(counter++, kObjects.size())]);
    p.text = "Then, " + b + " and " + a + " went to the " + place + ". " + b + " gave a " + object +
             " to";
    p.target = " " + a;
  } else {
    throw Error("capability prompt: unknown kind '" + std::string(kind) +
                "' (repetition, induction, pattern, ioi)");
  }
  return p;
}

struct CapabilityTokens {
  std::vector<std::int32_t> prompt;
  std::int32_t target = -1;
};

// Encodes a prompt; the target must be exactly one token. `where` starts the error message (a
// prompt set names the prompt there).
inline CapabilityTokens capability_tokens(const BpeTokenizer& tokenizer, const CapabilityPrompt& p,
                                          const std::string& where = "capability prompt") {
  CapabilityTokens t;
  t.prompt = tokenizer.encode(p.text);
  require(!t.prompt.empty(), where, "the prompt '" + p.text + "' encodes to no tokens");
  const std::vector<std::int32_t> target = tokenizer.encode(p.target);
  require(target.size() == 1, where,
          "the target '" + p.target + "' is " + std::to_string(target.size()) +
              " tokens under this tokenizer; it must be exactly one");
  t.target = target[0];
  return t;
}

}  // namespace emergent
