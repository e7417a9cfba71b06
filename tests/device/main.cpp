// The doctest main of the device tests: the code of include/emergent/cuda/ built for Thrust's
// OpenMP system by g++ (emergent_device_tests, on every machine) and for CUDA by nvcc
// (emergent_cuda_tests, from cuda_tests.cu, which includes these files), each op against the
// Eigen reference. The CUDA build exits 77 (ctest: skipped) where there is no GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <emergent/cuda/device_system.cuh>

int main(int argc, char** argv) {
  if (!emergent::cuda::device_available()) {
    std::printf("skipped: no GPU\n");
    return 77;
  }
  std::printf("device system: %s\n", emergent::cuda::kDeviceSystem);
  doctest::Context context(argc, argv);
  return context.run();
}
