// Accelerator segments of a workload run (internal): requests sized so that
// each kernel runs for its share of the segment's WCET, and the two ways an
// executor runs them: through rtaccel-server (paam) or by direct invocation
// (ros2, picas: every process drives the device itself).
#ifndef RTACCEL_EXEC_SEGMENTS_H_
#define RTACCEL_EXEC_SEGMENTS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/fd.h"
#include "exec/shared.h"
#include "rtaccel/accel.h"
#include "rtaccel/status.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::exec {

// One segment's request: the kernel's size, and its bytes where they are
// built. Sizing a run's kernels yields the sizes; each executor builds the
// bytes of its own callbacks' requests, so that no process holds (and, with
// its memory locked, keeps resident) the requests of every callback.
struct SegmentRequest {
  std::string service;
  uint64_t n = 0;           // the problem size (busy: ns)
  size_t size = 0;          // the request's length in bytes
  size_t response_max = 0;
  std::vector<unsigned char> bytes;  // empty until built
};

// Builds the request of a built-in service for problem size n (busy: n is ns).
// False for a service it does not know.
bool build_request(const std::string& service, uint64_t n, SegmentRequest* out);

// The device number rtaccel-server and direct invocation use for accelerator
// `index`: its core on the cpu backend, else its place among the accelerators.
inline int device_of(const workload::Workload& w, size_t index) {
  const auto& acc = w.accelerators[index];
  return acc.backend == workload::Backend::kCpu ? acc.core : static_cast<int>(index);
}

// Memory attached to a directly opened device (rtaccel_direct_attach): what
// direct calls run on, so that they cost what the server's requests on its
// page-locked regions cost (cuda copies pageable memory several times slower).
class AttachedMemory {
 public:
  AttachedMemory() = default;
  AttachedMemory(const AttachedMemory&) = delete;
  AttachedMemory& operator=(const AttachedMemory&) = delete;
  ~AttachedMemory() { release(); }

  // At least `bytes`, attached to DIRECT (what it held is lost where it
  // has to grow).
  Status reserve(rtaccel_direct* direct, size_t bytes);
  // Detaches before the device is closed.
  void release();
  unsigned char* data() const { return memory_.bytes(); }

 private:
  rtaccel_direct* direct_ = nullptr;
  core::Mapping memory_;
};

// Finds, by running the kernels directly on the device, the problem size whose
// kernel takes about the target time. Set-up time only.
class KernelSizer {
 public:
  KernelSizer() = default;
  KernelSizer(const KernelSizer&) = delete;
  KernelSizer& operator=(const KernelSizer&) = delete;
  ~KernelSizer();

  Status open(workload::Backend backend, int device);
  Status size(const std::string& service, uint64_t target_ns, SegmentRequest* out);

 private:
  // The fastest of three calls, each on inputs out of the caches and after
  // other work.
  Status time_once(const SegmentRequest& request, uint64_t* best_ns);

  rtaccel_direct* direct_ = nullptr;
  AttachedMemory memory_;  // the request, then the response
  // On a device that shares the host's caches: twice the last-level cache,
  // read before each call as the run's other kernels and callbacks would.
  std::vector<unsigned char> others_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> sizes_;
};

// Requests of every segment of every callback, indexed [callback][segment].
using SegmentTable = std::vector<std::vector<SegmentRequest>>;

// Builds the bytes of the requests of executor EXECUTOR's callbacks in
// TABLE, sized already.
Status build_requests(const workload::Workload& w, size_t executor, SegmentTable* table);

// Runs accelerator segments for one executor process.
class AccelPath {
 public:
  virtual ~AccelPath() = default;
  // Sets up what the executor's callbacks need.
  virtual Status open() = 0;
  // Runs segment `segment` of `callback` on executor thread `thread`, fills the
  // segment's trace event; returns the service's status.
  virtual int run(size_t thread, size_t callback, size_t segment, TraceEvent* event) = 0;
};

struct PathConfig {
  const workload::Workload* workload = nullptr;
  // Built for this executor's callbacks; the server's path releases the
  // bytes it has put into the server's buffers for good.
  SegmentTable* requests = nullptr;
  size_t executor = 0;
  size_t threads = 1;
  std::string socket;  // paam: the server's socket
  int direct_priority = 50;
  // The server serves these callbacks in arrival order, not by priority
  // (ros2 and picas reaching an accelerator on another node): they
  // register as best effort, so that admission control never refuses them.
  bool best_effort = false;
};

std::unique_ptr<AccelPath> make_server_path(const PathConfig& config);
std::unique_ptr<AccelPath> make_direct_path(const PathConfig& config);

// The registration of one callback under its most critical chain (what the
// server's admission control analyzes). An error if a name or a count is
// past the protocol's limits.
Expected<rtaccel_registration_desc> registration_for(const workload::Workload& w, size_t callback,
                                                     const SegmentTable& requests);
// Chain C as the server's admission control sees it: its callbacks with
// their executors, WCETs, segments and topics. What registration_for sends
// and the runner declares, so that the two agree byte for byte.
Status chain_desc_for(const workload::Workload& w, size_t c, rtaccel_chain_desc* out);

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_SEGMENTS_H_
