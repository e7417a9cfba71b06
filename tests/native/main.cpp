// The doctest main of emergent_native_tests: the suites in tests/native/ check the code paths
// that exist only in builds for the machine (-O3 -march=native, as the programs are built): the
// AVX-512 GEMM and attention kernels, alone and inside whole models. emergent_tests is built
// portable (its golden fixtures compare bits) and so runs the Eigen and generic paths instead.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
