// Uniprocessor fixed-priority response-time analyses: one-gang-at-a-time
// (RT-Gang, Sec. III-B), over gangs with the gang preemption cost as a term,
// and the bandwidth lock's (BWLOCK++, Eq. 4), with non-preemptive locked GPU
// segments as blocking. Integer nanoseconds, saturating.
#include <algorithm>
#include <limits>
#include <string>

#include "analysis/results.h"
#include "analysis/saturating.h"
#include "rtaccel/analysis.hpp"

namespace rtaccel::analysis {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : kUnbounded; }

// One interfering job source: cost per job and minimum inter-arrival time.
struct Source {
  uint64_t cost_ns;
  uint64_t period_ns;
  uint64_t preemption_ns;  // part of cost_ns that is 2 delta
};

struct Fixpoint {
  bool bounded = false;
  uint64_t wcrt_ns = 0;
  uint64_t preemption_ns = 0;
};

// R = own + sum ceil(R / T_j) * cost_j, from R = own, up to `limit`.
Fixpoint solve(uint64_t own_ns, const std::vector<Source>& sources, uint64_t limit_ns) {
  Fixpoint out;
  uint64_t r = own_ns;
  for (;;) {
    if (r > limit_ns) return out;
    uint64_t next = own_ns, preemption = 0;
    for (const Source& s : sources) {
      const uint64_t jobs = ceil_div(r, s.period_ns);
      next = add(next, mul(jobs, s.cost_ns));
      preemption = add(preemption, mul(jobs, s.preemption_ns));
    }
    if (next == r) {
      out.bounded = true;
      out.wcrt_ns = r;
      out.preemption_ns = preemption;
      return out;
    }
    r = next;
  }
}

std::string us_text(uint64_t ns) { return std::to_string(ns / 1000) + " us"; }

}  // namespace

std::vector<GangTaskResult> analyze_gang_tasks(const std::vector<GangTask>& tasks, uint64_t delta_ns,
                                               Horizon horizon) {
  std::vector<GangTaskResult> results;
  for (const GangTask& t : tasks) {
    std::vector<Source> sources;
    for (const GangTask& o : tasks)
      if (o.priority > t.priority)
        sources.push_back({add(o.wcet_ns, mul(2, delta_ns)), o.period_ns, mul(2, delta_ns)});
    const uint64_t limit = horizon == Horizon::kDeadline ? t.deadline_ns : t.period_ns;
    const Fixpoint f = solve(t.wcet_ns, sources, limit);
    GangTaskResult r;
    r.name = t.name;
    r.bounded = f.bounded;
    r.wcrt_ns = f.wcrt_ns;
    r.schedulable = f.bounded && f.wcrt_ns <= t.deadline_ns;
    if (f.bounded) {
      r.interference_ns = f.wcrt_ns - t.wcet_ns;
      r.preemption_ns = f.preemption_ns;
      if (!r.schedulable) r.reason = "bound " + us_text(f.wcrt_ns) + " exceeds the deadline " + us_text(t.deadline_ns);
    } else {
      r.reason = "no bound within the " + std::string(horizon == Horizon::kDeadline ? "deadline" : "period");
    }
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<BwlockTaskResult> analyze_bwlock_tasks(const std::vector<BwlockTask>& tasks, Horizon horizon) {
  std::vector<BwlockTaskResult> results;
  for (const BwlockTask& t : tasks) {
    BwlockTaskResult r;
    r.name = t.name;
    const uint64_t deadline = t.deadline_ns ? t.deadline_ns : t.period_ns;
    const uint64_t own = add(t.cpu_ns, add(t.copy_ns, t.kernel_ns));
    std::vector<Source> sources;
    for (const BwlockTask& o : tasks) {
      if (o.priority > t.priority)
        sources.push_back({add(o.cpu_ns, add(o.copy_ns, o.kernel_ns)), o.period_ns, 0});
      else if (o.priority < t.priority)
        r.blocking_ns = std::max(r.blocking_ns, o.longest_segment_ns);
    }
    const uint64_t limit = horizon == Horizon::kDeadline ? deadline : t.period_ns;
    const Fixpoint f = solve(add(own, r.blocking_ns), sources, limit);
    r.bounded = f.bounded;
    r.wcrt_ns = f.wcrt_ns;
    r.schedulable = f.bounded && f.wcrt_ns <= deadline;
    if (f.bounded) {
      r.interference_ns = f.wcrt_ns - add(own, r.blocking_ns);
      if (!r.schedulable) r.reason = "bound " + us_text(f.wcrt_ns) + " exceeds the deadline " + us_text(deadline);
    } else {
      r.reason = "no bound within the " + std::string(horizon == Horizon::kDeadline ? "deadline" : "period");
    }
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<ChainResult> analyze_gangs(const workload::Workload& w, const Options& options) {
  const std::vector<size_t> gang_of = w.gang_of_executor();
  const std::vector<workload::Gang> gangs = w.effective_gangs();
  const uint64_t epsilon = w.server ? w.server->overhead_ns : 0;
  const uint64_t two_delta = mul(2, w.gang_preemption_ns);
  const NetworkTerms network(w);

  // Each callback as a gang job.
  struct Job {
    int priority = 0;
    int core = 0;
    uint64_t cpu_ns = 0;
    uint64_t accelerator_ns = 0;
    uint64_t period_ns = kUnbounded;
  };
  std::vector<Job> jobs(w.callbacks.size());
  for (size_t k = 0; k < w.callbacks.size(); ++k) {
    const workload::Callback& cb = w.callbacks[k];
    Job& j = jobs[k];
    j.priority = gangs[gang_of[cb.executor]].priority;
    j.core = w.executors[cb.executor].core;
    j.cpu_ns = cb.cpu_ns;
    for (const workload::Segment& s : cb.segments)
      j.accelerator_ns = add(j.accelerator_ns, add(regulated_segment_ns(w, s.accelerator, s.wcet_ns), epsilon));
  }
  for (const workload::Chain& c : w.chains)
    for (size_t k : c.path) jobs[k].period_ns = std::min(jobs[k].period_ns, c.period_ns);

  std::vector<ChainResult> results;
  for (const workload::Chain& chain : w.chains) {
    ChainResult r = result_for(chain);
    const uint64_t limit = options.horizon == Horizon::kDeadline ? chain.deadline_ns : chain.period_ns;
    uint64_t total = w.release_jitter_ns;
    r.breakdown.release_jitter_ns = w.release_jitter_ns;
    bool bounded = true;
    for (size_t i = 0; i < chain.path.size() && bounded; ++i) {
      const size_t k = chain.path[i];
      const Job& me = jobs[k];
      std::vector<Source> sources;
      for (size_t j = 0; j < jobs.size(); ++j) {
        if (j == k) continue;
        const Job& o = jobs[j];
        const uint64_t c = add(o.cpu_ns, o.accelerator_ns);
        if (o.priority > me.priority) sources.push_back({add(c, two_delta), o.period_ns, two_delta});
        else if (o.priority == me.priority && o.core == me.core) sources.push_back({c, o.period_ns, 0});
      }
      // A job that arrives while a lower gang runs waits for it to stop on
      // every core: one gang preemption, delta, once per job.
      bool lower = false;
      for (const Job& o : jobs) lower = lower || o.priority < me.priority;
      const uint64_t blocking = lower ? w.gang_preemption_ns : 0;
      // Isolation: the regulator's thread on the job's core, above every
      // gang, once per period the job's window touches (Lemma 1's count:
      // one more than the ceiling, which solve() gives).
      const uint64_t regulator_once = regulator_ns(w, me.core, 0);  // one period's cost, or 0
      if (regulator_once) sources.push_back({regulator_once, w.isolation.period_ns, 0});
      const uint64_t own = add(me.cpu_ns, me.accelerator_ns);
      const Fixpoint f = solve(add(add(own, blocking), regulator_once), sources, limit);
      if (!f.bounded) {
        bounded = false;
        r.reason = "callback '" + w.callbacks[k].name + "' has no bound within the chain's " +
                   (options.horizon == Horizon::kDeadline ? "deadline" : "period");
        break;
      }
      const uint64_t regulator = regulator_ns(w, me.core, f.wcrt_ns);
      r.breakdown.cpu_ns = add(r.breakdown.cpu_ns, me.cpu_ns);
      r.breakdown.accelerator_ns = add(r.breakdown.accelerator_ns, me.accelerator_ns);
      r.breakdown.blocking_ns = add(r.breakdown.blocking_ns, blocking);
      r.breakdown.regulator_ns = add(r.breakdown.regulator_ns, regulator);
      r.breakdown.interference_ns = add(r.breakdown.interference_ns, f.wcrt_ns - own - blocking - regulator);
      total = add(total, f.wcrt_ns);
      if (i > 0 && w.callbacks[chain.path[i - 1]].executor != w.callbacks[k].executor) {
        r.breakdown.communication_ns = add(r.breakdown.communication_ns, w.communication_ns);
        total = add(total, w.communication_ns);
      }
      // hops between nodes and remote accelerator requests: the transfers'
      // bounds on their links
      uint64_t hop = i > 0 ? network.hop_ns(chain.path[i - 1], k) : 0;
      for (size_t s = 0; s < w.callbacks[k].segments.size(); ++s) hop = add(hop, network.segment_ns(k, s));
      r.breakdown.network_ns = add(r.breakdown.network_ns, hop);
      total = add(total, hop);
    }
    r.bounded = bounded && total <= limit;
    if (bounded && !r.bounded)
      r.reason = "no bound within the " + std::string(options.horizon == Horizon::kDeadline ? "deadline" : "period");
    r.wcrt_ns = r.bounded ? total : 0;
    r.schedulable = r.bounded && total <= chain.deadline_ns;
    if (r.bounded && !r.schedulable) r.reason = "bound " + us_text(total) + " exceeds the deadline " + us_text(chain.deadline_ns);
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace rtaccel::analysis
