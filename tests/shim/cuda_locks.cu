// A CUDA program that launches kernels and copies memory from many threads at
// once: the workload of the ECRTS'24 paper's Fig. 9/10. Run it under
// `rtaccel shim --trace` to see which pthread locks cudaLaunchKernel and
// cudaMemcpyAsync take. Without a GPU it reports the CUDA error and exits 0,
// after the runtime's own initialisation has run (and taken its locks).
//
//   cuda_locks [THREADS] [ITERATIONS]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

__global__ void scale(float *data, int n, float factor)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		data[i] *= factor;
}

static bool check(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return true;
	std::printf("%s: %s\n", what, cudaGetErrorString(err));
	return false;
}

static void worker(int iterations, int n, bool *ok)
{
	cudaStream_t stream;
	float *dev = nullptr, *host = nullptr;
	*ok = check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate") &&
	      check(cudaMalloc(&dev, n * sizeof(float)), "cudaMalloc") &&
	      check(cudaMallocHost(&host, n * sizeof(float)), "cudaMallocHost");
	if (!*ok)
		return;
	for (int i = 0; i < n; i++)
		host[i] = 1.0f;
	for (int it = 0; it < iterations && *ok; it++) {
		*ok = check(cudaMemcpyAsync(dev, host, n * sizeof(float), cudaMemcpyHostToDevice, stream),
			    "cudaMemcpyAsync H2D");
		scale<<<(n + 255) / 256, 256, 0, stream>>>(dev, n, 2.0f);
		*ok = *ok && check(cudaGetLastError(), "cudaLaunchKernel");
		*ok = *ok && check(cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost,
						   stream), "cudaMemcpyAsync D2H");
		*ok = *ok && check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
	}
	if (*ok && host[0] != static_cast<float>(1 << iterations))
		*ok = false;
	cudaFreeHost(host);
	cudaFree(dev);
	cudaStreamDestroy(stream);
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? std::atoi(argv[1]) : 16;
	int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
	if (threads < 1 || threads > 1024 || iterations < 1 || iterations > 30) {
		std::fprintf(stderr, "usage: cuda_locks [THREADS 1..1024] [ITERATIONS 1..30]\n");
		return 2;
	}
	int devices = 0;
	if (!check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount") || devices == 0) {
		std::printf("no CUDA device: nothing launched\n");
		return 0;
	}
	std::vector<std::thread> pool;
	std::vector<char> ok(threads, 0);
	for (int t = 0; t < threads; t++)
		pool.emplace_back(worker, iterations, 1 << 20, reinterpret_cast<bool *>(&ok[t]));
	for (auto &t : pool)
		t.join();
	for (int t = 0; t < threads; t++)
		if (!ok[t]) {
			std::printf("thread %d failed\n", t);
			return 1;
		}
	std::printf("%d threads x %d launches and copies: ok\n", threads, iterations);
	return 0;
}
