// What every analysis fills in first (analysis, internal): a chain's result
// with its name, priority, criticality, period and deadline, the bound to
// come.
#ifndef RTACCEL_ANALYSIS_RESULTS_H_
#define RTACCEL_ANALYSIS_RESULTS_H_

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

}  // namespace rtaccel::analysis

#endif  // RTACCEL_ANALYSIS_RESULTS_H_
