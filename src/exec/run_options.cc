// A run's options, one table (exec/run_options.h).
#include "exec/run_options.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <set>

#include "core/size.h"

namespace rtaccel::exec {
namespace {

bool set_double(const char* text, double min, double max, double* out) {
  return rtaccel_parse_double(text, min, max, out) == 0;
}

// Microseconds, at most ten seconds, into nanoseconds.
bool set_floor_us(const char* text, uint64_t* ns) {
  double v;
  if (!set_double(text, 0, 1e7, &v)) return false;
  *ns = static_cast<uint64_t>(v * 1000);
  return true;
}

// --shim's list, each mode once, trace added: the modes in the interposer's
// own order.
bool set_shim_modes(const char* list, std::string* modes) {
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

// KB:stream|random:NS
bool set_walk(const char* text, RunOptions* o) {
  char pattern[16];
  unsigned long kb = 0;
  int used = 0;
  double ns;
  if (sscanf(text, "%lu:%15[a-z]:%n", &kb, pattern, &used) != 2 || !used || kb == 0 || kb > (1ul << 20) ||
      (strcmp(pattern, "stream") && strcmp(pattern, "random")) || !set_double(text + used, 0.001, 1e6, &ns))
    return false;
  o->walk_ns_per_line[{static_cast<uint64_t>(kb) << 10, strcmp(pattern, "random") == 0}] = ns;
  return true;
}

// LINK@SECONDS
bool set_link_failure(const char* text, RunOptions* o) {
  const char* at = strrchr(text, '@');
  double s;
  if (!at || at == text || !set_double(at + 1, 0, 86400, &s)) return false;
  o->link_failures.emplace_back(std::string(text, static_cast<size_t>(at - text)), s);
  return true;
}

const RunOptionSpec kOptions[] = {
    {"policy", 'p', "NAME", "paam", nullptr, false, true, "ros2, picas or paam (default paam)", "ros2, picas, paam",
     [](RunOptions* o, const char* v) {
       const auto p = parse_policy(v);
       if (p) o->policy = *p;
       return p.has_value();
     }},
    {"duration", 'd', "S", "10", nullptr, false, true, "seconds of measurement (default 10)", "seconds, 0.001..86400",
     [](RunOptions* o, const char* v) { return set_double(v, 0.001, 86400, &o->duration_s); }},
    {"out", 'o', "DIR", "out", nullptr, false, true, "where summary.json, trace.json, latency.csv go (default out)", "a folder",
     [](RunOptions* o, const char* v) {
       o->out_dir = v;
       return *v != '\0';
     }},
    {"socket", 's', "PATH", nullptr, nullptr, false, true, "paam: use this running rtaccel-server instead of a private one",
     "a socket's path",
     [](RunOptions* o, const char* v) {
       o->socket = v;
       return *v != '\0';
     }},
    {"server", 0, "PATH", nullptr, nullptr, false, false, "the rtaccel-server binary (default: beside this program)", "a program",
     [](RunOptions* o, const char* v) {
       o->server_binary = v;
       return *v != '\0';
     }},
    {"isolate", 0, "PATH", nullptr, nullptr, false, true,
     "the rtaccel-isolate binary an isolated run starts its regulator with\n"
     "(default: beside this program)",
     "a program",
     [](RunOptions* o, const char* v) {
       o->isolate_binary = v;
       return *v != '\0';
     }},
    {"work-fraction", 0, "F", "0.9", nullptr, false, true, "share of each WCET that callbacks run, in [0.01, 1] (default 0.9)",
     "0.01..1", [](RunOptions* o, const char* v) { return set_double(v, 0.01, 1, &o->work_fraction); }},
    {"trace-events", 0, "N", nullptr, nullptr, false, true,
     "trace events each executor and bridge keeps, 1000..1000000000\n"
     "(default: the whole run's, as far as a quarter of the available\n"
     "memory holds them); the run is checked up to where they filled",
     "1000..1000000000",
     [](RunOptions* o, const char* v) {
       long n = 0;
       if (rtaccel_parse_long(v, 1000, 1000000000, &n)) return false;
       o->trace_events = static_cast<uint64_t>(n);
       return true;
     }},
    {"epsilon-floor-us", 0, "US", nullptr, nullptr, false, false, "at least this server overhead in the analysis (calibration)",
     "microseconds", [](RunOptions* o, const char* v) { return set_floor_us(v, &o->epsilon_floor_ns); }},
    {"kappa-floor-us", 0, "US", nullptr, nullptr, false, false, "at least this preemption cost in the analysis (calibration)",
     "microseconds", [](RunOptions* o, const char* v) { return set_floor_us(v, &o->kappa_floor_ns); }},
    {"jitter-floor-us", 0, "US", nullptr, nullptr, false, false, "at least this timer release jitter in the analysis (calibration)",
     "microseconds", [](RunOptions* o, const char* v) { return set_floor_us(v, &o->jitter_floor_ns); }},
    {"link-kernel-floor-ns-per-kb", 0, "NS", nullptr, nullptr, false, false,
     "at least this kernel work per KiB on every link (calibration)", "nanoseconds, 0..1000000",
     [](RunOptions* o, const char* v) {
       double ns;
       if (!set_double(v, 0, 1e6, &ns)) return false;
       o->link_kernel_floor_ns_per_kb = static_cast<uint64_t>(ns);
       return true;
     }},
    {"gang", 'g', nullptr, nullptr, nullptr, false, true, "one real-time gang at a time (isolate layer)", nullptr,
     [](RunOptions* o, const char*) {
       o->gang = true;
       return true;
     }},
    {"no-gang", 0, nullptr, nullptr, nullptr, false, true, "not, whatever the workload says", nullptr,
     [](RunOptions* o, const char*) {
       o->gang = false;
       return true;
     }},
    {"isolation", 0, nullptr, nullptr, nullptr, false, true,
     "memory-bandwidth regulation: the regulator, the best-effort cgroup\n"
     "and the bandwidth lock (default: on when the workload declares it)",
     nullptr,
     [](RunOptions* o, const char*) {
       o->isolation = true;
       return true;
     }},
    {"no-isolation", 0, nullptr, nullptr, nullptr, false, true, "not, whatever the workload says", nullptr,
     [](RunOptions* o, const char*) {
       o->isolation = false;
       return true;
     }},
    {"walk", 0, "KB:PATTERN:NS", nullptr, nullptr, true, true,
     "a working set's walk at NS per line, not timed at the start (another\n"
     "run's summary.json walks: runs to be compared do the same work)",
     "KB:stream|random:NS", [](RunOptions* o, const char* v) { return set_walk(v, o); }},
    {"best-effort", 'b', "CMD", nullptr, nullptr, true, true,
     "start CMD (a shell command line) beside the workload, SCHED_OTHER\n"
     "(in the regulated cgroup under isolation); stopped with SIGTERM at the\n"
     "end; one the shell cannot start ends the run",
     "a command",
     [](RunOptions* o, const char* v) {
       if (v[strspn(v, " \t\n")] == '\0') return false;  // nothing for the shell to run
       o->best_effort.push_back(v);
       return true;
     }},
    {"shim", 0, "MODES", nullptr, "trace", false, true,
     "the run's programs under the pthread interposer in MODES (trace, pi,\n"
     "phase-fair, boost, comma-separated; trace is always on): their lock\n"
     "events and CUDA calls on the run's timeline, their reports in OUT/shim/",
     "modes of the interposer (trace, pi, phase-fair, boost), comma-separated",
     [](RunOptions* o, const char* v) { return set_shim_modes(v, &o->shim_modes); }},
    {"no-flow-control", 0, nullptr, nullptr, nullptr, false, true,
     "multi-node: a connection per topic, each message in one piece (the\n"
     "baseline of the net layer's flow control)",
     nullptr,
     [](RunOptions* o, const char*) {
       o->flow_control = false;
       return true;
     }},
    {"fail-link", 0, "LINK@S", nullptr, nullptr, true, true, "multi-node: take link LINK down S seconds into the run; repeatable",
     "LINK@SECONDS", [](RunOptions* o, const char* v) { return set_link_failure(v, o); }},
    {"quiet", 'q', nullptr, nullptr, nullptr, false, true, "no progress line", nullptr,
     [](RunOptions* o, const char*) {
       o->progress = false;
       return true;
     }},
};

}  // namespace

std::span<const RunOptionSpec> run_option_specs() { return kOptions; }

const RunOptionSpec* find_run_option(std::string_view name) {
  for (const RunOptionSpec& spec : kOptions)
    if (name == spec.name) return &spec;
  return nullptr;
}

std::string run_usage() {
  std::string usage = "usage: rtaccel-exec WORKLOAD.yaml [options]\n";
  constexpr size_t kColumn = 29;
  for (const RunOptionSpec& spec : kOptions) {
    std::string head = spec.short_name ? std::string("  -") + spec.short_name + ", --" : std::string("      --");
    head += spec.name;
    if (spec.value) head += std::string(" ") + spec.value;
    const char* help = spec.help;
    usage += head;
    for (bool first = true; *help; first = false) {
      const char* end = strchr(help, '\n');
      const size_t n = end ? static_cast<size_t>(end - help) : strlen(help);
      const size_t at = first ? head.size() : 0;
      usage += std::string(at < kColumn ? kColumn - at : 1, ' ') + std::string(help, n);
      usage += spec.repeated && !end && !strstr(spec.help, "repeatable") ? "; repeatable\n" : "\n";
      help += n + (end ? 1 : 0);
    }
  }
  usage += "  -h, --help\n";
  return usage;
}

}  // namespace rtaccel::exec
