// rtaccel-cuda-inversion: priority inversion inside the CUDA runtime (the
// ECRTS'24 paper's Sec. 5 experiment). On one core:
//   - a high-priority thread (SCHED_FIFO 90) launches a small kernel every
//     millisecond and measures how long each cudaLaunchKernel call takes;
//   - low-priority threads (SCHED_FIFO 10) copy memory with cudaMemcpyAsync
//     and synchronise, taking the runtime's internal locks all the time;
//   - medium-priority CPU hogs (SCHED_FIFO 50) run in bursts.
// When the high thread needs a runtime lock a preempted copier holds, it waits
// for the hog's burst: unbounded priority inversion. Run it plain and under
// `rtaccel shim --pi` (the runtime's mutexes get priority inheritance) and
// compare the worst launch time. Prints one JSON line; exit 77 without a GPU.
//
//   rtaccel-cuda-inversion [--seconds S] [--copiers N] [--hogs N] [--burst-ms MS] [--core C]
#include <cuda_runtime.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "cuda_device.h"

namespace {

__global__ void tiny(float* x) { x[threadIdx.x] += 1.0f; }

std::atomic<bool> g_stop{false};

bool place(int core, int priority) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  sched_param p{};
  p.sched_priority = priority;
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0 &&
         pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) == 0;
}

void copier(int core, size_t bytes) {
  place(core, 10);
  cudaStream_t s;
  void *host = nullptr, *dev = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMallocHost(&host, bytes) != cudaSuccess || cudaMalloc(&dev, bytes) != cudaSuccess)
    return;
  while (!g_stop.load(std::memory_order_relaxed)) {
    cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
  }
  cudaFree(dev);
  cudaFreeHost(host);
  cudaStreamDestroy(s);
}

void hog(int core, int burst_ms) {
  place(core, 50);
  while (!g_stop.load(std::memory_order_relaxed)) {
    const uint64_t until = rtaccel_monotonic_ns() + uint64_t(burst_ms) * 1000000u;
    while (rtaccel_monotonic_ns() < until) {
    }
    usleep(useconds_t(burst_ms) * 1000u);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 10, copiers = 4, hogs = 1, burst_ms = 20, core = 0;
  const option opts[] = {{"seconds", required_argument, nullptr, 's'},
                         {"copiers", required_argument, nullptr, 'c'},
                         {"hogs", required_argument, nullptr, 'm'},
                         {"burst-ms", required_argument, nullptr, 'b'},
                         {"core", required_argument, nullptr, 'k'},
                         {nullptr, 0, nullptr, 0}};
  for (int o; (o = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
    switch (o) {
      case 's': seconds = atoi(optarg); break;
      case 'c': copiers = atoi(optarg); break;
      case 'm': hogs = atoi(optarg); break;
      case 'b': burst_ms = atoi(optarg); break;
      case 'k': core = atoi(optarg); break;
      default:
        fprintf(stderr, "usage: rtaccel-cuda-inversion [--seconds S] [--copiers N] [--hogs N] "
                        "[--burst-ms MS] [--core C]\n");
        return 2;
    }
  }
  if (seconds < 1 || seconds > 3600 || copiers < 0 || copiers > 64 || hogs < 0 || hogs > 16 ||
      burst_ms < 1 || burst_ms > 1000 || core < 0) {
    fprintf(stderr, "rtaccel-cuda-inversion: an argument is out of range\n");
    return 2;
  }
  if (!cuda_device_here()) return kNoCudaDevice;
  if (!place(core, 90)) {
    fprintf(stderr, "rtaccel-cuda-inversion: needs SCHED_FIFO (root or CAP_SYS_NICE)\n");
    return 1;
  }
  cudaStream_t s;
  float* x = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMalloc(&x, 32 * sizeof(float));
  tiny<<<1, 32, 0, s>>>(x);  // loads the module before anything is measured
  cudaStreamSynchronize(s);

  std::vector<std::thread> threads;
  for (int i = 0; i < copiers; i++) threads.emplace_back(copier, core, size_t(8) << 20);
  for (int i = 0; i < hogs; i++) threads.emplace_back(hog, core, burst_ms);
  std::vector<double> launch_us;
  const uint64_t end = rtaccel_monotonic_ns() + uint64_t(seconds) * 1000000000ull;
  while (rtaccel_monotonic_ns() < end) {
    const uint64_t t0 = rtaccel_monotonic_ns();
    tiny<<<1, 32, 0, s>>>(x);
    launch_us.push_back(double(rtaccel_monotonic_ns() - t0) / 1000.0);
    cudaStreamSynchronize(s);
    timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
  }
  g_stop.store(true);
  for (auto& t : threads) t.join();
  std::sort(launch_us.begin(), launch_us.end());
  // the maximum is one event: how often a launch waited about a hog's burst says more
  auto over = [&](double us) {
    return size_t(launch_us.end() - std::upper_bound(launch_us.begin(), launch_us.end(), us));
  };
  auto at = [&](double q) { return launch_us.empty() ? 0.0 : launch_us[size_t(q * double(launch_us.size() - 1))]; };
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  printf("{\"device\": \"%s\", \"cuda_runtime\": %d, \"copiers\": %d, \"hogs\": %d, \"burst_ms\": %d, "
         "\"launches\": %zu, \"launch_p50_us\": %.2f, \"launch_p99_us\": %.2f, \"launch_max_us\": %.2f, "
         "\"launches_over_1ms\": %zu, \"launches_over_half_burst\": %zu}\n",
         prop.name, runtime, copiers, hogs, burst_ms, launch_us.size(), at(0.5), at(0.99), at(1.0), over(1000.0),
         over(burst_ms * 500.0));
  return 0;
}
