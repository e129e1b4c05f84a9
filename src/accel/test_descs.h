// Helpers of the accel layer's tests (its unit tests beside the sources and
// the server tests in tests/accel/): registration descriptions, and the
// errno a refusal carries on the wire.
#ifndef RTACCEL_ACCEL_TEST_DESCS_H_
#define RTACCEL_ACCEL_TEST_DESCS_H_

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

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

// Two chains meeting at a fusion, as a point-cloud fusion takes the front
// and the rear lidar: 'front' (front_driver, then fusion; priority 20) and
// 'rear' (rear_driver, whose kernel takes REAR_WCET_NS, then fusion;
// priority 10), the fusion triggered by both drivers' topics. Every
// callback on an executor of its own, on cores 0 to 2; period 100 ms,
// deadline FRONT_DEADLINE_NS for 'front'; both drivers' timers started at
// one instant, as rtaccel run's runner starts them (declared together).
struct FusionPair {
  rtaccel_chain_desc front, rear;
};
inline FusionPair fusion_pair(uint64_t front_deadline_ns, uint64_t rear_wcet_ns) {
  const auto topic = [](rtaccel_callback_desc* cb, const char* publishes, std::vector<const char*> triggers) {
    snprintf(cb->publishes, sizeof(cb->publishes), "%s", publishes);
    cb->ntriggers = uint32_t(triggers.size());
    for (size_t t = 0; t < triggers.size(); t++)
      snprintf(cb->triggers[t], sizeof(cb->triggers[t]), "%s", triggers[t]);
  };
  rtaccel_callback_desc fusion;
  set_callback(&fusion, {.name = "fusion", .executor = "ex_fusion", .core = 2, .wcet_ns = 1000000});
  topic(&fusion, "Fused", {"Front", "Rear"});
  const auto chain = [&](const char* name, int priority, const CallbackSpec& driver, const char* publishes) {
    rtaccel_chain_desc c;
    memset(&c, 0, sizeof(c));
    snprintf(c.name, sizeof(c.name), "%s", name);
    c.priority = priority;
    c.critical = 1;
    c.period_ns = c.deadline_ns = 100000000;
    c.ncallbacks = 2;
    c.release = RTACCEL_RELEASE_TOGETHER;
    set_callback(&c.callbacks[0], driver);
    topic(&c.callbacks[0], publishes, {});
    c.callbacks[1] = fusion;
    return c;
  };
  FusionPair p;
  p.front = chain("front", 20, {.name = "front_driver", .executor = "ex_front", .core = 0, .wcet_ns = 1000000}, "Front");
  p.front.deadline_ns = front_deadline_ns;
  p.rear = chain("rear", 10, {.name = "rear_driver", .executor = "ex_rear", .core = 1, .wcet_ns = rear_wcet_ns}, "Rear");
  return p;
}

// The registration of CHAIN's callback at INDEX, with one busy service.
inline rtaccel_registration_desc registration_of(const rtaccel_chain_desc& chain, uint32_t index) {
  rtaccel_registration_desc d;
  memset(&d, 0, sizeof(d));
  d.chain = chain;
  d.callback = index;
  d.nservices = 1;
  snprintf(d.services[0].name, sizeof(d.services[0].name), "busy");
  d.services[0].request_max = d.services[0].response_max = 64;
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
