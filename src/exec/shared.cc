#include "exec/shared.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <numeric>
#include <string_view>

#include "core/cgroup.h"
#include "core/futex.h"
#include "rtaccel/isolate.h"
#include "rtaccel/lock.h"

namespace rtaccel::exec {
namespace {

constexpr uint64_t kSlack = 8;                  // activations beyond duration / period
// Trace events beyond what the timers drive an executor to: the
// expectation is a rate, and a short run's few activations more are many
// of its events.
constexpr double kEventMargin = 1.25;
constexpr uint64_t kEventSlack = 1000;

size_t align_up(size_t n) { return (n + 63) & ~size_t{63}; }

}  // namespace

Capacity capacity_for(const workload::Workload& w, const Plan& plan, uint64_t duration_ns, uint64_t trace_events,
                      bool gang, uint64_t memory_available) {
  Capacity c;
  for (const auto& chain : w.chains) c.samples_per_chain.push_back(duration_ns / chain.period_ns + kSlack);
  uint64_t fastest = UINT64_MAX;
  for (size_t t : plan.timers) {
    const uint64_t period = w.callbacks[t].trigger.timer_ns;
    fastest = std::min(fastest, period);
    c.records_per_timer.push_back(duration_ns / period + kSlack);
  }
  // No callback runs more often than the fastest timer: a subscription fires
  // once per message of its slowest input. That bounds what an executor
  // makes; mapped and locked for the whole run, it was twice what the
  // Autoware system's executors wrote in half an hour.
  const uint64_t activations = (fastest == UINT64_MAX ? 0 : duration_ns / fastest) + kSlack;
  const std::vector<double> expected = trace_events_per_second(w, plan, false);
  const double seconds = static_cast<double>(duration_ns) / 1e9;
  auto sized = [&](size_t e, uint64_t bound) {
    if (!gang) bound = std::min(bound, static_cast<uint64_t>(std::ceil(expected[e] * seconds * kEventMargin)) + kEventSlack);
    return trace_events ? std::min(bound, trace_events) : bound;
  };
  for (const auto& callbacks : plan.by_executor) {
    uint64_t events = 0;
    for (size_t cb : callbacks) events += (1 + w.callbacks[cb].segments.size() + (gang ? 3 : 0)) * activations;
    c.events_per_executor.push_back(sized(c.events_per_executor.size(), events));
  }
  // A bridge traces each message it delivers.
  for (const auto& bridge : plan.bridges)
    c.events_per_executor.push_back(sized(c.events_per_executor.size(), bridge.receives.size() * activations));
  if (trace_events) return c;
  if (!memory_available) {
    for (uint64_t& events : c.events_per_executor) events = std::min(events, kTraceEventsWithoutMemory);
    return c;
  }
  // Where the whole run's do not fit, the room goes by the rate each trace
  // fills at (under gangs, by what each could make), so that all fill at
  // the same time: the run is checked up to the first that fills.
  uint64_t wanted = 0;
  for (uint64_t events : c.events_per_executor) wanted += events;
  const uint64_t room = memory_available / 4 / kCheckedEventBytes;
  if (wanted <= room) return c;
  std::vector<double> weights(c.events_per_executor.begin(), c.events_per_executor.end());
  if (!gang && std::accumulate(expected.begin(), expected.end(), 0.0) > 0) weights = expected;
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (size_t e = 0; e < c.events_per_executor.size(); ++e) {
    const auto share = static_cast<uint64_t>(static_cast<double>(room) * weights[e] / total);
    c.events_per_executor[e] = std::max(kEventSlack, std::min(c.events_per_executor[e], share));
  }
  return c;
}

std::vector<double> trace_events_per_second(const workload::Workload& w, const Plan& plan, bool gang) {
  std::map<std::string_view, size_t> publisher;
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb)
    if (!w.callbacks[cb].publishes.empty()) publisher[w.callbacks[cb].publishes] = cb;
  // Activations a second per callback; -1: not known yet, -2: being found
  // (a loop of topics with no timer in it never runs).
  std::vector<double> rate(w.callbacks.size(), -1);
  std::function<double(size_t)> rate_of = [&](size_t cb) -> double {
    if (rate[cb] >= 0) return rate[cb];
    if (rate[cb] == -2) return 0;
    const auto& trigger = w.callbacks[cb].trigger;
    if (trigger.timer_ns) return rate[cb] = 1e9 / static_cast<double>(trigger.timer_ns);
    rate[cb] = -2;
    double slowest = trigger.topics.empty() ? 0 : INFINITY;
    for (const auto& topic : trigger.topics) {
      const auto it = publisher.find(topic);
      slowest = std::min(slowest, it == publisher.end() ? 0.0 : rate_of(it->second));
    }
    return rate[cb] = slowest;
  };
  std::vector<double> per_second;
  for (const auto& callbacks : plan.by_executor) {
    double events = 0;
    for (size_t cb : callbacks) events += static_cast<double>(1 + w.callbacks[cb].segments.size() + gang) * rate_of(cb);
    per_second.push_back(events);
  }
  for (const auto& bridge : plan.bridges) {
    double events = 0;
    for (uint32_t h : bridge.receives) events += rate_of(plan.hops[h].publisher);
    per_second.push_back(events);
  }
  return per_second;
}

std::string trace_owner(const workload::Workload& w, const Plan& plan, size_t e) {
  if (e < w.executors.size()) return "executor '" + w.executors[e].name + "'";
  return "the bridge of link '" + w.links[plan.bridges[e - w.executors.size()].link].name + "'";
}

SharedRun::~SharedRun() {
  if (base_) munmap(base_, size_);
}

Status SharedRun::create(const Plan& plan, const Capacity& capacity) {
  capacity_ = capacity;
  size_t size = align_up(sizeof(RunHeader));
  const size_t executors_at = size;
  const size_t states = plan.by_executor.size() + plan.bridges.size();
  size += align_up(sizeof(ExecutorState) * states);
  const size_t chains_at = size;
  size += align_up(sizeof(ChainState) * capacity.samples_per_chain.size());
  const size_t queues_at = size;
  size += align_up(sizeof(QueueState) * plan.queues.size());
  const size_t hops_at = size;
  size += align_up(sizeof(HopState) * plan.hops.size());
  const size_t timers_at = size;
  size += align_up(sizeof(TimerState) * plan.timers.size());
  auto table = [&size](const std::vector<uint64_t>& caps, size_t item, std::vector<uint64_t>* offsets) {
    const size_t at = size;
    uint64_t total = 0;
    for (uint64_t n : caps) {
      offsets->push_back(total);
      total += n;
    }
    size += align_up(total * item);
    return at;
  };
  const size_t samples_at = table(capacity.samples_per_chain, sizeof(Sample), &sample_offset_);
  const size_t records_at = table(capacity.records_per_timer, sizeof(TimerRecord), &record_offset_);
  const size_t events_at = table(capacity.events_per_executor, sizeof(TraceEvent), &event_offset_);

  // Mapped populated, the records are resident from the start: a run that
  // needs more than half of the memory available to it (free on the
  // machine, within its memory cgroup's limit) would push the rest of the
  // system, the run's own processes too, out of memory.
  if (const uint64_t available = rtaccel_memory_available(); available && size > available / 2)
    return Status::invalid("the run's records (every chain instance, timer release and trace event) take " +
                           std::to_string(size >> 20) + " MiB for its duration, more than half of the " +
                           std::to_string(available >> 20) + " MiB of memory available to the run (free on the machine, within its memory cgroup's "
                           "limit): shorten --duration");
  // Anonymous shared memory: inherited by the forked executors, gone with the
  // last of them; nothing to clean up in /dev/shm after a crash.
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE,
                    -1, 0);
  if (base == MAP_FAILED) {
    return Status::os_error("cannot map the run's shared memory", errno);
  }
  base_ = base;
  size_ = size;
  auto* bytes = static_cast<char*>(base);
  header_ = new (bytes) RunHeader;
  executors_ = reinterpret_cast<ExecutorState*>(bytes + executors_at);
  for (size_t i = 0; i < states; ++i) new (executors_ + i) ExecutorState;
  chains_ = reinterpret_cast<ChainState*>(bytes + chains_at);
  for (size_t i = 0; i < capacity.samples_per_chain.size(); ++i) new (chains_ + i) ChainState;
  queues_ = reinterpret_cast<QueueState*>(bytes + queues_at);
  for (size_t i = 0; i < plan.queues.size(); ++i) {
    auto* q = new (queues_ + i) QueueState;
    if (int err = rtaccel_pi_mutex_init(&q->lock, PTHREAD_MUTEX_NORMAL, true)) {
      return Status::os_error("cannot create a queue's mutex", -err);
    }
  }
  hops_ = reinterpret_cast<HopState*>(bytes + hops_at);
  for (size_t i = 0; i < plan.hops.size(); ++i) new (hops_ + i) HopState;
  timers_ = reinterpret_cast<TimerState*>(bytes + timers_at);
  for (size_t i = 0; i < plan.timers.size(); ++i) new (timers_ + i) TimerState;
  samples_ = reinterpret_cast<Sample*>(bytes + samples_at);
  records_ = reinterpret_cast<TimerRecord*>(bytes + records_at);
  events_ = reinterpret_cast<TraceEvent*>(bytes + events_at);
  return Status();
}

void wake(ExecutorState* state) {
  state->events.fetch_add(1, std::memory_order_release);
  futex_wake(reinterpret_cast<uint32_t*>(&state->events), INT_MAX, true);
}

void queue_pop(SharedRun& shared, uint32_t queue, Message* out) {
  auto* q = shared.queue(queue);
  rtaccel_gang_preempt_disable();
  pthread_mutex_lock(&q->lock);
  *out = q->slots[q->head];
  q->head = (q->head + 1) % kQueueDepth;
  __atomic_store_n(&q->count, q->count - 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&q->lock);
  rtaccel_gang_preempt_enable();
}

void queue_push(SharedRun& shared, const Plan& plan, uint32_t queue, const Message& message) {
  auto* q = shared.queue(queue);
  rtaccel_gang_preempt_disable();
  pthread_mutex_lock(&q->lock);
  if (q->count == plan.queues[queue].depth) {
    // Keep last: the oldest message goes, and with it every chain instance it
    // was carrying towards this subscriber.
    const Message& old = q->slots[q->head];
    for (uint32_t chain : plan.queues[queue].chains)
      if (old.stamps[chain]) shared.chain(chain)->drops.fetch_add(1, std::memory_order_relaxed);
    q->head = (q->head + 1) % kQueueDepth;
    --q->count;
    ++q->dropped;
  }
  q->slots[(q->head + q->count) % kQueueDepth] = message;
  ++q->pushed;
  __atomic_store_n(&q->count, q->count + 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&q->lock);
  rtaccel_gang_preempt_enable();
}

void publish(SharedRun& shared, const workload::Workload& w, const Plan& plan, const std::vector<uint32_t>& queues,
             const Message& message, size_t publisher) {
  for (uint32_t q : queues) queue_push(shared, plan, q, message);
  // The consumers to wake, each once: first those that cannot take the
  // publisher's core from it (bridges, executors on other cores or not
  // above it), then those above it on its core, highest SCHED_FIFO
  // priority first. The first of these takes the core at once: the
  // messages are all in their queues by then, no consumer elsewhere waits
  // for it, and one lower here woken after it would have waited anyway.
  constexpr size_t kMost = 64;  // on the stack: a publish allocates nothing
  size_t order[kMost];
  int rank[kMost];
  size_t n = 0;
  const size_t executors = w.executors.size();
  const bool placed = publisher < executors;
  const int core = placed ? w.executors[publisher].core : -1;
  const int own = placed ? w.executors[publisher].priority : 0;
  int above = 0, highest = 0;  // consumers above the publisher on its core, and their top priority
  for (uint32_t q : queues) {
    const size_t e = plan.queues[q].executor;
    if (std::find(order, order + n, e) != order + n) continue;
    if (n == kMost) {
      wake(shared.executor(e));
      continue;
    }
    const int priority = e < executors ? w.executors[e].priority : 100;  // SCHED_FIFO's are 1-99
    const bool takes_core = placed && e < executors && w.executors[e].core == core && priority > own;
    if (takes_core) {
      ++above;
      highest = std::max(highest, priority);
    }
    const int key = takes_core ? priority : 1000 + priority;  // woken in descending order
    size_t i = n++;
    for (; i > 0 && rank[i - 1] < key; --i) {
      order[i] = order[i - 1];
      rank[i] = rank[i - 1];
    }
    order[i] = e;
    rank[i] = key;
  }
  // Two or more of them above the publisher on its core: the first woken
  // would run before the publisher wakes the second, which would then
  // wait for whatever the first set going above the publisher (an
  // inversion). The publisher takes the highest priority of them while it
  // wakes them all; only a real-time publisher can (and needs to).
  const bool boost = above >= 2 && shared.executor(publisher)->realtime;
  if (boost) pthread_setschedprio(pthread_self(), std::min(highest, 99));
  for (size_t i = 0; i < n; ++i) wake(shared.executor(order[i]));
  if (boost) pthread_setschedprio(pthread_self(), own);
}

}  // namespace rtaccel::exec
