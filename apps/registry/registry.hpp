// The shapes the `emergent` CLI and the device program can run. A model is a type
// (Model<Mixer, Shape>), so a program that takes sizes at run time picks from a fixed set of
// compiled instantiations. Each mixer's live in its own translation unit in this folder, so the
// build parallelises and a change rebuilds little; a shape that is not here is compiled on demand
// (apps/cli/shape_compiler.hpp). To prebuild a shape, add one RegisterShape line with it to
// the mixer's file. This header stays light (the model, not the trainer): a generated translation
// unit includes it. run_entry.hpp trains and evaluates an entry.
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/train/compiled_model.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace emergent::cli {

// The shapes of the paper's experiments, shared by the registry's translation units.
// Linear map (S up to 32): 1 layer, D = 128, H = 8, MLP 512.
inline constexpr Shape kLinearMapShape{
    .vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
// Cellular automaton with C = 4 colours, S = 16, 16 states (255 positions): 4 layers.
inline constexpr Shape kAutomatonShape{
    .vocab = 4, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 256};

struct ShapeEntry {
  std::string mixer;
  Shape shape;
  std::size_t parameters = 0;                 // trainable values (Model::trainable_parameters)
  std::unique_ptr<TrainableModel> (*make)();  // the compiled model (run_entry.hpp trains it)
};

inline std::vector<ShapeEntry>& shape_registry() {
  static std::vector<ShapeEntry> entries;
  return entries;
}

struct RegisterShape {
  explicit RegisterShape(ShapeEntry entry) { shape_registry().push_back(std::move(entry)); }
};

inline std::string describe(const std::string& mixer, const Shape& s) {
  return mixer + " vocab=" + std::to_string(s.vocab) + " d_model=" + std::to_string(s.d_model) +
         " heads=" + std::to_string(s.heads) + " layers=" + std::to_string(s.layers) +
         " d_ff=" + std::to_string(s.d_ff) + " max_len=" + std::to_string(s.max_len);
}

// The registered entry of exactly (mixer, shape), if there is one.
inline const ShapeEntry* find_compiled(const std::string& mixer, const Shape& shape) {
  for (const ShapeEntry& e : shape_registry())
    if (e.mixer == mixer && e.shape == shape) return &e;
  return nullptr;
}

// The max_len a config with max_len 0 gets: that of the registered entry of (mixer, shape
// without max_len) with the smallest max_len >= `length`, else the next power of two >= `length`
// (at least 64), so that runs over many lengths share a few shapes compiled on demand.
inline int automatic_max_len(const std::string& mixer, const Shape& wanted, int length) {
  int best = 0;
  for (const ShapeEntry& e : shape_registry()) {
    Shape s = e.shape;
    s.max_len = wanted.max_len;
    if (e.mixer == mixer && s == wanted && e.shape.max_len >= length &&
        (best == 0 || e.shape.max_len < best))
      best = e.shape.max_len;
  }
  if (best > 0) return best;
  int power = 64;
  while (power < length) power *= 2;
  return power;
}

// The registered entry for (mixer, shape without max_len) with the smallest max_len that fits
// `length`.
inline const ShapeEntry& find_shape(const std::string& mixer, const Shape& wanted, int length) {
  const ShapeEntry* best = nullptr;
  for (const ShapeEntry& e : shape_registry())
    if (e.mixer == mixer && e.shape.vocab == wanted.vocab && e.shape.d_model == wanted.d_model &&
        e.shape.heads == wanted.heads && e.shape.layers == wanted.layers &&
        e.shape.d_ff == wanted.d_ff && e.shape.max_len >= length &&
        (!best || e.shape.max_len < best->shape.max_len))
      best = &e;
  if (best) return *best;
  std::string message = "no compiled model for " + describe(mixer, wanted) +
                        " with max_len >= " + std::to_string(length) + ". Compiled shapes:\n";
  for (const ShapeEntry& e : shape_registry()) message += "  " + describe(e.mixer, e.shape) + "\n";
  message +=
      "To add one, add a RegisterShape line with that Shape to the mixer's file in "
      "apps/registry/.";
  throw Error(message);
}

// The entry of Model<Mixer, S, float, Channel>, under the mixer's own name (Mixer::name, which
// the catalog of settings/mixer_catalog.hpp repeats and the mixer's test checks).
template <template <Shape, class> class Mixer, Shape S,
          template <Shape, class> class Channel = GeluMlp>
ShapeEntry make_entry() {
  using Net = Model<Mixer, S, float, Channel>;
  return {std::string(Mixer<S, float>::name), S, Net::trainable_parameters, &make_trainable<Net>};
}

}  // namespace emergent::cli
