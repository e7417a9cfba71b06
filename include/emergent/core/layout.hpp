// Compile-time layout of named tensors inside one contiguous buffer.
//
// Parameters, gradients and both AdamW moments of a model are each one flat buffer with the
// same layout, so that the optimizer is one loop and a checkpoint is a list of (name, slice).
// A layer kind declares its tensors as a constexpr array of TensorSpec; `layout_of` assigns
// offsets, each rounded up to a multiple of kTensorAlignment floats so that every tensor starts
// on a 64-byte boundary (AVX-512 loads, cache lines). The padding stays zero in every buffer.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace emergent {

inline constexpr std::size_t kTensorAlignment = 16;  // floats: 64 bytes

constexpr std::size_t align_up(std::size_t n) {
  return (n + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}

// How Model::init fills a tensor (PyTorch's defaults, docs/model.md):
//   linear  U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in = cols for a matrix, TensorSpec::fan_in
//           for a vector (a Linear bias names the width of its layer's input)
//   normal  N(0, 1) (embeddings)
//   ones, zeros  (LayerNorm weight and bias)
//   custom  filled by the mixer's own `init` (Mamba's A_log, RWKV's decays, ...)
enum class Init { linear, normal, ones, zeros, custom };

// One tensor of a layer kind: a matrix [rows, cols] or, with rows == 0, a vector [cols].
struct TensorSpec {
  std::string_view name;  // local name, e.g. "qkv.weight"
  int rows = 0;           // 0 for a vector
  int cols = 0;
  bool weight_decay = false;  // AdamW decays this tensor (matrices of Linear layers only)
  Init init = Init::linear;
  int fan_in = 0;  // for Init::linear vectors: the input width of the Linear it is the bias of

  constexpr std::size_t size() const {
    return static_cast<std::size_t>(rows == 0 ? 1 : rows) * cols;
  }
  constexpr int init_fan_in() const { return rows == 0 ? fan_in : cols; }
};

template <std::size_t N>
struct TensorLayout {
  std::array<TensorSpec, N> specs{};
  std::array<std::size_t, N> offsets{};  // relative to the start of this layout
  std::size_t total = 0;                 // floats, a multiple of kTensorAlignment

  static constexpr std::size_t count = N;
};

template <std::size_t N>
constexpr TensorLayout<N> layout_of(const std::array<TensorSpec, N>& specs) {
  TensorLayout<N> layout{};
  layout.specs = specs;
  std::size_t offset = 0;
  for (std::size_t i = 0; i < N; ++i) {
    // A compile error when a layout is constexpr: a Linear-initialised vector must name its fan-in.
    if (specs[i].init == Init::linear && specs[i].init_fan_in() <= 0)
      throw "layout_of: a linear bias needs fan_in";
    layout.offsets[i] = offset;
    offset += align_up(specs[i].size());
  }
  layout.total = offset;
  return layout;
}

// Values held by the tensors of a layout (its total without the alignment padding).
template <std::size_t N>
constexpr std::size_t value_count(const TensorLayout<N>& layout) {
  std::size_t n = 0;
  for (const TensorSpec& spec : layout.specs) n += spec.size();
  return n;
}

template <std::size_t N>
constexpr bool has_custom_init(const TensorLayout<N>& layout) {
  for (const TensorSpec& spec : layout.specs)
    if (spec.init == Init::custom) return true;
  return false;
}

// Offset of the tensor called `name`; a typo is a compile error when used in a constant
// expression (the loop runs off the end and `throw` is not a constant expression).
template <std::size_t N>
constexpr std::size_t offset_of(const TensorLayout<N>& layout, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (layout.specs[i].name == name) return layout.offsets[i];
  throw "offset_of: no tensor of that name";
}

}  // namespace emergent
