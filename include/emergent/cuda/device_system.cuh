// The device system the code of cuda/ runs on, chosen when it is compiled:
//   nvcc                 Thrust's CUDA system: the GPU, GEMMs through cuBLAS
//   g++ (or nvcc) with   THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP: Thrust's OpenMP system,
//                        the CPU's cores, GEMMs through Eigen
// The same functors run on either, so the OpenMP build tests the device code on every machine.
//
// Device code is written as functors over an index range: for_each_index(n, f) calls f(i) for
// i in [0, n) in any order and in parallel, so f(i) writes only what index i owns. Nothing here
// uses atomics: every reduction is a loop in a fixed order inside one index, so a seed gives the
// same numbers on every run.
#pragma once

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include <cstdint>
#include <span>
#include <vector>

#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
#define EMERGENT_DEVICE_IS_CUDA 1
#include <cuda_runtime.h>
#else
#define EMERGENT_DEVICE_IS_CUDA 0
#endif

// Marks functions and lambdas that run on the device (empty for a host compiler).
#if defined(__CUDACC__)
#define EMERGENT_HD __host__ __device__
#else
#define EMERGENT_HD
#endif

namespace emergent::cuda {

// The name of the device system, for results and messages: "cuda" or "thrust-omp".
inline constexpr const char* kDeviceSystem = EMERGENT_DEVICE_IS_CUDA ? "cuda" : "thrust-omp";

template <class T>
using DeviceVector = thrust::device_vector<T>;

template <class T>
T* raw(DeviceVector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}
template <class T>
const T* raw(const DeviceVector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}

// f(i) for every i in [0, count), on the device.
template <class Functor>
void for_each_index(std::int64_t count, Functor f) {
  if (count <= 0) return;
  thrust::for_each_n(thrust::device, thrust::counting_iterator<std::int64_t>(0), count, f);
}

template <class T>
void copy_to_device(std::span<const T> host, DeviceVector<T>& device) {
  device.resize(host.size());
  thrust::copy(host.begin(), host.end(), device.begin());
}
template <class T>
std::vector<T> copy_to_host(const DeviceVector<T>& device) {
  std::vector<T> host(device.size());
  thrust::copy(device.begin(), device.end(), host.begin());
  return host;
}
// Values [offset, offset + count) of a device buffer.
template <class T>
std::vector<T> copy_to_host(const DeviceVector<T>& device, std::size_t offset, std::size_t count) {
  std::vector<T> host(count);
  thrust::copy(device.begin() + offset, device.begin() + offset + count, host.begin());
  return host;
}

// Whether this build can run its device code here: always under OpenMP; under CUDA when a GPU
// is visible.
inline bool device_available() {
#if EMERGENT_DEVICE_IS_CUDA
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
#else
  return true;
#endif
}

}  // namespace emergent::cuda
