// rtaccel-server: the accelerator server (PAAM) for one kind of device
// (internal; the binary is tools/server/main.cc).
//
// Threads: one control thread (run()) owns the socket, registrations,
// admission control and the runtime monitor; per device, one worker thread per
// bucket (the lowest bucket may have more) serves requests from shared memory.
#ifndef RTACCEL_ACCEL_SERVER_H_
#define RTACCEL_ACCEL_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rtaccel/status.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::accel {

struct ServerOptions {
  std::string socket_path;          // Unix socket to listen on (created, 0666)
  workload::Backend backend = workload::Backend::kCpu;
  std::vector<int> devices = {1};   // cpu: cores; opencl: device indices. WFD across them.
  uint32_t levels = 4;              // cpu: device priority levels (buckets) per device
  int fifo_base = 80;               // cpu: SCHED_FIFO of the lowest bucket; 0: SCHED_OTHER
  int server_core = -1;             // control thread's core; -1: not pinned
  uint64_t epsilon_ns = 50000;      // analysis: server overhead per request
  uint64_t kappa_ns = 50000;        // analysis: preemption cost per segment side
  uint64_t jitter_ns = 0;           // analysis: release jitter of the clients' timers
  // analysis: the memory-bandwidth regulator's thread, which preempts
  // executors and the cpu backend's kernels on the cores it regulates
  // (none: every core) for up to its cost each period; cost 0: none runs.
  uint64_t regulator_cost_ns = 0;
  uint64_t regulator_period_ns = 1000000;
  std::vector<int> regulated_cores;
  // Refuse a chain that the PAAM analysis finds would miss a deadline. Off
  // where the chains' bounds are another analysis' (a run under gangs):
  // admission control then still places callbacks and refuses conflicts.
  bool check_deadlines = true;
  uint32_t lowest_bucket_workers = 1;  // >1: best-effort requests run concurrently
  // Each worker's stack. Locked with the server's memory, all of it is
  // resident: the built-in services used 17-24 KiB of theirs. A plugin's
  // service runs on it too; each worker logs what it used as it ends.
  size_t worker_stack = size_t{1} << 20;
  // After a request a worker keeps polling this long for the next before it
  // sleeps (while no lower bucket has work): back-to-back requests then need
  // no wake-up. 0 sleeps at once.
  uint64_t poll_ns = 100000;
  std::string policy_file;           // empty: root and the server's user only
  // The gateway for clients on other nodes (tcp:HOST:PORT or rdma:HOST:PORT;
  // accel/gateway.h); empty: none. The policy names the peers.
  std::string listen;
  std::vector<std::string> plugins;  // cpu: shared objects adding services
  // Bandwidth lock (BWLOCK++): while a request of bucket >= bwlock_bucket
  // runs on a device, the server holds bandwidth lock `bwlock` with this
  // threshold, so that the regulator throttles best-effort cores meanwhile.
  std::string bwlock;                // empty: none
  uint32_t bwlock_threshold_mbps = 0;
  uint32_t bwlock_bucket = 1;
  // The registrations' regions together hold at most this many bytes: the
  // server locks its memory, so each is resident while it is registered
  // (up to 256 MiB each). 0: half the memory available to the server as it
  // starts (free on the machine, within its memory cgroup's limit).
  uint64_t region_memory = 0;
  bool verbose = false;
};

class Server {
 public:
  // Opens the devices and the socket, or says why it cannot.
  static Expected<std::unique_ptr<Server>> create(const ServerOptions& options);
  virtual ~Server() = default;
  // Serves until stop(), or says why it had to give up.
  virtual Status run() = 0;
  // Async-signal-safe.
  virtual void stop() = 0;
  // What the registrations' regions may hold together (options'
  // region_memory, or the default it stands for).
  virtual uint64_t region_memory() const = 0;
};

// The lines `rtaccel-server --list-backends` prints.
std::string list_backends();

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_SERVER_H_
