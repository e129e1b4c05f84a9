// What a run recorded, as events on its Perfetto timeline (exec/run.h; the
// file itself is exec/timeline.h's TraceFile).
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

// The timeline being written: what every kind of track reads, the process
// numbers of the tracks (one after the other, in this order), and what the
// tracks share as they are written (async ids, the chains' flow points).
class Timeline {
 public:
  Timeline(const Setup& s, const SharedRun& shared, uint64_t t0, TraceFile* events)
      : s_(s), shared_(shared), t0_(t0), events_(events) {}

  void name_executors_and_accelerators();
  void name_gang_tracks();
  void reserve_flow_points();
  void executor_events();
  void link_events();
  void chain_flows();
  void core_counters(const CoreSampler& cores, const SpeedSampler& speed);
  void monitor_findings(const std::vector<Finding>& findings);
  void resource_counters(const ResourceSampler& resources);
  void name_accelerator_buckets();

 private:
  // An executor trace's kinds of event, each on its tracks.
  void gang_slice(const TraceEvent& ev, size_t e);
  void callback_slice(const TraceEvent& ev, int pid);
  void segment_slices(const TraceEvent& ev, int pid);
  void transfer_slices(const TraceEvent& ev);

  // A process's or (TID >= 0) a thread's name.
  void meta(const char* what, int pid, int tid, const std::string& name) {
    json e = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
    if (tid >= 0) e["tid"] = tid;
    events_->add(e);
  }
  // Microseconds into the run; before its start, negative.
  double ts(uint64_t ns) const { return ns >= t0_ ? us(ns - t0_) : -us(t0_ - ns); }
  // A slice of a chain instance, where its flow passes.
  void on_path(const TraceEvent& ev, uint64_t at_ns, int pid, int tid) {
    if (ev.instance_ns) instances_.push_back({ev.instance_ns, at_ns, ev.chain, pid, tid});
  }
  // The gang lock's track of executor E's thread.
  static int gang_tid(size_t e, int thread) { return static_cast<int>(e) * 1000 + thread; }

  const Setup& s_;
  const SharedRun& shared_;
  const uint64_t t0_;
  TraceFile* const events_;
  // Executors are processes 1 to N, then the accelerators, the gang lock,
  // the links, the cores, the monitor and the run's processes.
  const int accel_pid_ = static_cast<int>(s_.workload.executors.size()) + 1;
  const int gang_pid_ = accel_pid_ + static_cast<int>(s_.workload.accelerators.size());
  const int link_pid_ = gang_pid_ + 1;
  const int cores_pid_ = link_pid_ + static_cast<int>(s_.workload.links.size());
  const int monitor_pid_ = cores_pid_ + 1;
  const int resources_pid_ = monitor_pid_ + 1;
  uint64_t flow_ = 0;  // the async slices' ids (queued, outbox), one count for both
  std::vector<FlowPoint> instances_;
};

void Timeline::name_executors_and_accelerators() {
  for (size_t e = 0; e < s_.workload.executors.size(); ++e) {
    const auto& ex = s_.workload.executors[e];
    meta("process_name", static_cast<int>(e) + 1, -1,
         "executor " + ex.name + " (core " + std::to_string(ex.core) + ", FIFO " + std::to_string(ex.priority) + ")");
    for (int t = 0; t < ex.threads; ++t) meta("thread_name", static_cast<int>(e) + 1, t, "thread " + std::to_string(t));
  }
  for (size_t d = 0; d < s_.workload.accelerators.size(); ++d)
    meta("process_name", accel_pid_ + static_cast<int>(d), -1, "accelerator " + s_.workload.accelerators[d].name);
}

// The gang lock: a track per executor thread, named by its gang, with its
// waits, its holds and, inside a hold, the time a higher gang stopped it.
void Timeline::name_gang_tracks() {
  if (!s_.gang) return;
  meta("process_name", gang_pid_, -1, "gang lock");
  for (size_t e = 0; e < s_.workload.executors.size(); ++e) {
    const auto& g = s_.gangs[s_.gang_of[e]];
    for (int t = 0; t < s_.workload.executors[e].threads; ++t)
      meta("thread_name", gang_pid_, gang_tid(e, t),
           "gang " + g.name + " (" + std::to_string(g.priority) + "): " + s_.workload.executors[e].name + " thread " +
               std::to_string(t));
  }
}

// Room for the flow points at once (at most a point per event of an
// instance), not grown by doubling, which holds up to three times their
// size while it copies.
void Timeline::reserve_flow_points() {
  size_t of_instances = 0;
  for (size_t e = 0; e < s_.workload.executors.size() + s_.plan.bridges.size(); ++e)
    for (uint64_t i = 0; i < shared_.trace_kept(e); ++i) of_instances += shared_.trace(e)[i].instance_ns != 0;
  instances_.reserve(of_instances);
}

void Timeline::executor_events() {
  for (size_t e = 0; e < s_.workload.executors.size(); ++e) {
    const uint64_t n = shared_.trace_kept(e);
    const int pid = static_cast<int>(e) + 1;
    for (uint64_t i = 0; i < n; ++i) {
      const TraceEvent& ev = shared_.trace(e)[i];
      if (ev.kind >= static_cast<uint32_t>(TraceKind::kGangWait))
        gang_slice(ev, e);
      else if (ev.kind == static_cast<uint32_t>(TraceKind::kCallback))
        callback_slice(ev, pid);
      else
        segment_slices(ev, pid);
    }
  }
}

// A wait for the gang lock, a hold of it, or a stop by a higher gang: on
// the gang lock's track of the executor thread.
void Timeline::gang_slice(const TraceEvent& ev, size_t e) {
  static const char* const kNames[] = {"wait", "hold", "preempted"};
  const char* what = kNames[ev.kind - static_cast<uint32_t>(TraceKind::kGangWait)];
  json slice = {{"ph", "X"}, {"cat", "gang"}, {"name", std::string(what) + " " + s_.workload.callbacks[ev.callback].name},
                {"pid", gang_pid_}, {"tid", gang_tid(e, static_cast<int>(ev.thread))},
                {"ts", ts(ev.begin_ns)}, {"dur", us(ev.end_ns - ev.begin_ns)}};
  if (ev.kind == static_cast<uint32_t>(TraceKind::kGangHold)) slice["args"] = {{"preemptions", ev.segment}};
  events_->add(slice);
}

void Timeline::callback_slice(const TraceEvent& ev, int pid) {
  const auto& cb = s_.workload.callbacks[ev.callback];
  events_->add({{"ph", "X"}, {"cat", "callback"}, {"name", cb.name}, {"pid", pid}, {"tid", ev.thread},
                {"ts", ts(ev.begin_ns)}, {"dur", us(ev.end_ns - ev.begin_ns)},
                {"args", {{"priority", s_.plan.callbacks[ev.callback].priority},
                          {"activation_delay_us", us(ev.begin_ns - ev.submit_ns)},
                          {"cpu_us", us(ev.cpu_ns)},
                          {"wcet_us", us(cb.cpu_ns)}}}});
  on_path(ev, ev.begin_ns, pid, static_cast<int>(ev.thread));
}

// An accelerator segment: on the executor thread from its submission to
// its end; on the accelerator, its time queued in its bucket (async: queued
// requests overlap) and its kernel. Under direct invocation there is no
// queue, and the kernel is on a track of the client thread's.
void Timeline::segment_slices(const TraceEvent& ev, int pid) {
  const auto& seg = s_.workload.callbacks[ev.callback].segments[ev.segment];
  const std::string& name = s_.plan.callbacks[ev.callback].segment_names[ev.segment];
  const int dpid = accel_pid_ + static_cast<int>(seg.accelerator);
  const bool direct = ev.bucket < 0;
  const int dtid = direct ? 1000 + pid * 100 + static_cast<int>(ev.thread) : ev.bucket;
  events_->add({{"ph", "X"}, {"cat", "segment"}, {"name", name}, {"pid", pid}, {"tid", ev.thread},
                {"ts", ts(ev.submit_ns)}, {"dur", us(ev.end_ns - ev.submit_ns)},
                {"args", {{"status", ev.status}, {"bucket", ev.bucket}}}});
  if (!direct && ev.begin_ns > ev.submit_ns) {
    ++flow_;
    events_->add({{"ph", "b"}, {"cat", "queue"}, {"name", "queued " + name}, {"id", flow_}, {"pid", dpid},
                  {"tid", dtid}, {"ts", ts(ev.submit_ns)}});
    events_->add({{"ph", "e"}, {"cat", "queue"}, {"name", "queued " + name}, {"id", flow_}, {"pid", dpid},
                  {"tid", dtid}, {"ts", ts(ev.begin_ns)}});
  }
  events_->add({{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", dpid}, {"tid", dtid},
                {"ts", ts(ev.begin_ns)}, {"dur", us(ev.end_ns - ev.begin_ns)},
                {"args", {{"chain_priority", s_.plan.callbacks[ev.callback].priority}}}});
  on_path(ev, ev.begin_ns, dpid, dtid);
}

// A process per link, a track per topic crossing it: each message from
// the sending bridge's send to its arrival on the other node, and before
// it (async) the time it waited in the outbox.
void Timeline::link_events() {
  for (size_t l = 0; l < s_.workload.links.size(); ++l) {
    const auto& link = s_.workload.links[l];
    meta("process_name", link_pid_ + static_cast<int>(l), -1,
         "link " + link.name + " (" + std::string(link.transport->name) +
             ", " + std::to_string(link.rate_bytes_per_s * 8 / 1000000) + " Mbit/s)");
  }
  for (size_t h = 0; h < s_.plan.hops.size(); ++h)
    meta("thread_name", link_pid_ + static_cast<int>(s_.plan.hops[h].link), static_cast<int>(h),
         s_.plan.hops[h].name + " (priority " + std::to_string(s_.plan.hops[h].priority) + ")");
  for (size_t b = 0; b < s_.plan.bridges.size(); ++b) {
    const size_t e = s_.workload.executors.size() + b;
    const uint64_t n = shared_.trace_kept(e);
    for (uint64_t i = 0; i < n; ++i) transfer_slices(shared_.trace(e)[i]);
  }
}

void Timeline::transfer_slices(const TraceEvent& ev) {
  const HopPlan& hop = s_.plan.hops[ev.segment];
  const int pid = link_pid_ + static_cast<int>(hop.link);
  const int tid = static_cast<int>(ev.segment);
  events_->add({{"ph", "X"}, {"cat", "transfer"}, {"name", hop.name}, {"pid", pid}, {"tid", tid},
                {"ts", ts(ev.begin_ns)}, {"dur", us(ev.end_ns - ev.begin_ns)},
                {"args", {{"bytes", hop.bytes}, {"priority", hop.priority}, {"stale", ev.status}}}});
  on_path(ev, ev.begin_ns, pid, tid);
  if (ev.begin_ns > ev.submit_ns) {
    ++flow_;
    events_->add({{"ph", "b"}, {"cat", "outbox"}, {"name", "outbox " + hop.name}, {"id", flow_},
                  {"pid", pid}, {"tid", tid}, {"ts", ts(ev.submit_ns)}});
    events_->add({{"ph", "e"}, {"cat", "outbox"}, {"name", "outbox " + hop.name}, {"id", flow_},
                  {"pid", pid}, {"tid", tid}, {"ts", ts(ev.begin_ns)}});
  }
}

// A flow per chain instance through its slices in time order: Perfetto
// draws an arrow from each to the next ("s", "t" steps, "f" at the end,
// each bound to the slice that starts there).
void Timeline::chain_flows() {
  std::sort(instances_.begin(), instances_.end(), [](const FlowPoint& a, const FlowPoint& b) {
    return std::tie(a.chain, a.instance_ns, a.at_ns) < std::tie(b.chain, b.instance_ns, b.at_ns);
  });
  uint64_t flow_id = 0;
  for (size_t first = 0, end = 0; first < instances_.size(); first = end) {
    end = first + 1;
    while (end < instances_.size() && instances_[end].chain == instances_[first].chain &&
           instances_[end].instance_ns == instances_[first].instance_ns)
      ++end;
    if (end - first < 2) continue;
    ++flow_id;
    const std::string name = "chain " + s_.workload.chains[instances_[first].chain].name;
    for (size_t i = first; i < end; ++i) {
      json e = {{"ph", i == first ? "s" : i + 1 == end ? "f" : "t"}, {"cat", "chain"}, {"name", name},
                {"id", flow_id}, {"pid", instances_[i].pid}, {"tid", instances_[i].tid}, {"ts", ts(instances_[i].at_ns)}};
      if (i + 1 == end) e["bp"] = "e";
      events_->add(e);
    }
  }
}

// What the executors' cores and the cpu-backend accelerators' lost to
// interrupts, softirqs and the hypervisor, per sampling interval, and the
// machine's speed: counters on a process of their own.
void Timeline::core_counters(const CoreSampler& cores, const SpeedSampler& speed) {
  meta("process_name", cores_pid_, -1, "cores (time lost, /proc/stat; machine speed)");
  for (int core : cores.cores())
    for (const auto& [at, loss] : cores.intervals(core))
      events_->add({{"ph", "C"}, {"name", "core " + std::to_string(core) + " lost (us)"}, {"pid", cores_pid_},
                    {"ts", ts(at)},
                    {"args", {{"irq", us(loss.irq_ns)}, {"softirq", us(loss.softirq_ns)}, {"steal", us(loss.steal_ns)}}}});
  for (const auto& [at, ratio] : speed.samples())
    events_->add({{"ph", "C"}, {"name", "machine speed (x calibrated)"}, {"pid", cores_pid_}, {"ts", ts(at)},
                  {"args", {{"speed", ratio}}}});
}

// What the monitor found over what the analysis allowed: a process of its
// own, an async track per kind and piece of work (they overlap: kernels of
// two buckets, instances of a pipelined chain), each over its time.
void Timeline::monitor_findings(const std::vector<Finding>& findings) {
  if (!findings.empty()) meta("process_name", monitor_pid_, -1, "monitor: over what the analysis allowed");
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
    events_->add({{"ph", "b"}, {"cat", "monitor"}, {"name", name}, {"id", finding_id}, {"pid", monitor_pid_},
                  {"ts", ts(f.begin_ns)}, {"args", std::move(args)}});
    events_->add({{"ph", "e"}, {"cat", "monitor"}, {"name", name}, {"id", finding_id}, {"pid", monitor_pid_},
                  {"ts", ts(f.end_ns)}});
  }
}

// The run's processes' resident memory and descriptors, a counter each.
void Timeline::resource_counters(const ResourceSampler& resources) {
  meta("process_name", resources_pid_, -1, "the run's processes (resident memory, open descriptors)");
  for (const auto& p : resources.processes())
    for (const auto& [at, r] : p.samples)
      events_->add({{"ph", "C"}, {"name", p.name + " (pid " + std::to_string(p.pid) + ")"},
                    {"pid", resources_pid_}, {"ts", ts(at)},
                    {"args",
                     {{"rss_mb", static_cast<double>(r.rss_kb) / 1024.0},
                      {"private_mb", static_cast<double>(r.rss_kb - r.shared_kb) / 1024.0},
                      {"descriptors", r.descriptors}}}});
}

// Name the accelerator tracks that appeared: a bucket each.
void Timeline::name_accelerator_buckets() {
  for (size_t d = 0; d < s_.workload.accelerators.size(); ++d)
    for (int b = 0; b < s_.workload.accelerators[d].priority_levels; ++b)
      meta("thread_name", accel_pid_ + static_cast<int>(d), b, "bucket " + std::to_string(b));
}

}  // namespace

// Perfetto: one process per executor (a thread per executor thread), one per
// accelerator (a thread per bucket, or per client thread under direct
// invocation). Queueing is an async slice, so that waiting requests overlap.
// Written kind by kind, in the order of their process numbers (the chains'
// flows, over the slices of the others, once those are all in).
void trace_events(const Setup& s, const SharedRun& shared, const CoreSampler& cores, const SpeedSampler& speed,
                  const ResourceSampler& resources, const std::vector<Finding>& findings, uint64_t t0,
                  TraceFile* events) {
  Timeline timeline(s, shared, t0, events);
  timeline.name_executors_and_accelerators();
  timeline.name_gang_tracks();
  timeline.reserve_flow_points();
  timeline.executor_events();
  timeline.link_events();
  timeline.chain_flows();
  timeline.core_counters(cores, speed);
  timeline.monitor_findings(findings);
  timeline.resource_counters(resources);
  timeline.name_accelerator_buckets();
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

}  // namespace rtaccel::exec
