#include "rtaccel/workload.hpp"

#include <algorithm>
#include <cstdio>

namespace rtaccel::workload {

std::string_view to_string(WaitMode mode) {
  return mode == WaitMode::kSpin ? "spin" : "suspend";
}

std::string_view to_string(MemoryPattern pattern) {
  return pattern == MemoryPattern::kRandom ? "random" : "stream";
}

void raise_overheads(Workload* w, uint64_t epsilon_ns, uint64_t kappa_ns, uint64_t jitter_ns,
                     uint64_t link_kernel_ns_per_kb) {
  w->release_jitter_ns = std::max(w->release_jitter_ns, jitter_ns);
  if (w->server) {
    // The hand-over cost between executors defaults to the server overhead.
    if (w->communication_ns == w->server->overhead_ns) w->communication_ns = std::max(w->communication_ns, epsilon_ns);
    w->server->overhead_ns = std::max(w->server->overhead_ns, epsilon_ns);
  }
  for (auto& acc : w->accelerators) acc.preemption_cost_ns = std::max(acc.preemption_cost_ns, kappa_ns);
  for (auto& link : w->links) link.kernel_ns_per_kb = std::max(link.kernel_ns_per_kb, link_kernel_ns_per_kb);
}

int Workload::callback_priority(size_t callback) const {
  return callback < callbacks.size() ? callback_priorities()[callback] : 0;
}

std::vector<int> Workload::callback_priorities() const {
  std::vector<int> priority(callbacks.size(), 0);
  std::vector<bool> found(callbacks.size(), false);
  for (const Chain& chain : chains)
    for (size_t callback : chain.path) {
      if (callback >= callbacks.size()) continue;
      priority[callback] = found[callback] ? std::max(priority[callback], chain.priority) : chain.priority;
      found[callback] = true;
    }
  return priority;
}

std::string Diagnostic::to_string() const {
  std::string line = file;
  if (where.line > 0) line += ':' + std::to_string(where.line) + ':' + std::to_string(where.column);
  line += ": ";
  line += message;
  // One diagnostic, one line: control characters that a message quotes from
  // the input (a newline after a bad escape, say) or a file name holds are
  // written as escapes.
  std::string out;
  out.reserve(line.size());
  for (const char c : line) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
      out += hex;
    }
  }
  return out;
}

std::vector<Gang> Workload::effective_gangs() const {
  std::vector<Gang> out = gangs;
  std::vector<bool> grouped(executors.size(), false);
  for (const Gang& g : gangs)
    for (size_t e : g.executors) grouped[e] = true;
  for (size_t e = 0; e < executors.size(); ++e) {
    if (grouped[e]) continue;
    Gang g;
    g.name = executors[e].name;
    g.priority = executors[e].priority;
    g.executors = {e};
    g.where = executors[e].where;
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<size_t> Workload::gang_of_executor() const {
  std::vector<size_t> of(executors.size(), 0);
  const std::vector<Gang> all = effective_gangs();
  for (size_t g = 0; g < all.size(); ++g)
    for (size_t e : all[g].executors) of[e] = g;
  return of;
}

size_t Workload::node_of_callback(size_t callback) const {
  const size_t e = callbacks[callback].executor;
  return e < executors.size() ? executors[e].node : 0;
}

long Workload::link_between(size_t a, size_t b) const {
  for (size_t i = 0; i < links.size(); ++i)
    if ((links[i].a == a && links[i].b == b) || (links[i].a == b && links[i].b == a)) return static_cast<long>(i);
  return -1;
}

}  // namespace rtaccel::workload
