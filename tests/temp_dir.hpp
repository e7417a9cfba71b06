// A fresh folder under the system's temporary directory for one test, removed with everything in
// it when the object goes. Its name carries the test's tag, the process id and a counter, so that
// tests running at once (ctest -j, doctest's own cases) never share a folder.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& tag = "test") {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("emergent_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path operator/(const std::string& name) const { return path / name; }

  // Writes `text` to the file `name` in the folder and returns its path.
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    const std::filesystem::path file = path / name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }
};
