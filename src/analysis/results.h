// What every analysis starts from (analysis, internal): a chain's result
// with its name, priority, criticality, period and deadline, the bound to
// come; each accelerator's request priorities; which of a chain's callbacks
// fire for it alone; and how a bound whose premise fails is withdrawn.
#ifndef RTACCEL_ANALYSIS_RESULTS_H_
#define RTACCEL_ANALYSIS_RESULTS_H_

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::analysis {

inline ChainResult result_for(const workload::Chain& chain) {
  ChainResult r;
  r.chain = chain.name;
  r.priority = chain.priority;
  r.critical = chain.critical;
  r.period_ns = chain.period_ns;
  r.deadline_ns = chain.deadline_ns;
  return r;
}

// Per accelerator, the distinct request priorities of its segments (a
// segment's is its callback's priority, CAPA): what bucket_of() down-samples
// onto the accelerator's buckets, as the server does. Each list ascending,
// which bucket_of() takes without sorting it again.
inline std::vector<std::vector<int>> request_priorities(const workload::Workload& w) {
  std::vector<std::vector<int>> out(w.accelerators.size());
  const std::vector<int> priority = w.callback_priorities();
  for (size_t i = 0; i < w.callbacks.size(); ++i)
    for (const auto& seg : w.callbacks[i].segments) out[seg.accelerator].push_back(priority[i]);
  for (auto& list : out) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return out;
}

// owned[c][k]: every firing of chain c's k-th callback belongs to an
// activation of c. True for the head; for a later callback, when its
// predecessor's firings all do and one of its trigger topics has that
// predecessor as its only publisher (a firing takes one message from each
// trigger topic).
inline std::vector<std::vector<bool>> owned_callbacks(const workload::Workload& w) {
  std::map<std::string, std::vector<size_t>> publishers;
  for (size_t i = 0; i < w.callbacks.size(); ++i)
    if (!w.callbacks[i].publishes.empty()) publishers[w.callbacks[i].publishes].push_back(i);
  std::vector<std::vector<bool>> owned(w.chains.size());
  for (size_t c = 0; c < w.chains.size(); ++c) {
    const auto& path = w.chains[c].path;
    owned[c].assign(path.size(), false);
    for (size_t k = 0; k < path.size(); ++k) {
      if (k == 0) {
        owned[c][k] = true;
        continue;
      }
      const std::string& topic = w.callbacks[path[k - 1]].publishes;
      const auto& triggers = w.callbacks[path[k]].trigger.topics;
      const bool sole = std::find(triggers.begin(), triggers.end(), topic) != triggers.end() &&
                        publishers[topic] == std::vector<size_t>{path[k - 1]};
      owned[c][k] = owned[c][k - 1] && sole;
    }
  }
  return owned;
}

inline void withdraw(ChainResult* r, std::string why) {
  r->bounded = false;
  r->schedulable = false;
  r->wcrt_ns = 0;
  r->reason = std::move(why);
}

// Withdraws, transitively, every bound that rests on a chain without one
// (depends(c): the chains whose bounds c's bound rests on), leaving the
// greatest set of chains whose premises all hold, as in holistic analysis.
template <class Depends>
void withdraw_unfounded(const workload::Workload& w, Depends depends, std::vector<ChainResult>* results) {
  std::vector<ChainResult>& r = *results;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t c = 0; c < r.size(); ++c) {
      if (!r[c].bounded) continue;
      for (size_t d : depends(c)) {
        if (d == c || r[d].bounded) continue;
        withdraw(&r[c], "relies on chain '" + w.chains[d].name + "', which has no bound");
        changed = true;
        break;
      }
    }
  }
}

}  // namespace rtaccel::analysis

#endif  // RTACCEL_ANALYSIS_RESULTS_H_
