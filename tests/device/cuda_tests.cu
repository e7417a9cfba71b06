// The device tests compiled by nvcc for Thrust's CUDA system: the same files as
// emergent_device_tests (main.cpp says how they differ), in one translation unit.
#include "main.cpp"
#include "test_device_counts.cpp"
#include "test_device_mixer_dot_attention.cpp"
#include "test_device_mixer_gated_deltanet.cpp"
#include "test_device_mixer_mamba.cpp"
#include "test_device_mixer_mlp_mixer.cpp"
#include "test_device_mixer_rwkv.cpp"
#include "test_device_model.cpp"
#include "test_device_ops.cpp"
#include "test_device_twins.cpp"
