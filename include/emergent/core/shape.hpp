// The architecture of a model as a structural aggregate, usable as a template argument:
//   constexpr emergent::Shape linmap{.vocab = 2, .d_model = 128, .heads = 8, .layers = 1,
//                                     .d_ff = 512, .max_len = 64};
//   using Net = emergent::Model<emergent::DotAttention, linmap>;
// Every size is then a compile-time constant. Run-time values (sequence length up to max_len,
// batch, learning rate, task parameters, bias strength) stay out of it.
#pragma once

namespace emergent {

struct Shape {
  int vocab = 2;      // token vocabulary (the paper's C)
  int d_model = 128;  // residual width D
  int heads = 8;      // attention heads H; d_head = d_model / heads
  int layers = 1;     // transformer blocks
  int d_ff = 512;     // MLP hidden width
  int max_len = 64;   // rows of the learned absolute position embedding

  constexpr int d_head() const { return d_model / heads; }
  constexpr bool valid() const {
    return vocab >= 1 && d_model >= 1 && heads >= 1 && heads <= d_model && d_model % heads == 0 &&
           layers >= 1 && d_ff >= 1 && max_len >= 1;
  }
  constexpr bool operator==(const Shape&) const = default;
};

}  // namespace emergent
