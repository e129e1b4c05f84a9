#include "rtaccel/chainset.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace rtaccel::analysis {

using workload::Accelerator;
using workload::Callback;
using workload::Chain;
using workload::Executor;
using workload::Segment;
using workload::Workload;

std::vector<double> uunifast(int n, double total, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(std::max(n, 0)));
  double remaining = total;
  for (int i = 1; i < n; ++i) {
    double next = remaining * std::pow(unit(rng), 1.0 / (n - i));
    out.push_back(remaining - next);
    remaining = next;
  }
  if (n > 0) out.push_back(remaining);
  return out;
}

Workload generate_chainset(const ChainsetParams& p, std::mt19937_64& rng) {
  Workload w;
  w.name = "chainset";
  w.cores = p.cores + 1;
  Accelerator acc;
  acc.name = "acc0";
  acc.core = p.cores;
  acc.priority_levels = p.priority_levels;
  acc.preemption_cost_ns = p.preemption_cost_ns;
  w.accelerators.push_back(acc);
  w.server = workload::Server{p.cores, p.overhead_ns, {}};
  w.communication_ns = p.overhead_ns;
  const int cores = std::max(p.cores, 1);
  if (!p.executor_per_chain) {
    for (int i = 0; i < cores; ++i) w.executors.push_back(Executor{"ex" + std::to_string(i), i, 50, 1, {}});
  }

  const std::vector<double> utils = uunifast(p.chains, p.utilization, rng);
  std::uniform_real_distribution<double> log_period(std::log(static_cast<double>(p.min_period_ns)),
                                                    std::log(static_cast<double>(p.max_period_ns)));
  std::vector<uint64_t> periods(utils.size());
  for (auto& t : periods) t = static_cast<uint64_t>(std::exp(log_period(rng)));

  // Rate-monotonic priorities: shorter period, higher priority.
  std::vector<size_t> order(utils.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return periods[a] < periods[b]; });

  const double cpu_share = 1.0 / (1.0 + p.accel_to_cpu);
  const int k = std::max(p.callbacks_per_chain, 1);
  for (size_t rank = 0; rank < order.size(); ++rank) {
    const size_t c = order[rank];
    const double budget = utils[c] * static_cast<double>(periods[c]);
    const auto per_callback = [&](double share) {
      return std::max<uint64_t>(1, static_cast<uint64_t>(budget * share / k));
    };
    if (p.executor_per_chain) {
      // Distinct SCHED_FIFO priorities in chain order (98 down, floor at 1).
      const int prio = std::max(1, 98 - static_cast<int>(rank));
      w.executors.push_back(Executor{"ex" + std::to_string(rank + 1), static_cast<int>(rank % cores), prio, 1, {}});
    }
    Chain chain;
    chain.name = "chain" + std::to_string(rank + 1);
    chain.priority = static_cast<int>(order.size() - rank);
    chain.period_ns = chain.deadline_ns = periods[c];
    for (int i = 0; i < k; ++i) {
      Callback cb;
      cb.name = chain.name + "_cb" + std::to_string(i + 1);
      cb.executor = p.executor_per_chain ? rank : rank % static_cast<size_t>(cores);
      cb.cpu_ns = per_callback(cpu_share);
      cb.segments.push_back(Segment{0, "busy", per_callback(1.0 - cpu_share), {}});
      cb.wait = p.wait;
      if (i == 0) {
        cb.trigger.timer_ns = periods[c];
      } else {
        cb.trigger.topics.push_back(w.callbacks.back().publishes);
      }
      cb.publishes = cb.name;
      chain.path.push_back(w.callbacks.size());
      w.callbacks.push_back(std::move(cb));
    }
    w.chains.push_back(std::move(chain));
  }
  return w;
}

Acceptance acceptance(const ChainsetParams& params, int sets, uint64_t seed, const Options& options) {
  std::mt19937_64 rng(seed);
  Acceptance out;
  for (int i = 0; i < sets; ++i) {
    Workload w = generate_chainset(params, rng);
    const auto results = analyze(w, options);
    ++out.sets;
    if (all_critical_schedulable(results)) ++out.schedulable;  // generated chains are all critical
  }
  return out;
}

}  // namespace rtaccel::analysis
