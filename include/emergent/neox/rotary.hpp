// Rotary position embedding as GPT-NeoX in transformers applies it: "rotate_half" pairs
// (j, j + r/2) on the first r = rotary_dims dimensions of each head's query and key; the other
// d_head - r dimensions and the values are untouched. For position p and j < r/2:
//   inv_freq[j] = 1 / base^(2j / r)         (the denominator is r, not d_head)
//   a = p * inv_freq[j]
//   out[j]       = x[j] cos a - x[j + r/2] sin a
//   out[j + r/2] = x[j + r/2] cos a + x[j] sin a
// Positions start at 0. inv_freq, the angle and cos/sin are float32 computations in HF's order
// (pow, reciprocal, product, then cos/sin), so the tables match HF's to an ulp.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace emergent::neox {

class RotaryTable {
 public:
  // cos/sin for positions [0, positions) and the r/2 frequencies.
  RotaryTable(int positions, int rotary_dims, double base) : half_(rotary_dims / 2) {
    cos_.resize(static_cast<std::size_t>(positions) * half_);
    sin_.resize(cos_.size());
    const auto base_f = static_cast<float>(base);
    for (int j = 0; j < half_; ++j) {
      const float inv_freq =
          1.0f / std::pow(base_f, static_cast<float>(2 * j) / static_cast<float>(rotary_dims));
      for (int p = 0; p < positions; ++p) {
        const float angle = static_cast<float>(p) * inv_freq;
        cos_[static_cast<std::size_t>(p) * half_ + j] = std::cos(angle);
        sin_[static_cast<std::size_t>(p) * half_ + j] = std::sin(angle);
      }
    }
  }

  // Rotates x[0 .. 2 half) of one head vector at `position` in place (float, or double with
  // the float tables, as transformers computes cos and sin in float32 for every dtype).
  template <class Real>
  void rotate(Real* x, int position) const {
    const float* c = cos_.data() + static_cast<std::size_t>(position) * half_;
    const float* s = sin_.data() + static_cast<std::size_t>(position) * half_;
    for (int j = 0; j < half_; ++j) {
      const Real lo = x[j], hi = x[j + half_];
      x[j] = lo * Real(c[j]) - hi * Real(s[j]);
      x[j + half_] = hi * Real(c[j]) + lo * Real(s[j]);
    }
  }

  // The transpose of rotate (the rotation by -angle): a gradient with respect to the rotated
  // vector becomes one with respect to the unrotated.
  template <class Real>
  void rotate_back(Real* x, int position) const {
    const float* c = cos_.data() + static_cast<std::size_t>(position) * half_;
    const float* s = sin_.data() + static_cast<std::size_t>(position) * half_;
    for (int j = 0; j < half_; ++j) {
      const Real lo = x[j], hi = x[j + half_];
      x[j] = lo * Real(c[j]) + hi * Real(s[j]);
      x[j + half_] = hi * Real(c[j]) - lo * Real(s[j]);
    }
  }

 private:
  int half_;
  std::vector<float> cos_;  // [positions, r/2]
  std::vector<float> sin_;
};

}  // namespace emergent::neox
