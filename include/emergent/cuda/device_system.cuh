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

// What the device code has asked of the device since the counts were last reset, counted by the
// calls themselves (so the same on every system): kernel launches (for_each_index and each GEMM),
// of them the GEMMs, host synchronisations (the host waits for the device: a device-to-host copy,
// or a launch that blocks until it is done), and host-to-device copies.
struct DeviceCounts {
  std::int64_t launches = 0, gemms = 0, syncs = 0, uploads = 0;
};
inline DeviceCounts& device_counts() {
  static DeviceCounts counts;
  return counts;
}

template <class T>
T* raw(DeviceVector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}
template <class T>
const T* raw(const DeviceVector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}

#if EMERGENT_DEVICE_IS_CUDA
// The stream every launch and copy of the device code goes to.
inline cudaStream_t device_stream() { return 0; }
#endif

// f(i) for every i in [0, count), on the device.
template <class Functor>
void for_each_index(std::int64_t count, Functor f) {
  if (count <= 0) return;
  ++device_counts().launches;
  ++device_counts().syncs;  // thrust::device blocks until the launch is done
  thrust::for_each_n(thrust::device, thrust::counting_iterator<std::int64_t>(0), count, f);
}

// x[i] = value for i in [0, count)
template <class T>
void fill(T* x, std::int64_t count, T value) {
  for_each_index(count, [=] EMERGENT_HD(std::int64_t i) { x[i] = value; });
}

template <class T>
void copy_to_device(std::span<const T> host, DeviceVector<T>& device) {
  ++device_counts().uploads;
  device.resize(host.size());
  thrust::copy(host.begin(), host.end(), device.begin());
}
template <class T>
std::vector<T> copy_to_host(const DeviceVector<T>& device) {
  ++device_counts().syncs;
  std::vector<T> host(device.size());
  thrust::copy(device.begin(), device.end(), host.begin());
  return host;
}
// Values [offset, offset + count) of a device buffer.
template <class T>
std::vector<T> copy_to_host(const DeviceVector<T>& device, std::size_t offset, std::size_t count) {
  ++device_counts().syncs;
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
