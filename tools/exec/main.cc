// rtaccel-exec: runs a workload under one policy and writes its measurements
// (the engine behind `rtaccel run`).
#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include "core/daemon.h"
#include "core/exit.h"
#include "core/signals.h"
#include "core/size.h"
#include "rtaccel/exec.hpp"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<uint32_t> g_pause_requests{0};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

const char kUsage[] =
    "usage: rtaccel-exec WORKLOAD.yaml [options]\n"
    "  -p, --policy NAME        ros2, picas or paam (default paam)\n"
    "  -d, --duration S         seconds of measurement (default 10)\n"
    "  -o, --out DIR            where summary.json, trace.json, latency.csv go (default out)\n"
    "  -s, --socket PATH        paam: use this running rtaccel-server instead of a private one\n"
    "      --server PATH        the rtaccel-server binary (default: beside this program)\n"
    "      --work-fraction F    share of each WCET that callbacks run, in (0, 1] (default 0.9)\n"
    "      --trace-events N     trace events each executor and bridge keeps, 1000..1000000000\n"
    "                           (default: the whole run's, as far as a quarter of the available\n"
    "                           memory holds them); the run is checked up to where they filled\n"
    "      --epsilon-floor-us US  at least this server overhead in the analysis (calibration)\n"
    "      --kappa-floor-us US    at least this preemption cost in the analysis (calibration)\n"
    "      --jitter-floor-us US   at least this timer release jitter in the analysis (calibration)\n"
    "      --link-kernel-floor-ns-per-kb NS  at least this kernel work per KiB on every link (calibration)\n"
    "  -g, --gang               one real-time gang at a time (isolate layer)\n"
    "      --no-gang            not, whatever the workload says\n"
    "      --isolation          memory-bandwidth regulation: the regulator, the best-effort cgroup\n"
    "                           and the bandwidth lock (default: on when the workload declares it)\n"
    "      --no-isolation       not, whatever the workload says\n"
    "      --walk KB:PATTERN:NS a working set's walk at NS per line, not timed at the start\n"
    "                           (summary.json's walks); repeatable\n"
    "  -b, --best-effort CMD    start CMD (a shell command line) beside the workload, SCHED_OTHER;\n"
    "                           repeatable; stopped with SIGTERM at the end; one the shell\n"
    "                           cannot start ends the run\n"
    "      --shim MODES         the run's programs under the pthread interposer in MODES (trace, pi,\n"
    "                           phase-fair, boost; trace is always on): their lock events and CUDA\n"
    "                           calls on the run's timeline, their reports in OUT/shim/\n"
    "      --no-flow-control    multi-node: a connection per topic, each message in one piece\n"
    "      --fail-link LINK@S   multi-node: take link LINK down S seconds into the run; repeatable\n"
    "  -q, --quiet              no progress line\n"
    "  -h, --help\n";

int bad(const char* what, const char* value) {
  fprintf(stderr, "rtaccel-exec: bad %s '%s'\n%s", what, value, kUsage);
  return RTACCEL_EXIT_BAD_INPUT;
}

// --shim's list, each mode once, trace added: the modes in the interposer's
// own order.
bool shim_modes(const char* list, std::string* modes) {
  static const char* const kModes[] = {"trace", "pi", "phase-fair", "boost"};
  std::set<std::string> given = {"trace"};
  std::string word;
  for (const char* p = list;; ++p) {
    if (*p == ',' || *p == '\0') {
      if (std::find(std::begin(kModes), std::end(kModes), word) == std::end(kModes)) return false;
      given.insert(word);
      word.clear();
      if (!*p) break;
    } else {
      word += *p;
    }
  }
  modes->clear();
  for (const char* m : kModes)
    if (given.count(m)) *modes += (modes->empty() ? "" : ",") + std::string(m);
  return true;
}

// The executors are forks of this process, so the interposer must be in it:
// unless it already is, in these modes, this program starts again under it.
// Returns 0 when it is in place, else an exit status.
int under_shim(const rtaccel::exec::RunOptions& o, char** argv) {
  const char* modes = getenv("RTACCEL_SHIM");
  if (modes && o.shim_modes == modes) return 0;  // started again; the runner checks it took
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const char* lib_env = getenv("RTACCEL_SHIM_LIB");
  const std::string lib = lib_env && *lib_env ? lib_env : (self.parent_path() / "librtaccel_shim.so").string();
  if (ec || access(lib.c_str(), R_OK) != 0) {
    fprintf(stderr, "rtaccel-exec: --shim: cannot find the interposer %s (RTACCEL_SHIM_LIB names another)\n",
            lib.c_str());
    return RTACCEL_EXIT_RUNTIME;
  }
  // Each program writes its report there when it exits, this one too, even
  // when the run fails before it has made its result folder.
  const auto out = std::filesystem::absolute(o.out_dir, ec) / "shim";
  if (std::filesystem::create_directories(out, ec); ec) {
    fprintf(stderr, "rtaccel-exec: --shim: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return RTACCEL_EXIT_RUNTIME;
  }
  // The dynamic linker splits LD_PRELOAD at spaces as well as colons: a
  // library in a folder whose path has a space goes in by its name, that
  // folder first in LD_LIBRARY_PATH, split at colons and semicolons alone
  // (as rtaccel.locks does for `rtaccel shim`).
  std::string entry = lib;
  if (lib.find(':') != std::string::npos ||
      (lib.find(' ') != std::string::npos && lib.find(';') != std::string::npos)) {
    fprintf(stderr, "rtaccel-exec: --shim: %s: the interposer's path has a character the dynamic linker splits "
                    "LD_PRELOAD at (':', or ' ' with ';'): install rtaccel where its path has none\n", lib.c_str());
    return RTACCEL_EXIT_RUNTIME;
  }
  if (lib.find(' ') != std::string::npos) {
    const std::filesystem::path path(lib);
    const char* folders = getenv("LD_LIBRARY_PATH");
    const std::string searched = path.parent_path().string() + (folders && *folders ? ":" + std::string(folders) : "");
    setenv("LD_LIBRARY_PATH", searched.c_str(), 1);
    entry = path.filename().string();
  }
  const char* preload = getenv("LD_PRELOAD");
  const std::string preloads = entry + (preload && *preload ? ":" + std::string(preload) : "");
  setenv("LD_PRELOAD", preloads.c_str(), 1);
  setenv("RTACCEL_SHIM", o.shim_modes.c_str(), 1);
  setenv("RTACCEL_SHIM_OUT", out.c_str(), 1);
  execv(self.c_str(), argv);
  fprintf(stderr, "rtaccel-exec: --shim: cannot start again under the interposer: %s\n", strerror(errno));
  return RTACCEL_EXIT_RUNTIME;
}

}  // namespace

int main(int argc, char** argv) {
  // Before the run takes Ctrl-C and the rest for its own: what its
  // best-effort programs are to start with.
  rtaccel::core::note_signals_at_start();
  rtaccel::exec::RunOptions o;
  enum { kServer = 256, kFraction, kEpsilon, kKappa, kJitter, kNoGang, kNoFlow, kFailLink, kIsolation, kNoIsolation, kWalk, kShim, kLinkKernel, kTraceEvents };
  const option longopts[] = {
      {"policy", required_argument, nullptr, 'p'},     {"duration", required_argument, nullptr, 'd'},
      {"out", required_argument, nullptr, 'o'},        {"socket", required_argument, nullptr, 's'},
      {"server", required_argument, nullptr, kServer}, {"work-fraction", required_argument, nullptr, kFraction},
      {"trace-events", required_argument, nullptr, kTraceEvents},
      {"epsilon-floor-us", required_argument, nullptr, kEpsilon},
      {"kappa-floor-us", required_argument, nullptr, kKappa},
      {"jitter-floor-us", required_argument, nullptr, kJitter},
      {"link-kernel-floor-ns-per-kb", required_argument, nullptr, kLinkKernel},
      {"gang", no_argument, nullptr, 'g'},             {"no-gang", no_argument, nullptr, kNoGang},
      {"best-effort", required_argument, nullptr, 'b'},
      {"walk", required_argument, nullptr, kWalk},
      {"isolation", no_argument, nullptr, kIsolation}, {"no-isolation", no_argument, nullptr, kNoIsolation},
      {"shim", required_argument, nullptr, kShim},
      {"no-flow-control", no_argument, nullptr, kNoFlow},
      {"fail-link", required_argument, nullptr, kFailLink},
      {"quiet", no_argument, nullptr, 'q'},            {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  int opt;
  double v;
  while ((opt = getopt_long(argc, argv, "p:d:o:s:gb:qh", longopts, nullptr)) != -1) {
    switch (opt) {
      case 'p': {
        auto p = rtaccel::exec::parse_policy(optarg);
        if (!p) return bad("--policy (ros2, picas, paam)", optarg);
        o.policy = *p;
        break;
      }
      case 'd':
        if (rtaccel_parse_double(optarg, 0.001, 86400, &o.duration_s)) return bad("--duration (seconds)", optarg);
        break;
      case 'o': o.out_dir = optarg; break;
      case 's': o.socket = optarg; break;
      case kServer: o.server_binary = optarg; break;
      case kFraction:
        if (rtaccel_parse_double(optarg, 0.01, 1, &o.work_fraction)) return bad("--work-fraction (0.01..1)", optarg);
        break;
      case kTraceEvents: {
        long n = 0;
        if (rtaccel_parse_long(optarg, 1000, 1000000000, &n)) return bad("--trace-events (1000..1000000000)", optarg);
        o.trace_events = static_cast<uint64_t>(n);
        break;
      }
      case kEpsilon:
        if (rtaccel_parse_double(optarg, 0, 1e7, &v)) return bad("--epsilon-floor-us", optarg);
        o.epsilon_floor_ns = static_cast<uint64_t>(v * 1000);
        break;
      case kKappa:
        if (rtaccel_parse_double(optarg, 0, 1e7, &v)) return bad("--kappa-floor-us", optarg);
        o.kappa_floor_ns = static_cast<uint64_t>(v * 1000);
        break;
      case kJitter:
        if (rtaccel_parse_double(optarg, 0, 1e7, &v)) return bad("--jitter-floor-us", optarg);
        o.jitter_floor_ns = static_cast<uint64_t>(v * 1000);
        break;
      case kLinkKernel:
        if (rtaccel_parse_double(optarg, 0, 1e6, &v)) return bad("--link-kernel-floor-ns-per-kb", optarg);
        o.link_kernel_floor_ns_per_kb = static_cast<uint64_t>(v);
        break;
      case 'g': o.gang = true; break;
      case kNoGang: o.gang = false; break;
      case kWalk: {
        // KB:stream|random:NS
        char pattern[16];
        unsigned long kb = 0;
        int used = 0;
        if (sscanf(optarg, "%lu:%15[a-z]:%n", &kb, pattern, &used) != 2 || !used || kb == 0 || kb > (1ul << 20) ||
            (strcmp(pattern, "stream") && strcmp(pattern, "random")) || rtaccel_parse_double(optarg + used, 0.001, 1e6, &v))
          return bad("--walk (KB:stream|random:NS)", optarg);
        o.walk_ns_per_line[{static_cast<uint64_t>(kb) << 10, strcmp(pattern, "random") == 0}] = v;
        break;
      }
      case kIsolation: o.isolation = true; break;
      case kNoIsolation: o.isolation = false; break;
      case 'b':
        if (!*optarg) return bad("--best-effort (a command)", optarg);
        o.best_effort.push_back(optarg);
        break;
      case kShim:
        if (!shim_modes(optarg, &o.shim_modes)) return bad("--shim (trace, pi, phase-fair, boost, comma-separated)", optarg);
        break;
      case kNoFlow: o.flow_control = false; break;
      case kFailLink: {
        const char* at = strrchr(optarg, '@');
        if (!at || at == optarg || rtaccel_parse_double(at + 1, 0, 86400, &v)) return bad("--fail-link (LINK@SECONDS)", optarg);
        o.link_failures.emplace_back(std::string(optarg, static_cast<size_t>(at - optarg)), v);
        break;
      }
      case 'q': o.progress = false; break;
      case 'h': fputs(kUsage, stdout); return 0;
      default: fputs(kUsage, stderr); return RTACCEL_EXIT_BAD_INPUT;
    }
  }
  if (optind != argc - 1) {
    fputs(kUsage, stderr);
    return RTACCEL_EXIT_BAD_INPUT;
  }
  o.workload = argv[optind];
  if (!o.shim_modes.empty()) {
    if (const int status = under_shim(o, argv); status) return status;
  }
  // Ctrl-C, SIGTERM and a hang-up (the terminal or the ssh session that
  // started a long run gone) end the run early; the results are still
  // written. Not where they were ignored when the run began: `nohup` is
  // asked to outlive the terminal, and a shell's background job without
  // job control ignores Ctrl-C.
  rtaccel_stop_on_signals([](int) { g_stop.store(true, std::memory_order_relaxed); }, 0);
  // A reader of this output that went (`rtaccel run ... 2>&1 | tee log`,
  // tee gone with the terminal) is no reason to lose the run: a write to it
  // fails, and the results still go to their files.
  signal(SIGPIPE, SIG_IGN);
  // A terminal's Ctrl-Z (SIGTSTP, to the whole foreground process group)
  // would stop the executors mid-run, and every instance across the pause
  // would miss its deadline for no fault of the analysis'. The run's
  // processes ignore it; the runner says so. A background run's progress
  // line goes on under `stty tostop` too (SIGTTOU).
  struct sigaction sa{};
  sa.sa_handler = [](int) { g_pause_requests.fetch_add(1, std::memory_order_relaxed); };
  sigaction(SIGTSTP, &sa, nullptr);
  signal(SIGTTOU, SIG_IGN);
  o.stop = &g_stop;
  o.pause_requests = &g_pause_requests;
  const auto end = rtaccel::exec::run_workload(o);
  if (!end) {
    fprintf(stderr, "rtaccel-exec: %s\n", end.status().message().c_str());
    // The server's admission control found a deadline miss (EDEADLK): the
    // property the run rests on does not hold, as for rtaccel analyze.
    if (end.status().err() == EDEADLK) return RTACCEL_EXIT_FAILS;
    return end.status().invalid_input() ? RTACCEL_EXIT_BAD_INPUT : RTACCEL_EXIT_RUNTIME;
  }
  return *end == rtaccel::exec::RunEnd::kInterrupted ? RTACCEL_EXIT_INTERRUPTED : RTACCEL_EXIT_OK;
}
