// Philox4x32-10, the counter-based random number generator of Salmon, Moraes, Dror and Shaw,
// "Parallel Random Numbers: As Easy as 1, 2, 3" (SC 2011), bit-for-bit as Random123, cuRAND,
// JAX and numpy's Philox compute it, plus PhiloxStream, the addressable stream that every
// random draw of emergent (task data, parameter init) comes from.
//
// Why counter-based: the value at index i is a pure function of (key, counter), so sample b of
// step t, or weight w of an init, is the same whatever the thread count, batch size, backend or
// order of evaluation. Nothing carries state from one draw to the next, so a resumed run and a
// GPU kernel can recompute any draw directly.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <numbers>
#include <string_view>

namespace emergent {

namespace philox_detail {

// Round multipliers and Weyl key increments (golden ratio and sqrt(3) - 1, scaled to 2^32),
// the constants of the published Philox4x32 definition.
inline constexpr std::uint32_t kMultiplier0 = 0xD2511F53u;
inline constexpr std::uint32_t kMultiplier1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
inline constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;

constexpr std::uint32_t high_word(std::uint64_t product) {
  return static_cast<std::uint32_t>(product >> 32);
}
constexpr std::uint32_t low_word(std::uint64_t product) {
  return static_cast<std::uint32_t>(product);
}

// One Philox S-box round on (counter, round key).
constexpr std::array<std::uint32_t, 4> round(const std::array<std::uint32_t, 4>& counter,
                                             const std::array<std::uint32_t, 2>& key) {
  const std::uint64_t product0 = std::uint64_t{kMultiplier0} * counter[0];
  const std::uint64_t product1 = std::uint64_t{kMultiplier1} * counter[2];
  return {high_word(product1) ^ counter[1] ^ key[0], low_word(product1),
          high_word(product0) ^ counter[3] ^ key[1], low_word(product0)};
}

}  // namespace philox_detail

// Philox4x32 with 10 rounds: a keyed bijection of 128-bit counters. The key is bumped by the
// Weyl increments between rounds (9 bumps for 10 rounds), as in Random123's philox4x32_R.
constexpr std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter,
                                                     std::array<std::uint32_t, 2> key) {
  for (int round_index = 0; round_index < 10; ++round_index) {
    if (round_index > 0) {
      key[0] += philox_detail::kWeyl0;
      key[1] += philox_detail::kWeyl1;
    }
    counter = philox_detail::round(counter, key);
  }
  return counter;
}

// A stable 64-bit id for a named stream ("matrix", "init", ...): FNV-1a over the bytes. Names
// rather than small integers keep independent consumers of one seed from colliding by accident.
constexpr std::uint64_t stream_id_from_name(std::string_view name) {
  std::uint64_t hash = 0xCBF29CE484222325ull;  // FNV-1a 64-bit offset basis
  for (char character : name) {
    hash ^= static_cast<std::uint8_t>(character);
    hash *= 0x100000001B3ull;  // FNV-1a 64-bit prime
  }
  return hash;
}

// An addressable stream of 32-bit words for one (seed, stream_id).
//
//   key     = {seed lo, seed hi}
//   counter = {stream_id lo, stream_id hi, block lo, block hi},   block = index / 4
//   u32(index) = word (index % 4) of philox4x32_10(counter, key)
//
// The last block computed is cached, so reading consecutive indices costs one Philox call per
// four words. The cache makes a PhiloxStream unsafe to share between threads; make one per
// thread instead (construction is free).
//
// PhiloxStream::below's draw from its first block of candidates (n >= 1): the device samplers
// (cuda/) draw with it too, so that their batches are the CPU's.
constexpr std::uint32_t philox_below(std::array<std::uint32_t, 4> candidates,
                                     std::array<std::uint32_t, 2> key, std::uint32_t n) {
  const std::uint32_t rejection_threshold = static_cast<std::uint32_t>(-n) % n;  // 2^32 mod n
  for (;;) {
    for (std::uint32_t candidate : candidates) {
      const std::uint64_t product = std::uint64_t{candidate} * n;
      if (static_cast<std::uint32_t>(product) >= rejection_threshold)
        return static_cast<std::uint32_t>(product >> 32);
    }
    candidates = philox4x32_10(candidates, key);
  }
}

// The typed draws below are views of the same word space: uniform(i) reads word i, normal(i)
// reads words 2i and 2i+1, below(i, n) reads words 4i .. 4i+3. A consumer uses one kind of
// draw per stream (or disjoint index ranges), otherwise two draws would share words.
class PhiloxStream {
 public:
  PhiloxStream(std::uint64_t seed, std::uint64_t stream_id)
      : key_{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)},
        stream_lo_(static_cast<std::uint32_t>(stream_id)),
        stream_hi_(static_cast<std::uint32_t>(stream_id >> 32)) {}

  // The 128 random bits of one block (words 4*block .. 4*block+3).
  std::array<std::uint32_t, 4> block(std::uint64_t block_index) const {
    if (!cache_valid_ || cached_block_ != block_index) {
      cached_words_ =
          philox4x32_10({stream_lo_, stream_hi_, static_cast<std::uint32_t>(block_index),
                         static_cast<std::uint32_t>(block_index >> 32)},
                        key_);
      cached_block_ = block_index;
      cache_valid_ = true;
    }
    return cached_words_;
  }

  std::uint32_t u32(std::uint64_t index) const { return block(index / 4)[index % 4]; }

  // Uniform on [0, 1) from the top 24 bits of word `index`: 24 bits is exactly a float's
  // significand, so every value is representable and 1.0 is never produced by rounding.
  float uniform(std::uint64_t index) const {
    return static_cast<float>(u32(index) >> 8) * 0x1.0p-24f;
  }

  // Standard normal by Box-Muller from words 2*index (radius) and 2*index+1 (angle); only the
  // cosine branch is used, so each index owns its two words and is addressable on its own.
  // u1 = (w + 1) / 2^32 lies in (0, 1], so log(u1) is finite and |z| <= sqrt(64 ln 2) ~ 6.66.
  double normal(std::uint64_t index) const {
    const double radius_uniform = (static_cast<double>(u32(2 * index)) + 1.0) * 0x1.0p-32;
    const double angle_uniform = static_cast<double>(u32(2 * index + 1)) * 0x1.0p-32;
    return std::sqrt(-2.0 * std::log(radius_uniform)) *
           std::cos(2.0 * std::numbers::pi * angle_uniform);
  }

  // Uniform integer in [0, n), exactly unbiased, by Lemire's multiply-and-reject
  // (arXiv:1805.10941). Candidates are, in order, words 4*index .. 4*index+3 (one block); if all
  // four are rejected, further blocks come from re-encrypting the previous block with the same
  // key (block_{r+1} = philox4x32_10(block_r, key)), so consumption is deterministic and
  // unbounded. A candidate is rejected with probability (2^32 mod n) / 2^32 < n / 2^32, so for
  // the small n used here (n <= 2^16) the chain is reached with probability below 2^-64.
  std::uint32_t below(std::uint64_t index, std::uint32_t n) const {
    require(n >= 1, "PhiloxStream::below", "n must be at least 1");
    return philox_below(block(index), key_, n);
  }

 private:
  std::array<std::uint32_t, 2> key_;
  std::uint32_t stream_lo_;
  std::uint32_t stream_hi_;
  mutable std::array<std::uint32_t, 4> cached_words_{};
  mutable std::uint64_t cached_block_ = 0;
  mutable bool cache_valid_ = false;
};

}  // namespace emergent
