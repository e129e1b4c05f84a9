// The client library's handles (internal), local and remote.
//
// A local client talks to rtaccel-server over its Unix socket and shares a
// region of memory with it per registration. A remote one (an address
// tcp:, rdma: or shm:) talks to the server's gateway over one net-layer link
// (accel/remote.h): its buffers are its own memory, and requests and
// responses travel as transfers.
#ifndef RTACCEL_ACCEL_CLIENT_H_
#define RTACCEL_ACCEL_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "accel/protocol.h"
#include "accel/remote.h"
#include "core/fd.h"
#include "core/fork.h"
#include "rtaccel/accel.h"
#include "rtaccel/net.h"

struct rtaccel_client;

// A client's entry in the list of what a forked child lets go of
// (core/fork.h), which hands the entry back: the entry first.
struct ClientForkEntry {
  rtaccel_fork_entry entry{};
  rtaccel_client* client = nullptr;
};

struct rtaccel_client {
  rtaccel::core::UniqueFd fd;  // local
  std::mutex mu;               // one registration round trip at a time
  std::vector<rtaccel_registration*> registrations;
  // Made by the process this one was forked from: its connection and
  // registrations are the parent's, and this process may not use them.
  bool inherited = false;
  ClientForkEntry fork;
  // Remote: the link to the gateway and its channels.
  rtaccel_net_link_t* link = nullptr;
  rtaccel_net_channel_t* control = nullptr;
  uint64_t control_seen = 0;
  struct Slot {
    rtaccel_net_channel_t* requests = nullptr;
    rtaccel_net_channel_t* responses = nullptr;
    uint64_t request_size = 0, response_size = 0;  // fixed by the first registration
    uint64_t seen = 0;                              // responses taken so far
    bool used = false;
  } slots[rtaccel::accel::kRemoteSlots];
};

// A remote registration's state: its slot, its buffers (a request's header
// right before the request buffer, so that a request goes out without a
// copy) and its one request in flight.
struct RemoteState {
  uint32_t slot = 0;
  std::unique_ptr<unsigned char[]> requests[RTACCEL_MAX_SERVICES];
  std::unique_ptr<unsigned char[]> responses[RTACCEL_MAX_SERVICES];
  uint64_t seq = 0;        // the last request sent
  uint32_t service = 0;    // its service
  bool in_flight = false;  // seq's response not taken yet
  bool spin = false;       // waits spin: RTACCEL_WAIT_SPIN, and the link's receive thread outranks the caller
  int status = 0;          // of the last completed request
  size_t response_len = 0;
  rtaccel_request_times times{};
  rtaccel_remote_times hops{};
};

struct rtaccel_registration {
  rtaccel_client* client = nullptr;
  rtaccel_registration_info info{};
  rtaccel::core::Mapping region;
  rtaccel::core::Mapping doorbell;
  rtaccel::core::Mapping status;
  const rtaccel::accel::RegionHeader* header = nullptr;
  uint32_t* head = nullptr;  // the shared producer index
  rtaccel::accel::RequestEntry* entries = nullptr;
  uint32_t nservices = 0;
  rtaccel::accel::ServiceArea services[RTACCEL_MAX_SERVICES] = {};
  uint32_t next = 0;  // private copy of the producer index
  uint32_t hint_slot = rtaccel::accel::kNoHintSlot;  // its bit in the doorbell page's hints
  uint64_t submit_ns[rtaccel::accel::kRingEntries] = {};
  std::unique_ptr<RemoteState> remote;  // set for a remote registration
};

// The remote halves of the C API (client_remote.cc), for a client whose
// link is set.
int remote_connect(const char* address, rtaccel_client** out);
void remote_close(rtaccel_client* client);
int remote_register(rtaccel_client* client, const rtaccel_registration_desc* desc, rtaccel_registration** out,
                    char* why, size_t why_len);
void remote_unregister(rtaccel_registration* reg);
int remote_submit(rtaccel_registration* reg, int service, size_t request_len, rtaccel_ticket* ticket);
// poll: do not wait (-EAGAIN while the response has not come).
int remote_wait(rtaccel_registration* reg, const rtaccel_ticket* ticket, uint64_t timeout_ns,
                size_t* response_len, bool poll);

// rtaccel_wait for a local registration, asleep whatever its wait mode: for
// the gateway, whose thread serves a peer's spinning registration and must
// not spin on a core of this node for it (gateway.cc).
int wait_suspended(rtaccel_registration* reg, const rtaccel_ticket* ticket, uint64_t timeout_ns,
                   size_t* response_len);

#endif  // RTACCEL_ACCEL_CLIENT_H_
