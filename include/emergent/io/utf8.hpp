// UTF-8: decoding one code point with full validation, encoding, and the lossy repair of byte
// strings (what a byte-level tokenizer's decoder needs).
//
// Valid UTF-8 is RFC 3629: shortest form only, no surrogates (U+D800..U+DFFF), nothing above
// U+10FFFF. An invalid sequence is measured as its "maximal subpart" (Unicode chapter 3, U+FFFD
// substitution): the longest prefix of a well-formed sequence that the bytes start, at least one
// byte. `to_valid_utf8` replaces each maximal subpart by one U+FFFD, as Rust's
// String::from_utf8_lossy and Python's bytes.decode(errors="replace") do.
//
//   auto step = emergent::utf8::decode_at(text, offset);   // {code_point, length, valid}
//   emergent::utf8::append(out, U'é');
//   auto bad = emergent::utf8::first_invalid_byte(text);   // std::nullopt when valid
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace emergent::utf8 {

struct DecodeStep {
  char32_t code_point;  // U+FFFD when !valid
  std::size_t length;   // bytes consumed: the sequence, or its maximal invalid subpart
  bool valid;
};

// Decodes the code point starting at byte `offset` (< text.size()).
inline DecodeStep decode_at(std::string_view text, std::size_t offset) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[offset + i]); };
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return {lead, 1, true};

  std::size_t length;
  char32_t code_point;
  // Bounds of the second byte: they exclude overlong forms, surrogates and values > U+10FFFF.
  std::uint8_t second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code_point = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code_point = lead & 0x0Fu;
    if (lead == 0xE0) second_min = 0xA0;
    if (lead == 0xED) second_max = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code_point = lead & 0x07u;
    if (lead == 0xF0) second_min = 0x90;
    if (lead == 0xF4) second_max = 0x8F;
  } else {
    return {U'\uFFFD', 1, false};  // continuation byte, C0, C1 or F5..FF as a lead
  }
  for (std::size_t i = 1; i < length; ++i) {
    const bool in_range =
        offset + i < text.size() && (i == 1 ? byte(i) >= second_min && byte(i) <= second_max
                                            : byte(i) >= 0x80 && byte(i) <= 0xBF);
    if (!in_range) return {U'\uFFFD', i, false};
    code_point = (code_point << 6) | (byte(i) & 0x3Fu);
  }
  return {code_point, length, true};
}

// Appends the UTF-8 encoding of a valid code point (not a surrogate, <= U+10FFFF).
inline void append(std::string& out, char32_t code_point) {
  const auto put = [&](std::uint32_t b) { out.push_back(static_cast<char>(b)); };
  if (code_point < 0x80) {
    put(code_point);
  } else if (code_point < 0x800) {
    put(0xC0 | (code_point >> 6));
    put(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    put(0xE0 | (code_point >> 12));
    put(0x80 | ((code_point >> 6) & 0x3F));
    put(0x80 | (code_point & 0x3F));
  } else {
    put(0xF0 | (code_point >> 18));
    put(0x80 | ((code_point >> 12) & 0x3F));
    put(0x80 | ((code_point >> 6) & 0x3F));
    put(0x80 | (code_point & 0x3F));
  }
}

// Byte offset of the first invalid sequence, or std::nullopt when `text` is valid UTF-8.
inline std::optional<std::size_t> first_invalid_byte(std::string_view text) {
  for (std::size_t offset = 0; offset < text.size();) {
    if (static_cast<std::uint8_t>(text[offset]) < 0x80) {
      ++offset;
      continue;
    }
    const DecodeStep step = decode_at(text, offset);
    if (!step.valid) return offset;
    offset += step.length;
  }
  return std::nullopt;
}

// `bytes` with every maximal invalid subpart replaced by U+FFFD.
inline std::string to_valid_utf8(std::string_view bytes) {
  if (!first_invalid_byte(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  for (std::size_t offset = 0; offset < bytes.size();) {
    const DecodeStep step = decode_at(bytes, offset);
    if (step.valid) {
      out.append(bytes.substr(offset, step.length));
    } else {
      append(out, U'\uFFFD');
    }
    offset += step.length;
  }
  return out;
}

}  // namespace emergent::utf8
