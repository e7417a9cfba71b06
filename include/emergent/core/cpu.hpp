// The CPU this process runs on, read once through cpuid: its vendor, its model name (as
// /proc/cpuinfo prints it) and the size of its level-1 data cache. Kernels choose their
// blocking from it (nn/gemm.hpp) and the benchmarks print it with every result.
#pragma once

#include <unistd.h>

#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace emergent::cpu {

enum class Vendor { intel, amd, other };

struct Info {
  Vendor vendor = Vendor::other;
  std::string model;          // "Intel(R) Xeon(R) Processor", "AMD EPYC 9R45 ..."; "" unknown
  int l1d_bytes = 32 * 1024;  // per core; 32 KiB where neither cpuid nor the OS tells
};

inline const char* name(Vendor v) {
  switch (v) {
    case Vendor::intel:
      return "intel";
    case Vendor::amd:
      return "amd";
    default:
      return "other";
  }
}

namespace detail {
inline Info read_info() {
  Info info;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    if (std::strcmp(vendor, "GenuineIntel") == 0) info.vendor = Vendor::intel;
    if (std::strcmp(vendor, "AuthenticAMD") == 0) info.vendor = Vendor::amd;
  }
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      __get_cpuid(0x80000002u + leaf, &a, &b, &c, &d);
      const unsigned words[4] = {a, b, c, d};
      std::memcpy(brand + 16 * leaf, words, 16);
    }
    info.model = brand;
    const auto first = info.model.find_first_not_of(' ');
    const auto last = info.model.find_last_not_of(' ');
    info.model = first == std::string::npos ? "" : info.model.substr(first, last - first + 1);
  }
#endif
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  if (const long bytes = sysconf(_SC_LEVEL1_DCACHE_SIZE); bytes > 0)
    info.l1d_bytes = static_cast<int>(bytes);
#endif
  return info;
}
}  // namespace detail

inline const Info& info() {
  static const Info cached = detail::read_info();
  return cached;
}

}  // namespace emergent::cpu
