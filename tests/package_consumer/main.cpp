// Compiles against an installed emergent through find_package(emergent): the headers, C++20 and
// the transitive dependencies (Eigen, nlohmann_json, OpenMP) must all come with the target. The
// trainer's and a mixer's headers are included (every layer from core/ to train/), but no model
// is instantiated, which would cost the test half a minute of compiling.
#include <omp.h>

#include <Eigen/Core>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>
#include <nlohmann/json.hpp>

int main() {
  constexpr emergent::Shape s{.vocab = 2};
  static_assert(s.valid());
  const Eigen::Vector2i v(s.vocab, s.d_head());
  const nlohmann::json j = {{"vocab", v(0)}, {"threads", omp_get_max_threads() >= 1}};
  return j.at("vocab").get<int>() == 2 && j.at("threads").get<bool>() ? 0 : 1;
}
