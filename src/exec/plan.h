// The static plan of a workload run (internal): which callback each executor
// runs, the subscription queues between callbacks, and how every callback
// carries its chains' start timestamps from its inputs to its output.
//
// Built once by the runner before it forks the executors; read-only after.
#ifndef RTACCEL_EXEC_PLAN_H_
#define RTACCEL_EXEC_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtaccel/exec.hpp"
#include "rtaccel/status.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::exec {

// Chains a message can carry a start timestamp for.
constexpr size_t kMaxChains = 64;
// Messages a subscription keeps before it drops the oldest: ROS 2's default
// history depth (KEEP_LAST 10). A fusion callback keeps the latest message of
// each input only, as the reference system's fusion nodes do, so that it
// fuses fresh data rather than a backlog.
constexpr uint32_t kQueueDepth = 10;
constexpr uint32_t kFusionDepth = 1;
// A message between nodes carries its chains' stamps ahead of its payload
// (exec/shared.h, WireHeader); a smaller message_kb still sends these.
constexpr uint64_t kWireHeaderBytes = 8 + 8 + 8 * kMaxChains;

// How a callback obtains chain `chain`'s start time: from input `input`'s
// message, or (input < 0) because the chain starts with this callback.
struct ChainRole {
  uint32_t chain = 0;
  int32_t input = -1;
};

struct CallbackPlan {
  size_t callback = 0;  // index into Workload::callbacks
  size_t executor = 0;
  int priority = 0;                  // criticality as priority
  uint64_t period_ns = 0;            // timer period; 0 for a subscription
  int32_t timer = -1;                // index among the workload's timers
  std::vector<uint32_t> inputs;      // queue of each trigger topic, in trigger order
  std::vector<uint32_t> outputs;     // queues this callback's topic feeds
  std::vector<ChainRole> roles;      // one per chain through the callback
  std::vector<uint32_t> chain_ends;  // chains whose last callback this is
  std::vector<std::string> segment_names;  // "callback: service", one per segment
};

struct QueuePlan {
  size_t consumer = 0;  // callback index (an outbox: the publisher)
  size_t executor = 0;  // whom a push wakes: the consumer's executor, or an
                        // outbox's bridge (Workload::executors.size() + bridge)
  std::string topic;
  uint32_t depth = kQueueDepth;
  std::vector<uint32_t> chains;  // chains whose instances travel through this queue
};

// A topic's trip to another node (multi-node workloads): its publisher
// pushes into an outbox queue, whose consumer is the bridge of the link on
// the publisher's node; that bridge sends each message over the net layer,
// and the bridge on the other end pushes it into the subscribers' queues.
struct HopPlan {
  size_t publisher = 0;          // callback index
  size_t link = 0;               // index into Workload::links
  size_t from_node = 0, to_node = 0;
  size_t from_bridge = 0, to_bridge = 0;  // indices into Plan::bridges
  uint32_t outbox = 0;           // queue the publisher feeds
  std::vector<uint32_t> queues;  // the subscribers' queues on to_node
  uint8_t priority = 0;          // on the wire: the most critical chain it carries, ranked
  int executor_priority = 0;     // SCHED_FIFO of its sending thread: the publisher's
  uint64_t bytes = 0;            // a message on the wire (message_kb, at least the header)
  std::string name;              // "topic soc1->soc2"
};

// One end of a link: a process on `node` that sends the hops leaving the
// node over the link and delivers those arriving.
struct BridgePlan {
  size_t link = 0;
  size_t node = 0;
  bool listens = false;               // the link's first node listens, the other connects
  std::vector<uint32_t> sends;        // hops, by index
  std::vector<uint32_t> receives;
};

struct Plan {
  std::vector<CallbackPlan> callbacks;            // index = workload callback index
  std::vector<QueuePlan> queues;
  std::vector<std::vector<size_t>> by_executor;   // callbacks, in registration order
  std::vector<size_t> timers;                     // callback index of each timer
  std::vector<HopPlan> hops;
  std::vector<BridgePlan> bridges;                // state index: executors, then bridges
};

// Builds the plan; an empty optional with the reason when the workload cannot
// run (too many chains).
Expected<Plan> make_plan(const workload::Workload& workload);

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_PLAN_H_
