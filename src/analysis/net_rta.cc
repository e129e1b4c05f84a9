// The net layer's per-link bound (see analysis.hpp): fixed-priority,
// non-preemptive within a chunk, FIFO among equals. Integer nanoseconds,
// saturating.
#include <algorithm>
#include <cmath>
#include <string>

#include "analysis/saturating.h"
#include "rtaccel/analysis.hpp"

namespace rtaccel::analysis {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : kUnbounded; }

uint64_t bytes_ns(const NetLink& link, uint64_t bytes) {
  if (link.bytes_per_s <= 0) return kUnbounded;
  const double ns = std::ceil(static_cast<double>(bytes) * 1e9 / link.bytes_per_s);
  return ns >= static_cast<double>(kUnbounded) ? kUnbounded : static_cast<uint64_t>(ns);
}

std::string ms_text(uint64_t ns) { return std::to_string(ns / 1000) + " us"; }

}  // namespace

uint64_t net_transfer_ns(const NetLink& link, uint64_t bytes) {
  const uint64_t chunks = std::max<uint64_t>(1, ceil_div(bytes, std::max<uint64_t>(1, link.chunk_bytes)));
  return add(bytes_ns(link, bytes), mul(chunks, link.per_chunk_ns));
}

std::vector<NetFlowResult> analyze_net_link(const NetLink& link, const std::vector<NetFlow>& flows,
                                            Horizon horizon) {
  std::vector<NetFlowResult> results;
  for (size_t i = 0; i < flows.size(); ++i) {
    const NetFlow& f = flows[i];
    NetFlowResult r;
    r.name = f.name;
    r.transmission_ns = net_transfer_ns(link, f.bytes);
    uint64_t lower = 0, equal = 0;
    for (size_t j = 0; j < flows.size(); ++j) {
      if (j == i) continue;
      if (flows[j].priority < f.priority) lower = std::max(lower, flows[j].bytes);
      if (flows[j].priority == f.priority) equal = add(equal, net_transfer_ns(link, flows[j].bytes));
    }
    if (lower) {
      const uint64_t held = std::min(lower, add(link.chunk_bytes, link.window_bytes));
      r.blocking_ns = add(bytes_ns(link, held), link.per_chunk_ns);
    }
    const uint64_t base = add(r.transmission_ns, add(r.blocking_ns, equal));
    const uint64_t deadline = f.deadline_ns ? f.deadline_ns : f.period_ns;
    const uint64_t limit = horizon == Horizon::kDeadline && deadline ? deadline
                           : f.period_ns                             ? f.period_ns
                                                                     : kUnbounded;
    uint64_t w = base;
    for (;;) {
      if (w > limit) break;
      uint64_t next = base;
      for (const NetFlow& o : flows)
        if (o.priority > f.priority)
          next = add(next, mul(ceil_div(add(w, o.jitter_ns), o.period_ns), net_transfer_ns(link, o.bytes)));
      if (next == w) {
        r.bounded = true;
        break;
      }
      w = next;
    }
    if (r.bounded) {
      r.wcrt_ns = w;
      r.interference_ns = w - add(r.transmission_ns, r.blocking_ns);
      r.schedulable = !deadline || w <= deadline;
      if (!r.schedulable) r.reason = "bound " + ms_text(w) + " exceeds the deadline " + ms_text(deadline);
    } else {
      r.reason = link.bytes_per_s <= 0 ? "the link has no rate"
                                       : "no bound within the " +
                                             std::string(horizon == Horizon::kDeadline ? "deadline" : "period");
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace rtaccel::analysis
