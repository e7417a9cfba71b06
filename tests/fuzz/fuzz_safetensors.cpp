// libFuzzer target for the safetensors reader: any bytes must either open cleanly or throw
// emergent::Error -- never crash, leak or hit UB. Build and run (from the repository root):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude
//   tests/fuzz/fuzz_safetensors.cpp -o fuzz_safetensors
//   ./fuzz_safetensors -max_total_time=60 -max_len=4096 corpus_dir/
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <emergent/io/safetensors.hpp>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path =
      "/tmp/emergent_fuzz_safetensors_" + std::to_string(::getpid()) + ".safetensors";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    emergent::SafetensorsFile file(path);
    volatile float sink = 0;
    for (const auto& t : file.tensors()) {
      // Touch every byte the reader vouches for, and every conversion path.
      for (const std::byte b : t.bytes) sink = sink + static_cast<float>(b);
      if (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16" || t.dtype == "F64") {
        const auto v = file.read_f32(t.name);
        if (v.size() != t.numel) __builtin_trap();
      }
      if (!file.contains(t.name) || &file.info(t.name) != &t) __builtin_trap();
    }
    (void)file.metadata();
    (void)file.names();
  } catch (const emergent::Error&) {
  }
  return 0;
}
