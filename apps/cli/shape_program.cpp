// The main of a program compiled on demand for one shape (cli/shape_compiler.hpp): `train` and
// `eval` as in `emergent`, for the shape that the generated translation unit linked with this
// one registers. CMake builds this file once; each shape's program links the same object.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>

#include "parse_command_line.hpp"
#include "train_commands.hpp"

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) then fails the write with EFBIG, which is reported, instead of
  // killing the process in the middle of it.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"emergent, compiled for one shape"};
  app.require_subcommand(1);
  const emergent::cli::TrainCommands commands(app, /*compiler_info=*/"");
  if (const auto stop = emergent::cli::parse_command_line(app, argc, argv)) return *stop;
  try {
    commands.run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
