// rtaccel-accel-bench: measurements of rtaccel-server, run by `rtaccel bench`.
//
//   request-overhead --socket S --wait suspend|spin [--requests N] [--kernel-us K] [--json]
//     Round trips of busy requests of K us (default 100: long enough that a
//     suspending client really sleeps). Per request: submit -> worker start
//     -> kernel end -> client resumed; the overhead is the round trip minus
//     the kernel's own time (the PAAM paper's 198-391 us, Fig. 12).
//   preemption --socket S [--iterations N] [--sizes cpu|gpu] [--json]
//     Cross-bucket preemption delay (the paper's Table I): the response time
//     of a small high-bucket request while a large low-bucket request of the
//     same kernel runs, minus its response time alone with its worker awake;
//     four kernels. On the cpu backend the difference is waking the higher
//     bucket's worker, switching to it, and the cache the low kernel took.
//     --sizes gpu makes the low-bucket kernels large enough to keep a GPU
//     busy for milliseconds (hundreds of MB of requests).
//   timer-latency [--iterations N] [--json]
//     How late a timer wakes the calling thread (cyclictest's measure): N
//     absolute 1 ms sleeps. Its p99 is the release jitter `rtaccel calibrate`
//     gives the analysis. Needs no server.
//
// The client is pinned to the calling thread's current core set; run it on a
// core other than the device's.
#include <getopt.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/realtime.h"
#include "rtaccel/accel.h"
#include "rtaccel/requests.h"

namespace {

using rtaccel::core::monotonic_ns;

struct Stats {
  double p50 = 0, p99 = 0, max = 0, min = 0, mean = 0;
};

Stats stats_us(std::vector<double> ns) {
  Stats s;
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  auto pct = [&](double p) { return ns[std::min(ns.size() - 1, size_t(p * double(ns.size() - 1) + 0.5))] / 1000.0; };
  s.p50 = pct(0.50);
  s.p99 = pct(0.99);
  s.max = ns.back() / 1000.0;
  s.min = ns.front() / 1000.0;
  double sum = 0;
  for (double v : ns) sum += v;
  s.mean = sum / double(ns.size()) / 1000.0;
  return s;
}

void fill_desc(rtaccel_registration_desc* d, const char* chain, int priority, const char* service,
               uint32_t request_max, uint32_t response_max, rtaccel_wait_mode wait, uint64_t wcet_ns) {
  memset(d, 0, sizeof(*d));
  snprintf(d->chain.name, sizeof(d->chain.name), "%s", chain);
  d->chain.priority = priority;
  d->chain.critical = 0;  // a benchmark measures; it asks for no guarantee
  d->chain.period_ns = 1000000000;
  d->chain.deadline_ns = 1000000000;
  d->chain.ncallbacks = 1;
  rtaccel_callback_desc& cb = d->chain.callbacks[0];
  snprintf(cb.name, sizeof(cb.name), "%s-callback", chain);
  snprintf(cb.executor, sizeof(cb.executor), "%s-executor", chain);
  cb.executor_core = 0;
  cb.executor_priority = priority;
  cb.cpu_ns = 1000;
  cb.wait = wait;
  cb.nsegments = 1;
  snprintf(cb.segments[0].service, sizeof(cb.segments[0].service), "%s", service);
  cb.segments[0].wcet_ns = wcet_ns;
  d->nservices = 1;
  snprintf(d->services[0].name, sizeof(d->services[0].name), "%s", service);
  d->services[0].request_max = request_max;
  d->services[0].response_max = response_max;
}

int register_one(rtaccel_client* c, const rtaccel_registration_desc& d, rtaccel_registration** r) {
  char why[256];
  int err = rtaccel_client_register(c, &d, r, why, sizeof(why));
  if (err) fprintf(stderr, "rtaccel-accel-bench: registration refused: %s (%s)\n", why, strerror(-err));
  return err;
}

void print_stats(const char* name, const Stats& s) {
  printf("%-22s min %9.2f  p50 %9.2f  p99 %9.2f  max %9.2f  mean %9.2f us\n", name, s.min, s.p50,
         s.p99, s.max, s.mean);
}

void json_stats(const char* name, const Stats& s, bool last) {
  printf("    \"%s\": {\"p50_us\": %.3f, \"p99_us\": %.3f, \"max_us\": %.3f, \"min_us\": %.3f, \"mean_us\": %.3f}%s\n",
         name, s.p50, s.p99, s.max, s.min, s.mean, last ? "" : ",");
}

int request_overhead(rtaccel_client* c, rtaccel_wait_mode wait, int requests, uint64_t kernel_ns, bool json) {
  rtaccel_registration_desc d;
  fill_desc(&d, wait == RTACCEL_WAIT_SPIN ? "overhead-spin" : "overhead-suspend", 50, "busy",
            sizeof(rtaccel_busy_request), 0, wait, kernel_ns + 1000);
  rtaccel_registration* reg;
  if (register_one(c, d, &reg)) return 1;
  const int busy = rtaccel_service_index(reg, "busy");
  auto* req = static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(reg, busy, nullptr));
  req->ns = kernel_ns;
  std::vector<double> overhead, to_start, kernel, to_resume;
  overhead.reserve(size_t(requests));
  for (int i = -requests / 10; i < requests; i++) {  // the first tenth warms up
    rtaccel_ticket t;
    int err = rtaccel_submit(reg, busy, sizeof(*req), &t);
    if (!err) err = rtaccel_wait(reg, &t, 5000000000ull, nullptr);
    const uint64_t resumed = monotonic_ns();
    if (err) {
      fprintf(stderr, "rtaccel-accel-bench: request failed: %s\n", strerror(-err));
      return 1;
    }
    rtaccel_request_times times;
    rtaccel_request_timestamps(reg, &t, &times);
    if (i < 0) continue;
    to_start.push_back(double(times.start_ns - times.submit_ns));
    kernel.push_back(double(times.end_ns - times.start_ns));
    to_resume.push_back(double(resumed - times.end_ns));
    overhead.push_back(double((resumed - times.submit_ns) - (times.end_ns - times.start_ns)));
  }
  rtaccel_client_unregister(reg);
  const char* mode = wait == RTACCEL_WAIT_SPIN ? "spin" : "suspend";
  const Stats o = stats_us(overhead);
  if (json) {
    printf("{\n  \"version\": 1,\n  \"benchmark\": \"request-overhead\",\n  \"wait\": \"%s\",\n", mode);
    printf("  \"kernel_us\": %.3f,\n", double(kernel_ns) / 1000.0);
    printf("  \"requests\": %d,\n  \"p50_us\": %.3f,\n  \"p99_us\": %.3f,\n  \"max_us\": %.3f,\n", requests,
           o.p50, o.p99, o.max);
    printf("  \"phases\": {\n");
    json_stats("submit_to_start", stats_us(to_start), false);
    json_stats("kernel", stats_us(kernel), false);
    json_stats("end_to_resumed", stats_us(to_resume), false);
    json_stats("overhead", o, true);
    printf("  }\n}\n");
  } else {
    printf("# request overhead, wait=%s, %d requests of busy(%.0f us)\n", mode, requests,
           double(kernel_ns) / 1000.0);
    print_stats("submit -> start", stats_us(to_start));
    print_stats("start -> end (kernel)", stats_us(kernel));
    print_stats("end -> resumed", stats_us(to_resume));
    print_stats("overhead", o);
  }
  return 0;
}

// --- preemption ----------------------------------------------------------------

struct KernelCase {
  const char* service;
  uint32_t small_n;  // high-bucket request (short)
  uint32_t large_n;  // low-bucket request (runs for milliseconds)
};

// Request bytes of `service` for size n, and the response bytes
// (histograms: 64 bins).
void sizes(const char* service, uint32_t n, uint32_t* request, uint32_t* response) {
  const int kind = rtaccel_builtin_of(service);
  uint64_t inputs = 0, result = 0;
  rtaccel_request_sizes(kind, n, 64, &inputs, &result);
  *request = uint32_t(rtaccel_request_header_size(kind) + inputs * sizeof(float));
  *response = uint32_t(result);
}

void fill_request(const char* service, uint32_t n, void* buffer, uint32_t cap) {
  const int kind = rtaccel_builtin_of(service);
  rtaccel_request_encode(kind, n, 64, 0.0f, 1.0f, buffer, cap);
  uint64_t inputs = 0, result = 0;
  rtaccel_request_sizes(kind, n, 64, &inputs, &result);
  float* x = reinterpret_cast<float*>(static_cast<char*>(buffer) + rtaccel_request_header_size(kind));
  for (uint64_t i = 0; i < inputs; i++)
    x[i] = kind == RTACCEL_HISTOGRAM ? float(i % 1000) / 1000.0f : float(i % 7) * 0.5f;
}

int preemption(rtaccel_client* c, int iterations, bool gpu, bool json) {
  const KernelCase cpu_cases[] = {
      {"matmul", 48, 256}, {"reduction", 100000, 8000000}, {"vecadd", 50000, 4000000}, {"histogram", 50000, 4000000}};
  // The GPU's low kernels are as large as a request buffer allows
  // (RTACCEL_MAX_BUFFER, 64 MiB): two 2048x2048 matrices, 16 M floats, or
  // two vectors of 8 M.
  static_assert(2ull * 2048 * 2048 * sizeof(float) <= RTACCEL_MAX_BUFFER - 4096, "matmul request too large");
  static_assert(16000000ull * sizeof(float) <= RTACCEL_MAX_BUFFER - 4096, "reduction request too large");
  const KernelCase gpu_cases[] = {
      {"matmul", 64, 2048}, {"reduction", 100000, 16000000}, {"vecadd", 100000, 8000000}, {"histogram", 100000, 16000000}};
  const KernelCase* cases = gpu ? gpu_cases : cpu_cases;
  if (json) printf("{\n  \"version\": 1,\n  \"benchmark\": \"preemption\",\n  \"iterations\": %d,\n  \"kernels\": {\n", iterations);
  else printf("# cross-bucket preemption delay, %d iterations per kernel\n", iterations);
  constexpr size_t kCases = sizeof(cpu_cases) / sizeof(cpu_cases[0]);
  for (size_t k = 0; k < kCases; k++) {
    const KernelCase& kc = cases[k];
    uint32_t req_hi, resp_hi, req_lo, resp_lo;
    sizes(kc.service, kc.small_n, &req_hi, &resp_hi);
    sizes(kc.service, kc.large_n, &req_lo, &resp_lo);
    rtaccel_registration_desc hd, ld;
    std::string hname = std::string("preempt-high-") + kc.service, lname = std::string("preempt-low-") + kc.service;
    fill_desc(&hd, hname.c_str(), 90, kc.service, req_hi, resp_hi, RTACCEL_WAIT_SPIN, 1000000);
    fill_desc(&ld, lname.c_str(), 10, kc.service, req_lo, resp_lo, RTACCEL_WAIT_SPIN, 1000000);
    rtaccel_registration *hi, *lo;
    if (register_one(c, ld, &lo) || register_one(c, hd, &hi)) return 1;
    rtaccel_registration_info hinfo, linfo;
    rtaccel_registration_query(hi, &hinfo);
    rtaccel_registration_query(lo, &linfo);
    if (hinfo.bucket == linfo.bucket) {
      fprintf(stderr, "rtaccel-accel-bench: both requests landed in bucket %u; the server needs 2+ levels\n", hinfo.bucket);
      return 1;
    }
    const int s_hi = rtaccel_service_index(hi, kc.service), s_lo = rtaccel_service_index(lo, kc.service);
    fill_request(kc.service, kc.small_n, rtaccel_request_buffer(hi, s_hi, nullptr), req_hi);
    fill_request(kc.service, kc.large_n, rtaccel_request_buffer(lo, s_lo, nullptr), req_lo);
    std::vector<double> alone, preempting;
    for (int i = -2; i < iterations; i++) {
      rtaccel_ticket th, tl;
      // Alone, right after another request, so that the worker is awake and
      // the device core busy (no idle exit) as it is when preempting.
      if (rtaccel_submit(hi, s_hi, req_hi, &th) || rtaccel_wait(hi, &th, 5000000000ull, nullptr)) return 1;
      uint64_t t0 = monotonic_ns();
      if (rtaccel_submit(hi, s_hi, req_hi, &th) || rtaccel_wait(hi, &th, 5000000000ull, nullptr)) return 1;
      const uint64_t alone_ns = monotonic_ns() - t0;
      // While the low-bucket kernel runs: submit it, wait until its worker
      // has started it, then submit the high one.
      if (rtaccel_submit(lo, s_lo, req_lo, &tl)) return 1;
      rtaccel_request_times lt;
      const uint64_t give_up = monotonic_ns() + 1000000000ull;
      do rtaccel_request_timestamps(lo, &tl, &lt);
      while (rtaccel_poll(lo, &tl, nullptr) == -EAGAIN && lt.start_ns < lt.submit_ns && monotonic_ns() < give_up);
      t0 = monotonic_ns();
      if (rtaccel_submit(hi, s_hi, req_hi, &th) || rtaccel_wait(hi, &th, 5000000000ull, nullptr)) return 1;
      const uint64_t with_ns = monotonic_ns() - t0;
      const bool overlapped = rtaccel_poll(lo, &tl, nullptr) == -EAGAIN;
      if (rtaccel_wait(lo, &tl, 10000000000ull, nullptr)) return 1;
      if (i < 0 || !overlapped) continue;  // the low kernel ended first: no preemption to measure
      alone.push_back(double(alone_ns));
      preempting.push_back(double(with_ns));
    }
    std::vector<double> delay(alone.size());
    for (size_t i = 0; i < alone.size(); i++) delay[i] = std::max(0.0, preempting[i] - alone[i]);
    const Stats a = stats_us(alone), p = stats_us(preempting), dly = stats_us(delay);
    if (json) {
      printf("    \"%s\": {\"samples\": %zu, \"alone_p50_us\": %.3f, \"preempting_p50_us\": %.3f, "
             "\"delay_mean_us\": %.3f, \"delay_p50_us\": %.3f, \"delay_p99_us\": %.3f, \"delay_max_us\": %.3f}%s\n",
             kc.service, delay.size(), a.p50, p.p50, dly.mean, dly.p50, dly.p99, dly.max,
             k + 1 < kCases ? "," : "");
    } else {
      printf("%-10s samples %5zu  alone p50 %8.2f us  preempting p50 %8.2f us  delay mean %7.2f p99 %7.2f max %7.2f us\n",
             kc.service, delay.size(), a.p50, p.p50, dly.mean, dly.p99, dly.max);
    }
    rtaccel_client_unregister(hi);
    rtaccel_client_unregister(lo);
  }
  if (json) printf("  }\n}\n");
  return 0;
}

// --- timer latency ----------------------------------------------------------

int timer_latency(int iterations, bool json) {
  std::vector<double> late;
  late.reserve(size_t(iterations));
  uint64_t next = monotonic_ns();
  for (int i = 0; i < iterations; ++i) {
    next += 1000000;
    rtaccel_sleep_until(CLOCK_MONOTONIC, next);
    late.push_back(double(monotonic_ns() - next));
  }
  const Stats s = stats_us(late);
  if (json)
    printf("{\n  \"version\": 1,\n  \"benchmark\": \"timer-latency\",\n  \"iterations\": %d,\n"
           "  \"p50_us\": %.3f,\n  \"p99_us\": %.3f,\n  \"max_us\": %.3f\n}\n",
           iterations, s.p50, s.p99, s.max);
  else
    printf("# timer wake-up latency, %d sleeps of 1 ms: p50 %.1f us, p99 %.1f us, max %.1f us\n", iterations,
           s.p50, s.p99, s.max);
  return 0;
}

const char kUsage[] =
    "usage: rtaccel-accel-bench request-overhead --socket S --wait suspend|spin [--requests N]\n"
    "                           [--kernel-us K] [--json]\n"
    "       rtaccel-accel-bench preemption --socket S [--iterations N] [--sizes cpu|gpu] [--json]\n"
    "       rtaccel-accel-bench timer-latency [--iterations N] [--json]\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fputs(kUsage, stderr);
    return 2;
  }
  const std::string what = argv[1];
  std::string socket_path, wait = "suspend";
  int count = 0;
  long kernel_us = 100;
  bool json = false, gpu = false;
  const option longopts[] = {{"sizes", required_argument, nullptr, 'z'},
                             {"socket", required_argument, nullptr, 's'},
                             {"wait", required_argument, nullptr, 'w'},
                             {"requests", required_argument, nullptr, 'n'},
                             {"iterations", required_argument, nullptr, 'n'},
                             {"json", no_argument, nullptr, 'j'},
                             {"kernel-us", required_argument, nullptr, 'k'},
                             {nullptr, 0, nullptr, 0}};
  optind = 2;
  int opt;
  while ((opt = getopt_long(argc, argv, "", longopts, nullptr)) != -1) {
    switch (opt) {
      case 's': socket_path = optarg; break;
      case 'w': wait = optarg; break;
      case 'n': count = atoi(optarg); break;
      case 'j': json = true; break;
      case 'k': kernel_us = atol(optarg); break;
      case 'z':
        if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "gpu") != 0) {
          fprintf(stderr, "rtaccel-accel-bench: --sizes must be cpu or gpu\n");
          return 2;
        }
        gpu = strcmp(optarg, "gpu") == 0;
        break;
      default: fputs(kUsage, stderr); return 2;
    }
  }
  if (kernel_us < 0 || kernel_us > 1000000) {
    fprintf(stderr, "rtaccel-accel-bench: --kernel-us must be 0..1000000\n");
    return 2;
  }
  if (wait != "suspend" && wait != "spin") {
    fprintf(stderr, "rtaccel-accel-bench: --wait must be suspend or spin\n");
    return 2;
  }
  rtaccel_lock_memory();  // where it cannot starve later thread stacks
  if (what == "timer-latency") return timer_latency(count > 0 ? count : 2000, json);
  rtaccel_client* c;
  if (int err = rtaccel_client_connect(socket_path.empty() ? nullptr : socket_path.c_str(), &c)) {
    fprintf(stderr, "rtaccel-accel-bench: cannot connect to the server: %s\n", strerror(-err));
    return 1;
  }
  int rc;
  if (what == "request-overhead")
    rc = request_overhead(c, wait == "spin" ? RTACCEL_WAIT_SPIN : RTACCEL_WAIT_SUSPEND, count > 0 ? count : 20000,
                          uint64_t(kernel_us) * 1000, json);
  else if (what == "preemption")
    rc = preemption(c, count > 0 ? count : 200, gpu, json);
  else {
    fputs(kUsage, stderr);
    rc = 2;
  }
  rtaccel_client_close(c);
  return rc;
}
