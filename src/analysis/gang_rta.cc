// Uniprocessor fixed-priority response-time analyses: one-gang-at-a-time
// (RT-Gang, Sec. III-B), over gangs with the gang preemption cost as a term,
// and the bandwidth lock's (BWLOCK++, Eq. 4), with non-preemptive locked GPU
// segments as blocking. Integer nanoseconds, saturating.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "analysis/joins.h"
#include "analysis/results.h"
#include "analysis/saturating.h"
#include "rtaccel/analysis.hpp"

namespace rtaccel::analysis {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : kUnbounded; }

// One interfering job source: cost per job and minimum inter-arrival time;
// `offset_ns` widens the window its jobs are counted in (a job released
// that long before the window can still run in it).
struct Source {
  uint64_t cost_ns;
  uint64_t period_ns;
  uint64_t preemption_ns;  // part of cost_ns that is 2 delta
  uint64_t offset_ns = 0;
};

struct Fixpoint {
  bool bounded = false;
  uint64_t wcrt_ns = 0;
  uint64_t preemption_ns = 0;
};

// R = own + sum ceil((R + offset_j) / T_j) * cost_j, from R = own, up to
// `limit`.
Fixpoint solve(uint64_t own_ns, const std::vector<Source>& sources, uint64_t limit_ns) {
  Fixpoint out;
  uint64_t r = own_ns;
  for (;;) {
    if (r > limit_ns) return out;
    uint64_t next = own_ns, preemption = 0;
    for (const Source& s : sources) {
      const uint64_t jobs = ceil_div(add(r, s.offset_ns), s.period_ns);
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

// Adds a part of a chain's bound (a job, a piece) to its terms.
void accumulate(Breakdown* total, const Breakdown& part) {
  total->release_jitter_ns = add(total->release_jitter_ns, part.release_jitter_ns);
  total->cpu_ns = add(total->cpu_ns, part.cpu_ns);
  total->accelerator_ns = add(total->accelerator_ns, part.accelerator_ns);
  total->blocking_ns = add(total->blocking_ns, part.blocking_ns);
  total->interference_ns = add(total->interference_ns, part.interference_ns);
  total->regulator_ns = add(total->regulator_ns, part.regulator_ns);
  total->network_kernel_ns = add(total->network_kernel_ns, part.network_kernel_ns);
  total->communication_ns = add(total->communication_ns, part.communication_ns);
  total->network_ns = add(total->network_ns, part.network_ns);
  total->fusion_wait_ns = add(total->fusion_wait_ns, part.fusion_wait_ns);
}

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

namespace {

// Each callback as a gang job. Its segments as the server runs them: in the
// bucket of its priority among the requests to its accelerator, each with a
// preemption and a resumption by a higher bucket (kappa) where the device
// has buckets to preempt, as in the PAAM analysis.
struct Kernel {
  size_t accelerator = 0;
  int bucket = 0;
  uint64_t ns = 0;  // A + 2 kappa + epsilon
};
struct Job {
  int priority = 0;
  int core = 0;
  size_t executor = 0;
  uint64_t cpu_ns = 0;
  uint64_t accelerator_ns = 0;
  uint64_t period_ns = kUnbounded;
  std::vector<Kernel> kernels;
};

// W's callbacks as jobs, in callback order: each of its executor's gang's
// priority, released as often as the fastest chain through it.
std::vector<Job> gang_jobs(const workload::Workload& w, const std::vector<size_t>& gang_of,
                           const std::vector<workload::Gang>& gangs, const std::vector<int>& priority) {
  const uint64_t epsilon = w.server ? w.server->overhead_ns : 0;
  const std::vector<std::vector<int>> requests = request_priorities(w);
  std::vector<Job> jobs(w.callbacks.size());
  for (size_t k = 0; k < w.callbacks.size(); ++k) {
    const workload::Callback& cb = w.callbacks[k];
    Job& j = jobs[k];
    j.priority = gangs[gang_of[cb.executor]].priority;
    j.core = w.executors[cb.executor].core;
    j.executor = cb.executor;
    j.cpu_ns = cb.cpu_ns;
    for (const workload::Segment& s : cb.segments) {
      const auto& acc = w.accelerators[s.accelerator];
      const uint64_t kappa = acc.priority_levels > 1 ? acc.preemption_cost_ns : 0;
      Kernel kernel;
      kernel.accelerator = s.accelerator;
      kernel.bucket = bucket_of(priority[k], requests[s.accelerator], acc.priority_levels);
      kernel.ns = add(add(regulated_segment_ns(w, s.accelerator, s.wcet_ns), mul(2, kappa)), epsilon);
      j.accelerator_ns = add(j.accelerator_ns, kernel.ns);
      j.kernels.push_back(kernel);
    }
  }
  for (const workload::Chain& c : w.chains)
    for (size_t k : c.path) jobs[k].period_ns = std::min(jobs[k].period_ns, c.period_ns);
  return jobs;
}

bool share_an_accelerator(const Job& a, const Job& b) {
  for (const Kernel& x : a.kernels)
    for (const Kernel& y : b.kernels)
      if (x.accelerator == y.accelerator) return true;
  return false;
}

// What the sources OF charge in a window of WINDOW_NS.
uint64_t charged(const std::vector<Source>& of, uint64_t window_ns) {
  uint64_t total = 0;
  for (const Source& s : of) total = add(total, mul(ceil_div(add(window_ns, s.offset_ns), s.period_ns), s.cost_ns));
  return total;
}

// A piece of a chain bounded as one window of the gang lock, and the terms
// of that bound.
struct Window {
  Fixpoint f;
  Breakdown terms;
};

// analyze_gangs over one workload, step by step: what delays each job, each
// chain as the sum of its jobs, its pieces between fusions as windows, and
// the waits at the fusions composed from the pieces' bounds (joins.h).
class GangAnalysis {
 public:
  GangAnalysis(const workload::Workload& w, const Options& options)
      : w_(w),
        options_(options),
        gang_of_(w.gang_of_executor()),
        gangs_(w.effective_gangs()),
        two_delta_(mul(2, w.gang_preemption_ns)),
        network_(w),
        joins_(w, network_, options),
        priority_(w.callback_priorities()),
        jobs_(gang_jobs(w, gang_of_, gangs_, priority_)),
        owns_(owned_callbacks(w)),
        job_wcrt_(jobs_.size(), kUnbounded),
        pieces_(w.chains.size()),
        release_in_piece_(w.chains.size()),
        job_terms_(w.chains.size()),
        piece_window_(w.chains.size()) {}

  // Each job's bound within its period, on its own: how long before a
  // window another chain's job can have been released and still run in it.
  void bound_jobs_within_periods() {
    for (size_t k = 0; k < jobs_.size(); ++k) {
      const Fixpoint f = job_bound(k, jobs_[k].period_ns, false);
      if (f.bounded) job_wcrt_[k] = f.wcrt_ns;
    }
  }

  // Every chain as the sum of its callbacks' jobs, each bounded on its own,
  // from the start of each piece between the fusions it waits at; the
  // waits are added from the other chains' pieces (joins.h).
  void sum_chains() {
    for (size_t c = 0; c < w_.chains.size(); ++c) results_.push_back(sum_chain(c));
  }

  // The windows count other chains' jobs from release offsets that the
  // sums' waits give: each at least what it is under the smaller bounds,
  // so sound; the waits are then composed again from the smaller bounds.
  void bound_pieces_as_windows() {
    const std::vector<uint64_t> release_offset = offsets_of(joins_.compose(pieces_));
    for (size_t c = 0; c < w_.chains.size(); ++c) {
      piece_window_[c].assign(w_.chains[c].path.size(), std::nullopt);
      if (!results_[c].reason.empty()) continue;
      for (size_t from = 0; from < w_.chains[c].path.size(); from = piece_end(c, from) + 1)
        bound_piece_as_windows(c, from, release_offset);
    }
    composed_ = joins_.compose(pieces_);
  }

  // Each chain's bound: its pieces' terms, and its end with the waits.
  void compose_chains() {
    for (size_t c = 0; c < w_.chains.size(); ++c) compose_chain(c);
  }

  // The results, with the bounds whose premises fail withdrawn: a wait
  // rests on the bound of its sources' chains through their publishers,
  // within their periods (checked in compose) and on their activations
  // never running late past the period: a source chain without a bound
  // leaves the waiting chain without one.
  std::vector<ChainResult> results() {
    withdraw_unfounded(w_, [&](size_t c) -> const std::vector<size_t>& { return joins_.sources_of(c); }, &results_);
    for (ChainResult& r : results_) {
      r.schedulable = r.bounded && r.wcrt_ns <= r.deadline_ns;
      if (r.bounded && !r.schedulable) r.reason = "bound " + us_text(r.wcrt_ns) + " exceeds the deadline " + us_text(r.deadline_ns);
    }
    return std::move(results_);
  }

 private:
  const char* horizon_name() const { return options_.horizon == Horizon::kDeadline ? "deadline" : "period"; }
  uint64_t limit_of(const workload::Chain& chain) const {
    return options_.horizon == Horizon::kDeadline ? chain.deadline_ns : chain.period_ns;
  }

  // What delays a callback's job: the jobs of higher gangs (each with a
  // gang preemption, stop and resume), those of its own gang priority on its
  // core, and the regulator's thread on its core, above every gang. The
  // members of its virtual gang on other cores run beside it, but their
  // kernels queue on a shared accelerator with its own.
  // Within a single-threaded executor the callbacks run one at a time, the
  // highest callback priority first (picas and paam; the bound is paam's):
  // one of lower priority delays a job only where it started first, and
  // then once (blocking below), not as interference.
  bool below_on_executor(size_t k, size_t other) const {
    return jobs_[k].executor == jobs_[other].executor && w_.executors[jobs_[k].executor].threads == 1 &&
           priority_[other] < priority_[k];
  }
  bool delays(size_t k, size_t other) const {
    const Job& me = jobs_[k];
    const Job& o = jobs_[other];
    if (below_on_executor(k, other)) return false;
    return o.priority > me.priority || (o.priority == me.priority && o.core == me.core) ||
           (o.priority == me.priority && share_an_accelerator(me, o));
  }
  // Callback I of chain C is triggered by its predecessor alone on the same
  // single-threaded executor, or is a fusion fed by that executor alone:
  // ready when the executor ends a callback, it is the next the executor
  // takes before any callback of lower priority.
  bool follows_on_executor(size_t c, size_t i) const {
    if (i == 0) return false;
    const workload::Chain& chain = w_.chains[c];
    const workload::Callback& before = w_.callbacks[chain.path[i - 1]];
    const workload::Callback& me = w_.callbacks[chain.path[i]];
    if (me.trigger.topics.size() > 1) return joins_.fed_by_own_executor(c, i);
    return before.executor == me.executor && w_.executors[me.executor].threads == 1 &&
           me.trigger.topics == std::vector<std::string>{before.publishes};
  }
  // What one job of OTHER costs K's: only its kernels where it is of K's
  // gang priority on another core; with the gang preemption where higher.
  uint64_t cost_for(size_t k, size_t other) const {
    const Job& me = jobs_[k];
    const Job& o = jobs_[other];
    if (o.priority == me.priority && o.core != me.core) return o.accelerator_ns;
    const uint64_t c = add(o.cpu_ns, o.accelerator_ns);
    return o.priority > me.priority ? add(c, two_delta_) : c;
  }
  // A job that arrives while a lower gang runs waits for it to stop on
  // every core: one gang preemption, delta, once per job. A stopped gang's
  // threads keep their requests to the server, one each at most, which run
  // on: one that is queued in the bucket of one of the job's kernels or above
  // runs before it (one in a lower bucket is preempted, which the kernel's
  // kappa covers). Each counts once per job: its thread cannot ask again
  // until its gang runs, after the job. And on its executor a callback of
  // lower priority that started first, unless the job follows its
  // predecessor there.
  uint64_t blocking_of(size_t k, bool follows) const {
    const Job& me = jobs_[k];
    uint64_t blocking = 0;
    if (!follows)
      for (size_t j = 0; j < jobs_.size(); ++j)
        if (below_on_executor(k, j)) blocking = std::max(blocking, add(jobs_[j].cpu_ns, jobs_[j].accelerator_ns));
    bool lower = false;
    for (size_t e = 0; e < w_.executors.size(); ++e) {
      if (gangs_[gang_of_[e]].priority >= me.priority) continue;
      lower = true;
      blocking = add(blocking, mul(static_cast<uint64_t>(w_.executors[e].threads), longest_request_before(me, e)));
    }
    return lower ? add(blocking, w_.gang_preemption_ns) : blocking;
  }
  // The longest kernel of executor E's callbacks that runs before one of
  // ME's: on the same accelerator, in its bucket or above.
  uint64_t longest_request_before(const Job& me, size_t e) const {
    uint64_t longest = 0;
    for (const Job& o : jobs_) {
      if (o.executor != e) continue;
      for (const Kernel& theirs : o.kernels)
        for (const Kernel& mine : me.kernels)
          if (theirs.accelerator == mine.accelerator && theirs.bucket >= mine.bucket)
            longest = std::max(longest, theirs.ns);
    }
    return longest;
  }
  // Isolation: the regulator's thread on the job's core, above every gang,
  // once per period the window touches (Lemma 1's count: one more than the
  // ceiling).
  std::optional<Source> regulator_source(int core) const {
    const uint64_t once = regulator_ns(w_, core, 0);  // one period's cost, or 0
    if (!once) return std::nullopt;
    return Source{once, w_.isolation.period_ns, 0, w_.isolation.period_ns};
  }
  // The kernel's work for the links (softirq, above every thread) on a
  // core: each flow's messages a sporadic source, its jitter widening the
  // count, as in the PAAM analysis (NetworkTerms::kernel_ns).
  std::vector<Source> network_sources(int core) const {
    std::vector<Source> out;
    for (const NetworkTerms::KernelLoad& load : network_.kernel_loads(core))
      out.push_back({load.ns_per_message, load.period_ns, 0, load.jitter_ns});
    return out;
  }
  // Callback K's job on its own: R = C + blocking + its delays, within `limit`.
  Fixpoint job_bound(size_t k, uint64_t limit, bool follows) const {
    std::vector<Source> sources;
    for (size_t j = 0; j < jobs_.size(); ++j)
      if (j != k && delays(k, j))
        sources.push_back({cost_for(k, j), jobs_[j].period_ns, jobs_[k].priority < jobs_[j].priority ? two_delta_ : 0});
    if (auto reg = regulator_source(jobs_[k].core)) sources.push_back(*reg);
    const std::vector<Source> kernel = network_sources(jobs_[k].core);
    sources.insert(sources.end(), kernel.begin(), kernel.end());
    return solve(add(add(jobs_[k].cpu_ns, jobs_[k].accelerator_ns), blocking_of(k, follows)), sources, limit);
  }
  // Hand-overs between executors and hops between nodes on the way into
  // callback I of CHAIN, and its remote accelerator requests.
  void passage_of(const workload::Chain& chain, const NetworkTerms::ChainLegs& legs, size_t i,
                  uint64_t* communication, uint64_t* transfers) const {
    const size_t k = chain.path[i];
    *communication = i > 0 && w_.callbacks[chain.path[i - 1]].executor != w_.callbacks[k].executor ? w_.communication_ns : 0;
    uint64_t hop = i > 0 ? legs.hop_ns(chain.path[i - 1], k) : 0;
    for (size_t s = 0; s < w_.callbacks[k].segments.size(); ++s) hop = add(hop, legs.segment_ns(k, s));
    *transfers = hop;
  }
  // Callback K's remote accelerator requests alone.
  uint64_t requests_ns(const NetworkTerms::ChainLegs& legs, size_t k) const {
    uint64_t run = 0;
    for (size_t s = 0; s < w_.callbacks[k].segments.size(); ++s) run = add(run, legs.segment_ns(k, s));
    return run;
  }

  // Chain C as the sum of its callbacks' jobs, each bounded within the
  // chain's limit; its pieces (Joins::Pieces) and each job's terms kept for
  // the windows below.
  ChainResult sum_chain(size_t c) {
    const workload::Chain& chain = w_.chains[c];
    ChainResult r = result_for(chain);
    const uint64_t limit = limit_of(chain);
    Joins::Pieces& mine = pieces_[c];
    mine.known = true;
    mine.limit_ns = limit;
    mine.within.assign(chain.path.size(), kUnbounded);
    mine.enter.assign(chain.path.size(), 0);
    release_in_piece_[c].assign(chain.path.size(), kUnbounded);
    job_terms_[c].assign(chain.path.size(), Breakdown{});
    const NetworkTerms::ChainLegs legs =
        network_.chain_legs(chain.path, options_.transfers_once_per_chain ? limit : kUnbounded, joins_.waits(c));
    uint64_t run = w_.release_jitter_ns;
    for (size_t i = 0; i < chain.path.size(); ++i) {
      const size_t k = chain.path[i];
      uint64_t communication = 0, hop = 0;
      passage_of(chain, legs, i, &communication, &hop);
      if (joins_.waits_at(c, i)) {
        // The way into a fusion comes before the wait, its remote requests
        // after it.
        mine.enter[i] = add(communication, legs.hop_ns(chain.path[i - 1], k));
        run = requests_ns(legs, k);
      } else {
        run = add(run, add(communication, hop));
      }
      release_in_piece_[c][i] = run;
      const bool follows = follows_on_executor(c, i);
      const Fixpoint f = job_bound(k, limit, follows);
      if (!f.bounded) {
        r.reason = "callback '" + w_.callbacks[k].name + "' has no bound within the chain's " + horizon_name();
        break;
      }
      job_terms_[c][i] = job_terms_of(k, i, f, follows, communication, hop);
      run = add(run, f.wcrt_ns);
      mine.within[i] = run;
    }
    return r;
  }
  // The terms of callback K's job at position I of its chain, bounded by F,
  // and of the way into it (COMMUNICATION, HOP).
  Breakdown job_terms_of(size_t k, size_t i, const Fixpoint& f, bool follows, uint64_t communication,
                         uint64_t hop) const {
    const Job& me = jobs_[k];
    Breakdown t;
    t.release_jitter_ns = i == 0 ? w_.release_jitter_ns : 0;
    t.cpu_ns = me.cpu_ns;
    t.accelerator_ns = me.accelerator_ns;
    t.blocking_ns = blocking_of(k, follows);
    t.regulator_ns = regulator_ns(w_, me.core, f.wcrt_ns);
    t.network_kernel_ns = network_.kernel_ns(me.core, f.wcrt_ns);
    t.interference_ns =
        f.wcrt_ns - add(me.cpu_ns, me.accelerator_ns) - t.blocking_ns - t.regulator_ns - t.network_kernel_ns;
    t.communication_ns = communication;
    t.network_ns = hop;
    return t;
  }

  // Each job's latest release after its chain's: what a window below widens
  // the count of another chain's job by.
  std::vector<uint64_t> offsets_of(const std::vector<Joins::Composed>& composed) const {
    std::vector<uint64_t> offset(jobs_.size(), 0);
    for (size_t c = 0; c < w_.chains.size(); ++c)
      for (size_t i = 0; i < w_.chains[c].path.size(); ++i)
        offset[w_.chains[c].path[i]] =
            std::max(offset[w_.chains[c].path[i]], add(composed[c].start[i], release_in_piece_[c][i]));
    return offset;
  }
  // The last position of chain C's piece that starts at FROM.
  size_t piece_end(size_t c, size_t from) const {
    size_t to = from;
    while (to + 1 < w_.chains[c].path.size() && !joins_.waits_at(c, to + 1)) ++to;
    return to;
  }
  // Every prefix of chain C's piece from FROM as a window, where that
  // bounds it tighter than the sum; the terms of the whole piece's window
  // where it does (piece_window_).
  void bound_piece_as_windows(size_t c, size_t from, const std::vector<uint64_t>& release_offset) {
    Joins::Pieces& mine = pieces_[c];
    const size_t to = piece_end(c, from);
    for (size_t i = from; i <= to; ++i) {
      const Window win = window_of(c, from, i, release_offset, std::min(mine.limit_ns, mine.within[i]));
      if (!win.f.bounded || win.f.wcrt_ns >= mine.within[i]) continue;
      mine.within[i] = win.f.wcrt_ns;
      if (i == to) piece_window_[c][from] = win.terms;
    }
  }

  // A piece of a chain, from its start (position FROM) to the end of
  // position TO, as one window, too. From the piece's start to that end the
  // gang lock serves the chain's own jobs, or a job that delays one of
  // them, or the chain is between two callbacks (hand-overs and hops) or
  // waits for a lower gang to stop: every instant is one of the terms
  // below. So another chain's job counts once per window, however many of
  // this chain's callbacks its window spans, where the sum above counts it
  // in each. A job that runs in the window was released at most its release
  // offset plus its own bound before the window began (else it had
  // finished): that widens the count. The chain's own jobs of the piece are
  // not counted again: its previous instance ended before this one began,
  // since the bound is at most its period; a callback that can also fire for
  // another chain's activation is, as theirs. Either bound holds, so the
  // smaller is taken. Its terms include the way into the piece's fusion,
  // which the window leaves out (Pieces::enter).
  Window window_of(size_t c, size_t from, size_t to, const std::vector<uint64_t>& release_offset,
                   uint64_t cap) const {
    const workload::Chain& chain = w_.chains[c];
    Window out;
    Breakdown& t = out.terms;
    std::vector<int> cores;
    for (size_t i = from; i <= to; ++i) {
      accumulate(&t, job_terms_[c][i]);
      const int core = jobs_[chain.path[i]].core;
      if (std::find(cores.begin(), cores.end(), core) == cores.end()) cores.push_back(core);
    }
    // What delays the piece is counted anew, once for the window.
    t.interference_ns = t.regulator_ns = t.network_kernel_ns = 0;
    const uint64_t base = add(t.release_jitter_ns, add(t.cpu_ns, add(t.accelerator_ns, add(t.blocking_ns,
                          add(t.communication_ns, t.network_ns))))) - pieces_[c].enter[from];
    std::vector<Source> sources = window_jobs(c, from, to, release_offset);
    // The regulator and the kernel's network work on each core the piece
    // runs on: it runs on one core at a time, so charging each core's in
    // full counts more than can delay it.
    std::vector<Source> regulators, kernel;
    for (int core : cores) {
      if (auto reg = regulator_source(core)) regulators.push_back(*reg);
      const std::vector<Source> on_core = network_sources(core);
      kernel.insert(kernel.end(), on_core.begin(), on_core.end());
    }
    sources.insert(sources.end(), regulators.begin(), regulators.end());
    sources.insert(sources.end(), kernel.begin(), kernel.end());
    out.f = solve(base, sources, cap);
    if (!out.f.bounded) return out;
    t.regulator_ns = charged(regulators, out.f.wcrt_ns);
    t.network_kernel_ns = charged(kernel, out.f.wcrt_ns);
    t.interference_ns = out.f.wcrt_ns - base - t.regulator_ns - t.network_kernel_ns;
    return out;
  }
  // The jobs that delay chain C's piece from FROM to TO, each a source once
  // for the window (window_of), but those the chain owns there.
  std::vector<Source> window_jobs(size_t c, size_t from, size_t to, const std::vector<uint64_t>& release_offset) const {
    const workload::Chain& chain = w_.chains[c];
    std::vector<Source> sources;
    for (size_t j = 0; j < jobs_.size(); ++j) {
      bool on_path = false, owned = false;
      for (size_t i = from; i <= to; ++i) {
        on_path = on_path || chain.path[i] == j;
        owned = owned || (chain.path[i] == j && owns_[c][i]);
      }
      if (owned) continue;
      // The job delays some callback of the piece: the dearest way it can.
      // A callback of the piece that fires for others too delays itself.
      bool delays_any = on_path;
      uint64_t cost = on_path ? add(jobs_[j].cpu_ns, jobs_[j].accelerator_ns) : 0, preemption = 0;
      for (size_t i = from; i <= to; ++i) {
        const size_t k = chain.path[i];
        if (k == j || !delays(k, j)) continue;
        delays_any = true;
        cost = std::max(cost, cost_for(k, j));
        if (jobs_[j].priority > jobs_[k].priority) preemption = two_delta_;
      }
      if (!delays_any) continue;
      sources.push_back({cost, jobs_[j].period_ns, preemption, add(release_offset[j], job_wcrt_[j])});
    }
    return sources;
  }

  // Chain C's bound: each piece's terms, the window's where it gave the
  // piece's bound, else its jobs'; its end with the waits composed.
  void compose_chain(size_t c) {
    ChainResult& r = results_[c];
    if (!r.reason.empty()) return;
    const auto& path = w_.chains[c].path;
    Breakdown& b = r.breakdown;
    for (size_t from = 0; from < path.size(); from = piece_end(c, from) + 1) {
      if (piece_window_[c][from]) {
        accumulate(&b, *piece_window_[c][from]);
        continue;
      }
      for (size_t i = from; i <= piece_end(c, from); ++i) accumulate(&b, job_terms_[c][i]);
    }
    b.fusion_wait_ns = composed_[c].wait_ns;
    const uint64_t total = path.empty() ? 0 : composed_[c].end.back();
    const uint64_t limit = limit_of(w_.chains[c]);
    r.bounded = total <= limit;
    if (!r.bounded)
      r.reason = total == kUnbounded && !composed_[c].reason.empty()
                     ? composed_[c].reason
                     : "no bound within the " + std::string(horizon_name());
    r.wcrt_ns = r.bounded ? total : 0;
  }

  const workload::Workload& w_;
  const Options& options_;
  const std::vector<size_t> gang_of_;
  const std::vector<workload::Gang> gangs_;
  const uint64_t two_delta_;
  const NetworkTerms network_;
  const Joins joins_;
  const std::vector<int> priority_;
  const std::vector<Job> jobs_;
  const std::vector<std::vector<bool>> owns_;
  std::vector<uint64_t> job_wcrt_;  // within its period
  std::vector<Joins::Pieces> pieces_;
  std::vector<std::vector<uint64_t>> release_in_piece_;  // each job's, from its piece's start
  std::vector<std::vector<Breakdown>> job_terms_;  // per position: the way into its job, and the job
  // Each piece's terms: the window's where it gave the piece's bound, else
  // its jobs'.
  std::vector<std::vector<std::optional<Breakdown>>> piece_window_;
  std::vector<Joins::Composed> composed_;
  std::vector<ChainResult> results_;
};

}  // namespace

std::vector<ChainResult> analyze_gangs(const workload::Workload& w, const Options& options) {
  GangAnalysis gang(w, options);     // every callback a job of its executor's gang
  gang.bound_jobs_within_periods();  // how far another chain's job reaches into a window
  gang.sum_chains();                 // each chain as the sum of its jobs' bounds
  gang.bound_pieces_as_windows();    // each piece between fusions as one window, where less
  gang.compose_chains();             // the pieces' terms, and the waits at fusions
  return gang.results();             // less the bounds whose premises fail
}

}  // namespace rtaccel::analysis
