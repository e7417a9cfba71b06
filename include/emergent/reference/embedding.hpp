// Token + learned absolute position embedding (docs/model.md):
//   x[b*T + t] = token_table[tokens[b*T + t]] + position_table[t]
// Backward scatter-adds the output gradient into the rows of both tables that were read.
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/reference/matrix.hpp>
#include <string>
#include <vector>

namespace emergent::reference {

// tokens [B*T] in [0,V), token_table [V,D], position_table [max_len,D], T <= max_len -> [B*T,D]
inline Matrix embedding_forward(const std::vector<int>& tokens, int T, const Matrix& token_table,
                                const Matrix& position_table) {
  const Index N = static_cast<Index>(tokens.size());
  require(T >= 1 && N % T == 0, "embedding_forward", "token count is not a multiple of T");
  require(T <= position_table.rows(), "embedding_forward", "T exceeds max_len");
  require(token_table.cols() == position_table.cols(), "embedding_forward", "table widths differ");
  Matrix x(N, token_table.cols());
  for (Index n = 0; n < N; ++n) {
    const int token = tokens[static_cast<std::size_t>(n)];
    require(token >= 0 && token < token_table.rows(), "embedding_forward",
            "token " + std::to_string(token) + " out of vocabulary");
    x.row(n) = token_table.row(token) + position_table.row(n % T);
  }
  return x;
}

// d_out [B*T,D], tokens [B*T] -> accumulates d_token_table [V,D] and d_position_table [max_len,D]
inline void embedding_backward(const Matrix& d_out, const std::vector<int>& tokens, int T,
                               Matrix& d_token_table, Matrix& d_position_table) {
  require(d_out.rows() == static_cast<Index>(tokens.size()), "embedding_backward",
          "d_out rows differ from the token count");
  for (Index n = 0; n < d_out.rows(); ++n) {
    d_token_table.row(tokens[static_cast<std::size_t>(n)]) += d_out.row(n);
    d_position_table.row(n % T) += d_out.row(n);
  }
}

}  // namespace emergent::reference
