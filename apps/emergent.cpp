// The `emergent` command line:
//   emergent train --task linear-map --S 16 --s 3 --steps 10000 --lr 1e-3 --seed 0 --out runs/NAME
//   emergent eval --checkpoint runs/NAME/step_010000.safetensors [--batch 256] [--write-batch F]
//   emergent sweep FILE --out DIR [--jobs N] [--shard I/N]     (cli/sweep_commands.hpp)
//   emergent sweep status|collect|summarize DIR ...
//   emergent spt --pretrain-steps 2000 --steps 4000 --out runs/NAME (cli/spt_commands.hpp)
//   emergent listops --min-length 100 --max-length 500 --count 10
//   emergent lm --corpus runs/corpus --layers 2 --d-model 64 --out runs/NAME (cli/lm_commands.hpp)
//   emergent shapes
//   emergent pythia curve | emergence | patch | prompts | attention ...  (cli/pythia_commands.hpp)
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>

#include "cli/lm_commands.hpp"
#include "cli/parse_command_line.hpp"
#include "cli/pythia_commands.hpp"
#include "cli/spt_commands.hpp"
#include "cli/sweep_commands.hpp"
#include "cli/train_commands.hpp"

#ifndef EMERGENT_SHAPE_COMPILER_INFO
#define EMERGENT_SHAPE_COMPILER_INFO ""
#endif

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) then fails the write with EFBIG, which is reported, instead of
  // killing the process in the middle of it.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"emergent: emergence of sparse attention patterns in tiny sequence models"};
  app.require_subcommand(1);
  const emergent::cli::TrainCommands train(app, EMERGENT_SHAPE_COMPILER_INFO);
  const emergent::cli::SweepCommands sweep(app, EMERGENT_SHAPE_COMPILER_INFO);
  app.add_subcommand("shapes", "list the prebuilt shapes (others are compiled on demand)");
  const emergent::cli::PythiaCommands pythia(app);
  const emergent::cli::SelfPretrainingCommands spt(app);
  const emergent::cli::LanguageModelCommands lm(app);

  if (const auto stop = emergent::cli::parse_command_line(app, argc, argv)) return *stop;
  try {
    if (train.selected()) {
      train.run(argc, argv);
    } else if (sweep.selected()) {
      return sweep.run();
    } else if (pythia.selected()) {
      pythia.run();
    } else if (spt.selected()) {
      spt.run();
    } else if (lm.selected()) {
      lm.run();
    } else {
      for (const auto& e : emergent::cli::shape_registry())
        std::printf("%s  (%zu parameters)\n", emergent::cli::describe(e.mixer, e.shape).c_str(),
                    e.parameters);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
