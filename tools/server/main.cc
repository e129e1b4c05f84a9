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
#include <iterator>
#include <optional>
#include <string>
#include <vector>

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

// What the command line says: the server's options, and what main does
// around the server.
struct CommandLine {
  rtaccel::accel::ServerOptions options;
  bool devices_given = false;        // a --device replaces the default devices
  const char* levels_arg = nullptr;  // --levels as given
  int ready_fd = -1;
  bool stopped_by_parent = false;
};

// What an option's handler tells the parser.
enum class Parsed {
  kOk,
  kBad,   // not a value the option takes: the usage, RTACCEL_EXIT_BAD_INPUT
  kDone,  // the option did all there was to do (--help, --list-backends): exit 0
};

// ARG as a number in LO..HI, into *OUT.
template <typename T>
Parsed number(const char* arg, long lo, long hi, T* out) {
  long v;
  if (rtaccel_parse_long(arg, lo, hi, &v)) return Parsed::kBad;
  *out = T(v);
  return Parsed::kOk;
}

// ARG as microseconds in LO..HI, into *NS in nanoseconds.
Parsed micros(const char* arg, long lo, long hi, uint64_t* ns) {
  long v;
  if (rtaccel_parse_long(arg, lo, hi, &v)) return Parsed::kBad;
  *ns = uint64_t(v) * 1000;
  return Parsed::kOk;
}

// One option: its names, whether it takes a value, how a bad value is
// named in the message ("bad --levels (1..8) '9'"), and what it does.
struct Flag {
  const char* name;
  int short_name;  // 0: a long option only
  int has_arg;     // no_argument or required_argument, as getopt_long takes it
  const char* bad;
  Parsed (*apply)(const char* arg, CommandLine* cl);
};

using rtaccel::workload::Backend;

// Every option, in kUsage's order.
const Flag kFlags[] = {
    {"socket", 's', required_argument, nullptr,
     [](const char* a, CommandLine* cl) { cl->options.socket_path = a; return Parsed::kOk; }},
    {"backend", 'b', required_argument, "--backend (cpu, opencl or cuda; see --list-backends)",
     [](const char* a, CommandLine* cl) {
       auto kind = rtaccel::workload::parse_backend(a);
       if (!kind) return Parsed::kBad;
       cl->options.backend = *kind;
       return Parsed::kOk;
     }},
    {"device", 'd', required_argument, "device",
     [](const char* a, CommandLine* cl) {
       int device;
       if (number(a, 0, 4095, &device) != Parsed::kOk) return Parsed::kBad;
       if (!cl->devices_given) cl->options.devices.clear();
       cl->devices_given = true;
       cl->options.devices.push_back(device);
       return Parsed::kOk;
     }},
    {"levels", 'l', required_argument, "--levels (1..8)",
     [](const char* a, CommandLine* cl) {
       if (number(a, 1, 8, &cl->options.levels) != Parsed::kOk) return Parsed::kBad;
       cl->levels_arg = a;
       return Parsed::kOk;
     }},
    {"fifo-base", 0, required_argument, "--fifo-base (1..98)",
     [](const char* a, CommandLine* cl) { return number(a, 1, 98, &cl->options.fifo_base); }},
    {"no-fifo", 0, no_argument, nullptr,
     [](const char*, CommandLine* cl) { cl->options.fifo_base = 0; return Parsed::kOk; }},
    {"server-core", 'c', required_argument, "--server-core",
     [](const char* a, CommandLine* cl) { return number(a, 0, 4095, &cl->options.server_core); }},
    {"epsilon-us", 0, required_argument, "--epsilon-us",
     [](const char* a, CommandLine* cl) { return micros(a, 0, 1000000000, &cl->options.epsilon_ns); }},
    {"kappa-us", 0, required_argument, "--kappa-us",
     [](const char* a, CommandLine* cl) { return micros(a, 0, 1000000000, &cl->options.kappa_ns); }},
    {"release-jitter-us", 0, required_argument, "--release-jitter-us",
     [](const char* a, CommandLine* cl) { return micros(a, 0, 1000000000, &cl->options.jitter_ns); }},
    {"regulator-cost-us", 0, required_argument, "--regulator-cost-us (0..999999)",
     [](const char* a, CommandLine* cl) { return micros(a, 0, 999999, &cl->options.regulator_cost_ns); }},
    // The regulator's own range (rtaccel-isolate regulate --period-us).
    {"regulator-period-us", 0, required_argument, "--regulator-period-us (100..1000000)",
     [](const char* a, CommandLine* cl) { return micros(a, 100, 1000000, &cl->options.regulator_period_ns); }},
    {"regulated-cores", 0, required_argument, "--regulated-cores (as 1,3-5)",
     [](const char* a, CommandLine* cl) {
       int cores[256], n;
       if (rtaccel_parse_cores(a, cores, 256, 4096, &n)) return Parsed::kBad;
       cl->options.regulated_cores.assign(cores, cores + n);
       return Parsed::kOk;
     }},
    {"lowest-workers", 0, required_argument, "--lowest-workers (1..16)",
     [](const char* a, CommandLine* cl) { return number(a, 1, 16, &cl->options.lowest_bucket_workers); }},
    {"poll-us", 0, required_argument, "--poll-us",
     [](const char* a, CommandLine* cl) { return micros(a, 0, 10000000, &cl->options.poll_ns); }},
    {"worker-stack-kib", 0, required_argument, "--worker-stack-kib (64..65536)",
     [](const char* a, CommandLine* cl) {
       size_t kib;
       if (number(a, 64, 65536, &kib) != Parsed::kOk) return Parsed::kBad;
       cl->options.worker_stack = kib << 10;
       return Parsed::kOk;
     }},
    {"region-memory", 0, required_argument, "--region-memory (1M or more, as 512M or 4G)",
     [](const char* a, CommandLine* cl) {
       size_t bytes;
       if (rtaccel_parse_size(a, 1 << 20, uint64_t{1} << 50, &bytes)) return Parsed::kBad;
       cl->options.region_memory = bytes;
       return Parsed::kOk;
     }},
    {"policy", 'p', required_argument, nullptr,
     [](const char* a, CommandLine* cl) { cl->options.policy_file = a; return Parsed::kOk; }},
    {"listen", 0, required_argument, nullptr,
     [](const char* a, CommandLine* cl) { cl->options.listen = a; return Parsed::kOk; }},
    {"plugin", 0, required_argument, nullptr,
     [](const char* a, CommandLine* cl) { cl->options.plugins.push_back(a); return Parsed::kOk; }},
    {"list-backends", 0, no_argument, nullptr,
     [](const char*, CommandLine*) {
       fputs(rtaccel::accel::list_backends().c_str(), stdout);
       return Parsed::kDone;
     }},
    {"ready-fd", 0, required_argument, "--ready-fd (an open descriptor)",
     [](const char* a, CommandLine* cl) {
       int fd;
       if (number(a, 0, INT_MAX, &fd) != Parsed::kOk || fcntl(fd, F_GETFD) < 0) return Parsed::kBad;
       cl->ready_fd = fd;
       return Parsed::kOk;
     }},
    {"bwlock", 0, required_argument, nullptr,
     [](const char* a, CommandLine* cl) { cl->options.bwlock = a; return Parsed::kOk; }},
    {"bwlock-threshold", 0, required_argument, "--bwlock-threshold (MB/s)",
     [](const char* a, CommandLine* cl) { return number(a, 0, 4294967294L, &cl->options.bwlock_threshold_mbps); }},
    {"bwlock-bucket", 0, required_argument, "--bwlock-bucket (0..7)",
     [](const char* a, CommandLine* cl) { return number(a, 0, 7, &cl->options.bwlock_bucket); }},
    {"stopped-by-parent", 0, no_argument, nullptr,
     [](const char*, CommandLine* cl) { cl->stopped_by_parent = true; return Parsed::kOk; }},
    {"no-deadline-check", 0, no_argument, nullptr,
     [](const char*, CommandLine* cl) { cl->options.check_deadlines = false; return Parsed::kOk; }},
    {"verbose", 'v', no_argument, nullptr,
     [](const char*, CommandLine* cl) { cl->options.verbose = true; return Parsed::kOk; }},
    {"help", 'h', no_argument, nullptr,
     [](const char*, CommandLine*) { fputs(kUsage, stdout); return Parsed::kDone; }},
};

// getopt_long's value for a long option only: past every character.
constexpr int kLongOnly = 256;

int getopt_value(size_t row) {
  return kFlags[row].short_name ? kFlags[row].short_name : kLongOnly + int(row);
}

int bad(const char* what, const char* value) {
  fprintf(stderr, "rtaccel-server: bad %s '%s'\n%s", what, value, kUsage);
  return RTACCEL_EXIT_BAD_INPUT;
}

// ARGV into *CL by kFlags; an exit status where main ends here (a bad
// option, --help, --list-backends).
std::optional<int> parse_command_line(int argc, char** argv, CommandLine* cl) {
  std::vector<option> longopts;
  std::string shortopts;
  for (size_t row = 0; row < std::size(kFlags); row++) {
    const Flag& f = kFlags[row];
    longopts.push_back({f.name, f.has_arg, nullptr, getopt_value(row)});
    if (f.short_name) shortopts += std::string(1, char(f.short_name)) + (f.has_arg == required_argument ? ":" : "");
  }
  longopts.push_back({nullptr, 0, nullptr, 0});
  int opt;
  while ((opt = getopt_long(argc, argv, shortopts.c_str(), longopts.data(), nullptr)) != -1) {
    size_t row = 0;
    while (row < std::size(kFlags) && getopt_value(row) != opt) row++;
    if (row == std::size(kFlags)) {  // an option getopt_long did not know, or one without its value
      fputs(kUsage, stderr);
      return RTACCEL_EXIT_BAD_INPUT;
    }
    switch (kFlags[row].apply(optarg, cl)) {
      case Parsed::kOk: break;
      case Parsed::kBad: return bad(kFlags[row].bad, optarg);
      case Parsed::kDone: return 0;
    }
  }
  if (optind < argc) return bad("argument", argv[optind]);
  return std::nullopt;
}

// What the options say together, once all are read; an exit status where
// they do not go together.
std::optional<int> check_command_line(CommandLine* cl) {
  rtaccel::accel::ServerOptions& options = cl->options;
  if (!cl->devices_given && options.backend != Backend::kCpu) options.devices = {0};
  if (options.regulator_cost_ns >= options.regulator_period_ns) {
    fprintf(stderr, "rtaccel-server: bad --regulator-cost-us: %llu us is not less than the period (%llu us)\n%s",
            static_cast<unsigned long long>(options.regulator_cost_ns / 1000),
            static_cast<unsigned long long>(options.regulator_period_ns / 1000), kUsage);
    return RTACCEL_EXIT_BAD_INPUT;
  }
  if (options.backend == Backend::kOpenCl) {
    // One in-order queue: more buckets would not preempt each other, and
    // admission control would assume that they do.
    if (cl->levels_arg && options.levels != 1)
      return bad("--levels for the opencl backend (one queue: 1)", cl->levels_arg);
    options.levels = 1;
  }
  return std::nullopt;
}

// The process as a real-time server wants it: memory locked, SCHED_FIFO
// where allowed (else the workers at SCHED_OTHER, said so), descriptors.
void prepare_process(rtaccel::accel::ServerOptions* options) {
  // Page faults in a worker would be latency; keep everything resident.
  // (Not under AddressSanitizer, whose shadow memory is terabytes of reserve.)
#if !defined(__SANITIZE_ADDRESS__)
  if (int err = rtaccel_lock_memory())
    rtaccel_say_refused("rtaccel-server", "locking memory", err,
                        "memory not locked (CAP_IPC_LOCK or an unlimited RLIMIT_MEMLOCK locks it)");
#endif
  if (options->fifo_base > 0 && !rtaccel_fifo_allowed(options->fifo_base)) {
    rtaccel_say_refused("rtaccel-server", "SCHED_FIFO", EPERM,
                        "workers at SCHED_OTHER (as --no-fifo): no real-time priority, bounds do not apply");
    options->fifo_base = 0;
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
}

// The line that says the server serves: where, with what, and within what.
void say_listening(const rtaccel::accel::Server& server, const rtaccel::accel::ServerOptions& options) {
  // The memory the registrations may hold: what it is, or that nothing
  // gave one (no /proc/meminfo, no --region-memory).
  char regions[64] = "no limit on regions";
  if (server.region_memory() != UINT64_MAX)
    snprintf(regions, sizeof(regions), "regions up to %llu MiB",
             static_cast<unsigned long long>((server.region_memory() + (1 << 19)) >> 20));
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
}

// Creates the server, serves until a signal stops it; the exit status.
int serve(const CommandLine& cl) {
  auto created = rtaccel::accel::Server::create(cl.options);
  if (!created) {
    fprintf(stderr, "rtaccel-server: %s\n", created.status().message().c_str());
    return created.status().invalid_input() ? RTACCEL_EXIT_BAD_INPUT : RTACCEL_EXIT_RUNTIME;
  }
  auto server = created.take();
  g_server = server.get();
  if (cl.stopped_by_parent)
    rtaccel_stop_through_parent(on_signal, 0);
  else
    rtaccel_stop_on_signals(on_signal, 0);
  signal(SIGPIPE, SIG_IGN);
  say_listening(*server, cl.options);
  if (cl.ready_fd >= 0) rtaccel::core::notify_ready(cl.ready_fd);
  const rtaccel::Status served = server->run();
  g_server = nullptr;
  if (!served) {
    fprintf(stderr, "rtaccel-server: %s\n", served.message().c_str());
    return RTACCEL_EXIT_RUNTIME;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CommandLine cl;
  const char* env = getenv(RTACCEL_SOCKET_ENV);
  cl.options.socket_path = env && *env ? env : RTACCEL_SOCKET_DEFAULT;
  if (auto exit = parse_command_line(argc, argv, &cl)) return *exit;
  if (auto exit = check_command_line(&cl)) return *exit;
  prepare_process(&cl.options);
  return serve(cl);
}
