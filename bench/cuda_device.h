// What the CUDA benchmarks do where there is no GPU: say so on stdout, as
// "SKIP: no CUDA device: WHY", and exit 77, which tests and the GPU campaign
// take for a skip.
#ifndef RTACCEL_BENCH_CUDA_DEVICE_H
#define RTACCEL_BENCH_CUDA_DEVICE_H

#include <cuda_runtime.h>

#include <cstdio>

constexpr int kNoCudaDevice = 77;

// Whether a CUDA device is here; when not, prints why.
inline bool cuda_device_here() {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err == cudaSuccess && devices > 0) return true;
  printf("SKIP: no CUDA device: %s\n", err == cudaSuccess ? "none found" : cudaGetErrorString(err));
  return false;
}

#endif  // RTACCEL_BENCH_CUDA_DEVICE_H
