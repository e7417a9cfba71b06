// Result rows: one JSON line per finished run, appended and flushed to disk as it finishes,
// never rewritten. A kill can at worst leave the last line cut short: readers ignore a last line
// without its newline, and the next append first cuts it off, so that every complete row stays
// readable and none is glued to a fragment. A write that fails (a full disk, a file-size limit)
// is an Error naming the file; the rows before it are untouched.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <emergent/core/error.hpp>
#include <emergent/io/text_file.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent {

inline void append_row(const std::filesystem::path& path, const nlohmann::json& row) {
  const std::string line = row.dump() + "\n";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  require(fd >= 0, path.string(),
          std::string("cannot open the result rows: ") + std::strerror(errno));
  ::flock(fd, LOCK_EX);  // one writer at a time, also across processes sharing the file
  struct stat info {};
  if (::fstat(fd, &info) == 0 && info.st_size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, info.st_size - 1) == 1 && last != '\n') {
      // A row cut by a kill: drop it (its run has no row, so it runs again).
      std::string tail(static_cast<std::size_t>(std::min<off_t>(info.st_size, 1 << 20)), '\0');
      const off_t start = info.st_size - static_cast<off_t>(tail.size());
      const ssize_t n = ::pread(fd, tail.data(), tail.size(), start);
      const std::size_t newline =
          n > 0 ? tail.rfind('\n', static_cast<std::size_t>(n) - 1) : std::string::npos;
      const off_t keep = newline == std::string::npos ? 0 : start + static_cast<off_t>(newline) + 1;
      require(::ftruncate(fd, keep) == 0, path.string(), "cannot cut off a partial row");
    }
  }
  const std::size_t written = write_until_error(fd, line.data(), line.size());
  if (written < line.size()) {
    const std::string reason = std::strerror(errno);
    // Leave no fragment behind: the file ends with its last complete row again.
    if (::ftruncate(fd, ::lseek(fd, 0, SEEK_END) - static_cast<off_t>(written)) != 0) {
    }
    ::close(fd);
    throw Error(path.string() + ": cannot append a result row (" + reason +
                "); the earlier rows are intact");
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  require(synced, path.string(), "cannot flush the result rows to disk");
}

// The complete rows of a file (none if it does not exist).
inline std::vector<nlohmann::json> read_rows(const std::filesystem::path& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path, std::ios::binary);
  if (!in) return rows;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t start = 0, number = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // a row cut by a kill
    ++number;
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    try {
      rows.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      throw Error(path.string() + ": line " + std::to_string(number) + " is not a JSON row (" +
                  e.what() + ")");
    }
  }
  return rows;
}

}  // namespace emergent
