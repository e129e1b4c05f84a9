// cpu backend: a dedicated core is the device. Each bucket's worker is a
// SCHED_FIFO thread on that core at its own priority, so a request in a higher
// bucket preempts a lower one mid-kernel, the way stream priorities let a GPU
// preempt; services run in the worker thread itself.
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/busy.h"
#include "core/realtime.h"
#include "accel/backend.h"
#include "accel/protocol.h"
#include "accel/services.h"

namespace rtaccel::accel {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const BackendOptions& options, const ServiceTable* services)
      : options_(options), services_(services) {}

  std::string describe() const override {
    return "cpu core " + std::to_string(options_.device) + ", " + std::to_string(levels()) +
           " levels" + (options_.fifo_base > 0 ? ", SCHED_FIFO " + std::to_string(options_.fifo_base) + "+" : ", SCHED_OTHER");
  }
  uint32_t levels() const override { return options_.levels; }
  bool preemptive() const override { return options_.fifo_base > 0; }

  Status prepare_worker(uint32_t bucket) override {
    // Priority first: a worker that arrived on the device core still at
    // SCHED_OTHER would wait there behind a running lower bucket.
    if (options_.fifo_base > 0) {
      if (Status st = set_worker_fifo(options_.fifo_base + int(bucket)); !st) return st;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(options_.device, &set);
    if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) {
      return Status::error("cannot pin a worker to core " + std::to_string(options_.device) + ": " + strerror(err));
    }
    core::calibrate_busy_loop();  // on the device core, before the first request
    return Status();
  }

  int lookup(const char* service) const override {
    const auto& all = services_->all();
    for (size_t i = 0; i < all.size(); i++)
      if (strcmp(all[i]->name, service) == 0) return int(i);
    return -1;
  }

  int run(int key, void*, const void*, rtaccel_service_call* call) override {
    const auto& all = services_->all();
    if (key < 0 || size_t(key) >= all.size()) return -EINVAL;
    return all[size_t(key)]->run(call);
  }

 private:
  BackendOptions options_;
  const ServiceTable* services_;
};

}  // namespace

Expected<std::unique_ptr<Backend>> make_cpu_backend(const BackendOptions& options, const ServiceTable* services) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (options.device < 0 || options.device >= cores) {
    return Status::invalid("core " + std::to_string(options.device) + " does not exist (this machine has " +
           std::to_string(cores) + ")");
  }
  if (rtaccel_core_allowed(options.device) != 0)
    return Status::invalid("core " + std::to_string(options.device) +
                           " is not one this process may use (offline, or outside its cpuset: a container's "
                           "--cpuset-cpus)");
  if (options.levels < 1 || options.levels > kMaxLevels) {
    return Status::error("priority levels must be 1.." + std::to_string(kMaxLevels));
  }
  if (options.fifo_base < 0 || options.fifo_base + int(options.levels) - 1 > 98) {
    return Status::error("SCHED_FIFO base priority must leave room for every level below 99");
  }
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(options, services));
}

}  // namespace rtaccel::accel
