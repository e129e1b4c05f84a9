#include "accel/remote.h"

#include <cstring>

namespace rtaccel::accel {

bool decode_remote_request(const void* data, size_t len, uint64_t last_seq, const size_t* request_caps,
                           uint32_t nservices, RemoteRequest* out) {
  if (!data || len < sizeof(*out)) return false;
  memcpy(out, data, sizeof(*out));
  return out->magic == kRemoteMagic && out->seq > last_seq && out->service < nservices &&
         out->service < RTACCEL_MAX_SERVICES && out->request_len <= request_caps[out->service] &&
         len - sizeof(*out) == out->request_len;
}

bool decode_remote_control(const void* data, size_t len, RemoteControl* out) {
  if (!data || len != sizeof(*out)) return false;
  memcpy(out, data, sizeof(*out));
  return out->magic == kRemoteMagic && out->version == kRemoteVersion && out->slot < kRemoteSlots &&
         (out->type == uint32_t(RemoteType::kRegister) || out->type == uint32_t(RemoteType::kUnregister) ||
          out->type == uint32_t(RemoteType::kHello));
}

}  // namespace rtaccel::accel
