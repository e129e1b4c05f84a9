// The rcl executor's state (internal to the ros layer): what rtaccel/ros.h's
// opaque types are. Everything a spin touches is sized before it starts, so
// that dispatch allocates nothing.
#ifndef RTACCEL_ROS_EXECUTOR_H_
#define RTACCEL_ROS_EXECUTOR_H_

#include <rcl/event.h>
#include <rcl/guard_condition.h>
#include <rcl/wait.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rtaccel/ros.h"

struct rtaccel_ros_executor;

namespace rtaccel::ros {

// A ring of the last samples of one figure, and how many there were.
class Samples {
 public:
  explicit Samples(size_t capacity = 0) : ring_(capacity) {}
  void push(uint64_t v) {
    if (ring_.empty()) return;
    ring_[count_ % ring_.size()] = v;
    ++count_;
  }
  uint64_t count() const { return count_; }
  // Sorted copy of the samples kept (allocates: not for a spinning thread).
  std::vector<uint64_t> sorted() const;

 private:
  std::vector<uint64_t> ring_;
  uint64_t count_ = 0;
};

// A mutex with priority inheritance: a chain's executions are written by
// the group threads that run its steps and read by whoever queries it, at
// any priority. Uncontended, lock and unlock are one atomic each (the PI
// futex's fast path), no system call.
class PiMutex {
 public:
  PiMutex() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&m_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~PiMutex() { pthread_mutex_destroy(&m_); }
  PiMutex(const PiMutex&) = delete;
  PiMutex& operator=(const PiMutex&) = delete;
  void lock() { pthread_mutex_lock(&m_); }
  void unlock() { pthread_mutex_unlock(&m_); }

 private:
  pthread_mutex_t m_;
};

enum class Kind { kTimer, kSubscription, kService, kClient };

struct Chain;
struct Group;

// One execution of a chain's step: when it ran, and the release of the
// instance it served.
struct Execution {
  int64_t start = 0, end = 0, release = 0;
};

struct Step {
  Chain* chain;
  size_t index;
};

struct Handle {
  Kind kind;
  void* entity;  // rcl_timer_t*, rcl_subscription_t*, rcl_service_t*, rcl_client_t*
  void* msg = nullptr;
  void* response = nullptr;
  rtaccel_ros_callback_fn fn = nullptr;
  void* arg = nullptr;
  rtaccel_ros_callback_attr attr{};
  std::string name;
  Group* group = nullptr;
  std::vector<Step> steps;       // the chains it is a step of
  int32_t priority = RTACCEL_ROS_UNRANKED;  // as run, set when spinning starts
  size_t order = 0;              // its place in ros2's order within its group
  uint64_t period_ns = 0;        // a timer's
  bool timer_steady = false;     // its clock is steady time, not the system's
  // the rmw's reports on a subscription: incompatible QoS, another type
  rcl_event_t qos_event = rcl_get_zero_initialized_event();
  rcl_event_t type_event = rcl_get_zero_initialized_event();
  bool qos_event_live = false, type_event_live = false;
  std::atomic<uint64_t> runs{0}, incompatible_qos{0}, incompatible_type{0}, overruns{0};
  std::atomic<int32_t> last_qos_policy{0};
  struct rtaccel_registration* accel = nullptr;  // paam
};

struct Chain {
  std::string name;
  rtaccel_ros_chain_attr attr{};
  std::vector<Handle*> steps;
  uint64_t period_ns = 0;  // its first timer's, else the one declared
  // Steps may run on different groups' threads, and a query reads them.
  PiMutex lock;
  std::vector<std::vector<Execution>> executions;  // per step, a ring
  std::vector<uint64_t> next_execution;            // per step
  Samples latencies;
  uint64_t deadline_misses = 0;
  uint64_t unattributed = 0;
  // the analysis' verdict, when spinning starts
  bool bounded = false;
  uint64_t bound_ns = 0;
  std::string why_unbounded;
};

// A callback run, for the timeline.
struct Event {
  const Handle* handle;
  int64_t start, end;
};

struct Group {
  rtaccel_ros_executor* ex = nullptr;
  size_t index = 0;
  std::string name;
  int32_t core = -1, fifo_priority = 0, priority = RTACCEL_ROS_UNRANKED;
  // ros2's order: timers, subscriptions, services, clients; each kind as added
  std::vector<Handle*> timers, subscriptions, services, clients;
  std::vector<Handle*> events_of;  // the handle of each event in the wait set
  rcl_wait_set_t wait_set = rcl_get_zero_initialized_wait_set();
  rcl_guard_condition_t wake = rcl_get_zero_initialized_guard_condition();
  bool wake_live = false;
  // ros2: what the last polling point found, run in order before the next
  std::vector<Handle*> ready;
  size_t next_ready = 0;
  // what its next callback's dispatch cost counts from: its last
  // callback's end, and the rmw's time (waits, takes) since
  int64_t mark = 0, rmw_ns = 0;
  std::atomic<int> realtime{-EAGAIN};
  // the callback under way, for the watch: set and cleared around each
  std::atomic<Handle*> running{nullptr};
  std::atomic<int64_t> running_since{0};
  std::atomic<uint64_t> run_number{0};  // of the callback under way
  pthread_t thread{};
  bool thread_started = false;
  int result = 0;
  Samples dispatch, waits, takes;
  std::vector<Event> trace;  // a ring
  uint64_t traced = 0;
  uint32_t tid = 0;
};

// The watch (watch.cc): overruns said, the graph's types checked.
int watch_start(rtaccel_ros_executor* ex);
void watch_stop(rtaccel_ros_executor* ex);
void watch_release(rtaccel_ros_executor* ex);
// What is running now and for how long, for an error ("" if nothing).
std::string running_now(const rtaccel_ros_executor* ex);
int64_t realtime_ns();
int64_t steady_ns();

int prepare_analysis(rtaccel_ros_executor* ex);
int prepare_paam(rtaccel_ros_executor* ex);
void release_paam(rtaccel_ros_executor* ex);
void say_incompatible(const Handle* h, bool type, int32_t policy);

}  // namespace rtaccel::ros

struct rtaccel_ros_executor {
  rcl_context_t* context = nullptr;
  rtaccel_ros_executor_attr attr{};
  std::string name;
  std::string socket_path;
  uint32_t samples = 4096;
  std::vector<std::unique_ptr<rtaccel::ros::Group>> groups;
  std::vector<std::unique_ptr<rtaccel::ros::Handle>> handles;
  std::vector<std::unique_ptr<rtaccel::ros::Chain>> chains;
  bool prepared = false;
  std::atomic<bool> spinning{false};
  std::atomic<bool> stopping{false};
  struct rtaccel_client* server = nullptr;  // paam
  // the watch's thread and what it wakes on
  pthread_t watch{};
  bool watch_started = false;
  std::atomic<bool> watch_stopping{false};
  rcl_guard_condition_t watch_wake = rcl_get_zero_initialized_guard_condition();
  bool watch_wake_live = false;
  rcl_wait_set_t watch_wait_set = rcl_get_zero_initialized_wait_set();
  std::vector<std::string> types_said;  // "topic type" pairs said once
  std::string error;
};

#endif  // RTACCEL_ROS_EXECUTOR_H_
