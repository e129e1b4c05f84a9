// rtaccel-server: the accelerator server daemon. See docs/accel.md.
#include <getopt.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "accel/server.h"
#include "core/daemon.h"
#include "core/exit.h"
#include "core/size.h"
#include "core/realtime.h"
#include "core/signals.h"
#include "rtaccel/accel.h"

namespace {

rtaccel::accel::Server* g_server = nullptr;

void on_signal(int) {
  if (g_server) g_server->stop();
}

const char kUsage[] =
    "usage: rtaccel-server [options]\n"
    "  -s, --socket PATH        Unix socket to listen on ($" RTACCEL_SOCKET_ENV " or " RTACCEL_SOCKET_DEFAULT ")\n"
    "  -b, --backend NAME       cpu (default), opencl or cuda\n"
    "  -d, --device N           device: a core (cpu), an OpenCL device index or a CUDA device\n"
    "                           number; repeat for several devices (callbacks placed worst-fit\n"
    "                           decreasing). Default: core 1 (cpu), the first device (opencl, cuda)\n"
    "  -l, --levels N           device priority levels = buckets (1..8, default 4; cuda: at\n"
    "                           most the device's stream priorities; opencl: 1)\n"
    "      --fifo-base P        SCHED_FIFO priority of the lowest bucket (default 80)\n"
    "      --no-fifo            workers at SCHED_OTHER (no real preemption; no privilege needed)\n"
    "  -c, --server-core N      pin the control thread (and OpenCL/CUDA workers) to core N\n"
    "      --epsilon-us US      admission control: server overhead per request (default 50)\n"
    "      --kappa-us US        admission control: device preemption cost (default 50)\n"
    "      --release-jitter-us US  admission control: how late clients' timers may fire (0)\n"
    "      --regulator-cost-us US  admission control: the bandwidth regulator's time per period\n"
    "                           on each core it regulates (0: no regulator runs)\n"
    "      --regulator-period-us US  its period (default 1000)\n"
    "      --regulated-cores LIST  the cores it regulates (1,3-5; default every core)\n"
    "      --no-deadline-check  admission control places callbacks and refuses conflicting ones,\n"
    "                           but not chains the PAAM analysis says would miss a deadline: for\n"
    "                           a system whose bounds come from another analysis (gang scheduling)\n"
    "      --lowest-workers N   workers of the lowest bucket: >1 runs best-effort requests\n"
    "                           concurrently (default 1)\n"
    "      --poll-us US         a worker polls this long for the next request before it sleeps\n"
    "                           (default 100; 0 sleeps at once)\n"
    "      --worker-stack-kib K each worker's stack, resident with the server's locked memory\n"
    "                           (64..65536, default 1024); services run on it\n"
    "      --region-memory SIZE what the registrations' shared regions may hold together, resident\n"
    "                           while registered (as 512M, 4G; default: half the memory available\n"
    "                           to the server as it starts, within its memory cgroup's limit)\n"
    "  -p, --policy FILE        YAML: which users (and remote peers) may register which chain\n"
    "                           priorities\n"
    "      --listen ADDRESS     serve clients on other nodes at tcp:HOST:PORT or rdma:HOST:PORT\n"
    "                           (port 0 picks one), the peers the policy names\n"
    "      --plugin FILE.so     add the services of a plugin (cpu backend); repeatable\n"
    "      --list-backends      name the backends built in and the devices they find\n"
    "      --ready-fd N         write \"ready\\n\" to descriptor N and close it once clients are\n"
    "                           served (for whoever starts the server; see docs/accel.md)\n"
    "      --bwlock NAME        hold bandwidth lock NAME while a request of a critical bucket\n"
    "                           runs (rtaccel isolate regulate throttles best-effort cores)\n"
    "      --bwlock-threshold MBPS  best-effort bandwidth per core those requests allow (0)\n"
    "      --bwlock-bucket N    the lowest critical bucket (default 1: all but the lowest)\n"
    "      --stopped-by-parent  a SIGTERM from anyone but this process's parent goes to the parent,\n"
    "                           which stops the server in its turn (rtaccel run)\n"
    "  -v, --verbose            log registrations and departures\n"
    "  -h, --help\n";

}  // namespace

int main(int argc, char** argv) {
  rtaccel::accel::ServerOptions options;
  const char* env = getenv(RTACCEL_SOCKET_ENV);
  options.socket_path = env && *env ? env : RTACCEL_SOCKET_DEFAULT;
  bool devices_given = false;
  const char* levels_arg = nullptr;  // --levels as given
  enum { kFifoBase = 256, kNoFifo, kEpsilon, kKappa, kJitter, kLowest, kPoll, kPlugin, kList, kReadyFd,
         kBwlock, kBwlockThreshold, kBwlockBucket, kListen, kWorkerStack, kRegionMemory, kStoppedByParent,
         kNoDeadlineCheck, kRegulatorCost, kRegulatorPeriod, kRegulatedCores };
  int ready_fd = -1;
  bool stopped_by_parent = false;
  const option longopts[] = {
      {"socket", required_argument, nullptr, 's'},
      {"backend", required_argument, nullptr, 'b'},
      {"device", required_argument, nullptr, 'd'},
      {"levels", required_argument, nullptr, 'l'},
      {"fifo-base", required_argument, nullptr, kFifoBase},
      {"no-fifo", no_argument, nullptr, kNoFifo},
      {"server-core", required_argument, nullptr, 'c'},
      {"epsilon-us", required_argument, nullptr, kEpsilon},
      {"kappa-us", required_argument, nullptr, kKappa},
      {"release-jitter-us", required_argument, nullptr, kJitter},
      {"regulator-cost-us", required_argument, nullptr, kRegulatorCost},
      {"regulator-period-us", required_argument, nullptr, kRegulatorPeriod},
      {"regulated-cores", required_argument, nullptr, kRegulatedCores},
      {"lowest-workers", required_argument, nullptr, kLowest},
      {"poll-us", required_argument, nullptr, kPoll},
      {"worker-stack-kib", required_argument, nullptr, kWorkerStack},
      {"region-memory", required_argument, nullptr, kRegionMemory},
      {"policy", required_argument, nullptr, 'p'},
      {"listen", required_argument, nullptr, kListen},
      {"plugin", required_argument, nullptr, kPlugin},
      {"list-backends", no_argument, nullptr, kList},
      {"ready-fd", required_argument, nullptr, kReadyFd},
      {"bwlock", required_argument, nullptr, kBwlock},
      {"bwlock-threshold", required_argument, nullptr, kBwlockThreshold},
      {"bwlock-bucket", required_argument, nullptr, kBwlockBucket},
      {"stopped-by-parent", no_argument, nullptr, kStoppedByParent},
      {"no-deadline-check", no_argument, nullptr, kNoDeadlineCheck},
      {"verbose", no_argument, nullptr, 'v'},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  auto bad = [&](const char* what, const char* value) {
    fprintf(stderr, "rtaccel-server: bad %s '%s'\n%s", what, value, kUsage);
    return RTACCEL_EXIT_BAD_INPUT;
  };
  int opt;
  long v;
  while ((opt = getopt_long(argc, argv, "s:b:d:l:c:p:vh", longopts, nullptr)) != -1) {
    switch (opt) {
      case 's': options.socket_path = optarg; break;
      case 'b':
        if (auto kind = rtaccel::workload::parse_backend(optarg)) {
          options.backend = *kind;
          break;
        }
        return bad("--backend (cpu, opencl or cuda; see --list-backends)", optarg);
      case 'd':
        if (rtaccel_parse_long(optarg, 0, 4095, &v)) return bad("device", optarg);
        if (!devices_given) options.devices.clear();
        devices_given = true;
        options.devices.push_back(int(v));
        break;
      case 'l':
        if (rtaccel_parse_long(optarg, 1, 8, &v)) return bad("--levels (1..8)", optarg);
        options.levels = uint32_t(v);
        levels_arg = optarg;
        break;
      case kFifoBase:
        if (rtaccel_parse_long(optarg, 1, 98, &v)) return bad("--fifo-base (1..98)", optarg);
        options.fifo_base = int(v);
        break;
      case kNoFifo: options.fifo_base = 0; break;
      case 'c':
        if (rtaccel_parse_long(optarg, 0, 4095, &v)) return bad("--server-core", optarg);
        options.server_core = int(v);
        break;
      case kEpsilon:
        if (rtaccel_parse_long(optarg, 0, 1000000000, &v)) return bad("--epsilon-us", optarg);
        options.epsilon_ns = uint64_t(v) * 1000;
        break;
      case kKappa:
        if (rtaccel_parse_long(optarg, 0, 1000000000, &v)) return bad("--kappa-us", optarg);
        options.kappa_ns = uint64_t(v) * 1000;
        break;
      case kJitter:
        if (rtaccel_parse_long(optarg, 0, 1000000000, &v)) return bad("--release-jitter-us", optarg);
        options.jitter_ns = uint64_t(v) * 1000;
        break;
      case kRegulatorCost:
        if (rtaccel_parse_long(optarg, 0, 999999, &v)) return bad("--regulator-cost-us (0..999999)", optarg);
        options.regulator_cost_ns = uint64_t(v) * 1000;
        break;
      case kRegulatorPeriod:
        // The regulator's own range (rtaccel-isolate regulate --period-us).
        if (rtaccel_parse_long(optarg, 100, 1000000, &v)) return bad("--regulator-period-us (100..1000000)", optarg);
        options.regulator_period_ns = uint64_t(v) * 1000;
        break;
      case kRegulatedCores: {
        int cores[256], n;
        if (rtaccel_parse_cores(optarg, cores, 256, 4096, &n)) return bad("--regulated-cores (as 1,3-5)", optarg);
        options.regulated_cores.assign(cores, cores + n);
        break;
      }
      case kLowest:
        if (rtaccel_parse_long(optarg, 1, 16, &v)) return bad("--lowest-workers (1..16)", optarg);
        options.lowest_bucket_workers = uint32_t(v);
        break;
      case kWorkerStack:
        if (rtaccel_parse_long(optarg, 64, 65536, &v)) return bad("--worker-stack-kib (64..65536)", optarg);
        options.worker_stack = size_t(v) << 10;
        break;
      case kRegionMemory: {
        size_t bytes;
        if (rtaccel_parse_size(optarg, 1 << 20, uint64_t{1} << 50, &bytes))
          return bad("--region-memory (1M or more, as 512M or 4G)", optarg);
        options.region_memory = bytes;
        break;
      }
      case kPoll:
        if (rtaccel_parse_long(optarg, 0, 10000000, &v)) return bad("--poll-us", optarg);
        options.poll_ns = uint64_t(v) * 1000;
        break;
      case 'p': options.policy_file = optarg; break;
      case kListen: options.listen = optarg; break;
      case kPlugin: options.plugins.push_back(optarg); break;
      case kList: fputs(rtaccel::accel::list_backends().c_str(), stdout); return 0;
      case kReadyFd:
        if (rtaccel_parse_long(optarg, 0, INT_MAX, &v) || fcntl(int(v), F_GETFD) < 0)
          return bad("--ready-fd (an open descriptor)", optarg);
        ready_fd = int(v);
        break;
      case kBwlock: options.bwlock = optarg; break;
      case kBwlockThreshold:
        if (rtaccel_parse_long(optarg, 0, 4294967294L, &v)) return bad("--bwlock-threshold (MB/s)", optarg);
        options.bwlock_threshold_mbps = uint32_t(v);
        break;
      case kBwlockBucket:
        if (rtaccel_parse_long(optarg, 0, 7, &v)) return bad("--bwlock-bucket (0..7)", optarg);
        options.bwlock_bucket = uint32_t(v);
        break;
      case kStoppedByParent: stopped_by_parent = true; break;
      case kNoDeadlineCheck: options.check_deadlines = false; break;
      case 'v': options.verbose = true; break;
      case 'h': fputs(kUsage, stdout); return 0;
      default: fputs(kUsage, stderr); return RTACCEL_EXIT_BAD_INPUT;
    }
  }
  if (optind < argc) return bad("argument", argv[optind]);
  if (!devices_given && options.backend != rtaccel::workload::Backend::kCpu) options.devices = {0};
  if (options.regulator_cost_ns >= options.regulator_period_ns) {
    fprintf(stderr, "rtaccel-server: bad --regulator-cost-us: %llu us is not less than the period (%llu us)\n%s",
            static_cast<unsigned long long>(options.regulator_cost_ns / 1000),
            static_cast<unsigned long long>(options.regulator_period_ns / 1000), kUsage);
    return RTACCEL_EXIT_BAD_INPUT;
  }
  if (options.backend == rtaccel::workload::Backend::kOpenCl) {
    // One in-order queue: more buckets would not preempt each other, and
    // admission control would assume that they do.
    if (levels_arg && options.levels != 1) return bad("--levels for the opencl backend (one queue: 1)", levels_arg);
    options.levels = 1;
  }

  // Page faults in a worker would be latency; keep everything resident.
  // (Not under AddressSanitizer, whose shadow memory is terabytes of reserve.)
#if !defined(__SANITIZE_ADDRESS__)
  if (int err = rtaccel_lock_memory())
    rtaccel_say_refused("rtaccel-server", "locking memory", err,
                        "memory not locked (CAP_IPC_LOCK or an unlimited RLIMIT_MEMLOCK locks it)");
#endif
  if (options.fifo_base > 0 && !rtaccel_fifo_allowed(options.fifo_base)) {
    rtaccel_say_refused("rtaccel-server", "SCHED_FIFO", EPERM,
                        "workers at SCHED_OTHER (as --no-fifo): no real-time priority, bounds do not apply");
    options.fifo_base = 0;
  }

  // Each client holds two descriptors and each registration a region's
  // while it is set up; the soft limit, 1024 by default, is meant for
  // programs that use select(), which the server does not. The hard limit
  // is what the system allows it.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  auto created = rtaccel::accel::Server::create(options);
  if (!created) {
    fprintf(stderr, "rtaccel-server: %s\n", created.status().message().c_str());
    return created.status().invalid_input() ? RTACCEL_EXIT_BAD_INPUT : RTACCEL_EXIT_RUNTIME;
  }
  auto server = created.take();
  g_server = server.get();
  if (stopped_by_parent)
    rtaccel_stop_through_parent(on_signal, 0);
  else
    rtaccel_stop_on_signals(on_signal, 0);
  signal(SIGPIPE, SIG_IGN);
  // The memory the registrations may hold: what it is, or that nothing
  // gave one (no /proc/meminfo, no --region-memory).
  char regions[64] = "no limit on regions";
  if (server->region_memory() != UINT64_MAX)
    snprintf(regions, sizeof(regions), "regions up to %llu MiB",
             static_cast<unsigned long long>((server->region_memory() + (1 << 19)) >> 20));
  // What admission control charges for the regulator, where it is told of one.
  std::string regulator;
  if (options.regulator_cost_ns) {
    std::string cores;
    for (int core : options.regulated_cores) cores += (cores.empty() ? "" : ",") + std::to_string(core);
    regulator = "; the regulator's " + std::to_string(options.regulator_cost_ns / 1000) + " us every " +
                std::to_string(options.regulator_period_ns / 1000) + " us on " +
                (cores.empty() ? std::string("every core") : "core(s) " + cores);
  }
  fprintf(stderr, "rtaccel-server: listening on %s (%s backend, %zu device(s); %s%s)\n", options.socket_path.c_str(),
          std::string(rtaccel::workload::to_string(options.backend)).c_str(), options.devices.size(), regions,
          regulator.c_str());
  if (ready_fd >= 0) rtaccel::core::notify_ready(ready_fd);
  const rtaccel::Status served = server->run();
  g_server = nullptr;
  if (!served) {
    fprintf(stderr, "rtaccel-server: %s\n", served.message().c_str());
    return RTACCEL_EXIT_RUNTIME;
  }
  return 0;
}
