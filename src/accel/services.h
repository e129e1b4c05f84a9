// Accelerator services of the cpu backend: the built-in kernels, the busy
// loop's calibration, and plugins (internal).
#ifndef RTACCEL_ACCEL_SERVICES_H_
#define RTACCEL_ACCEL_SERVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rtaccel/service.h"
#include "rtaccel/status.hpp"

namespace rtaccel::accel {

// Measures how many iterations of the busy loop this core runs per
// microsecond (the fastest of several trials, so that a disturbed trial only
// makes later busy requests longer, never shorter). Thread-safe; runs once.
void calibrate_busy_loop();
// Runs the busy loop for `ns` of execution: real work that a higher-priority
// thread preempts and that resumes where it stopped, like a GPU kernel.
void busy_for_ns(uint64_t ns);

// busy, vecadd, matmul, reduction, histogram.
const rtaccel_service* builtin_services(uint32_t* count);

// The services one server (or direct-invocation handle) offers: the built-in
// ones, then those of plugins. Set-up time only; lookups are read-only after.
class ServiceTable {
 public:
  ServiceTable();
  ServiceTable(const ServiceTable&) = delete;
  ServiceTable& operator=(const ServiceTable&) = delete;
  ~ServiceTable();

  // dlopen()s a plugin and adds its services. A name that is already taken is
  // an error (with the reason).
  Status load_plugin(const std::string& path);
  const rtaccel_service* find(const char* name) const;
  const std::vector<const rtaccel_service*>& all() const { return services_; }

 private:
  std::vector<const rtaccel_service*> services_;
  std::vector<void*> plugins_;
};

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_SERVICES_H_
