#include "exec/shared.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "rtaccel/lock.h"

namespace rtaccel::exec {
namespace {

constexpr uint64_t kSlack = 8;                  // activations beyond duration / period
constexpr uint64_t kMaxEventsPerExecutor = 1u << 20;

size_t align_up(size_t n) { return (n + 63) & ~size_t{63}; }

}  // namespace

Capacity capacity_for(const workload::Workload& w, const Plan& plan, uint64_t duration_ns) {
  Capacity c;
  for (const auto& chain : w.chains) c.samples_per_chain.push_back(duration_ns / chain.period_ns + kSlack);
  uint64_t fastest = UINT64_MAX;
  for (size_t t : plan.timers) {
    const uint64_t period = w.callbacks[t].trigger.timer_ns;
    fastest = std::min(fastest, period);
    c.records_per_timer.push_back(duration_ns / period + kSlack);
  }
  // No callback runs more often than the fastest timer: a subscription fires
  // once per message of its slowest input.
  const uint64_t activations = (fastest == UINT64_MAX ? 0 : duration_ns / fastest) + kSlack;
  for (const auto& callbacks : plan.by_executor) {
    uint64_t events = 0;
    for (size_t cb : callbacks) events += (1 + w.callbacks[cb].segments.size()) * activations;
    c.events_per_executor.push_back(std::min(events, kMaxEventsPerExecutor));
  }
  return c;
}

SharedRun::~SharedRun() {
  if (base_) munmap(base_, size_);
}

Status SharedRun::create(const Plan& plan, const Capacity& capacity) {
  capacity_ = capacity;
  size_t size = align_up(sizeof(RunHeader));
  const size_t executors_at = size;
  size += align_up(sizeof(ExecutorState) * plan.by_executor.size());
  const size_t chains_at = size;
  size += align_up(sizeof(ChainState) * capacity.samples_per_chain.size());
  const size_t queues_at = size;
  size += align_up(sizeof(QueueState) * plan.queues.size());
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
  for (size_t i = 0; i < plan.by_executor.size(); ++i) new (executors_ + i) ExecutorState;
  chains_ = reinterpret_cast<ChainState*>(bytes + chains_at);
  for (size_t i = 0; i < capacity.samples_per_chain.size(); ++i) new (chains_ + i) ChainState;
  queues_ = reinterpret_cast<QueueState*>(bytes + queues_at);
  for (size_t i = 0; i < plan.queues.size(); ++i) {
    auto* q = new (queues_ + i) QueueState;
    if (int err = rtaccel_pi_mutex_init(&q->lock, PTHREAD_MUTEX_NORMAL, true)) {
      return Status::os_error("cannot create a queue's mutex", -err);
    }
  }
  timers_ = reinterpret_cast<TimerState*>(bytes + timers_at);
  for (size_t i = 0; i < plan.timers.size(); ++i) new (timers_ + i) TimerState;
  samples_ = reinterpret_cast<Sample*>(bytes + samples_at);
  records_ = reinterpret_cast<TimerRecord*>(bytes + records_at);
  events_ = reinterpret_cast<TraceEvent*>(bytes + events_at);
  return Status();
}

}  // namespace rtaccel::exec
