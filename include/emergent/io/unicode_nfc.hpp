// Unicode Normalization Form C (UAX #15): full canonical decomposition, canonical ordering of
// combining marks, then canonical composition. This is the `{"type": "NFC"}` normalizer of
// Hugging Face tokenizer.json files (GPT-NeoX-20B / Pythia), with its Unicode version: the data
// of io/unicode_nfc_tables.hpp is Unicode 9.0, as in `tokenizers`, so characters assigned later
// pass unchanged and count as combining class 0 (exactly what `tokenizers` does).
//
//   std::string n = emergent::unicode::nfc_utf8("e\u0301");   // "\u00e9"
//
// Input must be valid UTF-8 (the tokenizer checks before calling). Text made only of code points
// below U+0300 (ASCII, Latin-1, ...) is returned unchanged without decoding it twice.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <emergent/io/unicode_nfc_tables.hpp>
#include <emergent/io/utf8.hpp>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace emergent::unicode {

// Hangul syllables: S = 0xAC00 + (L * 21 + V) * 28 + T, with leading consonant L (U+1100 + L),
// vowel V (U+1161 + V) and optional trailing consonant T (U+11A7 + T, T > 0).
namespace hangul {
inline constexpr char32_t syllable_base = 0xAC00, leading_base = 0x1100, vowel_base = 0x1161,
                          trailing_base = 0x11A7;
inline constexpr char32_t leading_count = 19, vowel_count = 21, trailing_count = 28;
inline constexpr char32_t syllable_count = leading_count * vowel_count * trailing_count;

constexpr bool is_syllable(char32_t cp) { return cp - syllable_base < syllable_count; }
}  // namespace hangul

inline std::uint8_t combining_class(char32_t code_point) {
  if (code_point < first_code_point_nfc_may_change) return 0;
  const auto* range = std::lower_bound(
      std::begin(combining_class_ranges), std::end(combining_class_ranges), code_point,
      [](const CombiningClassRange& r, char32_t cp) { return r.last < cp; });
  const bool inside = range != std::end(combining_class_ranges) && range->first <= code_point;
  return inside ? range->combining_class : 0;
}

// Appends the full canonical decomposition of `code_point` (itself when it has none).
inline void append_canonical_decomposition(std::u32string& out, char32_t code_point) {
  if (hangul::is_syllable(code_point)) {
    const char32_t index = code_point - hangul::syllable_base;
    const char32_t per_leading = hangul::vowel_count * hangul::trailing_count;
    out.push_back(hangul::leading_base + index / per_leading);
    out.push_back(hangul::vowel_base + (index % per_leading) / hangul::trailing_count);
    if (index % hangul::trailing_count != 0) {
      out.push_back(hangul::trailing_base + index % hangul::trailing_count);
    }
    return;
  }
  const auto* entry = std::lower_bound(
      std::begin(canonical_decompositions), std::end(canonical_decompositions), code_point,
      [](const CanonicalDecomposition& d, char32_t cp) { return d.composite < cp; });
  if (entry == std::end(canonical_decompositions) || entry->composite != code_point) {
    out.push_back(code_point);
    return;
  }
  append_canonical_decomposition(out, entry->first);
  if (entry->second != 0) append_canonical_decomposition(out, entry->second);
}

// The primary composite of (first, second), if NFC composes them.
inline std::optional<char32_t> compose_pair(char32_t first, char32_t second) {
  if (first - hangul::leading_base < hangul::leading_count &&
      second - hangul::vowel_base < hangul::vowel_count) {
    return hangul::syllable_base +
           ((first - hangul::leading_base) * hangul::vowel_count + (second - hangul::vowel_base)) *
               hangul::trailing_count;
  }
  if (hangul::is_syllable(first) && (first - hangul::syllable_base) % hangul::trailing_count == 0 &&
      second - hangul::trailing_base - 1 < hangul::trailing_count - 1) {
    return first + (second - hangul::trailing_base);
  }
  const auto pair_of = [](std::uint16_t index) {
    return std::pair(canonical_decompositions[index].first, canonical_decompositions[index].second);
  };
  const auto wanted = std::pair(first, second);
  const auto* entry =
      std::lower_bound(std::begin(primary_composites), std::end(primary_composites), wanted,
                       [&](std::uint16_t index, const std::pair<char32_t, char32_t>& p) {
                         return pair_of(index) < p;
                       });
  if (entry == std::end(primary_composites) || pair_of(*entry) != wanted) return std::nullopt;
  return canonical_decompositions[*entry].composite;
}

// NFC of a sequence of code points (no surrogates, all <= U+10FFFF).
inline std::u32string nfc(std::u32string_view text) {
  std::u32string decomposed;
  decomposed.reserve(text.size());
  for (char32_t cp : text) append_canonical_decomposition(decomposed, cp);

  // Canonical ordering: each run of nonzero classes sorted by class, stably.
  for (std::size_t begin = 0; begin < decomposed.size();) {
    if (combining_class(decomposed[begin]) == 0) {
      ++begin;
      continue;
    }
    std::size_t end = begin;
    while (end < decomposed.size() && combining_class(decomposed[end]) != 0) ++end;
    std::stable_sort(
        decomposed.begin() + static_cast<std::ptrdiff_t>(begin),
        decomposed.begin() + static_cast<std::ptrdiff_t>(end),
        [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    begin = end;
  }

  // Canonical composition: a character joins the last starter unless something between them
  // blocks it (a class-0 character, or a mark of class >= its own).
  std::u32string composed;
  composed.reserve(decomposed.size());
  std::optional<std::size_t> starter;  // index in `composed` of the last starter
  std::uint8_t last_class = 0;         // class of composed.back() when it is not the starter
  for (char32_t cp : decomposed) {
    const std::uint8_t cp_class = combining_class(cp);
    if (starter) {
      const bool adjacent = *starter + 1 == composed.size();
      const bool blocked = !adjacent && (last_class == 0 || last_class >= cp_class);
      if (!blocked) {
        if (const auto composite = compose_pair(composed[*starter], cp)) {
          composed[*starter] = *composite;
          continue;
        }
      }
    }
    if (cp_class == 0) starter = composed.size();
    last_class = cp_class;
    composed.push_back(cp);
  }
  return composed;
}

// NFC of valid UTF-8 text, as UTF-8.
inline std::string nfc_utf8(std::string_view text) {
  std::u32string code_points;
  code_points.reserve(text.size());
  bool may_change = false;
  for (std::size_t offset = 0; offset < text.size();) {
    const utf8::DecodeStep step = utf8::decode_at(text, offset);
    code_points.push_back(step.code_point);
    may_change = may_change || step.code_point >= first_code_point_nfc_may_change;
    offset += step.length;
  }
  if (!may_change) return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : nfc(code_points)) utf8::append(out, cp);
  return out;
}

}  // namespace emergent::unicode
