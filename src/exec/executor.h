// One executor process of a workload run (internal): pinned to its core at its
// SCHED_FIFO priority, it runs its callbacks non-preemptively on its threads,
// in the order the policy gives, and exchanges messages with the other
// executors through the run's shared memory.
#ifndef RTACCEL_EXEC_EXECUTOR_H_
#define RTACCEL_EXEC_EXECUTOR_H_

#include <cstddef>
#include <string>
#include <vector>

#include "exec/plan.h"
#include "exec/segments.h"
#include "exec/shared.h"
#include "rtaccel/isolate.h"
#include "rtaccel/status.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::exec {

struct ExecutorConfig {
  const workload::Workload* workload = nullptr;
  const Plan* plan = nullptr;
  const SegmentTable* requests = nullptr;  // sized; the executor builds its own
  SharedRun* shared = nullptr;
  size_t executor = 0;
  Policy policy = Policy::kPaam;
  double work_fraction = 0.9;  // share of each callback's CPU WCET actually worked
  // Per callback: nanoseconds per line of its working set's walk, measured
  // alone (core::calibrate_walk); 0 or absent: its work is the busy loop.
  const std::vector<double>* walk_ns_per_line = nullptr;
  std::string socket;          // paam: rtaccel-server's socket, or its gateway from another node
  // Its accelerators are on another node: under ros2 and picas too, its
  // segments go to the server there, which serves them in arrival order.
  bool remote_accelerator = false;
  // Gang scheduling: the run's gang lock and this executor's gang; null
  // without.
  rtaccel_gang_lock_t* gang_lock = nullptr;
  const workload::Gang* gang = nullptr;
  // Isolation: the run's bandwidth lock, which the callbacks marked in
  // `holds_bwlock` hold while they run; empty name: none.
  std::string bwlock;
  uint32_t bwlock_threshold_mbps = 0;
  const std::vector<bool>* holds_bwlock = nullptr;  // per callback
};

// Runs the executor until the run stops; the body of a forked child. A
// failure is also written to the executor's shared state, where the runner
// reads it.
Status run_executor(const ExecutorConfig& config);

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_EXECUTOR_H_
