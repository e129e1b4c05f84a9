// cuda backend: one CUDA context (the device's primary context) for the whole
// server; every worker thread owns a stream created at its bucket's device
// priority (cudaDeviceGetStreamPriorityRange), so the block scheduler starts
// a higher bucket's blocks before a lower bucket's waiting ones. Each worker
// waits for its own request through a blocking-sync event: it sleeps, and
// nothing synchronises the whole device. Client regions are page-locked with
// cudaHostRegister, so copies are DMA straight from and into shared memory.
//
// Built by nvcc into librtaccel_cuda.so, which rtaccel loads on demand
// (cuda_loader.cc): programs that never use CUDA do not need its libraries.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "accel/backend.h"
#include "accel/protocol.h"
#include "rtaccel/accel.h"
#include "rtaccel/requests.h"

namespace rtaccel::accel {
namespace {

// --- kernels --------------------------------------------------------------------

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every block spins for `slice_ns` from its own start. Launched as whole waves
// of the blocks that fit on the device at once, so the kernel takes about
// waves × slice_ns alone; a higher-priority stream's blocks take the place of
// the next wave's, so it waits at most about one slice (the GPU's preemption
// point for kernels of one context is the block boundary).
__global__ void busy_kernel(uint64_t slice_ns, unsigned int* sink) {
  const uint64_t start = global_ns();
  unsigned int x = threadIdx.x + 1;
  while (global_ns() - start < slice_ns) x = x * 1664525u + 1013904223u;
  if (x == 0x9e3779b9u) sink[0] = x;  // keeps the loop; practically never true
}

__global__ void vecadd_kernel(const float* a, const float* b, float* c, uint32_t n) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    c[i] = a[i] + b[i];
}

constexpr int kReduceThreads = 256;

// Sums in double, as the cpu service does, so results agree to rounding.
__global__ void reduction_kernel(const float* x, uint32_t n, double* total) {
  __shared__ double partial[kReduceThreads];
  double sum = 0;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    sum += x[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = kReduceThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, partial[0]);
}

// The cpu service's binning exactly: double arithmetic, NaN and values
// outside [lo, hi) dropped, the upper edge's rounding clamped.
__global__ void histogram_kernel(const float* x, uint32_t n, float lo, float hi, double scale,
                                 uint32_t bins, unsigned int* count) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = x[i];
    if (!(v >= lo && v < hi)) continue;
    uint64_t bin = uint64_t((double(v) - double(lo)) * scale);
    if (bin >= bins) bin = bins - 1;
    atomicAdd(&count[bin], 1u);
  }
}

// --- backend --------------------------------------------------------------------

// A service's key is its number in rtaccel/requests.h.
enum Service {
  kBusy = RTACCEL_BUSY,
  kVecadd = RTACCEL_VECADD,
  kMatmul = RTACCEL_MATMUL,
  kReduction = RTACCEL_REDUCTION,
  kHistogram = RTACCEL_HISTOGRAM,
  kServices = RTACCEL_BUILTINS
};
const char* const kNames[kServices] = {"busy", "vecadd", "matmul", "reduction", "histogram"};
constexpr uint64_t kBusySliceNs = 50000;
constexpr size_t kInitialScratch = 16u << 20;

std::string cuda_error(const char* what, cudaError_t err) {
  return std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}

std::atomic<uint64_t> g_backend_serial{1};

// What one thread needs to drive the device: a stream at its priority, the
// event it sleeps on, a cuBLAS handle bound to the stream, device memory.
struct Stream {
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;
  cublasHandle_t blas = nullptr;
  char* scratch = nullptr;
  size_t scratch_bytes = 0;
  int priority = 0;

  ~Stream() {
    if (blas) cublasDestroy(blas);
    if (scratch) cudaFree(scratch);
    if (done) cudaEventDestroy(done);
    if (stream) cudaStreamDestroy(stream);
  }
};

struct ThreadStream {
  uint64_t serial;
  Stream* stream;
};
// The streams this thread owns, by backend; set up once per thread.
thread_local std::vector<ThreadStream> t_streams;

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override {
    cudaSetDevice(device_);
    streams_.clear();
    if (sink_) cudaFree(sink_);
  }

  Status open(const BackendOptions& options) {
    options_ = options;
    device_ = options.device;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) return fail("no CUDA device", err);
    if (device_ < 0 || device_ >= count) {
      return Status::invalid("CUDA device " + std::to_string(device_) + " does not exist (found " + std::to_string(count) + ")");
    }
    if ((err = cudaSetDevice(device_)) != cudaSuccess) return fail("cudaSetDevice", err);
    cudaDeviceProp prop{};
    if ((err = cudaGetDeviceProperties(&prop, device_)) != cudaSuccess)
      return fail("cudaGetDeviceProperties", err);
    name_ = prop.name;
    // Lower numbers are higher priorities: greatest <= least.
    if ((err = cudaDeviceGetStreamPriorityRange(&least_, &greatest_)) != cudaSuccess)
      return fail("cudaDeviceGetStreamPriorityRange", err);
    const uint32_t available = uint32_t(least_ - greatest_) + 1;
    if (options.levels < 1 || options.levels > kMaxLevels) {
      return Status::error("priority levels must be 1.." + std::to_string(kMaxLevels));
    }
    levels_ = std::min(options.levels, available);
    int per_sm = 0;
    if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, busy_kernel, kBusyThreads, 0)) != cudaSuccess)
      return fail("cudaOccupancyMaxActiveBlocksPerMultiprocessor", err);
    busy_wave_ = uint32_t(std::max(1, per_sm * prop.multiProcessorCount));
    if ((err = cudaMalloc(&sink_, sizeof(unsigned int))) != cudaSuccess) return fail("cudaMalloc", err);
    // The context and the kernels' modules load now, not in the first request.
    if (auto s = stream_for_thread(0); !s) return s.status();
    rtaccel_busy_request warm{1000};
    rtaccel_service_call call{&warm, sizeof(warm), nullptr, 0, 0};
    if (run(kBusy, nullptr, nullptr, &call) != 0) {
      return Status::error("the busy kernel failed to run");
    }
    return Status();
  }

  std::string describe() const override {
    return "cuda device " + std::to_string(device_) + ": " + name_ + ", " + std::to_string(levels_) +
           " levels (stream priorities " + std::to_string(least_) + ".." + std::to_string(greatest_) + ")";
  }
  uint32_t levels() const override { return levels_; }
  // Stream priorities let a waiting higher-priority kernel's blocks go first
  // (block-level preemption), which is what the analysis's κ covers.
  bool preemptive() const override { return true; }

  Status prepare_worker(uint32_t bucket) override {
    if (options_.fifo_base > 0) {
      // The worker only launches and sleeps, but a higher bucket's worker
      // must still get the CPU before a lower one to submit first.
      if (Status st = set_worker_fifo(options_.fifo_base + int(bucket)); !st) return st;
    }
    if (options_.driver_core >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(options_.driver_core, &set);
      if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) {
        return Status::error(std::string("cannot pin a CUDA worker: ") + strerror(err));
      }
    }
    auto s = stream_for_thread(bucket);
    return s ? Status() : s.status();
  }

  int lookup(const char* service) const override {
    for (int k = 0; k < kServices; k++)
      if (strcmp(kNames[k], service) == 0) return k;
    return -1;
  }

  Status attach(void* base, size_t size, void** handle) override {
    cudaSetDevice(device_);
    const cudaError_t err = cudaHostRegister(base, size, cudaHostRegisterDefault);
    if (err != cudaSuccess) return fail("cudaHostRegister of a client region", err);
    *handle = base;
    return Status();
  }
  void detach(void* handle) override {
    if (!handle) return;
    cudaSetDevice(device_);
    cudaHostUnregister(handle);
  }

  int run(int key, void*, const void*, rtaccel_service_call* call) override {
    auto stream = stream_for_thread(0);  // a server worker has its own already
    if (!stream) return -EIO;
    Stream* s = *stream;
    call->response_len = 0;
    size_t response_len = 0;
    int status = submit(key, *s, call, &response_len);
    if (status != 0) {
      // Whatever was queued before the refusal still runs; wait for it.
      cudaStreamSynchronize(s->stream);
      return status;
    }
    cudaError_t err = cudaEventRecord(s->done, s->stream);
    if (err == cudaSuccess) err = cudaEventSynchronize(s->done);
    if (err != cudaSuccess) {
      fprintf(stderr, "rtaccel cuda backend: %s\n", cuda_error(kNames[key], err).c_str());
      return -EIO;
    }
    call->response_len = response_len;
    return 0;
  }

 private:
  static constexpr int kBusyThreads = 128;
  static constexpr int kThreads = 256;

  static Status fail(const char* what, cudaError_t err) { return Status::error(cuda_error(what, err)); }

  // The calling thread's stream, created at the bucket's priority the first
  // time: by prepare_worker() in a server worker, by the first call in a
  // direct-invocation thread (which then runs at the lowest priority).
  Expected<Stream*> stream_for_thread(uint32_t bucket) {
    for (const ThreadStream& t : t_streams)
      if (t.serial == serial_) return t.stream;
    auto refuse = [](const char* what, cudaError_t err) { return fail(what, err); };
    cudaError_t err = cudaSetDevice(device_);
    if (err != cudaSuccess) return refuse("cudaSetDevice", err);
    auto s = std::make_unique<Stream>();
    s->priority = least_ - int(std::min(bucket, levels_ - 1));
    if ((err = cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking, s->priority)) != cudaSuccess)
      return refuse("cudaStreamCreateWithPriority", err);
    if ((err = cudaEventCreateWithFlags(&s->done, cudaEventBlockingSync | cudaEventDisableTiming)) != cudaSuccess)
      return refuse("cudaEventCreateWithFlags", err);
    if ((err = cudaMalloc(&s->scratch, kInitialScratch)) != cudaSuccess)
      return refuse("cudaMalloc of a worker's scratch memory", err);
    s->scratch_bytes = kInitialScratch;
    if (cublasCreate(&s->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(s->blas, s->stream) != CUBLAS_STATUS_SUCCESS)
      return Status::error("cannot create a cuBLAS handle");
    Stream* out = s.get();
    {
      std::lock_guard<std::mutex> guard(mu_);
      streams_.push_back(std::move(s));
    }
    t_streams.push_back({serial_, out});
    return out;
  }

  // Device memory for one request; grows (rarely: set-up of a new size).
  bool reserve(Stream& s, size_t bytes) {
    if (bytes <= s.scratch_bytes) return true;
    const size_t want = std::max(bytes, 2 * s.scratch_bytes);
    cudaStreamSynchronize(s.stream);
    cudaFree(s.scratch);
    s.scratch = nullptr;
    s.scratch_bytes = 0;
    if (cudaMalloc(&s.scratch, want) != cudaSuccess) return false;
    s.scratch_bytes = want;
    return true;
  }

  static unsigned int blocks_for(uint64_t n, int threads) {
    return unsigned(std::clamp<uint64_t>((n + uint64_t(threads) - 1) / uint64_t(threads), 1, 65535));
  }

  // Checks the request as every backend does (rtaccel/requests.h, the header
  // read once from host memory), then queues copies and kernels on the stream.
  int submit(int key, Stream& s, rtaccel_service_call* call, size_t* response_len) {
    rtaccel_request_view v;
    if (rtaccel_request_decode(key, call->request, call->request_len, call->response_cap, &v) < 0) return -EINVAL;
    switch (key) {
      case kBusy: {
        if (v.n == 0) return 0;
        const uint64_t slice = std::min<uint64_t>(v.n, kBusySliceNs);
        const uint64_t waves = (v.n + slice - 1) / slice;
        // One launch per 65535 waves' worth of blocks keeps the grid legal.
        for (uint64_t left = waves; left > 0;) {
          const uint64_t now = std::min<uint64_t>(left, 65535);
          busy_kernel<<<unsigned(now * busy_wave_), kBusyThreads, 0, s.stream>>>(slice, sink_);
          left -= now;
        }
        return launched();
      }
      case kVecadd:
      case kMatmul: {
        const uint64_t count = key == kVecadd ? v.n : v.n * v.n;
        const uint64_t bytes = count * sizeof(float);
        if (count == 0) return 0;
        if (!reserve(s, 3 * bytes)) return -ENOMEM;
        float* a = reinterpret_cast<float*>(s.scratch);
        float* b = a + count;
        float* c = b + count;
        if (cudaMemcpyAsync(a, v.a, 2 * bytes, cudaMemcpyHostToDevice, s.stream) != cudaSuccess) return -EIO;
        if (key == kVecadd) {
          vecadd_kernel<<<blocks_for(count, kThreads), kThreads, 0, s.stream>>>(a, b, c, uint32_t(count));
          if (launched() != 0) return -EIO;
        } else {
          // cuBLAS is column-major: a row-major matrix is its transpose, and
          // (A·B)ᵀ = Bᵀ·Aᵀ, so swapping the operands yields row-major C.
          const float one = 1.0f, zero = 0.0f;
          const int dim = int(v.n);
          if (cublasSgemm(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &one, b, dim, a, dim, &zero, c, dim) !=
              CUBLAS_STATUS_SUCCESS)
            return -EIO;
        }
        if (cudaMemcpyAsync(call->response, c, bytes, cudaMemcpyDeviceToHost, s.stream) != cudaSuccess) return -EIO;
        *response_len = v.response_len;
        return 0;
      }
      case kReduction: {
        const uint64_t bytes = v.input_bytes;
        if (!reserve(s, sizeof(double) + bytes)) return -ENOMEM;
        double* total = reinterpret_cast<double*>(s.scratch);
        float* x = reinterpret_cast<float*>(s.scratch + sizeof(double));
        if (cudaMemsetAsync(total, 0, sizeof(double), s.stream) != cudaSuccess ||
            (bytes && cudaMemcpyAsync(x, v.a, bytes, cudaMemcpyHostToDevice, s.stream) != cudaSuccess))
          return -EIO;
        const uint32_t n = uint32_t(v.n);
        if (n) {
          reduction_kernel<<<std::min(blocks_for(n, kReduceThreads), 1024u), kReduceThreads, 0, s.stream>>>(x, n, total);
          if (launched() != 0) return -EIO;
        }
        if (cudaMemcpyAsync(call->response, total, sizeof(double), cudaMemcpyDeviceToHost, s.stream) != cudaSuccess)
          return -EIO;
        *response_len = v.response_len;
        return 0;
      }
      case kHistogram: {
        const uint64_t bytes = v.input_bytes;
        const uint64_t count_bytes = v.response_len;
        const size_t x_offset = (count_bytes + 15) / 16 * 16;
        if (!reserve(s, x_offset + bytes)) return -ENOMEM;
        unsigned int* count = reinterpret_cast<unsigned int*>(s.scratch);
        float* x = reinterpret_cast<float*>(s.scratch + x_offset);
        if (cudaMemsetAsync(count, 0, count_bytes, s.stream) != cudaSuccess ||
            (bytes && cudaMemcpyAsync(x, v.a, bytes, cudaMemcpyHostToDevice, s.stream) != cudaSuccess))
          return -EIO;
        const uint32_t n = uint32_t(v.n);
        if (n) {
          const double scale = double(v.bins) / (double(v.hi) - double(v.lo));
          histogram_kernel<<<std::min(blocks_for(n, kThreads), 4096u), kThreads, 0, s.stream>>>(
              x, n, v.lo, v.hi, scale, v.bins, count);
          if (launched() != 0) return -EIO;
        }
        if (cudaMemcpyAsync(call->response, count, count_bytes, cudaMemcpyDeviceToHost, s.stream) != cudaSuccess)
          return -EIO;
        *response_len = count_bytes;
        return 0;
      }
    }
    return -EINVAL;
  }

  static int launched() { return cudaPeekAtLastError() == cudaSuccess ? 0 : (cudaGetLastError(), -EIO); }

  BackendOptions options_;
  int device_ = 0;
  std::string name_;
  int least_ = 0, greatest_ = 0;
  uint32_t levels_ = 1;
  uint32_t busy_wave_ = 1;
  unsigned int* sink_ = nullptr;
  const uint64_t serial_ = g_backend_serial.fetch_add(1);
  std::mutex mu_;  // guards streams_ (set-up only)
  std::vector<std::unique_ptr<Stream>> streams_;
};

}  // namespace
}  // namespace rtaccel::accel

// The module's entry points (cuda_loader.cc). `why` receives the reason of a
// failure, NUL-terminated.
extern "C" __attribute__((visibility("default"))) rtaccel::accel::Backend* rtaccel_cuda_open(
    const rtaccel::accel::BackendOptions* options, char* why, size_t why_len) {
  auto backend = std::make_unique<rtaccel::accel::CudaBackend>();
  if (rtaccel::Status st = backend->open(*options); !st) {
    snprintf(why, why_len, "%s", st.message().c_str());
    return nullptr;
  }
  return backend.release();
}

// The number of devices (0 with the reason in `detail` when there is none),
// and their names.
extern "C" __attribute__((visibility("default"))) int rtaccel_cuda_probe(char* detail, size_t detail_len) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    snprintf(detail, detail_len, "no CUDA device: %s", err == cudaSuccess ? "none found" : cudaGetErrorString(err));
    return 0;
  }
  std::string names;
  for (int i = 0; i < count; i++) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    int least = 0, greatest = 0;
    cudaSetDevice(i);
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    names += (i ? "; " : "") + std::to_string(i) + ": " + prop.name + ", " + std::to_string(least - greatest + 1) +
             " stream priorities";
  }
  snprintf(detail, detail_len, "%s", names.c_str());
  return count;
}
