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
  return plan;
}

}  // namespace rtaccel::exec
