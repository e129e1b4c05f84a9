// rtaccel exec: runs a workload for real and measures it.
//
// run_workload() starts one process per executor of the workload (pinned to
// its core at its SCHED_FIFO priority), runs the callbacks with real CPU work
// and real accelerator kernels for the given time, under one of three
// policies, then writes the measurements:
//   OUT/summary.json  per chain: count, p50/p99/max end-to-end latency,
//                     deadline misses, dropped instances, and the analysis
//                     bound wcrt_us; per timer: period jitter
//   OUT/trace.json    Chrome/Perfetto trace: callbacks, accelerator requests
//                     per bucket (queueing and kernel), under gang
//                     scheduling the gang lock's waits, holds and
//                     preemptions, and the transfers on every link
// A multi-node workload runs its nodes on this machine: each in a network
// namespace of its own, joined by rate-limited veth pairs (tcp, rdma links),
// or as processes of one namespace (shm links). Topics between nodes travel
// over the net layer (rtaccel/net.h), at the priority of the most critical
// chain they carry.
//   OUT/latency.csv   every end-to-end latency sample
// Under policy paam a private rtaccel-server is started unless a socket is
// given. Executors die with the runner (no orphans). The caller's stop flag
// (its SIGINT handler sets it, say) ends the run early with the results
// written; the library installs no signal handler.
#ifndef RTACCEL_EXEC_HPP_
#define RTACCEL_EXEC_HPP_

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtaccel/status.hpp"

namespace rtaccel::exec {

enum class Policy {
  kRos2,   // default ROS 2 single-threaded executor: polling points, timers first
  kPicas,  // priority-driven callbacks, criticality as priority (PiCAS)
  kPaam,   // picas, with accelerator segments served by rtaccel-server (PAAM)
};

std::optional<Policy> parse_policy(std::string_view name);
std::string_view to_string(Policy policy);

struct RunOptions {
  std::string workload;  // YAML file
  Policy policy = Policy::kPaam;
  double duration_s = 10.0;
  std::string out_dir = "out";
  // paam: an existing server's socket; empty starts a private one.
  std::string socket;
  // The rtaccel-server binary; empty: beside the running program.
  std::string server_binary;
  // Share of each WCET (CPU work and accelerator segments) that callbacks
  // actually run: the rest is the margin a WCET keeps over typical execution.
  double work_fraction = 0.9;
  // Trace events each executor and bridge keeps (callbacks, kernels,
  // transfers, gang waits): what the run's trace and monitor read. A run
  // that makes more is checked up to where they filled. 0: the whole run,
  // as far as a quarter of the machine's available memory holds them.
  uint64_t trace_events = 0;
  // Analysis and server: at least these overheads, whatever the workload
  // says (from `rtaccel calibrate`); 0 leaves the workload's values.
  uint64_t epsilon_floor_ns = 0;
  uint64_t kappa_floor_ns = 0;
  uint64_t jitter_floor_ns = 0;
  uint64_t link_kernel_floor_ns_per_kb = 0;  // every link's kernel work per KiB
  // Gang scheduling (isolate layer, one real-time gang at a time): true or
  // false overrides the workload's gang_scheduling.
  std::optional<bool> gang;
  // Memory-bandwidth regulation (the workload's isolation section): true or
  // false overrides it being on when the workload declares it. On, the run
  // starts the regulator (rtaccel-isolate, beside the running program), puts
  // the best-effort programs in its cgroup, and has the chosen chains'
  // callbacks and server buckets hold the bandwidth lock.
  std::optional<bool> isolation;
  // The rtaccel-isolate binary; empty: beside the running program.
  std::string isolate_binary;
  // Working sets' walks at these speeds (ns per line, by size in bytes and
  // pattern: true for random) instead of timing them at the start of the
  // run: runs that are to be compared do the same work (summary.json's
  // "walks" says what a run used).
  std::map<std::pair<uint64_t, bool>, double> walk_ns_per_line;
  // Non-empty: the run's programs (server, executors, bridges) run under
  // the pthread interposer (librtaccel_shim.so) in these modes, "trace"
  // among them, and each one's lock events and CUDA calls go on the run's
  // timeline (trace.json), its report to OUT/shim/. The interposer must be
  // preloaded into this process in those modes, with RTACCEL_SHIM_OUT set:
  // the executors are forks of it. rtaccel-exec --shim re-executes itself so.
  std::string shim_modes;
  // Best-effort programs started beside the workload (each a /bin/sh
  // command line; SCHED_OTHER, any core), stopped with SIGTERM at the end.
  // Their output goes to OUT/best_effort_N.log.
  std::vector<std::string> best_effort;
  // Multi-node workloads: topics between nodes under the net layer's flow
  // control (one link per workload link, preemptible at chunk boundaries),
  // or not (a link per topic, each message in one piece).
  bool flow_control = true;
  // Fault injection: links (by name) taken down at a time after the start.
  std::vector<std::pair<std::string, double>> link_failures;
  bool progress = true;  // a line per second on stderr
  // Set (from any thread or a signal handler) to end the run early.
  const std::atomic<bool>* stop = nullptr;
  // Counted (from a signal handler) each time something asked the run to
  // pause: a terminal's Ctrl-Z. A run does not pause, as its executors'
  // deadlines would pass while they stood still; it says so instead.
  const std::atomic<uint32_t>* pause_requests = nullptr;
};

enum class RunEnd {
  kCompleted,    // ran for its duration
  kInterrupted,  // stopped early through RunOptions::stop; results written
};

// Runs the workload. An error's Status is invalid_input() for what the user
// can fix (a workload that does not load: its diagnostics, one per line; a
// bad option), else a failure of the run.
Expected<RunEnd> run_workload(const RunOptions& options);

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_HPP_
