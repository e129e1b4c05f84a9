// Client library of rtaccel-server (the C API of rtaccel/accel.h).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "core/clock.h"
#include "core/fd.h"
#include "core/futex.h"
#include "accel/client.h"
#include "accel/protocol.h"
#include "accel/remote.h"
#include "rtaccel/accel.h"

using namespace rtaccel::accel;
namespace core = rtaccel::core;

namespace {

// How often a waiting client checks that the server is still there.
constexpr uint64_t kLivenessCheckNs = 50ull * 1000 * 1000;

void set_why(char* why, size_t len, const char* text) {
  if (why && len) snprintf(why, len, "%s", text);
}

// In a child forked from the client's process (core/fork.h): the client is
// marked inherited, and the child's copy of its socket closed. A child that
// closed the client as its own would unregister the parent's callbacks from
// under it; one that submitted would share the parent's rings. It may close
// the client, which forgets it here, and do nothing else with it. (A remote
// client's link lets go of its own, in the net layer.)
void client_in_child(rtaccel_fork_entry* entry) {
  rtaccel_client* c = reinterpret_cast<ClientForkEntry*>(entry)->client;
  c->inherited = true;
  c->fd.reset();
  // A thread of the parent may have held it at the fork; that thread is not
  // in this process to release it.
  new (&c->mu) std::mutex;
}

void track(rtaccel_client* c) {
  c->fork.entry.in_child = client_in_child;
  c->fork.client = c;
  rtaccel_fork_track(&c->fork.entry);
}

// Drops an inherited registration from this process alone: the server, or
// the gateway, serves it for the parent still.
void forget(rtaccel_registration* reg) {
  rtaccel_client* c = reg->client;
  {
    std::lock_guard<std::mutex> guard(c->mu);
    if (reg->remote) c->slots[reg->remote->slot].used = false;
    auto& list = c->registrations;
    list.erase(std::remove(list.begin(), list.end(), reg), list.end());
  }
  delete reg;
}

// The server's socket reports a hang-up once the server process is gone.
bool server_gone(const rtaccel_client* c) {
  pollfd p{c->fd.get(), POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

int receive_reply(int fd, RegisterReply* reply, int fds[3], int* nfds) {
  iovec iov{reply, sizeof(*reply)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  // A server that refused the connection closed it with our request unread,
  // which resets it; the refusal it sent first waits behind the reset.
  if (n < 0 && errno == ECONNRESET) {
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) errno = ECONNRESET;
  }
  if (n < 0) return -errno;
  *nfds = 0;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
      const int count = int((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < count; i++) {
        int fd_in;
        memcpy(&fd_in, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        if (*nfds < 3)
          fds[(*nfds)++] = fd_in;
        else
          close(fd_in);
      }
    }
  if (n == 0) return -EPIPE;
  // A server of another rtaccel: its reply may have another shape, but
  // every version begins with the magic and the version.
  if (size_t(n) >= 2 * sizeof(uint32_t) && reply->magic == kMagic && reply->version != kProtocolVersion)
    return -EPROTONOSUPPORT;
  if (size_t(n) != sizeof(*reply) || reply->magic != kMagic) return -EPROTO;
  return 0;
}

double accelerator_utilisation(const rtaccel_registration_desc& d) {
  return rtaccel::accel::accelerator_utilisation(d.chain.callbacks[d.callback % RTACCEL_MAX_CALLBACKS],
                                                 d.chain.period_ns);
}

int finish(rtaccel_registration* reg, const rtaccel_ticket* t, size_t* response_len) {
  const RequestEntry* e = &reg->entries[t->entry];
  if (response_len) *response_len = e->response_len;
  return e->status;
}

// A local registration's wait, spinning or asleep.
int local_wait(rtaccel_registration* reg, const rtaccel_ticket* ticket, uint64_t timeout_ns, size_t* response_len,
               bool spin) {
  RequestEntry* e = &reg->entries[ticket->entry];
  const uint32_t done = (ticket->state & ~kPhaseMask) | kDone;
  uint32_t state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
  if (state == done) return finish(reg, ticket, response_len);
  if ((state & ~kPhaseMask) != (ticket->state & ~kPhaseMask)) return -ESTALE;

  const uint64_t start = core::monotonic_ns();
  uint64_t next_check = start + kLivenessCheckNs;
  if (spin) {
    for (uint32_t spins = 1;; spins++) {
      if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == done) return finish(reg, ticket, response_len);
      if (spins % 1024) {
        cpu_relax();
        continue;
      }
      const uint64_t now = core::monotonic_ns();
      if (timeout_ns && now - start >= timeout_ns) return -ETIMEDOUT;
      if (now >= next_check) {
        if (server_gone(reg->client)) return -EPIPE;
        next_check = now + kLivenessCheckNs;
      }
    }
  }
  int result;
  for (;;) {
    __atomic_store_n(&e->waiters, 1, __ATOMIC_SEQ_CST);
    state = __atomic_load_n(&e->state, __ATOMIC_SEQ_CST);
    if (state == done) {
      result = finish(reg, ticket, response_len);
      break;
    }
    const uint64_t now = core::monotonic_ns();
    if (timeout_ns && now - start >= timeout_ns) {
      result = -ETIMEDOUT;
      break;
    }
    uint64_t slice = kLivenessCheckNs;
    if (timeout_ns) slice = std::min(slice, timeout_ns - (now - start));
    const timespec until = core::deadline_in(slice);
    if (futex_wait(&e->state, state, true, CLOCK_MONOTONIC, &until) == -ETIMEDOUT &&
        server_gone(reg->client)) {
      result = -EPIPE;
      break;
    }
  }
  __atomic_store_n(&e->waiters, 0, __ATOMIC_RELAXED);
  return result;
}

}  // namespace

int wait_suspended(rtaccel_registration* reg, const rtaccel_ticket* ticket, uint64_t timeout_ns,
                   size_t* response_len) {
  if (!ticket || ticket->entry >= kRingEntries || reg->remote) return -EINVAL;
  return local_wait(reg, ticket, timeout_ns, response_len, false);
}

namespace {

// Sends one control message and receives the server's answer to it (with
// the descriptors a registration's carries): 0, or a negative errno with
// the reason in WHY. The caller holds the client's mutex.
int round_trip(rtaccel_client* client, const void* message, size_t len, RegisterReply* reply, int fds[3],
               int* nfds, char* why, size_t why_len) {
  if (send(client->fd.get(), message, len, MSG_NOSIGNAL) < 0) {
    // A server that refused the connection said why before it closed it.
    RegisterReply refusal{};
    if (recv(client->fd.get(), &refusal, sizeof(refusal), MSG_DONTWAIT) == ssize_t(sizeof(refusal)) &&
        refusal.magic == kMagic && refusal.version == kProtocolVersion && refusal.status < 0) {
      refusal.message[sizeof(refusal.message) - 1] = '\0';
      set_why(why, why_len, refusal.message);
      return refusal.status;
    }
    set_why(why, why_len, "the server is gone");
    return -EPIPE;
  }
  if (int err = receive_reply(client->fd.get(), reply, fds, nfds)) {
    char text[160];
    if (err == -EPROTONOSUPPORT)
      snprintf(text, sizeof(text), "rtaccel-server speaks protocol version %u and this client %u: use a server "
               "and clients of one rtaccel", reply->version, kProtocolVersion);
    else
      snprintf(text, sizeof(text), "%s", err == -EPIPE ? "the server closed the connection" : "malformed reply");
    set_why(why, why_len, text);
    return err;
  }
  if (reply->status != 0) {
    reply->message[sizeof(reply->message) - 1] = '\0';
    set_why(why, why_len, reply->message);
    return reply->status;
  }
  return 0;
}

}  // namespace

extern "C" {

int rtaccel_client_connect(const char* socket_path, rtaccel_client** out) {
  if (!socket_path) socket_path = getenv(RTACCEL_SOCKET_ENV);
  if (!socket_path || !*socket_path) socket_path = RTACCEL_SOCKET_DEFAULT;
  if (is_remote_address(socket_path)) {
    if (int err = remote_connect(socket_path, out)) return err;
    track(*out);
    return 0;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (strlen(socket_path) >= sizeof(addr.sun_path)) return -ENAMETOOLONG;
  strcpy(addr.sun_path, socket_path);
  core::UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return -errno;
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) return -errno;
  auto* c = new (std::nothrow) rtaccel_client;
  if (!c) return -ENOMEM;
  c->fd = std::move(fd);
  track(c);
  *out = c;
  return 0;
}

void rtaccel_client_close(rtaccel_client* client) {
  if (!client) return;
  rtaccel_fork_untrack(&client->fork.entry);
  if (client->inherited) {
    while (!client->registrations.empty()) forget(client->registrations.back());
    rtaccel_net_close(client->link);  // the net layer let go of the child's copy at the fork
    delete client;
    return;
  }
  if (client->link) {
    remote_close(client);
    return;
  }
  while (!client->registrations.empty()) rtaccel_client_unregister(client->registrations.back());
  delete client;
}

int rtaccel_client_register(rtaccel_client* client, const rtaccel_registration_desc* desc,
                            rtaccel_registration** out, char* why, size_t why_len) {
  if (!client || !desc || !out) return -EINVAL;
  if (client->inherited) {
    set_why(why, why_len, "the client was connected by the process this one was forked from; connect again");
    return -ENOTCONN;
  }
  if (client->link) return remote_register(client, desc, out, why, why_len);
  std::lock_guard<std::mutex> guard(client->mu);
  auto* m = new (std::nothrow) RegisterRequest{};
  if (!m) return -ENOMEM;
  m->magic = kMagic;
  m->version = kProtocolVersion;
  m->type = uint32_t(MessageType::kRegister);
  m->desc = *desc;
  RegisterReply reply{};
  int fds[3] = {-1, -1, -1};
  int nfds = 0;
  const int err = round_trip(client, m, sizeof(*m), &reply, fds, &nfds, why, why_len);
  delete m;
  core::UniqueFd region_fd(fds[0]), doorbell_fd(fds[1]), status_fd(fds[2]);
  if (err) return err;
  if (nfds != 3) {
    set_why(why, why_len, "the server sent no shared memory");
    return -EPROTO;
  }
  auto* reg = new (std::nothrow) rtaccel_registration;
  if (!reg) return -ENOMEM;
  reg->client = client;
  reg->info = reply.info;
  reg->region = core::Mapping::map(region_fd.get(), reply.region_size, PROT_READ | PROT_WRITE);
  reg->doorbell = core::Mapping::map(doorbell_fd.get(), 4096, PROT_READ | PROT_WRITE);
  reg->status = core::Mapping::map(status_fd.get(), 4096, PROT_READ);
  const RegionHeader* h = reg->region ? reg->region.at<const RegionHeader>(0) : nullptr;
  if (!h || !reg->doorbell || !reg->status || h->magic != kMagic || h->nservices > RTACCEL_MAX_SERVICES ||
      h->size != reply.region_size) {
    delete reg;
    set_why(why, why_len, "cannot map the server's shared memory");
    return -EPROTO;
  }
  reg->header = h;
  reg->head = reg->region.at<uint32_t>(h->producer_offset);
  reg->entries = reg->region.at<RequestEntry>(h->entries_offset);
  reg->nservices = h->nservices;
  memcpy(reg->services, h->services, sizeof(reg->services));
  reg->next = *reg->head;
  reg->hint_slot = h->hint_slot < kHintSlots ? h->hint_slot : kNoHintSlot;
  client->registrations.push_back(reg);
  *out = reg;
  return 0;
}

int rtaccel_client_declare(rtaccel_client* client, const rtaccel_chain_desc* chains, size_t n, char* why,
                           size_t why_len) {
  if (!client || (n && !chains)) return -EINVAL;
  if (client->inherited) {
    set_why(why, why_len, "the client was connected by the process this one was forked from; connect again");
    return -ENOTCONN;
  }
  if (client->link) {
    set_why(why, why_len, "chains are declared to the server on its own node, not through its gateway");
    return -EOPNOTSUPP;
  }
  if (n == 0) return 0;
  if (n > kMaxDeclared) {
    set_why(why, why_len, "more chains than the server takes in one client's declarations");
    return -ENOSPC;
  }
  std::lock_guard<std::mutex> guard(client->mu);
  auto* m = new (std::nothrow) DeclareRequest{};
  if (!m) return -ENOMEM;
  m->magic = kMagic;
  m->version = kProtocolVersion;
  m->type = uint32_t(MessageType::kDeclare);
  int err = 0;
  for (size_t i = 0; i < n && !err; i++) {
    m->flags = i + 1 == n ? kDeclareLast : 0;
    m->chain = chains[i];
    RegisterReply reply{};
    int fds[3] = {-1, -1, -1};
    int nfds = 0;
    err = round_trip(client, m, sizeof(*m), &reply, fds, &nfds, why, why_len);
    for (int k = 0; k < nfds; k++) close(fds[k]);
  }
  delete m;
  return err;
}

int rtaccel_client_register_all(rtaccel_client* client, const rtaccel_registration_desc* descs,
                                size_t n, rtaccel_registration** out, char* why, size_t why_len) {
  if (!client || (n && (!descs || !out))) return -EINVAL;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return accelerator_utilisation(descs[a]) > accelerator_utilisation(descs[b]);
  });
  for (size_t i : order) {
    out[i] = nullptr;
    if (int err = rtaccel_client_register(client, &descs[i], &out[i], why, why_len)) return err;
  }
  return 0;
}

void rtaccel_client_unregister(rtaccel_registration* reg) {
  if (!reg) return;
  if (reg->client->inherited) {
    forget(reg);
    return;
  }
  if (reg->remote) {
    remote_unregister(reg);
    return;
  }
  rtaccel_client* c = reg->client;
  {
    std::lock_guard<std::mutex> guard(c->mu);
    UnregisterRequest m{kMagic, kProtocolVersion, uint32_t(MessageType::kUnregister), 0,
                        reg->info.callback_id};
    send(c->fd.get(), &m, sizeof(m), MSG_NOSIGNAL);  // a gone server has freed it anyway
    auto& list = c->registrations;
    list.erase(std::remove(list.begin(), list.end(), reg), list.end());
  }
  delete reg;
}

void rtaccel_registration_query(const rtaccel_registration* reg, rtaccel_registration_info* info) {
  *info = reg->info;
  if (reg->remote) return;  // as the gateway's registration found it
  // The server may have moved the callback since (see RegionHeader::bucket).
  info->bucket = __atomic_load_n(&reg->header->bucket, __ATOMIC_RELAXED);
}

int rtaccel_service_index(const rtaccel_registration* reg, const char* name) {
  for (uint32_t i = 0; i < reg->nservices; i++)
    if (strncmp(reg->services[i].name, name, RTACCEL_SERVICE_NAME_MAX) == 0) return int(i);
  return -ENOENT;
}

void* rtaccel_request_buffer(rtaccel_registration* reg, int service, size_t* cap) {
  if (service < 0 || uint32_t(service) >= reg->nservices) return nullptr;
  if (cap) *cap = reg->services[service].request_max;
  if (reg->remote) return reg->remote->requests[service].get() + sizeof(RemoteRequest);
  return reg->region.bytes() + reg->services[service].request_offset;
}

void* rtaccel_response_buffer(rtaccel_registration* reg, int service, size_t* cap) {
  if (service < 0 || uint32_t(service) >= reg->nservices) return nullptr;
  if (cap) *cap = reg->services[service].response_max;
  if (reg->remote) return reg->remote->responses[service].get();
  return reg->region.bytes() + reg->services[service].response_offset;
}

int rtaccel_submit(rtaccel_registration* reg, int service, size_t request_len,
                   rtaccel_ticket* ticket) {
  if (service < 0 || uint32_t(service) >= reg->nservices) return -EINVAL;
  const ServiceArea& area = reg->services[service];
  if (request_len > area.request_max) return -EMSGSIZE;
  if (reg->client->inherited) return -ENOTCONN;
  if (reg->remote) return remote_submit(reg, service, request_len, ticket);
  const uint32_t index = reg->next % kRingEntries;
  RequestEntry* e = &reg->entries[index];
  const uint32_t state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
  if (entry_phase(state) != kFree && entry_phase(state) != kDone) return -EBUSY;
  const uint32_t submitted = entry_next_submit(state);
  e->waiters = 0;
  e->callback_id = reg->info.callback_id;
  e->service = uint32_t(service);
  e->request_offset = area.request_offset;
  e->request_len = uint32_t(request_len);
  e->response_offset = area.response_offset;
  e->response_cap = area.response_max;
  e->status = 0;
  e->response_len = 0;
  reg->submit_ns[index] = core::monotonic_ns();
  __atomic_store_n(&e->state, submitted, __ATOMIC_RELEASE);
  __atomic_store_n(reg->head, ++reg->next, __ATOMIC_SEQ_CST);
  auto* doorbell = reg->doorbell.at<DoorbellPage>(0);
  // Which registration to look at (DoorbellPage::hints): a worker that takes
  // the bits acquires what was published before them.
  if (reg->hint_slot != kNoHintSlot)
    __atomic_fetch_or(&doorbell->hints[reg->hint_slot / 64], uint64_t(1) << (reg->hint_slot % 64), __ATOMIC_RELEASE);
  // Read after publishing: see the comment on RegionHeader::bucket.
  const uint32_t bucket = __atomic_load_n(&reg->header->bucket, __ATOMIC_SEQ_CST) % kMaxLevels;
  auto* status = reg->status.at<const StatusPage>(0);
  __atomic_fetch_add(&doorbell->bucket[bucket].seq, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&status->bucket[bucket].sleeping, __ATOMIC_SEQ_CST))
    futex_wake(&doorbell->bucket[bucket].seq, 1, true);
  if (ticket) *ticket = {index, submitted};
  return 0;
}

int rtaccel_poll(rtaccel_registration* reg, rtaccel_ticket* ticket, size_t* response_len) {
  if (!ticket || ticket->entry >= kRingEntries) return -EINVAL;
  if (reg->client->inherited) return -ENOTCONN;
  if (reg->remote) return remote_wait(reg, ticket, 0, response_len, true);
  const uint32_t done = (ticket->state & ~kPhaseMask) | kDone;
  const uint32_t state = __atomic_load_n(&reg->entries[ticket->entry].state, __ATOMIC_ACQUIRE);
  if (state == done) return finish(reg, ticket, response_len);
  if ((state & ~kPhaseMask) != (ticket->state & ~kPhaseMask)) return -ESTALE;
  return server_gone(reg->client) ? -EPIPE : -EAGAIN;
}

int rtaccel_wait(rtaccel_registration* reg, rtaccel_ticket* ticket, uint64_t timeout_ns,
                 size_t* response_len) {
  if (!ticket || ticket->entry >= kRingEntries) return -EINVAL;
  if (reg->client->inherited) return -ENOTCONN;
  if (reg->remote) return remote_wait(reg, ticket, timeout_ns, response_len, false);
  return local_wait(reg, ticket, timeout_ns, response_len, reg->info.wait == RTACCEL_WAIT_SPIN);
}

int rtaccel_call(rtaccel_registration* reg, int service, size_t request_len, uint64_t timeout_ns,
                 size_t* response_len) {
  rtaccel_ticket ticket;
  if (int err = rtaccel_submit(reg, service, request_len, &ticket)) return err;
  return rtaccel_wait(reg, &ticket, timeout_ns, response_len);
}

int rtaccel_request_timestamps(const rtaccel_registration* reg, const rtaccel_ticket* ticket,
                          rtaccel_request_times* times) {
  if (!ticket || ticket->entry >= kRingEntries) return -EINVAL;
  if (reg->remote) {
    *times = reg->remote->times;
    return 0;
  }
  const RequestEntry* e = &reg->entries[ticket->entry];
  times->submit_ns = reg->submit_ns[ticket->entry];
  times->start_ns = e->start_ns;
  times->end_ns = e->end_ns;
  return 0;
}

int rtaccel_request_remote_times(const rtaccel_registration* reg, const rtaccel_ticket* ticket,
                                 rtaccel_remote_times* times) {
  if (!reg || !ticket || !times || !reg->remote) return -EINVAL;
  const RemoteState& r = *reg->remote;
  if (ticket->state != uint32_t(r.seq)) return -ESTALE;
  if (r.in_flight) return -EAGAIN;
  *times = r.hops;
  return 0;
}

}  // extern "C"
