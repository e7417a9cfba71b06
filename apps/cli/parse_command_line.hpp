// The command line parsed as every emergent program reports errors: a wrong flag, value or
// command is one line and exit 1 (CLI11's own codes are 100 and up), naming the commands where
// the command is wrong; --help prints and exits 0.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace emergent::cli {

// Parses argv into `app`; the exit code to return with, if the program should stop here.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "";
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::string message = e.what();
    if (app.get_subcommands().empty()) {  // no command was recognised: list them
      std::string commands;
      bool known = false;
      for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
        commands += (commands.empty() ? "" : ", ") + command->get_name();
        known |= argc > 1 && command->get_name() == argv[1];
      }
      if (argc > 1 && argv[1][0] != '-' && !known)
        message = "'" + std::string(argv[1]) + "' is not a command";
      if (!commands.empty()) message += " (commands: " + commands + ")";
      message += "; `" + program + " --help` says more";
    } else {
      message += "; `" + program + " " + app.get_subcommands().front()->get_name() +
                 " --help` lists its options";
    }
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 1;
  }
}

}  // namespace emergent::cli
