// The types of the Eigen reference backend: dense double-precision row-major matrices (the
// same layout as the fast path's buffers and PyTorch's tensors) and column vectors.
// The reference exists to check the other backends, so it favours clarity over speed.
#pragma once

#include <Eigen/Dense>

namespace emergent::reference {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXd;
using Index = Eigen::Index;

}  // namespace emergent::reference
