#include "core/busy.h"
#include "core/clock.h"
#include "core/fd.h"
#include "exec/executor.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "core/futex.h"
#include "core/realtime.h"
#include "core/thread.h"
#include "rtaccel/lock.h"

namespace rtaccel::exec {
namespace {

using core::monotonic_ns;

// The executor failed: why, and its errno, which the runner's exit status
// follows (an admission refusal, EDEADLK, is not a runtime failure).
void fail(ExecutorState* state, const std::string& why, int err = 0) {
  snprintf(state->error, sizeof(state->error), "%s", why.c_str());
  state->error_code = err;
  state->status.store(static_cast<uint32_t>(ExecutorStatus::kFailed), std::memory_order_release);
}

class Executor {
 public:
  explicit Executor(const ExecutorConfig& config)
      : config_(config),
        workload_(*config.workload),
        plan_(*config.plan),
        shared_(*config.shared),
        state_(config.shared->executor(config.executor)),
        mine_(config.plan->by_executor[config.executor]) {}

  Status run();

 private:
  struct Pick {
    size_t callback = SIZE_MAX;
    uint64_t release_ns = 0;  // timers: the activation's release time
  };
  struct CallbackState {
    uint64_t next_release = 0;  // timers
    bool running = false;
  };
  // Per thread, so that running a callback allocates nothing.
  struct Scratch {
    std::vector<Message> inputs;
    Message output;
  };

  bool ready(size_t cb) const;
  Pick pick(uint64_t now);
  void take(size_t cb, uint64_t now, Pick* out);
  uint64_t next_timer() const;
  void loop(size_t thread);
  void run_callback(size_t thread, const Pick& pick, Scratch* scratch);
  void run_job(size_t thread, const Pick& pick, Scratch* scratch);
  uint64_t work(size_t cb, uint64_t ns);
  void trace(const TraceEvent& event);

  const ExecutorConfig& config_;
  const workload::Workload& workload_;
  const Plan& plan_;
  SharedRun& shared_;
  ExecutorState* state_;
  const std::vector<size_t>& mine_;  // registration order
  SegmentTable requests_;  // the run's sizes, with this executor's requests built
  std::unique_ptr<AccelPath> path_;
  pthread_mutex_t lock_;  // guards states_ and snapshot_ between the threads
  std::vector<CallbackState> states_;
  uint64_t end_ns_ = UINT64_MAX;  // the run's: timers release nothing at or after it
  std::deque<size_t> snapshot_;  // ros2: the callbacks of the current polling point
  // Per callback of this executor with a working set: its walk (a callback
  // never runs on two threads at once, so each has one position).
  std::vector<core::MemoryWalk> walks_;
  rtaccel_bwlock_t* bwlock_ = nullptr;  // isolation: the run's bandwidth lock
};

bool Executor::ready(size_t cb) const {
  const auto& p = plan_.callbacks[cb];
  if (states_[cb].running) return false;
  if (p.timer >= 0) return states_[cb].next_release < end_ns_ && core::monotonic_ns() >= states_[cb].next_release;
  for (uint32_t q : p.inputs)
    if (__atomic_load_n(&shared_.queue(q)->count, __ATOMIC_ACQUIRE) == 0) return false;
  return true;
}

void Executor::take(size_t cb, uint64_t now, Pick* out) {
  out->callback = cb;
  auto& s = states_[cb];
  s.running = true;
  const auto& p = plan_.callbacks[cb];
  if (p.timer < 0) return;
  out->release_ns = s.next_release;
  // Like a ROS 2 timer: activations missed by more than a period are skipped,
  // not run in a burst.
  s.next_release += p.period_ns;
  if (s.next_release <= now) {
    const uint64_t missed = (now - s.next_release) / p.period_ns + 1;
    // Skipped, of those the run would have made: before its end.
    const uint64_t before_end =
        s.next_release < end_ns_ ? (end_ns_ - s.next_release + p.period_ns - 1) / p.period_ns : 0;
    s.next_release += missed * p.period_ns;
    state_->overruns.fetch_add(std::min(missed, before_end), std::memory_order_relaxed);
  }
}

Executor::Pick Executor::pick(uint64_t now) {
  Pick out;
  if (config_.policy == Policy::kRos2) {
    // A polling point: when the previous snapshot is used up, take a new one
    // of what is ready, timers first, then subscriptions, each in
    // registration order; run it in that order before looking again.
    if (snapshot_.empty()) {
      for (size_t cb : mine_)
        if (plan_.callbacks[cb].timer >= 0 && ready(cb)) snapshot_.push_back(cb);
      for (size_t cb : mine_)
        if (plan_.callbacks[cb].timer < 0 && ready(cb)) snapshot_.push_back(cb);
    }
    for (auto it = snapshot_.begin(); it != snapshot_.end(); ++it) {
      if (states_[*it].running) continue;  // another thread of the executor has it
      const size_t cb = *it;
      snapshot_.erase(it);
      take(cb, now, &out);
      return out;
    }
    return out;
  }
  // picas, paam: the highest-priority ready callback; registration order
  // among equals.
  int best = INT_MIN;
  for (size_t cb : mine_) {
    if (plan_.callbacks[cb].priority > best && ready(cb)) {
      best = plan_.callbacks[cb].priority;
      out.callback = cb;
    }
  }
  if (out.callback != SIZE_MAX) take(out.callback, now, &out);
  return out;
}

uint64_t Executor::next_timer() const {
  uint64_t next = UINT64_MAX;
  for (size_t cb : mine_)
    if (plan_.callbacks[cb].timer >= 0 && !states_[cb].running && states_[cb].next_release < end_ns_)
      next = std::min(next, states_[cb].next_release);
  return next;
}

void Executor::trace(const TraceEvent& event) {
  const uint64_t i = state_->trace_used.fetch_add(1, std::memory_order_relaxed);
  if (i < shared_.trace_capacity(config_.executor)) shared_.trace(config_.executor)[i] = event;
}

// `ns` of the callback's work, as measured alone: a walk over its working
// set, or the busy loop. Returns the CPU time it took, which interference
// from other cores (a shared cache, DRAM) stretches. Two system calls (the
// thread's CPU clock) per piece of work: the monitor's price, against the
// hundreds of microseconds a piece lasts.
uint64_t Executor::work(size_t cb, uint64_t ns) {
  const uint64_t before = core::thread_cpu_ns();
  const double per_line = config_.walk_ns_per_line ? (*config_.walk_ns_per_line)[cb] : 0;
  if (per_line > 0 && walks_[cb].lines())
    walks_[cb].walk(static_cast<uint64_t>(static_cast<double>(ns) / per_line));
  else
    core::busy_for_ns(ns);
  return core::thread_cpu_ns() - before;
}

void Executor::run_callback(size_t thread, const Pick& pick, Scratch* scratch) {
  const size_t cb = pick.callback;
  const auto& p = plan_.callbacks[cb];
  const auto& callback = workload_.callbacks[cb];
  const uint64_t begin = core::monotonic_ns();
  uint64_t release = pick.release_ns;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    queue_pop(shared_, p.inputs[i], &scratch->inputs[i]);
    release = std::max(release, scratch->inputs[i].publish_ns);
  }
  Message& out = scratch->output;
  std::fill(std::begin(out.stamps), std::end(out.stamps), 0);
  for (const auto& role : p.roles)
    out.stamps[role.chain] = role.input < 0 ? release : scratch->inputs[role.input].stamps[role.chain];
  // The instance its trace events belong to: of its most critical chain
  // that it carries one of (the trace's flow arrows follow it).
  uint32_t traced_chain = 0;
  uint64_t instance = 0;
  for (const auto& role : p.roles)
    if (out.stamps[role.chain] &&
        (!instance || workload_.chains[role.chain].priority > workload_.chains[traced_chain].priority)) {
      traced_chain = role.chain;
      instance = out.stamps[role.chain];
    }

  // The callback's CPU work, split evenly around its accelerator segments:
  // preparation, then each segment followed by its share of post-processing.
  const uint64_t worked = callback.work_ns ? callback.work_ns
                                           : static_cast<uint64_t>(static_cast<double>(callback.cpu_ns) * config_.work_fraction);
  const uint64_t piece = worked / (callback.segments.size() + 1);
  uint64_t cpu = work(cb, piece);
  for (size_t s = 0; s < callback.segments.size(); ++s) {
    TraceEvent seg{};
    seg.kind = static_cast<uint32_t>(TraceKind::kSegment);
    seg.callback = static_cast<uint32_t>(cb);
    seg.thread = static_cast<uint32_t>(thread);
    seg.segment = static_cast<uint32_t>(s);
    seg.chain = traced_chain;
    seg.instance_ns = instance;
    path_->run(thread, cb, s, &seg);
    trace(seg);
    cpu += seg.cpu_ns + work(cb, piece);  // the path's own CPU work: an input copied in again
  }
  const uint64_t end = core::monotonic_ns();
  out.publish_ns = end;
  publish(shared_, workload_, plan_, p.outputs, out, config_.executor);
  for (uint32_t chain : p.chain_ends) {
    if (!out.stamps[chain]) continue;  // an instance that started before a drop
    auto* state = shared_.chain(chain);
    const uint64_t i = state->count.load(std::memory_order_relaxed);
    if (i < shared_.sample_capacity(chain)) shared_.samples(chain)[i] = {out.stamps[chain], end};
    state->count.store(i + 1, std::memory_order_release);
  }
  if (p.timer >= 0) {
    // The timer's records are written by this callback alone.
    const auto timer = static_cast<size_t>(p.timer);
    auto& count = shared_.timer(timer)->count;
    const uint64_t i = count.load(std::memory_order_relaxed);
    if (i < shared_.timer_capacity(timer)) shared_.timer_records(timer)[i] = {pick.release_ns, begin};
    count.store(i + 1, std::memory_order_release);
  }
  TraceEvent ev{};
  ev.kind = static_cast<uint32_t>(TraceKind::kCallback);
  ev.callback = static_cast<uint32_t>(cb);
  ev.thread = static_cast<uint32_t>(thread);
  ev.submit_ns = release;
  ev.begin_ns = begin;
  ev.end_ns = end;
  ev.bucket = -1;
  ev.cpu_ns = cpu;
  ev.chain = traced_chain;
  ev.instance_ns = instance;
  trace(ev);
}

// A callback as a job of the executor's gang: waits for the gang lock, and
// traces the wait, the hold and any preemption by a higher gang.
void Executor::run_job(size_t thread, const Pick& pick, Scratch* scratch) {
  if (!config_.gang) {
    run_callback(thread, pick, scratch);
    return;
  }
  struct rtaccel_gang_thread_stats before{}, after{};
  rtaccel_gang_self_stats(&before);
  const uint64_t asked = core::monotonic_ns();
  rtaccel_gang_job_begin();
  const uint64_t granted = core::monotonic_ns();
  run_callback(thread, pick, scratch);
  rtaccel_gang_job_end();
  const uint64_t ended = core::monotonic_ns();
  rtaccel_gang_self_stats(&after);
  TraceEvent ev{};
  ev.callback = static_cast<uint32_t>(pick.callback);
  ev.thread = static_cast<uint32_t>(thread);
  ev.bucket = -1;
  if (after.waits > before.waits) {
    ev.kind = static_cast<uint32_t>(TraceKind::kGangWait);
    ev.submit_ns = ev.begin_ns = asked;
    ev.end_ns = granted;
    trace(ev);
  }
  ev.kind = static_cast<uint32_t>(TraceKind::kGangHold);
  ev.submit_ns = ev.begin_ns = granted;
  ev.end_ns = ended;
  ev.segment = static_cast<uint32_t>(after.parks - before.parks);
  trace(ev);
  if (after.parks > before.parks) {
    // The last preemption of the job (a job is rarely preempted twice).
    ev.kind = static_cast<uint32_t>(TraceKind::kGangPark);
    ev.submit_ns = ev.begin_ns = after.last_park_begin_ns;
    ev.end_ns = after.last_park_end_ns;
    trace(ev);
  }
}

void Executor::loop(size_t thread) {
  if (config_.gang) {
    const int err = rtaccel_gang_join(config_.gang_lock, config_.gang->name.c_str(), config_.gang->priority,
                                      config_.gang->threshold_mbps);
    if (err) {
      fail(state_, "executor '" + workload_.executors[config_.executor].name + "': cannot join gang '" + config_.gang->name +
                       "': " + strerror(-err));
      wake(state_);
      return;
    }
  }
  // One bandwidth-lock holder per thread: a holder is one thread's at a time.
  rtaccel_bwlock_holder_t* holder = nullptr;
  if (bwlock_) {
    // The lock's status names holders by label (at most 31 characters).
    const std::string label = workload_.executors[config_.executor].name.substr(0, 24) + "." + std::to_string(thread);
    if (int err = rtaccel_bwlock_holder_init(bwlock_, label.c_str(), config_.bwlock_threshold_mbps, 0, &holder)) {
      fail(state_, "executor '" + workload_.executors[config_.executor].name + "': cannot hold bandwidth lock '" +
                       config_.bwlock + "': " + strerror(-err));
      wake(state_);
      return;
    }
  }
  Scratch scratch;
  size_t inputs = 0;
  for (size_t cb : mine_) inputs = std::max(inputs, plan_.callbacks[cb].inputs.size());
  scratch.inputs.resize(inputs);
  auto* header = shared_.header();
  while (!header->stop.load(std::memory_order_acquire)) {
    const uint32_t events = state_->events.load(std::memory_order_acquire);
    pthread_mutex_lock(&lock_);
    const Pick p = pick(core::monotonic_ns());
    const uint64_t next = next_timer();
    pthread_mutex_unlock(&lock_);
    if (p.callback != SIZE_MAX) {
      // A chain under the bandwidth lock holds it for the whole callback:
      // its CPU work and its segments (two atomics each way).
      const bool hold = holder && (*config_.holds_bwlock)[p.callback];
      if (hold) rtaccel_bwlock_take(holder);
      run_job(thread, p, &scratch);
      if (hold) rtaccel_bwlock_release(holder);
      pthread_mutex_lock(&lock_);
      states_[p.callback].running = false;
      pthread_mutex_unlock(&lock_);
      if (config_.workload->executors[config_.executor].threads > 1) wake(state_);
      continue;
    }
    const timespec abs = rtaccel_timespec_of(next == UINT64_MAX ? core::monotonic_ns() + 1000000000u : next);
    futex_wait(reinterpret_cast<uint32_t*>(&state_->events), events, true, CLOCK_MONOTONIC, &abs);
  }
  if (config_.gang) rtaccel_gang_leave();
  rtaccel_bwlock_holder_destroy(holder);
}

Status Executor::run() {
  const auto& ex = workload_.executors[config_.executor];
  state_->pid = getpid();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(ex.core, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    return Status::os_error("executor '" + ex.name + "': cannot pin to core " + std::to_string(ex.core), errno);
  // Threads created below inherit the policy and priority.
  state_->realtime = rtaccel_fifo_or_best(ex.priority) == 1 ? 1 : 0;
  rtaccel_lock_memory();  // where it cannot starve later allocations; the runner says what was refused

  // Built here, after the memory is locked: only this executor's requests.
  requests_ = *config_.requests;
  if (Status st = build_requests(workload_, config_.executor, &requests_); !st)
    return st.context("executor '" + ex.name + "'");
  // A chain registered before the runner has declared the workload's
  // chains would be analysed without those it waits for at its fusions.
  if (config_.policy == Policy::kPaam) {
    RunHeader* header = shared_.header();
    while (!header->declared.load(std::memory_order_acquire) && !header->stop.load(std::memory_order_acquire))
      futex_wait(reinterpret_cast<uint32_t*>(&header->declared), 0, true, CLOCK_MONOTONIC, nullptr);
    if (!header->declared.load(std::memory_order_acquire)) {
      // Stopped before the server had the workload: a run of no time, not a failure.
      state_->status.store(static_cast<uint32_t>(ExecutorStatus::kDone), std::memory_order_release);
      return Status();
    }
  }
  PathConfig pc;
  pc.workload = &workload_;
  pc.requests = &requests_;
  pc.executor = config_.executor;
  pc.threads = static_cast<size_t>(ex.threads);
  pc.socket = config_.socket;
  pc.best_effort = config_.policy != Policy::kPaam;
  path_ = config_.policy == Policy::kPaam || config_.remote_accelerator ? make_server_path(pc) : make_direct_path(pc);
  if (Status st = path_->open(); !st) return st.context("executor '" + ex.name + "'");
  if (int err = rtaccel_pi_mutex_init(&lock_, PTHREAD_MUTEX_NORMAL, false))
    return Status::os_error("executor '" + ex.name + "': cannot create its lock", -err);
  states_.resize(workload_.callbacks.size());
  // Working sets mapped and touched now, after the memory is locked: the
  // run's work faults no page in.
  walks_.resize(workload_.callbacks.size());
  for (size_t cb : mine_) {
    const auto& callback = workload_.callbacks[cb];
    if (callback.working_set_bytes == 0) continue;
    if (!walks_[cb].init(callback.working_set_bytes, callback.pattern == workload::MemoryPattern::kRandom))
      return Status::os_error("executor '" + ex.name + "': cannot map the " +
                                  std::to_string(callback.working_set_bytes >> 10) + " KiB working set of callback '" +
                                  callback.name + "'",
                              errno);
  }

  if (!config_.bwlock.empty()) {
    if (int err = rtaccel_bwlock_open(config_.bwlock.c_str(), &bwlock_))
      return Status::os_error("executor '" + ex.name + "': cannot open bandwidth lock '" + config_.bwlock + "'", -err);
  }

  state_->status.store(static_cast<uint32_t>(ExecutorStatus::kReady), std::memory_order_release);
  auto* header = shared_.header();
  while (!header->go.load(std::memory_order_acquire) && !header->stop.load(std::memory_order_acquire))
    futex_wait(reinterpret_cast<uint32_t*>(&header->go), 0, true, CLOCK_MONOTONIC, nullptr);
  for (size_t cb : mine_) states_[cb].next_release = header->start_ns;
  end_ns_ = header->end_ns;

  // The threads started go on until the runner stops the run, which it
  // does when this executor fails.
  std::vector<core::Thread> threads(static_cast<size_t>(ex.threads - 1));
  for (size_t t = 1; t < static_cast<size_t>(ex.threads); ++t)
    if (int err = threads[t - 1].start(RTACCEL_THREAD_STACK, [this, t] { loop(t); }))
      return Status::os_error("executor '" + ex.name + "': cannot start thread " + std::to_string(t), err);
  loop(0);
  for (auto& t : threads) t.join();
  path_.reset();
  rtaccel_bwlock_close(bwlock_);
  state_->status.store(static_cast<uint32_t>(ExecutorStatus::kDone), std::memory_order_release);
  return Status();
}

}  // namespace

Status run_executor(const ExecutorConfig& config) {
  Executor executor(config);
  Status st = executor.run();
  if (!st) fail(config.shared->executor(config.executor), st.message(), st.err());
  return st;
}

}  // namespace rtaccel::exec
