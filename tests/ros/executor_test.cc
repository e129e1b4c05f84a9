// rtaccel's rcl executor (rtaccel/ros.h) on real rcl handles over Fast DDS:
// the policies' orders made to happen (every message taken before the
// executor looks), chains measured, groups on threads of their own, a
// service and its client, the rmw's reports of mismatched publishers, and
// every error a user can cause.
//
// Each test process has a ROS domain of its own (from its pid; rclpy's
// tests take 1..100) and
// discovery kept to the host (ctest's environment), so that parallel tests
// never see one another's topics.
#include <gtest/gtest.h>
#include <rcl/error_handling.h>
#include <rcl/graph.h>
#include <rcl/rcl.h>
#include <rcl_interfaces/srv/get_parameter_types.h>
#include <rosidl_runtime_c/primitives_sequence_functions.h>
#include <rosidl_runtime_c/string_functions.h>
#include <std_msgs/msg/int64.h>
#include <std_msgs/msg/string.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/daemon.h"
#include "core/realtime.h"
#include "rtaccel/ros.h"

namespace {

// Before rcl reads them: discovery on this host only, and UDP, so that the
// tests leave none of Fast DDS's shared memory behind.
const bool kEnvironment = [] {
  setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST", 1);
  setenv("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4", 1);
  return true;
}();

constexpr int64_t kMs = 1000000;
constexpr int64_t kSecond = 1000000000;

const rosidl_message_type_support_t* int64_type() { return ROSIDL_GET_MSG_TYPE_SUPPORT(std_msgs, msg, Int64); }
const rosidl_message_type_support_t* string_type() { return ROSIDL_GET_MSG_TYPE_SUPPORT(std_msgs, msg, String); }

// A context and a node, in a domain of this process's own.
class Ros : public ::testing::Test {
 public:
  void SetUp() override {
    rcl_init_options_t options = rcl_get_zero_initialized_init_options();
    ASSERT_EQ(rcl_init_options_init(&options, rcl_get_default_allocator()), RCL_RET_OK);
    ASSERT_EQ(rcl_init_options_set_domain_id(&options, 101 + static_cast<size_t>(getpid()) % 130), RCL_RET_OK);
    context_ = rcl_get_zero_initialized_context();
    ASSERT_EQ(rcl_init(0, nullptr, &options, &context_), RCL_RET_OK) << rcl_get_error_string().str;
    ASSERT_EQ(rcl_init_options_fini(&options), RCL_RET_OK);
    node_ = rcl_get_zero_initialized_node();
    rcl_node_options_t node_options = rcl_node_get_default_options();
    ASSERT_EQ(rcl_node_init(&node_, "rtaccel_test", "", &context_, &node_options), RCL_RET_OK)
        << rcl_get_error_string().str;
  }

  void TearDown() override {
    for (auto* s : subscriptions_) {
      EXPECT_EQ(rcl_subscription_fini(s, &node_), RCL_RET_OK);
      delete s;
    }
    for (auto* p : publishers_) {
      EXPECT_EQ(rcl_publisher_fini(p, &node_), RCL_RET_OK);
      delete p;
    }
    for (auto* t : timers_) {
      EXPECT_EQ(rcl_timer_fini(t), RCL_RET_OK);
      delete t;
    }
    if (clock_live_) {
      EXPECT_EQ(rcl_clock_fini(&clock_), RCL_RET_OK);
    }
    EXPECT_EQ(rcl_node_fini(&node_), RCL_RET_OK);
    if (!shut_down_) {
      EXPECT_EQ(rcl_shutdown(&context_), RCL_RET_OK);
    }
    EXPECT_EQ(rcl_context_fini(&context_), RCL_RET_OK);
  }

  rcl_subscription_t* subscription(const char* topic, const rosidl_message_type_support_t* type = int64_type(),
                                   rmw_qos_profile_t qos = rmw_qos_profile_default) {
    auto* s = new rcl_subscription_t(rcl_get_zero_initialized_subscription());
    rcl_subscription_options_t options = rcl_subscription_get_default_options();
    options.qos = qos;
    EXPECT_EQ(rcl_subscription_init(s, &node_, type, topic, &options), RCL_RET_OK) << rcl_get_error_string().str;
    subscriptions_.push_back(s);
    return s;
  }

  rcl_publisher_t* publisher(const char* topic, const rosidl_message_type_support_t* type = int64_type(),
                             rmw_qos_profile_t qos = rmw_qos_profile_default) {
    auto* p = new rcl_publisher_t(rcl_get_zero_initialized_publisher());
    rcl_publisher_options_t options = rcl_publisher_get_default_options();
    options.qos = qos;
    EXPECT_EQ(rcl_publisher_init(p, &node_, type, topic, &options), RCL_RET_OK) << rcl_get_error_string().str;
    publishers_.push_back(p);
    return p;
  }

  rcl_timer_t* timer(int64_t period_ns) {
    if (!clock_live_) {
      rcl_allocator_t allocator = rcl_get_default_allocator();
      EXPECT_EQ(rcl_clock_init(RCL_STEADY_TIME, &clock_, &allocator), RCL_RET_OK);
      clock_live_ = true;
    }
    auto* t = new rcl_timer_t(rcl_get_zero_initialized_timer());
    EXPECT_EQ(rcl_timer_init2(t, &clock_, &context_, period_ns, nullptr, rcl_get_default_allocator(), true),
              RCL_RET_OK);
    timers_.push_back(t);
    return t;
  }

  // Waits until PUB is matched by SUB (discovery), at most 10 s.
  static bool matched(rcl_publisher_t* pub, rcl_subscription_t* sub) {
    for (int i = 0; i < 1000; ++i) {
      size_t subs = 0, pubs = 0;
      if (rcl_publisher_get_subscription_count(pub, &subs) == RCL_RET_OK && subs > 0 &&
          rcl_subscription_get_publisher_count(sub, &pubs) == RCL_RET_OK && pubs > 0)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  static void publish(rcl_publisher_t* pub, int64_t value) {
    std_msgs__msg__Int64 msg{};
    msg.data = value;
    ASSERT_EQ(rcl_publish(pub, &msg, nullptr), RCL_RET_OK);
  }

  // Waits until every one of SUBS has a message to take (at most 10 s): the
  // situation a policy's order is seen in, made to happen.
  bool all_ready(const std::vector<rcl_subscription_t*>& subs) {
    rcl_wait_set_t ws = rcl_get_zero_initialized_wait_set();
    if (rcl_wait_set_init(&ws, subs.size(), 0, 0, 0, 0, 0, &context_, rcl_get_default_allocator()) != RCL_RET_OK)
      return false;
    std::vector<bool> seen(subs.size());
    bool all = false;
    for (int i = 0; i < 100 && !all; ++i) {
      if (rcl_wait_set_clear(&ws) != RCL_RET_OK) break;
      for (auto* s : subs)
        if (rcl_wait_set_add_subscription(&ws, s, nullptr) != RCL_RET_OK) break;
      if (rcl_wait(&ws, 100 * kMs) == RCL_RET_OK)
        for (size_t k = 0; k < subs.size(); ++k) seen[k] = seen[k] || ws.subscriptions[k];
      all = std::all_of(seen.begin(), seen.end(), [](bool b) { return b; });
    }
    EXPECT_EQ(rcl_wait_set_fini(&ws), RCL_RET_OK);
    return all;
  }

  rcl_context_t context_;
  rcl_node_t node_;
  rcl_clock_t clock_;
  bool clock_live_ = false;
  bool shut_down_ = false;
  std::vector<rcl_subscription_t*> subscriptions_;
  std::vector<rcl_publisher_t*> publishers_;
  std::vector<rcl_timer_t*> timers_;
};

// The order callbacks ran in, by their names.
struct Order {
  std::vector<std::string> ran;
  std::function<void(const std::string&)> also;
};

void note_run(rtaccel_ros_call* call) {
  auto* order = static_cast<Order*>(call->arg);
  rtaccel_ros_handle_stats stats{};
  rtaccel_ros_handle_query(call->handle, &stats);
  order->ran.push_back(stats.name);
  if (order->also) order->also(stats.name);
}

rtaccel_ros_callback_attr named(const char* name, int32_t priority = RTACCEL_ROS_UNRANKED) {
  rtaccel_ros_callback_attr attr;
  rtaccel_ros_callback_attr_init(&attr);
  attr.name = name;
  attr.priority = priority;
  return attr;
}

// Whether this process may take SCHED_FIFO (root, CAP_SYS_NICE or an
// RLIMIT_RTPRIO): asked of the kernel, and put back.
bool realtime_allowed() {
  sched_param was{};
  int policy = 0;
  pthread_getschedparam(pthread_self(), &policy, &was);
  sched_param want{};
  want.sched_priority = 1;
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &want) != 0) return false;
  pthread_setschedparam(pthread_self(), policy, &was);
  return true;
}

// An executor of POLICY: unpinned, or on CORE at SCHED_FIFO FIFO.
rtaccel_ros_executor* make(rcl_context_t* context, uint32_t policy, int core = -1, int fifo = 0) {
  rtaccel_ros_executor_attr attr{};
  attr.policy = policy;
  attr.core = core;
  attr.fifo_priority = fifo;
  rtaccel_ros_executor* ex = nullptr;
  EXPECT_EQ(rtaccel_ros_executor_create(context, &attr, &ex), 0);
  return ex;
}

// Three subscriptions with messages waiting, added a, b, c, prioritised
// c > a > b: ros2 runs them as added, picas by priority.
std::vector<std::string> order_of_three(Ros* t, rcl_context_t* context, uint32_t policy,
                                        std::function<rcl_subscription_t*(const char*)> sub,
                                        std::function<rcl_publisher_t*(const char*)> pub,
                                        std::function<bool(const std::vector<rcl_subscription_t*>&)> ready) {
  (void)t;
  const char* topics[] = {"order_a", "order_b", "order_c"};
  const int32_t priorities[] = {5, 1, 9};
  std::vector<rcl_subscription_t*> subs;
  std::vector<rcl_publisher_t*> pubs;
  for (const char* topic : topics) subs.push_back(sub(topic)), pubs.push_back(pub(topic));
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(Ros::matched(pubs[i], subs[i]));
  rtaccel_ros_executor* ex = make(context, policy);
  Order order;
  std_msgs__msg__Int64 msgs[3]{};
  for (size_t i = 0; i < 3; ++i) {
    auto attr = named(topics[i], priorities[i]);
    EXPECT_EQ(rtaccel_ros_add_subscription(ex, subs[i], &msgs[i], note_run, &order, &attr, nullptr), 0);
  }
  for (size_t i = 3; i-- > 0;) Ros::publish(pubs[i], static_cast<int64_t>(i));
  EXPECT_TRUE(ready(subs));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rtaccel_ros_spin_once(ex, kSecond), 0) << rtaccel_ros_error(ex);
  EXPECT_EQ(rtaccel_ros_spin_once(ex, 0), -ETIMEDOUT);
  rtaccel_ros_executor_destroy(ex);
  return order.ran;
}

TEST_F(Ros, Ros2RunsTheReadyInTheOrderAddedAndPicasByPriority) {
  auto sub = [this](const char* topic) { return subscription(topic); };
  auto pub = [this](const char* topic) { return publisher(topic); };
  auto ready = [this](const std::vector<rcl_subscription_t*>& s) { return all_ready(s); };
  EXPECT_EQ(order_of_three(this, &context_, RTACCEL_ROS_ROS2, sub, pub, ready),
            (std::vector<std::string>{"order_a", "order_b", "order_c"}));
  EXPECT_EQ(order_of_three(this, &context_, RTACCEL_ROS_PICAS, sub, pub, ready),
            (std::vector<std::string>{"order_c", "order_a", "order_b"}));
}

// A message for the most urgent callback arrives while the first of two
// less urgent ones runs: ros2 runs what its polling point found first,
// picas looks again and runs the urgent one next.
std::vector<std::string> arrival_during_a_callback(Ros* t, rcl_context_t* context, uint32_t policy, int run) {
  std::string suffix = std::to_string(policy) + "_" + std::to_string(run);
  std::string low_a = "low_a_" + suffix, low_b = "low_b_" + suffix, high = "high_" + suffix;
  Ros* self = t;
  rcl_subscription_t* sa = self->subscription(low_a.c_str());
  rcl_subscription_t* sb = self->subscription(low_b.c_str());
  rcl_subscription_t* sh = self->subscription(high.c_str());
  rcl_publisher_t* pa = self->publisher(low_a.c_str());
  rcl_publisher_t* pb = self->publisher(low_b.c_str());
  rcl_publisher_t* ph = self->publisher(high.c_str());
  EXPECT_TRUE(Ros::matched(pa, sa) && Ros::matched(pb, sb) && Ros::matched(ph, sh));
  rtaccel_ros_executor* ex = make(context, policy);
  Order order;
  std_msgs__msg__Int64 msgs[3]{};
  auto aa = named("low_a", 1), ab = named("low_b", 2), ah = named("high", 10);
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, sa, &msgs[0], note_run, &order, &aa, nullptr), 0);
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, sb, &msgs[1], note_run, &order, &ab, nullptr), 0);
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, sh, &msgs[2], note_run, &order, &ah, nullptr), 0);
  order.also = [&](const std::string& name) {
    if (name != order.ran.front() || order.ran.size() != 1) return;
    Ros::publish(ph, 1);
    EXPECT_TRUE(self->all_ready({sh}));
  };
  Ros::publish(pa, 1);
  Ros::publish(pb, 1);
  EXPECT_TRUE(self->all_ready({sa, sb}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rtaccel_ros_spin_once(ex, kSecond), 0) << rtaccel_ros_error(ex);
  rtaccel_ros_executor_destroy(ex);
  return order.ran;
}

TEST_F(Ros, PicasLooksAgainBeforeEveryCallbackAndRos2OnlyAtItsPollingPoint) {
  // ros2's first callback is low_a (added first); picas's low_b (higher).
  EXPECT_EQ(arrival_during_a_callback(this, &context_, RTACCEL_ROS_ROS2, 0),
            (std::vector<std::string>{"low_a", "low_b", "high"}));
  EXPECT_EQ(arrival_during_a_callback(this, &context_, RTACCEL_ROS_PICAS, 0),
            (std::vector<std::string>{"low_b", "high", "low_a"}));
}

// A chain: a timer publishes, a filter takes it and publishes on, a
// controller takes that. Each instance's latency, from the timer's due
// time to the controller's end.
struct ChainNode {
  rcl_publisher_t* out = nullptr;
  std::atomic<int> runs{0};
  int burn_us = 0;
};

void forward(rtaccel_ros_call* call) {
  auto* node = static_cast<ChainNode*>(call->arg);
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(node->burn_us);
  while (std::chrono::steady_clock::now() < until) {
  }
  if (node->out) {
    std_msgs__msg__Int64 msg{};
    msg.data = node->runs;
    EXPECT_EQ(rcl_publish(node->out, &msg, nullptr), RCL_RET_OK);
  }
  node->runs++;
}

TEST_F(Ros, AChainIsMeasuredFromItsTimerToItsLastCallbackWithoutAChangeToItsMessages) {
  rcl_timer_t* t = timer(20 * kMs);
  rcl_publisher_t* p1 = publisher("chain_raw");
  rcl_subscription_t* s1 = subscription("chain_raw");
  rcl_publisher_t* p2 = publisher("chain_filtered");
  rcl_subscription_t* s2 = subscription("chain_filtered");
  ASSERT_TRUE(matched(p1, s1) && matched(p2, s2));
  rtaccel_ros_executor* ex = make(&context_, RTACCEL_ROS_PICAS);
  ChainNode sense, filter, act;
  sense.out = p1;
  filter.out = p2;
  filter.burn_us = 1000;
  act.burn_us = 2000;
  std_msgs__msg__Int64 m1{}, m2{};
  rtaccel_ros_handle *ht, *h1, *h2;
  ASSERT_EQ(rtaccel_ros_add_timer(ex, t, forward, &sense, nullptr, &ht), 0);
  ASSERT_EQ(rtaccel_ros_add_subscription(ex, s1, &m1, forward, &filter, nullptr, &h1), 0);
  ASSERT_EQ(rtaccel_ros_add_subscription(ex, s2, &m2, forward, &act, nullptr, &h2), 0);
  rtaccel_ros_handle* steps[] = {ht, h1, h2};
  rtaccel_ros_chain_attr chain{};
  chain.priority = 10;
  chain.deadline_ns = 20 * kMs;
  ASSERT_EQ(rtaccel_ros_add_chain(ex, "control", steps, 3, &chain), 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (act.runs < 15 && std::chrono::steady_clock::now() < deadline) ASSERT_EQ(rtaccel_ros_spin_once(ex, kSecond), 0);
  ASSERT_GE(act.runs, 15);
  rtaccel_ros_chain_stats stats{};
  ASSERT_EQ(rtaccel_ros_chain_query(ex, 0, &stats), 0);
  EXPECT_STREQ(stats.name, "control");
  // every controller run after the first few closes an instance
  EXPECT_GE(stats.count, 14u);
  EXPECT_LE(stats.unattributed, 1u);
  // at least the filter's and the controller's work; well under a period
  // on an idle executor, once a VM's dip is allowed for
  EXPECT_GE(stats.p50_ns, 3000000u);
  EXPECT_LT(stats.p50_ns, 20000000u);
  EXPECT_GE(stats.max_ns, stats.p99_ns);
  EXPECT_GE(stats.p99_ns, stats.p50_ns);
  EXPECT_EQ(rtaccel_ros_chain_query(ex, 1, &stats), -ENOENT);
  rtaccel_ros_dispatch_stats dispatch{};
  ASSERT_EQ(rtaccel_ros_dispatch_query(ex, &dispatch), 0);
  EXPECT_GE(dispatch.callbacks, 45u);
  EXPECT_GT(dispatch.take_p50_ns, 0u);

  std::string path = "/tmp/rtaccel-ros-trace-" + std::to_string(getpid()) + ".json";
  int events = rtaccel_ros_write_trace(ex, path.c_str());
  nlohmann::json trace = nlohmann::json::parse(std::ifstream(path));
  unlink(path.c_str());
  ASSERT_GE(events, 45);
  ASSERT_EQ(trace["traceEvents"].size(), static_cast<size_t>(events));
  int slices = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") {
      ++slices;
      EXPECT_EQ(e["args"]["chains"], nlohmann::json::array({"control"}));
    }
  EXPECT_EQ(slices, sense.runs + filter.runs + act.runs);
  rtaccel_ros_executor_destroy(ex);
}

// The calling thread's cores and policy, given back at the end of a test
// whose spin_once took them, for the tests after it in the process.
struct ThreadKept {
  cpu_set_t cores;
  ThreadKept() { sched_getaffinity(0, sizeof(cores), &cores); }
  ~ThreadKept() {
    sched_param other{};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &other);
    sched_setaffinity(0, sizeof(cores), &cores);
  }
};

// The analysis' bound beside the figures, where its premises hold.
TEST_F(Ros, TheBoundIsGivenWhereTheAnalysisPremisesHoldAndOtherwiseWhyNot) {
  // spin_once takes the calling thread (core 0, SCHED_FIFO 10)
  ThreadKept kept;
  rcl_timer_t* t = timer(50 * kMs);
  rcl_publisher_t* p = publisher("bounded");
  rcl_subscription_t* s = subscription("bounded");
  for (uint32_t policy : {RTACCEL_ROS_PICAS, RTACCEL_ROS_ROS2}) {
    rtaccel_ros_executor* ex = make(&context_, policy, 0, 10);
    ASSERT_NE(ex, nullptr);
    ChainNode sense, act;
    sense.out = p;
    std_msgs__msg__Int64 m{};
    auto a1 = named("sense"), a2 = named("act");
    a1.cpu_wcet_ns = 1 * kMs;
    a2.cpu_wcet_ns = 2 * kMs;
    rtaccel_ros_handle *h1, *h2;
    ASSERT_EQ(rtaccel_ros_add_timer(ex, t, forward, &sense, &a1, &h1), 0);
    ASSERT_EQ(rtaccel_ros_add_subscription(ex, s, &m, forward, &act, &a2, &h2), 0);
    rtaccel_ros_handle* steps[] = {h1, h2};
    rtaccel_ros_chain_attr chain{};
    chain.priority = 3;
    chain.deadline_ns = 50 * kMs;
    ASSERT_EQ(rtaccel_ros_add_chain(ex, "c", steps, 2, &chain), 0);
    rtaccel_ros_chain_stats stats{};
    ASSERT_EQ(rtaccel_ros_chain_query(ex, 0, &stats), 0);
    EXPECT_FALSE(stats.bounded);
    EXPECT_NE(std::string(stats.why_unbounded).find("before the executor first spins"), std::string::npos);
    EXPECT_EQ(rtaccel_ros_spin_once(ex, 200 * kMs), 0);
    ASSERT_EQ(rtaccel_ros_chain_query(ex, 0, &stats), 0);
    if (policy == RTACCEL_ROS_PICAS && !realtime_allowed()) {
      // its premise fails without SCHED_FIFO, and it says so
      EXPECT_FALSE(stats.bounded);
      EXPECT_NE(std::string(stats.why_unbounded).find("SCHED_FIFO"), std::string::npos) << stats.why_unbounded;
      EXPECT_GE(stats.bound_ns, 3u * kMs);
    } else if (policy == RTACCEL_ROS_PICAS) {
      EXPECT_TRUE(stats.bounded) << stats.why_unbounded;
      // its own work, and nothing else on the executor
      EXPECT_GE(stats.bound_ns, 3u * kMs);
      EXPECT_LE(stats.bound_ns, 50u * kMs);
    } else {
      EXPECT_FALSE(stats.bounded);
      EXPECT_NE(std::string(stats.why_unbounded).find("ros2 policy"), std::string::npos) << stats.why_unbounded;
    }
    rtaccel_ros_executor_destroy(ex);
  }
}

// A group whose chains would keep its thread busier than the kernel's
// real-time throttling lets a SCHED_FIFO thread be is stopped by it for the
// rest of each throttling period, which no bound counts: none is given,
// and why is said.
TEST_F(Ros, ALoadTheRealTimeThrottlingStopsHasNoBound) {
  long runtime_us, period_us;
  bool on = rtaccel_rt_throttling(&runtime_us, &period_us);
  bool throttling = on && period_us == 1000000 && runtime_us < 1029000;  // the kernel's default period
  ThreadKept kept;
  rtaccel_ros_executor* ex = make(&context_, RTACCEL_ROS_PICAS, 0, 10);
  ASSERT_NE(ex, nullptr);
  ChainNode node;
  auto a = named("overload");
  a.cpu_wcet_ns = 49 * kMs;  // 98% of a 50 ms period
  rtaccel_ros_handle* h;
  ASSERT_EQ(rtaccel_ros_add_timer(ex, timer(50 * kMs), forward, &node, &a, &h), 0);
  rtaccel_ros_chain_attr chain{};
  chain.priority = 3;
  ASSERT_EQ(rtaccel_ros_add_chain(ex, "busy", &h, 1, &chain), 0);
  int spun = rtaccel_ros_spin_once(ex, 10 * kMs);  // analysed as it starts, whether the timer fired
  EXPECT_TRUE(spun == 0 || spun == -ETIMEDOUT) << spun;
  rtaccel_ros_chain_stats stats{};
  ASSERT_EQ(rtaccel_ros_chain_query(ex, 0, &stats), 0);
  std::string why = stats.why_unbounded;
  if (!realtime_allowed()) {
    EXPECT_FALSE(stats.bounded);
    EXPECT_NE(why.find("was refused SCHED_FIFO"), std::string::npos) << why;
  } else if (throttling) {
    // 49 ms, 21 times in a second of throttling period at most: 1029 ms
    EXPECT_FALSE(stats.bounded);
    EXPECT_NE(why.find("on core 0, its callbacks may ask its thread for 1029 ms in a throttling period of"),
              std::string::npos) << why;
    EXPECT_NE(why.find("kernel.sched_rt_runtime_us " + std::to_string(runtime_us)), std::string::npos) << why;
  } else if (!on) {
    // a machine tuned as the field's are (throttling off): nothing stops it
    EXPECT_TRUE(stats.bounded) << why;
  }
  rtaccel_ros_executor_destroy(ex);
}

// Groups: threads of their own, spun together until stopped.
TEST_F(Ros, EachGroupRunsOnAThreadOfItsOwnUntilStopped) {
  rtaccel_ros_executor* ex = make(&context_, RTACCEL_ROS_PICAS);
  rtaccel_ros_group_attr gattr{};
  gattr.name = "second";
  gattr.core = -1;
  gattr.fifo_priority = 0;
  gattr.priority = RTACCEL_ROS_UNRANKED;
  rtaccel_ros_group* second = nullptr;
  ASSERT_EQ(rtaccel_ros_group_add(ex, &gattr, &second), 0);
  struct Seen {
    std::atomic<long> tid{0};
    std::atomic<int> runs{0};
  } first_seen, second_seen;
  auto note = [](rtaccel_ros_call* call) {
    auto* seen = static_cast<Seen*>(call->arg);
    seen->tid = syscall(SYS_gettid);
    seen->runs++;
  };
  auto a1 = named("one"), a2 = named("two");
  a2.group = second;
  ASSERT_EQ(rtaccel_ros_add_timer(ex, timer(5 * kMs), note, &first_seen, &a1, nullptr), 0);
  ASSERT_EQ(rtaccel_ros_add_timer(ex, timer(5 * kMs), note, &second_seen, &a2, nullptr), 0);
  EXPECT_EQ(rtaccel_ros_spin_once(ex, 0), -EINVAL);
  EXPECT_NE(std::string(rtaccel_ros_error(ex)).find("rtaccel_ros_spin"), std::string::npos);
  EXPECT_EQ(rtaccel_ros_group_realtime(second), -EAGAIN);
  std::atomic<int> spun{1};
  std::thread spinner([&] { spun = rtaccel_ros_spin(ex); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((first_seen.runs < 5 || second_seen.runs < 5) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(rtaccel_ros_spin(ex), -EALREADY);
  auto stop_at = std::chrono::steady_clock::now();
  EXPECT_EQ(rtaccel_ros_stop(ex), 0);
  spinner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, std::chrono::seconds(1));
  EXPECT_EQ(spun, 0) << rtaccel_ros_error(ex);
  EXPECT_GE(first_seen.runs, 5);
  EXPECT_GE(second_seen.runs, 5);
  EXPECT_NE(first_seen.tid, second_seen.tid);
  EXPECT_EQ(rtaccel_ros_group_realtime(second), 0);  // none asked
  rtaccel_ros_executor_destroy(ex);
}

TEST_F(Ros, AServiceAnswersAndItsClientTakesTheResponse) {
  const auto* type = ROSIDL_GET_SRV_TYPE_SUPPORT(rcl_interfaces, srv, GetParameterTypes);
  rcl_service_t service = rcl_get_zero_initialized_service();
  rcl_service_options_t service_options = rcl_service_get_default_options();
  ASSERT_EQ(rcl_service_init(&service, &node_, type, "types", &service_options), RCL_RET_OK);
  rcl_client_t client = rcl_get_zero_initialized_client();
  rcl_client_options_t client_options = rcl_client_get_default_options();
  ASSERT_EQ(rcl_client_init(&client, &node_, type, "types", &client_options), RCL_RET_OK);
  bool available = false;
  for (int i = 0; i < 1000 && !available; ++i) {
    ASSERT_EQ(rcl_service_server_is_available(&node_, &client, &available), RCL_RET_OK);
    if (!available) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(available);
  rtaccel_ros_executor* ex = make(&context_, RTACCEL_ROS_PICAS);
  rcl_interfaces__srv__GetParameterTypes_Request request, taken_request;
  rcl_interfaces__srv__GetParameterTypes_Response response, taken_response;
  rcl_interfaces__srv__GetParameterTypes_Request__init(&request);
  rcl_interfaces__srv__GetParameterTypes_Request__init(&taken_request);
  rcl_interfaces__srv__GetParameterTypes_Response__init(&response);
  rcl_interfaces__srv__GetParameterTypes_Response__init(&taken_response);
  auto answer = [](rtaccel_ros_call* call) {
    auto* req = static_cast<rcl_interfaces__srv__GetParameterTypes_Request*>(call->msg);
    auto* res = static_cast<rcl_interfaces__srv__GetParameterTypes_Response*>(call->response);
    ASSERT_TRUE(rosidl_runtime_c__uint8__Sequence__init(&res->types, req->names.size));
    for (size_t i = 0; i < req->names.size; ++i) res->types.data[i] = static_cast<uint8_t>(40 + i);
  };
  std::atomic<size_t> answered{0};
  auto taken = [](rtaccel_ros_call* call) {
    auto* res = static_cast<rcl_interfaces__srv__GetParameterTypes_Response*>(call->msg);
    *static_cast<std::atomic<size_t>*>(call->arg) = res->types.size * 100 + res->types.data[1];
  };
  ASSERT_EQ(rtaccel_ros_add_service(ex, &service, &taken_request, &response, answer, nullptr, nullptr, nullptr), 0);
  ASSERT_EQ(rtaccel_ros_add_client(ex, &client, &taken_response, taken, &answered, nullptr, nullptr), 0);
  ASSERT_TRUE(rosidl_runtime_c__String__Sequence__init(&request.names, 3));
  int64_t sequence = 0;
  ASSERT_EQ(rcl_send_request(&client, &request, &sequence), RCL_RET_OK);
  for (int i = 0; i < 20 && answered == 0; ++i) EXPECT_EQ(rtaccel_ros_spin_once(ex, kSecond), 0);
  EXPECT_EQ(answered, 341u);
  rtaccel_ros_executor_destroy(ex);
  rcl_interfaces__srv__GetParameterTypes_Request__fini(&request);
  rcl_interfaces__srv__GetParameterTypes_Request__fini(&taken_request);
  rcl_interfaces__srv__GetParameterTypes_Response__fini(&response);
  rcl_interfaces__srv__GetParameterTypes_Response__fini(&taken_response);
  EXPECT_EQ(rcl_client_fini(&client, &node_), RCL_RET_OK);
  EXPECT_EQ(rcl_service_fini(&service, &node_), RCL_RET_OK);
}

// A publisher the subscription can never receive from: said, and counted.
TEST_F(Ros, APublisherOfIncompatibleQosOrAnotherTypeIsReportedNotWaitedFor) {
  rmw_qos_profile_t reliable = rmw_qos_profile_default, best_effort = rmw_qos_profile_default;
  reliable.reliability = RMW_QOS_POLICY_RELIABILITY_RELIABLE;
  best_effort.reliability = RMW_QOS_POLICY_RELIABILITY_BEST_EFFORT;
  rcl_subscription_t* wants_reliable = subscription("qos_topic", int64_type(), reliable);
  publisher("qos_topic", int64_type(), best_effort);
  // Fast DDS refuses two types on a topic within one participant: the
  // String publisher is another process's, as it would be in a system.
  rcl_subscription_t* wants_int = subscription("type_topic", int64_type());
  struct Other final : Ros {
    void TestBody() override {}
  } other;
  other.SetUp();
  other.publisher("type_topic", string_type());
  rtaccel_ros_executor_attr attr{};
  attr.policy = RTACCEL_ROS_PICAS;
  attr.core = -1;
  attr.node = &node_;
  rtaccel_ros_executor* ex = nullptr;
  ASSERT_EQ(rtaccel_ros_executor_create(&context_, &attr, &ex), 0);
  std_msgs__msg__Int64 m1{}, m2{};
  Order order;
  rtaccel_ros_handle *hq, *ht;
  ASSERT_EQ(rtaccel_ros_add_subscription(ex, wants_reliable, &m1, note_run, &order, nullptr, &hq), 0);
  ASSERT_EQ(rtaccel_ros_add_subscription(ex, wants_int, &m2, note_run, &order, nullptr, &ht), 0);
  rtaccel_ros_handle_stats qos{}, type{};
  std::atomic<int> spun{1};
  std::thread spinner([&] { spun = rtaccel_ros_spin(ex); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    rtaccel_ros_handle_query(hq, &qos);
    rtaccel_ros_handle_query(ht, &type);
  } while ((qos.incompatible_qos == 0 || type.incompatible_type == 0) && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(rtaccel_ros_stop_wait(ex, 5 * kSecond), 0);
  spinner.join();
  EXPECT_EQ(spun, 0) << rtaccel_ros_error(ex);
  EXPECT_GE(qos.incompatible_qos, 1u);
  EXPECT_EQ(qos.last_qos_policy, RMW_QOS_POLICY_RELIABILITY);
  EXPECT_GE(type.incompatible_type, 1u);
  EXPECT_TRUE(order.ran.empty());
  rtaccel_ros_executor_destroy(ex);
  other.TearDown();
}

TEST_F(Ros, EveryMisuseIsAClearErrorAndNoCrash) {
  rtaccel_ros_executor* ex = nullptr;
  rtaccel_ros_executor_attr bad{};
  bad.policy = 7;
  EXPECT_EQ(rtaccel_ros_executor_create(&context_, &bad, &ex), -EINVAL);
  bad.policy = RTACCEL_ROS_PICAS;
  bad.core = -1;
  bad.fifo_priority = 100;
  EXPECT_EQ(rtaccel_ros_executor_create(&context_, &bad, &ex), -EINVAL);
  bad.fifo_priority = 0;
  bad.core = 4096;
  EXPECT_EQ(rtaccel_ros_executor_create(&context_, &bad, &ex), -EINVAL);
  EXPECT_EQ(rtaccel_ros_executor_create(nullptr, nullptr, &ex), -EINVAL);
  ex = make(&context_, RTACCEL_ROS_PICAS);
  std_msgs__msg__Int64 m{};
  Order order;
  rcl_subscription_t* s = subscription("misuse");
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, nullptr, &m, note_run, &order, nullptr, nullptr), -EINVAL);
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, s, nullptr, note_run, &order, nullptr, nullptr), -EINVAL);
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, s, &m, nullptr, &order, nullptr, nullptr), -EINVAL);
  rtaccel_ros_handle* hs = nullptr;
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, s, &m, note_run, &order, nullptr, &hs), 0);
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, s, &m, note_run, &order, nullptr, nullptr), -EEXIST);
  EXPECT_NE(std::string(rtaccel_ros_error(ex)).find("added already"), std::string::npos) << rtaccel_ros_error(ex);
  // an entity finalised (its node's, or by hand) is refused
  rcl_subscription_t gone = rcl_get_zero_initialized_subscription();
  rcl_subscription_options_t options = rcl_subscription_get_default_options();
  ASSERT_EQ(rcl_subscription_init(&gone, &node_, int64_type(), "gone", &options), RCL_RET_OK);
  ASSERT_EQ(rcl_subscription_fini(&gone, &node_), RCL_RET_OK);
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, &gone, &m, note_run, &order, nullptr, nullptr), -EINVAL);
  EXPECT_NE(std::string(rtaccel_ros_error(ex)).find("not valid"), std::string::npos) << rtaccel_ros_error(ex);
  // chains
  rtaccel_ros_handle* ht = nullptr;
  ASSERT_EQ(rtaccel_ros_add_timer(ex, timer(kSecond), nullptr, nullptr, nullptr, &ht), 0);
  rtaccel_ros_chain_attr chain{};
  chain.priority = 1;
  rtaccel_ros_handle* twice[] = {ht, hs, hs};
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "twice", twice, 3, &chain), -EINVAL);
  rtaccel_ros_handle* timer_second[] = {hs, ht};
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "late_timer", timer_second, 2, &chain), -EINVAL);
  EXPECT_NE(std::string(rtaccel_ros_error(ex)).find("must be a subscription"), std::string::npos);
  rtaccel_ros_handle* stranger[] = {reinterpret_cast<rtaccel_ros_handle*>(&chain)};
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "stranger", stranger, 1, &chain), -EINVAL);
  rtaccel_ros_handle* good[] = {ht, hs};
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "", good, 2, &chain), -EINVAL);
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "good", good, 2, nullptr), -EINVAL);
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "good", good, 2, &chain), 0);
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "good", good, 2, &chain), -EEXIST);
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "other", good, 1, &chain), -EEXIST);
  EXPECT_NE(std::string(rtaccel_ros_error(ex)).find("distinct"), std::string::npos);
  // once spun, nothing more is added
  EXPECT_EQ(rtaccel_ros_spin_once(ex, 0), -ETIMEDOUT);
  rcl_subscription_t* late = subscription("late");
  EXPECT_EQ(rtaccel_ros_add_subscription(ex, late, &m, note_run, &order, nullptr, nullptr), -EBUSY);
  chain.priority = 2;
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "late", good, 1, &chain), -EBUSY);
  rtaccel_ros_group_attr g{};
  EXPECT_EQ(rtaccel_ros_group_add(ex, &g, nullptr), -EBUSY);
  // a stop before a spin makes it return at once, and the next spins on
  EXPECT_EQ(rtaccel_ros_stop(ex), 0);
  EXPECT_EQ(rtaccel_ros_spin_once(ex, kSecond), -ECANCELED);
  EXPECT_EQ(rtaccel_ros_spin_once(ex, 0), -ETIMEDOUT);
  rtaccel_ros_executor_destroy(ex);
  rtaccel_ros_executor_destroy(nullptr);
}

// A callback that does not return: said while it runs, and named by a
// stop that times out; the spin ends once it does return.
TEST_F(Ros, ACallbackThatDoesNotReturnIsNamedNotWaitedForWithoutEnd) {
  rtaccel_ros_executor_attr attr{};
  attr.policy = RTACCEL_ROS_PICAS;
  attr.core = -1;
  attr.overrun_ns = 50 * kMs;
  rtaccel_ros_executor* ex = nullptr;
  ASSERT_EQ(rtaccel_ros_executor_create(&context_, &attr, &ex), 0);
  std::atomic<bool> release{false};
  auto stuck = [](rtaccel_ros_call* call) {
    auto* until = static_cast<std::atomic<bool>*>(call->arg);
    while (!until->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  auto a = named("stuck");
  rtaccel_ros_handle* h = nullptr;
  ASSERT_EQ(rtaccel_ros_add_timer(ex, timer(10 * kMs), stuck, &release, &a, &h), 0);
  std::atomic<int> spun{1};
  std::thread spinner([&] { spun = rtaccel_ros_spin(ex); });
  rtaccel_ros_handle_stats stats{};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    rtaccel_ros_handle_query(h, &stats);
  } while (stats.overruns == 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(stats.overruns, 1u);
  auto at = std::chrono::steady_clock::now();
  EXPECT_EQ(rtaccel_ros_stop_wait(ex, 100 * kMs), -ETIMEDOUT);
  EXPECT_LT(std::chrono::steady_clock::now() - at, std::chrono::seconds(2));
  std::string why = rtaccel_ros_error(ex);
  EXPECT_NE(why.find("the callback of the stuck has run for"), std::string::npos) << why;
  release = true;
  EXPECT_EQ(rtaccel_ros_stop_wait(ex, 5 * kSecond), 0) << rtaccel_ros_error(ex);
  spinner.join();
  EXPECT_EQ(spun, 0);
  rtaccel_ros_executor_destroy(ex);
}

// paam: the server, on a private socket, and a chain whose timer's callback
// has an accelerator segment.
class Server {
 public:
  Server() {
    socket_ = "/tmp/rtaccel-ros-test-" + std::to_string(getpid()) + ".sock";
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    rtaccel::core::SpawnOptions options;
    options.ready_handshake = true;
    auto child = rtaccel::core::Child::spawn(
        {RTACCEL_SERVER_BIN, "--socket", socket_, "--device", std::to_string(cores > 1 ? 1 : 0)}, options);
    if (child) child_ = child.take();
    ready_ = child_.pid() > 0 && child_.wait_ready(10 * kSecond).ok();
  }
  ~Server() {
    child_.terminate(5 * kSecond);
    unlink(socket_.c_str());
  }
  bool ready() const { return ready_; }
  const char* socket() const { return socket_.c_str(); }

 private:
  std::string socket_;
  rtaccel::core::Child child_;
  bool ready_ = false;
};

struct Offload {
  std::atomic<int> calls{0}, failures{0};
  std::atomic<int32_t> priority{0};
};

void offload(rtaccel_ros_call* call) {
  auto* seen = static_cast<Offload*>(call->arg);
  if (!call->accel) {
    seen->failures++;
    return;
  }
  rtaccel_registration_info info{};
  rtaccel_registration_query(call->accel, &info);
  seen->priority = info.priority;
  int busy = rtaccel_service_index(call->accel, "busy");
  size_t cap = 0;
  auto* request = static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(call->accel, busy, &cap));
  request->ns = 200000;
  if (rtaccel_call(call->accel, busy, sizeof(*request), kSecond, nullptr) == 0) seen->calls++;
  else seen->failures++;
}

rtaccel_ros_executor* paam_executor(rcl_context_t* context, const Server& server, rcl_timer_t* t,
                                    uint64_t segment_ns, Offload* seen) {
  rtaccel_ros_executor_attr attr{};
  attr.policy = RTACCEL_ROS_PAAM;
  attr.core = 0;
  attr.socket_path = server.socket();
  rtaccel_ros_executor* ex = nullptr;
  EXPECT_EQ(rtaccel_ros_executor_create(context, &attr, &ex), 0);
  auto a = named("offload");
  a.cpu_wcet_ns = kMs;
  a.nsegments = 1;
  snprintf(a.segments[0].accelerator, sizeof(a.segments[0].accelerator), "cpu");
  snprintf(a.segments[0].service, sizeof(a.segments[0].service), "busy");
  a.segments[0].wcet_ns = segment_ns;
  rtaccel_ros_handle* h = nullptr;
  EXPECT_EQ(rtaccel_ros_add_timer(ex, t, offload, seen, &a, &h), 0);
  rtaccel_ros_chain_attr chain{};
  chain.priority = 7;
  chain.deadline_ns = 20 * kMs;
  chain.critical = 1;
  EXPECT_EQ(rtaccel_ros_add_chain(ex, "offloaded", &h, 1, &chain), 0);
  return ex;
}

TEST_F(Ros, UnderPaamACallbacksSegmentGoesThroughTheServerAsItsChains) {
  Server server;
  ASSERT_TRUE(server.ready());
  Offload seen;
  rtaccel_ros_executor* ex = paam_executor(&context_, server, timer(20 * kMs), kMs, &seen);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen.calls < 5 && seen.failures == 0 && std::chrono::steady_clock::now() < deadline)
    ASSERT_EQ(rtaccel_ros_spin_once(ex, kSecond), 0) << rtaccel_ros_error(ex);
  EXPECT_EQ(seen.failures, 0);
  EXPECT_GE(seen.calls, 5);
  EXPECT_EQ(seen.priority, 7);  // the request's priority: its chain's
  rtaccel_ros_chain_stats stats{};
  ASSERT_EQ(rtaccel_ros_chain_query(ex, 0, &stats), 0);
  EXPECT_GE(stats.count, 5u);
  // the segment is part of the chain's latency
  EXPECT_GE(stats.p50_ns, 200000u);
  EXPECT_NE(std::string(stats.why_unbounded).find("rtaccel-server"), std::string::npos) << stats.why_unbounded;
  rtaccel_ros_executor_destroy(ex);
}

TEST_F(Ros, UnderPaamAChainAdmissionRefusesIsAnErrorWithTheServersReason) {
  Server server;
  ASSERT_TRUE(server.ready());
  Offload seen;
  // a segment of 30 ms in a chain of 20 ms deadline: no bound within it
  rtaccel_ros_executor* ex = paam_executor(&context_, server, timer(20 * kMs), 30 * kMs, &seen);
  EXPECT_EQ(rtaccel_ros_spin_once(ex, 0), -EDEADLK);
  std::string why = rtaccel_ros_error(ex);
  EXPECT_NE(why.find("refused"), std::string::npos) << why;
  EXPECT_NE(why.find("offloaded"), std::string::npos) << why;
  rtaccel_ros_executor_destroy(ex);
  // without a server there
  rtaccel_ros_executor_attr attr{};
  attr.policy = RTACCEL_ROS_PAAM;
  attr.core = -1;
  attr.socket_path = "/tmp/rtaccel-ros-test-no-server.sock";
  ASSERT_EQ(rtaccel_ros_executor_create(&context_, &attr, &ex), 0);
  auto a = named("offload");
  a.nsegments = 1;
  snprintf(a.segments[0].service, sizeof(a.segments[0].service), "busy");
  a.segments[0].wcet_ns = kMs;
  rtaccel_ros_handle* h = nullptr;
  ASSERT_EQ(rtaccel_ros_add_timer(ex, timer(20 * kMs), offload, &seen, &a, &h), 0);
  EXPECT_EQ(rtaccel_ros_spin_once(ex, 0), -EINVAL);  // in no chain
  EXPECT_NE(std::string(rtaccel_ros_error(ex)).find("in no chain"), std::string::npos) << rtaccel_ros_error(ex);
  rtaccel_ros_executor_destroy(ex);
}

// The context shut down under a spin ends it, as rclcpp's executors end.
TEST_F(Ros, ShuttingTheContextDownEndsTheSpin) {
  rtaccel_ros_executor* ex = make(&context_, RTACCEL_ROS_ROS2);
  ASSERT_EQ(rtaccel_ros_add_timer(ex, timer(kSecond), nullptr, nullptr, nullptr, nullptr), 0);
  std::atomic<int> spun{1};
  std::thread spinner([&] { spun = rtaccel_ros_spin(ex); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto at = std::chrono::steady_clock::now();
  ASSERT_EQ(rcl_shutdown(&context_), RCL_RET_OK);
  spinner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - at, std::chrono::seconds(1));
  EXPECT_EQ(spun, 0);
  rtaccel_ros_executor_destroy(ex);
  shut_down_ = true;
}

}  // namespace
