// rtaccel-ros-bench: rtaccel's executor for rcl (rtaccel/ros.h) under its
// ros2 and picas policies, on one ROS 2 graph, in one process and one run.
//
// The graph, made anew for each policy on one node:
// - a critical chain: a timer every 100 ms (1 ms of work), then two
//   subscriptions (2 ms and 3 ms), each passing a message on;
// - a best-effort chain beside it that overloads the executor: a timer
//   every 10 ms (1 ms), then two subscriptions of 6 ms each: 13 ms of work
//   every 10 ms.
// Work is CPU time of the executor's thread (CLOCK_THREAD_CPUTIME_ID), so
// that what a callback declares is what it does however the machine
// interferes. The best-effort chain's handles are added first: ros2's
// order (rclcpp's SingleThreadedExecutor's, the baseline) then serves it
// first among those found ready together, as a program that made its
// best-effort nodes first would have it.
//
// One executor, pinned to one core, spins each policy for --seconds. Per
// policy: the critical chain's latency as the executor measures it (its
// timer's expected call time to its last callback's end, source
// timestamps), its deadline misses and the analysis' bound (picas; ros2 is
// not analysed), and the executor's dispatch cost per callback with the
// rmw's wait and take beside it.
//
// The best-effort chain keeps the executor's thread busy all the time: at
// SCHED_FIFO the kernel's real-time throttling stops it for 50 ms of every
// second (kernel.sched_rt_runtime_us, 950 ms by default), which no bound
// counts, and picas has none (rtaccel_ros_chain_stats says why).
// --no-rt-throttling turns the throttling off for the run (root's), and puts
// it back as the bench ends, interrupted or not.
//
// usage: rtaccel-ros-bench [--seconds 10] [--core N] [--fifo PRIO]
//                          [--domain ID] [--machine NAME] [--no-rt-throttling] [--json]
#include <rcl/error_handling.h>
#include <fcntl.h>
#include <rcl/rcl.h>
#include <sched.h>
#include <signal.h>
#include <std_msgs/msg/int64.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rtaccel/ros.h"

namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;
// Declared WCET = the work + this: the publish and the executor's
// bookkeeping around the callback, with room for a slow moment.
constexpr int64_t kWcetMarginNs = kMs / 2;
// How long a stop may wait for the callback under way (the longest is 6 ms).
constexpr int64_t kStopWaitNs = 2 * kSecond;
// The goals of the issue: picas' critical p99 against ros2's, and the
// executor's own cost per callback.
constexpr double kGoalP99Ratio = 0.2;
constexpr double kGoalDispatchP99Us = 5.0;

struct ChainSpec {
  const char* name;
  int64_t period_ns;
  int64_t work_ns[3];  // the timer's, then each subscription's
  int32_t priority;
  int64_t deadline_ns;  // 0: none
};

constexpr ChainSpec kBestEffort{"best_effort", 10 * kMs, {1 * kMs, 6 * kMs, 6 * kMs}, 1, 0};
constexpr ChainSpec kCritical{"critical", 100 * kMs, {1 * kMs, 2 * kMs, 3 * kMs}, 10, 100 * kMs};
constexpr size_t kSteps = 3;

struct Options {
  double seconds = 10.0;
  int core = -1;
  int fifo = 0;
  int domain = -1;
  bool json = false;
  bool no_rt_throttling = false;
  std::string machine;  // its name in the results; "": "<cores>-core"
  std::string command;
};

[[noreturn]] void usage_error(const std::string& why) {
  fprintf(stderr,
          "rtaccel-ros-bench: %s\n"
          "usage: rtaccel-ros-bench [--seconds S] [--core N] [--fifo PRIO] [--domain ID] [--machine NAME] "
          "[--no-rt-throttling] [--json]\n",
          why.c_str());
  exit(2);
}

std::string rcl_says() {
  std::string s = rcl_get_error_string().str;
  rcl_reset_error();
  return s;
}

void check_rcl(rcl_ret_t ret, const std::string& what) {
  if (ret != RCL_RET_OK) throw std::runtime_error(what + ": " + rcl_says());
}

void check_ros(int err, rtaccel_ros_executor* ex, const std::string& what) {
  if (err == 0) return;
  std::string why = ex ? rtaccel_ros_error(ex) : "";
  throw std::runtime_error(what + ": " + strerror(-err) + (why.empty() ? "" : " (" + why + ")"));
}

// The core the executor runs on by default: 1 where this process may use
// it (core 0 takes the machine's interrupts and housekeeping), else the
// first it may use.
int default_core() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  if (CPU_ISSET(1, &set)) return 1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) return c;
  return 0;
}

long parse_long(const char* flag, const char* text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || *end || v < lo || v > hi)
    usage_error(std::string(flag) + " " + text + ": an integer " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--seconds") {
      const char* v = value();
      char* end = nullptr;
      o.seconds = strtod(v, &end);
      if (end == v || *end || !(o.seconds > 0) || o.seconds > 3600)
        usage_error(std::string("--seconds ") + v + ": a duration over 0, at most 3600");
    } else if (a == "--core") {
      o.core = static_cast<int>(parse_long("--core", value(), 0, CPU_SETSIZE - 1));
    } else if (a == "--fifo") {
      o.fifo = static_cast<int>(parse_long("--fifo", value(), 1, 99));
    } else if (a == "--domain") {
      // 0..232: the domains whose ports UDP's range holds
      o.domain = static_cast<int>(parse_long("--domain", value(), 0, 232));
    } else if (a == "--machine") {
      o.machine = value();
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--no-rt-throttling") {
      o.no_rt_throttling = true;
    } else if (a == "-h" || a == "--help") {
      printf("usage: rtaccel-ros-bench [--seconds S] [--core N] [--fifo PRIO] [--domain ID] [--machine NAME] "
          "[--no-rt-throttling] [--json]\n");
      exit(0);
    } else {
      usage_error("unknown argument " + a);
    }
  }
  if (o.core < 0) o.core = default_core();
  // a domain of its own: tests of this machine take 1..100 (rclpy's) and
  // 101..230 (the C tests', from their pid); a run beside them is told apart
  // by its pid too
  if (o.domain < 0) o.domain = 101 + static_cast<int>(getpid() % 130);
  return o;
}

// ---- the graph -----------------------------------------------------------------------

// CPU time of the calling thread, burnt: the callback's work.
void burn(int64_t ns) {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  int64_t end = t.tv_sec * kSecond + t.tv_nsec + ns;
  do {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  } while (t.tv_sec * kSecond + t.tv_nsec < end);
}

// One callback: its work, and the publisher of the chain's next step.
struct Step {
  int64_t work_ns = 0;
  rcl_publisher_t* next = nullptr;  // null: the chain's last
  std_msgs__msg__Int64 msg{};       // a subscription's storage
  std::atomic<uint64_t> publish_failures{0};
};

void run_step(rtaccel_ros_call* call) {
  auto* step = static_cast<Step*>(call->arg);
  burn(step->work_ns);
  if (!step->next) return;
  std_msgs__msg__Int64 out{};
  out.data = call->release_ns;
  // a failure is counted, not said here: stderr is no place for the
  // executor's thread; the run fails on it afterwards
  if (rcl_publish(step->next, &out, nullptr) != RCL_RET_OK) {
    rcl_reset_error();
    step->publish_failures.fetch_add(1, std::memory_order_relaxed);
  }
}

// A context and a node, in the bench's domain, discovery kept to the host
// (main's environment), and the steady clock of the timers.
class Ros {
 public:
  explicit Ros(int domain) {
    rcl_init_options_t options = rcl_get_zero_initialized_init_options();
    check_rcl(rcl_init_options_init(&options, rcl_get_default_allocator()), "rcl_init_options_init");
    rcl_ret_t ret = rcl_init_options_set_domain_id(&options, static_cast<size_t>(domain));
    if (ret == RCL_RET_OK) ret = rcl_init(0, nullptr, &options, &context_);
    std::string why = ret == RCL_RET_OK ? "" : rcl_says();
    if (rcl_init_options_fini(&options) != RCL_RET_OK) rcl_reset_error();
    if (ret != RCL_RET_OK) throw std::runtime_error("rcl_init (domain " + std::to_string(domain) + "): " + why);
    rcl_node_options_t node_options = rcl_node_get_default_options();
    ret = rcl_node_init(&node_, "rtaccel_ros_bench", "", &context_, &node_options);
    if (ret != RCL_RET_OK) {
      why = rcl_says();
      finish(false);
      throw std::runtime_error("rcl_node_init: " + why);
    }
    rcl_allocator_t allocator = rcl_get_default_allocator();
    if (rcl_clock_init(RCL_STEADY_TIME, &clock_, &allocator) != RCL_RET_OK) {
      why = rcl_says();
      finish(true);
      throw std::runtime_error("the steady clock: " + why);
    }
  }
  ~Ros() {
    if (rcl_clock_fini(&clock_) != RCL_RET_OK) rcl_reset_error();
    finish(true);
  }
  Ros(const Ros&) = delete;
  Ros& operator=(const Ros&) = delete;

  rcl_context_t context_ = rcl_get_zero_initialized_context();
  rcl_node_t node_ = rcl_get_zero_initialized_node();
  rcl_clock_t clock_{};

 private:
  // The node (where made) and the context, ended: errors at the end say
  // nothing the figures need.
  void finish(bool node) {
    if (node && rcl_node_fini(&node_) != RCL_RET_OK) rcl_reset_error();
    if (rcl_shutdown(&context_) != RCL_RET_OK) rcl_reset_error();
    if (rcl_context_fini(&context_) != RCL_RET_OK) rcl_reset_error();
  }
};

const rosidl_message_type_support_t* int64_type() { return ROSIDL_GET_MSG_TYPE_SUPPORT(std_msgs, msg, Int64); }

// One chain's entities: its timer, and a publisher and a subscription per
// message passed on. Its timer starts stopped (start()), so that discovery
// and the other chain's making are not in the measurement.
class Chain {
 public:
  Chain(Ros& ros, const ChainSpec& spec, const std::string& prefix) : ros_(ros), spec_(spec) {
    check_rcl(rcl_timer_init2(&timer_, &ros.clock_, &ros.context_, spec.period_ns, nullptr,
                              rcl_get_default_allocator(), false),
              std::string(spec.name) + "'s timer");
    timer_live_ = true;
    for (size_t i = 0; i + 1 < kSteps; ++i) {
      std::string topic = prefix + "/" + spec.name + "/step" + std::to_string(i + 1);
      rcl_publisher_options_t pub_options = rcl_publisher_get_default_options();
      check_rcl(rcl_publisher_init(&pubs_[i], &ros.node_, int64_type(), topic.c_str(), &pub_options),
                "publisher on " + topic);
      ++pubs_live_;
      rcl_subscription_options_t sub_options = rcl_subscription_get_default_options();
      check_rcl(rcl_subscription_init(&subs_[i], &ros.node_, int64_type(), topic.c_str(), &sub_options),
                "subscription to " + topic);
      ++subs_live_;
    }
    for (size_t i = 0; i < kSteps; ++i) {
      steps_[i].work_ns = spec.work_ns[i];
      steps_[i].next = i + 1 < kSteps ? &pubs_[i] : nullptr;
    }
  }
  ~Chain() {
    for (size_t i = 0; i < subs_live_; ++i)
      if (rcl_subscription_fini(&subs_[i], &ros_.node_) != RCL_RET_OK) rcl_reset_error();
    for (size_t i = 0; i < pubs_live_; ++i)
      if (rcl_publisher_fini(&pubs_[i], &ros_.node_) != RCL_RET_OK) rcl_reset_error();
    if (timer_live_ && rcl_timer_fini(&timer_) != RCL_RET_OK) rcl_reset_error();
  }
  Chain(const Chain&) = delete;
  Chain& operator=(const Chain&) = delete;

  // Waits until each publisher is matched by its subscription (discovery
  // within the participant), at most 10 s.
  void wait_matched() {
    for (size_t i = 0; i + 1 < kSteps; ++i) {
      bool matched = false;
      for (int tries = 0; tries < 1000 && !matched; ++tries) {
        size_t subs = 0, pubs = 0;
        matched = rcl_publisher_get_subscription_count(&pubs_[i], &subs) == RCL_RET_OK && subs > 0 &&
                  rcl_subscription_get_publisher_count(&subs_[i], &pubs) == RCL_RET_OK && pubs > 0;
        if (!matched) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (!matched)
        throw std::runtime_error(std::string(spec_.name) + ": a publisher found no subscription in 10 s (discovery)");
    }
  }

  // Its handles added to EX, each declaring its WCET, and the chain declared.
  void add_to(rtaccel_ros_executor* ex) {
    rtaccel_ros_handle* handles[kSteps] = {};
    for (size_t i = 0; i < kSteps; ++i) {
      std::string name = std::string(spec_.name) + (i == 0 ? "/timer" : "/sub" + std::to_string(i));
      rtaccel_ros_callback_attr attr;
      rtaccel_ros_callback_attr_init(&attr);
      attr.name = name.c_str();
      attr.cpu_wcet_ns = static_cast<uint64_t>(spec_.work_ns[i] + kWcetMarginNs);
      int err = i == 0 ? rtaccel_ros_add_timer(ex, &timer_, run_step, &steps_[0], &attr, &handles[0])
                       : rtaccel_ros_add_subscription(ex, &subs_[i - 1], &steps_[i].msg, run_step, &steps_[i],
                                                      &attr, &handles[i]);
      check_ros(err, ex, "adding " + name);
    }
    rtaccel_ros_chain_attr chain{};
    chain.priority = spec_.priority;
    chain.deadline_ns = static_cast<uint64_t>(spec_.deadline_ns);
    check_ros(rtaccel_ros_add_chain(ex, spec_.name, handles, kSteps, &chain), ex,
              std::string("declaring chain ") + spec_.name);
  }

  void start() { check_rcl(rcl_timer_reset(&timer_), std::string(spec_.name) + "'s timer, started"); }

  uint64_t publish_failures() const {
    uint64_t n = 0;
    for (const Step& s : steps_) n += s.publish_failures.load();
    return n;
  }

 private:
  Ros& ros_;
  const ChainSpec& spec_;
  rcl_timer_t timer_ = rcl_get_zero_initialized_timer();
  bool timer_live_ = false;
  rcl_publisher_t pubs_[kSteps - 1] = {rcl_get_zero_initialized_publisher(), rcl_get_zero_initialized_publisher()};
  rcl_subscription_t subs_[kSteps - 1] = {rcl_get_zero_initialized_subscription(),
                                          rcl_get_zero_initialized_subscription()};
  size_t pubs_live_ = 0, subs_live_ = 0;
  Step steps_[kSteps];
};

// ---- one policy's run -----------------------------------------------------------------

double us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

Json chain_figures(rtaccel_ros_executor* ex, size_t index) {
  rtaccel_ros_chain_stats s{};
  check_ros(rtaccel_ros_chain_query(ex, index, &s), ex, "rtaccel_ros_chain_query");
  Json j;
  j["count"] = s.count;
  j["p50_us"] = s.count ? Json(us(s.p50_ns)) : Json(nullptr);
  j["p99_us"] = s.count ? Json(us(s.p99_ns)) : Json(nullptr);
  j["max_us"] = s.count ? Json(us(s.max_ns)) : Json(nullptr);
  j["deadline_ms"] = s.deadline_ns ? Json(static_cast<double>(s.deadline_ns) / 1e6) : Json(nullptr);
  j["deadline_misses"] = s.deadline_misses;
  j["unattributed"] = s.unattributed;
  j["bound_us"] = s.bounded ? Json(us(s.bound_ns)) : Json(nullptr);
  if (!s.bounded) j["why_unbounded"] = s.why_unbounded;
  return j;
}

Json dispatch_figures(rtaccel_ros_executor* ex) {
  rtaccel_ros_dispatch_stats d{};
  check_ros(rtaccel_ros_dispatch_query(ex, &d), ex, "rtaccel_ros_dispatch_query");
  Json j;
  j["callbacks"] = d.callbacks;
  j["p50_us"] = us(d.p50_ns);
  j["p99_us"] = us(d.p99_ns);
  j["max_us"] = us(d.max_ns);
  // ros2 sleeps in every wait it makes; only zero-timeout waits (picas'
  // look before each callback) are sampled
  bool waits = d.wait_p99_ns != 0;
  j["wait_p50_us"] = waits ? Json(us(d.wait_p50_ns)) : Json(nullptr);
  j["wait_p99_us"] = waits ? Json(us(d.wait_p99_ns)) : Json(nullptr);
  j["take_p50_us"] = us(d.take_p50_ns);
  j["take_p99_us"] = us(d.take_p99_ns);
  return j;
}

// Spins EX in a thread of its own for SECONDS (the executor pins it and
// sets its policy; the main thread keeps its own), then stops it. Returns
// whether that thread ran at SCHED_FIFO.
// --no-rt-throttling: kernel.sched_rt_runtime_us -1 for the run, what it
// was written back at exit, before _exit, and on the signals that end the
// bench (from the handler: open and write are async-signal-safe; SIGABRT
// is what std::terminate raises).
constexpr const char* kRtRuntime = "/proc/sys/kernel/sched_rt_runtime_us";
char saved_runtime[32];
size_t saved_len;

void put_throttling_back() {
  if (!saved_len) return;
  int fd = open(kRtRuntime, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = write(fd, saved_runtime, saved_len);
  (void)n;
  close(fd);
}

void put_back_and_end(int sig) {
  put_throttling_back();
  signal(sig, SIG_DFL);
  raise(sig);
}

void throttling_off() {
  FILE* f = fopen(kRtRuntime, "re");
  if (!f || !fgets(saved_runtime, sizeof saved_runtime, f)) {
    fprintf(stderr, "rtaccel-ros-bench: --no-rt-throttling: cannot read %s: %s\n", kRtRuntime, strerror(errno));
    exit(1);
  }
  fclose(f);
  int fd = open(kRtRuntime, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "-1\n", 3) != 3) {
    fprintf(stderr, "rtaccel-ros-bench: --no-rt-throttling: cannot set %s (%s; it needs root)\n", kRtRuntime,
            strerror(errno));
    exit(1);
  }
  close(fd);
  saved_len = strlen(saved_runtime);
  atexit(put_throttling_back);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT})
    if (signal(sig, put_back_and_end) == SIG_IGN) signal(sig, SIG_IGN);  // ignored (nohup): stays so
  fprintf(stderr, "# rtaccel-ros-bench: %s -1 for the run (was %.*s)\n", kRtRuntime,
          static_cast<int>(strcspn(saved_runtime, "\n")), saved_runtime);
}

// What took the executor's core from its thread while it spun, beside the
// latencies: a bound counts neither. The hypervisor's steal on the core
// (/proc/stat, in ticks of 10 ms), and the times a thread preempted it
// (its involuntary context switches: only a higher priority's, at FIFO).
struct Interference {
  double steal_ms = 0;
  long preempted = 0;
};

double core_steal_ms(int core) {
  std::ifstream stat("/proc/stat");
  std::string line, want = "cpu" + std::to_string(core) + " ";
  while (std::getline(stat, line))
    if (line.rfind(want, 0) == 0) {
      std::istringstream fields(line.substr(want.size()));
      unsigned long long v[8] = {};
      for (auto& f : v) fields >> f;
      return static_cast<double>(v[7]) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  return 0;
}

long own_involuntary_switches() {
  std::ifstream status("/proc/thread-self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(27));
  return 0;
}

bool spin_for(rtaccel_ros_executor* ex, double seconds, int core, Interference* got) {
  int result = 0;
  bool fifo = false;
  double steal = core_steal_ms(core);
  std::thread spinner([&] {
    long before = own_involuntary_switches();  // the first group spins in the thread that calls spin
    result = rtaccel_ros_spin(ex);
    got->preempted = own_involuntary_switches() - before;
    fifo = rtaccel_ros_group_realtime(rtaccel_ros_executor_group(ex)) == 1;
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  int stopped = rtaccel_ros_stop_wait(ex, kStopWaitNs);
  if (stopped != 0) {
    // a callback that does not return cannot be ended from here
    fprintf(stderr, "rtaccel-ros-bench: %s\n", rtaccel_ros_error(ex));
    put_throttling_back();  // _exit runs no atexit handler
    _exit(1);
  }
  spinner.join();
  got->steal_ms = core_steal_ms(core) - steal;
  check_ros(result, ex, "rtaccel_ros_spin");
  return fifo;
}

Json run_policy(Ros& ros, const Options& o, uint32_t policy, const char* name) {
  Chain best_effort(ros, kBestEffort, name);
  Chain critical(ros, kCritical, name);
  best_effort.wait_matched();
  critical.wait_matched();
  rtaccel_ros_executor_attr attr{};
  attr.policy = policy;
  attr.core = o.core;
  attr.fifo_priority = o.fifo;
  attr.name = name;
  // the longest callback is 6 ms: a tenth of a second is an overrun
  attr.overrun_ns = 100 * kMs;
  attr.node = &ros.node_;
  rtaccel_ros_executor* ex = nullptr;
  check_ros(rtaccel_ros_executor_create(&ros.context_, &attr, &ex), nullptr,
            std::string("the ") + name + " executor (core " + std::to_string(o.core) + ")");
  std::unique_ptr<rtaccel_ros_executor, void (*)(rtaccel_ros_executor*)> hold(ex, rtaccel_ros_executor_destroy);
  best_effort.add_to(ex);  // first: ros2's order serves it first
  critical.add_to(ex);
  best_effort.start();
  critical.start();
  Interference interference;
  bool fifo = spin_for(ex, o.seconds, o.core, &interference);
  if (uint64_t failed = best_effort.publish_failures() + critical.publish_failures())
    throw std::runtime_error(std::string(name) + ": " + std::to_string(failed) + " publishes failed");
  Json j;
  j["policy"] = name;
  j["fifo"] = fifo;
  j["critical"] = chain_figures(ex, 1);
  j["best_effort"] = chain_figures(ex, 0);
  j["dispatch"] = dispatch_figures(ex);
  j["interference"] = {{"steal_ms", interference.steal_ms}, {"preempted", interference.preempted}};
  return j;
}

// ---- the report -----------------------------------------------------------------------

Json graph_description() {
  auto chain = [](const ChainSpec& c) {
    Json j;
    j["period_ms"] = static_cast<double>(c.period_ns) / 1e6;
    j["work_ms"] = Json::array();
    for (int64_t w : c.work_ns) j["work_ms"].push_back(static_cast<double>(w) / 1e6);
    j["wcet_margin_ms"] = static_cast<double>(kWcetMarginNs) / 1e6;
    j["priority"] = c.priority;
    j["deadline_ms"] = c.deadline_ns ? Json(static_cast<double>(c.deadline_ns) / 1e6) : Json(nullptr);
    return j;
  };
  return Json{{"critical", chain(kCritical)}, {"best_effort", chain(kBestEffort)}};
}

std::optional<double> number(const Json& j) {
  if (j.is_number()) return j.get<double>();
  return std::nullopt;
}

Json ratios(const Json& ros2, const Json& picas) {
  Json j;
  auto a = number(picas["critical"]["p99_us"]), b = number(ros2["critical"]["p99_us"]);
  std::optional<double> r;
  if (a && b && *b > 0) r = *a / *b;
  j["critical_p99_picas_over_ros2"] = r ? Json(*r) : Json(nullptr);
  j["critical_p99_goal"] = kGoalP99Ratio;
  j["critical_p99_goal_met"] = r && *r <= kGoalP99Ratio;
  j["dispatch_p99_goal_us"] = kGoalDispatchP99Us;
  for (const Json* p : {&ros2, &picas}) {
    double d = (*p)["dispatch"]["p99_us"].get<double>();
    j["dispatch_p99_goal_met"][(*p)["policy"].get<std::string>()] = d <= kGoalDispatchP99Us;
  }
  return j;
}

std::string ms(const Json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f", v.get<double>() / 1e3);
  return buf;
}

std::string usec(const Json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f", v.get<double>());
  return buf;
}

void print_table(const Json& r) {
  printf("critical chain (timer 100 ms; 1 + 2 + 3 ms) beside an overloading best-effort chain "
         "(timer 10 ms; 1 + 6 + 6 ms), %g s per policy, one executor on core %d of %d%s\n\n",
         r["seconds"].get<double>(), r["core"].get<int>(), r["cores"].get<int>(),
         r["fifo"].is_number() ? (" at SCHED_FIFO " + std::to_string(r["fifo"].get<int>())).c_str() : "");
  printf("%-6s %6s %8s %8s %8s %7s %9s | %10s %9s %9s | %10s %10s | %10s %10s\n", "policy", "count", "p50 ms",
         "p99 ms", "max ms", "misses", "bound ms", "dispatch", "p99 us", "max us", "wait p50", "p99 us", "take p50",
         "p99 us");
  for (const Json& p : r["policies"]) {
    const Json& c = p["critical"];
    const Json& d = p["dispatch"];
    printf("%-6s %6llu %8s %8s %8s %7llu %9s | %7s us %9s %9s | %7s us %10s | %7s us %10s\n",
           p["policy"].get<std::string>().c_str(), c["count"].get<unsigned long long>(), ms(c["p50_us"]).c_str(),
           ms(c["p99_us"]).c_str(), ms(c["max_us"]).c_str(), c["deadline_misses"].get<unsigned long long>(),
           ms(c["bound_us"]).c_str(), usec(d["p50_us"]).c_str(), usec(d["p99_us"]).c_str(),
           usec(d["max_us"]).c_str(), usec(d["wait_p50_us"]).c_str(), usec(d["wait_p99_us"]).c_str(),
           usec(d["take_p50_us"]).c_str(), usec(d["take_p99_us"]).c_str());
  }
  for (const Json& p : r["policies"])
    if (p["critical"].contains("why_unbounded"))
      printf("%s: no bound: %s\n", p["policy"].get<std::string>().c_str(),
             p["critical"]["why_unbounded"].get<std::string>().c_str());
  const Json& q = r["ratios"];
  printf("critical p99, picas / ros2: %s (goal <= %.2f: %s)\n",
         q["critical_p99_picas_over_ros2"].is_number()
             ? std::to_string(q["critical_p99_picas_over_ros2"].get<double>()).substr(0, 5).c_str()
             : "-",
         kGoalP99Ratio, q["critical_p99_goal_met"].get<bool>() ? "met" : "not met");
  for (const Json& p : r["policies"]) {
    std::string name = p["policy"].get<std::string>();
    printf("dispatch p99, %s: %s us (goal <= %.0f us: %s)\n", name.c_str(), usec(p["dispatch"]["p99_us"]).c_str(),
           kGoalDispatchP99Us, q["dispatch_p99_goal_met"][name].get<bool>() ? "met" : "not met");
  }
}

// The figures as a table of docs/results (tools/docs/tables.py's format),
// the rows a policy each.
void add_table(Json& r) {
  auto col = [](const char* name, const char* format) {
    Json c{{"name", name}};
    if (format) c["align"] = "right", c["format"] = format;
    return c;
  };
  r["columns"] = Json::array({Json{{"name", "policy"}}, col("critical instances", "{}"), col("p50 ms", "{:.1f}"),
                              col("p99 ms", "{:.1f}"), col("max ms", "{:.1f}"), col("misses", "{}"),
                              col("bound ms", "{:.1f}"), col("p99 / ros2", "{:.2f}"),
                              col("dispatch p50 µs", "{:.1f}"), col("dispatch p99 µs", "{:.1f}"),
                              col("dispatch max µs", "{:.1f}"), col("wait p99 µs", "{:.1f}"),
                              col("take p99 µs", "{:.1f}")});
  auto in_ms = [](const Json& v) { return v.is_number() ? Json(v.get<double>() / 1e3) : Json(nullptr); };
  std::optional<double> base = number(r["policies"][0]["critical"]["p99_us"]);
  r["rows"] = Json::array();
  for (const Json& p : r["policies"]) {
    const Json& c = p["critical"];
    const Json& d = p["dispatch"];
    std::optional<double> p99 = number(c["p99_us"]);
    Json vs = p99 && base && *base > 0 ? Json(*p99 / *base) : Json(nullptr);
    r["rows"].push_back(Json::array({p["policy"], c["count"], in_ms(c["p50_us"]), in_ms(c["p99_us"]),
                                     in_ms(c["max_us"]), c["deadline_misses"], in_ms(c["bound_us"]), vs,
                                     d["p50_us"], d["p99_us"], d["max_us"], d["wait_p99_us"], d["take_p99_us"]}));
  }
}

std::string today() {
  time_t now = time(nullptr);
  tm t{};
  gmtime_r(&now, &t);
  char buf[16];
  strftime(buf, sizeof(buf), "%Y-%m-%d", &t);
  return buf;
}

int run(const Options& o) {
  Ros ros(o.domain);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  Json r;
  r["format"] = "rtaccel-table 1";
  r["date"] = today();
  r["machine"] = o.machine.empty() ? std::to_string(cores) + "-core" : o.machine;
  r["command"] = o.command;
  r["cores"] = cores;
  r["core"] = o.core;
  r["fifo"] = o.fifo ? Json(o.fifo) : Json(nullptr);
  r["rt_throttling"] = !o.no_rt_throttling;
  r["seconds"] = o.seconds;
  r["domain"] = o.domain;
  r["graph"] = graph_description();
  Json ros2 = run_policy(ros, o, RTACCEL_ROS_ROS2, "ros2");
  Json picas = run_policy(ros, o, RTACCEL_ROS_PICAS, "picas");
  r["policies"] = Json::array({ros2, picas});
  r["ratios"] = ratios(ros2, picas);
  add_table(r);
  if (o.json)
    printf("%s\n", r.dump(1).c_str());
  else
    print_table(r);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (o.no_rt_throttling) throttling_off();
  // Before rcl reads them: discovery on this host only, and Fast DDS over
  // UDP alone, whose shared-memory transport would leave port segments in
  // /dev/shm behind.
  setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST", 1);
  setenv("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4", 1);
  try {
    return run(o);
  } catch (const std::exception& e) {
    fprintf(stderr, "rtaccel-ros-bench: %s\n", e.what());
    return 1;
  }
}
