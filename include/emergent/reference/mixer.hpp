// The contract of a token mixer's Eigen reference (tests only): one sequence at a time, in
// double, with the parameters by their local names (the names of the mixer's TensorLayout).
//
//   struct SomeMixerReference {
//     Matrix forward(const MixerParameters& p, const Matrix& x) const;             // x [T,D] -> y
//     [T,D] MixerGradients backward(const MixerParameters& p, const Matrix& x,
//                             const Matrix& dy) const;                             // dL/dx, dL/dp
//   };
//
// A vector parameter is a [1, cols] matrix; a gradient has the shape of its parameter.
#pragma once

#include <emergent/reference/matrix.hpp>
#include <map>
#include <string>

namespace emergent::reference {

using MixerParameters = std::map<std::string, Matrix>;

struct MixerGradients {
  Matrix dx;                // [T,D]
  MixerParameters dparams;  // same names and shapes as the parameters
};

// Zero gradients shaped like `p`.
inline MixerParameters zeros_like(const MixerParameters& p) {
  MixerParameters out;
  for (const auto& [name, m] : p) out[name] = Matrix::Zero(m.rows(), m.cols());
  return out;
}

}  // namespace emergent::reference
