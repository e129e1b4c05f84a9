#include "accel/services.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "accel/protocol.h"
#include "core/busy.h"
#include "rtaccel/accel.h"
#include "rtaccel/requests.h"

namespace rtaccel::accel {
namespace {

// The request checked against the call's buffers (rtaccel/requests.h).
bool decode(int service, const rtaccel_service_call* call, rtaccel_request_view* v) {
  return rtaccel_request_decode(service, call->request, call->request_len, call->response_cap, v) == 0;
}

int run_busy(rtaccel_service_call* call) {
  rtaccel_request_view v;
  if (!decode(RTACCEL_BUSY, call, &v)) return -EINVAL;
  core::busy_for_ns(v.n);
  call->response_len = 0;
  return 0;
}

int run_vecadd(rtaccel_service_call* call) {
  rtaccel_request_view v;
  if (!decode(RTACCEL_VECADD, call, &v)) return -EINVAL;
  float* c = static_cast<float*>(call->response);
  for (uint64_t i = 0; i < v.n; i++) c[i] = v.a[i] + v.b[i];
  call->response_len = v.response_len;
  return 0;
}

int run_matmul(rtaccel_service_call* call) {
  rtaccel_request_view v;
  if (!decode(RTACCEL_MATMUL, call, &v)) return -EINVAL;
  const uint64_t n = v.n;
  float* c = static_cast<float*>(call->response);
  std::fill(c, c + n * n, 0.0f);
  // i-k-j order: the inner loop streams rows of b and c.
  for (uint64_t i = 0; i < n; i++)
    for (uint64_t k = 0; k < n; k++) {
      const float aik = v.a[i * n + k];
      const float* brow = v.b + k * n;
      float* crow = c + i * n;
      for (uint64_t j = 0; j < n; j++) crow[j] += aik * brow[j];
    }
  call->response_len = v.response_len;
  return 0;
}

int run_reduction(rtaccel_service_call* call) {
  rtaccel_request_view v;
  if (!decode(RTACCEL_REDUCTION, call, &v)) return -EINVAL;
  double sum = 0;
  for (uint64_t i = 0; i < v.n; i++) sum += v.a[i];
  memcpy(call->response, &sum, sizeof(sum));
  call->response_len = v.response_len;
  return 0;
}

int run_histogram(rtaccel_service_call* call) {
  rtaccel_request_view v;
  if (!decode(RTACCEL_HISTOGRAM, call, &v)) return -EINVAL;
  uint32_t* count = static_cast<uint32_t*>(call->response);
  std::fill(count, count + v.bins, 0u);
  const double scale = double(v.bins) / (double(v.hi) - double(v.lo));
  for (uint64_t i = 0; i < v.n; i++) {
    const float x = v.a[i];
    if (!(x >= v.lo && x < v.hi)) continue;  // also drops NaN
    uint64_t bin = uint64_t((double(x) - double(v.lo)) * scale);
    if (bin >= v.bins) bin = v.bins - 1;  // rounding at the upper edge
    count[bin]++;
  }
  call->response_len = v.response_len;
  return 0;
}

const rtaccel_service kBuiltins[] = {
    {RTACCEL_SERVICE_ABI, "busy", run_busy},
    {RTACCEL_SERVICE_ABI, "vecadd", run_vecadd},
    {RTACCEL_SERVICE_ABI, "matmul", run_matmul},
    {RTACCEL_SERVICE_ABI, "reduction", run_reduction},
    {RTACCEL_SERVICE_ABI, "histogram", run_histogram},
};

}  // namespace

const rtaccel_service* builtin_services(uint32_t* count) {
  *count = sizeof(kBuiltins) / sizeof(kBuiltins[0]);
  return kBuiltins;
}

ServiceTable::ServiceTable() {
  uint32_t n;
  const rtaccel_service* builtins = builtin_services(&n);
  for (uint32_t i = 0; i < n; i++) services_.push_back(&builtins[i]);
}

ServiceTable::~ServiceTable() {
  for (void* handle : plugins_) dlclose(handle);
}

Status ServiceTable::load_plugin(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return Status::invalid(std::string("cannot load plugin: ") + dlerror());
  auto entry = reinterpret_cast<rtaccel_plugin_services_fn>(dlsym(handle, RTACCEL_PLUGIN_SYMBOL));
  uint32_t count = 0;
  const rtaccel_service* table = entry ? entry(&count) : nullptr;
  if (!table) {
    dlclose(handle);
    return Status::invalid(path + ": no " RTACCEL_PLUGIN_SYMBOL "() or it returned no table");
  }
  for (uint32_t i = 0; i < count; i++) {
    const rtaccel_service& s = table[i];
    std::string problem;
    if (s.abi != RTACCEL_SERVICE_ABI)
      problem = "service ABI " + std::to_string(s.abi) + ", expected " + std::to_string(RTACCEL_SERVICE_ABI);
    else if (!s.name || !s.run || !s.name[0] || strlen(s.name) >= RTACCEL_SERVICE_NAME_MAX)
      problem = "service " + std::to_string(i) + " has no name, a name too long, or no run()";
    else if (find(s.name))
      problem = std::string("service '") + s.name + "' is already defined";
    for (uint32_t k = 0; k < i && problem.empty(); k++)
      if (strcmp(table[k].name, s.name) == 0)
        problem = std::string("service '") + s.name + "' is defined twice";
    if (!problem.empty()) {
      dlclose(handle);
      return Status::invalid(path + ": " + problem);
    }
  }
  for (uint32_t i = 0; i < count; i++) services_.push_back(&table[i]);
  plugins_.push_back(handle);
  return Status();
}

const rtaccel_service* ServiceTable::find(const char* name) const {
  for (const rtaccel_service* s : services_)
    if (strcmp(s->name, name) == 0) return s;
  return nullptr;
}

}  // namespace rtaccel::accel
