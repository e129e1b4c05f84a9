// One end of a link in a multi-node run (internal): a process on its node
// that carries the topics crossing the link over the net layer.
//
// Each hop leaving the node has a sending thread, at its publisher's
// SCHED_FIFO priority, that takes messages from the hop's outbox and sends
// each as one transfer on the hop's channel, at the hop's priority on the
// wire, and waits for the other end's ACK. Each hop arriving has a
// delivering thread that takes its transfers and pushes their messages into
// the subscribers' queues. A message that is not acknowledged (the link went
// down, the other end died) is counted lost for every chain instance it
// carried; the bridge goes on with the next, so nothing waits on a dead link
// longer than a send's timeout.
//
// With flow control, all of a link's hops share one net link, whose sender
// side hands the wire to the highest-priority transfer at every chunk
// boundary. Without, each hop has a net link of its own that sends a message
// in one piece, so that hops contend in the kernel's queues as sockets of
// independent publishers do.
#ifndef RTACCEL_EXEC_BRIDGE_H_
#define RTACCEL_EXEC_BRIDGE_H_

#include <cstddef>
#include <string>

#include "exec/plan.h"
#include "exec/shared.h"
#include "rtaccel/status.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::exec {

struct BridgeConfig {
  const workload::Workload* workload = nullptr;
  const Plan* plan = nullptr;
  SharedRun* shared = nullptr;
  size_t bridge = 0;             // index into Plan::bridges
  bool flow_control = true;
  // The listening end: where it listens, and the one peer it admits ("IP",
  // or "uid:N" on shm). The connecting end: the address to connect to; on
  // tcp and rdma the listener's port, once it is published, is appended.
  std::string listen_address;
  std::string allow;
  std::string connect_address;
  bool connect_needs_port = false;
};

// Runs the bridge until the run stops; the body of a forked child. A failure
// to set up is also written to the bridge's state, where the runner reads it.
Status run_bridge(const BridgeConfig& config);

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_BRIDGE_H_
