// Remote clients of rtaccel-server (internal): the client API of
// rtaccel/accel.h over one net-layer link (rtaccel/net.h) to the server's
// gateway, for a client on another node.
//
// Channels of the link:
//   0             control, priority 255: registrations and their replies,
//                 unregistrations (RemoteControl, one struct per transfer)
//   1 + 2 * slot  the slot's requests, client to server: RemoteRequest, then
//                 the request's bytes
//   2 + 2 * slot  the slot's responses, server to client: RemoteResponse,
//                 then the response's bytes
// A registration takes one of kRemoteSlots slots; its two channels go at the
// chain's priority on the wire (clamped to 0..254), so that a more critical
// chain's requests and responses overtake a less critical one's at every
// chunk boundary. A slot's channels live as long as the link and are sized
// by the first registration that takes the slot; both ends size them alike.
//
// One request of a registration is in flight at a time: the net layer hands
// a reader the newest transfer of a channel, and a request must never be
// skipped. Every field is checked on arrival; the peer can send anything.
#ifndef RTACCEL_ACCEL_REMOTE_H_
#define RTACCEL_ACCEL_REMOTE_H_

#include <cstddef>
#include <cstdint>

#include "rtaccel/accel.h"

namespace rtaccel::accel {

constexpr uint32_t kRemoteMagic = 0x52544152;  // "RTAR"
constexpr uint32_t kRemoteVersion = 2;
constexpr uint32_t kRemoteSlots = 31;          // registrations per remote client
constexpr uint32_t kControlChannel = 0;
constexpr uint8_t kControlPriority = 255;

inline uint32_t request_channel(uint32_t slot) { return 1 + 2 * slot; }
inline uint32_t response_channel(uint32_t slot) { return 2 + 2 * slot; }
inline uint8_t wire_priority(int32_t chain_priority) {
  return static_cast<uint8_t>(chain_priority < 0 ? 0 : chain_priority > 254 ? 254 : chain_priority);
}

// A transfer to a channel the receiver has not opened yet is lost, so the
// client opens with kHello, again every 100 ms until the gateway answers
// one with kHello: then both ends have their control channel open. Every
// client message is answered (kRegistered, kUnregistered) before the next
// goes: a reader of a channel gets its newest transfer, so two control
// messages in flight could lose one. A late answer to a repeated kHello is
// ignored.
enum class RemoteType : uint32_t { kRegister = 1, kRegistered = 2, kUnregister = 3, kHello = 4, kUnregistered = 5 };

struct RemoteControl {
  uint32_t magic;
  uint32_t version;
  uint32_t type;  // RemoteType
  uint32_t slot;
  int32_t status;  // kRegistered: 0 or -errno
  uint32_t reserved;
  rtaccel_registration_info info;  // kRegistered
  char message[256];               // kRegistered: the reason of a refusal
  rtaccel_registration_desc desc;  // kRegister
};

struct RemoteRequest {
  uint32_t magic;
  uint32_t service;  // index among the registration's services
  uint64_t seq;      // from 1, per slot
  uint64_t request_len;
};

struct RemoteResponse {
  uint32_t magic;
  int32_t status;  // the service's
  uint64_t seq;    // the request's
  uint64_t response_len;
  uint64_t start_ns;  // on the server's node (CLOCK_MONOTONIC)
  uint64_t end_ns;
  uint64_t gateway_arrival_ns;  // the request's hops through the gateway, on that node too
  uint64_t gateway_taken_ns;
  uint64_t gateway_reply_ns;
};

// The sizes a slot's two channels get from the registration that opens them.
inline uint64_t request_channel_size(const rtaccel_registration_desc& d) {
  uint64_t most = 0;
  for (uint32_t i = 0; i < d.nservices && i < RTACCEL_MAX_SERVICES; i++)
    most = most > d.services[i].request_max ? most : d.services[i].request_max;
  return sizeof(RemoteRequest) + most;
}
inline uint64_t response_channel_size(const rtaccel_registration_desc& d) {
  uint64_t most = 0;
  for (uint32_t i = 0; i < d.nservices && i < RTACCEL_MAX_SERVICES; i++)
    most = most > d.services[i].response_max ? most : d.services[i].response_max;
  return sizeof(RemoteResponse) + most;
}

// The largest transfer either end accepts.
constexpr uint64_t kRemoteMaxTransfer = sizeof(RemoteControl) + RTACCEL_MAX_BUFFER;

// A request as the gateway takes it off the link: true when its header is
// whole and names one of the registration's `nservices` services, a length
// within that service's request buffer (`request_caps`), exactly the bytes
// that follow it, and a number after `last_seq`. Else the gateway answers
// -EINVAL.
bool decode_remote_request(const void* data, size_t len, uint64_t last_seq, const size_t* request_caps,
                           uint32_t nservices, RemoteRequest* out);
// A control message from a remote client: whole, this protocol, a known
// type and slot.
bool decode_remote_control(const void* data, size_t len, RemoteControl* out);

// "tcp:...", "rdma:...", "shm:...": a server's gateway, not a Unix socket.
inline bool is_remote_address(const char* address) {
  auto starts = [address](const char* p) {
    for (size_t i = 0; p[i]; i++)
      if (address[i] != p[i]) return false;
    return true;
  };
  return address && (starts("tcp:") || starts("rdma:") || starts("shm:"));
}

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_REMOTE_H_
