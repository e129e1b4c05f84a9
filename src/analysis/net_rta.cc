// The net layer's per-link bound (see analysis.hpp): fixed-priority,
// non-preemptive within a chunk, FIFO among equals. Integer nanoseconds,
// saturating.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "analysis/saturating.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::analysis {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? a / b + (a % b != 0) : kUnbounded; }

uint64_t bytes_ns(const NetLink& link, uint64_t bytes) {
  if (link.bytes_per_s <= 0) return kUnbounded;
  const double ns = std::ceil(static_cast<double>(bytes) * 1e9 / link.bytes_per_s);
  return ns >= static_cast<double>(kUnbounded) ? kUnbounded : static_cast<uint64_t>(ns);
}

std::string ms_text(uint64_t ns) { return std::to_string(ns / 1000) + " us"; }

// The share of a link's rate (what its wire carries) left for payload, as
// the net layer describes the transport.
double payload_share(const rtaccel_net_transport& transport) {
  return static_cast<double>(transport.wire_payload) / static_cast<double>(transport.wire_frame);
}

bool charged_on(const NetworkTerms::KernelLoad& load, int core) {
  return std::find(load.cores.begin(), load.cores.end(), core) != load.cores.end();
}

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
      r.equal_ns = equal;
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

namespace {

// A flow before its link is analysed: one per (publisher, destination
// node), since a topic goes to a node once, and one per remote segment's
// request or response.
struct PendingFlow {
  size_t publisher, to_node;
  long link;
  NetFlow flow;
  std::vector<size_t> subscribers;
  long segment = -1;  // a remote segment's request or response: its index
  bool response = false;
};

// The flow that carries PUBLISHER's TOPIC from node FROM to node TO,
// added to FLOWS the first time: at the shortest period of the chains
// through the publisher, with the deadline of the most critical of them as
// its jitter (it publishes by then when that chain is schedulable).
PendingFlow& topic_flow(const workload::Workload& w, std::vector<PendingFlow>* flows, size_t publisher, size_t from,
                        size_t to, const std::string& topic) {
  auto f = std::find_if(flows->begin(), flows->end(),
                        [&](const PendingFlow& x) { return x.publisher == publisher && x.to_node == to; });
  if (f != flows->end()) return *f;
  PendingFlow nf{publisher, to, w.link_between(from, to), {}, {}};
  nf.flow.name = topic + " " + w.nodes[from].name + "->" + w.nodes[to].name;
  nf.flow.bytes = w.callbacks[publisher].message_bytes;
  nf.flow.priority = w.callback_priority(publisher);
  nf.flow.period_ns = kUnbounded;
  int best = std::numeric_limits<int>::min();
  for (const workload::Chain& c : w.chains) {
    if (std::find(c.path.begin(), c.path.end(), publisher) == c.path.end()) continue;
    nf.flow.period_ns = std::min(nf.flow.period_ns, c.period_ns);
    if (c.priority > best) {
      best = c.priority;
      nf.flow.jitter_ns = c.deadline_ns;
    }
  }
  flows->push_back(std::move(nf));
  return flows->back();
}

// Every topic that a callback reads or is triggered by from another node:
// a flow to its node, at the priority of the most critical chain carrying
// the hop (else the publisher's).
void add_topic_flows(const workload::Workload& w, std::vector<PendingFlow>* flows) {
  std::map<std::string, size_t> publisher_of;
  for (size_t i = 0; i < w.callbacks.size(); ++i)
    if (!w.callbacks[i].publishes.empty()) publisher_of[w.callbacks[i].publishes] = i;
  for (size_t s = 0; s < w.callbacks.size(); ++s) {
    const workload::Callback& cb = w.callbacks[s];
    std::vector<std::string> inputs = cb.trigger.topics;
    inputs.insert(inputs.end(), cb.reads.begin(), cb.reads.end());
    for (const std::string& topic : inputs) {
      auto it = publisher_of.find(topic);
      if (it == publisher_of.end()) continue;
      const size_t p = it->second, from = w.node_of_callback(p), to = w.node_of_callback(s);
      if (from == to) continue;
      PendingFlow& f = topic_flow(w, flows, p, from, to, topic);
      f.subscribers.push_back(s);
      // the most critical chain carrying this hop sets the flow's priority
      for (const workload::Chain& c : w.chains)
        for (size_t k = 1; k < c.path.size(); ++k)
          if (c.path[k - 1] == p && c.path[k] == s) f.flow.priority = std::max(f.flow.priority, c.priority);
    }
  }
}

// Remote accelerator segments: a request to the accelerator's node and a
// response back, at the callback's period and priority.
void add_segment_flows(const workload::Workload& w, std::vector<PendingFlow>* flows) {
  for (size_t c = 0; c < w.callbacks.size(); ++c) {
    const workload::Callback& cb = w.callbacks[c];
    const size_t here = w.node_of_callback(c);
    uint64_t period = kUnbounded, jitter = 0;
    int best = std::numeric_limits<int>::min();
    for (const workload::Chain& ch : w.chains) {
      if (std::find(ch.path.begin(), ch.path.end(), c) == ch.path.end()) continue;
      period = std::min(period, ch.period_ns);
      if (ch.priority > best) {
        best = ch.priority;
        jitter = ch.deadline_ns;
      }
    }
    for (size_t s = 0; s < cb.segments.size(); ++s) {
      const size_t there = w.accelerators[cb.segments[s].accelerator].node;
      if (there == here) continue;
      for (int leg = 0; leg < 2; ++leg) {
        PendingFlow f{c, leg == 0 ? there : here, w.link_between(here, there), {}, {}, static_cast<long>(s), leg == 1};
        f.flow.name = cb.name + (leg == 0 ? " request " : " response ") +
                      w.nodes[leg == 0 ? here : there].name + "->" + w.nodes[f.to_node].name;
        f.flow.bytes = leg == 0 ? cb.segments[s].request_bytes : cb.segments[s].response_bytes;
        f.flow.priority = w.callback_priority(c);
        f.flow.period_ns = period;
        f.flow.jitter_ns = jitter;
        flows->push_back(std::move(f));
      }
    }
  }
}

// What one direction of link WL offers the payload, as the net layer sends
// it: the wire's rate less the framing, and below the flow-control layer
// its window plus what the transport holds beyond it.
NetLink payload_link(const workload::Link& wl) {
  NetLink link;
  link.bytes_per_s = static_cast<double>(wl.rate_bytes_per_s) * payload_share(*wl.transport);
  link.chunk_bytes = wl.chunk_bytes;
  link.window_bytes = add(wl.window_bytes ? wl.window_bytes
                                          : rtaccel_net_default_window(wl.transport, static_cast<uint32_t>(wl.chunk_bytes)),
                          wl.transport->beyond_window);
  link.per_chunk_ns = wl.per_chunk_ns;
  return link;
}

// The executor cores of link WL's nodes, each once: where the kernel works
// for its transfers.
std::vector<int> link_cores(const workload::Workload& w, const workload::Link& wl) {
  std::vector<int> cores;
  for (const workload::Executor& ex : w.executors)
    if ((ex.node == wl.a || ex.node == wl.b) && std::find(cores.begin(), cores.end(), ex.core) == cores.end())
      cores.push_back(ex.core);
  return cores;
}

}  // namespace

NetworkTerms::NetworkTerms(const workload::Workload& w) {
  if (w.nodes.empty()) return;
  std::vector<PendingFlow> flows;
  add_topic_flows(w, &flows);
  add_segment_flows(w, &flows);
  // Each direction of each link on its own: a link is full duplex.
  for (size_t l = 0; l < w.links.size(); ++l) {
    const workload::Link& wl = w.links[l];
    for (size_t to : {wl.a, wl.b}) {
      std::vector<size_t> mine;
      for (size_t i = 0; i < flows.size(); ++i)
        if (flows[i].link == static_cast<long>(l) && flows[i].to_node == to) mine.push_back(i);
      if (mine.empty()) continue;
      std::vector<NetFlow> set;
      for (size_t i : mine) set.push_back(flows[i].flow);
      const std::vector<NetFlowResult> results = analyze_net_link(payload_link(wl), set, Horizon::kPeriod);
      const std::vector<int> cores = link_cores(w, wl);
      for (size_t k = 0; k < mine.size(); ++k) {
        const PendingFlow& f = flows[mine[k]];
        for (size_t s : f.subscribers) hop_leg_.push_back({{f.publisher, s}, legs_.size()});
        if (f.segment >= 0)
          (f.response ? response_leg_ : request_leg_)
              .push_back({{f.publisher, static_cast<size_t>(f.segment)}, legs_.size()});
        legs_.push_back({{l, to}, f.flow, results[k]});
        if (wl.kernel_ns_per_kb)
          kernel_.push_back({cores, mul(wl.kernel_ns_per_kb, (f.flow.bytes + 1023) >> 10), f.flow.period_ns,
                             f.flow.jitter_ns});
        const uint64_t ns = results[k].bounded ? results[k].wcrt_ns : kUnbounded;
        for (size_t s : f.subscribers) hops_.push_back({{f.publisher, s}, ns});
        if (f.segment >= 0) {  // request and response add up
          auto it = std::find_if(segments_.begin(), segments_.end(), [&](const auto& e) {
            return e.first == std::make_pair(f.publisher, static_cast<size_t>(f.segment));
          });
          if (it == segments_.end())
            segments_.push_back({{f.publisher, static_cast<size_t>(f.segment)}, ns});
          else
            it->second = add(it->second, ns);
        }
        flows_.push_back({f.flow.name + " over " + wl.name, results[k]});
      }
    }
  }
}

// In every step of the PAAM recurrences: no copy of the loads.
uint64_t NetworkTerms::kernel_ns(int core, uint64_t window_ns) const {
  uint64_t total = 0;
  for (const KernelLoad& k : kernel_)
    if (charged_on(k, core))
      total = add(total, mul(ceil_div(add(window_ns, k.jitter_ns), k.period_ns), k.ns_per_message));
  return total;
}

std::vector<NetworkTerms::KernelLoad> NetworkTerms::kernel_loads(int core) const {
  std::vector<KernelLoad> on_core;
  for (const KernelLoad& k : kernel_)
    if (charged_on(k, core)) on_core.push_back(k);
  return on_core;
}

uint64_t NetworkTerms::segment_ns(size_t callback, size_t segment) const {
  for (const auto& [key, ns] : segments_)
    if (key.first == callback && key.second == segment) return ns;
  return 0;
}

uint64_t NetworkTerms::hop_ns(size_t publisher, size_t subscriber) const {
  for (const auto& [key, ns] : hops_)
    if (key.first == publisher && key.second == subscriber) return ns;
  return 0;
}

NetworkTerms::ChainLegs NetworkTerms::chain_legs(const std::vector<size_t>& path, uint64_t window_ns,
                                                 const std::vector<bool>& waits) const {
  auto leg_of = [](const std::vector<std::pair<std::pair<size_t, size_t>, size_t>>& index, size_t a,
                   size_t b) -> const size_t* {
    for (const auto& [key, leg] : index)
      if (key.first == a && key.second == b) return &leg;
    return nullptr;
  };
  // The path's legs in order, each with its piece between fusions (a wait
  // comes after the hop into the fusion, before its requests).
  struct Step {
    size_t leg;
    bool hop;
    size_t a, b;  // (publisher, subscriber) or (callback, segment)
    size_t piece;
  };
  std::vector<Step> steps;
  size_t piece = 0;
  for (size_t i = 0; i < path.size(); ++i) {
    if (i > 0)
      if (const size_t* leg = leg_of(hop_leg_, path[i - 1], path[i]))
        steps.push_back({*leg, true, path[i - 1], path[i], piece});
    if (i < waits.size() && waits[i]) ++piece;
    // Its remote segments in order, each request before its response.
    std::vector<std::pair<size_t, size_t>> remote;  // (segment, request leg)
    for (const auto& [key, leg] : request_leg_)
      if (key.first == path[i]) remote.emplace_back(key.second, leg);
    std::sort(remote.begin(), remote.end());
    for (const auto& [s, leg] : remote) {
      steps.push_back({leg, false, path[i], s, piece});
      if (const size_t* back = leg_of(response_leg_, path[i], s))
        steps.push_back({*back, false, path[i], s, piece});
    }
  }
  // Per piece and direction, the lowest priority among its legs there: a
  // flow above it may delay one of them.
  using Key = std::pair<size_t, std::pair<size_t, size_t>>;  // (piece, direction)
  std::map<Key, int> lowest;
  for (const Step& st : steps) {
    const Leg& leg = legs_[st.leg];
    auto [it, fresh] = lowest.emplace(Key{st.piece, leg.direction}, leg.flow.priority);
    if (!fresh) it->second = std::min(it->second, leg.flow.priority);
  }
  // What those higher flows send within the window.
  std::map<Key, uint64_t> left;
  for (const auto& [key, priority] : lowest) {
    uint64_t sent = 0;
    for (const Leg& other : legs_) {
      if (other.direction != key.second || other.flow.priority <= priority) continue;
      const uint64_t span = add(window_ns, add(other.result.bounded ? other.result.wcrt_ns : kUnbounded,
                                               other.flow.jitter_ns));
      sent = add(sent, mul(ceil_div(span, other.flow.period_ns), other.result.transmission_ns));
    }
    left[key] = sent;
  }
  ChainLegs out;
  for (const Step& st : steps) {
    const Leg& leg = legs_[st.leg];
    uint64_t ns = kUnbounded;
    if (leg.result.bounded) {
      const uint64_t own = add(leg.result.transmission_ns, add(leg.result.blocking_ns, leg.result.equal_ns));
      uint64_t& rest = left[Key{st.piece, leg.direction}];
      const uint64_t higher = std::min(leg.result.wcrt_ns - own, rest);
      rest -= higher;
      ns = add(own, higher);
    }
    auto& into = st.hop ? out.hops_ : out.segments_;
    auto it = std::find_if(into.begin(), into.end(),
                           [&](const auto& e) { return e.first == std::make_pair(st.a, st.b); });
    if (it == into.end())
      into.push_back({{st.a, st.b}, ns});
    else
      it->second = add(it->second, ns);  // a segment's request and response
  }
  return out;
}

uint64_t NetworkTerms::ChainLegs::hop_ns(size_t publisher, size_t subscriber) const {
  for (const auto& [key, ns] : hops_)
    if (key.first == publisher && key.second == subscriber) return ns;
  return 0;
}

uint64_t NetworkTerms::ChainLegs::segment_ns(size_t callback, size_t segment) const {
  for (const auto& [key, ns] : segments_)
    if (key.first == callback && key.second == segment) return ns;
  return 0;
}

}  // namespace rtaccel::analysis
