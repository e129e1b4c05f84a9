// Shared memory of a workload run (internal): one anonymous memfd mapping that
// the runner creates before it forks the executors, so every process sees it
// at the same address. It holds the subscription queues, each executor's
// wake-up word, and the measurements (end-to-end latency samples per chain,
// timer activations, trace events per executor) that the runner reads back.
//
// Writers: a queue under its PI mutex; a chain's samples by the one callback
// that ends it (callbacks never run concurrently with themselves); a timer's
// records by that timer's callback; an executor's trace by that executor
// (one atomic counter shared by its threads).
#ifndef RTACCEL_EXEC_SHARED_H_
#define RTACCEL_EXEC_SHARED_H_

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "exec/plan.h"
#include "rtaccel/status.hpp"

namespace rtaccel::exec {

struct Message {
  uint64_t publish_ns = 0;
  uint64_t stamps[kMaxChains];  // chain start time; 0: not part of that chain instance
};

// A message between nodes, ahead of its payload on the wire.
struct WireHeader {
  Message message;
  uint64_t send_ns = 0;  // when the sending bridge took it from the outbox
};

struct alignas(64) QueueState {
  pthread_mutex_t lock;  // priority inheritance, process-shared
  uint32_t head = 0;     // oldest message
  uint32_t count = 0;
  uint64_t pushed = 0;
  uint64_t dropped = 0;
  Message slots[kQueueDepth];
};

enum class ExecutorStatus : uint32_t { kStarting = 0, kReady, kFailed, kDone };

struct alignas(64) ExecutorState {
  std::atomic<uint32_t> events{0};  // futex: bumped by every publish to it and on stop
  std::atomic<uint32_t> status{0};  // ExecutorStatus
  int32_t pid = 0;
  uint32_t realtime = 0;            // 1: running at its SCHED_FIFO priority
  std::atomic<uint64_t> trace_used{0};
  std::atomic<uint64_t> overruns{0};  // timer activations skipped: executor too late
  char error[256] = {};
  int32_t error_code = 0;           // the failure's errno, with error
  std::atomic<uint32_t> port{0};    // a listening bridge: its TCP/RDMA port, once it listens
};

// A hop's delivery (multi-node runs), written by its two bridges.
struct alignas(64) HopState {
  std::atomic<uint64_t> sent{0};       // acknowledged by the other node
  std::atomic<uint64_t> lost{0};       // not delivered: the link failed or did not acknowledge
  std::atomic<uint64_t> delivered{0};  // pushed into the subscribers' queues
  std::atomic<uint64_t> failed_ns{0};  // the first loss (CLOCK_MONOTONIC); 0: none
  std::atomic<uint64_t> recovered_ns{0};  // the first delivery after a loss; 0: none
  char error[216] = {};                // why the first loss
};

struct alignas(64) ChainState {
  std::atomic<uint64_t> count{0};  // samples taken (may exceed capacity; the rest are lost)
  std::atomic<uint64_t> drops{0};  // instances lost in a full queue
  std::atomic<uint64_t> link_losses{0};  // instances lost on a link between nodes
};

struct alignas(64) TimerState {
  std::atomic<uint64_t> count{0};  // activations run (records beyond capacity are lost)
};

struct Sample {
  uint64_t start_ns;
  uint64_t end_ns;
};

struct TimerRecord {
  uint64_t release_ns;
  uint64_t start_ns;
};

enum class TraceKind : uint32_t {
  kCallback = 0,  // a callback's execution on an executor thread
  kSegment = 1,   // an accelerator segment: submit, start and end on the device
  kGangWait = 2,  // gang scheduling: job_begin blocked [begin, end]
  kGangHold = 3,  // a callback's job under the gang lock [granted, ended]
  kGangPark = 4,  // the thread stopped by a higher gang [parked, resumed]
  kTransfer = 5,  // a hop's message: published, sent [send, arrival]; segment = hop
};

struct TraceEvent {
  uint64_t submit_ns;  // segment: when the request was submitted
  uint64_t begin_ns;
  uint64_t end_ns;
  uint32_t kind;       // TraceKind
  uint32_t callback;
  uint32_t thread;     // executor thread index
  int32_t bucket;      // segment: server bucket; -1: direct invocation
  uint32_t segment;
  int32_t status;      // segment: the service's status
  uint64_t cpu_ns;     // callback: the thread's CPU time in its CPU work; segment: the path's own (an input copied in again)
  // The chain instance it belongs to (its most critical chain that it
  // carries an instance of): the instance's start stamp, 0 for none.
  uint64_t instance_ns;
  uint32_t chain;
  // Served segment: from its kernel's end to the client going on, the
  // server's overhead after the kernel (UINT32_MAX: that or longer).
  uint32_t resumed_after_ns;
  // Served by another node's server: its request's and its response's time
  // on the link together, each from the sending side's call to the other
  // side's link having it whole (UINT32_MAX: that or longer; 0: not known);
  // and on that node, from the request whole at the gateway's link to the
  // gateway's thread taking it and to the kernel's start, and from the
  // kernel's end to the gateway's reply: the server's overhead as the
  // gateway, its client there, meets it.
  uint32_t legs_ns;
  uint32_t arrival_to_taken_ns;
  uint32_t arrival_to_start_ns;
  uint32_t end_to_reply_ns;
};

struct alignas(64) RunHeader {
  std::atomic<uint32_t> go{0};    // futex: set when start_ns is valid
  std::atomic<uint32_t> stop{0};
  // futex: set once the server's admission holds the workload's chains
  // (paam: the runner declares them), after which executors register.
  std::atomic<uint32_t> declared{0};
  uint64_t start_ns = 0;          // first timer release
  // The run's end: no timer releases at or after it, however late the
  // runner (a process at normal priority, which looks every 20 ms) stops
  // the executors, so that the records sized for the duration hold every
  // release.
  uint64_t end_ns = 0;
};

// The run's shared memory is mapped by the runner and every executor (forked
// from it, one build): its atomics must be lock-free to work between
// processes, and its layout is asserted so that a change is deliberate.
static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4 && sizeof(std::atomic<uint64_t>) == 8);
static_assert(sizeof(Message) == 8 + 8 * kMaxChains && sizeof(QueueState) == 5312 &&
              offsetof(QueueState, slots) == 64);
static_assert(sizeof(ExecutorState) == 320 && offsetof(ExecutorState, trace_used) == 16 &&
              offsetof(ExecutorState, error) == 32 && offsetof(ExecutorState, error_code) == 288 &&
              offsetof(ExecutorState, port) == 292);
static_assert(sizeof(WireHeader) == kWireHeaderBytes && sizeof(HopState) == 256);
static_assert(sizeof(ChainState) == 64 && sizeof(TimerState) == 64 && sizeof(RunHeader) == 64);
static_assert(sizeof(Sample) == 16 && sizeof(TimerRecord) == 16 && sizeof(TraceEvent) == 88);

// Capacities of the measurement arrays.
struct Capacity {
  std::vector<uint64_t> samples_per_chain;
  std::vector<uint64_t> records_per_timer;
  std::vector<uint64_t> events_per_executor;  // executors, then bridges
};

// Capacities for a run of `duration_ns`: every activation the timers can
// make, and of trace events what they make: a quarter more than the timers
// drive each executor and bridge to (see trace_events_per_second), or under
// GANG, where a job makes one to three events, as many as every callback at
// the fastest timer's rate would. Up to TRACE_EVENTS per executor and
// bridge; 0: as many as a quarter of MEMORY_AVAILABLE (bytes; 0: unknown,
// then kTraceEventsWithoutMemory) holds, at kCheckedEventBytes each, shared
// where the whole run's do not fit so that every trace fills at the same
// time.
Capacity capacity_for(const workload::Workload& w, const Plan& plan, uint64_t duration_ns, uint64_t trace_events,
                      bool gang, uint64_t memory_available);

// What a trace event kept costs: its place in the run's shared memory, and
// what the runner takes for it while it checks the run at the end.
inline constexpr uint64_t kCheckedEventBytes = sizeof(TraceEvent) + 260;
inline constexpr uint64_t kTraceEventsWithoutMemory = 1000000;

// The trace events each executor, then each bridge, makes in a second as
// the workload's timers drive it: a callback runs at its timer's rate, or
// at the slowest of the publishers of the topics that trigger it (it runs
// once all have arrived), and each run makes an event, one more per
// segment, and under GANG one more for its job; a bridge makes one per
// message it delivers. capacity_for sizes for more (every callback at the
// fastest timer's rate); this is what a run expects, by which it says
// beforehand where a trace will fill.
std::vector<double> trace_events_per_second(const workload::Workload& w, const Plan& plan, bool gang);

// Whose trace E is, in words: "executor 'ex_hot'", "the bridge of link 'eth'".
std::string trace_owner(const workload::Workload& w, const Plan& plan, size_t e);

class SharedRun {
 public:
  SharedRun() = default;
  SharedRun(const SharedRun&) = delete;
  SharedRun& operator=(const SharedRun&) = delete;
  ~SharedRun();

  // Creates and initialises the mapping; false with the reason.
  Status create(const Plan& plan, const Capacity& capacity);

  RunHeader* header() const { return header_; }
  // Executors, then bridges (Plan::bridges), from index executors.size().
  ExecutorState* executor(size_t i) const { return executors_ + i; }
  HopState* hop(size_t i) const { return hops_ + i; }
  ChainState* chain(size_t i) const { return chains_ + i; }
  QueueState* queue(size_t i) const { return queues_ + i; }
  TimerState* timer(size_t i) const { return timers_ + i; }
  Sample* samples(size_t chain) const { return samples_ + sample_offset_[chain]; }
  uint64_t sample_capacity(size_t chain) const { return capacity_.samples_per_chain[chain]; }
  TimerRecord* timer_records(size_t timer) const { return records_ + record_offset_[timer]; }
  uint64_t timer_capacity(size_t timer) const { return capacity_.records_per_timer[timer]; }
  TraceEvent* trace(size_t executor) const { return events_ + event_offset_[executor]; }
  uint64_t trace_capacity(size_t executor) const { return capacity_.events_per_executor[executor]; }
  // What of each was kept: as many as were written, up to the capacity.
  uint64_t samples_kept(size_t chain) const { return std::min(chains_[chain].count.load(), sample_capacity(chain)); }
  uint64_t records_kept(size_t timer) const { return std::min(timers_[timer].count.load(), timer_capacity(timer)); }
  uint64_t trace_kept(size_t executor) const {
    return std::min(executors_[executor].trace_used.load(), trace_capacity(executor));
  }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  Capacity capacity_;
  RunHeader* header_ = nullptr;
  ExecutorState* executors_ = nullptr;
  ChainState* chains_ = nullptr;
  QueueState* queues_ = nullptr;
  HopState* hops_ = nullptr;
  TimerState* timers_ = nullptr;
  Sample* samples_ = nullptr;
  TimerRecord* records_ = nullptr;
  TraceEvent* events_ = nullptr;
  std::vector<uint64_t> sample_offset_, record_offset_, event_offset_;
};

// Wakes every thread waiting on `state`'s events word.
void wake(ExecutorState* state);

// A subscription queue's two ends (under its PI mutex; not preemptible by a
// gang, whose parked thread would stop the other gang that needs the queue).
// A push to a full queue drops its oldest message, counting a drop for every
// chain instance it carried; it wakes no one (publish does).
void queue_push(SharedRun& shared, const Plan& plan, uint32_t queue, const Message& message);
void queue_pop(SharedRun& shared, uint32_t queue, Message* out);

// A message to every queue of QUEUES, as the analysis has it: all are
// pushed before any consumer is woken, so that a consumer that preempts
// the publisher finds every message of the publish; the consumers that
// cannot take the publisher's core are woken first, then those that can,
// highest priority first. PUBLISHER: the executor (or, from
// Workload::executors.size() on, the bridge) that publishes.
void publish(SharedRun& shared, const workload::Workload& w, const Plan& plan, const std::vector<uint32_t>& queues,
             const Message& message, size_t publisher);

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_SHARED_H_
