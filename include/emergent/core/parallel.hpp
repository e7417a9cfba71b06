// Parallel loops over independent items (sequences, heads, rows) with OpenMP.
//
// A static schedule gives every thread the same contiguous share of the items on every call,
// so that a result that reduces within an item is bit-identical across runs with the same
// thread count. Built without OpenMP, the loops run serially.
#pragma once

#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace emergent {

inline int thread_count() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

inline void set_thread_count(int threads) {
#if defined(_OPENMP)
  if (threads > 0) omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

// Calls body(i) for i in [0, count), split statically across the threads.
template <class Body>
void parallel_for(std::int64_t count, Body&& body) {
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (count > 1)
#endif
  for (std::int64_t i = 0; i < count; ++i) body(i);
}

}  // namespace emergent
