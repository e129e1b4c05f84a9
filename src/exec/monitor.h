// The run's monitor (internal): checks, from what a run recorded, each
// assumption that a chain's bound rests on, and says which one broke when a
// chain went over its bound.
//
// The assumptions: every callback's CPU work within its declared WCET (the
// thread's CPU time, which a co-runner that floods the cache or DRAM
// stretches); every accelerator segment's kernel within its declared time
// (its span less the time higher buckets' kernels ran within it, which the
// analysis charges apart); every request's server overhead within epsilon;
// every hop between nodes within its link's bound; every timer starting its
// callback within the release jitter of its release (where nothing else ran
// on its core meanwhile); and the executors' cores serving the executors,
// not interrupts, softirqs or the hypervisor (steal), beyond what the
// release jitter covers. A chain instance over its bound by more than the
// times the run measured and the cores' losses in its time account for is a
// fault of the analysis, and the run says so.
#ifndef RTACCEL_EXEC_MONITOR_H_
#define RTACCEL_EXEC_MONITOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "exec/plan.h"
#include "exec/shared.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::exec {

// Time a core gave to interrupts, softirqs and the hypervisor.
struct CoreLoss {
  uint64_t irq_ns = 0;
  uint64_t softirq_ns = 0;
  uint64_t steal_ns = 0;
  uint64_t total() const { return irq_ns + softirq_ns + steal_ns; }
  CoreLoss& operator+=(const CoreLoss& o) {
    irq_ns += o.irq_ns;
    softirq_ns += o.softirq_ns;
    steal_ns += o.steal_ns;
    return *this;
  }
};

// /proc/stat's per-core irq, softirq and steal, sampled during the run, for
// the cores it watches only: a long run keeps up to 100 000 samples, and
// every core of a 64-core machine would make that 150 MB. The kernel counts
// them in ticks (10 ms at USER_HZ 100), so a window's loss is known to a
// tick per sample it spans.
class CoreSampler {
 public:
  CoreSampler() = default;
  // Watches CORES (in any order, repeats allowed).
  explicit CoreSampler(std::vector<int> cores);
  // Reads /proc/stat (about 20 us), or a file of its format (tests); `now_ns`
  // is CLOCK_MONOTONIC. A watched core missing from it (taken offline) lost
  // nothing since the sample before.
  void sample(uint64_t now_ns, const char* path = "/proc/stat");
  // A sample taken another way (tests): each core's totals so far, by core
  // number.
  void record(uint64_t now_ns, const std::vector<CoreLoss>& cumulative);
  // Room for SAMPLES samples in all, resident now: a run that knows how
  // many it takes holds its memory flat while it takes them.
  void reserve(size_t samples);
  // The cores watched, in order.
  const std::vector<int>& cores() const { return cores_; }
  // What the samples take, in bytes.
  size_t bytes() const { return at_ns_.capacity() * sizeof(uint64_t) + totals_.capacity() * sizeof(CoreLoss); }
  // Core `core`'s loss in the sampling intervals that overlap [from, to];
  // with `counted` (per core and interval), each interval once across the
  // calls that share it, so that overlapping windows do not add twice. A
  // core not watched lost nothing the run saw.
  CoreLoss lost(int core, uint64_t from_ns, uint64_t to_ns, std::vector<std::vector<bool>>* counted) const;
  // Its loss from the first sample to the last.
  CoreLoss lost(int core) const;
  // The loss of each interval, for the trace's counters: [at, loss].
  std::vector<std::pair<uint64_t, CoreLoss>> intervals(int core) const;

 private:
  // The column of `core` in totals_, or -1 where it is not watched.
  ptrdiff_t column(int core) const;
  // Interval k's loss (k >= 1), from sample k - 1 to sample k.
  CoreLoss delta(size_t k, ptrdiff_t column) const;
  std::vector<int> cores_;
  std::vector<uint64_t> at_ns_;   // per sample
  std::vector<CoreLoss> totals_;  // per sample, a row of the watched cores' totals
};

// The cores whose losses a run's bounds rest on: its executors' and its
// cpu-backend accelerators' (a device core's losses stretch its kernels),
// some more than once; a CoreSampler keeps each once.
std::vector<int> watched_cores(const workload::Workload& w);

// The machine's speed during the run: the calibrated busy loop's rate,
// timed on the runner's thread's CPU clock every sample, against the rate
// the run's CPU work was sized by. A virtual machine's host can slow every vCPU by a third
// for minutes and count no steal; the callbacks' work then runs over their
// WCETs.
class SpeedSampler {
 public:
  // Times a short probe of the loop (three trials of 20 000 iterations).
  void sample(uint64_t now_ns);
  // A ratio measured another way (tests).
  void record(uint64_t now_ns, double ratio);
  // Room for SAMPLES samples in all, resident now (see CoreSampler).
  void reserve(size_t samples);
  // The lowest ratio among the samples in [from, to]; 0 when none.
  double slowest(uint64_t from_ns, uint64_t to_ns) const;
  const std::vector<std::pair<uint64_t, double>>& samples() const { return samples_; }

 private:
  std::vector<std::pair<uint64_t, double>> samples_;  // (at, rate / calibrated rate)
};

struct MonitorInput {
  const workload::Workload* workload = nullptr;
  const Plan* plan = nullptr;
  const std::vector<analysis::ChainResult>* bounds = nullptr;
  const SharedRun* shared = nullptr;
  const CoreSampler* cores = nullptr;
  uint64_t t0_ns = 0;
  // The analysis the run's bounds came from, run again over the workload
  // with the times the run measured; none: instances over their bound are
  // explained by any assumption broken in their time.
  std::function<std::vector<analysis::ChainResult>(const workload::Workload&)> analyze;
  // The machine's speed; none: not sampled. The share of each WCET that the
  // callbacks' work takes at the calibrated speed: below it, the work runs
  // over.
  const SpeedSampler* speed = nullptr;
  double work_fraction = 1.0;
  // When the executors were told to stop: work and chain instances that
  // ended after it met their wind-down, not the workload, and are left out.
  uint64_t stop_ns = UINT64_MAX;
  // Whether the run scheduled as the bounds' analysis assumes (paam). Under
  // another policy an instance over a bound with nothing broken in its time
  // is the policy's doing, not evidence against the analysis.
  bool policy_analysed = true;
};

// What the monitor found over what the analysis allowed, and when: a piece
// of work over its time, or a chain instance over its bound. The run's
// trace marks each. A long run on a slow host finds hundreds of thousands:
// a finding names what it is about by a view of a name in the workload or
// the plan, which must outlive it, not by a copy.
struct Finding {
  enum Kind { kCpu, kSegment, kHop, kRelease, kOffCore, kOverhead, kLegs, kInstance } kind;
  // The callback; "callback: service" (kSegment, kOverhead, kLegs); the hop;
  // the timer's callback; the chain.
  std::string_view what;
  uint64_t begin_ns;   // when it ran (a release: from the release to the start)
  uint64_t end_ns;
  // CPU time, kernel's own time, hop's time, start delay, time off core,
  // server overhead, a remote request's time on the link, latency
  uint64_t took_ns;
  // WCET, declared time, hop's bound, release jitter, slack, epsilon, the
  // link's bound for that request and response, the chain's bound
  uint64_t allowed_ns;
  // kInstance: the chain's bound with the run's longest times (0: none
  // computed), and whether the run explains the instance.
  uint64_t measured_bound_ns = 0;
  bool explained = true;
};

// summary.json's "assumptions": per callback its CPU time against its WCET,
// per segment its kernel's own time against its declared time, its
// requests' server overhead against epsilon and, served on another node,
// their time on the link against its bound (`remote_requests`), per hop its
// time against its bound, per executor core its losses, the machine's speed,
// and `broken`, one sentence per assumption that did not hold. Each chain of `chains` (the
// summary's, in workload order) that went over its bound gets
// `explained_by` (sentences) and `unexplained`. With `analyze`, the chain
// also gets `measured_wcrt_us`, its bound with every callback's, kernel's and
// release's longest time in the run in place of the declared one; an
// instance is explained where it is within that bound, or over it by no more
// than what its cores lost to interrupts, softirqs, steal and threads outside
// the workload in its time. Without, where any assumption broke in its time.
// `unexplained` counts the others: a run's evidence against the analysis,
// and none where the policy is not the analysed one (`policy_analysed`).
// With `findings`, every overrun and instance over its bound, in time order
// of their start.
nlohmann::json check_assumptions(const MonitorInput& in, nlohmann::json* chains,
                                 std::vector<Finding>* findings = nullptr);

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_MONITOR_H_
