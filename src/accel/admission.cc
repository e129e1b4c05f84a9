#include "accel/admission.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "accel/protocol.h"
#include "rtaccel/analysis.hpp"

namespace rtaccel::accel {
namespace {

std::string ms(uint64_t ns) {
  char text[32];
  snprintf(text, sizeof(text), "%.3f ms", double(ns) / 1e6);
  return text;
}

}  // namespace

bool same_callback(const rtaccel_callback_desc& a, const rtaccel_callback_desc& b) {
  if (strcmp(a.name, b.name) || strcmp(a.executor, b.executor) || a.executor_core != b.executor_core ||
      a.executor_priority != b.executor_priority || a.cpu_ns != b.cpu_ns || a.wait != b.wait ||
      a.nsegments != b.nsegments)
    return false;
  for (uint32_t j = 0; j < a.nsegments; j++)
    if (strcmp(a.segments[j].service, b.segments[j].service) ||
        strcmp(a.segments[j].accelerator, b.segments[j].accelerator) ||
        a.segments[j].wcet_ns != b.segments[j].wcet_ns)
      return false;
  if (strcmp(a.publishes, b.publishes) || a.ntriggers != b.ntriggers) return false;
  for (uint32_t t = 0; t < a.ntriggers; t++)
    if (strcmp(a.triggers[t], b.triggers[t])) return false;
  return true;
}

bool same_chain(const rtaccel_chain_desc& a, const rtaccel_chain_desc& b) {
  if (strcmp(a.name, b.name) || a.priority != b.priority || a.critical != b.critical ||
      a.period_ns != b.period_ns || a.deadline_ns != b.deadline_ns || a.ncallbacks != b.ncallbacks ||
      a.release != b.release)
    return false;
  for (uint32_t i = 0; i < a.ncallbacks; i++)
    if (!same_callback(a.callbacks[i], b.callbacks[i])) return false;
  return true;
}

Admission::Admission(AdmissionOptions options) : options_(std::move(options)) {}

double Admission::device_utilisation(uint32_t device) const {
  // Each callback at its shortest period, in one pass over the chains.
  std::map<std::string, uint64_t> period;
  for (const auto& [name, cb] : callbacks_)
    if (cb.device == device) period[name] = 0;
  for (const auto& [chain_name, chain] : chains_)
    for (uint32_t i = 0; i < chain.desc.ncallbacks; i++)
      if (auto it = period.find(chain.desc.callbacks[i].name);
          it != period.end() && (!it->second || chain.desc.period_ns < it->second))
        it->second = chain.desc.period_ns;
  double sum = 0;
  for (const auto& [name, shortest] : period) sum += accelerator_utilisation(callbacks_.at(name).desc, shortest);
  return sum;
}

Status Admission::admit(const rtaccel_registration_desc& desc, Admitted* out) {
  // Another reference to an admitted chain changes nothing to analyse.
  if (auto it = chains_.find(desc.chain.name); it != chains_.end()) {
    if (Status st = refer(&it->second, desc.chain); !st) return st;
    *out = lookup(desc.chain.callbacks[desc.callback].name);
    return Status();
  }
  // Registered alone, a chain starts when its client starts it: no other
  // chain is released with it, whatever it says.
  Staged s = stage();
  if (Status st = add(desc.chain, workload::Trigger::kUnaligned, &s); !st) return st;
  if (Status st = commit(std::move(s)); !st) return st;
  *out = lookup(desc.chain.callbacks[desc.callback].name);
  return Status();
}

Status Admission::declare(const std::vector<rtaccel_chain_desc>& chains) {
  // A group of its own per declaration: two runs' timers on one server
  // start at their own runs' starts. 2^32 declarations before one repeats.
  uint32_t group = last_release_group_ + 1;
  if (group == workload::Trigger::kUnaligned) group++;
  Staged s = stage();
  for (const rtaccel_chain_desc& chain : chains) {
    const bool together = chain.release == RTACCEL_RELEASE_TOGETHER;
    if (Status st = add(chain, together ? group : workload::Trigger::kUnaligned, &s); !st) return st;
  }
  if (Status st = commit(std::move(s)); !st) return st;
  last_release_group_ = group;
  return Status();
}

Status Admission::refer(ChainEntry* entry, const rtaccel_chain_desc& chain) {
  if (!same_chain(entry->desc, chain))
    return Status::invalid(std::string("chain '") + chain.name + "' was admitted with a different description");
  entry->references++;
  return Status();
}

Admission::Staged Admission::stage() const {
  Staged s{chains_, callbacks_, std::vector<double>(options_.device_levels.size()), {}};
  for (uint32_t d = 0; d < s.load.size(); d++) s.load[d] = device_utilisation(d);
  return s;
}

Status Admission::add(const rtaccel_chain_desc& chain, uint32_t release_group, Staged* s) const {
  const std::string chain_name = chain.name;
  if (auto it = s->chains.find(chain_name); it != s->chains.end()) return refer(&it->second, chain);

  // Check the new chain against what is admitted, then place its new
  // callbacks on devices: largest utilisation first, each on the device with
  // the lowest utilisation so far (worst fit decreasing).
  std::vector<const rtaccel_callback_desc*> fresh;
  for (uint32_t i = 0; i < chain.ncallbacks; i++) {
    const rtaccel_callback_desc& cb = chain.callbacks[i];
    if (auto it = s->callbacks.find(cb.name); it != s->callbacks.end()) {
      if (!same_callback(it->second.desc, cb)) {
        return Status::invalid(std::string("callback '") + cb.name + "' of chain '" + chain_name +
               "' differs from the one admitted with another chain");
      }
      continue;
    }
    for (const auto& [name, other] : s->callbacks)
      if (strcmp(other.desc.executor, cb.executor) == 0 &&
          (other.desc.executor_core != cb.executor_core ||
           other.desc.executor_priority != cb.executor_priority)) {
        return Status::invalid(std::string("executor '") + cb.executor + "' was admitted on core " +
               std::to_string(other.desc.executor_core) + " at priority " +
               std::to_string(other.desc.executor_priority) + ", not core " +
               std::to_string(cb.executor_core) + " at " + std::to_string(cb.executor_priority));
      }
    fresh.push_back(&cb);
  }
  // An executor runs the higher chain's callbacks first: two chains of one
  // priority there have no order, and the analysis finds no bound for
  // either (each needs the other's first). Where neither is critical no
  // bound is asked for.
  for (const auto& [name, other] : s->chains) {
    if (other.desc.priority != chain.priority || (!chain.critical && !other.desc.critical)) continue;
    for (uint32_t i = 0; i < chain.ncallbacks; i++)
      for (uint32_t k = 0; k < other.desc.ncallbacks; k++)
        if (strcmp(chain.callbacks[i].executor, other.desc.callbacks[k].executor) == 0)
          return Status::invalid("chain '" + chain_name + "': priority " + std::to_string(chain.priority) +
                                 " is chain '" + name + "''s too, and both run on executor '" +
                                 chain.callbacks[i].executor +
                                 "', which runs the higher chain's callbacks first: give the chains priorities "
                                 "of their own");
  }
  std::stable_sort(fresh.begin(), fresh.end(), [&](auto* a, auto* b) {
    return accelerator_utilisation(*a, chain.period_ns) > accelerator_utilisation(*b, chain.period_ns);
  });
  for (const rtaccel_callback_desc* cb : fresh) {
    const uint32_t device = uint32_t(std::min_element(s->load.begin(), s->load.end()) - s->load.begin());
    s->load[device] += accelerator_utilisation(*cb, chain.period_ns);
    s->callbacks[cb->name] = CallbackEntry{*cb, device};
  }
  s->chains[chain_name] = ChainEntry{chain, 1, release_group};
  s->added.push_back(chain_name);
  return Status();
}

Status Admission::commit(Staged s) {
  const bool grows = !s.added.empty();
  const auto results = options_.check_deadlines && grows ? analysis::analyze(build(s.chains, s.callbacks))
                                                         : std::vector<analysis::ChainResult>{};
  for (const auto& r : results) {
    if (!r.critical || r.schedulable) continue;
    std::string reason = "chain '" + r.chain + "': ";
    if (r.bounded)
      reason += "bound " + ms(r.wcrt_ns) + " exceeds deadline " + ms(r.deadline_ns);
    else
      reason += r.reason.empty() ? "no bound within its period" : r.reason;
    if (std::find(s.added.begin(), s.added.end(), r.chain) == s.added.end())
      reason = (s.added.size() == 1 ? "admitting chain '" + s.added.front() + "'"
                                    : "admitting " + std::to_string(s.added.size()) + " chains") +
               " would break " + reason;
    return Status::error(reason, EDEADLK);
  }
  chains_ = std::move(s.chains);
  callbacks_ = std::move(s.callbacks);
  if (grows) generation_++;
  return Status();
}

void Admission::release(const std::string& chain) {
  auto it = chains_.find(chain);
  if (it == chains_.end() || --it->second.references > 0) return;
  const rtaccel_chain_desc gone = it->second.desc;
  chains_.erase(it);
  generation_++;
  // Only the chain's own callbacks may have lost their last chain.
  for (uint32_t k = 0; k < gone.ncallbacks; k++) {
    bool used = false;
    for (const auto& [name, entry] : chains_)
      for (uint32_t i = 0; i < entry.desc.ncallbacks && !used; i++)
        used = strcmp(gone.callbacks[k].name, entry.desc.callbacks[i].name) == 0;
    if (!used) callbacks_.erase(gone.callbacks[k].name);
  }
}

Admitted Admission::lookup(const std::string& callback) const {
  Admitted out;
  auto it = callbacks_.find(callback);
  if (it == callbacks_.end()) return out;
  out.device = it->second.device;
  bool found = false;
  for (const auto& [name, chain] : chains_)
    for (uint32_t i = 0; i < chain.desc.ncallbacks; i++)
      if (callback == chain.desc.callbacks[i].name) {
        out.priority = found ? std::max(out.priority, chain.desc.priority) : chain.desc.priority;
        found = true;
      }
  return out;
}

uint32_t Admission::bucket(const std::string& callback) const {
  const auto placed = placements(lookup(callback).device);
  const auto it = placed.find(callback);
  return it == placed.end() ? 0 : it->second.bucket;
}

std::map<std::string, Placement> Admission::placements(uint32_t device) const {
  std::map<std::string, Placement> placed;
  for (const auto& [name, cb] : callbacks_)
    if (cb.device == device) placed[name].priority = INT_MIN;
  // A callback's request priority: the most critical of its chains'.
  for (const auto& [name, chain] : chains_)
    for (uint32_t i = 0; i < chain.desc.ncallbacks; i++)
      if (auto it = placed.find(chain.desc.callbacks[i].name); it != placed.end())
        it->second.priority = std::max(it->second.priority, chain.desc.priority);
  // The analysis' down-sampling, over the request priorities on the device.
  std::vector<int> priorities;
  for (auto& [name, p] : placed) {
    if (p.priority == INT_MIN) p.priority = 0;  // in no chain (lookup()'s answer)
    if (callbacks_.at(name).desc.nsegments > 0) priorities.push_back(p.priority);
  }
  std::sort(priorities.begin(), priorities.end());
  priorities.erase(std::unique(priorities.begin(), priorities.end()), priorities.end());
  for (auto& [name, p] : placed) {
    const int b = analysis::bucket_of(p.priority, priorities, int(options_.device_levels[device]));
    p.bucket = b < 0 ? 0 : uint32_t(b);
  }
  return placed;
}

workload::Workload Admission::workload() const { return build(chains_, callbacks_); }

workload::Workload Admission::build(const std::map<std::string, ChainEntry>& chains,
                                    const std::map<std::string, CallbackEntry>& callbacks) const {
  workload::Workload w;
  w.name = "admitted";
  for (size_t d = 0; d < options_.device_levels.size(); d++) {
    workload::Accelerator acc;
    acc.name = "device" + std::to_string(d);
    acc.backend = options_.backend;
    acc.priority_levels = int(options_.device_levels[d]);
    acc.preemption_cost_ns = options_.kappa_ns;
    if (d < options_.device_cores.size()) acc.core = options_.device_cores[d];
    w.accelerators.push_back(acc);
  }
  if (options_.regulator_cost_ns) {
    w.isolation.declared = true;
    w.isolation.cores = options_.regulated_cores;
    w.isolation.period_ns = options_.regulator_period_ns;
    w.isolation.cost_ns = options_.regulator_cost_ns;
  }
  w.server = workload::Server{options_.server_core, options_.epsilon_ns, {}};
  w.communication_ns = options_.epsilon_ns;
  w.release_jitter_ns = options_.jitter_ns;
  std::map<std::string, size_t> executor_index, callback_index;
  for (const auto& [name, cb] : callbacks) {
    auto [ex, fresh] = executor_index.try_emplace(cb.desc.executor, w.executors.size());
    if (fresh) {
      workload::Executor e;
      e.name = cb.desc.executor;
      e.core = cb.desc.executor_core;
      e.priority = cb.desc.executor_priority;
      w.executors.push_back(e);
      w.cores = std::max(w.cores, e.core + 1);
    }
    workload::Callback c;
    c.name = name;
    c.executor = ex->second;
    c.cpu_ns = cb.desc.cpu_ns;
    c.wait = cb.desc.wait == RTACCEL_WAIT_SPIN ? workload::WaitMode::kSpin : workload::WaitMode::kSuspend;
    c.publishes = cb.desc.publishes;
    for (uint32_t t = 0; t < cb.desc.ntriggers; t++) c.trigger.topics.emplace_back(cb.desc.triggers[t]);
    for (uint32_t j = 0; j < cb.desc.nsegments; j++)
      c.segments.push_back({cb.device, cb.desc.segments[j].service, cb.desc.segments[j].wcet_ns, {}});
    callback_index[name] = w.callbacks.size();
    w.callbacks.push_back(std::move(c));
  }
  for (const auto& [name, entry] : chains) {
    workload::Chain c;
    c.name = name;
    c.priority = entry.desc.priority;
    c.period_ns = entry.desc.period_ns;
    c.deadline_ns = entry.desc.deadline_ns;
    c.critical = entry.desc.critical != 0;
    for (uint32_t i = 0; i < entry.desc.ncallbacks; i++)
      c.path.push_back(callback_index.at(entry.desc.callbacks[i].name));
    // A chain starts at its period, whatever else triggers its first
    // callback in the system (the client's), in phase with others only
    // where its declaration said so.
    if (!c.path.empty())
      w.callbacks[c.path.front()].trigger = workload::Trigger{c.period_ns, {}, entry.release_group};
    w.chains.push_back(std::move(c));
  }
  return w;
}

}  // namespace rtaccel::accel
