// What the rcl executor says of itself: its chains' latencies beside the
// analysis' bound, its dispatch cost, the rmw's reports of mismatched
// publishers, its timeline; and, under paam, its registrations with
// rtaccel-server. All of it is set-up or read-out: none runs on a spin's
// dispatch path.
#include <rcl/rcl.h>
#include <rmw/qos_string_conversions.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/percentile.h"
#include "core/realtime.h"
#include "ros/executor.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::ros {

std::vector<uint64_t> Samples::sorted() const {
  size_t n = static_cast<size_t>(std::min<uint64_t>(count_, ring_.size()));
  std::vector<uint64_t> v(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(n));
  std::sort(v.begin(), v.end());
  return v;
}

namespace {

void percentiles(const Samples& s, uint64_t* p50, uint64_t* p99, uint64_t* max) {
  std::vector<uint64_t> v = s.sorted();
  if (v.empty()) {
    *p50 = *p99 = 0;
    if (max) *max = 0;
    return;
  }
  *p50 = rtaccel_percentile_sorted_u64(v.data(), v.size(), 0.50);
  *p99 = rtaccel_percentile_sorted_u64(v.data(), v.size(), 0.99);
  if (max) *max = v.back();
}

void copy_name(char* out, size_t len, const std::string& s) { snprintf(out, len, "%s", s.c_str()); }

// ---- the analysis ---------------------------------------------------------------

// Why the executor's chains cannot be analysed; "" where they can.
std::string unanalysable(const rtaccel_ros_executor& ex) {
  if (ex.attr.policy == RTACCEL_ROS_ROS2)
    return "the ros2 policy is not analysed (rtaccel's analysis is of priority-driven executors)";
  if (ex.attr.policy == RTACCEL_ROS_PAAM)
    return "under paam the bound is rtaccel-server's: admission refuses a chain it cannot bound";
  for (const auto& g : ex.groups)
    if (g->core < 0) return "group " + g->name + " is not pinned to a core";
  for (const auto& h : ex.handles) {
    if (h->attr.cpu_wcet_ns == 0) return "the " + h->name + " declares no cpu_wcet_ns";
    if (h->steps.empty()) return "the " + h->name + " is in no chain (a chain says its period)";
    if (h->attr.priority != RTACCEL_ROS_UNRANKED || h->group->priority != RTACCEL_ROS_UNRANKED) {
      int32_t chains = RTACCEL_ROS_UNRANKED;
      for (const auto& step : h->steps) chains = std::max(chains, step.chain->attr.priority);
      if (h->priority != chains)
        return "the " + h->name + " runs at a priority other than its chains' (the analysis' premise)";
    }
  }
  for (const auto& c : ex.chains)
    if (c->period_ns == 0) return "chain '" + c->name + "' starts with a subscription and declares no period_ns";
  return "";
}

// Where the kernel's real-time throttling can stop a core's SCHED_FIFO
// groups, which no bound counts: why; "" where it cannot. The throttling
// is the core's, for all of its real-time threads together.
std::string throttled(const rtaccel_ros_executor& ex) {
  std::map<int, std::pair<std::vector<uint64_t>, std::vector<uint64_t>>> on_core;  // WCETs, periods
  for (const auto& h : ex.handles) {
    uint64_t fastest = UINT64_MAX;
    for (const auto& step : h->steps) fastest = std::min(fastest, step.chain->period_ns);
    auto& [wcets, periods] = on_core[h->group->core];
    wcets.push_back(h->attr.cpu_wcet_ns);
    periods.push_back(fastest);
  }
  for (const auto& [core, work] : on_core) {
    char why[512];
    if (rtaccel_rt_throttles(work.first.data(), work.second.data(), work.first.size(), why, sizeof why))
      return "on core " + std::to_string(core) + ", " + why;
  }
  return "";
}

// The executor as a workload: a group an executor (its core, its FIFO
// priority), a handle a callback, the chains as declared. Its timers are
// started by the program, at no phase the analysis may count on.
workload::Workload as_workload(const rtaccel_ros_executor& ex) {
  workload::Workload w;
  w.name = ex.name;
  w.cores = rtaccel_cores_usable();
  for (const auto& g : ex.groups) {
    workload::Executor e;
    e.name = g->name;
    e.core = g->core;
    e.priority = g->fifo_priority ? g->fifo_priority : 1;
    w.executors.push_back(e);
  }
  std::map<const Handle*, size_t> index;
  for (const auto& h : ex.handles) {
    workload::Callback cb;
    cb.name = h->name;
    cb.executor = h->group->index;
    cb.cpu_ns = h->attr.cpu_wcet_ns;
    cb.trigger.release_group = workload::Trigger::kUnaligned;
    index[h.get()] = w.callbacks.size();
    w.callbacks.push_back(cb);
  }
  for (const auto& c : ex.chains) {
    workload::Chain chain;
    chain.name = c->name;
    chain.priority = c->attr.priority;
    chain.period_ns = c->period_ns;
    chain.deadline_ns = c->attr.deadline_ns ? c->attr.deadline_ns : c->period_ns;
    for (const Handle* h : c->steps) chain.path.push_back(index[h]);
    w.callbacks[chain.path[0]].trigger.timer_ns = c->period_ns;
    w.chains.push_back(chain);
  }
  return w;
}

}  // namespace

int prepare_analysis(rtaccel_ros_executor* ex) {
  std::string why = unanalysable(*ex);
  if (!why.empty()) {
    for (auto& c : ex->chains) c->why_unbounded = why;
    return 0;
  }
  std::vector<analysis::ChainResult> results = analysis::analyze(as_workload(*ex));
  for (size_t i = 0; i < ex->chains.size() && i < results.size(); ++i) {
    Chain& c = *ex->chains[i];
    c.bounded = results[i].bounded;
    c.bound_ns = results[i].wcrt_ns;
    if (!c.bounded) c.why_unbounded = "the analysis finds no bound: " + results[i].reason;
  }
  return 0;
}

void say_incompatible(const Handle* h, bool type, int32_t policy) {
  auto* sub = static_cast<const rcl_subscription_t*>(h->entity);
  const char* topic = rcl_subscription_get_topic_name(sub);
  std::string chains;
  for (const auto& step : h->steps) chains += (chains.empty() ? " (chain '" : ", '") + step.chain->name + "'";
  if (!chains.empty()) chains += ")";
  if (type)
    fprintf(stderr, "rtaccel-ros: the %s%s: a publisher on %s has another type; it will never be received\n",
            h->name.c_str(), chains.c_str(), topic ? topic : "its topic");
  else
    fprintf(stderr, "rtaccel-ros: the %s%s: a publisher on %s offers QoS it cannot match (%s); "
                    "its messages will never be received\n",
            h->name.c_str(), chains.c_str(), topic ? topic : "its topic",
            rmw_qos_policy_kind_to_str(static_cast<rmw_qos_policy_kind_t>(policy))
                ? rmw_qos_policy_kind_to_str(static_cast<rmw_qos_policy_kind_t>(policy))
                : "a policy");
}

// ---- paam: the callbacks' registrations --------------------------------------------

namespace {

int chain_desc(rtaccel_ros_executor* ex, const Chain& c, rtaccel_chain_desc* out) {
  *out = rtaccel_chain_desc{};
  copy_name(out->name, sizeof(out->name), c.name);
  out->priority = c.attr.priority;
  out->critical = c.attr.critical;
  out->period_ns = c.period_ns;
  out->deadline_ns = c.attr.deadline_ns ? c.attr.deadline_ns : c.period_ns;
  out->release = RTACCEL_RELEASE_UNALIGNED;
  out->ncallbacks = static_cast<uint32_t>(c.steps.size());
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const Handle& h = *c.steps[i];
    rtaccel_callback_desc& cb = out->callbacks[i];
    copy_name(cb.name, sizeof(cb.name), h.name);
    copy_name(cb.executor, sizeof(cb.executor), ex->name + "/" + h.group->name);
    // an unpinned thread is analysed on core 0: the server needs a core
    cb.executor_core = std::max(0, h.group->core);
    cb.executor_priority = h.group->fifo_priority ? h.group->fifo_priority : 1;
    cb.cpu_ns = h.attr.cpu_wcet_ns;
    cb.wait = RTACCEL_WAIT_SUSPEND;
    cb.nsegments = h.attr.nsegments;
    memcpy(cb.segments, h.attr.segments, sizeof(cb.segments));
  }
  if (c.period_ns == 0)
    return -EINVAL;
  return 0;
}

// The chain a callback registers as: its most critical.
const Chain* chain_of(const Handle& h) {
  const Chain* best = nullptr;
  for (const auto& step : h.steps)
    if (!best || step.chain->attr.priority > best->attr.priority) best = step.chain;
  return best;
}

int registration_desc(rtaccel_ros_executor* ex, const Handle& h, rtaccel_registration_desc* out) {
  *out = rtaccel_registration_desc{};
  const Chain* c = chain_of(h);
  if (!c) return -EINVAL;
  if (chain_desc(ex, *c, &out->chain)) return -EINVAL;
  for (size_t i = 0; i < c->steps.size(); ++i)
    if (c->steps[i] == &h) out->callback = static_cast<uint32_t>(i);
  out->nservices = h.attr.nservices;
  memcpy(out->services, h.attr.services, sizeof(out->services));
  // Without services declared: each segment's service, with buffers of a
  // page (the built-in services' small requests).
  for (uint32_t s = 0; out->nservices == 0 && s < h.attr.nsegments; ++s) {
    bool known = false;
    for (uint32_t k = 0; k < out->nservices; ++k) known |= !strcmp(out->services[k].name, h.attr.segments[s].service);
    if (known) continue;
    copy_name(out->services[out->nservices].name, sizeof(out->services[0].name), h.attr.segments[s].service);
    out->services[out->nservices].request_max = out->services[out->nservices].response_max = 4096;
    ++out->nservices;
  }
  return 0;
}

}  // namespace

int prepare_paam(rtaccel_ros_executor* ex) {
  std::vector<const Handle*> users;
  for (const auto& h : ex->handles)
    if (h->attr.nsegments > 0) {
      if (h->steps.empty()) {
        ex->error = "the " + h->name + " declares accelerator segments but is in no chain: the server admits chains";
        return -EINVAL;
      }
      users.push_back(h.get());
    }
  if (users.empty()) return 0;
  std::vector<rtaccel_chain_desc> chains(ex->chains.size());
  for (size_t i = 0; i < ex->chains.size(); ++i)
    if (chain_desc(ex, *ex->chains[i], &chains[i])) {
      ex->error = "chain '" + ex->chains[i]->name + "' starts with a subscription and declares no period_ns: "
                  "the server admits chains by their period";
      return -EINVAL;
    }
  const char* socket = ex->socket_path.empty() ? nullptr : ex->socket_path.c_str();
  if (int err = rtaccel_client_connect(socket, &ex->server)) {
    ex->error = std::string("cannot connect to rtaccel-server: ") + strerror(-err);
    return err;
  }
  char why[256] = "";
  // Every chain, also those that call no accelerator: they share the
  // executor's threads with those that do, and admission must see them.
  if (int err = rtaccel_client_declare(ex->server, chains.data(), chains.size(), why, sizeof(why))) {
    ex->error = std::string("rtaccel-server refused the executor's chains: ") + (why[0] ? why : strerror(-err));
    return err;
  }
  std::vector<rtaccel_registration_desc> descs(users.size());
  for (size_t i = 0; i < users.size(); ++i) registration_desc(ex, *users[i], &descs[i]);
  std::vector<rtaccel_registration*> regs(users.size());
  if (int err = rtaccel_client_register_all(ex->server, descs.data(), descs.size(), regs.data(), why, sizeof(why))) {
    ex->error = std::string("rtaccel-server refused the executor's callbacks: ") + (why[0] ? why : strerror(-err));
    return err;
  }
  // register_all registers in its own order and answers each desc in place
  for (size_t i = 0; i < users.size(); ++i) const_cast<Handle*>(users[i])->accel = regs[i];
  return 0;
}

void release_paam(rtaccel_ros_executor* ex) {
  for (auto& h : ex->handles) {
    if (h->accel) rtaccel_client_unregister(h->accel);
    h->accel = nullptr;
  }
  rtaccel_client_close(ex->server);
  ex->server = nullptr;
}

}  // namespace rtaccel::ros

using rtaccel::ros::Chain;
using rtaccel::ros::Group;
using rtaccel::ros::Handle;

extern "C" {

RTACCEL_API int rtaccel_ros_chain_query(rtaccel_ros_executor* ex, size_t i, rtaccel_ros_chain_stats* out) {
  if (!ex || !out) return -EINVAL;
  if (i >= ex->chains.size()) return -ENOENT;
  Chain& c = *ex->chains[i];
  *out = rtaccel_ros_chain_stats{};
  rtaccel::ros::copy_name(out->name, sizeof(out->name), c.name);
  out->priority = c.attr.priority;
  out->deadline_ns = c.attr.deadline_ns;
  // read from /proc before the chain's lock, which the spinning thread
  // takes after every callback
  std::string throttled = ex->prepared ? rtaccel::ros::throttled(*ex) : "";
  std::lock_guard<rtaccel::ros::PiMutex> hold(c.lock);
  out->count = c.latencies.count();
  out->deadline_misses = c.deadline_misses;
  out->unattributed = c.unattributed;
  rtaccel::ros::percentiles(c.latencies, &out->p50_ns, &out->p99_ns, &out->max_ns);
  out->bound_ns = c.bound_ns;
  std::string why = ex->prepared ? c.why_unbounded : "not analysed before the executor first spins";
  // The analysis takes each group's thread to run at its SCHED_FIFO
  // priority, above whatever else shares its core: without it, the figure
  // is a bound only of the executor's own interference.
  for (const auto& g : ex->groups)
    if (why.empty() && g->realtime.load() != 1)
      why = "group " + g->name + (g->fifo_priority ? " was refused SCHED_FIFO" : " asks no SCHED_FIFO priority") +
            ": the analysis' premise (nothing else runs before it on its core) does not hold";
  // at SCHED_FIFO, what the kernel allows it (its groups' WCETs and periods
  // are known, checked by unanalysable())
  if (why.empty()) why = throttled;
  out->bounded = c.bounded && why.empty();
  rtaccel::ros::copy_name(out->why_unbounded, sizeof(out->why_unbounded), why);
  return 0;
}

RTACCEL_API int rtaccel_ros_dispatch_query(rtaccel_ros_executor* ex, rtaccel_ros_dispatch_stats* out) {
  if (!ex || !out) return -EINVAL;
  *out = rtaccel_ros_dispatch_stats{};
  // every group's samples together
  rtaccel::ros::Samples dispatch(ex->samples * ex->groups.size()), waits(dispatch), takes(dispatch);
  for (const auto& g : ex->groups) {
    for (uint64_t v : g->dispatch.sorted()) dispatch.push(v);
    for (uint64_t v : g->waits.sorted()) waits.push(v);
    for (uint64_t v : g->takes.sorted()) takes.push(v);
    out->callbacks += g->dispatch.count();
  }
  rtaccel::ros::percentiles(dispatch, &out->p50_ns, &out->p99_ns, &out->max_ns);
  rtaccel::ros::percentiles(waits, &out->wait_p50_ns, &out->wait_p99_ns, nullptr);
  rtaccel::ros::percentiles(takes, &out->take_p50_ns, &out->take_p99_ns, nullptr);
  return 0;
}

RTACCEL_API int rtaccel_ros_handle_query(const rtaccel_ros_handle* handle, rtaccel_ros_handle_stats* out) {
  if (!handle || !out) return -EINVAL;
  const auto& h = *reinterpret_cast<const Handle*>(handle);
  *out = rtaccel_ros_handle_stats{};
  rtaccel::ros::copy_name(out->name, sizeof(out->name), h.name);
  out->runs = h.runs.load();
  out->incompatible_type = h.incompatible_type.load();
  out->incompatible_qos = h.incompatible_qos.load();
  out->overruns = h.overruns.load();
  out->last_qos_policy = h.last_qos_policy.load();
  out->priority = h.group->ex->prepared ? h.priority : h.attr.priority;
  return 0;
}

RTACCEL_API int rtaccel_ros_write_trace(rtaccel_ros_executor* ex, const char* path) {
  if (!ex || !path) return -EINVAL;
  if (ex->spinning.load()) return -EBUSY;
  std::ofstream out(path);
  if (!out) return -errno ? -errno : -EIO;
  int pid = static_cast<int>(getpid());
  int count = 0;
  auto line = [&](const nlohmann::json& e) {
    out << (count++ == 0 ? "\n" : ",\n") << e.dump();
  };
  out << R"({"displayTimeUnit": "ms", "traceEvents": [)";
  line({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "rtaccel-ros " + ex->name}}}});
  for (const auto& g : ex->groups) {
    line({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", g->tid}, {"args", {{"name", g->name}}}});
    uint64_t kept = std::min<uint64_t>(g->traced, g->trace.size());
    for (uint64_t k = g->traced - kept; k < g->traced; ++k) {
      const auto& e = g->trace[k % g->trace.size()];
      nlohmann::json chains = nlohmann::json::array();
      for (const auto& step : e.handle->steps) chains.push_back(step.chain->name);
      line({{"ph", "X"}, {"cat", "callback"}, {"name", e.handle->name}, {"pid", pid}, {"tid", g->tid},
            {"ts", static_cast<double>(e.start) / 1e3}, {"dur", static_cast<double>(e.end - e.start) / 1e3},
            {"args", {{"chains", chains}}}});
    }
  }
  out << "\n]}\n";
  out.close();
  if (!out) {
    unlink(path);
    return -EIO;
  }
  return count;
}

}  // extern "C"
