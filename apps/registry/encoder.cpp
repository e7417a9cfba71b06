// The encoder shapes of `emergent spt` (encoder.hpp): bidirectional attention, GELU MLP, ListOps'
// vocabulary and 10 classes. A shape is a type, so each is one instantiation below.
#include "encoder.hpp"

#include <emergent/mixers/bidirectional_attention.hpp>
#include <emergent/tasks/listops.hpp>
#include <emergent/train/self_pretraining.hpp>

namespace emergent::cli {

namespace {

template <Shape S>
using ListOpsEncoder = Encoder<BidirectionalAttention, S, listops::kClasses>;

struct EncoderEntry {
  Shape shape;
  nlohmann::json (*run)(const ParameterValues&, const std::filesystem::path&, bool);
};

template <Shape S>
EncoderEntry entry() {
  return {S, [](const ParameterValues& c, const std::filesystem::path& out, bool progress) {
            return SelfPretrainingRun<ListOpsEncoder<S>>(c, out, progress).run();
          }};
}

const std::vector<EncoderEntry>& entries() {
  static const std::vector<EncoderEntry> list = {
      // CPU-sized ListOps (lengths up to 500)
      entry<Shape{.vocab = listops::kVocab,
                  .d_model = 64,
                  .heads = 4,
                  .layers = 2,
                  .d_ff = 128,
                  .max_len = 512}>(),
      // LRA-sized ListOps (lengths up to 2,000)
      entry<Shape{.vocab = listops::kVocab,
                  .d_model = 128,
                  .heads = 8,
                  .layers = 4,
                  .d_ff = 512,
                  .max_len = 2048}>(),
  };
  return list;
}

std::string name(const Shape& s) {
  return "d_model=" + std::to_string(s.d_model) + " heads=" + std::to_string(s.heads) +
         " layers=" + std::to_string(s.layers) + " d_ff=" + std::to_string(s.d_ff) +
         " max_len=" + std::to_string(s.max_len);
}

}  // namespace

std::string encoder_shape_names() {
  std::string names;
  for (const EncoderEntry& e : entries()) names += (names.empty() ? "" : "; ") + name(e.shape);
  return names;
}

nlohmann::json run_self_pretraining(const ParameterValues& c, const std::filesystem::path& out,
                                    bool progress) {
  const Shape wanted{.vocab = listops::kVocab,
                     .d_model = int(c.integer("d_model")),
                     .heads = int(c.integer("heads")),
                     .layers = int(c.integer("layers")),
                     .d_ff = int(c.integer("d_ff")),
                     .max_len = int(c.integer("max_len"))};
  for (const EncoderEntry& e : entries())
    if (e.shape == wanted) return e.run(c, out, progress);
  throw Error("config: the encoder " + name(wanted) + " is not compiled into emergent (compiled: " +
              encoder_shape_names() + "; add one line to apps/registry/encoder.cpp)");
}

}  // namespace emergent::cli
