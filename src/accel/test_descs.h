// Helpers of the accel layer's tests (its unit tests beside the sources and
// the server tests in tests/accel/): registration descriptions, and the
// errno a refusal carries on the wire.
#ifndef RTACCEL_ACCEL_TEST_DESCS_H_
#define RTACCEL_ACCEL_TEST_DESCS_H_

#include <cstdio>
#include <cstring>
#include <string>

#include "rtaccel/accel.h"
#include "rtaccel/status.hpp"

namespace rtaccel::test {

struct CallbackSpec {
  std::string name;
  std::string executor = "ex";
  int core = 0;
  int executor_priority = 50;
  uint64_t cpu_ns = 100000;
  std::string service = "busy";  // empty: no segment
  uint64_t wcet_ns = 1000000;
  rtaccel_wait_mode wait = RTACCEL_WAIT_SUSPEND;
};

inline void set_callback(rtaccel_callback_desc* cb, const CallbackSpec& s) {
  memset(cb, 0, sizeof(*cb));
  snprintf(cb->name, sizeof(cb->name), "%s", s.name.c_str());
  snprintf(cb->executor, sizeof(cb->executor), "%s", s.executor.c_str());
  cb->executor_core = s.core;
  cb->executor_priority = s.executor_priority;
  cb->cpu_ns = s.cpu_ns;
  cb->wait = s.wait;
  if (!s.service.empty()) {
    cb->nsegments = 1;
    snprintf(cb->segments[0].accelerator, sizeof(cb->segments[0].accelerator), "acc0");
    snprintf(cb->segments[0].service, sizeof(cb->segments[0].service), "%s", s.service.c_str());
    cb->segments[0].wcet_ns = s.wcet_ns;
  }
}

// A one-callback chain registering `service` (with room for `request_max`
// and `response_max` bytes).
inline rtaccel_registration_desc one_callback(const std::string& chain, int priority, uint64_t period_ns,
                                              const CallbackSpec& cb, uint32_t request_max = 64,
                                              uint32_t response_max = 64, bool critical = true) {
  rtaccel_registration_desc d;
  memset(&d, 0, sizeof(d));
  snprintf(d.chain.name, sizeof(d.chain.name), "%s", chain.c_str());
  d.chain.priority = priority;
  d.chain.critical = critical;
  d.chain.period_ns = period_ns;
  d.chain.deadline_ns = period_ns;
  d.chain.ncallbacks = 1;
  set_callback(&d.chain.callbacks[0], cb);
  d.callback = 0;
  d.nservices = 1;
  snprintf(d.services[0].name, sizeof(d.services[0].name), "%s",
           cb.service.empty() ? "busy" : cb.service.c_str());
  d.services[0].request_max = request_max;
  d.services[0].response_max = response_max;
  return d;
}

// What the server replies for a Status: 0, or minus its errno; *why gets the
// reason.
inline int wire_status(const Status& s, std::string* why) {
  *why = s.message();
  return s.ok() ? 0 : -s.err();
}

}  // namespace rtaccel::test

#endif  // RTACCEL_ACCEL_TEST_DESCS_H_
