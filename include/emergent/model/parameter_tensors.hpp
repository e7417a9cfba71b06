// The named tensors of a model's flat parameter buffer (a name, a place and a shape each), and
// PyTorch's default initialisation of them: shared by Model and Encoder.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/layout.hpp>
#include <emergent/core/philox.hpp>
#include <span>
#include <string>
#include <vector>

namespace emergent {

// One named tensor of a whole model, with its place in the flat buffers.
struct ParameterTensor {
  std::string name;                 // e.g. "layers.0.mixer.qkv.weight"
  std::size_t offset = 0;           // floats from the start of the buffer
  std::vector<std::int64_t> shape;  // [rows, cols] or [cols]
  std::size_t size = 0;
  bool weight_decay = false;
  Init init = Init::linear;
  int fan_in = 0;  // of Init::linear
};

// The tensors of `layout` with `prefix` on their names, placed at `base` of the whole buffer.
template <class Layout>
void append_tensors(std::vector<ParameterTensor>& out, const Layout& layout,
                    const std::string& prefix, std::size_t base) {
  for (std::size_t i = 0; i < layout.count; ++i) {
    const TensorSpec& spec = layout.specs[i];
    ParameterTensor t;
    t.name = prefix + std::string(spec.name);
    t.offset = base + layout.offsets[i];
    t.shape = spec.rows == 0 ? std::vector<std::int64_t>{spec.cols}
                             : std::vector<std::int64_t>{spec.rows, spec.cols};
    t.size = spec.size();
    t.weight_decay = spec.weight_decay;
    t.init = spec.init;
    t.fan_in = spec.init_fan_in();
    out.push_back(std::move(t));
  }
}

// PyTorch's default initialisation (docs/model.md), so that runs compare with PyTorch
// reimplementations of the paper: each tensor as its TensorSpec::init says (Linear weight and
// bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), embeddings ~ N(0, 1), LayerNorm 1/0, custom 0 for
// the owner to fill). Draws come from Philox streams of `seed`, indexed by position in the
// buffer, so an init is the same on every machine and thread count.
template <class Real>
void init_parameter_tensors(std::span<Real> params, const std::vector<ParameterTensor>& tensors,
                            std::uint64_t seed) {
  std::fill(params.begin(), params.end(), Real(0));
  const PhiloxStream uniform(seed, stream_id_from_name("model.init.uniform"));
  const PhiloxStream normal(seed, stream_id_from_name("model.init.normal"));
  for (const ParameterTensor& t : tensors) {
    const double bound = t.init == Init::linear ? 1.0 / std::sqrt(double(t.fan_in)) : 0.0;
    for (std::size_t i = 0; i < t.size; ++i) {
      const std::size_t index = t.offset + i;
      switch (t.init) {
        case Init::linear:
          params[index] = Real(bound * (2.0 * uniform.uniform(index) - 1.0));
          break;
        case Init::normal:
          params[index] = Real(normal.normal(index));
          break;
        case Init::ones:
          params[index] = Real(1);
          break;
        case Init::zeros:
        case Init::custom:
          params[index] = Real(0);
          break;
      }
    }
  }
}

}  // namespace emergent
