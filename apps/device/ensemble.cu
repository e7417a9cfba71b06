// emergent_ensemble_cuda: ensemble.cpp compiled by nvcc for Thrust's CUDA system.
#include "ensemble.cpp"
