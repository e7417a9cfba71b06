// An exclusive lock on a run folder (<run>/.lock, flock), held while a process trains into it,
// so that a second process (a duplicated sweep shard, a second `emergent train --out` of the same
// folder) is refused instead of interleaving checkpoints and metric rows. The kernel drops the
// lock when its holder exits, however it exits, so a lock left by a killed process never blocks
// the resume. The file holds the holder's pid and host, for the message.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <emergent/core/error.hpp>
#include <filesystem>
#include <string>

namespace emergent {

class RunLock {
 public:
  explicit RunLock(const std::filesystem::path& run_dir) : path_(run_dir / ".lock") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    require(fd_ >= 0, path_.string(),
            std::string("cannot open the run lock: ") + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      char holder[128] = {};
      const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
      ::close(fd_);
      require(error != EWOULDBLOCK, run_dir.string(),
              "another process is training into this run folder (" +
                  std::string(n > 0 ? holder : "holder unknown") +
                  "); wait for it or choose another --out");
      throw Error(path_.string() + ": cannot lock: " + std::strerror(error));
    }
    char host[64] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string holder = "pid " + std::to_string(::getpid()) + " on " + host;
    if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, holder.data(), holder.size(), 0) < 0) {
      // the holder's name is only for messages
    }
  }
  ~RunLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Whether some process holds the lock of `run_dir` now (for `emergent sweep status`).
  static bool held(const std::filesystem::path& run_dir) {
    const std::filesystem::path path = run_dir / ".lock";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool busy = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(fd);
    return busy;
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Makes `run_dir` (if it is not there) and locks it: an Error naming it when it cannot be a
// run folder or another process holds it.
inline RunLock open_run_folder(const std::filesystem::path& run_dir) {
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  require(!error && std::filesystem::is_directory(run_dir), run_dir.string(),
          "cannot be the run folder; choose another --out");
  return RunLock(run_dir);
}

}  // namespace emergent
