// Where a training step's time goes, op by op: the profiling mode of the device code.
//
//   OpScope scope("attention.softmax");   // around the launches of one op
//
// When the profiler is enabled (OpProfiler::instance().enable(), or EMERGENT_DEVICE_PROFILE set
// for the ensemble programs), each scope records its device time (CUDA events on the stream the
// device code runs on; under the OpenMP system, where every launch blocks, the host's clock) and
// what it asked of the device (device_counts(): launches, GEMMs, host synchronisations, uploads).
// finish_step() waits for the device and adds the step's scopes to per-op totals. Scopes do not
// nest: one opened inside another is not recorded (its time and counts are the outer one's).
// Disabled, a scope costs two branches and records nothing; the counts are kept regardless.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <emergent/core/error.hpp>
#include <emergent/cuda/device_system.cuh>
#include <map>
#include <string>
#include <vector>

namespace emergent::cuda {

class OpProfiler {
 public:
  struct Totals {
    double ms = 0;  // device time
    std::int64_t calls = 0, launches = 0, gemms = 0, syncs = 0, uploads = 0;
  };

  static OpProfiler& instance() {
    static OpProfiler profiler;
    return profiler;
  }

  bool enabled() const { return enabled_; }
  void enable(bool on = true) { enabled_ = on; }

  void begin(const char* name) {
    if (!enabled_ || depth_++ > 0) return;
    Pending p;
    p.name = name;
    p.counts = device_counts();
#if EMERGENT_DEVICE_IS_CUDA
    p.start = event(2 * pending_.size());
    p.stop = event(2 * pending_.size() + 1);
    check_cuda(cudaEventRecord(p.start, device_stream()), "cudaEventRecord");
#else
    p.host_start = std::chrono::steady_clock::now();
#endif
    pending_.push_back(p);
  }

  void end() {
    if (!enabled_ || --depth_ > 0) return;
    Pending& p = pending_.back();
    const DeviceCounts now = device_counts();
    p.counts = {now.launches - p.counts.launches, now.gemms - p.counts.gemms,
                now.syncs - p.counts.syncs, now.uploads - p.counts.uploads};
#if EMERGENT_DEVICE_IS_CUDA
    check_cuda(cudaEventRecord(p.stop, device_stream()), "cudaEventRecord");
#else
    p.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p.host_start)
            .count();
#endif
  }

  // Waits for the device and adds the scopes since the last call to the totals (one step).
  void finish_step() {
    if (!enabled_) return;
#if EMERGENT_DEVICE_IS_CUDA
    check_cuda(cudaStreamSynchronize(device_stream()), "cudaStreamSynchronize");
#endif
    for (Pending& p : pending_) {
#if EMERGENT_DEVICE_IS_CUDA
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, p.start, p.stop), "cudaEventElapsedTime");
      p.ms = ms;
#endif
      Totals& t = totals_[p.name];
      if (t.calls == 0) order_.push_back(p.name);
      t.ms += p.ms;
      ++t.calls;
      t.launches += p.counts.launches;
      t.gemms += p.counts.gemms;
      t.syncs += p.counts.syncs;
      t.uploads += p.counts.uploads;
    }
    pending_.clear();
    ++steps_;
  }

  void reset() {
    totals_.clear();
    order_.clear();
    pending_.clear();
    depth_ = 0;
    steps_ = 0;
  }

  std::int64_t steps() const { return steps_; }
  // The ops in the order they first ran, with their totals over steps().
  std::vector<std::pair<std::string, Totals>> ops() const {
    std::vector<std::pair<std::string, Totals>> out;
    for (const std::string& name : order_) out.emplace_back(name, totals_.at(name));
    return out;
  }

  // A table: per op, device ms per step, share of the profiled time, launches, GEMMs and host
  // synchronisations per step.
  std::string table() const {
    double total = 0;
    Totals sum;
    for (const auto& [name, t] : totals_) {
      total += t.ms;
      sum.launches += t.launches;
      sum.gemms += t.gemms;
      sum.syncs += t.syncs;
      sum.uploads += t.uploads;
    }
    const double n = double(std::max<std::int64_t>(steps_, 1));
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-28s %10s %7s %9s %7s %7s\n", "op", "ms/step", "share",
                  "launches", "gemms", "syncs");
    out += line;
    for (const auto& [name, t] : ops()) {
      std::snprintf(line, sizeof line, "%-28s %10.4f %6.1f%% %9.1f %7.1f %7.1f\n", name.c_str(),
                    t.ms / n, total > 0 ? 100 * t.ms / total : 0.0, double(t.launches) / n,
                    double(t.gemms) / n, double(t.syncs) / n);
      out += line;
    }
    std::snprintf(line, sizeof line, "%-28s %10.4f %6.1f%% %9.1f %7.1f %7.1f\n", "all scopes",
                  total / n, 100.0, double(sum.launches) / n, double(sum.gemms) / n,
                  double(sum.syncs) / n);
    out += line;
    return out;
  }

 private:
  struct Pending {
    std::string name;
    DeviceCounts counts;
    double ms = 0;
#if EMERGENT_DEVICE_IS_CUDA
    cudaEvent_t start = nullptr, stop = nullptr;
#else
    std::chrono::steady_clock::time_point host_start;
#endif
  };

#if EMERGENT_DEVICE_IS_CUDA
  // Events are made once and reused, step after step.
  cudaEvent_t event(std::size_t i) {
    while (events_.size() <= i) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreate(&e), "cudaEventCreate");
      events_.push_back(e);
    }
    return events_[i];
  }
  std::vector<cudaEvent_t> events_;
#endif

  bool enabled_ = false;
  int depth_ = 0;
  std::int64_t steps_ = 0;
  std::vector<Pending> pending_;
  std::map<std::string, Totals> totals_;
  std::vector<std::string> order_;
};

// Records one op between its construction and its destruction (see OpProfiler).
class OpScope {
 public:
  explicit OpScope(const char* name) { OpProfiler::instance().begin(name); }
  ~OpScope() { OpProfiler::instance().end(); }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
};

}  // namespace emergent::cuda
