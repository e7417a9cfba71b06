// libFuzzer target for the model.safetensors.index.json parser (io/checkpoint_folder.hpp): any
// bytes must either parse into a consistent index or throw emergent::Error -- never crash,
// leak, hit UB, or let a shard name leave the checkpoint folder. Build and run (from the
// repository root):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude
//   tests/fuzz/fuzz_safetensors_index.cpp -o fuzz_safetensors_index
//   ./fuzz_safetensors_index -max_total_time=60 -max_len=4096 corpus_dir/
// A seed corpus: tests/golden/neox/parallel_f16_sharded/model.safetensors.index.json.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <emergent/io/checkpoint_folder.hpp>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const emergent::SafetensorsIndex index =
        emergent::parse_safetensors_index(text, "fuzz.index.json");
    if (index.weight_map.empty() || index.shards.empty()) __builtin_trap();
    if (!std::is_sorted(index.shards.begin(), index.shards.end()) ||
        std::adjacent_find(index.shards.begin(), index.shards.end()) != index.shards.end()) {
      __builtin_trap();
    }
    for (const auto& [tensor, shard] : index.weight_map) {
      if (!std::binary_search(index.shards.begin(), index.shards.end(), shard)) __builtin_trap();
      if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
          shard.find('\0') != std::string::npos) {
        __builtin_trap();
      }
    }
  } catch (const emergent::Error&) {
  }
  return 0;
}
