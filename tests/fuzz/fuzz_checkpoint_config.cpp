// libFuzzer target for the run config a checkpoint carries in its metadata ("config", the text
// of config.json; train/config.hpp), read as `emergent eval` reads it: any text must either give
// a config that validates and writes back identically, or be refused with emergent::Error.
// `make fuzz` builds and runs it (scripts/fuzz.sh); seed corpus:
// tests/fuzz/corpus/checkpoint_config/.
#include <cstddef>
#include <cstdint>
#include <emergent/train/config.hpp>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const nlohmann::json::exception&) {
    return 0;  // the CLI reports this as "metadata field 'config' is not valid JSON"
  }
  try {
    const emergent::TrainConfig c = emergent::train_config_from_json(j, "checkpoint: config");
    const nlohmann::json back = emergent::to_json(c);
    if (emergent::to_json(emergent::train_config_from_json(back, "again")) != back)
      __builtin_trap();
  } catch (const emergent::Error&) {
  }
  return 0;
}
