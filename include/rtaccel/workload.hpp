// rtaccel workload model: the YAML description every rtaccel tool shares.
//
// A workload names the platform (accelerators, the accelerator server),
// executors (processes pinned to a core at a SCHED_FIFO priority), callbacks
// (CPU work plus accelerator segments, triggered by a timer or by topics) and
// chains (sequences of callbacks with a priority and a deadline). Executors
// and accelerators may be placed on nodes (machines) joined by links, over
// which topics travel through the net layer. The format is documented in
// docs/workload.md.
//
// All durations are nanoseconds in uint64_t; the YAML gives them in ms or us
// and the loader converts. Values are plain data, copyable; nothing here is
// thread-safe beyond "const objects may be read from several threads".
#ifndef RTACCEL_WORKLOAD_HPP_
#define RTACCEL_WORKLOAD_HPP_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtaccel/net.h"
#include "rtaccel/status.hpp"

namespace rtaccel::workload {

enum class Backend { kCpu, kOpenCl, kCuda };
enum class WaitMode { kSuspend, kSpin };
// How a callback's CPU work walks its working set: stream reads and writes
// it line after line (a DNN layer's tensors), random follows a chain of
// dependent loads through it (a point-cloud filter's neighbour look-ups).
enum class MemoryPattern { kStream, kRandom };

// The backends' names, as the workload, rtaccel-server and direct invocation
// spell them ("cpu", "opencl", "cuda"). Header-only: the client library uses
// them without the loader.
inline constexpr std::string_view kBackendNames[] = {"cpu", "opencl", "cuda"};
inline std::string_view to_string(Backend backend) { return kBackendNames[static_cast<int>(backend)]; }
inline std::optional<Backend> parse_backend(std::string_view name) {
  for (int i = 0; i < 3; ++i)
    if (kBackendNames[i] == name) return static_cast<Backend>(i);
  return std::nullopt;
}
std::string_view to_string(WaitMode mode);
std::string_view to_string(MemoryPattern pattern);

// 1-based line and column in the source file; 0 when the value was not read
// from a file (generated workloads).
struct SourceLocation {
  int line = 0;
  int column = 0;
};

// A machine. A workload without nodes is one node.
struct Node {
  std::string name;
  SourceLocation where;
};

// A link between two nodes, which topics between them travel over (the net
// layer: rtaccel/net.h). Its rate, chunk and window are what the analysis
// bounds a transfer with.
struct Link {
  std::string name;
  size_t a = 0, b = 0;  // indices into Workload::nodes
  // The net layer's description of the transport: its name, the form of
  // its addresses and the figures the analysis takes from it.
  const rtaccel_net_transport* transport = rtaccel_net_transport_find("tcp");
  uint64_t rate_bytes_per_s = 0;
  uint64_t chunk_bytes = 64 << 10;
  uint64_t window_bytes = 0;  // 0: the net layer's default for the transport
  uint64_t per_chunk_ns = 0;  // the net layer's cost per chunk on this link
  // The kernel's own work for what crosses the link (TCP/IP, the device,
  // the copies: softirqs), per KiB of messages, on the cores of the
  // executors at both ends: interference that no executor's priority stops.
  uint64_t kernel_ns_per_kb = 0;
  SourceLocation where;
};

struct Accelerator {
  std::string name;
  size_t node = 0;  // index into Workload::nodes (0 without nodes)
  Backend backend = Backend::kCpu;
  int core = 0;             // cpu backend: the core that acts as the device
  int priority_levels = 1;  // device priority levels = server buckets
  uint64_t preemption_cost_ns = 0;  // kappa of the analysis
  SourceLocation where;
};

struct Server {
  int core = 0;
  uint64_t overhead_ns = 0;  // epsilon of the analysis: cost per request
  SourceLocation where;
};

struct Executor {
  std::string name;
  int core = 0;
  int priority = 1;  // SCHED_FIFO priority of the executor process, 1..99
  int threads = 1;
  SourceLocation where;
  size_t node = 0;  // index into Workload::nodes (0 without nodes)
};

// A gang (isolate layer, RT-Gang): executors whose threads run their jobs
// (callbacks) only while no gang of another priority does. Gangs that share
// a priority form a virtual gang and run together.
struct Gang {
  std::string name;
  int priority = 1;             // 1..99: gang order, higher first
  uint32_t threshold_mbps = 0;  // best-effort bandwidth it tolerates; 0: none
  std::vector<size_t> executors;  // indices into Workload::executors
  SourceLocation where;
};

// Memory-bandwidth regulation for a run (BWLOCK++ and MemGuard): the
// regulator on the regulated cores meters the best-effort cgroup's work, and
// the bandwidth lock, held by the chosen chains' callbacks and by the
// server's buckets that serve them, lowers what best-effort work may use.
struct Isolation {
  bool declared = false;            // the workload has an isolation section
  std::vector<int> cores;           // regulated cores; empty: every core
  uint64_t period_ns = 1000000;     // regulation period
  // Best-effort bandwidth per core in force always; kUnlimited: only while
  // the lock is held.
  static constexpr uint32_t kUnlimited = 0xffffffffu;
  uint32_t threshold_mbps = kUnlimited;
  uint32_t be_peak_mbps = 10000;    // cpu-time meter: what a core of best-effort work moves
  // The regulator's own time per period on a regulated core (its thread at
  // SCHED_FIFO 99 preempts everything there): the analysis charges it.
  uint64_t cost_ns = 50000;
  std::vector<size_t> bwlock_chains;   // indices into Workload::chains
  uint32_t bwlock_threshold_mbps = 0;  // what they allow while they hold it
  SourceLocation where;
};

struct Segment {
  size_t accelerator = 0;  // index into Workload::accelerators
  std::string service;     // kernel the server runs: busy, matmul, ...
  uint64_t wcet_ns = 0;    // A_{i,j}
  SourceLocation where;
  // What a request and its response carry over a link when the accelerator
  // is on another node than the callback (request_kb, response_kb).
  uint64_t request_bytes = 4096;
  uint64_t response_bytes = 4096;
};

// A callback is triggered by its timer (timer_ns > 0) or, if it has no timer,
// when a message has arrived on every topic in `topics` (one topic for a plain
// subscription, several for a fusion node).
//
// Timers of one release group start at one instant: rtaccel's runner starts
// every timer of its workload at the run's start, group kRunStart (the
// default, `release: together`). A timer started by something else (another
// process, a ROS 2 node, a sensor's clock) has none (`release: unaligned`):
// the analysis assumes nothing of its phase (docs/analysis.md, item 5).
struct Trigger {
  static constexpr uint32_t kUnaligned = 0;
  static constexpr uint32_t kRunStart = 1;
  uint64_t timer_ns = 0;
  std::vector<std::string> topics;
  uint32_t release_group = kRunStart;
};

struct Callback {
  std::string name;
  size_t executor = 0;  // index into Workload::executors
  Trigger trigger;
  std::string publishes;           // empty: publishes nothing
  uint64_t message_bytes = 4096;   // size of what it publishes (message_kb)
  std::vector<std::string> reads;  // latest-value inputs that do not trigger
  uint64_t cpu_ns = 0;             // E_i
  // What its CPU work takes alone, as calibrated (work_us); 0: the run's
  // work fraction of cpu_ns. The declared WCET must cover what the work
  // takes beside everything else in the run: the run's monitor checks it.
  uint64_t work_ns = 0;
  // The working set its CPU work walks (memory.working_set_kb); 0: the work
  // stays in registers, as a calibrated loop.
  uint64_t working_set_bytes = 0;
  MemoryPattern pattern = MemoryPattern::kStream;
  std::vector<Segment> segments;   // in execution order
  WaitMode wait = WaitMode::kSuspend;
  SourceLocation where;
};

struct Chain {
  std::string name;
  int priority = 0;          // higher value = more critical (CAPA)
  std::vector<size_t> path;  // indices into Workload::callbacks
  uint64_t period_ns = 0;    // T_c: the first callback's timer or period_ms
  uint64_t deadline_ns = 0;  // D_c <= T_c (constrained deadlines)
  bool critical = true;
  SourceLocation where;
};

struct Workload {
  int version = 1;
  std::string name;
  int cores = 0;  // cores of the target machine
  std::vector<Accelerator> accelerators;
  std::optional<Server> server;
  // Cost of passing a chain from one executor to the next (epsilon' of the
  // analysis). Defaults to the server overhead, which the paper shows bounds it.
  uint64_t communication_ns = 0;
  // How late this machine may start a callback after its timer's release
  // (timer and scheduling latency): release jitter in the analysis.
  uint64_t release_jitter_ns = 0;
  std::vector<Node> nodes;  // empty: one node
  std::vector<Link> links;
  std::vector<Executor> executors;
  std::vector<Callback> callbacks;
  std::vector<Chain> chains;
  std::vector<Gang> gangs;
  Isolation isolation;
  // Run under one-gang-at-a-time: `gang_scheduling:` when given, else on
  // when the workload declares gangs.
  bool gang_scheduling = false;
  // What stopping a running gang costs (delta of the gang analysis):
  // platform.gang_preemption_us, `rtaccel bench gang-preemption` measures it.
  uint64_t gang_preemption_ns = 100000;

  // The gangs of a gang-scheduled run: the declared ones, then one per
  // executor in none of them, named after it, at its priority, threshold 0.
  std::vector<Gang> effective_gangs() const;
  // Index into effective_gangs() of each executor.
  std::vector<size_t> gang_of_executor() const;

  // Callback priority under criticality-as-priority: the priority of the most
  // critical chain containing the callback. Every callback is in some chain
  // (the loader checks it).
  int callback_priority(size_t callback) const;
  // Every callback's, in one pass over the chains: what an analysis of
  // hundreds of callbacks asks of each.
  std::vector<int> callback_priorities() const;

  // The node a callback runs on (its executor's); 0 without nodes.
  size_t node_of_callback(size_t callback) const;
  // The link joining nodes a and b, or -1 when none does.
  long link_between(size_t a, size_t b) const;
};

// Raises the server overhead (epsilon), every accelerator's preemption cost
// (kappa), the release jitter and every link's kernel work per KiB to at
// least the given values: what `rtaccel calibrate` measured on this machine.
// A bound computed with smaller overheads than the machine's would not hold.
// 0 leaves a value as it is.
void raise_overheads(Workload* workload, uint64_t epsilon_ns, uint64_t kappa_ns,
                     uint64_t jitter_ns = 0, uint64_t link_kernel_ns_per_kb = 0);

// One problem found while loading: "file:line:col: message".
struct Diagnostic {
  std::string file;
  SourceLocation where;
  std::string message;

  std::string to_string() const;
};

struct LoadOptions {
  // Cores of the machine the workload must fit when it does not declare
  // platform.cores; 0 means this machine's configured CPUs.
  int machine_cores = 0;
};

// Parses and validates a workload. Allocates; never throws; not for real-time
// paths. `file_name` is only used in diagnostics. On bad input the Status is
// invalid_input() and its message holds every error found (loading goes on
// past the first), one Diagnostic::to_string() a line, in the file's order.
Expected<Workload> load_string(std::string_view text, std::string_view file_name,
                               const LoadOptions& options = {});
Expected<Workload> load_file(const std::string& path, const LoadOptions& options = {});

}  // namespace rtaccel::workload

#endif  // RTACCEL_WORKLOAD_HPP_
