// The one unit that compiles the GPT-NeoX models of neox/registry.hpp's kCompiledNeoxShapes
// (make_compiled_network<void>) for the project's programs built with EMERGENT_COMPILED_NEOX,
// which declare its instantiation extern instead of compiling the ten models in each
// (CMakeLists.txt: emergent_compiled_neox). A program that includes the headers alone, as a
// user's does, needs none of this.
#include <emergent/neox/registry.hpp>

template std::unique_ptr<emergent::neox::Network> emergent::neox::make_compiled_network<void>(
    const emergent::NeoxConfig&, const std::string&);
