// The constants of Cephes' expf, shared by the vectorised exps of core/avx512.hpp (AVX-512) and
// core/simd.hpp (AVX2): x = n ln2 + r with n = round(x log2(e)) and ln2 split in a high part
// exact in float and a low part, then exp(r) = 1 + r + r^2 p(r) with p of degree 5.
#pragma once

namespace emergent::cephes_expf {

inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2High = 0.693359375f;
inline constexpr float kLn2Low = -2.12194440e-4f;
// p(r) = p0 r^5 + p1 r^4 + ... + p5, evaluated by Horner's rule from p0.
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace emergent::cephes_expf
