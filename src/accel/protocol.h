// Wire format between rtaccel clients and rtaccel-server (internal).
//
// Control messages travel over a SOCK_SEQPACKET Unix socket, one fixed-size
// struct per message; registration replies carry three file descriptors
// (SCM_RIGHTS): the callback's region, the device's doorbell page and its
// status page. docs/accel.md describes the layout byte by byte.
//
// Shared memory, per device:
//  - doorbell (read-write for every client): one futex word per bucket that a
//    client increments after submitting, and a bit per registration that it
//    sets first, so that the workers look at the registrations that
//    submitted rather than at all. A client that rewrites the page can
//    delay the others' requests by at most kUntrustedPageBoundNs: the
//    workers wake and look at every registration at least that often.
//  - status (sealed with F_SEAL_FUTURE_WRITE: clients can map it read-only):
//    whether each bucket's worker sleeps, so that a client wakes it only then.
// Per registered callback, a region only that client and the server map:
//  - header (server-written at registration; the server keeps a private copy
//    and never reads layout back from shared memory),
//  - the client's producer index `head`,
//  - kRingEntries request entries of one cache line each,
//  - per service a request and a response buffer.
#ifndef RTACCEL_ACCEL_PROTOCOL_H_
#define RTACCEL_ACCEL_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "rtaccel/accel.h"
#include "rtaccel/status.hpp"

namespace rtaccel::accel {

constexpr uint32_t kMagic = 0x52544143;  // "RTAC"
constexpr uint32_t kProtocolVersion = 4;
constexpr uint32_t kMaxLevels = 8;      // device priority levels per device
constexpr uint32_t kRingEntries = 16;   // requests in flight per registration
constexpr size_t kCacheLine = 64;
// Registrations of a device with a bit in its doorbell page (hints): one
// past them is looked at whenever a worker looks for work.
constexpr uint32_t kHintSlots = 1024;
constexpr uint32_t kNoHintSlot = UINT32_MAX;
// The most a client that rewrites the doorbell page (its words, its hints)
// can keep a worker from seeing another client's request.
constexpr uint64_t kUntrustedPageBoundNs = 50000000;

enum class MessageType : uint32_t { kRegister = 1, kUnregister = 2, kDeclare = 3 };

struct RegisterRequest {
  uint32_t magic;
  uint32_t version;
  uint32_t type;  // MessageType::kRegister
  uint32_t reserved;
  rtaccel_registration_desc desc;
};

struct UnregisterRequest {
  uint32_t magic;
  uint32_t version;
  uint32_t type;  // MessageType::kUnregister
  uint32_t reserved;
  uint64_t callback_id;
};

// One chain of a declaration (rtaccel_client_declare): its chains come one
// per message, each answered; the one marked last has the set admitted
// together, and its reply says whether it was. The server holds at most
// kMaxDeclared chains of declarations, pending or admitted, from all its
// clients.
constexpr uint32_t kDeclareLast = 1;
constexpr uint32_t kMaxDeclared = 1024;
struct DeclareRequest {
  uint32_t magic;
  uint32_t version;
  uint32_t type;   // MessageType::kDeclare
  uint32_t flags;  // kDeclareLast
  rtaccel_chain_desc chain;
};

struct RegisterReply {
  uint32_t magic;
  uint32_t version;
  int32_t status;  // 0 or -errno
  uint32_t reserved;
  rtaccel_registration_info info;
  uint32_t region_size;
  uint32_t reserved2;
  char message[256];  // the reason of a refusal
};

// --- shared memory ---------------------------------------------------------

struct ServiceArea {
  char name[RTACCEL_SERVICE_NAME_MAX];
  uint32_t request_offset;  // from the region's start, 64-byte aligned
  uint32_t request_max;
  uint32_t response_offset;
  uint32_t response_max;
};

struct alignas(kCacheLine) RegionHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t callback_id;
  uint32_t size;  // bytes of the whole region
  uint32_t nservices;
  uint32_t ring_entries;
  uint32_t entries_offset;
  uint32_t producer_offset;
  // The bucket whose doorbell the client rings. The server moves a callback to
  // another bucket when admitted chains change the priority down-sampling; it
  // stores the new bucket here after the move and rings both doorbells, and a
  // client reads it after publishing its request, so no wake-up is lost.
  uint32_t bucket;
  ServiceArea services[RTACCEL_MAX_SERVICES];
  // This registration's bit in the doorbell page's hints (kNoHintSlot: none).
  uint32_t hint_slot;
};

// Phases of an entry's state word; the upper bits count submissions so that a
// ticket can tell its own request from a later one on the same entry.
enum EntryPhase : uint32_t { kFree = 0, kSubmitted = 1, kRunning = 2, kDone = 3 };
constexpr uint32_t kPhaseMask = 3;
constexpr uint32_t entry_phase(uint32_t state) { return state & kPhaseMask; }
constexpr uint32_t entry_next_submit(uint32_t state) { return (state & ~kPhaseMask) + 4 + kSubmitted; }

struct alignas(kCacheLine) RequestEntry {
  uint32_t state;  // futex word: phase | generation << 2
  uint32_t waiters;  // the client sleeps on `state`
  uint64_t callback_id;  // must be the region owner's
  uint32_t service;      // index into the region's services
  uint32_t request_offset;
  uint32_t request_len;
  uint32_t response_offset;
  uint32_t response_cap;
  int32_t status;  // server: 0 or -errno
  uint32_t response_len;  // server
  uint32_t reserved;
  uint64_t start_ns;  // server: CLOCK_MONOTONIC when the worker took it
  uint64_t end_ns;    // server: when the service returned
};
static_assert(sizeof(RequestEntry) == kCacheLine, "one request entry per cache line");

struct alignas(kCacheLine) RegionProducer {
  uint32_t head;  // entries submitted so far (the client's producer index)
};

struct alignas(kCacheLine) DoorbellWord {
  uint32_t seq;
};
struct DoorbellPage {
  DoorbellWord bucket[kMaxLevels];
  // Bit s: the registration in slot s submitted since a worker last took
  // the bit. A client sets its bit after it publishes its request and before
  // it rings the doorbell.
  alignas(kCacheLine) uint64_t hints[kHintSlots / 64];
};

struct alignas(kCacheLine) SleepFlag {
  uint32_t sleeping;
};
struct StatusPage {
  uint32_t magic;
  uint32_t version;
  uint32_t server_pid;
  uint32_t levels;
  SleepFlag bucket[kMaxLevels];
};
static_assert(sizeof(DoorbellPage) <= 4096 && sizeof(StatusPage) <= 4096);

// What crosses the socket and what lives in shared memory has one layout:
// a client and a server of the same protocol version agree byte for byte,
// whatever compiler built them. Changing one of these is a new version.
static_assert(std::is_standard_layout_v<RegisterRequest> && std::is_trivially_copyable_v<RegisterRequest>);
static_assert(std::is_standard_layout_v<DeclareRequest> && std::is_trivially_copyable_v<DeclareRequest>);
static_assert(sizeof(rtaccel_callback_desc) == 1856 && offsetof(rtaccel_callback_desc, publishes) == 696 &&
              offsetof(rtaccel_callback_desc, triggers) == 832 && sizeof(rtaccel_chain_desc) == 29776 &&
              sizeof(rtaccel_registration_desc) == 30104 && sizeof(rtaccel_registration_info) == 24);
static_assert(sizeof(RegisterRequest) == 30120 && offsetof(RegisterRequest, desc) == 16);
static_assert(sizeof(DeclareRequest) == 29792 && offsetof(DeclareRequest, chain) == 16);
static_assert(sizeof(UnregisterRequest) == 24 && offsetof(UnregisterRequest, callback_id) == 16);
static_assert(sizeof(RegisterReply) == 304 && offsetof(RegisterReply, info) == 16 &&
              offsetof(RegisterReply, region_size) == 40 && offsetof(RegisterReply, message) == 48);
static_assert(sizeof(ServiceArea) == 48 && sizeof(RegionHeader) == 448 && offsetof(RegionHeader, callback_id) == 8 &&
              offsetof(RegionHeader, bucket) == 36 && offsetof(RegionHeader, services) == 40);
static_assert(offsetof(RequestEntry, state) == 0 && offsetof(RequestEntry, callback_id) == 8 &&
              offsetof(RequestEntry, status) == 36 && offsetof(RequestEntry, start_ns) == 48 &&
              offsetof(RequestEntry, end_ns) == 56);
static_assert(sizeof(DoorbellPage) == 640 && offsetof(DoorbellPage, hints) == 512 && sizeof(StatusPage) == 576 &&
              offsetof(StatusPage, bucket) == 64);
static_assert(offsetof(RegionHeader, hint_slot) == 424);
// The words both sides update atomically (with __atomic builtins) must be
// lock-free: a lock inside an atomic would not be shared between processes.
static_assert(__atomic_always_lock_free(sizeof(uint32_t), nullptr) &&
              __atomic_always_lock_free(sizeof(uint64_t), nullptr));

// Region layout computed from the services asked for: header, producer,
// entries, then the buffers, each 64-byte aligned. False (with a reason) when
// it would not fit the limits.
struct Layout {
  uint32_t size = 0;
  uint32_t nservices = 0;
  uint32_t producer_offset = 0;
  uint32_t entries_offset = 0;
  ServiceArea services[RTACCEL_MAX_SERVICES] = {};
};
Status compute_layout(const rtaccel_registration_desc& desc, Layout* layout);

// --- decoding (everything a peer sends is checked here; fuzzed) --------------

// Checks a registration message: magic, version, counts within their arrays,
// NUL-terminated names, known wait modes, WCETs and sizes within limits,
// deadline <= period. Does not consult server state. Refusals are
// invalid_input() (EINVAL, the errno the reply carries).
Status check_registration(const void* message, size_t len);
// The same for one chain of a declaration: magic, version, the chain.
Status check_declaration(const void* message, size_t len);

// A request entry as the server accepts it, with every field read once from
// shared memory.
struct DecodedRequest {
  uint32_t service = 0;
  uint32_t request_offset = 0;
  uint32_t request_len = 0;
  uint32_t response_offset = 0;
  uint32_t response_cap = 0;
};
enum class RequestError {
  kNone,
  kNotSubmitted,     // the entry's state is not "submitted"
  kForgedCallback,   // callback id is not the region owner's
  kUnknownService,   // service index outside the registration's
  kRequestOutside,   // request bytes outside the service's request buffer
  kResponseOutside,  // response bytes outside the service's response buffer
  kMisaligned,       // a buffer offset that is not 64-byte aligned
};
const char* to_string(RequestError error);

// Decodes `entry` (shared, possibly changing under us) against the server's
// private `layout` and owner id. Allocates nothing, no system call.
RequestError decode_request(const volatile RequestEntry& entry, const Layout& layout,
                            uint64_t owner_id, DecodedRequest* out);

// A callback's accelerator utilisation: its segments' WCET over `period_ns`
// (0 for a zero period). What worst-fit decreasing placement orders by.
double accelerator_utilisation(const rtaccel_callback_desc& callback, uint64_t period_ns);

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_PROTOCOL_H_
