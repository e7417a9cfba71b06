// The main of a program compiled on demand for one shape (cli/shape_compiler.hpp): `train` and
// `eval` as in `emergent`, for the shape that the generated translation unit linked with this
// one registers. CMake builds this file once; each shape's program links the same object.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "train_commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"emergent, compiled for one shape"};
  app.require_subcommand(1);
  const emergent::cli::TrainCommands commands(app, /*compiler_info=*/"");
  CLI11_PARSE(app, argc, argv);
  try {
    commands.run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
