// Cross entropy with per-position weights (docs/model.md), logits rows b*T + t:
//   loss = sum_{b,t} w[t] * CE(logits[b,t], target[b,t]) / (B * sum_t w[t])
//   CE   = logsumexp(logits) - logits[target]      (natural log)
// Backward: d_logits[b,t,:] = d_loss * w[t] / (B * sum_t w[t]) * (softmax(logits[b,t]) - onehot).
#pragma once

#include <cmath>
#include <emergent/core/error.hpp>
#include <emergent/reference/matrix.hpp>
#include <string>
#include <vector>

namespace emergent::reference {

namespace detail {
inline void check_cross_entropy_inputs(const Matrix& logits, const std::vector<int>& targets, int B,
                                       int T, const std::vector<double>& weights,
                                       const char* where) {
  require(B >= 1 && T >= 1 && logits.rows() == static_cast<Index>(B) * T, where,
          "logits rows are not B*T");
  require(targets.size() == static_cast<std::size_t>(B) * static_cast<std::size_t>(T), where,
          "targets size is not B*T");
  require(weights.size() == static_cast<std::size_t>(T), where, "weights size is not T");
  double sum = 0;
  for (double w : weights) sum += w;
  require(sum != 0.0, where, "position weights sum to zero");
  for (int target : targets)
    require(target >= 0 && target < logits.cols(), where,
            "target " + std::to_string(target) + " out of vocabulary");
}

inline double weight_sum(const std::vector<double>& weights) {
  double sum = 0;
  for (double w : weights) sum += w;
  return sum;
}

// logits row [V] -> logsumexp, computed stably
inline double logsumexp(const Matrix& logits, Index row) {
  const double max_logit = logits.row(row).maxCoeff();
  double sum = 0;
  for (Index v = 0; v < logits.cols(); ++v) sum += std::exp(logits(row, v) - max_logit);
  return max_logit + std::log(sum);
}
}  // namespace detail

// logits [B*T,V], targets [B*T], weights [T] -> scalar loss
inline double cross_entropy_forward(const Matrix& logits, const std::vector<int>& targets, int B,
                                    int T, const std::vector<double>& weights) {
  detail::check_cross_entropy_inputs(logits, targets, B, T, weights, "cross_entropy_forward");
  const double normaliser = static_cast<double>(B) * detail::weight_sum(weights);
  double loss = 0;
  for (Index n = 0; n < logits.rows(); ++n) {
    const double w = weights[static_cast<std::size_t>(n % T)];
    const int target = targets[static_cast<std::size_t>(n)];
    loss += w * (detail::logsumexp(logits, n) - logits(n, target));
  }
  return loss / normaliser;
}

// logits [B*T,V], targets [B*T], weights [T], d_loss scalar -> d_logits [B*T,V]
inline Matrix cross_entropy_backward(const Matrix& logits, const std::vector<int>& targets, int B,
                                     int T, const std::vector<double>& weights,
                                     double d_loss = 1.0) {
  detail::check_cross_entropy_inputs(logits, targets, B, T, weights, "cross_entropy_backward");
  const double normaliser = static_cast<double>(B) * detail::weight_sum(weights);
  Matrix d_logits(logits.rows(), logits.cols());
  for (Index n = 0; n < logits.rows(); ++n) {
    const double factor = d_loss * weights[static_cast<std::size_t>(n % T)] / normaliser;
    const double lse = detail::logsumexp(logits, n);
    for (Index v = 0; v < logits.cols(); ++v)
      d_logits(n, v) = factor * std::exp(logits(n, v) - lse);
    d_logits(n, targets[static_cast<std::size_t>(n)]) -= factor;
  }
  return d_logits;
}

}  // namespace emergent::reference
