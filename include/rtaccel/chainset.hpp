// Random chainsets for schedulability experiments (PAAM paper, Sec. V-D and
// Fig. 14): n chains of k callbacks, one accelerator, utilisations drawn with
// UUniFast, periods log-uniform, rate-monotonic chain priorities.
//
// Deterministic for a given seed. Allocates; set-up time only.
#ifndef RTACCEL_CHAINSET_HPP_
#define RTACCEL_CHAINSET_HPP_

#include <cstdint>
#include <random>
#include <vector>

#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::analysis {

struct ChainsetParams {
  int chains = 8;
  int callbacks_per_chain = 4;  // each callback: one CPU part, one accelerator segment
  // Chains are spread over `cores` cores round-robin in priority order. The
  // accelerator and the server get a core of their own beyond these.
  int cores = 4;
  // true: every chain has its own single-threaded executor, at a SCHED_FIFO
  // priority that follows the chain's, so chains on one core preempt each
  // other (Theorem 1's hpp term). false: one executor per core runs all its
  // chains, so lower chains block higher ones non-preemptively (Lemma 4's B).
  bool executor_per_chain = true;
  // Total utilisation (CPU + accelerator) of the set, split over chains by
  // UUniFast.
  double utilization = 1.0;
  // Accelerator : CPU utilisation of every chain (1.0 is the paper's 1:1).
  double accel_to_cpu = 1.0;
  uint64_t min_period_ns = 10'000'000;     // periods are log-uniform in
  uint64_t max_period_ns = 1'000'000'000;  // [min, max]; deadline = period
  int priority_levels = 4;                 // accelerator buckets
  uint64_t preemption_cost_ns = 50'000;    // kappa
  uint64_t overhead_ns = 50'000;           // epsilon
  workload::WaitMode wait = workload::WaitMode::kSuspend;
};

// UUniFast (Bini and Buttazzo, 2005): n utilisations summing to `total`,
// uniformly distributed over that simplex.
std::vector<double> uunifast(int n, double total, std::mt19937_64& rng);

// One random chainset as a workload the analysis takes directly.
workload::Workload generate_chainset(const ChainsetParams& params, std::mt19937_64& rng);

struct Acceptance {
  int schedulable = 0;  // sets whose chains are all schedulable
  int sets = 0;
};

// Generates `sets` chainsets from `seed` and counts the schedulable ones.
Acceptance acceptance(const ChainsetParams& params, int sets, uint64_t seed, const Options& options = {});

}  // namespace rtaccel::analysis

#endif  // RTACCEL_CHAINSET_HPP_
