// Small text files (config.json, summary.json, sweep.json) written atomically: to a temporary
// file of this process, flushed to disk, then renamed over the target, so that a kill or a full
// disk leaves the old file or the new one, never a mix, and two processes writing the same file
// never share a temporary.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <emergent/core/error.hpp>
#include <filesystem>
#include <string>

namespace emergent {

// Writes `size` bytes to fd, retrying short writes and EINTR; returns how many were written
// before an error (errno tells which), `size` when all were.
inline std::size_t write_until_error(int fd, const char* data, std::size_t size) {
  std::size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd, data + written, size - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  return written;
}

inline void write_text_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  require(fd >= 0, tmp.string(), std::string("cannot create: ") + std::strerror(errno));
  if (write_until_error(fd, text.data(), text.size()) < text.size()) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(path.string() + ": cannot write (" + reason + "); the previous file is unchanged");
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw Error(path.string() + ": cannot write (" + std::strerror(errno) +
                "); the previous file is unchanged");
  }
}

}  // namespace emergent
