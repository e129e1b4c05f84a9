#include "accel/gateway.h"
#include "accel/log.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <list>
#include <mutex>
#include <vector>

#include "accel/client.h"
#include "accel/remote.h"
#include "core/clock.h"
#include "core/thread.h"
#include "rtaccel/accel.h"
#include "rtaccel/net.h"

namespace rtaccel::accel {
namespace {

constexpr uint64_t kMs = 1000000ull;
constexpr uint64_t kSecond = 1000 * kMs;
// How often idle threads look at their stop flag.
constexpr uint64_t kPoll = 100 * kMs;

void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog("gateway", fmt, ap);
  va_end(ap);
}

// One registration of a remote client.
struct Slot {
  rtaccel_net_channel_t* requests = nullptr;   // opened by the first registration
  rtaccel_net_channel_t* responses = nullptr;
  uint64_t request_size = 0;
  uint64_t seen = 0;  // requests taken, over every registration of the slot
  rtaccel_registration* local = nullptr;  // null: free
  int executor_priority = 0;
  int executor_core = -1;
  bool spins = false;  // the registration's wait
  std::atomic<bool> stop{false};
  core::Thread serve;
};

class Session {
 public:
  Session(rtaccel_net_link_t* link, std::string peer, const std::string& server_socket, const Policy& policy,
          bool verbose)
      : link_(link), peer_(std::move(peer)), server_socket_(server_socket), policy_(policy), verbose_(verbose) {}
  ~Session();

  void run(const std::atomic<bool>& stopping);
  bool done() const { return done_.load(); }

 private:
  void handle(const RemoteControl& m);
  void reply(uint32_t slot, int status, const std::string& why, const rtaccel_registration_info* info,
             RemoteType type = RemoteType::kRegistered);
  void release(uint32_t slot);
  void serve(uint32_t slot);

  rtaccel_net_link_t* link_;
  const std::string peer_;
  const std::string server_socket_;
  const Policy& policy_;
  const bool verbose_;
  rtaccel_net_channel_t* control_ = nullptr;
  rtaccel_client* local_ = nullptr;
  Slot slots_[kRemoteSlots];
  std::atomic<bool> done_{false};
};

Session::~Session() {
  for (uint32_t k = 0; k < kRemoteSlots; k++) release(k);
  rtaccel_client_close(local_);
  rtaccel_net_close(link_);
}

void Session::reply(uint32_t slot, int status, const std::string& why, const rtaccel_registration_info* info,
                    RemoteType type) {
  auto m = std::make_unique<RemoteControl>();
  m->magic = kRemoteMagic;
  m->version = kRemoteVersion;
  m->type = uint32_t(type);
  m->slot = slot;
  m->status = status;
  if (info) m->info = *info;
  snprintf(m->message, sizeof(m->message), "%s", why.c_str());
  if (int err = rtaccel_net_send(control_, m.get(), sizeof(*m), 0, kSecond))
    log("peer %s: cannot answer its registration: %s", peer_.c_str(), strerror(-err));
}

// Ends the slot's registration: its thread finishes the request in hand.
void Session::release(uint32_t k) {
  Slot& s = slots_[k];
  if (!s.local) return;
  s.stop.store(true);
  if (s.serve.joinable()) s.serve.join();
  rtaccel_client_unregister(s.local);
  s.local = nullptr;
}

void Session::handle(const RemoteControl& m) {
  // decode_remote_control() has checked the type and the slot.
  if (m.type == uint32_t(RemoteType::kHello)) return reply(m.slot, 0, "", nullptr, RemoteType::kHello);
  if (m.type == uint32_t(RemoteType::kUnregister)) {
    release(m.slot);
    return reply(m.slot, 0, "", nullptr, RemoteType::kUnregistered);
  }
  Slot& s = slots_[m.slot];
  const rtaccel_registration_desc& desc = m.desc;
  if (s.local) return reply(m.slot, -EEXIST, "slot in use", nullptr);
  if (desc.callback >= RTACCEL_MAX_CALLBACKS || desc.nservices > RTACCEL_MAX_SERVICES)
    return reply(m.slot, -EINVAL, "malformed registration", nullptr);
  if (Status st = policy_.allows_peer(peer_, desc.chain.priority); !st) {
    log("peer %s: registration refused: %s", peer_.c_str(), st.message().c_str());
    return reply(m.slot, -EPERM, st.message(), nullptr);
  }
  const uint64_t need = request_channel_size(desc);
  if (s.requests && s.request_size < need)
    return reply(m.slot, -ENOSPC, "the slot's channel is smaller than this registration's requests", nullptr);
  if (!local_) {
    if (int err = rtaccel_client_connect(server_socket_.c_str(), &local_))
      return reply(m.slot, err, std::string("the server does not answer: ") + strerror(-err), nullptr);
  }
  char why[256] = "";
  rtaccel_registration* reg = nullptr;
  if (int err = rtaccel_client_register(local_, &desc, &reg, why, sizeof(why))) return reply(m.slot, err, why, nullptr);
  if (!s.requests) {
    rtaccel_net_channel_attr a{};
    a.id = request_channel(m.slot);
    a.priority = wire_priority(desc.chain.priority);
    a.max_size = need;
    a.slots = 2;
    rtaccel_net_channel_attr b{};
    b.id = response_channel(m.slot);
    b.priority = a.priority;
    int err = rtaccel_net_channel_open(link_, &a, &s.requests);
    if (!err) err = rtaccel_net_channel_open(link_, &b, &s.responses);
    if (err) {
      rtaccel_client_unregister(reg);
      return reply(m.slot, err, std::string("cannot open the slot's channels: ") + strerror(-err), nullptr);
    }
    s.request_size = need;
  }
  rtaccel_registration_info info;
  rtaccel_registration_query(reg, &info);
  s.local = reg;
  s.executor_priority = desc.chain.callbacks[desc.callback].executor_priority;
  s.executor_core = desc.chain.callbacks[desc.callback].executor_core;
  s.spins = info.wait == RTACCEL_WAIT_SPIN;
  s.stop.store(false);
  if (int err = s.serve.start(RTACCEL_THREAD_STACK, [this, k = m.slot] { serve(k); })) {
    rtaccel_client_unregister(reg);
    s.local = nullptr;
    return reply(m.slot, -err, std::string("cannot start the registration's thread: ") + strerror(err), nullptr);
  }
  if (verbose_)
    log("peer %s: callback '%s' of chain '%s' admitted: device %u, priority %d, bucket %u", peer_.c_str(),
        desc.chain.callbacks[desc.callback].name, desc.chain.name, info.device, info.priority, info.bucket);
  reply(m.slot, 0, "", &info);
}

// The slot's requests, one at a time, until the registration or the link
// ends. Every field of a request is checked: the peer can send anything.
void Session::serve(uint32_t k) {
  Slot& s = slots_[k];
  char name[16];
  snprintf(name, sizeof(name), "rtaccel-gw%u", k);
  pthread_setname_np(pthread_self(), name);
  if (s.executor_priority > 0) {
    sched_param p{};
    p.sched_priority = std::min(s.executor_priority, 99);
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);  // without the right, at normal priority
  }
  // On the core admission control gave the callback (it reads the
  // executor's core as this machine's): there the thread waits only for
  // the executors the analysis charges, not for the server's workers on
  // another core. Not where the registration spins: on one machine, as
  // rtaccel run places nodes, its client spins on that very core at the
  // same priority, and the thread would never take the request.
  // A core this machine lacks (the peer's numbering) leaves it unpinned.
  if (!s.spins && s.executor_core >= 0 && s.executor_core < CPU_SETSIZE) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(s.executor_core, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
  }
  rtaccel_registration* reg = s.local;
  rtaccel_registration_info info;
  rtaccel_registration_query(reg, &info);
  // The response's wire image, allocated once: the header, then the largest
  // response of any of the registration's services.
  size_t most = 0;
  for (int i = 0;; i++) {
    size_t cap = 0;
    if (!rtaccel_response_buffer(reg, i, &cap)) break;
    most = std::max(most, cap);
  }
  std::vector<unsigned char> wire(sizeof(RemoteResponse) + most);
  auto* out = reinterpret_cast<RemoteResponse*>(wire.data());
  size_t caps[RTACCEL_MAX_SERVICES] = {};
  uint32_t nservices = 0;
  while (nservices < RTACCEL_MAX_SERVICES && rtaccel_request_buffer(reg, int(nservices), &caps[nservices]))
    nservices++;
  uint64_t last = 0;
  while (!s.stop.load()) {
    rtaccel_net_msg msg;
    const int err = rtaccel_net_take(s.requests, &s.seen, kPoll, &msg);
    if (err == -ETIMEDOUT) continue;
    if (err) return;  // the link failed: the session ends
    const uint64_t taken = core::monotonic_ns(), arrived = msg.arrival_ns;
    RemoteRequest h{};
    const bool ok = decode_remote_request(msg.data, msg.len, last, caps, nservices, &h);
    if (ok)
      memcpy(rtaccel_request_buffer(reg, int(h.service), nullptr),
             static_cast<const unsigned char*>(msg.data) + sizeof(h), h.request_len);
    rtaccel_net_release(&msg);
    *out = {};
    out->magic = kRemoteMagic;
    out->seq = h.seq;
    out->gateway_arrival_ns = arrived;
    out->gateway_taken_ns = taken;
    if (!ok) {
      log("peer %s: malformed request on slot %u refused", peer_.c_str(), k);
      out->status = -EINVAL;
    } else {
      last = h.seq;
      rtaccel_ticket t;
      size_t len = 0;
      out->status = rtaccel_submit(reg, int(h.service), h.request_len, &t);
      // Asleep even for a spinning registration: a peer's waits spin on
      // its own node, never on this one's cores, where nothing accounts
      // for them.
      if (out->status == 0) out->status = wait_suspended(reg, &t, 0, &len);
      if (out->status != -EPIPE && out->status != -EBUSY) {
        rtaccel_request_times times;
        rtaccel_request_timestamps(reg, &t, &times);
        out->start_ns = times.start_ns;
        out->end_ns = times.end_ns;
        memcpy(wire.data() + sizeof(*out), rtaccel_response_buffer(reg, int(h.service), nullptr), len);
        out->response_len = len;
      }
    }
    out->gateway_reply_ns = core::monotonic_ns();
    if (rtaccel_net_send(s.responses, wire.data(), sizeof(*out) + out->response_len, 0, 5 * kSecond)) return;
  }
}

void Session::run(const std::atomic<bool>& stopping) {
  rtaccel_net_channel_attr a{};
  a.id = kControlChannel;
  a.priority = kControlPriority;
  a.max_size = sizeof(RemoteControl);
  if (int err = rtaccel_net_channel_open(link_, &a, &control_)) {
    log("peer %s: %s", peer_.c_str(), strerror(-err));
    done_.store(true);
    return;
  }
  auto m = std::make_unique<RemoteControl>();
  uint64_t seen = 0;
  while (!stopping.load()) {
    rtaccel_net_msg msg;
    const int err = rtaccel_net_take(control_, &seen, kPoll, &msg);
    if (err == -ETIMEDOUT) continue;
    if (err) {
      if (verbose_) log("peer %s: gone (%s)", peer_.c_str(), rtaccel_net_error(link_));
      break;
    }
    const size_t len = msg.len;
    const bool ok = decode_remote_control(msg.data, len, m.get());
    rtaccel_net_release(&msg);
    if (!ok) {
      log("peer %s: malformed control message of %zu bytes: the session ends", peer_.c_str(), len);
      break;
    }
    handle(*m);
  }
  done_.store(true);
}

class GatewayImpl final : public Gateway {
 public:
  GatewayImpl(std::string server_socket, const Policy& policy, bool verbose)
      : server_socket_(std::move(server_socket)), policy_(policy), verbose_(verbose) {}
  ~GatewayImpl() override;

  Status listen(const std::string& address);
  std::string address() const override { return address_; }

 private:
  struct Running {
    std::unique_ptr<Session> session;
    core::Thread thread;
  };
  void accept_loop();
  void reap(bool all);

  const std::string server_socket_;
  const Policy policy_;
  const bool verbose_;
  rtaccel_net_listener_t* listener_ = nullptr;
  std::string address_;
  std::atomic<bool> stopping_{false};
  core::Thread acceptor_;
  std::list<Running> sessions_;
  Refusals refusals_;
};

GatewayImpl::~GatewayImpl() {
  stopping_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  reap(true);
  rtaccel_net_listener_close(listener_);
}

Status GatewayImpl::listen(const std::string& address) {
  if (address.rfind("tcp:", 0) != 0 && address.rfind("rdma:", 0) != 0)
    return Status::invalid("--listen " + address + ": the gateway listens on tcp:HOST:PORT or rdma:HOST:PORT "
                           "(a client on this machine uses the Unix socket)");
  const std::vector<std::string> peers = policy_.peers();
  if (peers.empty())
    return Status::invalid("--listen: the policy names no remote peer; add rules "
                           "{peer: ADDRESS, priorities: [low, high]} to a --policy file");
  if (peers.size() > RTACCEL_NET_ALLOW_MAX)
    return Status::invalid("--listen: the policy names more than " + std::to_string(RTACCEL_NET_ALLOW_MAX) + " peers");
  std::vector<const char*> allow;
  for (const auto& p : peers) allow.push_back(p.c_str());
  rtaccel_net_options o;
  rtaccel_net_options_default(&o);
  o.max_transfer = kRemoteMaxTransfer;
  if (int err = rtaccel_net_listen(address.c_str(), allow.data(), int(allow.size()), "rtaccel-server", &o, &listener_))
    return Status::error("--listen " + address + ": " + strerror(-err));
  char resolved[128];
  rtaccel_net_listener_address(listener_, resolved, sizeof(resolved));
  address_ = resolved;
  if (int err = acceptor_.start(RTACCEL_THREAD_STACK, [this] { accept_loop(); }))
    return Status::error(std::string("cannot start the gateway's thread: ") + strerror(err));
  return Status();
}

void GatewayImpl::reap(bool all) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (!all && !it->session->done()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = sessions_.erase(it);  // the session's registrations go with it
  }
}

void GatewayImpl::accept_loop() {
  while (!stopping_.load()) {
    reap(false);
    rtaccel_net_link_t* link = nullptr;
    char refused[128] = "";
    const int err = rtaccel_net_accept(listener_, kPoll, &link, refused, sizeof(refused));
    if (err == -EACCES) {
      log("refused %s: not a peer of the policy", refused);
      continue;
    }
    if (err == -EMFILE || err == -ENFILE) {  // that peer was let go (core/accept.h)
      if (refusals_.refused())
        log("no descriptor left for a peer (%s, %zu peers connected): refusing new peers until some leave",
            strerror(-err), sessions_.size());
      continue;
    }
    if (err) {
      if (err != -ETIMEDOUT) log("accept: %s", strerror(-err));
      continue;
    }
    if (const unsigned long long turned_away = refusals_.accepted())
      log("accepting peers again; %llu refused meanwhile", turned_away);
    // "tcp:10.0.0.2": the policy names the address.
    std::string peer = rtaccel_net_peer_address(link);
    peer = peer.substr(peer.find(':') + 1);
    if (verbose_) log("peer %s (%s) connected", peer.c_str(), rtaccel_net_peer(link));
    sessions_.push_back({std::make_unique<Session>(link, peer, server_socket_, policy_, verbose_), {}});
    Session* s = sessions_.back().session.get();
    if (int failed = sessions_.back().thread.start(RTACCEL_THREAD_STACK, [this, s] { s->run(stopping_); })) {
      log("peer %s: cannot start its session: %s", peer.c_str(), strerror(failed));
      sessions_.pop_back();  // and the link with it
    }
  }
}

}  // namespace

Expected<std::unique_ptr<Gateway>> Gateway::start(const std::string& address, const std::string& server_socket,
                                                  const Policy& policy, bool verbose) {
  auto g = std::make_unique<GatewayImpl>(server_socket, policy, verbose);
  if (Status st = g->listen(address); !st) return st;
  return std::unique_ptr<Gateway>(std::move(g));
}

}  // namespace rtaccel::accel
