// The backends `emergent train` and `emergent sweep` take (--backend), and the program of this
// build that trains the device ones: emergent_ensemble_<backend>, beside this program
// (apps/device/ensemble.cpp).
#pragma once

#include <algorithm>
#include <emergent/core/error.hpp>
#include <emergent/settings/mixer_catalog.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "../registry/registry.hpp"
#include "shape_compiler.hpp"

namespace emergent::cli {

inline const std::vector<std::string> kBackends = {"cpu", "cuda", "thrust-omp"};

inline std::filesystem::path ensemble_program(const std::string& backend) {
  std::string name = "emergent_ensemble_" + backend;
  std::replace(name.begin(), name.end(), '-', '_');
  const std::filesystem::path program =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / name;
  require(std::filesystem::exists(program), program.string(),
          "does not exist: this build has no " + backend +
              " backend (cuda: nvcc at configure time, then `make build-cuda` where no GPU was "
              "visible then)");
  return program;
}

// The program that trains runs of (mixer, shape) on `backend`: the build's
// emergent_ensemble_<backend> for the registry's two shapes, else one compiled for that shape
// on demand (shape_compiler.hpp) and cached. A mixer without a device twin is refused here.
inline std::filesystem::path device_program(const std::string& backend, const std::string& mixer,
                                            const Shape& shape,
                                            const std::filesystem::path& compiler_info) {
  require(
      find_mixer(mixer, "--backend " + backend).device_twin, "--backend " + backend,
      "mixer " + mixer + " has no device twin yet (cuda/mixer.cuh): train it with --backend cpu");
  if (shape == kLinearMapShape || shape == kAutomatonShape) return ensemble_program(backend);
  return compiled_device_program(compiler_info, backend, mixer, shape);
}

}  // namespace emergent::cli
