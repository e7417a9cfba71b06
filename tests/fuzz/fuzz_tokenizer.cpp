// libFuzzer target for tokenizer.json (io/tokenizer.hpp): any bytes must either load into a
// tokenizer that encodes and decodes, or throw emergent::Error -- never crash, hang or hit UB.
// `make fuzz` builds and runs it (scripts/fuzz.sh); seed corpus: tests/fuzz/corpus/tokenizer/.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <emergent/io/tokenizer.hpp>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path =
      "/tmp/emergent_fuzz_tokenizer_" + std::to_string(::getpid()) + ".json";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const emergent::BpeTokenizer tokenizer(path);
    for (const char* text :
         {"Hello, world! 123", " repeat repeat", "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80", ""}) {
      const std::vector<std::int32_t> ids = tokenizer.encode(text);
      for (std::int32_t id : ids)
        if (id < 0 || id >= tokenizer.vocab_size()) __builtin_trap();
      (void)tokenizer.decode(ids);
    }
  } catch (const emergent::Error&) {
  }
  return 0;
}
