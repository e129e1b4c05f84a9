// The workload runner: sets up the run (kernel sizes, server, shared memory),
// forks the executors, watches them for the run's duration and writes the
// measurements.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "core/busy.h"
#include "core/cgroup.h"
#include "core/clock.h"
#include "core/daemon.h"
#include "core/fd.h"
#include "core/futex.h"
#include "core/percentile.h"
#include "core/procfs.h"
#include "core/realtime.h"
#include "core/signals.h"
#include "exec/bridge.h"
#include "exec/executor.h"
#include "exec/leftovers.h"
#include "exec/monitor.h"
#include "exec/nodes.h"
#include "exec/plan.h"
#include "exec/resources.h"
#include "exec/segments.h"
#include "exec/shared.h"
#include "exec/timeline.h"
#include "rtaccel/accel.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/exec.hpp"
#include "rtaccel/isolate.h"

namespace rtaccel::exec {
namespace {

using core::monotonic_ns;

using nlohmann::json;

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kSecond = 1000000000;

double us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// The P-th percentile (core/percentile.h) of sorted values.
uint64_t percentile(const std::vector<uint64_t>& sorted, double p) {
  return rtaccel_percentile_sorted_u64(sorted.data(), sorted.size(), p / 100.0);
}

// In a forked child: dies with the runner, whatever kills it.
void die_with_parent(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
}

// In a forked process of the run (an executor, a bridge): dies with the
// runner, and leaves to it the signals a terminal sends its whole
// foreground process group, Ctrl-C and a hang-up, and a SIGTERM from
// anyone else (`timeout`, a service manager): the runner then stops the
// run's processes itself and writes the results. Ctrl-Z does not stop
// them. A SIGTERM from the runner ends the process.
void join_the_run(pid_t runner) {
  die_with_parent(runner);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTSTP, SIG_IGN);
  rtaccel_stop_through_parent(
      [](int sig) {
        signal(sig, SIG_DFL);
        raise(sig);
      },
      0);
}

std::string self_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// The interposer's report written now, when it is preloaded into this
// process (rtaccel/shim.h): forked executors leave with _exit(), which skips
// the report it writes at exit.
void write_shim_report() {
  using WriteReport = int (*)();
  if (auto write = reinterpret_cast<WriteReport>(dlsym(RTLD_DEFAULT, "rtaccel_shim_write_report"))) write();
}

// This process's environment without the interposer, for the programs a run
// starts beside the workload's (the regulator, best-effort load): their locks
// are not the run's, and their reports would be mistaken for its programs'.
std::vector<std::string> environment_without_shim() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view var(*e);
    if (var.starts_with("RTACCEL_SHIM")) continue;
    if (!var.starts_with("LD_PRELOAD=")) {
      env.emplace_back(var);
      continue;
    }
    std::string kept;
    std::string_view list = var.substr(strlen("LD_PRELOAD="));
    while (!list.empty()) {
      const size_t end = std::min(list.find_first_of(": "), list.size());
      const std::string_view lib = list.substr(0, end);
      if (!lib.empty() && lib.find("librtaccel_shim.so") == std::string_view::npos)
        kept += (kept.empty() ? "" : ":") + std::string(lib);
      list.remove_prefix(std::min(end + 1, list.size()));
    }
    if (!kept.empty()) env.push_back("LD_PRELOAD=" + kept);
  }
  return env;
}

std::string isolate_binary(const RunOptions& o) {
  return o.isolate_binary.empty() ? self_dir() + "/rtaccel-isolate" : o.isolate_binary;
}

struct Setup {
  workload::Workload workload;
  Plan plan;
  SegmentTable requests;
  std::vector<analysis::ChainResult> bounds;
  std::vector<double> walk_ns_per_line;  // per callback; 0: no working set
  std::map<std::pair<uint64_t, bool>, double> walks;  // the run's, by size and pattern
  bool isolation = false;                // the regulator, its cgroup and the bandwidth lock
  std::vector<bool> holds_bwlock;        // per callback: in a chain under the bandwidth lock
  int bwlock_bucket = -1;                // the lowest server bucket that holds it; -1: none
  bool gang = false;                  // one gang at a time
  std::vector<workload::Gang> gangs;  // the run's gangs, when gang
  std::vector<size_t> gang_of;        // executor -> gang
  struct LinkFailure {
    size_t link;    // index into Workload::links
    uint64_t at_ns;  // after the run's start
  };
  std::vector<LinkFailure> link_failures;  // --fail-link, resolved
  // The transport of the server's gateway: the one the callbacks that use
  // another node's accelerator reach it over; null when none does.
  const rtaccel_net_transport* gateway = nullptr;
};

// The server's command line for the workload's accelerators.
std::vector<std::string> server_args(const workload::Workload& w, const std::string& socket) {
  assert(!w.accelerators.empty());
  const auto& first = w.accelerators.front();
  std::vector<std::string> args = {"--socket", socket, "--backend",
                                   std::string(workload::to_string(first.backend)),
                                   "--levels", std::to_string(first.priority_levels)};
  for (size_t d = 0; d < w.accelerators.size(); ++d) {
    args.push_back("--device");
    args.push_back(std::to_string(device_of(w, d)));
  }
  const uint64_t kappa = first.preemption_cost_ns;
  const uint64_t epsilon = w.server ? w.server->overhead_ns : 0;
  if (w.server) {
    args.push_back("--server-core");
    args.push_back(std::to_string(w.server->core));
  }
  args.push_back("--epsilon-us");
  args.push_back(std::to_string((epsilon + 999) / 1000));
  args.push_back("--kappa-us");
  args.push_back(std::to_string((kappa + 999) / 1000));
  args.push_back("--release-jitter-us");
  args.push_back(std::to_string((w.release_jitter_ns + 999) / 1000));
  // The regulator's time on the executors' and the device's cores, which
  // the run's bounds charge (the workload's isolation, where the run is
  // isolated: none otherwise).
  const auto& iso = w.isolation;
  if (iso.declared && iso.cost_ns) {
    args.insert(args.end(), {"--regulator-cost-us", std::to_string((iso.cost_ns + 999) / 1000),
                             "--regulator-period-us", std::to_string(iso.period_ns / 1000)});
    std::string cores;
    for (int core : iso.cores) cores += (cores.empty() ? "" : ",") + std::to_string(core);
    if (!cores.empty()) args.insert(args.end(), {"--regulated-cores", cores});
  }
  return args;
}

// The sized kernels' way back from the sizing child: the sizes, not the
// requests (megabytes each, which every process forked from the runner
// would then hold). Both ends are this program.
//   u32 status (kSized, kFailed, kInvalid); then, sized, per callback:
//   u32 segments, and per segment: u64 service length, the service, u64 n,
//   u64 request length, u64 response_max; failed: u64 length and the
//   message.
enum : uint32_t { kSized = 0, kFailed = 1, kInvalid = 2 };

void put_u32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), sizeof(v)); }
void put_u64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), sizeof(v)); }
void put_bytes(std::string* out, const void* p, size_t n) {
  put_u64(out, n);
  out->append(static_cast<const char*>(p), n);
}

// Reads what put_* wrote; every read checks that the bytes are there.
class Reader {
 public:
  explicit Reader(const std::string& text) : pos_(text.data()), end_(text.data() + text.size()) {}
  bool u32(uint32_t* v) { return take(v, sizeof(*v)); }
  bool u64(uint64_t* v) { return take(v, sizeof(*v)); }
  bool bytes(size_t n, std::string* out) {
    if (static_cast<size_t>(end_ - pos_) < n) return false;
    out->assign(pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == end_; }

 private:
  bool take(void* v, size_t n) {
    if (static_cast<size_t>(end_ - pos_) < n) return false;
    memcpy(v, pos_, n);
    pos_ += n;
    return true;
  }
  const char* pos_;
  const char* end_;
};

// Times the kernels of every segment on its device and sizes them: the
// table, or the first error (INVALID: the workload's fault, a service
// rtaccel run cannot size).
std::string size_kernels(const workload::Workload& w, double work_fraction, SegmentTable* table, bool* invalid) {
  table->assign(w.callbacks.size(), {});
  std::vector<std::unique_ptr<KernelSizer>> sizers(w.accelerators.size());
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb) {
    for (const auto& seg : w.callbacks[cb].segments) {
      auto& sizer = sizers[seg.accelerator];
      if (!sizer) {
        sizer = std::make_unique<KernelSizer>();
        if (Status st = sizer->open(w.accelerators[seg.accelerator].backend, device_of(w, seg.accelerator)); !st)
          return st.message();
      }
      SegmentRequest req;
      const auto target = static_cast<uint64_t>(static_cast<double>(seg.wcet_ns) * work_fraction);
      if (Status st = sizer->size(seg.service, target, &req); !st) {
        *invalid = st.invalid_input();
        return "callback '" + w.callbacks[cb].name + "': " + st.message();
      }
      req.bytes = {};  // the executors build their own
      (*table)[cb].push_back(std::move(req));
    }
  }
  return "";
}

// What the sizing process sends back: kSized and the table, or kFailed or
// kInvalid and the error.
std::string encode_sizing(const SegmentTable& table, const std::string& error, bool invalid) {
  std::string reply;
  if (!error.empty()) {
    put_u32(&reply, invalid ? kInvalid : kFailed);
    put_bytes(&reply, error.data(), error.size());
    return reply;
  }
  put_u32(&reply, kSized);
  for (const auto& segments : table) {
    put_u32(&reply, static_cast<uint32_t>(segments.size()));
    for (const auto& r : segments) {
      put_bytes(&reply, r.service.data(), r.service.size());
      put_u64(&reply, r.n);
      put_u64(&reply, r.size);
      put_u64(&reply, r.response_max);
    }
  }
  return reply;
}

// The sizing process's reply; BROKEN where it is not one, or the process
// did not exit cleanly (STATUS).
Status decode_sizing(const std::string& text, int status, const workload::Workload& w, SegmentTable* out) {
  const Status broken =
      Status::error("sizing the kernels failed (the sizing process " + core::describe_wait_status(status) + ")");
  Reader in(text);
  uint32_t what = 0;
  if (!in.u32(&what)) return broken;
  if (what == kFailed || what == kInvalid) {
    uint64_t len = 0;
    std::string error;
    if (!in.u64(&len) || !in.bytes(len, &error)) return broken;
    return what == kInvalid ? Status::invalid(error) : Status::error(error);
  }
  if (what != kSized || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return broken;
  out->assign(w.callbacks.size(), {});
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb) {
    uint32_t segments = 0;
    if (!in.u32(&segments) || segments != w.callbacks[cb].segments.size()) return broken;
    for (uint32_t k = 0; k < segments; ++k) {
      SegmentRequest req;
      uint64_t service_len = 0, size = 0, response_max = 0;
      if (!in.u64(&service_len) || !in.bytes(service_len, &req.service) || !in.u64(&req.n) || !in.u64(&size) ||
          !in.u64(&response_max))
        return broken;
      req.size = size;
      req.response_max = response_max;
      (*out)[cb].push_back(std::move(req));
    }
  }
  return in.done() ? Status() : broken;
}

std::string read_to_end(int fd) {
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return text;
    }
  }
}

// Sizes the kernels (size_kernels) in a child process that exits when
// done: a device runtime that was initialised in a process does not survive
// a fork of it (CUDA says so), and the runner forks the executors
// afterwards, which open the device themselves. The table comes back
// through a pipe.
Status size_kernels_in_child(const workload::Workload& w, double work_fraction, SegmentTable* out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return Status::os_error("pipe", errno);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return Status::os_error("fork", err);
  }
  if (pid == 0) {
    close(fds[0]);
    die_with_parent(parent);
    // A device runtime's threads (PoCL's compute pool, the CUDA driver's)
    // take the cores of the thread that opens the device: here the server's
    // core, as in the server, so that the kernels are sized as they will
    // run there. (The cpu backend moves each call to its device core.)
    if (w.server && !w.accelerators.empty() && w.accelerators.front().backend != workload::Backend::kCpu) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(w.server->core, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    SegmentTable table;
    bool invalid = false;
    const std::string error = size_kernels(w, work_fraction, &table, &invalid);
    const std::string reply = encode_sizing(table, error, invalid);
    for (size_t done = 0; done < reply.size();) {
      const ssize_t n = write(fds[1], reply.data() + done, reply.size() - done);
      if (n <= 0 && errno != EINTR) _exit(1);
      if (n > 0) done += static_cast<size_t>(n);
    }
    _exit(0);  // no exit handlers: the device runtime's belong to this child only
  }
  close(fds[1]);
  const std::string text = read_to_end(fds[0]);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return decode_sizing(text, status, w, out);
}

// Every core the run pins a thread to is one this process may use: one
// outside its cpuset (a container's --cpuset-cpus) or offline would fail
// the run deep inside, as a kernel that "failed on the device".
Status check_cores_allowed(const std::string& file, const workload::Workload& w) {
  std::string refused;
  auto check = [&](int core, workload::SourceLocation where, const std::string& what) {
    if (rtaccel_core_allowed(core) == 0) return;
    refused += (refused.empty() ? "" : "\n") +
               workload::Diagnostic{file, where, what + ": core " + std::to_string(core) + " is not one this run may use"}
                   .to_string();
  };
  for (const auto& e : w.executors) check(e.core, e.where, "executor '" + e.name + "'");
  for (const auto& a : w.accelerators)
    if (a.backend == workload::Backend::kCpu) check(a.core, a.where, "accelerator '" + a.name + "'");
  if (w.server) check(w.server->core, w.server->where, "server");
  for (int core : w.isolation.cores) check(core, w.isolation.where, "isolation: regulator");
  if (refused.empty()) return Status();
  std::string allowed;
  const long cores = sysconf(_SC_NPROCESSORS_CONF);
  for (int core = 0; core < cores; ++core)
    if (rtaccel_core_allowed(core) == 0) allowed += (allowed.empty() ? "" : ", ") + std::to_string(core);
  return Status::invalid(refused + "\n(the cores it may use: " + (allowed.empty() ? "none found" : allowed) +
                         "; the others are offline or outside its cpuset, as a container's --cpuset-cpus or a "
                         "cgroup's cpuset.cpus sets it)");
}

Status prepare(const RunOptions& o, Setup* s) {
  auto loaded = workload::load_file(o.workload);
  if (!loaded) return loaded.status();
  s->workload = loaded.take();
  auto& w = s->workload;
  // Accelerator requests between nodes go to the server's gateway over the
  // link: under paam by priority, under ros2 and picas in arrival order (a
  // callback on a node without the accelerator cannot invoke it directly).
  const rtaccel_net_transport*& gateway = s->gateway;
  for (const auto& cb : w.callbacks)
    for (const auto& seg : cb.segments) {
      const size_t here = w.executors[cb.executor].node, there = w.accelerators[seg.accelerator].node;
      if (here == there) continue;
      const std::string what = "callback '" + cb.name + "' on node '" + w.nodes[here].name + "' uses accelerator '" +
                               w.accelerators[seg.accelerator].name + "' on node '" + w.nodes[there].name + "'";
      const auto* transport = w.links[static_cast<size_t>(w.link_between(here, there))].transport;
      if (transport->one_machine)
        return Status::invalid(what + " over an " + transport->name +
                               " link: the server's gateway for other nodes listens on links between hosts "
                               "(tcp, rdma)");
      if (gateway && gateway != transport)
        return Status::invalid(what + " over " + transport->name + ", and another callback over " + gateway->name +
                               ": the server's gateway listens on one transport");
      gateway = transport;
    }
  for (const auto& failure : o.link_failures) {
    const std::string& name = failure.first;  // a plain name: clang's lambdas take no structured binding
    auto link = std::find_if(w.links.begin(), w.links.end(), [&](const workload::Link& l) { return l.name == name; });
    std::string known;
    for (const auto& l : w.links) known += (known.empty() ? "" : ", ") + l.name;
    if (link == w.links.end())
      return Status::invalid("--fail-link: workload '" + w.name + "' has no link '" + name + "'" +
                             (known.empty() ? " (it has no links)" : " (its links: " + known + ")"));
    if (link->transport->one_machine)
      return Status::invalid("--fail-link: link '" + name + "' is " + link->transport->name +
                             ", between processes of one machine; only links between hosts (tcp, rdma) go down");
    s->link_failures.push_back({static_cast<size_t>(link - w.links.begin()),
                                static_cast<uint64_t>(failure.second * 1e9)});
  }
  // Overheads measured on this machine (rtaccel calibrate) raise the
  // workload's: a bound computed with a smaller overhead than the machine's
  // would not hold.
  workload::raise_overheads(&w, o.epsilon_floor_ns, o.kappa_floor_ns, o.jitter_floor_ns, o.link_kernel_floor_ns_per_kb);
  for (const auto& acc : w.accelerators) {
    if (acc.backend != w.accelerators.front().backend || acc.priority_levels != w.accelerators.front().priority_levels)
      return Status::invalid("accelerator '" + acc.name + "': rtaccel run needs every accelerator on one backend "
                             "with one number of priority levels (one rtaccel-server)");
  }
  auto plan = make_plan(w);
  if (!plan) return plan.status();
  s->plan = plan.take();
  s->gang = o.gang.value_or(w.gang_scheduling);
  if (s->gang) {
    s->gangs = w.effective_gangs();
    s->gang_of = w.gang_of_executor();
    for (const auto& g : s->gangs)
      if (g.name.size() >= RTACCEL_GANG_NAME_MAX)
        return Status::invalid("executor '" + g.name + "': its name, the name of its gang, is longer than " +
                               std::to_string(RTACCEL_GANG_NAME_MAX - 1) + " characters; put it in a gang");
  }
  s->isolation = o.isolation.value_or(w.isolation.declared);
  if (s->isolation && !w.isolation.declared)
    return Status::invalid("--isolation: workload '" + w.name + "' has no isolation section to run with "
                           "(docs/workload.md: isolation)");
  if (!s->isolation) w.isolation = workload::Isolation();  // nor in the analysis
  if (Status st = check_cores_allowed(o.workload, w); !st) return st;
  s->holds_bwlock.assign(w.callbacks.size(), false);
  for (size_t c : w.isolation.bwlock_chains)
    for (size_t cb : w.chains[c].path) {
      s->holds_bwlock[cb] = true;
      // The server's buckets from this callback's up hold it too: buckets
      // are by priority, as the analysis and the server's admission form them.
      for (size_t j = 0; j < w.callbacks[cb].segments.size(); ++j) {
        const int b = analysis::segment_bucket(w, cb, j);
        s->bwlock_bucket = s->bwlock_bucket < 0 ? b : std::min(s->bwlock_bucket, b);
      }
    }
  s->bounds = s->gang ? analysis::analyze_gangs(w) : analysis::analyze(w);

  // Kernels sized to their share of each segment's WCET, timed on the device.
  // The busy loop is calibrated here, before any fork, so that every process
  // of the run shares one calibration.
  core::calibrate_busy_loop();
  // Each executor maps and locks its callbacks' working sets for the whole
  // run: more than half of the memory available would push the rest of the
  // system, and the run, out of memory (the shared records' rule).
  uint64_t working_sets = 0;
  for (const auto& callback : w.callbacks) working_sets += callback.working_set_bytes;
  if (const uint64_t available = rtaccel_memory_available(); available && working_sets > available / 2)
    return Status::invalid("workload '" + w.name + "': the callbacks' working sets take " +
                           std::to_string(working_sets >> 20) + " MiB in all, resident for the whole run, more than "
                           "half of the " + std::to_string(available >> 20) + " MiB of memory available to the run (free on the machine, within its memory cgroup's limit)");
  // Working sets too, one calibration per size and pattern.
  s->walk_ns_per_line.assign(w.callbacks.size(), 0);
  std::map<std::pair<uint64_t, bool>, double> walks = o.walk_ns_per_line;
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb) {
    const auto& callback = w.callbacks[cb];
    if (!callback.working_set_bytes) continue;
    const auto key = std::make_pair(callback.working_set_bytes, callback.pattern == workload::MemoryPattern::kRandom);
    auto it = walks.find(key);
    if (it == walks.end()) it = walks.emplace(key, core::calibrate_walk(key.first, key.second)).first;
    if (it->second == 0)
      return Status::os_error("callback '" + callback.name + "': cannot map its working set of " +
                                  std::to_string(key.first >> 10) + " KiB",
                              errno);
    s->walk_ns_per_line[cb] = it->second;
    s->walks[it->first] = it->second;
  }
  if (Status st = size_kernels_in_child(w, o.work_fraction, &s->requests); !st) return st;
  // A segment on another node's accelerator sends its sized request over
  // the link; the analysis counted request_kb for it.
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb)
    for (size_t k = 0; k < w.callbacks[cb].segments.size(); ++k) {
      const auto& seg = w.callbacks[cb].segments[k];
      if (w.accelerators[seg.accelerator].node == w.executors[w.callbacks[cb].executor].node) continue;
      const uint64_t bytes = s->requests[cb][k].size;
      if (bytes > seg.request_bytes || s->requests[cb][k].response_max > seg.response_bytes)
        fprintf(stderr,
                "rtaccel run: warning: callback '%s': its %s request sized to its WCET takes %llu KiB and its "
                "response up to %llu KiB on the link, more than request_kb/response_kb; the bound does not "
                "cover that transfer (the busy service sends 8 bytes)\n",
                w.callbacks[cb].name.c_str(), seg.service.c_str(), static_cast<unsigned long long>(bytes >> 10),
                static_cast<unsigned long long>(s->requests[cb][k].response_max >> 10));
    }
  return Status();
}
// Chain C's result in the analysis the run's bounds came from; null: none.
const analysis::ChainResult* bound_of(const Setup& s, size_t c) {
  for (const auto& r : s.bounds)
    if (r.chain == s.workload.chains[c].name) return &r;
  return nullptr;
}

// Instances that ended after STOPPED are left out: they met the executors'
// wind-down (a higher one's exit holds a lower one's core), not the workload.
json chain_summary(const Setup& s, const SharedRun& shared, size_t c, std::ofstream* csv, uint64_t t0,
                   uint64_t stopped) {
  const auto& chain = s.workload.chains[c];
  const auto* state = shared.chain(c);
  const uint64_t count = shared.samples_kept(c);
  std::vector<uint64_t> latency;
  latency.reserve(count);
  uint64_t misses = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const Sample& x = shared.samples(c)[i];
    if (x.end_ns > stopped) continue;
    const uint64_t l = x.end_ns - x.start_ns;
    latency.push_back(l);
    if (l > chain.deadline_ns) ++misses;
    // To the nanosecond: a stream's default six digits turn a start 1.234567 s
    // into the run into 1.23457e+06 us, and half an hour in round it to a
    // millisecond.
    char times[64];
    snprintf(times, sizeof times, ",%.3f,%.3f\n", us(x.start_ns - t0), us(l));
    *csv << chain.name << times;
  }
  std::sort(latency.begin(), latency.end());
  uint64_t sum = 0;
  for (uint64_t l : latency) sum += l;
  const analysis::ChainResult* bound = bound_of(s, c);
  json j = {{"chain", chain.name},
            {"priority", chain.priority},
            {"critical", chain.critical},
            {"period_us", us(chain.period_ns)},
            {"deadline_us", us(chain.deadline_ns)},
            {"count", latency.size()},
            {"deadline_misses", misses},
            {"drops", state->drops.load()},
            {"link_losses", state->link_losses.load()}};
  if (latency.empty()) {
    j["p50_us"] = j["p99_us"] = j["max_us"] = j["mean_us"] = nullptr;
  } else {
    j["p50_us"] = us(percentile(latency, 50));
    j["p99_us"] = us(percentile(latency, 99));
    j["max_us"] = us(latency.back());
    j["mean_us"] = us(sum / latency.size());
  }
  if (bound && bound->bounded) {
    j["wcrt_us"] = us(bound->wcrt_ns);
    j["bound_held"] = latency.empty() || latency.back() <= bound->wcrt_ns;
    // How many instances, not only whether: one over and a tenth over are
    // different findings (latency is sorted).
    j["over_bound"] = latency.end() - std::upper_bound(latency.begin(), latency.end(), bound->wcrt_ns);
  } else {
    j["wcrt_us"] = nullptr;
    j["bound_held"] = nullptr;
    j["over_bound"] = nullptr;
    if (bound) j["no_bound"] = bound->reason;  // the analysis' why
  }
  return j;
}

json timer_summary(const Setup& s, const SharedRun& shared, size_t t) {
  const size_t cb = s.plan.timers[t];
  const uint64_t period = s.workload.callbacks[cb].trigger.timer_ns;
  const uint64_t count = shared.records_kept(t);
  const TimerRecord* r = shared.timer_records(t);
  // Period jitter: how far the time between two consecutive activations'
  // starts is from the period. Start delay: start minus release.
  std::vector<uint64_t> jitter, delay;
  for (uint64_t i = 0; i < count; ++i) {
    delay.push_back(r[i].start_ns - r[i].release_ns);
    if (i > 0 && r[i].release_ns - r[i - 1].release_ns == period) {
      const int64_t gap = static_cast<int64_t>(r[i].start_ns - r[i - 1].start_ns);
      jitter.push_back(static_cast<uint64_t>(std::llabs(gap - static_cast<int64_t>(period))));
    }
  }
  std::sort(jitter.begin(), jitter.end());
  std::sort(delay.begin(), delay.end());
  return {{"callback", s.workload.callbacks[cb].name},
          {"period_us", us(period)},
          {"activations", count},
          {"jitter_p50_us", us(percentile(jitter, 50))},
          {"jitter_p90_us", us(percentile(jitter, 90))},
          {"jitter_p99_us", us(percentile(jitter, 99))},
          {"jitter_max_us", jitter.empty() ? 0.0 : us(jitter.back())},
          {"start_delay_p99_us", us(percentile(delay, 99))},
          {"start_delay_max_us", delay.empty() ? 0.0 : us(delay.back())}};
}

// Perfetto: one process per executor (a thread per executor thread), one per
// accelerator (a thread per bucket, or per client thread under direct
// invocation). Queueing is an async slice, so that waiting requests overlap.
void trace_events(const Setup& s, const SharedRun& shared, const CoreSampler& cores, const SpeedSampler& speed,
                  const ResourceSampler& resources, const std::vector<Finding>& findings, uint64_t t0,
                  TraceFile* events) {
  auto meta = [events](const char* what, int pid, int tid, const std::string& name) {
    json e = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
    if (tid >= 0) e["tid"] = tid;
    events->add(e);
  };
  const int accel_pid = static_cast<int>(s.workload.executors.size()) + 1;
  for (size_t e = 0; e < s.workload.executors.size(); ++e) {
    const auto& ex = s.workload.executors[e];
    meta("process_name", static_cast<int>(e) + 1, -1,
         "executor " + ex.name + " (core " + std::to_string(ex.core) + ", FIFO " + std::to_string(ex.priority) + ")");
    for (int t = 0; t < ex.threads; ++t) meta("thread_name", static_cast<int>(e) + 1, t, "thread " + std::to_string(t));
  }
  for (size_t d = 0; d < s.workload.accelerators.size(); ++d)
    meta("process_name", accel_pid + static_cast<int>(d), -1, "accelerator " + s.workload.accelerators[d].name);
  // The gang lock: a track per executor thread, named by its gang, with its
  // waits, its holds and, inside a hold, the time a higher gang stopped it.
  const int gang_pid = accel_pid + static_cast<int>(s.workload.accelerators.size());
  if (s.gang) {
    meta("process_name", gang_pid, -1, "gang lock");
    for (size_t e = 0; e < s.workload.executors.size(); ++e) {
      const auto& g = s.gangs[s.gang_of[e]];
      for (int t = 0; t < s.workload.executors[e].threads; ++t)
        meta("thread_name", gang_pid, static_cast<int>(e) * 1000 + t,
             "gang " + g.name + " (" + std::to_string(g.priority) + "): " + s.workload.executors[e].name + " thread " +
                 std::to_string(t));
    }
  }
  uint64_t flow = 0;
  auto ts = [t0](uint64_t ns) { return ns >= t0 ? us(ns - t0) : -us(t0 - ns); };
  // Each chain instance's slices (callbacks, kernels, transfers), for the
  // flow arrows from its start to its end: one array, sorted by chain and
  // start stamp at the end (32 bytes a slice, where a map of vectors took
  // some 200 an instance).
  struct FlowPoint {
    uint64_t instance_ns;
    uint64_t at_ns;
    uint32_t chain;
    int32_t pid, tid;
  };
  static_assert(sizeof(FlowPoint) == 32);
  std::vector<FlowPoint> instances;
  // Room for them at once (at most a point per event of an instance), not
  // grown by doubling, which holds up to three times their size while it
  // copies.
  size_t of_instances = 0;
  for (size_t e = 0; e < s.workload.executors.size() + s.plan.bridges.size(); ++e)
    for (uint64_t i = 0; i < shared.trace_kept(e); ++i) of_instances += shared.trace(e)[i].instance_ns != 0;
  instances.reserve(of_instances);
  auto on_path = [&instances](const TraceEvent& ev, uint64_t at_ns, int pid, int tid) {
    if (ev.instance_ns) instances.push_back({ev.instance_ns, at_ns, ev.chain, pid, tid});
  };
  for (size_t e = 0; e < s.workload.executors.size(); ++e) {
    const uint64_t n = shared.trace_kept(e);
    const int pid = static_cast<int>(e) + 1;
    for (uint64_t i = 0; i < n; ++i) {
      const TraceEvent& ev = shared.trace(e)[i];
      const auto& cb = s.workload.callbacks[ev.callback];
      if (ev.kind >= static_cast<uint32_t>(TraceKind::kGangWait)) {
        static const char* const kNames[] = {"wait", "hold", "preempted"};
        const char* what = kNames[ev.kind - static_cast<uint32_t>(TraceKind::kGangWait)];
        json slice = {{"ph", "X"}, {"cat", "gang"}, {"name", std::string(what) + " " + cb.name},
                      {"pid", gang_pid}, {"tid", static_cast<int>(e) * 1000 + static_cast<int>(ev.thread)},
                      {"ts", ts(ev.begin_ns)}, {"dur", us(ev.end_ns - ev.begin_ns)}};
        if (ev.kind == static_cast<uint32_t>(TraceKind::kGangHold)) slice["args"] = {{"preemptions", ev.segment}};
        events->add(slice);
        continue;
      }
      if (ev.kind == static_cast<uint32_t>(TraceKind::kCallback)) {
        events->add({{"ph", "X"}, {"cat", "callback"}, {"name", cb.name}, {"pid", pid}, {"tid", ev.thread},
                     {"ts", ts(ev.begin_ns)}, {"dur", us(ev.end_ns - ev.begin_ns)},
                     {"args", {{"priority", s.plan.callbacks[ev.callback].priority},
                               {"activation_delay_us", us(ev.begin_ns - ev.submit_ns)},
                               {"cpu_us", us(ev.cpu_ns)},
                               {"wcet_us", us(cb.cpu_ns)}}}});
        on_path(ev, ev.begin_ns, pid, static_cast<int>(ev.thread));
        continue;
      }
      const auto& seg = cb.segments[ev.segment];
      const std::string& name = s.plan.callbacks[ev.callback].segment_names[ev.segment];
      const int dpid = accel_pid + static_cast<int>(seg.accelerator);
      const bool direct = ev.bucket < 0;
      const int dtid = direct ? 1000 + pid * 100 + static_cast<int>(ev.thread) : ev.bucket;
      events->add({{"ph", "X"}, {"cat", "segment"}, {"name", name}, {"pid", pid}, {"tid", ev.thread},
                   {"ts", ts(ev.submit_ns)}, {"dur", us(ev.end_ns - ev.submit_ns)},
                   {"args", {{"status", ev.status}, {"bucket", ev.bucket}}}});
      if (!direct && ev.begin_ns > ev.submit_ns) {
        ++flow;
        events->add({{"ph", "b"}, {"cat", "queue"}, {"name", "queued " + name}, {"id", flow}, {"pid", dpid},
                     {"tid", dtid}, {"ts", ts(ev.submit_ns)}});
        events->add({{"ph", "e"}, {"cat", "queue"}, {"name", "queued " + name}, {"id", flow}, {"pid", dpid},
                     {"tid", dtid}, {"ts", ts(ev.begin_ns)}});
      }
      events->add({{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", dpid}, {"tid", dtid},
                   {"ts", ts(ev.begin_ns)}, {"dur", us(ev.end_ns - ev.begin_ns)},
                   {"args", {{"chain_priority", s.plan.callbacks[ev.callback].priority}}}});
      on_path(ev, ev.begin_ns, dpid, dtid);
    }
  }
  // A process per link, a track per topic crossing it: each message from
  // the sending bridge's send to its arrival on the other node, and before
  // it (async) the time it waited in the outbox.
  const int link_pid = gang_pid + 1;
  for (size_t l = 0; l < s.workload.links.size(); ++l) {
    const auto& link = s.workload.links[l];
    meta("process_name", link_pid + static_cast<int>(l), -1,
         "link " + link.name + " (" + std::string(link.transport->name) +
             ", " + std::to_string(link.rate_bytes_per_s * 8 / 1000000) + " Mbit/s)");
  }
  for (size_t h = 0; h < s.plan.hops.size(); ++h)
    meta("thread_name", link_pid + static_cast<int>(s.plan.hops[h].link), static_cast<int>(h),
         s.plan.hops[h].name + " (priority " + std::to_string(s.plan.hops[h].priority) + ")");
  for (size_t b = 0; b < s.plan.bridges.size(); ++b) {
    const size_t e = s.workload.executors.size() + b;
    const uint64_t n = shared.trace_kept(e);
    for (uint64_t i = 0; i < n; ++i) {
      const TraceEvent& ev = shared.trace(e)[i];
      const HopPlan& hop = s.plan.hops[ev.segment];
      const int pid = link_pid + static_cast<int>(hop.link);
      const int tid = static_cast<int>(ev.segment);
      events->add({{"ph", "X"}, {"cat", "transfer"}, {"name", hop.name}, {"pid", pid}, {"tid", tid},
                   {"ts", ts(ev.begin_ns)}, {"dur", us(ev.end_ns - ev.begin_ns)},
                   {"args", {{"bytes", hop.bytes}, {"priority", hop.priority}, {"stale", ev.status}}}});
      on_path(ev, ev.begin_ns, pid, tid);
      if (ev.begin_ns > ev.submit_ns) {
        ++flow;
        events->add({{"ph", "b"}, {"cat", "outbox"}, {"name", "outbox " + hop.name}, {"id", flow},
                     {"pid", pid}, {"tid", tid}, {"ts", ts(ev.submit_ns)}});
        events->add({{"ph", "e"}, {"cat", "outbox"}, {"name", "outbox " + hop.name}, {"id", flow},
                     {"pid", pid}, {"tid", tid}, {"ts", ts(ev.begin_ns)}});
      }
    }
  }
  // A flow per chain instance through its slices in time order: Perfetto
  // draws an arrow from each to the next ("s", "t" steps, "f" at the end,
  // each bound to the slice that starts there).
  std::sort(instances.begin(), instances.end(), [](const FlowPoint& a, const FlowPoint& b) {
    return std::tie(a.chain, a.instance_ns, a.at_ns) < std::tie(b.chain, b.instance_ns, b.at_ns);
  });
  uint64_t flow_id = 0;
  for (size_t first = 0, end = 0; first < instances.size(); first = end) {
    end = first + 1;
    while (end < instances.size() && instances[end].chain == instances[first].chain &&
           instances[end].instance_ns == instances[first].instance_ns)
      ++end;
    if (end - first < 2) continue;
    ++flow_id;
    const std::string name = "chain " + s.workload.chains[instances[first].chain].name;
    for (size_t i = first; i < end; ++i) {
      json e = {{"ph", i == first ? "s" : i + 1 == end ? "f" : "t"}, {"cat", "chain"}, {"name", name},
                {"id", flow_id}, {"pid", instances[i].pid}, {"tid", instances[i].tid}, {"ts", ts(instances[i].at_ns)}};
      if (i + 1 == end) e["bp"] = "e";
      events->add(e);
    }
  }
  // What the executors' cores and the cpu-backend accelerators' lost to
  // interrupts, softirqs and the hypervisor, per sampling interval, and the
  // machine's speed: counters on a process of their own.
  const int cores_pid = link_pid + static_cast<int>(s.workload.links.size());
  meta("process_name", cores_pid, -1, "cores (time lost, /proc/stat; machine speed)");
  for (int core : cores.cores())
    for (const auto& [at, loss] : cores.intervals(core))
      events->add({{"ph", "C"}, {"name", "core " + std::to_string(core) + " lost (us)"}, {"pid", cores_pid},
                   {"ts", ts(at)},
                   {"args", {{"irq", us(loss.irq_ns)}, {"softirq", us(loss.softirq_ns)}, {"steal", us(loss.steal_ns)}}}});
  for (const auto& [at, ratio] : speed.samples())
    events->add({{"ph", "C"}, {"name", "machine speed (x calibrated)"}, {"pid", cores_pid}, {"ts", ts(at)},
                 {"args", {{"speed", ratio}}}});
  // What the monitor found over what the analysis allowed: a process of its
  // own, an async track per kind and piece of work (they overlap: kernels of
  // two buckets, instances of a pipelined chain), each over its time.
  const int monitor_pid = cores_pid + 1;
  if (!findings.empty()) meta("process_name", monitor_pid, -1, "monitor: over what the analysis allowed");
  uint64_t finding_id = 0;
  for (const Finding& f : findings) {
    // By Finding::Kind: the slice's name before what, and its args' keys.
    static const struct {
      const char *prefix, *took, *allowed;
    } kMarks[] = {{"over WCET: ", "cpu_us", "wcet_us"},
                  {"kernel over its time: ", "kernel_us", "wcet_us"},
                  {"hop over its bound: ", "hop_us", "bound_us"},
                  {"late release: ", "start_delay_us", "jitter_us"},
                  {"kept off core: ", "off_core_us", "slack_us"},
                  {"request over epsilon: ", "overhead_us", "epsilon_us"},
                  {"request on the link over its bound: ", "legs_us", "bound_us"},
                  {"over its bound: chain ", "latency_us", "bound_us"}};
    const auto& mark = kMarks[f.kind];
    json args = {{mark.took, us(f.took_ns)}, {mark.allowed, us(f.allowed_ns)}};
    if (f.kind == Finding::kInstance) {
      args["measured_bound_us"] = f.measured_bound_ns ? json(us(f.measured_bound_ns)) : json(nullptr);
      args["explained"] = f.explained;
    }
    // An instance the run cannot explain is the analysis' fault: a track of
    // its own, where a user looks first.
    std::string name =
        f.kind == Finding::kInstance && !f.explained ? "over its bound, unexplained: chain " : mark.prefix;
    name += f.what;
    ++finding_id;
    events->add({{"ph", "b"}, {"cat", "monitor"}, {"name", name}, {"id", finding_id}, {"pid", monitor_pid},
                 {"ts", ts(f.begin_ns)}, {"args", std::move(args)}});
    events->add({{"ph", "e"}, {"cat", "monitor"}, {"name", name}, {"id", finding_id}, {"pid", monitor_pid},
                 {"ts", ts(f.end_ns)}});
  }
  // The run's processes' resident memory and descriptors, a counter each.
  const int resources_pid = monitor_pid + 1;
  meta("process_name", resources_pid, -1, "the run's processes (resident memory, open descriptors)");
  for (const auto& p : resources.processes())
    for (const auto& [at, r] : p.samples)
      events->add({{"ph", "C"}, {"name", p.name + " (pid " + std::to_string(p.pid) + ")"},
                   {"pid", resources_pid}, {"ts", ts(at)},
                   {"args",
                    {{"rss_mb", static_cast<double>(r.rss_kb) / 1024.0},
                     {"private_mb", static_cast<double>(r.rss_kb - r.shared_kb) / 1024.0},
                     {"descriptors", r.descriptors}}}});
  // Name the accelerator tracks that appeared.
  for (size_t d = 0; d < s.workload.accelerators.size(); ++d)
    for (int b = 0; b < s.workload.accelerators[d].priority_levels; ++b)
      meta("thread_name", accel_pid + static_cast<int>(d), b, "bucket " + std::to_string(b));
}

Status write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return finish_result_file(out, path);
}

// One run of a workload, from the set-up to the result files.
class Run {
 public:
  explicit Run(const RunOptions& o) : options_(o) {}
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  // Whatever way the run ends, its best-effort programs end as at its
  // end: the destructor of a supervisor's Child kills it outright, which
  // leaves its program running.
  ~Run() { end_best_effort(); }
  Expected<RunEnd> execute();

 private:
  bool stop_requested() const { return options_.stop && options_.stop->load(std::memory_order_relaxed); }
  Status check_options() const;
  Status start_private_server();
  Status start_declaring();
  Status watch_declaration();
  // Where executor `e` reaches the server: its socket, or from another node
  // the gateway on the accelerators' node.
  std::string server_address(size_t e) const;
  Status start_executors();
  Status start_bridges();
  Status start_isolation();
  void end_isolation();
  Status start_best_effort();
  void end_best_effort();
  Status watch_best_effort(uint64_t now);
  void watch_stops(uint64_t now);
  json best_effort_summary(uint64_t stopped_ns) const;
  void best_effort_trace(uint64_t stopped_ns, TraceFile* trace) const;
  json isolation_summary() const;
  json shim_summary() const;
  std::filesystem::path shim_file(pid_t pid, const char* suffix) const;
  size_t processes() const { return setup_.workload.executors.size() + setup_.plan.bridges.size(); }
  void fail_links(uint64_t now);
  json link_summary() const;
  json gang_summary() const;
  Status failure();
  Status wait_until_ready();
  Status supervise();
  void watch_resources();
  void report_progress(uint64_t now, bool final = false);
  void warn_where_traces_fill() const;
  void stop_executors();
  void wind_down();
  // FAILURE: why the run ended before its time (a process of it died), or
  // empty.
  Status write_results(uint64_t stopped_ns, const std::string& failure);

  const RunOptions& options_;
  Setup setup_;
  uint64_t duration_ns_ = 0;
  std::string socket_;
  std::string server_log_;
  std::string server_dir_;  // the private server's socket folder, removed at the end
  core::Child server_;
  // paam: the process whose connection declares the workload's chains to
  // the server and holds them there until the executors are done, and the
  // pipe its answer comes on (open until read).
  core::Child declarer_;
  core::UniqueFd declared_pipe_;
  std::vector<core::Child> executors_;  // executors, then bridges
  // A best-effort program, and when and how it ended if that was before
  // the run did (ended_ns 0: it ran to the end).
  struct BestEffort {
    std::string command;
    std::string log;  // in the results folder
    core::Child child;
    uint64_t ended_ns = 0;
    int wait_status = 0;
    // Its processes seen stopped, from when until when (until 0: stopped
    // still): those stopped now by pid, and the first kStopsKept of those
    // that continued or ended, then a count.
    struct Stop {
      std::string process;
      pid_t pid = 0;
      uint64_t from_ns = 0, until_ns = 0;
    };
    std::map<pid_t, Stop> stopped;
    std::vector<Stop> stops;
    uint64_t stops_not_kept = 0;
    // The time while any of its processes was stopped, every stop counted
    // (kept or not), up to the last look.
    uint64_t stopped_ns = 0, looked_ns = 0;
  };
  std::vector<BestEffort> best_effort_;
  // Isolation: the regulator, and the names of what it and the run share
  // (bandwidth lock, gang lock, regulator status: "run-PID"; the
  // best-effort cgroup "rtaccel-run-PID").
  core::Child regulator_;
  // Under the interposer (RunOptions::shim_modes): where its reports go, and
  // which of the run's processes each pid was.
  std::string shim_dir_;
  std::map<pid_t, std::string> shim_processes_;
  std::string run_name_;
  std::string cgroup_;
  // The results folder, locked (flock) for the run: two runs into one
  // folder would interleave their results.
  core::UniqueFd out_lock_;
  NodeNetwork nodes_;
  std::vector<uint64_t> link_down_ns_;   // per link: when it was taken down (0: not)
  rtaccel_gang_lock_t* gang_lock_ = nullptr;
  SharedRun shared_;
  CoreSampler cores_;  // interrupts, softirqs and steal on the cores watched
  SpeedSampler speed_;  // the calibrated busy loop's rate now against then
  ResourceSampler resources_;  // the run's processes' memory and descriptors
  uint64_t t0_ = 0;
  bool started_ = false;  // the executors were released: a stop before it is a run of no time
  // Seconds from the run's start to NS; 0 for a time before it.
  double into_run_s(uint64_t ns) const { return ns > t0_ ? static_cast<double>(ns - t0_) / 1e9 : 0.0; }
  uint64_t next_report_ = 0;
  // Other runs under way beside this one: per runner's pid, when this run
  // first and last saw it (0: before it began).
  struct OtherRun {
    uint64_t first_ns = 0;
    uint64_t last_ns = 0;
  };
  std::map<pid_t, OtherRun> other_runs_;
  void note_other_runs(uint64_t now);
  void note_pause_requests();
  // What a warning in the middle of the run starts with: a new line where
  // the progress line on a terminal is open.
  const char* warning_start();
  bool progress_line_open_ = false;
  uint32_t pause_requests_seen_ = 0;
  std::vector<uint64_t> progress_seen_;    // per chain: samples already counted
  std::vector<uint64_t> progress_misses_;  // and the deadline misses among them
  std::vector<uint64_t> progress_over_;    // and the instances over the chain's bound
  std::vector<uint64_t> progress_bound_;   // critical chains' bounds; 0: none to judge by
  bool realtime_ = true;
};

Status Run::check_options() const {
  if (!(options_.duration_s > 0) || options_.duration_s > 24 * 3600)
    return Status::invalid("duration must be between 0 and 24 hours");
  if (!(options_.work_fraction > 0) || options_.work_fraction > 1) return Status::invalid("work fraction must be in (0, 1]");
  for (const auto& [name, at_s] : options_.link_failures)
    if (!(at_s >= 0) || at_s > options_.duration_s)
      return Status::invalid("link '" + name + "' is to go down within the run (0 to its duration)");
  if (!options_.shim_modes.empty()) {
    if (("," + options_.shim_modes + ",").find(",trace,") == std::string::npos)
      return Status::invalid("the interposer's modes must include trace in a run");
    const char* modes = getenv("RTACCEL_SHIM");
    const char* dir = getenv("RTACCEL_SHIM_OUT");
    if (!dlsym(RTLD_DEFAULT, "rtaccel_shim_write_report") || !modes || options_.shim_modes != modes || !dir || !*dir)
      return Status::error("the interposer is not preloaded into the runner in modes '" + options_.shim_modes +
                           "' with RTACCEL_SHIM_OUT set (rtaccel-exec --shim does that)");
  }
  return Status();
}

constexpr int kGatewayPort = 7411;  // in the accelerators' node's own namespace

std::string Run::server_address(size_t e) const {
  bool segments = false;
  for (size_t cb : setup_.plan.by_executor[e]) segments = segments || !setup_.workload.callbacks[cb].segments.empty();
  if (!segments) return socket_;
  const size_t here = setup_.workload.executors[e].node, there = setup_.workload.accelerators.front().node;
  if (here == there) return socket_;
  const auto link = static_cast<size_t>(setup_.workload.link_between(here, there));
  return std::string(setup_.workload.links[link].transport->name) + ":" + nodes_.host(link, there) + ":" +
         std::to_string(kGatewayPort);
}

// paam without a socket: a private rtaccel-server, logging to the result
// folder, stopped by the runner after the executors (not by a Ctrl-C). With
// callbacks on other nodes than the accelerators', it runs in the
// accelerators' node's namespace with its gateway for them, and a policy
// naming their ends of the links.
Status Run::start_private_server() {
  // Named after the runner, so that a run after one killed finds it.
  std::string dir = "/tmp/" + std::string(kRunPrefix) + std::to_string(getpid()) + "-XXXXXX";
  if (!mkdtemp(dir.data())) return Status::os_error("cannot create a folder for the server's socket", errno);
  server_dir_ = dir;
  socket_ = server_dir_ + "/server.sock";
  const std::string binary = options_.server_binary.empty() ? self_dir() + "/rtaccel-server" : options_.server_binary;
  auto args = server_args(setup_.workload, socket_);
  args.insert(args.begin(), binary);
  if (!rtaccel_fifo_allowed(1)) args.push_back("--no-fifo");  // the server would say so, in its log
  if (options_.policy != Policy::kPaam) {
    // ros2 and picas: only requests from other nodes come here, served in
    // arrival order as a service node would serve them.
    *(std::find(args.begin(), args.end(), "--levels") + 1) = "1";
  }
  if (setup_.gateway) {  // callbacks use an accelerator on another node
    const size_t there = setup_.workload.accelerators.front().node;
    std::string policy = "allow:\n  - {user: root, priorities: [-2147483648, 2147483647]}\n  - {uid: " +
                         std::to_string(geteuid()) + ", priorities: [-2147483648, 2147483647]}\n";
    for (size_t l = 0; l < setup_.workload.links.size(); ++l) {
      const auto& link = setup_.workload.links[l];
      if (link.a != there && link.b != there) continue;
      policy += "  - {peer: " + nodes_.host(l, link.a == there ? link.b : link.a) +
                ", priorities: [-2147483648, 2147483647]}\n";
    }
    const std::string policy_path = server_dir_ + "/policy.yaml";
    if (Status st = write_file(policy_path, policy); !st) return st;
    args.insert(args.end(), {"--policy", policy_path, "--listen",
                             std::string(setup_.gateway->name) + ":0.0.0.0:" + std::to_string(kGatewayPort)});
    const auto prefix = nodes_.run_in(there);
    args.insert(args.begin(), prefix.begin(), prefix.end());
  }
  // Under gangs the bounds are the gang analysis', which the PAAM analysis
  // of the server's admission control does not match: it would refuse
  // chains the run's analysis bounds.
  if (setup_.gang) args.push_back("--no-deadline-check");
  if (setup_.isolation && setup_.bwlock_bucket >= 0 && options_.policy == Policy::kPaam)
    args.insert(args.end(), {"--bwlock", run_name_, "--bwlock-threshold",
                             std::to_string(setup_.workload.isolation.bwlock_threshold_mbps), "--bwlock-bucket",
                             std::to_string(setup_.bwlock_bucket)});
  args.push_back("--stopped-by-parent");
  server_log_ = (std::filesystem::path(options_.out_dir) / "server.log").string();
  core::SpawnOptions options;
  options.log_path = server_log_;
  options.parent_death_signal = SIGTERM;
  options.ignore_terminal_signals = true;
  options.ready_handshake = true;
  auto child = core::Child::spawn(args, options);
  if (!child) return child.status().context("cannot start " + binary);
  server_ = child.take();
  shim_processes_[server_.pid()] = "server";
  if (Status ready = server_.wait_ready(10 * kSecond); !ready)
    return Status::error("rtaccel-server did not start (" + binary + "): " + ready.message() + "; see " + server_log_);
  return Status();
}

// paam: the workload's chains are declared to the server's admission
// control before any executor registers a callback, so that it analyses
// what the run's own analysis does: the chains that call no accelerator
// beside those that do, and the chains that feed a fusion before the one
// waiting at it. A chain past the protocol's limits is left out, and the
// run says so. A process of its own declares them and holds them, so that
// a server that never answers keeps the runner waiting no more than it
// waits for executors (watch_declaration()).
struct DeclarationAnswer {
  int32_t err;
  char why[256];
};
static_assert(sizeof(DeclarationAnswer) <= PIPE_BUF, "one write, read whole");

Status Run::start_declaring() {
  auto* header = shared_.header();
  if (options_.policy != Policy::kPaam || socket_.empty()) {
    header->declared.store(1, std::memory_order_release);
    return Status();
  }
  const auto& w = setup_.workload;
  std::vector<rtaccel_chain_desc> chains;
  chains.reserve(w.chains.size());
  for (size_t c = 0; c < w.chains.size(); ++c) {
    rtaccel_chain_desc desc;
    if (Status st = chain_desc_for(w, c, &desc); !st) {
      fprintf(stderr, "rtaccel run: chain '%s' is not declared to rtaccel-server, whose admission control does not "
              "see it: %s\n", w.chains[c].name.c_str(), st.message().c_str());
      continue;
    }
    chains.push_back(desc);
  }
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) < 0) return Status::os_error("pipe", errno);
  core::UniqueFd read_end(ends[0]), write_end(ends[1]);
  const pid_t self = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Status::os_error("fork", errno);
  if (pid == 0) {
    join_the_run(self);
    DeclarationAnswer answer{};
    rtaccel_client* client = nullptr;
    answer.err = rtaccel_client_connect(socket_.c_str(), &client);
    if (answer.err)
      snprintf(answer.why, sizeof(answer.why), "cannot connect to rtaccel-server at %s: %s", socket_.c_str(),
               strerror(-answer.err));
    else
      answer.err = rtaccel_client_declare(client, chains.data(), chains.size(), answer.why, sizeof(answer.why));
    if (write(write_end.get(), &answer, sizeof(answer)) != ssize_t(sizeof(answer)) || answer.err) _exit(1);
    for (;;) pause();  // the runner ends it once the executors are done
  }
  declarer_ = core::Child::adopt(pid);
  fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
  declared_pipe_ = std::move(read_end);
  return Status();
}

// The declarer's answer, once it came: the executors may register then.
Status Run::watch_declaration() {
  if (!declared_pipe_) return Status();
  DeclarationAnswer answer{};
  const ssize_t n = read(declared_pipe_.get(), &answer, sizeof(answer));
  if (n < 0 && errno == EAGAIN) return Status();
  declared_pipe_.reset();
  if (n != ssize_t(sizeof(answer)))
    return Status::error("the declaration of the workload's chains to rtaccel-server ended without an answer");
  if (answer.err) {
    answer.why[sizeof(answer.why) - 1] = '\0';
    return Status::error(std::string("rtaccel-server refused the workload's chains: ") +
                             (answer.why[0] ? answer.why : strerror(-answer.err)),
                         -answer.err);
  }
  auto* header = shared_.header();
  header->declared.store(1, std::memory_order_release);
  futex_wake(reinterpret_cast<uint32_t*>(&header->declared), INT_MAX, true);
  return Status();
}

Status Run::start_executors() {
  const pid_t self = getpid();
  for (size_t e = 0; e < setup_.workload.executors.size(); ++e) {
    const pid_t pid = fork();
    if (pid < 0) return Status::os_error("fork", errno);
    if (pid == 0) {
      join_the_run(self);
      if (Status st = nodes_.enter(setup_.workload.executors[e].node); !st) {
        snprintf(shared_.executor(e)->error, sizeof(shared_.executor(e)->error), "%s", st.message().c_str());
        shared_.executor(e)->status.store(static_cast<uint32_t>(ExecutorStatus::kFailed));
        _exit(1);
      }
      ExecutorConfig config;
      config.workload = &setup_.workload;
      config.plan = &setup_.plan;
      config.requests = &setup_.requests;
      config.shared = &shared_;
      config.executor = e;
      config.policy = options_.policy;
      config.work_fraction = options_.work_fraction;
      config.walk_ns_per_line = &setup_.walk_ns_per_line;
      config.socket = server_address(e);
      config.remote_accelerator = config.socket != socket_;
      if (setup_.gang) {
        config.gang_lock = gang_lock_;
        config.gang = &setup_.gangs[setup_.gang_of[e]];
      }
      if (setup_.isolation && !setup_.workload.isolation.bwlock_chains.empty()) {
        config.bwlock = run_name_;
        config.bwlock_threshold_mbps = setup_.workload.isolation.bwlock_threshold_mbps;
        config.holds_bwlock = &setup_.holds_bwlock;
      }
      const bool ok = run_executor(config).ok();
      write_shim_report();
      _exit(ok ? 0 : 1);
    }
    shim_processes_[pid] = "executor " + setup_.workload.executors[e].name;
    executors_.push_back(core::Child::adopt(pid));
  }
  return Status();
}

// One process per end of every link that carries topics, in its node's
// namespace.
Status Run::start_bridges() {
  const pid_t self = getpid();
  const auto run_id = static_cast<unsigned>(self);
  for (size_t b = 0; b < setup_.plan.bridges.size(); ++b) {
    const BridgePlan& bp = setup_.plan.bridges[b];
    const auto& link = setup_.workload.links[bp.link];
    BridgeConfig config;
    config.workload = &setup_.workload;
    config.plan = &setup_.plan;
    config.shared = &shared_;
    config.bridge = b;
    config.flow_control = options_.flow_control;
    config.connect_needs_port = !link.transport->one_machine;
    config.listen_address = nodes_.listen_address(bp.link, bp.node, run_id);
    const size_t other = bp.node == link.a ? link.b : link.a;
    config.connect_address = nodes_.connect_address(bp.link, bp.node, 0, run_id);
    if (config.connect_needs_port) config.connect_address.resize(config.connect_address.rfind(':') + 1);
    // The one peer the listening end admits: the other end's address.
    const std::string peer = nodes_.listen_address(bp.link, other, run_id);
    config.allow = link.transport->one_machine
                       ? "uid:" + std::to_string(geteuid())
                       : peer.substr(peer.find(':') + 1, peer.rfind(':') - peer.find(':') - 1);
    const pid_t pid = fork();
    if (pid < 0) return Status::os_error("fork", errno);
    if (pid == 0) {
      join_the_run(self);
      ExecutorState* state = shared_.executor(setup_.workload.executors.size() + b);
      if (Status st = nodes_.enter(bp.node); !st) {
        snprintf(state->error, sizeof(state->error), "%s", st.message().c_str());
        state->status.store(static_cast<uint32_t>(ExecutorStatus::kFailed));
        _exit(1);
      }
      const bool ok = run_bridge(config).ok();
      write_shim_report();
      _exit(ok ? 0 : 1);
    }
    shim_processes_[pid] = "bridge " + link.name + "@" + setup_.workload.nodes[bp.node].name;
    executors_.push_back(core::Child::adopt(pid));
  }
  return Status();
}

// Fault injection: the links due to go down by now.
void Run::fail_links(uint64_t now) {
  for (const auto& [l, at_ns] : setup_.link_failures) {
    if (link_down_ns_[l] || now < t0_ + at_ns) continue;
    link_down_ns_[l] = now;
    const char* name = setup_.workload.links[l].name.c_str();
    if (Status st = nodes_.take_down(l); !st)
      fprintf(stderr, "%srtaccel run: cannot take link '%s' down: %s\n", warning_start(), name, st.message().c_str());
    else if (options_.progress)
      fprintf(stderr, "%srtaccel run: link '%s' taken down at %.1f s\n", warning_start(), name,
              static_cast<double>(now - t0_) / 1e9);
  }
}

// The regulator for the run (rtaccel-isolate regulate): on the regulated
// cores, metering the run's best-effort cgroup, which it makes and removes;
// its bandwidth lock and gang lock are the run's. It writes its summary and
// trace into the result folder when the runner stops it.
Status Run::start_isolation() {
  const auto& iso = setup_.workload.isolation;
  if (!rtaccel_fifo_allowed(99))
    return Status::error("isolation: the regulator needs SCHED_FIFO and perf events (root); run without it "
                         "with --no-isolation");
  std::string cores;
  if (iso.cores.empty()) {
    for (int c = 0; c < setup_.workload.cores; ++c) cores += (c ? "," : "") + std::to_string(c);
  } else {
    for (int c : iso.cores) cores += (cores.empty() ? "" : ",") + std::to_string(c);
  }
  const std::filesystem::path out(options_.out_dir);
  std::vector<std::string> args = {isolate_binary(options_), "regulate", "--cores", cores, "--period-us",
                                   std::to_string(iso.period_ns / 1000), "--cgroup", cgroup_, "--own-cgroup",
                                   "--bwlock", run_name_, "--be-peak-mbps", std::to_string(iso.be_peak_mbps),
                                   "--summary", (out / "regulator.json").string(),
                                   "--trace", (out / "regulator.trace.json").string(), "--quiet",
                                   "--stopped-by-parent"};
  if (iso.threshold_mbps != workload::Isolation::kUnlimited)
    args.insert(args.end(), {"--threshold", std::to_string(iso.threshold_mbps)});
  if (setup_.gang) args.insert(args.end(), {"--gang", run_name_});
  core::SpawnOptions options;
  options.log_path = (out / "regulator.log").string();
  options.parent_death_signal = SIGTERM;
  options.ignore_terminal_signals = true;
  options.ready_handshake = true;
  options.environment = environment_without_shim();
  auto child = core::Child::spawn(args, options);
  if (!child) return child.status().context("cannot start the regulator " + args[0]);
  regulator_ = child.take();
  if (Status ready = regulator_.wait_ready(10 * kSecond); !ready)
    return Status::error("the regulator did not start: " + ready.message() + "; see " + options.log_path);
  return Status();
}

// Whatever way the run ends: the best-effort programs, then the regulator
// (which removes its cgroup once they are gone), then the shared-memory
// objects named after the run. Nothing of it is left behind.
void Run::end_isolation() {
  if (!setup_.isolation) return;
  end_best_effort();
  regulator_.terminate(10 * kSecond);
  rtaccel_bwlock_unlink(run_name_.c_str());
  if (setup_.gang) rtaccel_gang_lock_unlink(run_name_.c_str());
  std::error_code ec;
  std::filesystem::remove("/dev/shm/rtaccel-regulator." + run_name_, ec);
}

// What a best-effort program's log keeps: its first 16 MiB of output, and
// its last 64 KiB where it wrote more.
constexpr uint64_t kBestEffortLogBytes = uint64_t{16} << 20;

// Best-effort programs: plain SCHED_OTHER children, on any core, from a
// shell so that a user writes them as on a command line.
Status Run::start_best_effort() {
  for (size_t i = 0; i < options_.best_effort.size(); ++i) {
    BestEffort program;
    program.command = options_.best_effort[i];
    program.log = "best_effort_" + std::to_string(i) + ".log";
    core::SpawnOptions options;
    options.log_path = (std::filesystem::path(options_.out_dir) / program.log).string();
    options.parent_death_signal = SIGTERM;
    // In a session of its own, with no terminal, as a cron job: the
    // terminal's signals do not reach it, and nothing there can stop it
    // (SIGTTIN for a program that reads /dev/tty). It reads /dev/null, as a
    // script's background job does, and starts with the signals the user's
    // command had, not the run's.
    options.as_started = true;
    options.stdin_from_null = true;
    options.own_session = true;
    options.environment = environment_without_shim();
    // rtaccel-isolate run-be ends what the shell started, all of it, when
    // the run stops it and also where the run is killed (--end-with-parent),
    // which SIGTERM to the shell alone would not; and it keeps a chatty
    // program (`yes` writes 400 MB a second) from filling the disk the
    // results need. Under isolation the regulated cgroup is where
    // best-effort work runs.
    std::vector<std::string> argv = {isolate_binary(options_), "run-be", "--end-with-parent",
                                     "--output-cap", std::to_string(kBestEffortLogBytes)};
    if (setup_.isolation)
      argv.insert(argv.end(), {"--cgroup", cgroup_});
    else
      argv.push_back("--no-cgroup");
    argv.insert(argv.end(), {"--", "/bin/sh", "-c", program.command});
    auto child = core::Child::spawn(argv, options);
    if (!child) return child.status().context("cannot start best-effort program '" + program.command + "'");
    program.child = child.take();
    best_effort_.push_back(std::move(program));
  }
  return Status();
}

// Each supervisor ends its program and what that started (SIGKILL for what
// is left a second after the SIGTERM) and is done at most 1.5 s after its
// SIGTERM by its own clock. It is waited for longer: a supervisor killed
// before it is done leaves what it supervises running, and one on a slow
// host, or on a core the regulator parks, takes longer. (Under isolation the
// regulator ends what is left in its cgroup; without it nothing would.)
void Run::end_best_effort() {
  constexpr uint64_t kSupervisorGrace = 10 * kSecond;
  for (auto& program : best_effort_) program.child.terminate(kSupervisorGrace);
}

// The last line a program wrote to its log (from its last 4 KiB: a
// build's log can be large): what a shell says when it cannot find a
// command, or what a benchmark printed when it gave up.
static std::string last_line(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : 0;
  in.seekg(std::max<std::streamoff>(0, size - 4096));
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// A best-effort program that ends before the run leaves the run without
// the load it was asked to run beside: said at once, kept in the summary.
// One the shell could not start at all (status 126 or 127: not found, not
// executable) is a mistake in the command, and ends the run.
Status Run::watch_best_effort(uint64_t now) {
  for (auto& program : best_effort_) {
    int status = 0;
    if (program.ended_ns || !program.child.exited(&status)) continue;
    program.ended_ns = now;
    program.wait_status = status;
    const std::string said = last_line(std::filesystem::path(options_.out_dir) / program.log);
    const std::string what = "best-effort program '" + program.command + "' " + core::describe_wait_status(status) +
                             (said.empty() ? "" : " (its log: \"" + said + "\")");
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127))
      return Status::invalid(what + "; give a command the run's PATH finds, or its full path");
    if (t0_ && now > t0_)
      fprintf(stderr, "%srtaccel run: warning: %s %.1f s into the run; the rest of the run is without it\n",
              warning_start(), what.c_str(), static_cast<double>(now - t0_) / 1e9);
    else
      fprintf(stderr, "rtaccel run: warning: %s before the run began; the run is without it\n", what.c_str());
  }
  return Status();
}

// The processes of a best-effort program (the supervisor's descendants:
// those that left their parent come to it, the subreaper) that are
// stopped, as (pid, name); of at most the first 4096 processes found, which
// bounds what a fork bomb costs this loop. Stopped by a signal ('T'), not
// by a tracer ('t'), which under strace is a moment at each system call.
static std::vector<std::pair<pid_t, std::string>> stopped_processes(pid_t supervisor) {
  std::vector<std::pair<pid_t, std::string>> stopped;
  std::vector<long> found;
  auto add = [](long child, void* arg) { static_cast<std::vector<long>*>(arg)->push_back(child); };
  rtaccel_for_each_child(supervisor, add, &found);
  for (size_t i = 0; i < found.size() && i < 4096; ++i) {
    rtaccel_proc_stat st;
    if (!rtaccel_read_proc_stat(found[i], &st)) continue;
    if (st.state == 'T') stopped.emplace_back(static_cast<pid_t>(found[i]), st.name);
    rtaccel_for_each_child(found[i], add, &found);
  }
  return stopped;
}

// "sleep (pid 41), sh (pid 40)", the first three and a count of the rest.
static std::string name_processes(const std::vector<std::pair<pid_t, std::string>>& processes) {
  std::string said;
  for (size_t i = 0; i < processes.size() && i < 3; ++i)
    said += (i ? ", " : "") + processes[i].second + " (pid " + std::to_string(processes[i].first) + ")";
  if (processes.size() > 3) said += " and " + std::to_string(processes.size() - 3) + " more";
  return said;
}

// A best-effort program stopped (SIGSTOP, or SIGTSTP sent from outside the
// run: in a session of its own, no terminal stops it) is a load the run
// goes without while it stays so, as one that ended is: said when seen and
// when it continues, kept in the summary. Looked at once a second.
void Run::watch_stops(uint64_t now) {
  constexpr size_t kStopsKept = 100;
  const double at_s = into_run_s(now);
  for (auto& program : best_effort_) {
    if (program.ended_ns || program.child.pid() < 0) continue;
    // Stopped since the last look, as the stops below are kept.
    if (!program.stopped.empty()) program.stopped_ns += now - program.looked_ns;
    program.looked_ns = now;
    const auto stopped = stopped_processes(program.child.pid());
    std::vector<std::pair<pid_t, std::string>> began, ended;
    for (const auto& [pid, name] : stopped)
      if (program.stopped.try_emplace(pid, BestEffort::Stop{name, pid, now, 0}).second) began.emplace_back(pid, name);
    uint64_t longest = 0;
    for (auto it = program.stopped.begin(); it != program.stopped.end();) {
      if (std::any_of(stopped.begin(), stopped.end(), [&](const auto& p) { return p.first == it->first; })) {
        ++it;
        continue;
      }
      BestEffort::Stop stop = std::move(it->second);
      it = program.stopped.erase(it);
      stop.until_ns = now;
      longest = std::max(longest, now - stop.from_ns);
      ended.emplace_back(stop.pid, stop.process);
      if (program.stops.size() < kStopsKept)
        program.stops.push_back(std::move(stop));
      else
        ++program.stops_not_kept;
    }
    if (!began.empty())
      fprintf(stderr,
              "%srtaccel run: warning: best-effort program '%s': %s stopped %.1f s into the run (SIGSTOP, or "
              "SIGTSTP from outside the run); its load is absent while it stays stopped\n",
              warning_start(), program.command.c_str(), name_processes(began).c_str(), at_s);
    if (!ended.empty())
      fprintf(stderr, "%srtaccel run: best-effort program '%s': %s no longer stopped %.1f s into the run, after up to %.1f s\n",
              warning_start(), program.command.c_str(), name_processes(ended).c_str(), at_s,
              static_cast<double>(longest) / 1e9);
  }
}

json Run::best_effort_summary(uint64_t stopped_ns) const {
  json programs = json::array();
  for (const auto& program : best_effort_) {
    json entry = {{"command", program.command}, {"log", program.log}, {"ended_s", nullptr}, {"ended", nullptr}};
    if (program.ended_ns) {
      entry["ended_s"] = into_run_s(program.ended_ns);
      entry["ended"] = core::describe_wait_status(program.wait_status);
    }
    // Stops, in the order they began; until_s null: stopped to the end.
    std::vector<BestEffort::Stop> stops = program.stops;
    for (const auto& [pid, stop] : program.stopped) stops.push_back(stop);
    std::sort(stops.begin(), stops.end(), [](const auto& a, const auto& b) { return a.from_ns < b.from_ns; });
    json listed = json::array();
    for (const auto& stop : stops)
      listed.push_back({{"process", stop.process},
                        {"pid", stop.pid},
                        {"from_s", into_run_s(stop.from_ns)},
                        {"until_s", stop.until_ns ? json(into_run_s(stop.until_ns)) : json(nullptr)}});
    entry["stopped"] = std::move(listed);
    if (program.stops_not_kept) entry["stops_not_kept"] = program.stops_not_kept;
    // A stop open at the end lasts to the run's end, as until_s null says.
    const uint64_t open = program.stopped.empty() || stopped_ns < program.looked_ns ? 0 : stopped_ns - program.looked_ns;
    entry["stopped_s"] = static_cast<double>(program.stopped_ns + open) / 1e9;
    programs.push_back(std::move(entry));
  }
  return programs;
}

// Perfetto: a process of the best-effort programs, a track each, with a
// slice over each stop of one of its processes and a mark where it ended
// before the run did: the load absent, beside what it did to the chains.
void Run::best_effort_trace(uint64_t stopped_ns, TraceFile* trace) const {
  if (best_effort_.empty()) return;
  const int pid = trace->last_pid() + 1;
  auto ts = [this](uint64_t ns) { return ns > t0_ ? us(ns - t0_) : 0.0; };
  trace->add({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "best-effort programs"}}}});
  for (size_t i = 0; i < best_effort_.size(); ++i) {
    const BestEffort& program = best_effort_[i];
    const int tid = static_cast<int>(i);
    trace->add({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", program.command}}}});
    auto slice = [&](const BestEffort::Stop& stop) {
      const uint64_t until = stop.until_ns ? stop.until_ns : std::max(stopped_ns, stop.from_ns);
      trace->add({{"ph", "X"}, {"name", "stopped: " + stop.process + " (pid " + std::to_string(stop.pid) + ")"},
                  {"pid", pid}, {"tid", tid}, {"ts", ts(stop.from_ns)}, {"dur", us(until - stop.from_ns)},
                  {"args", {{"continued", stop.until_ns != 0}}}});
    };
    for (const auto& stop : program.stops) slice(stop);
    for (const auto& [process, stop] : program.stopped) slice(stop);
    if (program.ended_ns)
      trace->add({{"ph", "i"}, {"s", "t"}, {"name", "ended: " + core::describe_wait_status(program.wait_status)},
                  {"pid", pid}, {"tid", tid}, {"ts", ts(program.ended_ns)}});
  }
}

// Per link: its set-up and, per topic crossing it, what was sent, delivered
// and lost, and when the first loss (and the first delivery after it) was.
json Run::link_summary() const {
  json links = json::array();
  auto at = [this](uint64_t ns) { return ns ? json(static_cast<double>(ns - t0_) / 1e9) : json(nullptr); };
  for (size_t l = 0; l < setup_.workload.links.size(); ++l) {
    const auto& link = setup_.workload.links[l];
    json hops = json::array();
    for (size_t h = 0; h < setup_.plan.hops.size(); ++h) {
      const HopPlan& hop = setup_.plan.hops[h];
      if (hop.link != l) continue;
      const HopState* st = shared_.hop(h);
      json j = {{"topic", hop.name},
                {"priority", hop.priority},
                {"bytes", hop.bytes},
                {"sent", st->sent.load()},
                {"delivered", st->delivered.load()},
                {"lost", st->lost.load()},
                {"first_loss_s", at(st->failed_ns.load())},
                {"recovered_s", at(st->recovered_ns.load())}};
      if (st->error[0]) j["error"] = st->error;
      hops.push_back(std::move(j));
    }
    links.push_back({{"link", link.name},
                     {"between", {setup_.workload.nodes[link.a].name, setup_.workload.nodes[link.b].name}},
                     {"transport", std::string(link.transport->name)},
                     {"rate_mbps", static_cast<double>(link.rate_bytes_per_s) * 8 / 1e6},
                     {"flow_control", options_.flow_control},
                     {"namespaces", {nodes_.namespace_of(link.a), nodes_.namespace_of(link.b)}},
                     {"taken_down_s", at(link_down_ns_[l])},
                     {"topics", std::move(hops)}});
  }
  return links;
}

// Per gang: jobs, waits and preemptions, from the trace.
json Run::gang_summary() const {
  struct Counts {
    uint64_t jobs = 0, waits = 0, preempted = 0;
    std::vector<uint64_t> wait_ns;
  };
  std::vector<Counts> counts(setup_.gangs.size());
  for (size_t e = 0; e < setup_.workload.executors.size(); ++e) {
    Counts& c = counts[setup_.gang_of[e]];
    const uint64_t n = shared_.trace_kept(e);
    for (uint64_t i = 0; i < n; ++i) {
      const TraceEvent& ev = shared_.trace(e)[i];
      if (ev.kind == static_cast<uint32_t>(TraceKind::kGangHold)) ++c.jobs;
      if (ev.kind == static_cast<uint32_t>(TraceKind::kGangPark)) ++c.preempted;
      if (ev.kind == static_cast<uint32_t>(TraceKind::kGangWait)) {
        ++c.waits;
        c.wait_ns.push_back(ev.end_ns - ev.begin_ns);
      }
    }
  }
  json gangs = json::array();
  for (size_t g = 0; g < setup_.gangs.size(); ++g) {
    auto& c = counts[g];
    std::sort(c.wait_ns.begin(), c.wait_ns.end());
    json executors = json::array();
    for (size_t e : setup_.gangs[g].executors) executors.push_back(setup_.workload.executors[e].name);
    gangs.push_back({{"gang", setup_.gangs[g].name},
                     {"priority", setup_.gangs[g].priority},
                     {"threshold_mbps", setup_.gangs[g].threshold_mbps},
                     {"executors", std::move(executors)},
                     {"jobs", c.jobs},
                     {"waits", c.waits},
                     {"wait_p99_us", us(percentile(c.wait_ns, 99))},
                     {"wait_max_us", c.wait_ns.empty() ? 0.0 : us(c.wait_ns.back())},
                     {"jobs_preempted", c.preempted}});
  }
  rtaccel_gang_status st{};
  if (gang_lock_) rtaccel_gang_lock_status(gang_lock_, &st);
  return {{"gangs", std::move(gangs)},
          {"preemptions", st.preemptions},
          {"recoveries", st.recoveries},
          {"preemption_cost_us", us(setup_.workload.gang_preemption_ns)}};
}

// The run's isolation: what it was set to and what the regulator reports.
json Run::isolation_summary() const {
  const auto& iso = setup_.workload.isolation;
  json chains = json::array();
  for (size_t c : iso.bwlock_chains) chains.push_back(setup_.workload.chains[c].name);
  std::ifstream in(std::filesystem::path(options_.out_dir) / "regulator.json");
  json regulator = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return {{"cgroup", cgroup_},
          {"period_us", us(iso.period_ns)},
          {"threshold_mbps", iso.threshold_mbps == workload::Isolation::kUnlimited ? json(nullptr)
                                                                                   : json(iso.threshold_mbps)},
          {"bandwidth_lock", {{"chains", std::move(chains)},
                              {"threshold_mbps", iso.bwlock_threshold_mbps},
                              {"server_bucket", setup_.bwlock_bucket < 0 ? json(nullptr) : json(setup_.bwlock_bucket)}}},
          {"regulator", regulator.is_discarded() ? json(nullptr) : std::move(regulator)},
          {"regulator_log", "regulator.log"}};
}

// The interposer's file of process PID, as src/shim/trace.c names them
// (SUFFIX ".json": its report; ".trace.json": its timeline).
std::filesystem::path Run::shim_file(pid_t pid, const char* suffix) const {
  return std::filesystem::path(shim_dir_) / ("rtaccel-shim." + std::to_string(pid) + suffix);
}

// The interposer in the run: per process, what its report says of the
// pthread locks it took (rtaccel lockstat on the folder tells more).
json Run::shim_summary() const {
  json processes = json::array();
  for (const auto& [pid, name] : shim_processes_) {
    const std::filesystem::path report = shim_file(pid, ".json");
    std::ifstream in(report);
    const json r = json::parse(in, nullptr, /*allow_exceptions=*/false);
    json entry = {{"process", name}, {"pid", pid}};
    if (!r.is_object() || !r.contains("locks") || !r["locks"].is_array()) {
      entry["report"] = nullptr;  // it died before writing one
      processes.push_back(std::move(entry));
      continue;
    }
    uint64_t acquisitions = 0, contended = 0, wait_max = 0, cuda_calls = 0;
    for (const auto& lock : r["locks"]) {
      acquisitions += lock.value("acquisitions", uint64_t{0});
      contended += lock.value("contended", uint64_t{0});
      wait_max = std::max(wait_max, lock.value("wait_ns_max", uint64_t{0}));
    }
    if (r.contains("cuda") && r["cuda"].contains("calls"))
      for (const auto& api : r["cuda"]["calls"]) cuda_calls += api.value("calls", uint64_t{0});
    entry["report"] = report.filename().string();
    entry["locks"] = r["locks"].size();
    entry["acquisitions"] = acquisitions;
    entry["contended"] = contended;
    entry["wait_max_us"] = us(wait_max);
    entry["cuda_calls"] = cuda_calls;
    entry["timeline_events_dropped"] = r.value("dropped_timeline_events", uint64_t{0});
    processes.push_back(std::move(entry));
  }
  return {{"modes", options_.shim_modes}, {"folder", shim_dir_}, {"processes", std::move(processes)}};
}

// An executor that failed or any child that exited, as an error.
Status Run::failure() {
  for (size_t e = 0; e < processes(); ++e)
    if (shared_.executor(e)->status.load() == static_cast<uint32_t>(ExecutorStatus::kFailed))
      return Status::error(shared_.executor(e)->error, shared_.executor(e)->error_code);
  int status;
  bool exited = server_.pid() > 0 && server_.exited(&status);
  std::string what = "rtaccel-server exited during the run";
  if (!exited && regulator_.pid() > 0 && regulator_.exited(&status)) {
    exited = true;
    what = "the regulator exited during the run (" + core::describe_wait_status(status) + "); see " +
           (std::filesystem::path(options_.out_dir) / "regulator.log").string();
  }
  for (auto& child : executors_) {
    if (!exited && child.pid() > 0 && child.exited(&status)) {
      exited = true;
      what = "an executor exited during the run";
    }
  }
  if (!exited) return Status();
  for (size_t e = 0; e < processes(); ++e)
    if (shared_.executor(e)->error[0]) what = shared_.executor(e)->error;
  return Status::error(what);
}

// Every executor ready (pinned, registered), then one common start. A stop
// asked for meanwhile (Ctrl-C, SIGTERM, a hang-up) is an interrupted run
// like any other, of no time: nothing is released, and the results say so.
Status Run::wait_until_ready() {
  const uint64_t deadline = core::monotonic_ns() + 30 * kSecond;
  for (;;) {
    size_t ready = 0;
    for (size_t e = 0; e < processes(); ++e)
      ready += shared_.executor(e)->status.load() == static_cast<uint32_t>(ExecutorStatus::kReady);
    if (ready == processes()) break;
    if (stop_requested()) {
      t0_ = core::monotonic_ns();
      return Status();
    }
    if (Status d = watch_declaration(); !d) return d;
    if (Status f = failure(); !f) return f;
    if (Status f = watch_best_effort(core::monotonic_ns()); !f) return f;
    if (core::monotonic_ns() > deadline) return Status::error("the executors did not get ready in 30 s");
    core::sleep_ns(5 * kMs);
  }
  started_ = true;
  for (size_t e = 0; e < setup_.workload.executors.size(); ++e) realtime_ = realtime_ && shared_.executor(e)->realtime;
  // Said once: `rtaccel` has said it already where it started this run.
  if (!realtime_ && !getenv("RTACCEL_NO_RT_NOTED"))
    fprintf(stderr, "rtaccel run: no real-time priority (SCHED_FIFO refused): executors run at nice -20 where "
                    "allowed; the results are marked, and the analysis' bounds do not apply to them\n");
  auto* header = shared_.header();
  header->start_ns = core::monotonic_ns() + 50 * kMs;
  header->end_ns = header->start_ns + duration_ns_;
  header->go.store(1, std::memory_order_release);
  futex_wake(reinterpret_cast<uint32_t*>(&header->go), INT_MAX, true);
  t0_ = header->start_ns;
  next_report_ = t0_ + kSecond;
  progress_seen_.assign(setup_.workload.chains.size(), 0);
  progress_misses_.assign(setup_.workload.chains.size(), 0);
  progress_over_.assign(setup_.workload.chains.size(), 0);
  progress_bound_.assign(setup_.workload.chains.size(), 0);
  for (size_t c = 0; c < setup_.workload.chains.size(); ++c)
    if (const auto* bound = bound_of(setup_, c); bound && bound->bounded && setup_.workload.chains[c].critical)
      progress_bound_[c] = bound->wcrt_ns;
  return Status();
}

// A trace that fills before the run's end leaves the rest of the run
// unchecked by the monitor: said before the run starts, with the
// --trace-events that keeps it whole, rather than found in the results
// hours later. Traces sized by the memory fill at one time: one line.
void Run::warn_where_traces_fill() const {
  const auto rates = trace_events_per_second(setup_.workload, setup_.plan, setup_.gang);
  auto in_the_run = [](double s) {
    char text[32];
    if (s < 120)
      snprintf(text, sizeof text, "%.1f s", s);
    else
      snprintf(text, sizeof text, "%.0f min", s / 60);
    return std::string(text);
  };
  double first_fill_s = INFINITY, rate = 0;
  uint64_t kept_all = 0, whole_most = 0;
  for (size_t e = 0; e < rates.size(); ++e) {
    const double expected = rates[e] * options_.duration_s;
    const uint64_t kept = shared_.trace_capacity(e);
    rate += rates[e];
    kept_all += kept;
    if (expected <= static_cast<double>(kept)) continue;
    const double fills_s = static_cast<double>(kept) / rates[e];
    first_fill_s = std::min(first_fill_s, fills_s);
    // A tenth more than expected, in thousands: the expectation is the
    // timers' rates, and a run has a few activations more.
    const auto whole = static_cast<uint64_t>(std::ceil(expected * 1.1 / 1000) * 1000);
    whole_most = std::max(whole_most, whole);
    if (!options_.trace_events) continue;
    fprintf(stderr,
            "rtaccel run: warning: %s makes about %.0f trace events a second and keeps %llu (--trace-events): "
            "its trace fills about %s into the run, and the monitor checks the run up to there; "
            "--trace-events %llu keeps the whole run\n",
            trace_owner(setup_.workload, setup_.plan, e).c_str(), rates[e], static_cast<unsigned long long>(kept),
            in_the_run(fills_s).c_str(), static_cast<unsigned long long>(whole));
  }
  if (options_.trace_events || !whole_most) return;
  fprintf(stderr,
          "rtaccel run: warning: the run makes about %.0f trace events a second, and a quarter of this machine's "
          "available memory holds %llu: the traces fill about %s into the run, and the monitor checks the run up "
          "to there; --trace-events %llu keeps the whole run\n",
          rate, static_cast<unsigned long long>(kept_all), in_the_run(first_fill_s).c_str(),
          static_cast<unsigned long long>(whole_most));
}

// A terminal gets one line rewritten every second, a log a line every ten,
// and both the last state at the end (FINAL). Deadline misses of critical
// chains are counted apart from the others': a best-effort chain that misses
// by design must not read as a failing run. Critical instances over their
// chain's bound are counted as they come, so that a long run shows the first
// one when it happens, not half an hour later.
void Run::report_progress(uint64_t now, bool final) {
  if (!options_.progress || (!final && now < next_report_)) return;
  const bool tty = isatty(STDERR_FILENO);
  uint64_t done = 0, critical_misses = 0, other_misses = 0, over_bound = 0;
  bool any_other = false, any_bound = false;
  // Samples are written once, before the count that publishes them: each is
  // read once, from where the last report stopped.
  for (size_t c = 0; c < setup_.workload.chains.size(); ++c) {
    const auto& chain = setup_.workload.chains[c];
    const uint64_t count = shared_.chain(c)->count.load(std::memory_order_acquire);
    done += count;
    const uint64_t n = std::min(count, shared_.sample_capacity(c));
    for (uint64_t& i = progress_seen_[c]; i < n; ++i) {
      const Sample& x = shared_.samples(c)[i];
      progress_misses_[c] += x.end_ns - x.start_ns > chain.deadline_ns;
      progress_over_[c] += progress_bound_[c] && x.end_ns - x.start_ns > progress_bound_[c];
    }
    (chain.critical ? critical_misses : other_misses) += progress_misses_[c];
    over_bound += progress_over_[c];
    any_other = any_other || !chain.critical;
    any_bound = any_bound || progress_bound_[c];
  }
  const double elapsed = static_cast<double>(std::min(now, t0_ + duration_ns_) - t0_) / 1e9;
  if (final || tty || (next_report_ - t0_) % (10 * kSecond) == 0) {
    const auto n = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    const std::string policy(to_string(options_.policy));
    char others[64] = "", over[64] = "", line[512];
    if (any_other) snprintf(others, sizeof others, ", %llu non-critical", n(other_misses));
    // The bounds are the paam system's: under the other policies a chain
    // over one is the policy's doing, as the results' table says.
    if (any_bound && options_.policy == Policy::kPaam)
      snprintf(over, sizeof over, ", %llu over %s", n(over_bound), over_bound == 1 ? "its bound" : "their bounds");
    else if (any_bound)
      snprintf(over, sizeof over, ", %llu over the paam bounds", n(over_bound));
    snprintf(line, sizeof line, "rtaccel run: %s %5.0f/%.0f s, %llu chain instances, %llu critical deadline misses%s%s",
             policy.c_str(), elapsed, options_.duration_s, n(done), n(critical_misses), others, over);
    if (!tty) {
      fprintf(stderr, "%s\n", line);
    } else {
      // Rewritten in place: a line wider than the terminal would wrap, and
      // every rewrite would leave a line behind. Where the whole does not
      // fit, the counts alone, then as much of them as fits.
      winsize ws{};
      const size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
      if (strlen(line) >= width) {
        snprintf(line, sizeof line, "%s %.0f/%.0f s: %llu instances, %llu critical misses", policy.c_str(), elapsed,
                 options_.duration_s, n(done), n(critical_misses));
        if (any_other) snprintf(line + strlen(line), sizeof line - strlen(line), ", %llu other", n(other_misses));
        if (any_bound) snprintf(line + strlen(line), sizeof line - strlen(line), ", %llu over bound", n(over_bound));
        line[std::min(strlen(line), width - 1)] = '\0';
      }
      // Erased to the line's end: the line before may have been longer.
      fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
    }
    progress_line_open_ = tty && !final;
  }
  if (!final) next_report_ += kSecond;
}

void Run::watch_resources() {
  const auto& w = setup_.workload;
  resources_.watch(getpid(), "runner");
  resources_.watch(server_.pid(), "server");
  for (size_t i = 0; i < executors_.size(); ++i) {
    std::string name;
    if (i < w.executors.size()) {
      name = "executor " + w.executors[i].name;
    } else {
      const BridgePlan& b = setup_.plan.bridges[i - w.executors.size()];
      name = "bridge " + w.links[b.link].name + " on " + w.nodes[b.node].name;
    }
    resources_.watch(executors_[i].pid(), name);
  }
  resources_.watch(regulator_.pid(), "regulator");
}

// Other runs under way, looked for as this one starts (NOW 0) and as it
// samples its processes: a run that shares the cores is said at once, and
// kept in the summary with when it was seen.
void Run::note_other_runs(uint64_t now) {
  for (pid_t pid : other_runs_under_way()) {
    auto [it, first] = other_runs_.try_emplace(pid, OtherRun{now, now});
    it->second.last_ns = now;
    if (!first) continue;
    const std::string when =
        now ? "began " + std::to_string((now - t0_) / kSecond) + " s into this one" : "is under way";
    fprintf(stderr,
            "%srtaccel run: warning: another run %s on this machine (its runner: pid %d); the two share the cores, "
            "and neither run's times are what it alone would take\n",
            warning_start(), when.c_str(), static_cast<int>(pid));
  }
}

void Run::note_pause_requests() {
  if (!options_.pause_requests) return;
  const uint32_t asked = options_.pause_requests->load(std::memory_order_relaxed);
  if (asked == pause_requests_seen_) return;
  pause_requests_seen_ = asked;
  fprintf(stderr,
          "%srtaccel run: Ctrl-Z does not pause a run: its chains would miss every deadline while it stood still "
          "(Ctrl-C ends the run and writes its results)\n",
          warning_start());
}

const char* Run::warning_start() {
  const bool open = progress_line_open_;
  progress_line_open_ = false;
  return open ? "\n" : "";
}

// Until the run's end or a stop request; an error if something died.
Status Run::supervise() {
  const uint64_t end = t0_ + duration_ns_;
  Status status;
  // The cores' losses every 20 ms, or often enough for 100 000 samples in a
  // long run (a day: every 0.9 s), which bounds what the monitor keeps.
  const uint64_t sample_every = std::max<uint64_t>(20 * kMs, duration_ns_ / 100000);
  // The processes' resources every second, or 3 600 times in a longer run.
  const uint64_t resources_every = std::max<uint64_t>(kSecond, duration_ns_ / 3600);
  uint64_t next_sample = t0_, next_resources = t0_, next_stop_check = t0_;
  watch_resources();
  // The samples' room, taken now: one at the start, one per interval, one
  // at the end. The runner's memory then holds flat through the run, as the
  // other processes' do.
  cores_.reserve(duration_ns_ / sample_every + 2);
  speed_.reserve(duration_ns_ / sample_every + 2);
  resources_.reserve(duration_ns_ / resources_every + 2);
  while (core::monotonic_ns() < end && !stop_requested()) {
    if (status = failure(); !status) break;
    const uint64_t now = core::monotonic_ns();
    if (status = watch_best_effort(now); !status) break;
    if (now >= next_sample) {
      cores_.sample(now);
      speed_.sample(now);
      next_sample = now + sample_every;
    }
    if (now >= next_resources) {
      resources_.sample(now);
      note_other_runs(now);
      next_resources = now + resources_every;
    }
    if (now >= next_stop_check) {
      watch_stops(now);
      next_stop_check = now + kSecond;
    }
    fail_links(now);
    note_pause_requests();
    report_progress(now);
    core::sleep_ns(20 * kMs);
  }
  cores_.sample(core::monotonic_ns());
  resources_.sample(core::monotonic_ns());
  if (status)
    report_progress(core::monotonic_ns(), true);
  else
    fputs(warning_start(), stderr);
  return status;
}

void Run::stop_executors() {
  auto* header = shared_.header();
  header->stop.store(1, std::memory_order_release);
  futex_wake(reinterpret_cast<uint32_t*>(&header->go), INT_MAX, true);
  futex_wake(reinterpret_cast<uint32_t*>(&header->declared), INT_MAX, true);
  for (size_t e = 0; e < processes(); ++e) wake(shared_.executor(e));
}

// Executors finish the callback in progress (allow for the longest one),
// then the server goes: executors unregister on their way out.
void Run::wind_down() {
  // Best-effort programs first, so that their measurement spans the run
  // (the memory benchmarks print their bandwidth on SIGTERM).
  end_best_effort();
  stop_executors();
  uint64_t longest = 0;
  for (const auto& cb : setup_.workload.callbacks) {
    uint64_t t = cb.cpu_ns;
    for (const auto& seg : cb.segments) t += seg.wcet_ns;
    longest = std::max(longest, t);
  }
  const uint64_t deadline = core::monotonic_ns() + 5 * kSecond + 4 * longest;
  for (;;) {
    size_t done = 0;
    for (size_t e = 0; e < processes(); ++e) {
      const auto st = shared_.executor(e)->status.load();
      done += st == static_cast<uint32_t>(ExecutorStatus::kDone) || st == static_cast<uint32_t>(ExecutorStatus::kFailed);
    }
    if (done == processes() || core::monotonic_ns() > deadline) break;
    core::sleep_ns(5 * kMs);
  }
  declarer_.kill_now();  // what it declared goes with its connection
  server_.terminate(5 * kSecond);
  for (auto& child : executors_) {
    int status;
    while (child.pid() > 0 && !child.exited(&status) && core::monotonic_ns() < deadline) core::sleep_ns(5 * kMs);
    child.kill_now();
  }
  // Last: it writes its summary and trace, and removes its cgroup, which
  // the best-effort programs have left.
  regulator_.terminate(10 * kSecond);
}

Status Run::write_results(uint64_t stopped_ns, const std::string& failure) {
  const auto& w = setup_.workload;
  const std::filesystem::path out(options_.out_dir);
  std::ofstream csv(out / "latency.csv");
  csv << "chain,start_us,latency_us\n";
  json chains = json::array();
  for (size_t c = 0; c < w.chains.size(); ++c) chains.push_back(chain_summary(setup_, shared_, c, &csv, t0_, stopped_ns));
  const Status csv_written = finish_result_file(csv, out / "latency.csv");
  json timers = json::array();
  for (size_t t = 0; t < setup_.plan.timers.size(); ++t) timers.push_back(timer_summary(setup_, shared_, t));
  json execs = json::array();
  for (size_t e = 0; e < w.executors.size(); ++e) {
    const auto* st = shared_.executor(e);
    const uint64_t kept = shared_.trace_kept(e);
    execs.push_back({{"executor", w.executors[e].name},
                     {"realtime", st->realtime != 0},
                     {"timer_overruns", st->overruns.load()},
                     {"trace_events", kept},
                     {"trace_events_lost", st->trace_used.load() - kept}});
  }
  json queues = json::array();
  for (size_t q = 0; q < setup_.plan.queues.size(); ++q) {
    const auto* st = shared_.queue(q);
    const QueuePlan& qp = setup_.plan.queues[q];
    std::string subscriber = w.callbacks[qp.consumer].name;
    if (qp.executor >= w.executors.size()) {  // an outbox: the link's bridge takes from it
      const BridgePlan& b = setup_.plan.bridges[qp.executor - w.executors.size()];
      subscriber = "link " + w.links[b.link].name + " (outbox on " + w.nodes[b.node].name + ")";
    }
    queues.push_back({{"topic", qp.topic},
                      {"subscriber", subscriber},
                      {"messages", st->pushed},
                      {"dropped", st->dropped}});
  }
  // The bounds are PAAM's: under ros2 and picas a chain over one is the
  // policy's doing, not the analysis', and the monitor only lists what broke.
  MonitorInput monitor{&w, &setup_.plan, &setup_.bounds, &shared_, &cores_, t0_, {}, &speed_, options_.work_fraction,
                       stopped_ns};
  monitor.policy_analysed = options_.policy == Policy::kPaam;
  if (options_.policy == Policy::kPaam)
    monitor.analyze = [gang = setup_.gang](const workload::Workload& measured) {
      return gang ? analysis::analyze_gangs(measured) : analysis::analyze(measured);
    };
  std::vector<Finding> findings;
  json assumptions = check_assumptions(monitor, &chains, &findings);
  bool held = true;
  for (const auto& c : chains)
    if (c["critical"].get<bool>() && c["bound_held"].is_boolean()) held = held && c["bound_held"].get<bool>();
  json summary = {{"format_version", 1},
                  {"workload", {{"file", options_.workload}, {"name", w.name}}},
                  {"policy", std::string(to_string(options_.policy))},
                  {"duration_s", static_cast<double>(stopped_ns - t0_) / 1e9},
                  {"interrupted", stop_requested()},
                  {"failed", failure.empty() ? json() : json(failure)},
                  {"realtime", realtime_},
                  {"work_fraction", options_.work_fraction},
                  {"epsilon_us", us(w.server ? w.server->overhead_ns : 0)},
                  {"kappa_us", us(w.accelerators.empty() ? 0 : w.accelerators.front().preemption_cost_ns)},
                  {"release_jitter_us", us(w.release_jitter_ns)},
                  {"critical_bounds_held", held},
                  {"gang_scheduling", setup_.gang},
                  {"chains", std::move(chains)},
                  {"timers", std::move(timers)},
                  {"executors", std::move(execs)},
                  {"queues", std::move(queues)},
                  {"assumptions", std::move(assumptions)}};
  json walks = json::array();
  for (const auto& [key, ns] : setup_.walks)
    walks.push_back({{"working_set_kb", key.first >> 10}, {"pattern", key.second ? "random" : "stream"},
                     {"ns_per_line", ns}});
  summary["walks"] = std::move(walks);
  if (setup_.gang) summary["gang"] = gang_summary();
  if (setup_.isolation) summary["isolation"] = isolation_summary();
  if (!setup_.workload.links.empty()) {
    summary["links"] = link_summary();
    for (size_t h = 0; h < setup_.plan.hops.size(); ++h) {
      const HopState* st = shared_.hop(h);
      if (st->lost.load())
        fprintf(stderr, "rtaccel run: warning: %llu messages of '%s' lost on link '%s' from %.1f s on: %s\n",
                static_cast<unsigned long long>(st->lost.load()), setup_.plan.hops[h].name.c_str(),
                w.links[setup_.plan.hops[h].link].name.c_str(), static_cast<double>(st->failed_ns.load() - t0_) / 1e9,
                st->error);
    }
  }
  if (!options_.shim_modes.empty()) {
    write_shim_report();  // the runner's own: what it locked during the run
    summary["shim"] = shim_summary();
  }
  if (!best_effort_.empty()) summary["best_effort"] = best_effort_summary(stopped_ns);
  if (!other_runs_.empty()) {
    json others = json::array();
    for (const auto& [pid, seen] : other_runs_)
      others.push_back({{"runner_pid", pid},
                        {"first_seen_s", into_run_s(seen.first_ns)},
                        {"last_seen_s", into_run_s(seen.last_ns)}});
    summary["other_runs"] = std::move(others);
  }
  summary["resources"] = resources_.summary();
  TraceFile trace;
  Status written = trace.open(out / "trace.json");
  if (written) {
    trace_events(setup_, shared_, cores_, speed_, resources_, findings, t0_, &trace);
    best_effort_trace(stopped_ns, &trace);
    if (setup_.isolation) merge_trace(out / "regulator.trace.json", t0_, &trace);
    for (const auto& [pid, name] : shim_processes_)
      merge_trace(shim_file(pid, ".trace.json"), t0_, &trace, "shim: " + name + " (pid " + std::to_string(pid) + ")");
    written = trace.close();
  }
  // The runner's most resident memory, its results written: what a run of
  // this length needs beside the real-time work, which the samples during
  // the run do not see.
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  for (json& p : summary["resources"])
    if (p["process"] == "runner") p["peak_kb"] = static_cast<uint64_t>(self.ru_maxrss);
  // Strings of the user's (a command line, a path) need not be UTF-8:
  // such bytes become U+FFFD, where a throw would lose the results.
  if (Status st = write_file(out / "summary.json", summary.dump(2, ' ', false, json::error_handler_t::replace) + "\n"); !st)
    return st;
  if (!written) return written;
  return csv_written;
}

Expected<RunEnd> Run::execute() {
  if (Status st = check_options(); !st) return st;
  if (Status st = prepare(options_, &setup_); !st) return st;
  duration_ns_ = static_cast<uint64_t>(options_.duration_s * 1e9);
  cores_ = CoreSampler(watched_cores(setup_.workload));
  std::error_code ec;
  std::filesystem::create_directories(options_.out_dir, ec);
  if (ec) return Status::invalid("cannot write the results into " + options_.out_dir + ": " + ec.message());
  // Said now, not after the run: a folder another user made (root's, to a
  // user without root) takes no results.
  if (access(options_.out_dir.c_str(), W_OK | X_OK) != 0)
    return Status::invalid("cannot write the results into " + options_.out_dir + ": " + strerror(errno) +
                           " (give another --out)");

  out_lock_.reset(open(options_.out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!out_lock_ || flock(out_lock_.get(), LOCK_EX | LOCK_NB) != 0)
    return Status::invalid("another rtaccel run writes into " + options_.out_dir + " (give another --out)");
  // An earlier run's results in the folder go now: a run that ends without
  // results of its own is not taken for that one, and no trace of another
  // run's regulator is merged into this one's.
  for (const char* name : {"summary.json", "trace.json", "latency.csv", "regulator.json", "regulator.trace.json"})
    std::filesystem::remove(std::filesystem::path(options_.out_dir) / name, ec);

  socket_ = options_.socket;
  if (!options_.shim_modes.empty()) {
    shim_dir_ = getenv("RTACCEL_SHIM_OUT");
    shim_processes_[getpid()] = "runner";
  }
  // Killed outright, a run removes nothing (exec/leftovers.h): the next
  // one does, before it makes names of its own.
  for (const auto& removed : remove_leftovers_of_dead_runs())
    fprintf(stderr, "rtaccel run: removed what a run that was killed left behind: %s\n", removed.c_str());
  note_other_runs(0);
  run_name_ = "run-" + std::to_string(getpid());
  cgroup_ = kRunPrefix + std::to_string(getpid());
  struct DirCleanup {
    std::string* dir;
    ~DirCleanup() {
      if (!dir->empty()) std::filesystem::remove_all(*dir);
    }
  } cleanup{&server_dir_};
  link_down_ns_.assign(setup_.workload.links.size(), 0);
  if (Status st = nodes_.create(setup_.workload); !st) return st;
  // A workload without accelerators has nothing for a server to serve.
  if ((options_.policy == Policy::kPaam || setup_.gateway) && socket_.empty() && !setup_.workload.accelerators.empty())
    if (Status st = start_private_server(); !st) return st;
  const Capacity capacity = capacity_for(setup_.workload, setup_.plan, duration_ns_, options_.trace_events,
                                         setup_.gang, rtaccel_memory_available());
  if (Status st = shared_.create(setup_.plan, capacity); !st) return st;
  warn_where_traces_fill();
  struct GangLockCleanup {
    rtaccel_gang_lock_t** lock;
    ~GangLockCleanup() { rtaccel_gang_lock_close(*lock); }
  } gang_cleanup{&gang_lock_};
  struct IsolationCleanup {
    Run* run;
    ~IsolationCleanup() { run->end_isolation(); }
  } isolation_cleanup{this};
  if (setup_.gang) {
    // Private to the run: the executors inherit it through fork. Under
    // isolation, named, so that the regulator enforces the running gang's
    // threshold.
    const int err = setup_.isolation ? rtaccel_gang_lock_open(run_name_.c_str(), &gang_lock_)
                                     : rtaccel_gang_lock_create_private(&gang_lock_);
    if (err) return Status::os_error("cannot create the run's gang lock", -err);
  }
  if (setup_.isolation) {
    if (Status st = start_isolation(); !st) return st;
  }
  Status st = start_declaring();
  if (st) st = start_executors();
  if (st) st = start_bridges();
  if (st) st = start_best_effort();
  if (st) st = wait_until_ready();
  if (!st) {
    stop_executors();
    return st;
  }
  if (started_) st = supervise();
  // A stop within the 50 ms before the common start: the run had no time.
  const uint64_t stopped = started_ ? std::max(core::monotonic_ns(), t0_) : t0_;
  wind_down();
  if (!st && st.invalid_input()) return st;  // a best-effort command that cannot start: nothing ran
  // A process of the run that died (the server, an executor, the
  // regulator) ends it, but what ran until then is measured, and the trace
  // up to the failure is what explains it: the results are written, marked.
  if (Status written = write_results(stopped, st ? std::string() : st.message()); !written) return written;
  if (!st) return Status::error(st.message() + "; the results up to then are in " + options_.out_dir, st.err());
  return stop_requested() ? RunEnd::kInterrupted : RunEnd::kCompleted;
}

}  // namespace

Expected<RunEnd> run_workload(const RunOptions& options) { return Run(options).execute(); }

}  // namespace rtaccel::exec
