// libFuzzer target for Hugging Face GPT-NeoX config.json (io/hf_config.hpp): any bytes must
// either parse into a config whose sizes are usable or throw emergent::Error.
// `make fuzz` builds and runs it (scripts/fuzz.sh); seed corpus: tests/fuzz/corpus/hf_config/.
#include <cstddef>
#include <cstdint>
#include <emergent/io/hf_config.hpp>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const emergent::NeoxConfig c = emergent::parse_neox_config_text(
        std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
    if (c.hidden_size <= 0 || c.num_attention_heads <= 0 ||
        c.hidden_size % c.num_attention_heads != 0 || c.vocab_size <= 0)
      __builtin_trap();
  } catch (const emergent::Error&) {
  }
  return 0;
}
