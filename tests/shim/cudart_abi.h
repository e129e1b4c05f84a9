/* The CUDA runtime calls the shim's CUDA tests make, declared from the
 * runtime's stable C ABI rather than cuda_runtime.h, so that they build
 * without the toolkit and link against the stand-in (cudart_standin.c). */
#ifndef RTACCEL_TESTS_SHIM_CUDART_ABI_H
#define RTACCEL_TESTS_SHIM_CUDART_ABI_H

#include <stddef.h>

typedef int cudaError_t;
typedef struct stream *cudaStream_t;
typedef struct event *cudaEvent_t;
typedef void *cudaGraph_t;
typedef struct {
	unsigned x, y, z;
} dim3;

cudaError_t __cudaLaunchKernel(const void *, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t cudaGraphLaunch(cudaGraph_t, cudaStream_t);
cudaError_t cudaMemcpy(void *, const void *, size_t, int);
cudaError_t cudaMemcpyAsync(void *, const void *, size_t, int, cudaStream_t);
cudaError_t cudaStreamSynchronize(cudaStream_t);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *, unsigned);
cudaError_t cudaStreamDestroy(cudaStream_t);
cudaError_t cudaEventCreate(cudaEvent_t *);
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t);
cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaEventQuery(cudaEvent_t);
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned);
cudaError_t cudaStreamBeginCapture(cudaStream_t, int);
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *);

#endif /* RTACCEL_TESTS_SHIM_CUDART_ABI_H */
