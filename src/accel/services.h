// Accelerator services of the cpu backend: the built-in kernels and plugins
// (internal). The busy loop they spend time with is core's (core/busy.h).
#ifndef RTACCEL_ACCEL_SERVICES_H_
#define RTACCEL_ACCEL_SERVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rtaccel/service.h"
#include "rtaccel/status.hpp"

namespace rtaccel::accel {

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
