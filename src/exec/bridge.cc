#include "exec/bridge.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "core/clock.h"
#include "core/futex.h"
#include "core/realtime.h"
#include "core/thread.h"
#include "rtaccel/net.h"

namespace rtaccel::exec {
namespace {

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kSecond = 1000000000;
constexpr uint64_t kConnectTimeout = 10 * kSecond;
// How long a sender waits for the other end's ACK, after the transfer's last
// chunk is out, before it sends again (once) and then counts the message
// lost. Longer than any queueing in the window of a link that works.
constexpr uint64_t kAckTimeout = 250 * kMs;
constexpr uint32_t kRetries = 1;

class Bridge {
 public:
  explicit Bridge(const BridgeConfig& c)
      : config_(c),
        workload_(*c.workload),
        plan_(*c.plan),
        me_(c.plan->bridges[c.bridge]),
        shared_(*c.shared),
        state_(c.shared->executor(c.workload->executors.size() + c.bridge)) {}
  ~Bridge();

  Status run();

 private:
  // A net link and the hops it carries (all of the link's, or one).
  struct Connection {
    std::vector<uint32_t> hops;
    rtaccel_net_link_t* link = nullptr;
  };

  Status connect_all();
  Status open_channels();
  void send_loop(uint32_t hop);
  void deliver_loop(uint32_t hop);
  void lose(uint32_t hop, const Message& message, int err);
  bool stopping() const { return shared_.header()->stop.load(std::memory_order_acquire) != 0; }

  const BridgeConfig& config_;
  const workload::Workload& workload_;
  const Plan& plan_;
  const BridgePlan& me_;
  SharedRun& shared_;
  ExecutorState* state_;
  bool realtime_ = false;
  std::vector<Connection> connections_;
  std::vector<rtaccel_net_channel_t*> channel_;  // by hop index
  std::vector<size_t> connection_of_;            // by hop index
};

Bridge::~Bridge() {
  for (auto& conn : connections_)
    if (conn.link) rtaccel_net_close(conn.link);
}

std::string net_error(int err, rtaccel_net_link_t* link) {
  std::string why = strerror(-err);
  if (link && *rtaccel_net_error(link)) why += std::string(" (") + rtaccel_net_error(link) + ")";
  return why;
}

Status Bridge::connect_all() {
  // Both ends list the link's hops in one order, so that connection k means
  // the same on both.
  std::vector<uint32_t> hops = me_.sends;
  hops.insert(hops.end(), me_.receives.begin(), me_.receives.end());
  std::sort(hops.begin(), hops.end());
  if (config_.flow_control) {
    connections_.push_back({hops, nullptr});
  } else {
    for (uint32_t h : hops) connections_.push_back({{h}, nullptr});
  }
  connection_of_.assign(plan_.hops.size(), SIZE_MAX);
  for (size_t k = 0; k < connections_.size(); ++k)
    for (uint32_t h : connections_[k].hops) connection_of_[h] = k;

  rtaccel_net_options o;
  rtaccel_net_options_default(&o);
  const auto& link = workload_.links[me_.link];
  uint64_t largest = kWireHeaderBytes;
  for (uint32_t h : hops) largest = std::max(largest, plan_.hops[h].bytes);
  o.max_transfer = largest;
  if (config_.flow_control) {
    o.chunk = static_cast<uint32_t>(link.chunk_bytes);
    o.window = static_cast<uint32_t>(link.window_bytes);
  } else {
    // One chunk per message: nothing for a more urgent hop to overtake at.
    o.chunk = static_cast<uint32_t>(std::clamp<uint64_t>(largest, 1024, 16u << 20));
  }
  if (realtime_) {
    int top = 1;
    for (uint32_t h : hops) top = std::max(top, plan_.hops[h].executor_priority);
    o.rx_priority = std::min(top, 99);
  }
  const std::string what = "link '" + link.name + "' on node '" + workload_.nodes[me_.node].name + "'";
  if (me_.listens) {
    const char* allow[] = {config_.allow.c_str()};
    rtaccel_net_listener_t* listener = nullptr;
    if (int err = rtaccel_net_listen(config_.listen_address.c_str(), allow, 1, workload_.nodes[me_.node].name.c_str(), &o,
                                     &listener))
      return Status::error(what + ": cannot listen on " + config_.listen_address + ": " + strerror(-err));
    char address[128];
    rtaccel_net_listener_address(listener, address, sizeof(address));
    // Published for the connecting end, which waits for it: a port on tcp
    // and rdma, 1 on shm (listening, no port).
    const char* colon = strrchr(address, ':');
    const int port = config_.connect_needs_port && colon ? atoi(colon + 1) : 1;
    state_->port.store(static_cast<uint32_t>(std::max(port, 1)), std::memory_order_release);
    wake(state_);
    Status st;
    for (size_t accepted = 0; accepted < connections_.size() && st;) {
      rtaccel_net_link_t* l = nullptr;
      char refused[128] = "";
      const int err = rtaccel_net_accept(listener, kConnectTimeout, &l, refused, sizeof(refused));
      if (err == -EACCES) continue;  // a stranger; wait for the other end
      if (err) {
        st = Status::error(what + ": the other end did not connect: " + strerror(-err));
        break;
      }
      // The connecting end names each connection by its number.
      const size_t k = strtoul(rtaccel_net_peer(l) + strcspn(rtaccel_net_peer(l), "0123456789"), nullptr, 10);
      if (k >= connections_.size() || connections_[k].link) {
        rtaccel_net_close(l);
        st = Status::error(what + ": unexpected connection '" + rtaccel_net_peer(l) + "'");
        break;
      }
      connections_[k].link = l;
      ++accepted;
    }
    rtaccel_net_listener_close(listener);
    return st;
  }
  std::string address = config_.connect_address;
  {
    // The listening end (the bridge of the same link on the other node)
    // publishes its port in its state once it listens.
    ExecutorState* peer = nullptr;
    for (size_t b = 0; b < plan_.bridges.size(); ++b)
      if (b != config_.bridge && plan_.bridges[b].link == me_.link)
        peer = shared_.executor(workload_.executors.size() + b);
    const uint64_t deadline = core::monotonic_ns() + kConnectTimeout;
    uint32_t port = 0;
    while (peer && (port = peer->port.load(std::memory_order_acquire)) == 0) {
      if (core::monotonic_ns() > deadline || stopping())
        return Status::error(what + ": the other end did not listen in time");
      const uint32_t seen = peer->events.load(std::memory_order_acquire);
      if (peer->port.load(std::memory_order_acquire)) continue;
      const timespec abs = rtaccel_timespec_of(core::monotonic_ns() + 10 * kMs);
      futex_wait(reinterpret_cast<uint32_t*>(&peer->events), seen, true, CLOCK_MONOTONIC, &abs);
    }
    if (config_.connect_needs_port) address += std::to_string(port);
  }
  for (size_t k = 0; k < connections_.size(); ++k) {
    const std::string name = "connection " + std::to_string(k);
    if (int err = rtaccel_net_connect(address.c_str(), name.c_str(), &o, kConnectTimeout, &connections_[k].link))
      return Status::error(what + ": cannot connect to " + address + ": " + strerror(-err));
  }
  return Status();
}

Status Bridge::open_channels() {
  channel_.assign(plan_.hops.size(), nullptr);
  for (auto& conn : connections_) {
    for (uint32_t h : conn.hops) {
      const HopPlan& hop = plan_.hops[h];
      rtaccel_net_channel_attr a{};
      a.id = h;
      a.priority = hop.priority;
      a.max_size = hop.bytes;
      a.slots = 4;
      a.ack_timeout_ns = kAckTimeout;
      a.retries = kRetries;
      if (int err = rtaccel_net_channel_open(conn.link, &a, &channel_[h]))
        return Status::error("hop '" + hop.name + "': cannot open its channel: " + strerror(-err));
    }
  }
  return Status();
}

void Bridge::lose(uint32_t hop, const Message& message, int err) {
  // At the end of the run the other end may close first: not a loss.
  if (stopping()) return;
  HopState* st = shared_.hop(hop);
  st->lost.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t chain : plan_.queues[plan_.hops[hop].outbox].chains)
    if (message.stamps[chain]) shared_.chain(chain)->link_losses.fetch_add(1, std::memory_order_relaxed);
  uint64_t none = 0;
  if (st->failed_ns.compare_exchange_strong(none, core::monotonic_ns())) {
    const std::string why = net_error(err, connections_[connection_of_[hop]].link);
    snprintf(st->error, sizeof(st->error), "%s", why.c_str());
  }
}

void Bridge::send_loop(uint32_t h) {
  const HopPlan& hop = plan_.hops[h];
  if (realtime_) {
    sched_param p{};
    p.sched_priority = hop.executor_priority;
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
  }
  // The wire image of one message, allocated once: its header, then the
  // payload the topic's message_kb stands for.
  std::vector<unsigned char> wire(hop.bytes, 0);
  auto* header = reinterpret_cast<WireHeader*>(wire.data());
  auto* outbox = shared_.queue(hop.outbox);
  // Long enough for the message at the link's rate behind the others, short
  // enough that a dead link frees the thread well within a run.
  const uint64_t rate = std::max<uint64_t>(workload_.links[hop.link].rate_bytes_per_s, 1);
  const uint64_t timeout = kSecond + 4 * (hop.bytes * kSecond / rate);
  HopState* st = shared_.hop(h);
  while (!stopping()) {
    const uint32_t seen = state_->events.load(std::memory_order_acquire);
    if (__atomic_load_n(&outbox->count, __ATOMIC_ACQUIRE) == 0) {
      const timespec abs = rtaccel_timespec_of(core::monotonic_ns() + 100 * kMs);
      futex_wait(reinterpret_cast<uint32_t*>(&state_->events), seen, true, CLOCK_MONOTONIC, &abs);
      continue;
    }
    queue_pop(shared_, hop.outbox, &header->message);
    header->send_ns = core::monotonic_ns();
    const int err = rtaccel_net_send(channel_[h], wire.data(), wire.size(), 0, timeout);
    if (err) {
      lose(h, header->message, err);
      continue;
    }
    st->sent.fetch_add(1, std::memory_order_relaxed);
    uint64_t none = 0;
    if (st->failed_ns.load(std::memory_order_relaxed))
      st->recovered_ns.compare_exchange_strong(none, core::monotonic_ns());
  }
}

void Bridge::deliver_loop(uint32_t h) {
  const HopPlan& hop = plan_.hops[h];
  if (realtime_) {
    int top = 1;
    for (uint32_t q : hop.queues) top = std::max(top, workload_.executors[plan_.queues[q].executor].priority);
    sched_param p{};
    p.sched_priority = top;
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
  }
  const size_t executor = workload_.executors.size() + config_.bridge;
  HopState* st = shared_.hop(h);
  uint64_t seen = 0;
  WireHeader header;
  while (!stopping()) {
    rtaccel_net_msg msg;
    const int err = rtaccel_net_take(channel_[h], &seen, 100 * kMs, &msg);
    if (err == -ETIMEDOUT) continue;
    if (err) {
      // The link failed: the sending end counts what it could not deliver.
      // Wait for the end of the run without spinning.
      core::sleep_ns(50 * kMs);
      continue;
    }
    memcpy(&header, msg.data, sizeof(header));
    const uint64_t arrival = msg.arrival_ns;
    const int stale = msg.stale;
    rtaccel_net_release(&msg);
    publish(shared_, workload_, plan_, hop.queues, header.message, executor);
    st->delivered.fetch_add(1, std::memory_order_relaxed);
    TraceEvent ev{};
    ev.kind = static_cast<uint32_t>(TraceKind::kTransfer);
    ev.callback = static_cast<uint32_t>(hop.publisher);
    ev.thread = h;
    ev.segment = h;
    ev.submit_ns = header.message.publish_ns;
    ev.begin_ns = header.send_ns;
    ev.end_ns = arrival;
    ev.bucket = -1;
    ev.status = stale;
    // The most critical chain instance it carries, as the callbacks' events.
    for (uint32_t q : hop.queues)
      for (uint32_t c : plan_.queues[q].chains)
        if (header.message.stamps[c] &&
            (!ev.instance_ns || workload_.chains[c].priority > workload_.chains[ev.chain].priority)) {
          ev.chain = c;
          ev.instance_ns = header.message.stamps[c];
        }
    const uint64_t i = state_->trace_used.fetch_add(1, std::memory_order_relaxed);
    if (i < shared_.trace_capacity(executor)) shared_.trace(executor)[i] = ev;
  }
}

Status Bridge::run() {
  state_->pid = getpid();
  realtime_ = rtaccel_fifo_or_best(1) == 1;
  state_->realtime = realtime_ ? 1 : 0;
  rtaccel_lock_memory();
  if (Status st = connect_all(); !st) return st;
  if (Status st = open_channels(); !st) return st;
  state_->status.store(static_cast<uint32_t>(ExecutorStatus::kReady), std::memory_order_release);
  auto* header = shared_.header();
  while (!header->go.load(std::memory_order_acquire) && !stopping())
    futex_wait(reinterpret_cast<uint32_t*>(&header->go), 0, true, CLOCK_MONOTONIC, nullptr);
  // The threads started go on until the runner stops the run, which it
  // does when this bridge fails.
  std::vector<core::Thread> threads(me_.sends.size() + me_.receives.size());
  size_t next = 0;
  for (uint32_t h : me_.sends)
    if (int err = threads[next++].start(RTACCEL_THREAD_STACK, [this, h] { send_loop(h); }))
      return Status::os_error("cannot start the sender of hop " + std::to_string(h), err);
  for (uint32_t h : me_.receives)
    if (int err = threads[next++].start(RTACCEL_THREAD_STACK, [this, h] { deliver_loop(h); }))
      return Status::os_error("cannot start the receiver of hop " + std::to_string(h), err);
  for (auto& t : threads) t.join();
  state_->status.store(static_cast<uint32_t>(ExecutorStatus::kDone), std::memory_order_release);
  return Status();
}

}  // namespace

Status run_bridge(const BridgeConfig& config) {
  Status st;
  {
    Bridge bridge(config);
    st = bridge.run();
  }
  if (!st) {
    ExecutorState* state = config.shared->executor(config.workload->executors.size() + config.bridge);
    snprintf(state->error, sizeof(state->error), "%s", st.message().c_str());
    state->status.store(static_cast<uint32_t>(ExecutorStatus::kFailed), std::memory_order_release);
  }
  return st;
}

}  // namespace rtaccel::exec
