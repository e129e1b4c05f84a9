// rtaccel-cuda-bench: the host side of CUDA work, measured call by call, for
// the experiments that run a CUDA program under `rtaccel shim`.
//
//   rtaccel-cuda-bench launch [--threads N] [--iterations N]
//       Each thread, on a stream of its own, times every cudaLaunchKernel of
//       an empty kernel and every 4 KiB cudaMemcpyAsync from pinned memory
//       (host time of the call: what the runtime's locks and the interposer
//       add). One thread: the cost per call, run plain, under `rtaccel shim`
//       and under `rtaccel shim --trace` for the interposer's added cost.
//       Many threads: the ECRTS'24 contention experiment (the worst launch
//       while the others launch and copy).
//   rtaccel-cuda-bench jobs [--seconds S] [--mb M] [--period-ms P] [--core C]
//       BWLOCK++'s GPU task (Fig. 7/8): every P ms, copy M MiB from pageable
//       host memory to the GPU, run a kernel over it, copy it back, each
//       phase synchronised, so that each is a GPU segment of its own under
//       `rtaccel shim --bwlock`. Reports each phase's time: the copies
//       through pageable memory are what CPU memory hogs slow down.
//
// One JSON line on stdout. Exit 77 with the reason when there is no GPU.
#include <cuda_runtime.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/percentile.h"
#include "cuda_device.h"

namespace {

__global__ void empty_kernel() {}

__global__ void scale(float* x, size_t n, float factor) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

struct Summary {
  size_t n = 0;
  double mean = 0, p50 = 0, p99 = 0, max = 0;
};

// Samples in microseconds, summarised.
Summary summarise(std::vector<double> v) {
  Summary s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(v.size());
  s.p50 = rtaccel_percentile_sorted(v.data(), v.size(), 0.5);
  s.p99 = rtaccel_percentile_sorted(v.data(), v.size(), 0.99);
  s.max = v.back();
  return s;
}

std::string json(const char* name, const Summary& s) {
  char buf[256];
  snprintf(buf, sizeof(buf), "\"%s\": {\"n\": %zu, \"mean_us\": %.3f, \"p50_us\": %.3f, \"p99_us\": %.3f, \"max_us\": %.3f}",
           name, s.n, s.mean, s.p50, s.p99, s.max);
  return buf;
}

bool ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  fprintf(stderr, "rtaccel-cuda-bench: %s: %s\n", what, cudaGetErrorString(err));
  return false;
}

double us_since(uint64_t t0) { return double(rtaccel_monotonic_ns() - t0) / 1000.0; }

// ---- launch ----------------------------------------------------------------

struct LaunchSamples {
  std::vector<double> launch, copy;
  bool ok = false;
};

void launch_thread(int iterations, LaunchSamples* out) {
  cudaStream_t s;
  void *host = nullptr, *dev = nullptr;
  constexpr size_t kCopy = 4096;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !ok(cudaMallocHost(&host, kCopy), "cudaMallocHost") || !ok(cudaMalloc(&dev, kCopy), "cudaMalloc"))
    return;
  out->launch.reserve(size_t(iterations));
  out->copy.reserve(size_t(iterations));
  for (int i = -iterations / 10; i < iterations; i++) {  // the first tenth warms up
    uint64_t t0 = rtaccel_monotonic_ns();
    empty_kernel<<<1, 1, 0, s>>>();
    const double launch = us_since(t0);
    t0 = rtaccel_monotonic_ns();
    cudaMemcpyAsync(dev, host, kCopy, cudaMemcpyHostToDevice, s);
    const double copy = us_since(t0);
    if (i >= 0) {
      out->launch.push_back(launch);
      out->copy.push_back(copy);
    }
    // a full launch queue would block the call being timed
    if (i % 64 == 63) cudaStreamSynchronize(s);
  }
  out->ok = ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  cudaFree(dev);
  cudaFreeHost(host);
  cudaStreamDestroy(s);
}

int run_launch(int threads, int iterations) {
  std::vector<LaunchSamples> samples(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (auto& s : samples) pool.emplace_back(launch_thread, iterations, &s);
  for (auto& t : pool) t.join();
  std::vector<double> launch, copy;
  for (const auto& s : samples) {
    if (!s.ok) return 1;
    launch.insert(launch.end(), s.launch.begin(), s.launch.end());
    copy.insert(copy.end(), s.copy.begin(), s.copy.end());
  }
  printf("{\"mode\": \"launch\", \"threads\": %d, \"iterations\": %d, %s, %s", threads, iterations,
         json("launch", summarise(launch)).c_str(), json("memcpy_async", summarise(copy)).c_str());
  return 0;
}

// ---- jobs ------------------------------------------------------------------

bool place(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

int run_jobs(int seconds, int mb, int period_ms, int core) {
  const size_t bytes = size_t(mb) << 20, n = bytes / sizeof(float);
  place(core);
  sched_param sp{};
  sp.sched_priority = 80;
  const bool realtime = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
  if (!realtime)
    fprintf(stderr, "rtaccel-cuda-bench: no real-time priority (SCHED_FIFO refused: %s): jobs run at normal priority\n",
            strerror(errno));
  // pageable, touched once: the driver stages it through its own pinned buffers
  std::vector<float> host(n, 1.0f);
  float* dev = nullptr;
  cudaStream_t s;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !ok(cudaMalloc(&dev, bytes), "cudaMalloc"))
    return 1;
  std::vector<double> h2d, kernel, d2h, job;
  uint64_t release = rtaccel_monotonic_ns();
  const uint64_t end = release + uint64_t(seconds) * 1000000000ull;
  for (int i = -5; rtaccel_monotonic_ns() < end; i++) {  // five jobs warm up
    const uint64_t t0 = rtaccel_monotonic_ns();
    cudaMemcpyAsync(dev, host.data(), bytes, cudaMemcpyHostToDevice, s);
    if (!ok(cudaStreamSynchronize(s), "copy to the GPU")) return 1;
    const uint64_t t1 = rtaccel_monotonic_ns();
    scale<<<264, 256, 0, s>>>(dev, n, 1.0f);
    if (!ok(cudaStreamSynchronize(s), "kernel")) return 1;
    const uint64_t t2 = rtaccel_monotonic_ns();
    cudaMemcpyAsync(host.data(), dev, bytes, cudaMemcpyDeviceToHost, s);
    if (!ok(cudaStreamSynchronize(s), "copy from the GPU")) return 1;
    const uint64_t t3 = rtaccel_monotonic_ns();
    if (i >= 0) {
      h2d.push_back(double(t1 - t0) / 1000.0);
      kernel.push_back(double(t2 - t1) / 1000.0);
      d2h.push_back(double(t3 - t2) / 1000.0);
      job.push_back(double(t3 - t0) / 1000.0);
    }
    release += uint64_t(period_ms) * 1000000u;
    rtaccel_sleep_until(CLOCK_MONOTONIC, std::max(release, rtaccel_monotonic_ns()));
  }
  cudaFree(dev);
  cudaStreamDestroy(s);
  printf("{\"mode\": \"jobs\", \"mb\": %d, \"period_ms\": %d, \"core\": %d, \"realtime\": %s, %s, %s, %s, %s", mb,
         period_ms, core, realtime ? "true" : "false", json("h2d", summarise(h2d)).c_str(),
         json("kernel", summarise(kernel)).c_str(), json("d2h", summarise(d2h)).c_str(),
         json("job", summarise(job)).c_str());
  return 0;
}

const char kUsage[] =
    "usage: rtaccel-cuda-bench launch [--threads N] [--iterations N]\n"
    "       rtaccel-cuda-bench jobs [--seconds S] [--mb M] [--period-ms P] [--core C]\n";

bool parse_int(const char* s, int min, int max, int* out) {
  char* end;
  errno = 0;
  const long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return false;
  *out = int(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "launch") != 0 && strcmp(argv[1], "jobs") != 0)) {
    fputs(kUsage, stderr);
    return 2;
  }
  const bool launch = strcmp(argv[1], "launch") == 0;
  int threads = 1, iterations = 20000, seconds = 10, mb = 64, period_ms = 50, core = 0;
  const option opts[] = {{"threads", required_argument, nullptr, 't'},
                         {"iterations", required_argument, nullptr, 'i'},
                         {"seconds", required_argument, nullptr, 's'},
                         {"mb", required_argument, nullptr, 'm'},
                         {"period-ms", required_argument, nullptr, 'p'},
                         {"core", required_argument, nullptr, 'c'},
                         {nullptr, 0, nullptr, 0}};
  optind = 2;
  int index = -1;
  for (int o; (o = getopt_long(argc, argv, "", opts, &index)) != -1; index = -1) {
    bool good = false;
    switch (o) {
      case 't': good = launch && parse_int(optarg, 1, 1024, &threads); break;
      case 'i': good = launch && parse_int(optarg, 10, 10000000, &iterations); break;
      case 's': good = !launch && parse_int(optarg, 1, 3600, &seconds); break;
      case 'm': good = !launch && parse_int(optarg, 1, 4096, &mb); break;
      case 'p': good = !launch && parse_int(optarg, 1, 10000, &period_ms); break;
      case 'c': good = !launch && parse_int(optarg, 0, CPU_SETSIZE - 1, &core); break;
      default: break;
    }
    if (!good) {
      if (index >= 0)
        fprintf(stderr, "rtaccel-cuda-bench: %s: --%s: '%s' is out of range, or not an option of %s\n%s", argv[1],
                opts[index].name, optarg, argv[1], kUsage);
      else
        fputs(kUsage, stderr);
      return 2;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "rtaccel-cuda-bench: unexpected argument '%s'\n%s", argv[optind], kUsage);
    return 2;
  }
  if (!cuda_device_here()) return kNoCudaDevice;
  const int rc = launch ? run_launch(threads, iterations) : run_jobs(seconds, mb, period_ms, core);
  if (rc == 0) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    printf(", \"device\": \"%s\", \"cuda_runtime\": %d}\n", prop.name, runtime);
  }
  return rc;
}
