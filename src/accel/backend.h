// Accelerator backends of rtaccel-server and of direct invocation (internal).
//
// A backend is one device. The server runs one worker thread per device
// priority level (bucket); each worker calls prepare_worker() once, then
// run() for every request it takes, to completion, in its own thread.
#ifndef RTACCEL_ACCEL_BACKEND_H_
#define RTACCEL_ACCEL_BACKEND_H_

#include <pthread.h>
#include <sched.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "rtaccel/status.hpp"
#include "rtaccel/workload.hpp"

#include "rtaccel/service.h"

namespace rtaccel::accel {

class ServiceTable;

struct BackendOptions {
  // cpu: the core that is the device. opencl: the device's index among all
  // OpenCL devices of all platforms. cuda: the CUDA device number.
  int device = 0;
  // Device priority levels, at most kMaxLevels. opencl has one; cuda offers
  // at most as many as the device has stream priorities.
  uint32_t levels = 4;
  // cpu, cuda: SCHED_FIFO priority of the lowest bucket's worker; bucket b
  // runs at base + b. 0 leaves the workers at SCHED_OTHER (cpu: no real
  // preemption).
  int fifo_base = 80;
  // Core for worker threads that only drive a device (opencl, cuda); -1: any.
  int driver_core = -1;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string describe() const = 0;
  virtual uint32_t levels() const = 0;
  // Whether a higher level preempts a lower one while it runs.
  virtual bool preemptive() const = 0;
  // Per worker thread, before it serves `bucket`: affinity and priority.
  virtual Status prepare_worker(uint32_t bucket) = 0;
  // A key for run(), or -1 when the backend has no such service.
  virtual int lookup(const char* service) const = 0;
  // Makes a client region usable by the device (opencl: a buffer over it).
  virtual Status attach(void* base, size_t size, void** handle) {
    (void)base, (void)size;
    *handle = nullptr;
    return Status();
  }
  virtual void detach(void* handle) { (void)handle; }
  // Runs one request to completion. call->request and call->response lie
  // inside the region at `base` attached as `handle`, or, with handle null,
  // anywhere in the caller's memory (direct invocation).
  virtual int run(int key, void* handle, const void* base, rtaccel_service_call* call) = 0;
};

// Gives the calling worker thread SCHED_FIFO `priority`. Inline: the cuda module uses it without linking rtaccel.
inline Status set_worker_fifo(int priority) {
  sched_param param{};
  param.sched_priority = priority;
  if (int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param)) {
    return Status::error("cannot give a worker SCHED_FIFO " + std::to_string(priority) + ": " + strerror(err) +
           " (run as root or with CAP_SYS_NICE, or pass --no-fifo)");
  }
  return Status();
}

// cpu: `services` must outlive the backend.
Expected<std::unique_ptr<Backend>> make_cpu_backend(const BackendOptions& options, const ServiceTable* services);
// An error when no device was found (or OpenCL is not built in).
Expected<std::unique_ptr<Backend>> make_opencl_backend(const BackendOptions& options);
// Loads librtaccel_cuda.so (cuda_loader.cc); an error when it is not built,
// its libraries are missing, or there is no such CUDA device.
Expected<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options);

// The backend of that kind; cpu uses `services`.
inline Expected<std::unique_ptr<Backend>> make_backend(workload::Backend kind, const BackendOptions& options,
                                                       const ServiceTable* services) {
  switch (kind) {
    case workload::Backend::kCpu: return make_cpu_backend(options, services);
    case workload::Backend::kOpenCl: return make_opencl_backend(options);
    case workload::Backend::kCuda: return make_cuda_backend(options);
  }
  return Status::invalid("unknown backend");
}

struct BackendProbe {
  std::string name;
  bool compiled = false;
  bool found = false;
  std::string detail;  // devices found, or why not
};
std::vector<BackendProbe> probe_backends();
BackendProbe probe_cuda();

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_BACKEND_H_
