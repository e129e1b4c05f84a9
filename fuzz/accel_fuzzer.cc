// libFuzzer target for everything rtaccel-server decodes from clients: the
// registration message, request entries in shared memory, and the policy
// file. Properties checked beyond "no crash":
//  - a registration that passes the check has a layout and goes through
//    admission control (the analysis) without trouble, and so does a
//    declaration beside the chain it shares a fusion with;
//  - a request entry that decodes lies entirely inside its service's buffers,
//    64-byte aligned;
//  - a policy either parses or is refused with a "file:line:" message;
//  - a remote client's request that the gateway decodes names a service it
//    has, a length within that service's buffer and exactly the bytes that
//    came, and a control message it decodes has a known type and slot;
//  - a built-in service's request that decodes (rtaccel/requests.h) has its
//    inputs inside the request and its result inside the response buffer,
//    encoding it again gives the same header, and the cpu backend's service
//    runs it (with the sanitizers watching its arithmetic) to a result of
//    the length decoded.
//
// Input: byte 0 picks the target; for the binary ones bytes 1-2 give the
// offset at which the rest overwrites a valid message, so that mutations
// reach every field while the others stay plausible.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "accel/admission.h"
#include "accel/policy.h"
#include "accel/protocol.h"
#include "accel/remote.h"
#include "accel/services.h"
#include "rtaccel/requests.h"

using namespace rtaccel::accel;
using rtaccel::Status;

namespace {

RegisterRequest valid_registration() {
  RegisterRequest m{};
  m.magic = kMagic;
  m.version = kProtocolVersion;
  m.type = uint32_t(MessageType::kRegister);
  rtaccel_chain_desc& c = m.desc.chain;
  strcpy(c.name, "chain");
  c.priority = 10;
  c.critical = 1;
  c.period_ns = 100000000;
  c.deadline_ns = 100000000;
  c.ncallbacks = 2;
  for (int i = 0; i < 2; i++) {
    rtaccel_callback_desc& cb = c.callbacks[i];
    snprintf(cb.name, sizeof(cb.name), "cb%d", i);
    strcpy(cb.executor, "ex");
    cb.executor_core = 1;
    cb.executor_priority = 50;
    cb.cpu_ns = 1000000;
    cb.nsegments = 1;
    strcpy(cb.segments[0].service, "busy");
    cb.segments[0].wcet_ns = 2000000;
    snprintf(cb.publishes, sizeof(cb.publishes), "topic%d", i);
  }
  c.callbacks[1].ntriggers = 1;
  strcpy(c.callbacks[1].triggers[0], "topic0");
  m.desc.nservices = 1;
  strcpy(m.desc.services[0].name, "busy");
  m.desc.services[0].request_max = 64;
  m.desc.services[0].response_max = 64;
  return m;
}

// 'front' and 'rear' meeting at a fusion (both drivers' topics trigger it).
struct FusionPair {
  rtaccel_chain_desc front, rear;
};
FusionPair fusion_pair() {
  FusionPair p;
  rtaccel_chain_desc* chains[2] = {&p.front, &p.rear};
  for (int k = 0; k < 2; k++) {
    rtaccel_chain_desc& c = *chains[k];
    c = valid_registration().desc.chain;
    snprintf(c.name, sizeof(c.name), "%s", k ? "rear" : "front");
    c.priority = k ? 10 : 20;
    snprintf(c.callbacks[0].name, sizeof(c.callbacks[0].name), "%s_driver", c.name);
    snprintf(c.callbacks[0].executor, sizeof(c.callbacks[0].executor), "ex_%s", c.name);
    snprintf(c.callbacks[0].publishes, sizeof(c.callbacks[0].publishes), "%s", k ? "Rear" : "Front");
    rtaccel_callback_desc& fusion = c.callbacks[1];
    strcpy(fusion.name, "fusion");
    strcpy(fusion.executor, "ex_fusion");
    fusion.ntriggers = 2;
    strcpy(fusion.triggers[0], "Front");
    strcpy(fusion.triggers[1], "Rear");
  }
  return p;
}

template <typename T>
void overlay(T* target, const uint8_t* data, size_t size) {
  if (size < 2) return;
  const size_t offset = ((size_t(data[0]) << 8) | data[1]) % sizeof(T);
  const size_t n = std::min(size - 2, sizeof(T) - offset);
  memcpy(reinterpret_cast<uint8_t*>(target) + offset, data + 2, n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t target = data[0] % 8;
  data++;
  size--;
  switch (target) {
    case 0: {  // registration overlaid on a valid one
      RegisterRequest m = valid_registration();
      overlay(&m, data, size);
      if (Status st = check_registration(&m, sizeof(m)); !st) {
        if (st.message().empty() || st.err() != EINVAL) abort();
        return 0;
      }
      Layout layout;
      if (!compute_layout(m.desc, &layout)) abort();
      AdmissionOptions options;
      options.device_levels = {4, 2};
      Admission admission(options);
      Admitted admitted;
      const Status admitted_st = admission.admit(m.desc, &admitted);
      if (!admitted_st && admitted_st.message().empty()) abort();
      if (admitted_st && admitted.device >= 2) abort();
      break;
    }
    case 1: {  // raw registration bytes of any length
      if (check_registration(data, size).ok() && size != sizeof(RegisterRequest)) abort();
      break;
    }
    case 2: {  // request entry against a known layout
      const RegisterRequest m = valid_registration();
      Layout layout;
      if (!compute_layout(m.desc, &layout)) abort();
      RequestEntry e{};
      e.state = kSubmitted;
      e.callback_id = 5;
      e.request_offset = layout.services[0].request_offset;
      e.request_len = 8;
      e.response_offset = layout.services[0].response_offset;
      overlay(&e, data, size);
      DecodedRequest out;
      if (decode_request(e, layout, 5, &out) != RequestError::kNone) break;
      if (out.service >= layout.nservices) abort();
      const ServiceArea& a = layout.services[out.service];
      if (out.request_offset % 64 || out.response_offset % 64) abort();
      if (out.request_offset < a.request_offset ||
          uint64_t(out.request_offset) + out.request_len > uint64_t(a.request_offset) + a.request_max)
        abort();
      if (out.response_offset < a.response_offset ||
          uint64_t(out.response_offset) + out.response_cap > uint64_t(a.response_offset) + a.response_max)
        abort();
      if (uint64_t(out.response_offset) + out.response_cap > layout.size) abort();
      break;
    }
    case 4: {  // a built-in service's request: byte 0 the service, byte 1 the response room
      if (size < 2) break;
      const int service = data[0] % RTACCEL_BUILTINS;
      const size_t response_cap = size_t(data[1]) * 64;
      rtaccel_request_view v;
      if (rtaccel_request_decode(service, data + 2, size - 2, response_cap, &v) != 0) break;
      const size_t header = rtaccel_request_header_size(service);
      if (v.response_len > response_cap || header + v.input_bytes > size - 2) abort();
      if (v.a && (reinterpret_cast<const uint8_t*>(v.a) < data + 2 + header ||
                  reinterpret_cast<const uint8_t*>(v.a) + v.input_bytes > data + size))
        abort();
      uint8_t again[64];
      const long len = rtaccel_request_encode(service, v.n, v.bins, v.lo, v.hi, again, sizeof(again));
      if (len >= 0 && memcmp(again, data + 2, std::min(header, size_t(len))) != 0 &&
          service != RTACCEL_VECADD && service != RTACCEL_MATMUL && service != RTACCEL_REDUCTION)
        abort();
      if (service == RTACCEL_BUSY && v.n > 10000) break;  // time, not arithmetic
      // 64-byte aligned, as in a region.
      alignas(64) static uint8_t request[16384 + 64], response[256 * 64];
      memcpy(request, data + 2, size - 2);
      rtaccel_service_call call{request, size - 2, response, response_cap, 0};
      uint32_t count;
      if (builtin_services(&count)[service].run(&call) != 0 || call.response_len != v.response_len) abort();
      break;
    }
    case 5: {  // a remote request: the header as sent, then its bytes
      const size_t caps[3] = {64, 4096, 0};
      RemoteRequest h;
      if (!decode_remote_request(data, size, 7, caps, 3, &h)) break;
      if (h.service >= 3 || h.request_len > caps[h.service] || sizeof(h) + h.request_len != size || h.seq <= 7)
        abort();
      break;
    }
    case 6: {  // a remote control message overlaid on a valid registration
      RemoteControl m{};
      m.magic = kRemoteMagic;
      m.version = kRemoteVersion;
      m.type = uint32_t(RemoteType::kRegister);
      overlay(&m, data, size);
      RemoteControl out;
      if (!decode_remote_control(&m, sizeof(m), &out)) break;
      if (out.slot >= kRemoteSlots ||
          (out.type != uint32_t(RemoteType::kRegister) && out.type != uint32_t(RemoteType::kUnregister) &&
           out.type != uint32_t(RemoteType::kHello)))
        abort();
      if (decode_remote_control(&m, sizeof(m) - 1, &out)) abort();  // not whole
      break;
    }
    case 7: {  // a declaration's chain, overlaid on one that feeds the other's fusion
      const FusionPair pair = fusion_pair();
      DeclareRequest m{};
      m.magic = kMagic;
      m.version = kProtocolVersion;
      m.type = uint32_t(MessageType::kDeclare);
      m.flags = kDeclareLast;
      m.chain = pair.rear;
      overlay(&m, data, size);
      if (Status st = check_declaration(&m, sizeof(m)); !st) {
        if (st.message().empty() || st.err() != EINVAL) abort();
        return 0;
      }
      AdmissionOptions options;
      options.device_levels = {4, 2};
      Admission admission(options);
      const Status declared = admission.declare({pair.front, m.chain});
      if (!declared && declared.message().empty()) abort();
      if (declared && admission.chains() != 2 && strcmp(m.chain.name, pair.front.name) != 0) abort();
      break;
    }
    case 3: {  // policy text
      const std::string text(reinterpret_cast<const char*>(data), size);
      auto policy = Policy::parse(text, "fuzz.yaml");
      if (!policy && policy.status().message().rfind("fuzz.yaml:", 0) != 0) abort();
      break;
    }
  }
  return 0;
}
