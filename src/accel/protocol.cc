#include "accel/protocol.h"

#include <cerrno>
#include <cstring>
#include <ctime>

namespace rtaccel::accel {
namespace {

constexpr uint64_t kMaxRegion = 256ull << 20;
constexpr uint64_t kMaxDuration = 3600ull * 1000000000ull;  // one hour

uint64_t align_up(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

bool terminated(const char* text, size_t size) { return memchr(text, '\0', size) != nullptr; }

bool named(const char* text, size_t size) { return terminated(text, size) && text[0] != '\0'; }


}  // namespace

double accelerator_utilisation(const rtaccel_callback_desc& callback, uint64_t period_ns) {
  uint64_t sum = 0;
  for (uint32_t j = 0; j < callback.nsegments && j < RTACCEL_MAX_SEGMENTS; j++)
    sum += callback.segments[j].wcet_ns;
  return period_ns ? double(sum) / double(period_ns) : 0.0;
}

Status compute_layout(const rtaccel_registration_desc& desc, Layout* layout) {
  Layout out;
  out.nservices = desc.nservices;
  out.producer_offset = uint32_t(align_up(sizeof(RegionHeader), kCacheLine));
  out.entries_offset = out.producer_offset + uint32_t(sizeof(RegionProducer));
  uint64_t at = align_up(out.entries_offset + kRingEntries * sizeof(RequestEntry), 4096);
  for (uint32_t i = 0; i < desc.nservices; i++) {
    const rtaccel_service_need& need = desc.services[i];
    ServiceArea& area = out.services[i];
    memcpy(area.name, need.name, sizeof(area.name));
    area.request_offset = uint32_t(at);
    area.request_max = need.request_max;
    at = align_up(at + need.request_max, kCacheLine);
    area.response_offset = uint32_t(at);
    area.response_max = need.response_max;
    at = align_up(at + need.response_max, kCacheLine);
    if (at > kMaxRegion) return Status::invalid("the buffers asked for exceed the region limit of 256 MiB");
  }
  out.size = uint32_t(align_up(at, 4096));
  *layout = out;
  return Status();
}

namespace {

// A message's header: its size, magic, version and type.
Status check_header(const void* message, size_t len, size_t expected, MessageType type, const char* what) {
  if (len != expected)
    return Status::invalid(std::string(what) + " message of " + std::to_string(len) + " bytes, expected " +
                           std::to_string(expected));
  uint32_t header[3];
  memcpy(header, message, sizeof(header));
  if (header[0] != kMagic) return Status::invalid("bad magic: not an rtaccel client");
  if (header[1] != kProtocolVersion)
    return Status::invalid("protocol version " + std::to_string(header[1]) + ", server speaks " +
                           std::to_string(kProtocolVersion));
  if (header[2] != uint32_t(type)) return Status::invalid(std::string("not a ") + what);
  return Status();
}

Status check_chain(const rtaccel_chain_desc& c) {
  if (!named(c.name, sizeof(c.name))) return Status::invalid("chain name empty or not terminated");
  std::string chain = std::string("chain '") + c.name + "': ";
  if (c.critical > 1) return Status::invalid(chain + "critical must be 0 or 1");
  if (c.release > RTACCEL_RELEASE_TOGETHER)
    return Status::invalid(chain + "release must be RTACCEL_RELEASE_UNALIGNED or RTACCEL_RELEASE_TOGETHER");
  if (c.period_ns == 0 || c.period_ns > kMaxDuration)
    return Status::invalid(chain + "period must be in (0, 1 h]");
  if (c.deadline_ns == 0 || c.deadline_ns > c.period_ns)
    return Status::invalid(chain + "deadline must be in (0, period]");
  if (c.ncallbacks == 0 || c.ncallbacks > RTACCEL_MAX_CALLBACKS)
    return Status::invalid(chain + "needs 1 to " + std::to_string(RTACCEL_MAX_CALLBACKS) + " callbacks");
  for (uint32_t i = 0; i < c.ncallbacks; i++) {
    const rtaccel_callback_desc& cb = c.callbacks[i];
    if (!named(cb.name, sizeof(cb.name)))
      return Status::invalid(chain + "callback " + std::to_string(i) + ": name empty or not terminated");
    std::string where = chain + "callback '" + cb.name + "': ";
    if (!named(cb.executor, sizeof(cb.executor)))
      return Status::invalid(where + "executor name empty or not terminated");
    if (cb.executor_core < 0 || cb.executor_core > 4095)
      return Status::invalid(where + "executor core out of range");
    if (cb.executor_priority < 1 || cb.executor_priority > 99)
      return Status::invalid(where + "executor priority must be 1..99");
    if (cb.cpu_ns > kMaxDuration) return Status::invalid(where + "cpu time above one hour");
    if (cb.wait > RTACCEL_WAIT_SPIN) return Status::invalid(where + "unknown wait mode");
    if (cb.nsegments > RTACCEL_MAX_SEGMENTS)
      return Status::invalid(where + "more than " + std::to_string(RTACCEL_MAX_SEGMENTS) + " segments");
    for (uint32_t j = 0; j < cb.nsegments; j++) {
      const rtaccel_segment_desc& s = cb.segments[j];
      if (!terminated(s.accelerator, sizeof(s.accelerator)) || !named(s.service, sizeof(s.service)))
        return Status::invalid(where + "segment " + std::to_string(j) + ": bad name");
      if (s.wcet_ns == 0 || s.wcet_ns > kMaxDuration)
        return Status::invalid(where + "segment " + std::to_string(j) + ": wcet must be in (0, 1 h]");
    }
    if (!terminated(cb.publishes, sizeof(cb.publishes)))
      return Status::invalid(where + "published topic not terminated");
    if (cb.ntriggers > RTACCEL_MAX_TRIGGERS)
      return Status::invalid(where + "more than " + std::to_string(RTACCEL_MAX_TRIGGERS) + " trigger topics");
    for (uint32_t t = 0; t < cb.ntriggers; t++) {
      if (!named(cb.triggers[t], sizeof(cb.triggers[t])))
        return Status::invalid(where + "trigger topic " + std::to_string(t) + ": name empty or not terminated");
      for (uint32_t u = 0; u < t; u++)
        if (strcmp(cb.triggers[u], cb.triggers[t]) == 0)
          return Status::invalid(where + "trigger topic '" + cb.triggers[t] + "' named twice");
    }
    // A later callback's triggers, where given, hold its predecessor's topic:
    // the chain's path is how its messages go.
    if (i > 0 && cb.ntriggers > 0) {
      const char* before = c.callbacks[i - 1].publishes;
      bool follows = false;
      for (uint32_t t = 0; t < cb.ntriggers && !follows; t++) follows = before[0] && strcmp(cb.triggers[t], before) == 0;
      if (!follows)
        return Status::invalid(where + "no trigger topic of it is published by '" + c.callbacks[i - 1].name +
                               "', before it on the chain");
    }
    for (uint32_t k = 0; k < i; k++)
      if (strcmp(c.callbacks[k].name, cb.name) == 0)
        return Status::invalid(where + "appears twice in the chain");
  }
  return Status();
}

}  // namespace

Status check_declaration(const void* message, size_t len) {
  if (Status st = check_header(message, len, sizeof(DeclareRequest), MessageType::kDeclare, "declaration"); !st)
    return st;
  DeclareRequest m;
  memcpy(&m, message, sizeof(m));
  if (m.flags & ~kDeclareLast) return Status::invalid("declaration: unknown flags");
  return check_chain(m.chain);
}

Status check_registration(const void* message, size_t len) {
  if (Status st = check_header(message, len, sizeof(RegisterRequest), MessageType::kRegister, "registration"); !st)
    return st;
  RegisterRequest m;
  memcpy(&m, message, sizeof(m));
  const rtaccel_registration_desc& d = m.desc;
  const rtaccel_chain_desc& c = d.chain;
  if (Status st = check_chain(c); !st) return st;
  const std::string chain = std::string("chain '") + c.name + "': ";
  if (d.callback >= c.ncallbacks) return Status::invalid(chain + "callback index outside the chain");
  if (d.nservices == 0 || d.nservices > RTACCEL_MAX_SERVICES)
    return Status::invalid("needs 1 to " + std::to_string(RTACCEL_MAX_SERVICES) + " services");
  for (uint32_t i = 0; i < d.nservices; i++) {
    const rtaccel_service_need& s = d.services[i];
    if (!named(s.name, sizeof(s.name)))
      return Status::invalid("service " + std::to_string(i) + ": name empty or not terminated");
    if (s.request_max > RTACCEL_MAX_BUFFER || s.response_max > RTACCEL_MAX_BUFFER)
      return Status::invalid(std::string("service '") + s.name + "': buffer above 64 MiB");
    for (uint32_t k = 0; k < i; k++)
      if (strcmp(d.services[k].name, s.name) == 0)
        return Status::invalid(std::string("service '") + s.name + "' named twice");
  }
  Layout layout;
  return compute_layout(d, &layout);
}

const char* to_string(RequestError error) {
  switch (error) {
    case RequestError::kNone: return "ok";
    case RequestError::kNotSubmitted: return "entry not in the submitted state";
    case RequestError::kForgedCallback: return "callback id is not the region owner's";
    case RequestError::kUnknownService: return "unknown service index";
    case RequestError::kRequestOutside: return "request outside the service's request buffer";
    case RequestError::kResponseOutside: return "response outside the service's response buffer";
    case RequestError::kMisaligned: return "buffer offset not 64-byte aligned";
  }
  return "?";
}

RequestError decode_request(const volatile RequestEntry& entry, const Layout& layout,
                            uint64_t owner_id, DecodedRequest* out) {
  // Each field is read exactly once: the client may rewrite the entry while we
  // look at it, and every decision below must be about the values we keep.
  const uint32_t state = entry.state;
  const uint64_t callback_id = entry.callback_id;
  DecodedRequest r;
  r.service = entry.service;
  r.request_offset = entry.request_offset;
  r.request_len = entry.request_len;
  r.response_offset = entry.response_offset;
  r.response_cap = entry.response_cap;
  if (entry_phase(state) != kSubmitted) return RequestError::kNotSubmitted;
  if (callback_id != owner_id) return RequestError::kForgedCallback;
  if (r.service >= layout.nservices) return RequestError::kUnknownService;
  if (r.request_offset % kCacheLine || r.response_offset % kCacheLine)
    return RequestError::kMisaligned;
  const ServiceArea& area = layout.services[r.service];
  // 64-bit sums: offsets and lengths are 32-bit and cannot overflow here.
  if (r.request_offset < area.request_offset ||
      uint64_t(r.request_offset) + r.request_len > uint64_t(area.request_offset) + area.request_max)
    return RequestError::kRequestOutside;
  if (r.response_offset < area.response_offset ||
      uint64_t(r.response_offset) + r.response_cap >
          uint64_t(area.response_offset) + area.response_max)
    return RequestError::kResponseOutside;
  *out = r;
  return RequestError::kNone;
}

}  // namespace rtaccel::accel
