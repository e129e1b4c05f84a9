#include "exec/plan.h"

#include <algorithm>
#include <map>

namespace rtaccel::exec {

std::optional<Policy> parse_policy(std::string_view name) {
  if (name == "ros2") return Policy::kRos2;
  if (name == "picas") return Policy::kPicas;
  if (name == "paam") return Policy::kPaam;
  return std::nullopt;
}

std::string_view to_string(Policy policy) {
  switch (policy) {
    case Policy::kRos2: return "ros2";
    case Policy::kPicas: return "picas";
    case Policy::kPaam: return "paam";
  }
  return "?";
}

namespace {

size_t bridge_of(Plan* plan, size_t link, size_t node, bool listens) {
  for (size_t b = 0; b < plan->bridges.size(); ++b)
    if (plan->bridges[b].link == link && plan->bridges[b].node == node) return b;
  plan->bridges.push_back({link, node, listens, {}, {}});
  return plan->bridges.size() - 1;
}

// Reroutes every publisher's queues on other nodes through one outbox per
// destination node: a topic crosses a link once, however many subscribers
// it has there (as the analysis counts it).
void plan_hops(const workload::Workload& w, Plan* plan) {
  if (w.nodes.size() < 2) return;
  for (size_t p = 0; p < w.callbacks.size(); ++p) {
    auto& outputs = plan->callbacks[p].outputs;
    const size_t from = w.node_of_callback(p);
    std::vector<uint32_t> local;
    for (uint32_t q : outputs) {
      const size_t to = w.node_of_callback(plan->queues[q].consumer);
      if (to == from) {
        local.push_back(q);
        continue;
      }
      auto hop = std::find_if(plan->hops.begin(), plan->hops.end(),
                              [&](const HopPlan& h) { return h.publisher == p && h.to_node == to; });
      if (hop == plan->hops.end()) {
        HopPlan h;
        h.publisher = p;
        h.link = static_cast<size_t>(w.link_between(from, to));  // the loader checked there is one
        h.from_node = from;
        h.to_node = to;
        const bool from_listens = w.links[h.link].a == from;
        h.from_bridge = bridge_of(plan, h.link, from, from_listens);
        h.to_bridge = bridge_of(plan, h.link, to, !from_listens);
        h.outbox = static_cast<uint32_t>(plan->queues.size());
        plan->queues.push_back({p, w.executors.size() + h.from_bridge, w.callbacks[p].publishes, kQueueDepth, {}});
        h.executor_priority = w.executors[w.callbacks[p].executor].priority;
        h.bytes = std::max<uint64_t>(w.callbacks[p].message_bytes, kWireHeaderBytes);
        h.name = w.callbacks[p].publishes + " " + w.nodes[from].name + "->" + w.nodes[to].name;
        const auto index = static_cast<uint32_t>(plan->hops.size());
        plan->bridges[h.from_bridge].sends.push_back(index);
        plan->bridges[h.to_bridge].receives.push_back(index);
        local.push_back(h.outbox);
        plan->hops.push_back(std::move(h));
        hop = plan->hops.end() - 1;
      }
      hop->queues.push_back(q);
      auto& outbox_chains = plan->queues[hop->outbox].chains;
      for (uint32_t chain : plan->queues[q].chains)
        if (std::find(outbox_chains.begin(), outbox_chains.end(), chain) == outbox_chains.end())
          outbox_chains.push_back(chain);
    }
    outputs = std::move(local);
  }
  // On the wire, a hop has its publisher's priority (the most critical chain
  // through it, as the analysis has it), ranked into the net layer's 0..255.
  std::vector<int> levels;
  for (const auto& h : plan->hops) levels.push_back(w.callback_priority(h.publisher));
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  for (auto& h : plan->hops) {
    const auto rank = std::lower_bound(levels.begin(), levels.end(), w.callback_priority(h.publisher)) - levels.begin();
    h.priority = static_cast<uint8_t>(std::min<long>(rank + 1, 255));
  }
}

}  // namespace

Expected<Plan> make_plan(const workload::Workload& w) {
  if (w.chains.size() > kMaxChains)
    return Status::invalid("the workload has " + std::to_string(w.chains.size()) +
                           " chains; rtaccel run follows at most " + std::to_string(kMaxChains));
  Plan plan;
  plan.callbacks.resize(w.callbacks.size());
  plan.by_executor.resize(w.executors.size());
  std::map<std::string, size_t> publisher;
  for (size_t i = 0; i < w.callbacks.size(); ++i) {
    const auto& cb = w.callbacks[i];
    auto& p = plan.callbacks[i];
    p.callback = i;
    p.executor = cb.executor;
    p.priority = w.callback_priority(i);
    plan.by_executor[cb.executor].push_back(i);
    for (const auto& seg : cb.segments) p.segment_names.push_back(cb.name + ": " + seg.service);
    if (!cb.publishes.empty()) publisher[cb.publishes] = i;
    if (cb.trigger.timer_ns > 0) {
      p.period_ns = cb.trigger.timer_ns;
      p.timer = static_cast<int32_t>(plan.timers.size());
      plan.timers.push_back(i);
    }
  }
  // One queue per (subscriber, trigger topic); the loader made sure every
  // trigger topic has exactly one publisher.
  for (size_t i = 0; i < w.callbacks.size(); ++i) {
    for (const auto& topic : w.callbacks[i].trigger.topics) {
      const auto q = static_cast<uint32_t>(plan.queues.size());
      const uint32_t depth = w.callbacks[i].trigger.topics.size() > 1 ? kFusionDepth : kQueueDepth;
      plan.queues.push_back({i, w.callbacks[i].executor, topic, depth, {}});
      plan.callbacks[i].inputs.push_back(q);
      auto it = publisher.find(topic);
      if (it != publisher.end()) plan.callbacks[it->second].outputs.push_back(q);
    }
  }
  for (size_t c = 0; c < w.chains.size(); ++c) {
    const auto& path = w.chains[c].path;
    for (size_t k = 0; k < path.size(); ++k) {
      ChainRole role{static_cast<uint32_t>(c), -1};
      if (k > 0) {
        const auto& topics = w.callbacks[path[k]].trigger.topics;
        const auto& from = w.callbacks[path[k - 1]].publishes;
        auto it = std::find(topics.begin(), topics.end(), from);
        if (it == topics.end()) {  // the loader refuses such a chain
          return Status::invalid("chain '" + w.chains[c].name + "' is not connected by topics");
        }
        role.input = static_cast<int32_t>(it - topics.begin());
        plan.queues[plan.callbacks[path[k]].inputs[role.input]].chains.push_back(role.chain);
      }
      plan.callbacks[path[k]].roles.push_back(role);
    }
    plan.callbacks[path.back()].chain_ends.push_back(static_cast<uint32_t>(c));
  }
  plan_hops(w, &plan);
  return plan;
}

}  // namespace rtaccel::exec
