// The backends `emergent train` and `emergent sweep` take (--backend), and the program of this
// build that trains the device ones: emergent_ensemble_<backend>, beside this program
// (apps/device/ensemble.cpp).
#pragma once

#include <algorithm>
#include <emergent/core/error.hpp>
#include <filesystem>
#include <string>
#include <vector>

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

}  // namespace emergent::cli
