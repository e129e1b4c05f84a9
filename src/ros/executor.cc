// rtaccel's executor for rcl (rtaccel/ros.h): handles added, then spun.
//
// A spin is a loop of one step per callback: a wait when the policy asks
// for one (picas: before every callback, not sleeping while anything is
// ready; ros2: only once what the last wait found has run), the choice of
// the callback, the rmw's take, the callback, and its measurement. Nothing
// on that path allocates: the wait sets, the rings of samples and of
// executions and the timeline are sized in prepare(), before the first
// wait. The rcl calls on it are the rmw's (wait, take, send) and the
// clock's (vDSO).
#include "ros/executor.h"

#include <rcl/error_handling.h>
#include <rcl/rcl.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/realtime.h"
#include "core/thread.h"

using rtaccel::ros::Chain;
using rtaccel::ros::Event;
using rtaccel::ros::Execution;
using rtaccel::ros::Group;
using rtaccel::ros::Handle;
using rtaccel::ros::Kind;
using rtaccel::ros::Samples;

namespace {

// Executions of a step kept to find a message's instance by: a message is
// taken within a few instances of its publication.
constexpr size_t kKeptExecutions = 16;
// Callbacks kept for the timeline, per group.
constexpr size_t kTraceEvents = 1 << 16;
// The longest a wait sleeps before it looks at the context again: rcl does
// not wake a wait when its context is shut down.
constexpr int64_t kContextPollNs = 100'000'000;

using rtaccel::ros::realtime_ns;
using rtaccel::ros::steady_ns;

int fail(rtaccel_ros_executor* ex, int err, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
int fail(rtaccel_ros_executor* ex, int err, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  ex->error = buf;
  return err;
}

// rcl's error string, taken and reset, for a message of the executor's.
std::string rcl_says() {
  std::string s = rcl_get_error_string().str;
  rcl_reset_error();
  return s;
}

bool fifo_priority_ok(int32_t p) { return p == 0 || (p >= 1 && p <= 99); }

int check_thread_attr(rtaccel_ros_executor* ex, const char* what, int32_t core, int32_t fifo) {
  if (core < -1 || (core >= 0 && rtaccel_core_allowed(core) != 0))
    return fail(ex, -EINVAL, "%s: core %d is not one this process may run on", what, core);
  if (!fifo_priority_ok(fifo))
    return fail(ex, -EINVAL, "%s: fifo_priority %d: SCHED_FIFO priorities are 1..99 (0: none)", what, fifo);
  return 0;
}

Group* add_group(rtaccel_ros_executor* ex, const char* name, int32_t core, int32_t fifo, int32_t priority) {
  auto g = std::make_unique<Group>();
  g->ex = ex;
  g->index = ex->groups.size();
  g->name = name ? name : "group" + std::to_string(g->index);
  g->core = core;
  g->fifo_priority = fifo;
  g->priority = priority;
  ex->groups.push_back(std::move(g));
  return ex->groups.back().get();
}

std::string default_name(Kind kind, const void* entity) {
  switch (kind) {
    case Kind::kTimer: {
      int64_t period = 0;
      if (rcl_timer_get_period(static_cast<const rcl_timer_t*>(entity), &period) != RCL_RET_OK) rcl_reset_error();
      char buf[64];
      snprintf(buf, sizeof(buf), "timer of %g ms", static_cast<double>(period) / 1e6);
      return buf;
    }
    case Kind::kSubscription:
      return std::string("subscription to ") +
             rcl_subscription_get_topic_name(static_cast<const rcl_subscription_t*>(entity));
    case Kind::kService:
      return std::string("service ") + rcl_service_get_service_name(static_cast<const rcl_service_t*>(entity));
    case Kind::kClient:
      return std::string("client of ") + rcl_client_get_service_name(static_cast<const rcl_client_t*>(entity));
  }
  return "handle";
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kTimer: return "timer";
    case Kind::kSubscription: return "subscription";
    case Kind::kService: return "service";
    case Kind::kClient: return "client";
  }
  return "handle";
}

// Whether an rcl entity is one that can be waited on: initialised, not
// finalised, its node's context not shut down.
bool entity_valid(Kind kind, void* entity) {
  switch (kind) {
    case Kind::kTimer: {
      int64_t period;
      bool ok = rcl_timer_get_period(static_cast<rcl_timer_t*>(entity), &period) == RCL_RET_OK;
      if (!ok) rcl_reset_error();
      return ok;
    }
    case Kind::kSubscription: return rcl_subscription_is_valid(static_cast<rcl_subscription_t*>(entity));
    case Kind::kService: return rcl_service_is_valid(static_cast<rcl_service_t*>(entity));
    case Kind::kClient: return rcl_client_is_valid(static_cast<rcl_client_t*>(entity));
  }
  return false;
}

int add_handle(rtaccel_ros_executor* ex, Kind kind, void* entity, void* msg, void* response,
               rtaccel_ros_callback_fn fn, void* arg, const rtaccel_ros_callback_attr* attr,
               rtaccel_ros_handle** out) {
  if (!ex) return -EINVAL;
  ex->error.clear();
  if (ex->prepared) return fail(ex, -EBUSY, "handles are added before the executor first spins");
  if (!entity) return fail(ex, -EINVAL, "add_%s: the %s is NULL", kind_name(kind), kind_name(kind));
  if (!entity_valid(kind, entity)) {
    rcl_reset_error();
    return fail(ex, -EINVAL, "add_%s: the %s is not valid (never initialised, finalised, or its node's)",
                kind_name(kind), kind_name(kind));
  }
  for (const auto& h : ex->handles)
    if (h->entity == entity) return fail(ex, -EEXIST, "add_%s: the %s is added already", kind_name(kind), h->name.c_str());
  if (!fn && kind != Kind::kTimer)
    return fail(ex, -EINVAL, "add_%s: no callback (only a timer may run its rcl callback alone)", kind_name(kind));
  if ((kind == Kind::kSubscription || kind == Kind::kService) && !msg)
    return fail(ex, -EINVAL, "add_%s: no storage to take into", kind_name(kind));
  if ((kind == Kind::kService || kind == Kind::kClient) && !response)
    return fail(ex, -EINVAL, "add_%s: no storage for the response", kind_name(kind));
  auto h = std::make_unique<Handle>();
  h->kind = kind;
  h->entity = entity;
  h->msg = msg;
  h->response = response;
  h->fn = fn;
  h->arg = arg;
  if (attr) h->attr = *attr;
  else rtaccel_ros_callback_attr_init(&h->attr);
  if (h->attr.nsegments > RTACCEL_MAX_SEGMENTS || h->attr.nservices > RTACCEL_MAX_SERVICES)
    return fail(ex, -EINVAL, "add_%s: at most %d segments and %d services a callback", kind_name(kind),
                RTACCEL_MAX_SEGMENTS, RTACCEL_MAX_SERVICES);
  Group* group = h->attr.group ? reinterpret_cast<Group*>(h->attr.group) : ex->groups[0].get();
  if (group->ex != ex) return fail(ex, -EINVAL, "add_%s: the group is another executor's", kind_name(kind));
  h->group = group;
  h->name = h->attr.name ? h->attr.name : default_name(kind, entity);
  h->attr.name = nullptr;  // the caller's string need not outlive the call
  if (kind == Kind::kTimer) {
    int64_t period = 0;
    if (rcl_timer_get_period(static_cast<rcl_timer_t*>(entity), &period) != RCL_RET_OK) rcl_reset_error();
    h->period_ns = static_cast<uint64_t>(period);
    rcl_clock_t* clock = nullptr;
    if (rcl_timer_clock(static_cast<rcl_timer_t*>(entity), &clock) == RCL_RET_OK && clock)
      h->timer_steady = clock->type == RCL_STEADY_TIME;
  }
  std::vector<Handle*>& kind_list = kind == Kind::kTimer          ? group->timers
                                    : kind == Kind::kSubscription ? group->subscriptions
                                    : kind == Kind::kService      ? group->services
                                                                  : group->clients;
  kind_list.push_back(h.get());
  if (out) *out = reinterpret_cast<rtaccel_ros_handle*>(h.get());
  ex->handles.push_back(std::move(h));
  return 0;
}

// ---- preparing a spin ------------------------------------------------------------

int32_t effective_priority(const Handle& h) {
  if (h.attr.priority != RTACCEL_ROS_UNRANKED) return h.attr.priority;
  if (h.group->priority != RTACCEL_ROS_UNRANKED) return h.group->priority;
  int32_t p = RTACCEL_ROS_UNRANKED;
  for (const auto& step : h.steps) p = std::max(p, step.chain->attr.priority);
  return p;
}

void prepare_events(Group& g) {
  for (Handle* h : g.subscriptions) {
    auto* sub = static_cast<rcl_subscription_t*>(h->entity);
    // Both are optional for an rmw: where one is not supported, nothing is
    // reported of that cause.
    if (rcl_subscription_event_init(&h->qos_event, sub, RCL_SUBSCRIPTION_REQUESTED_INCOMPATIBLE_QOS) == RCL_RET_OK) {
      h->qos_event_live = true;
      g.events_of.push_back(h);
    } else {
      rcl_reset_error();
    }
    if (rcl_subscription_event_init(&h->type_event, sub, RCL_SUBSCRIPTION_INCOMPATIBLE_TYPE) == RCL_RET_OK) {
      h->type_event_live = true;
      g.events_of.push_back(h);
    } else {
      rcl_reset_error();
    }
  }
}

int prepare_group(rtaccel_ros_executor* ex, Group& g) {
  rcl_guard_condition_options_t options = rcl_guard_condition_get_default_options();
  if (rcl_guard_condition_init(&g.wake, ex->context, options) != RCL_RET_OK)
    return fail(ex, -EINVAL, "group %s: its guard condition: %s", g.name.c_str(), rcl_says().c_str());
  g.wake_live = true;
  prepare_events(g);
  if (rcl_wait_set_init(&g.wait_set, g.subscriptions.size(), 1, g.timers.size(), g.clients.size(),
                        g.services.size(), g.events_of.size(), ex->context, rcl_get_default_allocator()) != RCL_RET_OK)
    return fail(ex, -EINVAL, "group %s: its wait set: %s", g.name.c_str(), rcl_says().c_str());
  size_t order = 0;
  for (auto* list : {&g.timers, &g.subscriptions, &g.services, &g.clients})
    for (Handle* h : *list) h->order = order++;
  g.ready.reserve(order);
  g.dispatch = Samples(ex->samples);
  g.waits = Samples(ex->samples);
  g.takes = Samples(ex->samples);
  g.trace.resize(kTraceEvents);
  return 0;
}

int prepare(rtaccel_ros_executor* ex) {
  if (ex->prepared) return 0;
  if (!rcl_context_is_valid(ex->context))
    return fail(ex, -ECANCELED, "the executor's rcl context is not valid (shut down?)");
  for (auto& h : ex->handles) {
    if (!entity_valid(h->kind, h->entity))
      return fail(ex, -EINVAL, "the %s is no longer valid (finalised, or its node's)", h->name.c_str());
    h->priority = effective_priority(*h);
  }
  for (auto& c : ex->chains) {
    c->executions.assign(c->steps.size(), std::vector<Execution>(kKeptExecutions));
    c->next_execution.assign(c->steps.size(), 0);
    c->latencies = Samples(ex->samples);
  }
  ex->prepared = true;  // from here, what was made is released by destroy
  for (auto& g : ex->groups)
    if (int err = prepare_group(ex, *g)) return err;
  rtaccel::ros::prepare_analysis(ex);
  if (ex->attr.policy == RTACCEL_ROS_PAAM)
    if (int err = rtaccel::ros::prepare_paam(ex)) return err;
  return 0;
}

// ---- one step of a spin -----------------------------------------------------------

// Fills the wait set with everything of the group and waits. 0: something
// is ready (maybe only the wake-up or an event); -ETIMEDOUT; -ECANCELED:
// stopped or the context gone; -EIO: rcl failed.
int wait(Group& g, int64_t timeout_ns) {
  rtaccel_ros_executor* ex = g.ex;
  if (ex->stopping.load(std::memory_order_acquire) || !rcl_context_is_valid(ex->context)) return -ECANCELED;
  // sized for all of them in prepare_group(): none can fail but on a
  // finalised entity
  rcl_ret_t bad = rcl_wait_set_clear(&g.wait_set);
  for (Handle* h : g.timers) bad |= rcl_wait_set_add_timer(&g.wait_set, static_cast<rcl_timer_t*>(h->entity), nullptr);
  for (Handle* h : g.subscriptions)
    bad |= rcl_wait_set_add_subscription(&g.wait_set, static_cast<rcl_subscription_t*>(h->entity), nullptr);
  for (Handle* h : g.services)
    bad |= rcl_wait_set_add_service(&g.wait_set, static_cast<rcl_service_t*>(h->entity), nullptr);
  for (Handle* h : g.clients)
    bad |= rcl_wait_set_add_client(&g.wait_set, static_cast<rcl_client_t*>(h->entity), nullptr);
  for (size_t i = 0; i < g.events_of.size(); ++i) {
    Handle* h = g.events_of[i];
    bool first_of_handle = i == 0 || g.events_of[i - 1] != h;
    rcl_event_t* event = first_of_handle && h->qos_event_live ? &h->qos_event : &h->type_event;
    bad |= rcl_wait_set_add_event(&g.wait_set, event, nullptr);
  }
  bad |= rcl_wait_set_add_guard_condition(&g.wait_set, &g.wake, nullptr);
  if (bad != RCL_RET_OK) {
    fail(ex, -EIO, "group %s: filling its wait set: %s (an entity finalised while spinning?)", g.name.c_str(),
         rcl_says().c_str());
    return -EIO;
  }
  int64_t slice = timeout_ns < 0 || timeout_ns > kContextPollNs ? kContextPollNs : timeout_ns;
  int64_t began = steady_ns();
  rcl_ret_t ret = rcl_wait(&g.wait_set, slice);
  int64_t took = steady_ns() - began;
  g.rmw_ns += took;
  if (ret == RCL_RET_OK) g.waits.push(static_cast<uint64_t>(took));
  if (ex->stopping.load(std::memory_order_acquire) || !rcl_context_is_valid(ex->context)) return -ECANCELED;
  if (ret == RCL_RET_TIMEOUT) return -ETIMEDOUT;
  if (ret != RCL_RET_OK) {
    fail(ex, -EIO, "group %s: rcl_wait: %s", g.name.c_str(), rcl_says().c_str());
    return -EIO;
  }
  return 0;
}

// Reports what the rmw said of a subscription's matches.
void take_events(Group& g) {
  for (size_t i = 0; i < g.wait_set.size_of_events; ++i) {
    const rcl_event_t* event = g.wait_set.events[i];
    if (!event) continue;
    Handle* h = g.events_of[i];
    if (event == &h->qos_event) {
      rmw_requested_qos_incompatible_event_status_t status{};
      if (rcl_take_event(event, &status) != RCL_RET_OK) { rcl_reset_error(); continue; }
      if (status.total_count_change <= 0) continue;
      h->last_qos_policy.store(status.last_policy_kind);
      if (h->incompatible_qos.fetch_add(static_cast<uint64_t>(status.total_count_change)) == 0)
        rtaccel::ros::say_incompatible(h, false, status.last_policy_kind);
    } else {
      rmw_incompatible_type_status_t status{};
      if (rcl_take_event(event, &status) != RCL_RET_OK) { rcl_reset_error(); continue; }
      if (status.total_count_change <= 0) continue;
      if (h->incompatible_type.fetch_add(static_cast<uint64_t>(status.total_count_change)) == 0)
        rtaccel::ros::say_incompatible(h, true, 0);
    }
  }
}

// The ready handles, in ros2's order, appended to OUT.
void collect_ready(Group& g, std::vector<Handle*>& out) {
  const rcl_wait_set_t& ws = g.wait_set;
  for (size_t i = 0; i < ws.size_of_timers; ++i)
    if (ws.timers[i]) out.push_back(g.timers[i]);
  for (size_t i = 0; i < ws.size_of_subscriptions; ++i)
    if (ws.subscriptions[i]) out.push_back(g.subscriptions[i]);
  for (size_t i = 0; i < ws.size_of_services; ++i)
    if (ws.services[i]) out.push_back(g.services[i]);
  for (size_t i = 0; i < ws.size_of_clients; ++i)
    if (ws.clients[i]) out.push_back(g.clients[i]);
}

// picas: the ready handle of highest priority; among equals, the first in
// ros2's order. Null: none.
Handle* highest_ready(Group& g) {
  const rcl_wait_set_t& ws = g.wait_set;
  Handle* best = nullptr;
  auto consider = [&best](Handle* h) {
    if (!best || h->priority > best->priority) best = h;
  };
  for (size_t i = 0; i < ws.size_of_timers; ++i)
    if (ws.timers[i]) consider(g.timers[i]);
  for (size_t i = 0; i < ws.size_of_subscriptions; ++i)
    if (ws.subscriptions[i]) consider(g.subscriptions[i]);
  for (size_t i = 0; i < ws.size_of_services; ++i)
    if (ws.services[i]) consider(g.services[i]);
  for (size_t i = 0; i < ws.size_of_clients; ++i)
    if (ws.clients[i]) consider(g.clients[i]);
  return best;
}

// Which instance of a chain a step's execution serves: its own release for
// a chain's first step, else the instance of the previous step's execution
// during which its message was published (a subscription's release is that
// publication). 0: none found.
int64_t instance_of(Chain& c, size_t step, int64_t release) {
  if (step == 0) return release;
  const int64_t published = release;
  const auto& previous = c.executions[step - 1];
  for (const Execution& e : previous)
    if (e.release != 0 && e.start <= published && published <= e.end) return e.release;
  return 0;
}

void measure(Handle& h, int64_t start, int64_t end, int64_t release) {
  for (const auto& step : h.steps) {
    Chain& c = *step.chain;
    std::lock_guard<rtaccel::ros::PiMutex> hold(c.lock);
    int64_t instance = instance_of(c, step.index, release);
    if (instance == 0) {
      ++c.unattributed;
      continue;
    }
    auto& ring = c.executions[step.index];
    ring[c.next_execution[step.index]++ % ring.size()] = Execution{start, end, instance};
    if (step.index + 1 == c.steps.size()) {
      auto latency = static_cast<uint64_t>(end - instance);
      c.latencies.push(latency);
      if (c.attr.deadline_ns && latency > c.attr.deadline_ns) ++c.deadline_misses;
    }
  }
}

int64_t timer_release_realtime(const Handle& h, int64_t expected) {
  if (!h.timer_steady) return expected;
  return expected + (realtime_ns() - steady_ns());
}

// Takes what H has to give (a timer: calls it). False: nothing was there
// after all (taken already, a timer cancelled since the wait).
bool take(Handle& h, rtaccel_ros_call& call, rmw_service_info_t& service_info) {
  switch (h.kind) {
    case Kind::kTimer: {
      rcl_timer_call_info_t info{};
      rcl_ret_t ret = rcl_timer_call_with_info(static_cast<rcl_timer_t*>(h.entity), &info);
      if (ret != RCL_RET_OK) {
        rcl_reset_error();
        return false;
      }
      call.release_ns = timer_release_realtime(h, info.expected_call_time);
      return true;
    }
    case Kind::kSubscription: {
      rmw_message_info_t info = rmw_get_zero_initialized_message_info();
      rcl_ret_t ret = rcl_take(static_cast<rcl_subscription_t*>(h.entity), h.msg, &info, nullptr);
      if (ret != RCL_RET_OK) {
        rcl_reset_error();
        return false;
      }
      call.msg = h.msg;
      call.release_ns = info.source_timestamp;
      return true;
    }
    case Kind::kService: {
      rcl_ret_t ret = rcl_take_request_with_info(static_cast<rcl_service_t*>(h.entity), &service_info, h.msg);
      if (ret != RCL_RET_OK) {
        rcl_reset_error();
        return false;
      }
      call.msg = h.msg;
      call.response = h.response;
      call.release_ns = service_info.source_timestamp;
      return true;
    }
    case Kind::kClient: {
      rcl_ret_t ret = rcl_take_response_with_info(static_cast<rcl_client_t*>(h.entity), &service_info, h.response);
      if (ret != RCL_RET_OK) {
        rcl_reset_error();
        return false;
      }
      call.msg = h.response;
      call.release_ns = service_info.source_timestamp;
      return true;
    }
  }
  return false;
}

// Runs H's callback. Its dispatch cost is the time since the group's last
// callback ended (or its spin began) less what the rmw's wait and take took
// meanwhile: the executor's own work, a sleep in the wait excluded.
void execute(Group& g, Handle& h) {
  rtaccel_ros_call call{};
  call.arg = h.arg;
  call.accel = h.accel;
  call.handle = reinterpret_cast<rtaccel_ros_handle*>(&h);
  rmw_service_info_t service_info{};
  // costs on the steady clock; the chains' instances on the real-time
  // clock, the one of the messages' source timestamps
  int64_t take_began = steady_ns();
  bool taken = take(h, call, service_info);
  int64_t took = steady_ns() - take_began;
  g.rmw_ns += took;
  if (!taken) return;
  int64_t start = realtime_ns();
  int64_t steady_start = take_began + took;
  g.takes.push(static_cast<uint64_t>(took));
  g.dispatch.push(static_cast<uint64_t>(std::max<int64_t>(0, steady_start - g.mark - g.rmw_ns)));
  g.running_since.store(start, std::memory_order_relaxed);
  g.run_number.fetch_add(1, std::memory_order_relaxed);
  g.running.store(&h, std::memory_order_release);
  if (h.fn) h.fn(&call);
  g.running.store(nullptr, std::memory_order_release);
  if (h.kind == Kind::kService &&
      rcl_send_response(static_cast<rcl_service_t*>(h.entity), &service_info.request_id, h.response) != RCL_RET_OK)
    rcl_reset_error();
  int64_t end = realtime_ns();
  // the next callback's dispatch counts from here, this one's bookkeeping
  // below included
  g.mark = steady_ns();
  g.rmw_ns = 0;
  h.runs.fetch_add(1, std::memory_order_relaxed);
  measure(h, start, end, call.release_ns);
  g.trace[g.traced++ % g.trace.size()] = Event{&h, start, end};
}

// One callback of G, waiting up to TIMEOUT_NS for one. 0: one ran (or
// only an event or the wake-up came); -ETIMEDOUT; -ECANCELED; -EIO.
int step(Group& g, int64_t timeout_ns) {
  rtaccel_ros_executor* ex = g.ex;
  if (ex->attr.policy == RTACCEL_ROS_ROS2) {
    if (g.next_ready == g.ready.size()) {
      g.ready.clear();
      g.next_ready = 0;
      if (int err = wait(g, timeout_ns)) return err;
      take_events(g);
      collect_ready(g, g.ready);
      if (g.ready.empty()) return 0;
    }
    if (ex->stopping.load(std::memory_order_acquire)) return -ECANCELED;
    execute(g, *g.ready[g.next_ready++]);
    return 0;
  }
  // picas, paam: look again before every callback; the wait returns at
  // once where something is ready, and sleeps only where nothing is.
  if (int err = wait(g, timeout_ns)) return err;
  take_events(g);
  Handle* h = highest_ready(g);
  if (h) execute(g, *h);
  return 0;
}

void take_the_thread(Group& g) {
  g.tid = rtaccel_self_tid();
  g.mark = steady_ns();
  g.rmw_ns = 0;
  if (g.core >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(g.core, &set);
    if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
      rtaccel_say_refused("rtaccel-ros", "pinning", err, "the group runs unpinned");
  }
  if (g.fifo_priority == 0) {
    g.realtime.store(0);
    return;
  }
  int fifo = rtaccel_fifo_or_best(g.fifo_priority);
  if (!fifo)
    rtaccel_say_refused("rtaccel-ros", "SCHED_FIFO", EPERM,
                        "its callbacks run at the best priority allowed, outside the analysis' bounds");
  g.realtime.store(fifo);
}

void spin_group(Group& g) {
  take_the_thread(g);
  for (;;) {
    int err = step(g, -1);
    if (err == -ECANCELED) break;
    if (err && err != -ETIMEDOUT) {
      g.result = err;
      rtaccel_ros_stop(g.ex);
      break;
    }
  }
}

void* group_thread(void* arg) {
  spin_group(*static_cast<Group*>(arg));
  return nullptr;
}

void release_group(Group& g) {
  for (Handle* h : g.subscriptions) {
    if (h->qos_event_live && rcl_event_fini(&h->qos_event) != RCL_RET_OK) rcl_reset_error();
    if (h->type_event_live && rcl_event_fini(&h->type_event) != RCL_RET_OK) rcl_reset_error();
    h->qos_event_live = h->type_event_live = false;
  }
  if (g.wait_set.impl && rcl_wait_set_fini(&g.wait_set) != RCL_RET_OK) rcl_reset_error();
  if (g.wake_live && rcl_guard_condition_fini(&g.wake) != RCL_RET_OK) rcl_reset_error();
  g.wake_live = false;
  rcl_reset_error();
}

}  // namespace

// ---- the C API ----------------------------------------------------------------------

extern "C" {

RTACCEL_API void rtaccel_ros_callback_attr_init(rtaccel_ros_callback_attr* attr) {
  if (!attr) return;
  *attr = rtaccel_ros_callback_attr{};
  attr->priority = RTACCEL_ROS_UNRANKED;
}

RTACCEL_API int rtaccel_ros_executor_create(rcl_context_t* context, const rtaccel_ros_executor_attr* attr,
                                            rtaccel_ros_executor** out) {
  if (!out) return -EINVAL;
  *out = nullptr;
  if (!context || !rcl_context_is_valid(context)) return -EINVAL;
  rtaccel_ros_executor_attr a{};
  a.core = -1;
  if (attr) a = *attr;
  if (a.policy > RTACCEL_ROS_PAAM) return -EINVAL;
  auto* ex = new (std::nothrow) rtaccel_ros_executor;
  if (!ex) return -ENOMEM;
  if (check_thread_attr(ex, "executor", a.core, a.fifo_priority)) {
    delete ex;
    return -EINVAL;
  }
  ex->context = context;
  ex->attr = a;
  ex->name = a.name ? a.name : "ros";
  ex->attr.name = nullptr;
  if (a.socket_path) ex->socket_path = a.socket_path;
  ex->attr.socket_path = nullptr;
  if (a.samples) ex->samples = a.samples;
  add_group(ex, ex->name.c_str(), a.core, a.fifo_priority, RTACCEL_ROS_UNRANKED);
  *out = ex;
  return 0;
}

RTACCEL_API void rtaccel_ros_executor_destroy(rtaccel_ros_executor* ex) {
  if (!ex) return;
  rtaccel_ros_stop(ex);
  // a spin in another thread returns once its callbacks have
  while (ex->spinning.load(std::memory_order_acquire)) sched_yield();
  rtaccel::ros::release_paam(ex);
  rtaccel::ros::watch_release(ex);
  for (auto& g : ex->groups) release_group(*g);
  delete ex;
}

RTACCEL_API int rtaccel_ros_group_add(rtaccel_ros_executor* ex, const rtaccel_ros_group_attr* attr,
                                      rtaccel_ros_group** out) {
  if (!ex || !attr) return -EINVAL;
  ex->error.clear();
  if (ex->prepared) return fail(ex, -EBUSY, "groups are added before the executor first spins");
  if (int err = check_thread_attr(ex, "group", attr->core, attr->fifo_priority)) return err;
  Group* g = add_group(ex, attr->name, attr->core, attr->fifo_priority, attr->priority);
  if (out) *out = reinterpret_cast<rtaccel_ros_group*>(g);
  return 0;
}

RTACCEL_API int rtaccel_ros_add_timer(rtaccel_ros_executor* ex, rcl_timer_t* timer, rtaccel_ros_callback_fn fn,
                                      void* arg, const rtaccel_ros_callback_attr* attr, rtaccel_ros_handle** out) {
  return add_handle(ex, Kind::kTimer, timer, nullptr, nullptr, fn, arg, attr, out);
}

RTACCEL_API int rtaccel_ros_add_subscription(rtaccel_ros_executor* ex, rcl_subscription_t* subscription, void* msg,
                                             rtaccel_ros_callback_fn fn, void* arg,
                                             const rtaccel_ros_callback_attr* attr, rtaccel_ros_handle** out) {
  return add_handle(ex, Kind::kSubscription, subscription, msg, nullptr, fn, arg, attr, out);
}

RTACCEL_API int rtaccel_ros_add_service(rtaccel_ros_executor* ex, rcl_service_t* service, void* request,
                                        void* response, rtaccel_ros_callback_fn fn, void* arg,
                                        const rtaccel_ros_callback_attr* attr, rtaccel_ros_handle** out) {
  return add_handle(ex, Kind::kService, service, request, response, fn, arg, attr, out);
}

RTACCEL_API int rtaccel_ros_add_client(rtaccel_ros_executor* ex, rcl_client_t* client, void* response,
                                       rtaccel_ros_callback_fn fn, void* arg, const rtaccel_ros_callback_attr* attr,
                                       rtaccel_ros_handle** out) {
  return add_handle(ex, Kind::kClient, client, nullptr, response, fn, arg, attr, out);
}

RTACCEL_API int rtaccel_ros_add_chain(rtaccel_ros_executor* ex, const char* name, rtaccel_ros_handle* const* steps,
                                      size_t nsteps, const rtaccel_ros_chain_attr* attr) {
  if (!ex) return -EINVAL;
  ex->error.clear();
  if (ex->prepared) return fail(ex, -EBUSY, "chains are declared before the executor first spins");
  if (!name || !*name || strlen(name) >= RTACCEL_NAME_MAX)
    return fail(ex, -EINVAL, "a chain needs a name of 1 to %d characters", RTACCEL_NAME_MAX - 1);
  if (!attr) return fail(ex, -EINVAL, "chain '%s': no attributes (its priority)", name);
  if (!steps || nsteps == 0) return fail(ex, -EINVAL, "chain '%s': no steps", name);
  if (nsteps > RTACCEL_MAX_CALLBACKS)
    return fail(ex, -E2BIG, "chain '%s': %zu steps, at most %d", name, nsteps, RTACCEL_MAX_CALLBACKS);
  if (attr->priority == RTACCEL_ROS_UNRANKED) return fail(ex, -EINVAL, "chain '%s': no priority", name);
  for (const auto& c : ex->chains) {
    if (c->name == name) return fail(ex, -EEXIST, "chain '%s' is declared already", name);
    if (c->attr.priority == attr->priority)
      return fail(ex, -EEXIST, "chain '%s': priority %d is chain '%s''s; chains' priorities are distinct", name,
                  attr->priority, c->name.c_str());
  }
  auto c = std::make_unique<Chain>();
  for (size_t i = 0; i < nsteps; ++i) {
    auto* h = reinterpret_cast<Handle*>(steps[i]);
    bool ours = std::any_of(ex->handles.begin(), ex->handles.end(), [h](const auto& o) { return o.get() == h; });
    if (!ours) return fail(ex, -EINVAL, "chain '%s': step %zu is no handle of this executor", name, i);
    if (i == 0 ? (h->kind != Kind::kTimer && h->kind != Kind::kSubscription) : h->kind != Kind::kSubscription)
      return fail(ex, -EINVAL, "chain '%s': step %zu, the %s, must be %s", name, i, h->name.c_str(),
                  i == 0 ? "a timer or a subscription" : "a subscription (it takes what the step before publishes)");
    if (std::find(c->steps.begin(), c->steps.end(), h) != c->steps.end())
      return fail(ex, -EINVAL, "chain '%s': the %s is in it twice", name, h->name.c_str());
    c->steps.push_back(h);
  }
  c->name = name;
  c->attr = *attr;
  c->period_ns = c->steps[0]->kind == Kind::kTimer ? c->steps[0]->period_ns : attr->period_ns;
  for (size_t i = 0; i < nsteps; ++i) c->steps[i]->steps.push_back({c.get(), i});
  ex->chains.push_back(std::move(c));
  return 0;
}

RTACCEL_API int rtaccel_ros_spin(rtaccel_ros_executor* ex) {
  if (!ex) return -EINVAL;
  if (ex->spinning.exchange(true)) return -EALREADY;
  ex->error.clear();
  int err = prepare(ex);
  if (err) {
    ex->spinning.store(false);
    return err;
  }
  err = rtaccel::ros::watch_start(ex);
  for (size_t i = 1; i < ex->groups.size() && !err; ++i) {
    Group& g = *ex->groups[i];
    g.result = 0;
    if (int e = rtaccel_thread_create(&g.thread, RTACCEL_THREAD_STACK, group_thread, &g)) {
      err = fail(ex, -e, "group %s: its thread: %s", g.name.c_str(), strerror(e));
      rtaccel_ros_stop(ex);
    } else {
      g.thread_started = true;
    }
  }
  Group& first = *ex->groups[0];
  first.result = 0;
  if (!err) spin_group(first);
  for (size_t i = 1; i < ex->groups.size(); ++i) {
    Group& g = *ex->groups[i];
    if (g.thread_started) pthread_join(g.thread, nullptr);
    g.thread_started = false;
  }
  rtaccel::ros::watch_stop(ex);
  for (auto& g : ex->groups)
    if (!err && g->result) err = g->result;
  ex->stopping.store(false);
  ex->spinning.store(false, std::memory_order_release);
  return err;
}

RTACCEL_API int rtaccel_ros_spin_once(rtaccel_ros_executor* ex, int64_t timeout_ns) {
  if (!ex) return -EINVAL;
  if (ex->groups.size() > 1)
    return fail(ex, -EINVAL, "an executor of %zu groups spins them in threads of their own: rtaccel_ros_spin",
                ex->groups.size());
  if (ex->spinning.exchange(true)) return -EALREADY;
  ex->error.clear();
  int err = prepare(ex);
  Group& g = *ex->groups[0];
  if (!err && g.realtime.load() == -EAGAIN) take_the_thread(g);
  if (!err) {
    uint64_t before = g.traced;
    int64_t deadline = timeout_ns < 0 ? INT64_MAX : steady_ns() + timeout_ns;
    // a wait that ends with an event or the wake-up only runs nothing:
    // wait on for what is left of the time
    while (!err && g.traced == before) {
      int64_t left = timeout_ns < 0 ? -1 : std::max<int64_t>(0, deadline - steady_ns());
      err = step(g, left);
      if (!err && g.traced == before && left == 0) err = -ETIMEDOUT;
    }
  }
  if (err == -ECANCELED) ex->stopping.store(false);
  ex->spinning.store(false, std::memory_order_release);
  return err;
}

RTACCEL_API int rtaccel_ros_stop(rtaccel_ros_executor* ex) {
  if (!ex) return -EINVAL;
  ex->stopping.store(true, std::memory_order_release);
  if (!ex->prepared) return 0;
  for (auto& g : ex->groups)
    if (g->wake_live && rcl_trigger_guard_condition(&g->wake) != RCL_RET_OK) rcl_reset_error();
  return 0;
}

RTACCEL_API int rtaccel_ros_stop_wait(rtaccel_ros_executor* ex, int64_t timeout_ns) {
  if (!ex) return -EINVAL;
  rtaccel_ros_stop(ex);
  int64_t deadline = steady_ns() + std::max<int64_t>(0, timeout_ns);
  while (ex->spinning.load(std::memory_order_acquire)) {
    if (steady_ns() >= deadline) {
      std::string running = rtaccel::ros::running_now(ex);
      return fail(ex, -ETIMEDOUT, "the spin has not returned: %s",
                  running.empty() ? "no callback is under way (a wait of the rmw's?)" : running.c_str());
    }
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  return 0;
}

RTACCEL_API const char* rtaccel_ros_error(const rtaccel_ros_executor* ex) { return ex ? ex->error.c_str() : ""; }

RTACCEL_API rtaccel_ros_group* rtaccel_ros_executor_group(rtaccel_ros_executor* ex) {
  return ex ? reinterpret_cast<rtaccel_ros_group*>(ex->groups[0].get()) : nullptr;
}

RTACCEL_API int rtaccel_ros_group_realtime(const rtaccel_ros_group* group) {
  if (!group) return -EINVAL;
  return reinterpret_cast<const Group*>(group)->realtime.load();
}

}  // extern "C"
