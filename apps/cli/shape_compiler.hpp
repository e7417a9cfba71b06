// Shapes compiled on demand. A model is a type, so a (mixer, shape) outside the prebuilt
// registry needs its own instantiation: a generated translation unit registers that one shape
// (apps/registry/registry.hpp), is compiled with exactly the command CMake used for the
// registry's own translation units (read from compile_commands.json), and is linked with the
// prebuilt main of cli/shape_program.cpp. The program is cached under a key of everything that
// goes into it: the generated source, the compile command (compiler and flags), the link flags,
// the prebuilt object and the library's headers. The same command line then runs there.
//
// Cache: $EMERGENT_SHAPE_CACHE, else $XDG_CACHE_HOME/emergent/shapes, else
// ~/.cache/emergent/shapes; one folder per key holding shape.cpp, build.log and the program.
// Concurrent compiles of one key (two sweep jobs) wait for each other on a lock, then share.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <emergent/core/error.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/io/sha256.hpp>
#include <emergent/settings/mixer_catalog.hpp>
#include <emergent/train/config.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../registry/registry.hpp"

extern char** environ;

namespace emergent::cli {

namespace shape_compiler_detail {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), path.string(), "cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A compile_commands.json "command" split into arguments (CMake quotes with "..." and \").
inline std::vector<std::string> split_command(const std::string& command) {
  std::vector<std::string> args;
  std::string current;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char ch = command[i];
    if (ch == '\\' && i + 1 < command.size()) {
      current += command[++i];
      any = true;
    } else if (ch == '"') {
      quoted = !quoted;
      any = true;
    } else if (ch == ' ' && !quoted) {
      if (any) args.push_back(current);
      current.clear();
      any = false;
    } else {
      current += ch;
      any = true;
    }
  }
  if (any) args.push_back(current);
  return args;
}

// Runs argv[0] with its output into `log`; returns the exit status (-1 if it did not exit).
inline int run_logged(const std::vector<std::string>& argv, const std::filesystem::path& log,
                      const std::filesystem::path& directory) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> command = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"",
                                      directory.string()};
  command.insert(command.end(), argv.begin(), argv.end());
  std::vector<char*> raw;
  for (std::string& a : command) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  require(rc == 0, argv.front(), "cannot start the compiler");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::filesystem::path cache_root() {
  if (const char* dir = std::getenv("EMERGENT_SHAPE_CACHE"); dir && *dir) return dir;
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir)
    return std::filesystem::path(dir) / "emergent" / "shapes";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "emergent" / "shapes";
  return std::filesystem::temp_directory_path() / "emergent-shapes";
}

// The bytes of every header of the library and the CLI, in a fixed order.
inline void hash_tree(Sha256& hash, const std::filesystem::path& root) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    hash.update(f.lexically_relative(root).string());
    hash.update(read_file(f));
  }
}

// The files below source_dir that `artifact` was compiled from, read from the compiler's depfile
// beside it (ARTIFACT.d, relative paths from `directory`); every file below the library's header
// trees where there is no depfile (a generator that consumes them, such as Ninja).
inline std::vector<std::filesystem::path> artifact_inputs(const std::filesystem::path& artifact,
                                                          const std::filesystem::path& directory,
                                                          const std::filesystem::path& source_dir) {
  std::vector<std::filesystem::path> inputs;
  std::filesystem::path depfile = artifact;
  depfile += ".d";
  if (!std::filesystem::exists(depfile)) {
    for (const char* tree : {"include/emergent", "apps/registry"})
      for (const auto& entry : std::filesystem::recursive_directory_iterator(source_dir / tree))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    return inputs;
  }
  const std::string text = read_file(depfile);
  std::string word;
  bool target_done = false;
  const std::string root = source_dir.string() + "/";
  auto finish_word = [&] {
    if (!target_done) {
      target_done = !word.empty() && word.back() == ':';
    } else if (!word.empty()) {
      const std::filesystem::path input = directory / word;  // an absolute word stays itself
      if (input.string().starts_with(root)) inputs.push_back(input);
    }
    word.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == ' ') {
      word += ' ';
      ++i;
    } else if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(text[i]))) {
      finish_word();
    } else {
      word += text[i];
    }
  }
  finish_word();
  return inputs;
}

// A header edited after the build would meet the build's precompiled header and prebuilt
// program object, both made from the old one (redefinitions, or a program whose two halves
// disagree): refused, naming the header. Each artifact is compared with the files it was made
// from, so an edit to a header that neither includes does not count.
inline void require_built_from_current_sources(
    const std::filesystem::path& source_dir, const std::filesystem::path& directory,
    const std::vector<std::filesystem::path>& artifacts) {
  for (const std::filesystem::path& artifact : artifacts) {
    const auto built = std::filesystem::last_write_time(artifact);
    for (const std::filesystem::path& input : artifact_inputs(artifact, directory, source_dir))
      require(!std::filesystem::exists(input) || std::filesystem::last_write_time(input) <= built,
              input.string(),
              "changed after the program was built; rebuild (make build) before compiling a "
              "shape that is not prebuilt");
  }
}

// The precompiled header that a compile command's "-include HEADER" uses (HEADER.gch), if any.
inline std::vector<std::filesystem::path> precompiled_headers(
    const std::vector<std::string>& flags, const std::filesystem::path& directory) {
  std::vector<std::filesystem::path> found;
  for (std::size_t i = 0; i + 1 < flags.size(); ++i)
    if (flags[i] == "-include") {
      std::filesystem::path gch = directory / flags[i + 1];
      gch += ".gch";
      if (std::filesystem::exists(gch)) found.push_back(gch);
    }
  return found;
}

// A Shape as a C++ expression, for generated translation units.
inline std::string shape_literal(const Shape& s) {
  return "emergent::Shape{.vocab = " + std::to_string(s.vocab) +
         ", .d_model = " + std::to_string(s.d_model) + ", .heads = " + std::to_string(s.heads) +
         ", .layers = " + std::to_string(s.layers) + ", .d_ff = " + std::to_string(s.d_ff) +
         ", .max_len = " + std::to_string(s.max_len) + "}";
}

}  // namespace shape_compiler_detail

// The translation unit that registers (mixer, shape).
inline std::string shape_source(const std::string& mixer, const Shape& s) {
  const MixerInfo& info = find_mixer(mixer, "shape compiler");
  std::string source =
      "// Generated by `emergent` (apps/cli/shape_compiler.hpp): " + describe(mixer, s) + "\n";
  for (const std::string& header : info.headers) source += "#include <" + header + ">\n";
  source += "\n#include \"registry/registry.hpp\"\n\nnamespace {\n";
  source += "constexpr emergent::Shape kShape = " + shape_compiler_detail::shape_literal(s) + ";\n";
  source += "const emergent::cli::RegisterShape entry{emergent::cli::make_entry<" +
            info.mixer_template + ", kShape, " + info.channel_template + ">()};\n}  // namespace\n";
  return source;
}

namespace shape_compiler_detail {

// shape_compiler.json (written by CMake), and the compile command of `reference_source` from the
// build's compile_commands.json without its "-o OBJECT" and "-c SOURCE".
struct BuildCommand {
  std::filesystem::path source_dir;
  std::vector<std::string> flags;
  std::string directory;
};
inline nlohmann::json read_compiler_info(const std::filesystem::path& compiler_info) {
  try {
    return nlohmann::json::parse(read_file(compiler_info));
  } catch (const nlohmann::json::exception& e) {
    throw Error(compiler_info.string() + ": not valid JSON (" + e.what() + ")");
  }
}
inline BuildCommand build_command(const nlohmann::json& info, const std::string& reference) {
  BuildCommand b{info.at("source_dir").get<std::string>(), {}, {}};
  const std::string commands_file = info.at("compile_commands").get<std::string>();
  nlohmann::json commands;
  try {
    commands = nlohmann::json::parse(read_file(commands_file));
  } catch (const nlohmann::json::exception& e) {
    throw Error(commands_file + ": not valid JSON (" + e.what() + ")");
  }
  std::vector<std::string> compile;
  for (const auto& c : commands)
    if (c.at("file").get<std::string>() == reference) {
      compile = split_command(c.at("command").get<std::string>());
      b.directory = c.at("directory").get<std::string>();
    }
  require(!compile.empty(), commands_file,
          "holds no command for " + reference + "; rebuild the project (make build)");
  for (std::size_t i = 0; i < compile.size(); ++i) {
    if (compile[i] == "-o" || compile[i] == "-c") {
      ++i;
      continue;
    }
    b.flags.push_back(compile[i]);
  }
  return b;
}

// The program built from the generated translation unit `source` (saved as folder/source_name)
// with `b`'s flags, linked with `objects` and `link_flags`: from the cache if it is there, else
// compiled now. Its folder is cache_root()/<stem>-<key>, the key a hash of everything that goes
// into it (the source, the flags, the objects and the header trees `trees` below source_dir).
inline std::filesystem::path cached_program(const std::string& what, const std::string& stem,
                                            const std::string& source,
                                            const std::string& source_name, const BuildCommand& b,
                                            const std::vector<std::string>& objects,
                                            const std::vector<std::string>& link_flags,
                                            const std::vector<std::string>& trees) {
  std::vector<std::filesystem::path> artifacts = precompiled_headers(b.flags, b.directory);
  artifacts.insert(artifacts.end(), objects.begin(), objects.end());
  require_built_from_current_sources(b.source_dir, b.directory, artifacts);
  Sha256 hash;
  hash.update(source);
  for (const std::string& f : b.flags) hash.update(f + '\0');
  for (const std::string& f : link_flags) hash.update(f + '\0');
  for (const std::string& o : objects) hash.update(read_file(o));
  for (const std::string& tree : trees) hash_tree(hash, b.source_dir / tree);
  const std::filesystem::path folder =
      cache_root() / (stem + "-" + hash.hex_digest().substr(0, 16));
  const std::filesystem::path program = folder / "program";
  if (std::filesystem::exists(program)) return program;

  std::filesystem::create_directories(folder);
  const int lock = ::open((folder / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  require(lock >= 0, folder.string(), "cannot create the compile lock");
  ::flock(lock, LOCK_EX);  // another process may be compiling this very program: wait for it
  if (std::filesystem::exists(program)) {
    ::close(lock);
    return program;
  }
  std::fprintf(stderr, "compiling %s (cached for next time in %s) ...\n", what.c_str(),
               folder.string().c_str());
  const auto started = std::chrono::steady_clock::now();
  {
    std::ofstream out(folder / source_name);
    out << source;
  }
  const std::filesystem::path log = folder / "build.log";
  std::filesystem::remove(log);
  std::vector<std::string> compile_command = b.flags;
  compile_command.push_back("-I" + (b.source_dir / "apps").string());
  for (const std::string& a : {std::string("-o"), (folder / "program.o").string(),
                               std::string("-c"), (folder / source_name).string()})
    compile_command.push_back(a);
  const bool compiled = run_logged(compile_command, log, b.directory) == 0;
  std::vector<std::string> link_command = {b.flags.front(), (folder / "program.o").string()};
  link_command.insert(link_command.end(), objects.begin(), objects.end());
  link_command.insert(link_command.end(), link_flags.begin(), link_flags.end());
  link_command.push_back("-o");
  link_command.push_back((folder / "program.tmp").string());
  const bool linked = compiled && run_logged(link_command, log, b.directory) == 0;
  if (!linked) {
    ::close(lock);
    throw Error("compiling " + what + " failed; the compiler's output is in " + log.string());
  }
  std::filesystem::rename(folder / "program.tmp", program);
  std::filesystem::remove(folder / "program.o");
  ::close(lock);
  std::fprintf(stderr, "compiled %s in %.1f s\n", what.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return program;
}

inline std::string shape_stem(const std::string& mixer, const Shape& shape) {
  return mixer + "-V" + std::to_string(shape.vocab) + "-D" + std::to_string(shape.d_model) + "-H" +
         std::to_string(shape.heads) + "-L" + std::to_string(shape.layers) + "-F" +
         std::to_string(shape.d_ff) + "-T" + std::to_string(shape.max_len);
}

}  // namespace shape_compiler_detail

// The cached program for (mixer, shape), compiled first if it is not there.
inline std::filesystem::path compiled_shape_program(const std::filesystem::path& compiler_info,
                                                    const std::string& mixer, const Shape& shape) {
  namespace detail = shape_compiler_detail;
  require(shape.valid(), describe(mixer, shape),
          "is not a valid shape (heads must divide d_model)");
  const nlohmann::json info = detail::read_compiler_info(compiler_info);
  const detail::BuildCommand b =
      detail::build_command(info, info.at("reference_source").get<std::string>());
  return detail::cached_program(
      describe(mixer, shape), detail::shape_stem(mixer, shape), shape_source(mixer, shape),
      "shape.cpp", b, info.at("program_objects").get<std::vector<std::string>>(),
      info.at("link_flags").get<std::vector<std::string>>(), {"include/emergent", "apps/registry"});
}

// The device backend's program (apps/device/ensemble.cpp, its ensemble.cu under CUDA) compiled
// for one (mixer, shape) that the prebuilt emergent_ensemble_<backend> lacks: the program's own
// source with EMERGENT_DEVICE_SHAPE, _MIXER and _CHANNEL defined, with the build's command
// for that program; cached as shapes are.
inline std::filesystem::path compiled_device_program(const std::filesystem::path& compiler_info,
                                                     const std::string& backend,
                                                     const std::string& mixer, const Shape& shape) {
  namespace detail = shape_compiler_detail;
  const std::string what = describe(mixer, shape) + " for --backend " + backend;
  require(!compiler_info.empty(), what,
          "is not compiled into this build's device program, and this program cannot compile it");
  require(shape.valid(), what, "is not a valid shape (heads must divide d_model)");
  const nlohmann::json info = detail::read_compiler_info(compiler_info);
  require(info.contains("device") && info["device"].contains(backend), compiler_info.string(),
          "names no device program for --backend " + backend + "; rebuild (make build)");
  const nlohmann::json& device = info["device"][backend];
  const std::string reference = device.at("reference_source").get<std::string>();
  const detail::BuildCommand b = detail::build_command(info, reference);
  const MixerInfo& m = find_mixer(mixer, "--backend " + backend);
  const std::string source =
      "// Generated by `emergent` (apps/cli/shape_compiler.hpp): the device program for " + what +
      "\n#define EMERGENT_DEVICE_SHAPE " + detail::shape_literal(shape) +
      "\n#define EMERGENT_DEVICE_MIXER " + m.mixer_template + "\n#define EMERGENT_DEVICE_CHANNEL " +
      m.channel_template + "\n#include \"" + reference + "\"\n";
  const std::string extension = std::filesystem::path(reference).extension().string();
  return detail::cached_program(what, backend + "-" + detail::shape_stem(mixer, shape), source,
                                "program" + extension, b, {},
                                device.at("link_flags").get<std::vector<std::string>>(),
                                {"include/emergent", "apps/registry", "apps/device", "apps/cli"});
}

// Replaces this process by `program` with the same arguments.
[[noreturn]] inline void exec_program(const std::filesystem::path& program, int argc, char** argv) {
  std::vector<std::string> args = {program.string()};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> raw;
  for (std::string& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(program.c_str(), raw.data());
  throw Error(program.string() +
              ": cannot run the compiled shape program: " + std::strerror(errno));
}

}  // namespace emergent::cli
