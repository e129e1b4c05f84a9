// The client API of rtaccel/accel.h for a client on another node: one
// net-layer link to rtaccel-server's gateway (accel/remote.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "accel/client.h"
#include "core/clock.h"

using namespace rtaccel::accel;
namespace core = rtaccel::core;

namespace {

constexpr uint64_t kSecond = 1000000000ull;
constexpr uint64_t kConnectTimeout = 5 * kSecond;
constexpr uint64_t kReplyTimeout = 10 * kSecond;  // a registration's round trip
constexpr uint64_t kSendTimeout = 10 * kSecond;   // a request's transfer
constexpr uint64_t kHelloRetry = kSecond / 10;

void set_why(char* why, size_t len, const std::string& text) {
  if (why && len) snprintf(why, len, "%s", text.c_str());
}

// A failed link is the remote form of a dead server.
int link_error(int err) { return err == -ETIMEDOUT ? -ETIMEDOUT : -EPIPE; }

// The gateway's answer to the one control message in flight; a late
// answer to a repeated hello is skipped.
int await_reply(rtaccel_client* client, RemoteType type, uint32_t slot, uint64_t timeout_ns, RemoteControl* out) {
  const uint64_t deadline = core::monotonic_ns() + timeout_ns;
  for (;;) {
    const uint64_t now = core::monotonic_ns();
    if (now >= deadline) return -ETIMEDOUT;
    rtaccel_net_msg msg;
    const int err = rtaccel_net_take(client->control, &client->control_seen, deadline - now, &msg);
    if (err) return err == -ETIMEDOUT ? -ETIMEDOUT : -EPIPE;
    const bool whole = msg.len == sizeof(*out);
    if (whole) memcpy(out, msg.data, sizeof(*out));
    rtaccel_net_release(&msg);
    if (!whole || out->magic != kRemoteMagic || out->version != kRemoteVersion) return -EPROTO;
    if (out->type == uint32_t(RemoteType::kHello) && type != RemoteType::kHello) continue;
    return out->type == uint32_t(type) && out->slot == slot ? 0 : -EPROTO;
  }
}

// Says hello until the gateway answers: then both ends have their control
// channel open (accel/remote.h).
int greet(rtaccel_client* c) {
  RemoteControl m{};
  m.magic = kRemoteMagic;
  m.version = kRemoteVersion;
  m.type = uint32_t(RemoteType::kHello);
  const uint64_t deadline = core::monotonic_ns() + kConnectTimeout;
  while (core::monotonic_ns() < deadline) {
    if (rtaccel_net_send(c->control, &m, sizeof(m), 0, kSecond)) return -ECONNREFUSED;
    RemoteControl answer;
    const int err = await_reply(c, RemoteType::kHello, 0, kHelloRetry, &answer);
    if (err != -ETIMEDOUT) return err == -EPIPE ? -ECONNREFUSED : err;
  }
  return -ETIMEDOUT;
}

// Whether a registration's waits spin: where it asks to, once the link's
// receive thread runs above its executor (raised here, where this process
// may use SCHED_FIFO), so that a caller spinning for a response cannot keep
// the thread that delivers it off its core. A suspending registration
// leaves the receive thread as it is: it needs no rank to be woken.
bool spins(rtaccel_net_link_t* link, const rtaccel_callback_desc& callback) {
  if (callback.wait != RTACCEL_WAIT_SPIN || callback.executor_priority <= 0) return false;
  const int want = std::min(callback.executor_priority + 1, 99);
  if (rtaccel_net_rx_priority(link) < want) (void)rtaccel_net_set_rx_priority(link, want);  // -EPERM: waits sleep
  return rtaccel_net_rx_priority(link) > callback.executor_priority;
}

}  // namespace

int remote_connect(const char* address, rtaccel_client** out) {
  rtaccel_net_options o;
  rtaccel_net_options_default(&o);
  o.max_transfer = kRemoteMaxTransfer;
  const std::string name = "rtaccel client " + std::to_string(getpid());
  rtaccel_net_link_t* link = nullptr;
  if (int err = rtaccel_net_connect(address, name.c_str(), &o, kConnectTimeout, &link)) return err;
  auto* c = new (std::nothrow) rtaccel_client;
  if (!c) {
    rtaccel_net_close(link);
    return -ENOMEM;
  }
  c->link = link;
  rtaccel_net_channel_attr a{};
  a.id = kControlChannel;
  a.priority = kControlPriority;
  a.max_size = sizeof(RemoteControl);
  int err = rtaccel_net_channel_open(link, &a, &c->control);
  // A gateway that closes the link at once has refused us: not a peer of
  // its policy (-ECONNREFUSED).
  if (!err) err = greet(c);
  if (err) {
    rtaccel_net_close(link);
    delete c;
    return err;
  }
  *out = c;
  return 0;
}

void remote_close(rtaccel_client* client) {
  while (!client->registrations.empty()) remote_unregister(client->registrations.back());
  rtaccel_net_close(client->link);
  delete client;
}

int remote_register(rtaccel_client* client, const rtaccel_registration_desc* desc, rtaccel_registration** out,
                    char* why, size_t why_len) {
  std::lock_guard<std::mutex> guard(client->mu);
  if (desc->nservices > RTACCEL_MAX_SERVICES) {
    set_why(why, why_len, "more services than RTACCEL_MAX_SERVICES");
    return -EINVAL;
  }
  for (uint32_t i = 0; i < desc->nservices; i++)
    if (desc->services[i].request_max > RTACCEL_MAX_BUFFER || desc->services[i].response_max > RTACCEL_MAX_BUFFER) {
      set_why(why, why_len, "a buffer larger than RTACCEL_MAX_BUFFER");
      return -EINVAL;
    }
  // A free slot whose channels, if the slot had them already, are big
  // enough; the gateway chooses alike.
  const uint64_t need_request = request_channel_size(*desc), need_response = response_channel_size(*desc);
  uint32_t slot = kRemoteSlots;
  for (uint32_t k = 0; k < kRemoteSlots && slot == kRemoteSlots; k++) {
    const auto& s = client->slots[k];
    if (!s.used && (!s.requests || (s.request_size >= need_request && s.response_size >= need_response))) slot = k;
  }
  if (slot == kRemoteSlots) {
    set_why(why, why_len, "no free slot on this remote client (" + std::to_string(kRemoteSlots) + " registrations)");
    return -ENOSPC;
  }
  auto& s = client->slots[slot];
  const uint8_t priority = wire_priority(desc->chain.priority);
  if (!s.requests) {
    rtaccel_net_channel_attr a{};
    a.id = request_channel(slot);
    a.priority = priority;
    a.max_size = need_request;
    a.slots = 1;
    rtaccel_net_channel_attr b{};
    b.id = response_channel(slot);
    b.priority = priority;
    b.max_size = need_response;
    b.slots = 2;
    int err = rtaccel_net_channel_open(client->link, &a, &s.requests);
    if (!err) err = rtaccel_net_channel_open(client->link, &b, &s.responses);
    if (err) {
      set_why(why, why_len, std::string("cannot open the slot's channels: ") + strerror(-err));
      return link_error(err);
    }
    s.request_size = need_request;
    s.response_size = need_response;
  }
  auto* m = new (std::nothrow) RemoteControl{};
  if (!m) return -ENOMEM;
  m->magic = kRemoteMagic;
  m->version = kRemoteVersion;
  m->type = uint32_t(RemoteType::kRegister);
  m->slot = slot;
  m->desc = *desc;
  int err = rtaccel_net_send(client->control, m, sizeof(*m), 0, kSendTimeout);
  delete m;
  if (err) {
    set_why(why, why_len, std::string("the gateway is gone: ") + rtaccel_net_error(client->link));
    return -EPIPE;
  }
  RemoteControl reply{};
  if ((err = await_reply(client, RemoteType::kRegistered, slot, kReplyTimeout, &reply))) {
    set_why(why, why_len, err == -ETIMEDOUT ? "the gateway did not answer"
                          : err == -EPROTO  ? "malformed reply from the gateway"
                                            : std::string("the gateway is gone: ") + rtaccel_net_error(client->link));
    return err;
  }
  if (reply.status != 0) {
    reply.message[sizeof(reply.message) - 1] = '\0';
    set_why(why, why_len, reply.message);
    return reply.status < 0 ? reply.status : -EPROTO;
  }
  auto* reg = new (std::nothrow) rtaccel_registration;
  if (!reg) return -ENOMEM;
  reg->client = client;
  reg->info = reply.info;
  reg->remote = std::make_unique<RemoteState>();
  reg->remote->slot = slot;
  reg->remote->spin = spins(client->link, desc->chain.callbacks[desc->callback]);
  reg->nservices = desc->nservices;
  for (uint32_t i = 0; i < desc->nservices; i++) {
    ServiceArea& area = reg->services[i];
    memcpy(area.name, desc->services[i].name, sizeof(area.name));
    area.name[sizeof(area.name) - 1] = '\0';
    area.request_max = desc->services[i].request_max;
    area.response_max = desc->services[i].response_max;
    reg->remote->requests[i].reset(new (std::nothrow) unsigned char[sizeof(RemoteRequest) + area.request_max]());
    reg->remote->responses[i].reset(new (std::nothrow) unsigned char[area.response_max + 1]());
    if (!reg->remote->requests[i] || !reg->remote->responses[i]) {
      delete reg;
      return -ENOMEM;
    }
  }
  s.used = true;
  client->registrations.push_back(reg);
  *out = reg;
  return 0;
}

void remote_unregister(rtaccel_registration* reg) {
  rtaccel_client* c = reg->client;
  {
    std::lock_guard<std::mutex> guard(c->mu);
    RemoteControl* m = new (std::nothrow) RemoteControl{};
    if (m) {
      m->magic = kRemoteMagic;
      m->version = kRemoteVersion;
      m->type = uint32_t(RemoteType::kUnregister);
      m->slot = reg->remote->slot;
      // A gone gateway has let the registration go anyway.
      if (rtaccel_net_send(c->control, m, sizeof(*m), 0, kSecond) == 0)
        (void)await_reply(c, RemoteType::kUnregistered, m->slot, kReplyTimeout, m);
      delete m;
    }
    c->slots[reg->remote->slot].used = false;
    auto& list = c->registrations;
    list.erase(std::remove(list.begin(), list.end(), reg), list.end());
  }
  delete reg;
}

int remote_submit(rtaccel_registration* reg, int service, size_t request_len, rtaccel_ticket* ticket) {
  RemoteState& r = *reg->remote;
  if (r.in_flight) return -EBUSY;
  auto* h = reinterpret_cast<RemoteRequest*>(r.requests[service].get());
  h->magic = kRemoteMagic;
  h->service = uint32_t(service);
  h->seq = r.seq + 1;
  h->request_len = request_len;
  r.times = {core::monotonic_ns(), 0, 0};
  const auto& slot = reg->client->slots[r.slot];
  if (int err = rtaccel_net_send(slot.requests, h, sizeof(*h) + request_len, 0, kSendTimeout)) return link_error(err);
  r.seq = h->seq;
  r.service = uint32_t(service);
  r.in_flight = true;
  if (ticket) *ticket = {0, uint32_t(r.seq)};
  return 0;
}

int remote_wait(rtaccel_registration* reg, const rtaccel_ticket* ticket, uint64_t timeout_ns,
                size_t* response_len, bool poll) {
  RemoteState& r = *reg->remote;
  if (ticket->state != uint32_t(r.seq)) return -ESTALE;
  if (!r.in_flight) {
    if (response_len) *response_len = r.response_len;
    return r.status;
  }
  auto& slot = reg->client->slots[r.slot];
  const uint64_t start = core::monotonic_ns();
  for (;;) {
    uint64_t wait = 0;
    if (!poll) {
      const uint64_t spent = core::monotonic_ns() - start;
      if (timeout_ns && spent >= timeout_ns) return -ETIMEDOUT;
      wait = timeout_ns ? timeout_ns - spent : kSecond;
    }
    rtaccel_net_input in{slot.responses, slot.seen, 0, {}};
    const int err = rtaccel_net_wait(&in, 1, RTACCEL_NET_ALL | (r.spin && !poll ? RTACCEL_NET_SPIN : 0), wait);
    rtaccel_net_msg& msg = in.msg;
    if (!err) slot.seen = in.seen;
    if (err == -ETIMEDOUT) {
      if (poll) return -EAGAIN;
      continue;
    }
    if (err) return -EPIPE;
    RemoteResponse h{};
    bool ok = msg.len >= sizeof(h);
    if (ok) memcpy(&h, msg.data, sizeof(h));
    // A response of an earlier request (one this client stopped waiting
    // for) is not this one's.
    if (ok && h.magic == kRemoteMagic && h.seq < r.seq) {
      rtaccel_net_release(&msg);
      continue;
    }
    const uint32_t service = r.service;
    const ServiceArea& area = reg->services[service];
    ok = ok && h.magic == kRemoteMagic && h.seq == r.seq && h.response_len <= area.response_max &&
         msg.len == sizeof(h) + h.response_len;
    if (!ok) {
      rtaccel_net_release(&msg);
      r.in_flight = false;
      return -EPROTO;
    }
    memcpy(r.responses[service].get(), static_cast<const unsigned char*>(msg.data) + sizeof(h), h.response_len);
    r.hops = {h.gateway_arrival_ns, h.gateway_taken_ns, h.gateway_reply_ns, msg.arrival_ns};
    rtaccel_net_release(&msg);
    r.in_flight = false;
    r.status = h.status;
    r.response_len = h.response_len;
    r.times.start_ns = h.start_ns;
    r.times.end_ns = h.end_ns;
    if (response_len) *response_len = r.response_len;
    return r.status;
  }
}
