// The one unit that compiles the CPU trainer (train/trainer.hpp's BasicRunTrainer<void>) for the
// project's targets built with EMERGENT_COMPILED_TRAINER, which declare its instantiation extern
// instead of compiling it in every unit that trains (CMakeLists.txt: emergent_compiled_trainer).
// A program that includes the headers alone, as a user's does, needs none of this.
#include <emergent/train/trainer.hpp>

template class emergent::BasicRunTrainer<void>;
