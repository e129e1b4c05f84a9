// Direct invocation (rtaccel_direct_*): the calling process drives the device
// itself, as every process does without a server. This is the baseline the
// server is compared against.
#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/busy.h"
#include "accel/backend.h"
#include "accel/services.h"
#include "rtaccel/accel.h"

using namespace rtaccel::accel;
using rtaccel::Status;

struct rtaccel_direct {
  std::unique_ptr<ServiceTable> services;
  std::unique_ptr<Backend> backend;
  bool cpu = true;
  bool cuda = false;
  int core = 0;
  int priority = 0;
  std::vector<std::pair<void*, void*>> attached;  // base, the backend's handle
};

namespace {

// Moves the calling thread onto the device core at the shared priority for
// one call, and back. The priority changes on the thread's own core, before
// it migrates: a thread that arrived at its executor's priority would preempt
// the kernel running on the device core, and lowering it there would keep it
// ahead of that kernel (Linux puts a thread whose priority falls at the head
// of its new level). A device runs the kernels it has in turn.
class OnDeviceCore {
 public:
  OnDeviceCore(int core, int priority) {
    saved_ok_ = pthread_getaffinity_np(pthread_self(), sizeof(saved_set_), &saved_set_) == 0 &&
                pthread_getschedparam(pthread_self(), &saved_policy_, &saved_param_) == 0;
    if (priority > 0) {
      // SCHED_RR at one priority for every process: they time-share the
      // device core the way a driver interleaves contexts.
      sched_param p{};
      p.sched_priority = priority;
      error_ = pthread_setschedparam(pthread_self(), SCHED_RR, &p);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    if (!error_) error_ = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  ~OnDeviceCore() {
    if (!saved_ok_) return;
    // Back to the own core first, for the same reason.
    pthread_setaffinity_np(pthread_self(), sizeof(saved_set_), &saved_set_);
    pthread_setschedparam(pthread_self(), saved_policy_, &saved_param_);
  }
  int error() const { return error_; }

 private:
  cpu_set_t saved_set_{};
  int saved_policy_ = SCHED_OTHER;
  sched_param saved_param_{};
  bool saved_ok_ = false;
  int error_ = 0;
};

}  // namespace

extern "C" {

int rtaccel_direct_open(const char* backend, int device, int priority, rtaccel_direct** out) {
  if (!backend || !out || priority < 0 || priority > 99) return -EINVAL;
  auto d = std::unique_ptr<rtaccel_direct>(new (std::nothrow) rtaccel_direct);
  if (!d) return -ENOMEM;
  BackendOptions options;
  options.device = device;
  options.levels = 1;
  options.fifo_base = 0;  // the thread's scheduling is set per call below
  const auto kind = rtaccel::workload::parse_backend(backend);
  if (!kind) return -ENOENT;
  d->cpu = *kind == rtaccel::workload::Backend::kCpu;
  d->cuda = *kind == rtaccel::workload::Backend::kCuda;
  if (d->cpu) d->services = std::make_unique<ServiceTable>();
  // cuda: its own context in this process, as every process has without a
  // server; one stream per calling thread at the lowest priority.
  auto opened = make_backend(*kind, options, d->services.get());
  if (!opened) return -ENODEV;
  d->backend = opened.take();
  d->core = device;
  d->priority = priority;
  if (d->cpu) {
    OnDeviceCore on(device, 0);
    rtaccel::core::calibrate_busy_loop();
  }
  *out = d.release();
  return 0;
}

void rtaccel_direct_close(rtaccel_direct* direct) {
  if (!direct) return;
  for (const auto& a : direct->attached)
    if (direct->cuda) direct->backend->detach(a.second);
  delete direct;
}

int rtaccel_direct_attach(rtaccel_direct* direct, void* base, size_t len) {
  if (!direct || !base || !len) return -EINVAL;
  for (const auto& a : direct->attached)
    if (a.first == base) return -EEXIST;
  // Only cuda's copies depend on the memory: the cpu backend works in place,
  // and opencl's direct calls make their buffers per call.
  void* handle = nullptr;
  if (Status st = direct->cuda ? direct->backend->attach(base, len, &handle) : Status(); !st) {
    fprintf(stderr, "rtaccel_direct_attach: %s\n", st.message().c_str());
    return -EIO;
  }
  direct->attached.emplace_back(base, handle);
  return 0;
}

void rtaccel_direct_detach(rtaccel_direct* direct, void* base) {
  if (!direct) return;
  for (auto it = direct->attached.begin(); it != direct->attached.end(); ++it) {
    if (it->first != base) continue;
    if (direct->cuda) direct->backend->detach(it->second);
    direct->attached.erase(it);
    return;
  }
}

int rtaccel_backend_probe(const char* backend, char* detail, size_t detail_len) {
  if (!backend || !rtaccel::workload::parse_backend(backend)) return -ENOENT;
  for (const BackendProbe& p : probe_backends()) {
    if (p.name != backend) continue;
    if (detail && detail_len) snprintf(detail, detail_len, "%s", p.detail.c_str());
    return p.found ? 1 : 0;
  }
  return -ENOENT;
}

int rtaccel_direct_call(rtaccel_direct* direct, const char* service, const void* request,
                        size_t request_len, void* response, size_t response_cap,
                        size_t* response_len) {
  if (!direct || !service) return -EINVAL;
  const int key = direct->backend->lookup(service);
  if (key < 0) return -ENOENT;
  rtaccel_service_call call{request, request_len, response, response_cap, 0};
  int status;
  if (direct->cpu) {
    OnDeviceCore on(direct->core, direct->priority);
    if (on.error()) return -on.error();
    status = direct->backend->run(key, nullptr, nullptr, &call);
  } else {
    status = direct->backend->run(key, nullptr, nullptr, &call);
  }
  if (status == 0 && response_len) *response_len = call.response_len;
  return status;
}

}  // extern "C"
