// The workload made ready to run (exec/run.h): loaded with what the run was
// told, its cores checked, planned, its segments sized and bounded.
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

#include "exec/run.h"

namespace rtaccel::exec {

namespace {

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

// Accelerator requests between nodes go to the server's gateway over the
// link: under paam by priority, under ros2 and picas in arrival order (a
// callback on a node without the accelerator cannot invoke it directly).
// GATEWAY: the one transport the gateway listens on; null where no
// callback uses another node's accelerator.
Status choose_gateway(const workload::Workload& w, const rtaccel_net_transport** gateway) {
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
      if (*gateway && *gateway != transport)
        return Status::invalid(what + " over " + transport->name + ", and another callback over " + (*gateway)->name +
                               ": the server's gateway listens on one transport");
      *gateway = transport;
    }
  return Status();
}

// --fail-link: each link named, one between hosts, and when it goes down.
Status resolve_link_failures(const RunOptions& o, const workload::Workload& w,
                             std::vector<Setup::LinkFailure>* failures) {
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
    failures->push_back({static_cast<size_t>(link - w.links.begin()), static_cast<uint64_t>(failure.second * 1e9)});
  }
  return Status();
}

// One rtaccel-server serves every accelerator of the run: one backend, one
// number of priority levels.
Status check_one_server(const workload::Workload& w) {
  for (const auto& acc : w.accelerators) {
    if (acc.backend != w.accelerators.front().backend || acc.priority_levels != w.accelerators.front().priority_levels)
      return Status::invalid("accelerator '" + acc.name + "': rtaccel run needs every accelerator on one backend "
                             "with one number of priority levels (one rtaccel-server)");
  }
  return Status();
}

// Gang scheduling, as told or as the workload declares it: the gangs, and
// each executor's. A gang's name goes into the gang lock's fixed-size
// shared state.
Status choose_gangs(const RunOptions& o, Setup* s) {
  const auto& w = s->workload;
  s->gang = o.gang.value_or(w.gang_scheduling);
  if (!s->gang) return Status();
  s->gangs = w.effective_gangs();
  s->gang_of = w.gang_of_executor();
  for (const auto& g : s->gangs)
    if (g.name.size() >= RTACCEL_GANG_NAME_MAX)
      return Status::invalid("executor '" + g.name + "': its name, the name of its gang, is longer than " +
                             std::to_string(RTACCEL_GANG_NAME_MAX - 1) + " characters; put it in a gang");
  return Status();
}

// Isolation, as told or as the workload declares it; without it the
// workload's isolation section is gone, from the analysis too.
Status choose_isolation(const RunOptions& o, Setup* s) {
  auto& w = s->workload;
  s->isolation = o.isolation.value_or(w.isolation.declared);
  if (s->isolation && !w.isolation.declared)
    return Status::invalid("--isolation: workload '" + w.name + "' has no isolation section to run with "
                           "(docs/workload.md: isolation)");
  if (!s->isolation) w.isolation = workload::Isolation();  // nor in the analysis
  return Status();
}

// The callbacks that hold the bandwidth lock: those of its chains, and the
// lowest server bucket that holds it for them.
void find_bwlock_holders(Setup* s) {
  const auto& w = s->workload;
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
}

// Each executor maps and locks its callbacks' working sets for the whole
// run: more than half of the memory available would push the rest of the
// system, and the run, out of memory (the shared records' rule).
Status check_working_sets_fit(const workload::Workload& w) {
  uint64_t working_sets = 0;
  for (const auto& callback : w.callbacks) working_sets += callback.working_set_bytes;
  if (const uint64_t available = rtaccel_memory_available(); available && working_sets > available / 2)
    return Status::invalid("workload '" + w.name + "': the callbacks' working sets take " +
                           std::to_string(working_sets >> 20) + " MiB in all, resident for the whole run, more than "
                           "half of the " + std::to_string(available >> 20) + " MiB of memory available to the run (free on the machine, within its memory cgroup's limit)");
  return Status();
}

// Working sets too, one calibration per size and pattern (those the run
// was given, then those measured here).
Status calibrate_walks(const RunOptions& o, Setup* s) {
  const auto& w = s->workload;
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
  return Status();
}

// A segment on another node's accelerator sends its sized request over
// the link; the analysis counted request_kb for it. Said where the sized
// request or its response is larger than declared.
void warn_of_requests_over_declared(const workload::Workload& w, const SegmentTable& requests) {
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb)
    for (size_t k = 0; k < w.callbacks[cb].segments.size(); ++k) {
      const auto& seg = w.callbacks[cb].segments[k];
      if (w.accelerators[seg.accelerator].node == w.executors[w.callbacks[cb].executor].node) continue;
      const uint64_t bytes = requests[cb][k].size;
      if (bytes > seg.request_bytes || requests[cb][k].response_max > seg.response_bytes)
        fprintf(stderr,
                "rtaccel run: warning: callback '%s': its %s request sized to its WCET takes %llu KiB and its "
                "response up to %llu KiB on the link, more than request_kb/response_kb; the bound does not "
                "cover that transfer (the busy service sends 8 bytes)\n",
                w.callbacks[cb].name.c_str(), seg.service.c_str(), static_cast<unsigned long long>(bytes >> 10),
                static_cast<unsigned long long>(requests[cb][k].response_max >> 10));
    }
}

}  // namespace

Status prepare(const RunOptions& o, Setup* s) {
  auto loaded = workload::load_file(o.workload);
  if (!loaded) return loaded.status();
  s->workload = loaded.take();
  auto& w = s->workload;
  if (Status st = choose_gateway(w, &s->gateway); !st) return st;
  if (Status st = resolve_link_failures(o, w, &s->link_failures); !st) return st;
  // Overheads measured on this machine (rtaccel calibrate) raise the
  // workload's: a bound computed with a smaller overhead than the machine's
  // would not hold.
  workload::raise_overheads(&w, o.epsilon_floor_ns, o.kappa_floor_ns, o.jitter_floor_ns, o.link_kernel_floor_ns_per_kb);
  if (Status st = check_one_server(w); !st) return st;
  auto plan = make_plan(w);
  if (!plan) return plan.status();
  s->plan = plan.take();
  if (Status st = choose_gangs(o, s); !st) return st;
  if (Status st = choose_isolation(o, s); !st) return st;
  // After isolation is chosen: the regulator's cores are the run's only
  // with it.
  if (Status st = check_cores_allowed(o.workload, w); !st) return st;
  find_bwlock_holders(s);
  s->bounds = s->gang ? analysis::analyze_gangs(w) : analysis::analyze(w);

  // Kernels sized to their share of each segment's WCET, timed on the device.
  // The busy loop is calibrated here, before any fork, so that every process
  // of the run shares one calibration.
  core::calibrate_busy_loop();
  if (Status st = check_working_sets_fit(w); !st) return st;
  if (Status st = calibrate_walks(o, s); !st) return st;
  if (Status st = size_kernels_in_child(w, o.work_fraction, &s->requests); !st) return st;
  warn_of_requests_over_declared(w, s->requests);
  return Status();
}

// Chain C's result in the analysis the run's bounds came from; null: none.
const analysis::ChainResult* bound_of(const Setup& s, size_t c) {
  for (const auto& r : s.bounds)
    if (r.chain == s.workload.chains[c].name) return &r;
  return nullptr;
}

}  // namespace rtaccel::exec
