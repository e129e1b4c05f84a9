// The watch: a thread beside a spin's groups, at the priority of the thread
// that called rtaccel_ros_spin(), that says what no group's thread can say
// of itself and does what they must not do:
//
// - a callback that runs past overrun_ns is said on stderr once a run,
//   naming it, its chains and how long it has run: a callback that never
//   returns holds its group's thread for good, and the program learns
//   which (rtaccel_ros_stop_wait names it too);
// - with a node given, each time the graph changes it asks the graph for
//   the publishers on each subscription's topic and says once of each type
//   that is not the subscription's: DDS matches no such pair, and Fast DDS
//   reports no event for it. The graph's answers allocate: here, never in a
//   group's thread.
#include <rcl/error_handling.h>
#include <rcl/graph.h>
#include <rcl/node.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/thread.h"
#include "ros/executor.h"

namespace rtaccel::ros {

int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t steady_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

namespace {

constexpr int64_t kDefaultOverrunNs = 1'000'000'000;

int64_t overrun_ns(const rtaccel_ros_executor* ex) {
  return ex->attr.overrun_ns ? static_cast<int64_t>(ex->attr.overrun_ns) : kDefaultOverrunNs;
}

std::string chains_of(const Handle& h) {
  std::string s;
  for (const auto& step : h.steps) s += (s.empty() ? " of chain '" : ", '") + step.chain->name + "'";
  return s;
}

// Each group's callback past its overrun, said once a run.
void check_overruns(rtaccel_ros_executor* ex, std::vector<uint64_t>& said) {
  int64_t now = realtime_ns();
  for (size_t i = 0; i < ex->groups.size(); ++i) {
    Group& g = *ex->groups[i];
    Handle* h = g.running.load(std::memory_order_acquire);
    uint64_t run = g.run_number.load(std::memory_order_relaxed);
    if (!h || said[i] == run) continue;
    int64_t ran = now - g.running_since.load(std::memory_order_relaxed);
    if (ran < overrun_ns(ex)) continue;
    said[i] = run;
    h->overruns.fetch_add(1, std::memory_order_relaxed);
    fprintf(stderr, "rtaccel-ros: the callback of the %s%s has run for %.0f ms, over its %.0f ms, in group %s\n",
            h->name.c_str(), chains_of(*h).c_str(), static_cast<double>(ran) / 1e6,
            static_cast<double>(overrun_ns(ex)) / 1e6, g.name.c_str());
  }
}

// The type the node's subscriptions on TOPIC have, from the graph ("" if
// none of its is found).
std::string own_type(const rcl_topic_endpoint_info_array_t& subscriptions, const rcl_node_t* node) {
  const char* name = rcl_node_get_name(node);
  const char* ns = rcl_node_get_namespace(node);
  for (size_t i = 0; i < subscriptions.size; ++i) {
    const auto& info = subscriptions.info_array[i];
    if (name && ns && !strcmp(info.node_name, name) && !strcmp(info.node_namespace, ns)) return info.topic_type;
  }
  return "";
}

void check_types(rtaccel_ros_executor* ex) {
  rcutils_allocator_t allocator = rcutils_get_default_allocator();
  for (auto& h : ex->handles) {
    if (h->kind != Kind::kSubscription) continue;
    const char* topic = rcl_subscription_get_topic_name(static_cast<rcl_subscription_t*>(h->entity));
    if (!topic) continue;
    rcl_topic_endpoint_info_array_t subs = rcl_get_zero_initialized_topic_endpoint_info_array();
    rcl_topic_endpoint_info_array_t pubs = rcl_get_zero_initialized_topic_endpoint_info_array();
    if (rcl_get_subscriptions_info_by_topic(ex->attr.node, &allocator, topic, false, &subs) == RCL_RET_OK &&
        rcl_get_publishers_info_by_topic(ex->attr.node, &allocator, topic, false, &pubs) == RCL_RET_OK) {
      std::string mine = own_type(subs, ex->attr.node);
      for (size_t i = 0; !mine.empty() && i < pubs.size; ++i) {
        std::string theirs = pubs.info_array[i].topic_type;
        std::string key = std::string(topic) + " " + theirs;
        if (theirs == mine || std::find(ex->types_said.begin(), ex->types_said.end(), key) != ex->types_said.end())
          continue;
        ex->types_said.push_back(key);
        h->incompatible_type.fetch_add(1, std::memory_order_relaxed);
        fprintf(stderr, "rtaccel-ros: the %s%s takes %s, but node %s%s publishes %s on it: never received\n",
                h->name.c_str(), chains_of(*h).c_str(), mine.c_str(), pubs.info_array[i].node_namespace,
                pubs.info_array[i].node_name, theirs.c_str());
      }
    }
    rcl_reset_error();
    if (rcl_topic_endpoint_info_array_fini(&subs, &allocator) != RCL_RET_OK) rcl_reset_error();
    if (rcl_topic_endpoint_info_array_fini(&pubs, &allocator) != RCL_RET_OK) rcl_reset_error();
  }
}

void* watch(void* arg) {
  auto* ex = static_cast<rtaccel_ros_executor*>(arg);
  std::vector<uint64_t> said(ex->groups.size(), 0);
  const rcl_guard_condition_t* graph = ex->attr.node ? rcl_node_get_graph_guard_condition(ex->attr.node) : nullptr;
  if (graph) check_types(ex);  // what was discovered before the spin
  while (!ex->watch_stopping.load(std::memory_order_acquire)) {
    rcl_wait_set_t& ws = ex->watch_wait_set;
    rcl_ret_t bad = rcl_wait_set_clear(&ws);
    bad |= rcl_wait_set_add_guard_condition(&ws, &ex->watch_wake, nullptr);
    if (graph) bad |= rcl_wait_set_add_guard_condition(&ws, graph, nullptr);
    rcl_ret_t ret = bad == RCL_RET_OK ? rcl_wait(&ws, std::max<int64_t>(overrun_ns(ex) / 10, 1'000'000)) : bad;
    if (ret != RCL_RET_OK && ret != RCL_RET_TIMEOUT) {
      rcl_reset_error();
      // the context shut down, or the node gone: overruns are still watched
      timespec pause{0, static_cast<long>(std::min<int64_t>(overrun_ns(ex) / 10, 100'000'000))};
      nanosleep(&pause, nullptr);
      graph = nullptr;
    }
    check_overruns(ex, said);
    if (ret == RCL_RET_OK && graph && ws.size_of_guard_conditions > 1 && ws.guard_conditions[1]) check_types(ex);
  }
  return nullptr;
}

}  // namespace

int watch_start(rtaccel_ros_executor* ex) {
  ex->watch_stopping.store(false);
  if (!ex->watch_wake_live) {
    if (rcl_guard_condition_init(&ex->watch_wake, ex->context, rcl_guard_condition_get_default_options()) !=
        RCL_RET_OK) {
      ex->error = std::string("the watch's guard condition: ") + rcl_get_error_string().str;
      rcl_reset_error();
      return -EINVAL;
    }
    ex->watch_wake_live = true;
    if (rcl_wait_set_init(&ex->watch_wait_set, 0, 2, 0, 0, 0, 0, ex->context, rcl_get_default_allocator()) !=
        RCL_RET_OK) {
      ex->error = std::string("the watch's wait set: ") + rcl_get_error_string().str;
      rcl_reset_error();
      return -EINVAL;
    }
  }
  if (int err = rtaccel_thread_create(&ex->watch, RTACCEL_THREAD_STACK, watch, ex)) {
    ex->error = std::string("the watch's thread: ") + strerror(err);
    return -err;
  }
  ex->watch_started = true;
  return 0;
}

void watch_stop(rtaccel_ros_executor* ex) {
  if (!ex->watch_started) return;
  ex->watch_stopping.store(true, std::memory_order_release);
  if (rcl_trigger_guard_condition(&ex->watch_wake) != RCL_RET_OK) rcl_reset_error();
  pthread_join(ex->watch, nullptr);
  ex->watch_started = false;
}

void watch_release(rtaccel_ros_executor* ex) {
  if (ex->watch_wait_set.impl && rcl_wait_set_fini(&ex->watch_wait_set) != RCL_RET_OK) rcl_reset_error();
  if (ex->watch_wake_live && rcl_guard_condition_fini(&ex->watch_wake) != RCL_RET_OK) rcl_reset_error();
  ex->watch_wake_live = false;
}

std::string running_now(const rtaccel_ros_executor* ex) {
  std::string s;
  int64_t now = realtime_ns();
  for (const auto& g : ex->groups) {
    const Handle* h = g->running.load(std::memory_order_acquire);
    if (!h) continue;
    char ran[64];
    snprintf(ran, sizeof(ran), " has run for %.0f ms",
             static_cast<double>(now - g->running_since.load(std::memory_order_relaxed)) / 1e6);
    s += (s.empty() ? "" : "; ") + std::string("the callback of the ") + h->name + chains_of(*h) + ran +
         " in group " + g->name;
  }
  return s;
}

}  // namespace rtaccel::ros
