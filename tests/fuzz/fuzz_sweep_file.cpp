// libFuzzer target for sweep files (experiment/sweep_file.hpp): any bytes, as TOML or as JSON
// (by the first byte), must either expand into runs whose settings resolve or are refused, all
// with emergent::Error -- never a crash, a hang or an uncaught exception. Expansions of more than
// 64 runs are not resolved (the work would be the same per run).
// `make fuzz` builds and runs it (scripts/fuzz.sh); seed corpus: tests/fuzz/corpus/sweep_file/.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <emergent/experiment/sweep_file.hpp>
#include <emergent/train/config.hpp>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool json = size > 0 && data[0] == '{';
  static const std::string stem = "/tmp/emergent_fuzz_sweep_" + std::to_string(::getpid());
  const std::string path = stem + (json ? ".json" : ".toml");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const std::vector<emergent::SweepRun> runs =
        emergent::expand_sweep(emergent::read_sweep_file(path), path);
    if (runs.size() > 64) return 0;
    for (const emergent::SweepRun& run : runs) {
      try {
        (void)emergent::resolve_config(run.settings, run.origin);
      } catch (const emergent::Error&) {
      }
    }
  } catch (const emergent::Error&) {
  }
  return 0;
}
