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

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
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
inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: ") + what +
                             " failed: " + cudaGetErrorString(status));
}

// The stream every launch and copy of the device code goes to: one per process, made on first
// use. It is a blocking stream (it waits for, and is waited on by, the legacy default stream that
// thrust::device_vector's own allocations and fills use), and the stream a step is captured on
// (cuda/step.cuh).
inline cudaStream_t device_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    check_cuda(cudaStreamCreate(&s), "cudaStreamCreate");
    return s;
  }();
  return stream;
}

// The host waits until the device has done everything asked of it so far.
inline void synchronize() {
  ++device_counts().syncs;
  check_cuda(cudaStreamSynchronize(device_stream()), "cudaStreamSynchronize");
}

template <class Functor>
__global__ void for_each_index_kernel(std::int64_t count, Functor f) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    f(i);
}
#else
inline void synchronize() { ++device_counts().syncs; }
#endif

// The CUDA-only kernels (warp-per-row LayerNorm and softmax, cuda/layernorm.cuh and
// cuda/dot_attention.cuh) each keep a Thrust twin: the for_each_index functor that defines their
// result and that the OpenMP build runs. With this set, the CUDA build runs the twins too (the
// GPU test compares the two).
inline bool& use_thrust_twins() {
  static bool twins = false;
  return twins;
}
inline bool run_cuda_kernel() { return EMERGENT_DEVICE_IS_CUDA && !use_thrust_twins(); }

#if EMERGENT_DEVICE_IS_CUDA
// The sum of v over the 32 lanes of a warp, every lane getting it, in a fixed butterfly order.
__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
// Launches kernel<<<...>>> with one warp per row for `rows` rows.
template <class... Params, class... Args>
void launch_warp_per_row(void (*kernel)(Params...), std::int64_t rows, Args... args) {
  if (rows <= 0) return;
  ++device_counts().launches;
  constexpr int kThreads = 256, kRowsPerBlock = kThreads / 32;
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  kernel<<<unsigned(blocks), kThreads, 0, device_stream()>>>(args...);
  check_cuda(cudaGetLastError(), "warp-per-row launch");
}
#endif

// f(i) for every i in [0, count), on the device. Under CUDA one kernel launch on
// device_stream() that the host does not wait for; under OpenMP thrust::for_each_n over the
// CPU's cores (which returns when it is done).
template <class Functor>
void for_each_index(std::int64_t count, Functor f) {
  if (count <= 0) return;
  ++device_counts().launches;
#if EMERGENT_DEVICE_IS_CUDA
  constexpr int kThreads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((count + kThreads - 1) / kThreads, 1 << 20);
  for_each_index_kernel<<<unsigned(blocks), kThreads, 0, device_stream()>>>(count, f);
  check_cuda(cudaGetLastError(), "for_each_index launch");
#else
  thrust::for_each_n(thrust::device, thrust::counting_iterator<std::int64_t>(0), count, f);
#endif
}

// x[i] = value for i in [0, count)
template <class T>
void fill(T* x, std::int64_t count, T value) {
  for_each_index(count, [=] EMERGENT_HD(std::int64_t i) { x[i] = value; });
}

// Copies between the host and a device buffer, in order with the launches: an upload does not
// wait for the device (the host memory is copied before the call returns); a download does.
template <class T>
void copy_to_device(std::span<const T> host, DeviceVector<T>& device) {
  ++device_counts().uploads;
  if (device.size() != host.size()) device.resize(host.size());
  if (host.empty()) return;
#if EMERGENT_DEVICE_IS_CUDA
  check_cuda(cudaMemcpyAsync(raw(device), host.data(), host.size() * sizeof(T),
                             cudaMemcpyHostToDevice, device_stream()),
             "cudaMemcpyAsync to the device");
  // pageable host memory: the copy has left `host` when cudaMemcpyAsync returns
#else
  thrust::copy(host.begin(), host.end(), device.begin());
#endif
}
// Writes a few host values (a step's scalars, one per member) to device memory as the arguments
// of launches, kPerLaunch values each: ordered with the launches like an upload, but no host
// memory is read later, so the host need not wait, and a captured graph that reads the memory
// sees each step's values.
template <class T, std::size_t N>
struct LaunchValues {
  T values[N];
};
template <class T>
void write_by_launches(std::span<const T> values, T* device) {
  constexpr std::size_t kPerLaunch = 64;
  for (std::size_t at = 0; at < values.size(); at += kPerLaunch) {
    LaunchValues<T, kPerLaunch> chunk{};
    const std::size_t n = std::min(values.size() - at, kPerLaunch);
    std::copy_n(values.data() + at, n, chunk.values);
    T* out = device + at;
    for_each_index(std::int64_t(n), [=] EMERGENT_HD(std::int64_t i) { out[i] = chunk.values[i]; });
  }
}

// Values [offset, offset + count) of a device buffer (the host waits for them).
template <class T>
std::vector<T> copy_to_host(const DeviceVector<T>& device, std::size_t offset, std::size_t count) {
  ++device_counts().syncs;
  std::vector<T> host(count);
  if (count == 0) return host;
#if EMERGENT_DEVICE_IS_CUDA
  check_cuda(cudaMemcpyAsync(host.data(), raw(device) + offset, count * sizeof(T),
                             cudaMemcpyDeviceToHost, device_stream()),
             "cudaMemcpyAsync to the host");
  check_cuda(cudaStreamSynchronize(device_stream()), "cudaStreamSynchronize");
#else
  thrust::copy(device.begin() + offset, device.begin() + offset + count, host.begin());
#endif
  return host;
}
template <class T>
std::vector<T> copy_to_host(const DeviceVector<T>& device) {
  return copy_to_host(device, 0, device.size());
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
