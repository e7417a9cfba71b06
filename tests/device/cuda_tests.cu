// The device tests compiled by nvcc for Thrust's CUDA system: the same files as
// emergent_device_tests (main.cpp says how they differ), in one translation unit.
#include "main.cpp"
#include "test_device_counts.cpp"
#include "test_device_mixers.cpp"
#include "test_device_model.cpp"
#include "test_device_ops.cpp"
#include "test_device_twins.cpp"
