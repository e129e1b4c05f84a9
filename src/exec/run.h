// One run of a workload (internal): the pieces rtaccel::exec::run_workload()
// is made of, each the one owner of its part.
//
//   run.cc            the skeleton (Run::execute reads as its table of
//                     contents) and the supervision: the executors made
//                     ready and released at one instant, the run watched
//                     to its end or its stop, its progress said, its
//                     processes stopped in their order
//   run_setup.cc      the workload made ready to run: loaded, its cores
//                     checked, planned, sized and bounded (prepare)
//   run_sizing.cc     each accelerator segment's request sized to its WCET,
//                     in a child process (size_kernels_in_child)
//   run_processes.cc  the processes a run starts beside its executors: the
//                     private rtaccel-server and the declarer, the executors
//                     and bridges, the regulator (isolation), best-effort
//                     programs; the names they share come from their layers'
//                     headers
//   run_results.cc    the results: summary.json (its schema,
//                     python/rtaccel/schemas/summary.schema.json, is the
//                     contract every reader holds it to; Run::write_results
//                     reads as the table of contents of its pieces),
//                     latency.csv and trace.json written
//   run_timeline.cc   what the run recorded, as events on its Perfetto
//                     timeline (trace_events)
#ifndef RTACCEL_EXEC_RUN_H_
#define RTACCEL_EXEC_RUN_H_

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/daemon.h"
#include "core/fd.h"
#include "core/percentile.h"
#include "exec/monitor.h"
#include "exec/nodes.h"
#include "exec/plan.h"
#include "exec/resources.h"
#include "exec/segments.h"
#include "exec/shared.h"
#include "exec/timeline.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/exec.hpp"
#include "rtaccel/isolate.h"
#include "rtaccel/net.h"
#include "rtaccel/workload.hpp"

namespace rtaccel::exec {

using json = nlohmann::json;

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kSecond = 1000000000;

inline double us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// The P-th percentile (core/percentile.h) of sorted values.
inline uint64_t percentile(const std::vector<uint64_t>& sorted, double p) {
  return rtaccel_percentile_sorted_u64(sorted.data(), sorted.size(), p / 100.0);
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

// --- the set-up (run_setup.cc) ----------------------------------------------

Status prepare(const RunOptions& o, Setup* s);
// Chain C's result in the analysis the run's bounds came from; null: none.
const analysis::ChainResult* bound_of(const Setup& s, size_t c);

// --- sizing (run_sizing.cc) ---------------------------------------------------

// Sizes the kernels (size_kernels) in a child process that exits when
// done: a device runtime that was initialised in a process does not survive
// a fork of it (CUDA says so), and the runner forks the executors
// afterwards, which open the device themselves. The table comes back
// through a pipe.
Status size_kernels_in_child(const workload::Workload& w, double work_fraction, SegmentTable* out);

// --- processes (run_processes.cc) ---------------------------------------------

// In a forked child: dies with the runner, whatever kills it.
void die_with_parent(pid_t parent);

// In a forked process of the run (an executor, a bridge): dies with the
// runner, and leaves to it the signals a terminal sends its whole
// foreground process group, Ctrl-C and a hang-up, and a SIGTERM from
// anyone else (`timeout`, a service manager): the runner then stops the
// run's processes itself and writes the results. Ctrl-Z does not stop
// them. A SIGTERM from the runner ends the process.
void join_the_run(pid_t runner);

std::string self_dir();

// The interposer's report written now, when it is preloaded into this
// process (rtaccel/shim.h): forked executors leave with _exit(), which skips
// the report it writes at exit.
void write_shim_report();

// This process's environment without the interposer, for the programs a run
// starts beside the workload's (the regulator, best-effort load): their locks
// are not the run's, and their reports would be mistaken for its programs'.
std::vector<std::string> environment_without_shim();

std::string isolate_binary(const RunOptions& o);

// The server's command line for the workload's accelerators.
std::vector<std::string> server_args(const workload::Workload& w, const std::string& socket);

// rtaccel-isolate's command line (after the program) for the regulator of a
// run of W under isolation: `regulate` on W's regulated cores, metering
// CGROUP, which it makes and removes; the bandwidth lock, and with GANG the
// gang lock, named NAME; its summary and trace into OUT when the runner
// stops it. Its options are rtaccel-isolate's table's
// (isolate/regulate_options.h; tests/python/test_regulate_options.py).
std::vector<std::string> regulator_args(const workload::Workload& w, bool gang, const std::string& name,
                                        const std::string& cgroup, const std::filesystem::path& out);

// --- results (run_results.cc) ----------------------------------------------------

// Instances that ended after STOPPED are left out: they met the executors'
// wind-down (a higher one's exit holds a lower one's core), not the workload.
json chain_summary(const Setup& s, const SharedRun& shared, size_t c, std::ofstream* csv, uint64_t t0,
                   uint64_t stopped);

json timer_summary(const Setup& s, const SharedRun& shared, size_t t);

Status write_file(const std::filesystem::path& path, const std::string& text);

// --- the timeline (run_timeline.cc) ----------------------------------------------

// Perfetto: one process per executor (a thread per executor thread), one per
// accelerator (a thread per bucket, or per client thread under direct
// invocation). Queueing is an async slice, so that waiting requests overlap.
void trace_events(const Setup& s, const SharedRun& shared, const CoreSampler& cores, const SpeedSampler& speed,
                  const ResourceSampler& resources, const std::vector<Finding>& findings, uint64_t t0,
                  TraceFile* events);

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
  size_t processes() const { return setup_.workload.executors.size() + setup_.plan.bridges.size(); }
  void fail_links(uint64_t now);
  Status failure();
  Status wait_until_ready();
  Status supervise();
  void watch_resources();
  void report_progress(uint64_t now, bool final = false);
  void warn_where_traces_fill() const;
  void stop_executors();
  void wind_down();

  // The results (run_results.cc). write_results reads as the table of
  // contents of summary.json: each of its pieces, a key of the document, is
  // made by the member named after it, in the order the pieces are measured.
  // FAILURE: why the run ended before its time (a process of it died), or
  // empty.
  Status write_results(uint64_t stopped_ns, const std::string& failure);
  // chains, with latency.csv beside it (CSV_WRITTEN: whether written whole)
  json chains_summary(uint64_t stopped_ns, Status* csv_written) const;
  json timers_summary() const;
  json executors_summary() const;
  json queues_summary() const;
  // assumptions: the monitor's check of the run, which adds to CHAINS'
  // entries what explains their instances over their bounds, and gives
  // FINDINGS, what it found over what the analysis allowed, to the trace
  json assumptions_summary(uint64_t stopped_ns, json* chains, std::vector<Finding>* findings) const;
  // the run's own keys (policy, duration, how it ended, the overheads, the
  // critical bounds held by CHAINS)
  json run_summary(uint64_t stopped_ns, const std::string& failure, const json& chains) const;
  json walks_summary() const;
  json gang_summary() const;
  json isolation_summary() const;
  json link_summary() const;
  void warn_of_lost_messages() const;  // beside links, on stderr
  json shim_summary() const;
  std::filesystem::path shim_file(pid_t pid, const char* suffix) const;
  json best_effort_summary(uint64_t stopped_ns) const;
  json other_runs_summary() const;
  // trace.json: the timeline (trace_events), the best-effort programs'
  // (best_effort_trace, in run_timeline.cc) and the regulator's and the
  // interposer's merged in
  Status write_trace(uint64_t stopped_ns, const std::vector<Finding>& findings) const;
  void best_effort_trace(uint64_t stopped_ns, TraceFile* trace) const;

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

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_RUN_H_
