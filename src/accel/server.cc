#include "accel/server.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <climits>
#include <cstdio>
#include <cstring>
#include <latch>
#include <map>

#include "accel/admission.h"
#include "accel/backend.h"
#include "accel/gateway.h"
#include "accel/log.h"
#include "accel/policy.h"
#include "accel/protocol.h"
#include "accel/services.h"
#include "core/accept.h"
#include "core/cgroup.h"
#include "core/clock.h"
#include "core/fd.h"
#include "core/futex.h"
#include "core/realtime.h"
#include "core/thread.h"
#include "rtaccel/isolate.h"
#include "rtaccel/lock.h"
#include "rtaccel/lock.hpp"

namespace rtaccel::accel {
namespace {

struct Connection;

// A registered callback's region, as the server sees it. Fields below `mu`
// are guarded by its device's mutex (Device::mu, which the annotations cannot
// name from here); the rest are set at registration.
struct Region {
  uint64_t id = 0;
  Connection* owner = nullptr;
  std::string callback;
  std::string chain;
  core::UniqueFd memfd;
  core::Mapping map;
  Layout layout;  // private copy: never read back from shared memory
  int keys[RTACCEL_MAX_SERVICES] = {};
  void* device_handle = nullptr;
  uint32_t device = 0;

  // mu:
  int priority = 0;
  uint32_t bucket = 0;
  uint32_t consumed = 0;    // entries taken by workers
  uint32_t discovered = 0;  // entries given an arrival time
  uint64_t arrival[kRingEntries] = {};
  uint32_t inflight = 0;
  bool dead = false;
  bool faulted = false;
  uint64_t refused = 0;
  Region* next_dead = nullptr;
  uint32_t slot = kNoHintSlot;  // its bit in the doorbell page's hints
  bool candidate = false;       // in its bucket's candidates

  RegionHeader* header() const { return map.at<RegionHeader>(0); }
  RegionProducer* producer() const { return map.at<RegionProducer>(layout.producer_offset); }
  RequestEntry* entry(uint32_t i) const {
    return map.at<RequestEntry>(layout.entries_offset) + (i % kRingEntries);
  }
};

enum class WatchKind { kListen, kWake, kSocket, kPidfd, kSkip };
struct Watch {
  WatchKind kind;
  Connection* connection;
};

struct Connection {
  core::UniqueFd fd;
  core::UniqueFd pidfd;
  pid_t pid = 0;
  uid_t uid = 0;
  std::vector<Region*> regions;
  std::vector<rtaccel_chain_desc> declaring;  // the declaration under way
  std::vector<std::string> declared;          // the chains its declarations hold
  Watch socket_watch{WatchKind::kSocket, this};
  Watch pidfd_watch{WatchKind::kPidfd, this};
};

struct Job {
  Region* region = nullptr;
  uint32_t entry = 0;
  uint32_t state = 0;  // the entry's state word when taken
  DecodedRequest request;
};

struct Device {
  uint32_t index = 0;
  std::unique_ptr<Backend> backend;
  uint32_t levels = 1;
  core::UniqueFd doorbell_fd;
  core::UniqueFd status_fd;
  core::Mapping doorbell_map;
  core::Mapping status_map;
  DoorbellPage* doorbell = nullptr;
  StatusPage* status = nullptr;
  // Priority-inheritance mutex: the workers of all buckets share the device
  // core at different SCHED_FIFO priorities and take it to pick requests.
  lock::PiMutex mu;
  std::vector<Region*> buckets[kMaxLevels] RTACCEL_GUARDED_BY(mu);
  Region* graveyard RTACCEL_GUARDED_BY(mu) = nullptr;  // dead regions whose last request finished
  // The registrations of each hint slot (DoorbellPage::hints) and the slots
  // free; per bucket, the registrations that may have requests not taken
  // yet: those hinted since a worker looked, those that held requests still
  // when it did, any without a slot, and all at a full look (full_look_ns,
  // at least every kUntrustedPageBoundNs). A worker looks at these, not at
  // the whole bucket.
  std::vector<Region*> slots RTACCEL_GUARDED_BY(mu);
  std::vector<uint32_t> free_slots RTACCEL_GUARDED_BY(mu);
  std::vector<Region*> candidates[kMaxLevels] RTACCEL_GUARDED_BY(mu);
  uint64_t full_look_ns[kMaxLevels] RTACCEL_GUARDED_BY(mu) = {};
  // Doorbell value each bucket's workers last scanned at: a higher bucket that
  // sees a lower one's doorbell move stops polling so the lower one can run.
  std::atomic<uint32_t> last_seen[kMaxLevels] = {};
  // Each bucket's workers in the middle of a request. A higher bucket's
  // worker that finished a request may have preempted one of them: it does
  // not poll then, or the lower kernel would stay off the core for poll_ns.
  std::atomic<uint32_t> running[kMaxLevels] = {};
  std::vector<core::Thread> workers;
  // Where the admitted set of generation `placed_at` puts each callback of
  // the device (the control thread's alone): kept while the set is the same,
  // so that a registration to an admitted chain places its own region only.
  std::map<std::string, Placement> placed;
  uint64_t placed_at = UINT64_MAX;  // none yet

  uint32_t* doorbell_word(uint32_t bucket) const { return &doorbell->bucket[bucket].seq; }
  uint32_t* sleeping_word(uint32_t bucket) const { return &status->bucket[bucket].sleeping; }
};

// Puts R among its bucket's candidates.
void enlist(Device& d, Region* r) RTACCEL_REQUIRES(d.mu) {
  if (r->candidate) return;
  r->candidate = true;
  d.candidates[r->bucket].push_back(r);
}

void delist(Device& d, Region* r) RTACCEL_REQUIRES(d.mu) {
  if (!r->candidate) return;
  auto& list = d.candidates[r->bucket];
  list.erase(std::remove(list.begin(), list.end(), r), list.end());
  r->candidate = false;
}

// Takes the doorbell page's hints and makes their registrations candidates,
// each in its own bucket. Bits of a free slot cost nothing, and of a
// registration moved since, a look at most. The sixteen words are two cache
// lines, read where nobody wrote them since: a summary word that said which
// to look at would be one more line for every submit to move.
void take_hints(Device& d) RTACCEL_REQUIRES(d.mu) {
  for (uint32_t w = 0; w < kHintSlots / 64; w++) {
    uint64_t* word = &d.doorbell->hints[w];
    // Loaded first: an exchange of a word with nothing in it would still
    // take its line from the client that sets a bit next.
    if (!__atomic_load_n(word, __ATOMIC_RELAXED)) continue;
    for (uint64_t bits = __atomic_exchange_n(word, 0, __ATOMIC_ACQUIRE); bits; bits &= bits - 1)
      if (Region* r = d.slots[w * 64 + uint32_t(__builtin_ctzll(bits))]) enlist(d, r);
  }
}

// The calling thread onto CORE alone (checked by open(): one this process
// may use).
void pin_this_thread(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

void ring(Device& d, uint32_t bucket) {
  __atomic_fetch_add(d.doorbell_word(bucket), 1, __ATOMIC_SEQ_CST);
  futex_wake(d.doorbell_word(bucket), INT_MAX, true);
}

// A memfd of `size` bytes, mapped read-write here, that a peer cannot resize
// under our mapping (which would turn our accesses into SIGBUS).
Status make_shared_file(const char* name, size_t size, unsigned extra_seals, core::UniqueFd* fd,
                        core::Mapping* map) {
  core::UniqueFd f(memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!f || ftruncate(f.get(), off_t(size)) < 0) {
    return Status::error(std::string("memfd: ") + strerror(errno));
  }
  core::Mapping m = core::Mapping::map(f.get(), size, PROT_READ | PROT_WRITE);
  if (!m) {
    return Status::error(std::string("mmap: ") + strerror(errno));
  }
  if (fcntl(f.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | extra_seals | F_SEAL_SEAL) < 0) {
    return Status::error(std::string("sealing a memfd: ") + strerror(errno));
  }
  *fd = std::move(f);
  *map = std::move(m);
  return Status();
}

// The cores this process may use as open() finds them, before it pins
// itself to the server's core: the gateway's threads go back to them.
struct ProcessCores {
  cpu_set_t set;
  bool known = false;
};

class ServerImpl final : public Server {
 public:
  explicit ServerImpl(const ServerOptions& options) : options_(options) {}
  ~ServerImpl() override {
    shutdown();
    rtaccel_bwlock_close(bwlock_);
  }

  Status open();
  Status run() override;
  void stop() override {
    stopping_.store(true);
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd_.get(), &one, sizeof(one));
    (void)ignored;
  }
  uint64_t region_memory() const override { return region_limit_; }

 private:
  // open()'s steps, in its order.
  Status load_options();
  Status open_devices(ProcessCores* process_cores);
  Status make_admission();
  Status make_control_descriptors();
  Status bind_socket();
  Status watch_control_descriptors();
  Status start_gateway(const ProcessCores& process_cores);
  Status start_workers();
  Status open_device(uint32_t index, int device);
  void worker(Device& d, uint32_t bucket, std::latch* prepared);
  bool take(Device& d, uint32_t bucket, Job* job);
  void execute(Device& d, Job& job, rtaccel_bwlock_holder_t* bw);
  void complete(Region& r, uint32_t entry, uint32_t state, int status, uint32_t response_len);
  void idle(Device& d, uint32_t bucket, uint32_t seen);

  void accept_clients();
  void serve(Connection* c);
  void handle_register(Connection* c, const RegisterRequest& m);
  void handle_declare(Connection* c, const DeclareRequest& m);
  Status create_region(Connection* c, const rtaccel_registration_desc& desc, const Admitted& admitted,
                       Region** out);
  void reply(Connection* c, const RegisterReply& r, const Region* region);
  void unregister(Region* r);
  // Frees a region no request uses any more.
  void destroy(Device& d, Region* r);
  Status fits_in_memory(const rtaccel_registration_desc& desc);
  void drop(Connection* c, const char* why);
  void note_refusal(int err);
  void settle(Connection* c);
  void refresh_buckets(Device& d, Region* fresh = nullptr);
  void refresh_all_buckets();
  void reap();
  void shutdown();
  void log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  ServerOptions options_;
  ServiceTable services_;
  std::unique_ptr<Admission> admission_;
  size_t declarations_held_ = 0;  // chains of every connection's declarations, pending or admitted
  Policy policy_ = Policy::defaults(getuid());
  std::vector<std::unique_ptr<Device>> devices_;
  core::UniqueFd listen_fd_;
  core::UniqueFd epoll_fd_;
  core::UniqueFd wake_fd_;
  Watch listen_watch_{WatchKind::kListen, nullptr};
  Watch wake_watch_{WatchKind::kWake, nullptr};
  Watch skip_watch_{WatchKind::kSkip, nullptr};
  std::map<Connection*, std::unique_ptr<Connection>> connections_;
  std::map<std::string, Region*> by_callback_;
  uint64_t region_limit_ = 0;  // what the regions may hold together
  uint64_t region_bytes_ = 0;  // what they hold
  uint64_t unweighed_bytes_ = 0;  // registered since the memory left was last read
  uint64_t next_id_ = 1;
  std::atomic<bool> stopping_{false};
  bool shut_down_ = false;
  bool bound_ = false;  // the socket file is ours to remove
  ino_t socket_inode_ = 0;  // while it is still the file we bound
  Refusals refusals_;
  bool said_no_pidfd_ = false;
  rtaccel_bwlock_t* bwlock_ = nullptr;
  std::unique_ptr<Gateway> gateway_;
};

void ServerImpl::log(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog("", fmt, ap);
  va_end(ap);
}

// The steps in the order they depend on each other. Each keeps what it
// makes in the server; where one fails, open() returns at once and what the
// earlier ones made goes with the server (~ServerImpl, shutdown()).
Status ServerImpl::open() {
  if (Status st = load_options(); !st) return st;
  ProcessCores process_cores;
  if (Status st = open_devices(&process_cores); !st) return st;
  if (Status st = make_admission(); !st) return st;
  if (Status st = make_control_descriptors(); !st) return st;
  if (Status st = bind_socket(); !st) return st;
  if (Status st = watch_control_descriptors(); !st) return st;
  if (Status st = start_gateway(process_cores); !st) return st;
  return start_workers();
}

Status ServerImpl::load_options() {
  if (options_.devices.empty()) {
    return Status::error("no device given");
  }
  for (const std::string& plugin : options_.plugins) {
    if (options_.backend != workload::Backend::kCpu) {
      return Status::error("plugins run on the cpu backend only");
    }
    if (Status st = services_.load_plugin(plugin); !st) return st;
  }
  if (!options_.policy_file.empty()) {
    auto policy = Policy::load(options_.policy_file);
    if (!policy) return policy.status();
    policy_ = policy.take();
  }
  // Half of what there is: the rest is the machine's, the clients' and the
  // server's own (its workers' stacks, a backend's buffers).
  region_limit_ = options_.region_memory;
  if (!region_limit_) region_limit_ = rtaccel_memory_available() / 2;
  if (!region_limit_) region_limit_ = UINT64_MAX;  // nothing known to weigh it against
  if (options_.lowest_bucket_workers < 1 || options_.lowest_bucket_workers > 16) {
    return Status::error("lowest-bucket workers must be 1..16");
  }
  if (options_.server_core >= 0 && rtaccel_core_allowed(options_.server_core) != 0)
    return Status::invalid("server core " + std::to_string(options_.server_core) +
                           " is not one this process may use (offline, or outside its cpuset: a container's "
                           "--cpuset-cpus)");
  if (!options_.bwlock.empty()) {
    if (int err = rtaccel_bwlock_open(options_.bwlock.c_str(), &bwlock_); err < 0)
      return Status::error("bandwidth lock '" + options_.bwlock + "': " + strerror(-err));
  }
  return Status();
}

// A device runtime's own threads (PoCL's compute pool, the CUDA driver's)
// are made as the device opens and take this thread's cores: on the
// server's core, not the executors'. (The cpu backend's workers pin
// themselves to their device core.)
Status ServerImpl::open_devices(ProcessCores* process_cores) {
  process_cores->known =
      pthread_getaffinity_np(pthread_self(), sizeof(process_cores->set), &process_cores->set) == 0;
  if (options_.server_core >= 0) pin_this_thread(options_.server_core);
  for (uint32_t i = 0; i < options_.devices.size(); i++)
    if (Status st = open_device(i, options_.devices[i]); !st) return st;
  return Status();
}

// Admission control over the devices as they opened: their levels are the
// backend's, which may be fewer than asked for.
Status ServerImpl::make_admission() {
  if (options_.regulator_cost_ns && options_.regulator_cost_ns >= options_.regulator_period_ns)
    return Status::invalid("the regulator's cost per period must be less than its period");
  AdmissionOptions admission;
  admission.epsilon_ns = options_.epsilon_ns;
  admission.kappa_ns = options_.kappa_ns;
  admission.jitter_ns = options_.jitter_ns;
  admission.server_core = options_.server_core;
  admission.check_deadlines = options_.check_deadlines;
  admission.backend = options_.backend;
  for (const auto& d : devices_) admission.device_levels.push_back(d->levels);
  if (options_.backend == workload::Backend::kCpu) admission.device_cores = options_.devices;
  admission.regulator_cost_ns = options_.regulator_cost_ns;
  admission.regulator_period_ns = options_.regulator_period_ns;
  admission.regulated_cores = options_.regulated_cores;
  admission_ = std::make_unique<Admission>(admission);
  return Status();
}

Status ServerImpl::make_control_descriptors() {
  wake_fd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  epoll_fd_.reset(epoll_create1(EPOLL_CLOEXEC));
  listen_fd_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!wake_fd_ || !epoll_fd_ || !listen_fd_) {
    return Status::error(std::string("cannot create the control thread's descriptors: ") + strerror(errno));
  }
  return Status();
}

// listen_fd_ on options_.socket_path, which it makes its folder for and
// takes over from a server that died there.
Status ServerImpl::bind_socket() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (options_.socket_path.empty() || options_.socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::error("socket path empty or longer than " + std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  memcpy(addr.sun_path, options_.socket_path.c_str(), options_.socket_path.size() + 1);
  // The default socket lives in /run/rtaccel/, which a fresh boot lacks,
  // and which only root may make.
  auto elsewhere = [](int err) {
    return err == EACCES || err == EPERM || err == EROFS
               ? "; give --socket a path in a folder this user may write, such as $XDG_RUNTIME_DIR/rtaccel.sock"
               : "";
  };
  const std::string dir = options_.socket_path.substr(0, options_.socket_path.rfind('/'));
  if (!dir.empty() && dir != options_.socket_path && mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) {
    const int err = errno;
    return Status::error("cannot make the socket's folder " + dir + ": " + strerror(err) + elsewhere(err));
  }
  // A socket file left by a server that died is replaced; a live server keeps it.
  if (connect(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    return Status::error(options_.socket_path + ": another server is listening there");
  }
  // Only a socket is replaced: a path given by mistake (a policy file, a
  // folder) was deleted.
  struct stat there {};
  if (lstat(options_.socket_path.c_str(), &there) == 0 && !S_ISSOCK(there.st_mode)) {
    return Status::invalid(options_.socket_path + ": exists and is not a socket; give another --socket");
  }
  listen_fd_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  unlink(options_.socket_path.c_str());
  if (bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    bound_ = true;
    if (lstat(options_.socket_path.c_str(), &there) == 0) socket_inode_ = there.st_ino;
  }
  if (!bound_ || chmod(options_.socket_path.c_str(), 0666) < 0 || listen(listen_fd_.get(), 128) < 0) {
    const int err = errno;
    return Status::error(options_.socket_path + ": " + strerror(err) + elsewhere(err));
  }
  return Status();
}

Status ServerImpl::watch_control_descriptors() {
  if (int err = rtaccel_accept_reserve())
    return Status::error(std::string("cannot keep a descriptor in reserve: ") + strerror(-err));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &listen_watch_;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &ev);
  ev.data.ptr = &wake_watch_;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  return Status();
}

// The gateway for remote clients, where --listen asks for one.
Status ServerImpl::start_gateway(const ProcessCores& process_cores) {
  if (options_.listen.empty()) return Status();
  // The gateway's threads on the process's cores, not the server's one:
  // a registration's thread pins itself to its callback's core, or, where
  // the registration spins, stays free to leave a core its client spins
  // on. On the server's core alone it waited there, runnable, behind a
  // spinning client of the same node at its own priority, until the
  // client's wait timed out.
  if (process_cores.known) pthread_setaffinity_np(pthread_self(), sizeof(process_cores.set), &process_cores.set);
  auto gateway = Gateway::start(options_.listen, options_.socket_path, policy_, options_.verbose);
  if (options_.server_core >= 0) pin_this_thread(options_.server_core);
  if (!gateway) return gateway.status();
  gateway_ = gateway.take();
  log("listening for remote clients on %s", gateway_->address().c_str());
  return Status();
}

// Clients are accepted only once every worker runs on its core at its
// priority: a worker still migrating at SCHED_OTHER would wait behind a
// lower bucket's kernel.
Status ServerImpl::start_workers() {
  size_t workers = 0;
  for (auto& d : devices_)
    workers += d->levels - 1 + options_.lowest_bucket_workers;
  std::latch prepared{ptrdiff_t(workers)};
  size_t started = 0;
  int err = 0;
  for (auto& d : devices_) {
    for (uint32_t b = 0; b < d->levels && !err; b++) {
      const uint32_t n = b == 0 ? options_.lowest_bucket_workers : 1;
      for (uint32_t k = 0; k < n && !err; k++) {
        Device* dev = d.get();
        core::Thread& t = d->workers.emplace_back();
        err = t.start(options_.worker_stack, [this, dev, b, &prepared] { worker(*dev, b, &prepared); });
        if (err) d->workers.pop_back();
        else ++started;
      }
    }
  }
  if (err) {
    // The workers started wind down; the latch lives until each has passed it.
    stopping_.store(true);
    prepared.count_down(ptrdiff_t(workers - started));
  }
  prepared.wait();
  if (err) return Status::error(std::string("cannot start a worker: ") + strerror(err));
  if (stopping_.load()) {
    return Status::error("a worker could not be prepared (see above)");
  }
  return Status();
}

Status ServerImpl::open_device(uint32_t index, int device) {
  auto d = std::make_unique<Device>();
  d->index = index;
  BackendOptions bo;
  bo.device = device;
  bo.levels = options_.levels;
  bo.fifo_base = options_.fifo_base;
  bo.driver_core = options_.server_core;
  auto backend = make_backend(options_.backend, bo, &services_);
  if (!backend) return backend.status();
  d->backend = backend.take();
  d->levels = d->backend->levels();
  if (d->levels < options_.levels && options_.backend == workload::Backend::kCuda)
    log("device %u: %u levels asked for, the device has %u stream priorities", index,
        options_.levels, d->levels);
  if (d->levels > 1 && !d->backend->preemptive())
    log("device %u: %u buckets that do not preempt each other (--no-fifo); admission control "
        "assumes they do, so its bounds do not hold", index, d->levels);
  if (Status st = make_shared_file("rtaccel-doorbell", 4096, 0, &d->doorbell_fd, &d->doorbell_map); !st) return st;
  if (Status st = make_shared_file("rtaccel-status", 4096, F_SEAL_FUTURE_WRITE, &d->status_fd, &d->status_map); !st)
    return st;
  d->doorbell = d->doorbell_map.at<DoorbellPage>(0);
  d->status = d->status_map.at<StatusPage>(0);
  d->status->magic = kMagic;
  d->status->version = kProtocolVersion;
  d->status->server_pid = uint32_t(getpid());
  d->status->levels = d->levels;
  if (d->mu.init() != 0) {
    return Status::error("cannot create a priority-inheritance mutex");
  }
  {
    lock::MutexLock guard(d->mu);
    d->slots.assign(kHintSlots, nullptr);
    for (uint32_t s = kHintSlots; s-- > 0;) d->free_slots.push_back(s);  // the lowest first
  }
  if (options_.verbose) log("device %u: %s", index, d->backend->describe().c_str());
  devices_.push_back(std::move(d));
  return Status();
}

// --- workers -----------------------------------------------------------------

void ServerImpl::worker(Device& d, uint32_t bucket, std::latch* prepared) {
  rtaccel_stack_mark();
  const Status prepared_ok = d.backend->prepare_worker(bucket);
  const bool ok = prepared_ok.ok();
  if (!ok) {
    log("device %u bucket %u: %s", d.index, bucket, prepared_ok.message().c_str());
    stopping_.store(true);
  }
  // A holder per critical worker (each runs one request at a time), made
  // before the server says it is ready.
  rtaccel_bwlock_holder_t* bw = nullptr;
  if (ok && bwlock_ && bucket >= options_.bwlock_bucket) {
    char label[RTACCEL_GANG_NAME_MAX];
    snprintf(label, sizeof(label), "server.d%ub%u", d.index, bucket);
    if (int err = rtaccel_bwlock_holder_init(bwlock_, label, options_.bwlock_threshold_mbps, 0, &bw);
        err < 0)
      log("device %u bucket %u: no bandwidth lock holder: %s", d.index, bucket, strerror(-err));
  }
  prepared->count_down();
  if (!ok) return;
  char name[16];
  snprintf(name, sizeof(name), "rtaccel-d%ub%u", d.index, bucket);
  pthread_setname_np(pthread_self(), name);
  while (!stopping_.load(std::memory_order_relaxed)) {
    const uint32_t seen = __atomic_load_n(d.doorbell_word(bucket), __ATOMIC_SEQ_CST);
    d.last_seen[bucket].store(seen, std::memory_order_relaxed);
    Job job;
    if (take(d, bucket, &job)) {
      d.running[bucket].fetch_add(1, std::memory_order_relaxed);
      execute(d, job, bw);
      d.running[bucket].fetch_sub(1, std::memory_order_relaxed);
    } else
      idle(d, bucket, seen);
  }
  rtaccel_bwlock_holder_destroy(bw);
  // What it used of its stack, said once as it ends: a service (a
  // plugin's, a device runtime's calls) deeper than the stack would crash
  // the server, and one close to it should have more.
  size_t size = 0;
  const size_t used = rtaccel_stack_used(&size);
  log("device %u bucket %u: a worker used %zu of its %zu KiB of stack%s", d.index, bucket, used >> 10, size >> 10,
      used > size / 2 ? "; give the workers more (--worker-stack-kib)" : "");
}

// Picks the request to run next in `bucket`: the highest request priority,
// then the earliest arrival (FIFO among equals). Requests are taken in ring
// order within a region. Malformed entries are completed with an error here.
// Only the bucket's candidates are looked at; one found with nothing to take
// leaves them until its hint comes again.
bool ServerImpl::take(Device& d, uint32_t bucket, Job* job) {
  lock::MutexLock guard(d.mu);
  take_hints(d);
  uint64_t now = core::monotonic_ns();  // also the arrival of what it finds
  if (now - d.full_look_ns[bucket] >= kUntrustedPageBoundNs) {
    for (Region* r : d.buckets[bucket]) enlist(d, r);
    d.full_look_ns[bucket] = now;
  }
  std::vector<Region*>& candidates = d.candidates[bucket];
  for (;; now = core::monotonic_ns()) {
    Region* best = nullptr;
    for (size_t i = 0; i < candidates.size();) {
      Region* r = candidates[i];
      const uint32_t head = r->faulted ? r->consumed : __atomic_load_n(&r->producer()->head, __ATOMIC_ACQUIRE);
      const uint32_t pending = head - r->consumed;
      if (pending > kRingEntries) {
        // Only a client that broke the protocol gets here; it alone suffers.
        r->faulted = true;
        log("callback '%s' (pid %d): producer index out of range; its requests are ignored",
            r->callback.c_str(), int(r->owner->pid));
        continue;
      }
      for (; r->discovered - r->consumed < pending; r->discovered++)
        r->arrival[r->discovered % kRingEntries] = now;
      if (pending == 0 && r->slot != kNoHintSlot) {
        r->candidate = false;
        candidates[i] = candidates.back();
        candidates.pop_back();
        continue;
      }
      i++;
      if (pending == 0) continue;
      if (!best || r->priority > best->priority ||
          (r->priority == best->priority &&
           r->arrival[r->consumed % kRingEntries] < best->arrival[best->consumed % kRingEntries]))
        best = r;
    }
    if (!best) return false;
    const uint32_t index = best->consumed++;
    volatile RequestEntry& entry = *best->entry(index);
    const uint32_t state = entry.state;
    DecodedRequest request;
    const RequestError error = decode_request(entry, best->layout, best->id, &request);
    if (error != RequestError::kNone) {
      if (best->refused++ == 0)
        log("callback '%s' (pid %d): refused a request: %s", best->callback.c_str(),
            int(best->owner->pid), to_string(error));
      if (entry_phase(state) == kSubmitted) complete(*best, index, state, -EINVAL, 0);
      continue;
    }
    best->inflight++;
    job->region = best;
    job->entry = index;
    job->state = state;
    job->request = request;
    return true;
  }
}

void ServerImpl::execute(Device& d, Job& job, rtaccel_bwlock_holder_t* bw) {
  Region& r = *job.region;
  RequestEntry* e = r.entry(job.entry);
  const uint32_t running = (job.state & ~kPhaseMask) | kRunning;
  __atomic_store_n(&e->state, running, __ATOMIC_RELEASE);
  e->start_ns = core::monotonic_ns();
  rtaccel_service_call call{};
  call.request = r.map.bytes() + job.request.request_offset;
  call.request_len = job.request.request_len;
  call.response = r.map.bytes() + job.request.response_offset;
  call.response_cap = job.request.response_cap;
  if (bw) rtaccel_bwlock_take(bw);
  int status = d.backend->run(r.keys[job.request.service], r.device_handle, r.map.bytes(), &call);
  if (bw) rtaccel_bwlock_release(bw);
  if (status == 0 && call.response_len > call.response_cap) status = -EOVERFLOW;
  complete(r, job.entry, job.state, status, status == 0 ? uint32_t(call.response_len) : 0);

  bool notify = false;
  {
    lock::MutexLock guard(d.mu);
    if (--r.inflight == 0 && r.dead) {
      r.next_dead = d.graveyard;
      d.graveyard = &r;
      notify = true;
    }
  }
  if (notify) {
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd_.get(), &one, sizeof(one));
    (void)ignored;
  }
}

void ServerImpl::complete(Region& r, uint32_t index, uint32_t state, int status,
                          uint32_t response_len) {
  RequestEntry* e = r.entry(index);
  e->status = status;
  e->response_len = response_len;
  e->end_ns = core::monotonic_ns();
  __atomic_store_n(&e->state, (state & ~kPhaseMask) | kDone, __ATOMIC_SEQ_CST);
  // Pairs with the client's store of `waiters` before it re-reads the state.
  if (__atomic_load_n(&e->waiters, __ATOMIC_SEQ_CST)) futex_wake(&e->state, INT_MAX, true);
}

// Nothing to run: poll the doorbell for poll_ns, unless a lower bucket has
// work, new or in hand (polling at a higher priority would keep it off the
// device core), then sleep on the doorbell.
void ServerImpl::idle(Device& d, uint32_t bucket, uint32_t seen) {
  uint32_t* word = d.doorbell_word(bucket);
  const uint64_t until = core::monotonic_ns() + options_.poll_ns;
  auto lower_has_work = [&] {
    for (uint32_t b = 0; b < bucket; b++)
      if (d.running[b].load(std::memory_order_relaxed) ||
          __atomic_load_n(d.doorbell_word(b), __ATOMIC_RELAXED) != d.last_seen[b].load(std::memory_order_relaxed))
        return true;
    return false;
  };
  for (uint32_t spins = 0; options_.poll_ns > 0; spins++) {
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != seen) return;
    if ((spins & 63) == 0 && (lower_has_work() || core::monotonic_ns() >= until)) break;
    cpu_relax();
  }
  __atomic_store_n(d.sleeping_word(bucket), 1, __ATOMIC_SEQ_CST);
  // A client increments the doorbell, then reads `sleeping`: it either sees
  // us asleep and wakes us, or we see its increment here and do not sleep.
  if (__atomic_load_n(word, __ATOMIC_SEQ_CST) == seen && !stopping_.load()) {
    // The timeout only bounds how long a hostile client that rewrites the
    // doorbell page can make us miss a wake-up.
    const timespec limit = core::deadline_in(kUntrustedPageBoundNs);
    futex_wait(word, seen, true, CLOCK_MONOTONIC, &limit);
  }
  __atomic_store_n(d.sleeping_word(bucket), 0, __ATOMIC_RELAXED);
}

// --- control thread ----------------------------------------------------------

Status ServerImpl::run() {
  if (options_.server_core >= 0) pin_this_thread(options_.server_core);
  epoll_event events[32];
  while (!stopping_.load()) {
    int n = epoll_wait(epoll_fd_.get(), events, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      shutdown();
      return Status::os_error("epoll_wait", err);
    }
    for (int i = 0; i < n; i++) {
      Watch* w = static_cast<Watch*>(events[i].data.ptr);
      const WatchKind kind = w->kind;
      Connection* c = w->connection;
      // drop() frees the connection and its watches; later events of this
      // batch may name them and must be skipped.
      const void* watches[2] = {c ? &c->socket_watch : nullptr, c ? &c->pidfd_watch : nullptr};
      switch (kind) {
        case WatchKind::kSkip:
          break;
        case WatchKind::kListen:
          accept_clients();
          break;
        case WatchKind::kWake: {
          uint64_t count;
          ssize_t ignored = read(wake_fd_.get(), &count, sizeof(count));
          (void)ignored;
          reap();
          break;
        }
        case WatchKind::kPidfd:
          drop(c, "exited");
          break;
        case WatchKind::kSocket:
          if (events[i].events & EPOLLIN)
            serve(c);
          else
            drop(c, "closed its connection");
          break;
      }
      if (c && !connections_.count(c))
        for (int k = i + 1; k < n; k++)
          if (events[k].data.ptr == watches[0] || events[k].data.ptr == watches[1])
            events[k].data.ptr = &skip_watch_;
    }
  }
  shutdown();
  return Status();
}

namespace {

// Tells a client refused for want of descriptors why, as the reply to the
// registration it is about to send (the client reads it once its send fails).
void send_refusal(int fd, int err, void*) {
  RegisterReply r{};
  r.magic = kMagic;
  r.version = kProtocolVersion;
  r.status = -err;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  if (err == EMFILE)
    snprintf(r.message, sizeof(r.message),
             "rtaccel-server has no descriptor left for a client (its limit: %llu); try again once clients have left",
             static_cast<unsigned long long>(limit.rlim_cur));
  else
    snprintf(r.message, sizeof(r.message), "rtaccel-server could not accept a client: %s", strerror(err));
  send(fd, &r, sizeof(r), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

void ServerImpl::note_refusal(int err) {
  if (refusals_.refused())
    log("no descriptor left for a client (%s, %zu clients connected): refusing new clients until some leave",
        strerror(err), connections_.size());
}

void ServerImpl::accept_clients() {
  for (;;) {
    const int got = rtaccel_accept(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK,
                                   send_refusal, nullptr);
    if (got == -EMFILE || got == -ENFILE) {
      // The client waiting was told and let go (core/accept.h); the next
      // one is the next turn's, so that no loop here spins.
      note_refusal(-got);
      return;
    }
    if (got < 0) {
      if (got != -EAGAIN && got != -EINTR) log("accept: %s", strerror(-got));
      return;
    }
    core::UniqueFd fd(got);
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
      log("SO_PEERCRED: %s", strerror(errno));
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->pid = cred.pid;
    c->uid = cred.uid;
    c->pidfd.reset(int(syscall(SYS_pidfd_open, cred.pid, 0)));
    if (!c->pidfd) {
      const int err = errno;
      if (err == EMFILE || err == ENFILE) {
        send_refusal(fd.get(), err, nullptr);
        note_refusal(err);
        continue;
      }
      if (err != ENOSYS && err != EPERM) {  // ESRCH: the client has gone already
        log("pidfd_open(%d): %s; refusing the client", int(cred.pid), strerror(err));
        continue;
      }
      // A kernel before 5.3, or a container whose seccomp profile forbids
      // it (Docker's before 20.10): a client's end is then its socket's,
      // which a child it forked without rtaccel's client library may hold.
      if (!said_no_pidfd_)
        log("pidfd_open: %s; a client's end is seen by its socket alone", strerror(err));
      said_no_pidfd_ = true;
    }
    if (const unsigned long long refused = refusals_.accepted())
      log("accepting clients again; %llu refused meanwhile", refused);
    c->fd = std::move(fd);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = &c->socket_watch;
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, c->fd.get(), &ev);
    ev.events = EPOLLIN;
    ev.data.ptr = &c->pidfd_watch;
    if (c->pidfd) epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, c->pidfd.get(), &ev);
    if (options_.verbose) log("client pid %d uid %u connected", int(c->pid), unsigned(c->uid));
    Connection* key = c.get();
    connections_.emplace(key, std::move(c));
  }
}

void ServerImpl::serve(Connection* c) {
  // One message per wake-up; the level-triggered epoll calls again for more.
  static_assert(sizeof(DeclareRequest) <= sizeof(RegisterRequest), "the largest message fits the buffer");
  alignas(8) static thread_local uint8_t buffer[sizeof(RegisterRequest)];
  ssize_t n = recv(c->fd.get(), buffer, sizeof(buffer), MSG_TRUNC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    drop(c, "closed its connection");
    return;
  }
  const size_t len = size_t(n);
  uint32_t header[3] = {};
  memcpy(header, buffer, std::min(len, sizeof(header)));
  if (len == sizeof(UnregisterRequest) && header[0] == kMagic && header[1] == kProtocolVersion &&
      header[2] == uint32_t(MessageType::kUnregister)) {
    UnregisterRequest m;
    memcpy(&m, buffer, sizeof(m));
    for (Region* r : c->regions)
      if (r->id == m.callback_id) {
        unregister(r);
        return;
      }
    log("pid %d: unregister of an unknown callback id %llu ignored", int(c->pid),
        static_cast<unsigned long long>(m.callback_id));
    return;
  }
  RegisterReply r{};
  r.magic = kMagic;
  r.version = kProtocolVersion;
  if (len == sizeof(DeclareRequest) && header[2] == uint32_t(MessageType::kDeclare)) {
    if (const Status checked = check_declaration(buffer, len); !checked) {
      declarations_held_ -= c->declaring.size();
      c->declaring.clear();
      r.status = -EINVAL;
      snprintf(r.message, sizeof(r.message), "%s", checked.message().c_str());
      log("pid %d: malformed declaration: %s", int(c->pid), checked.message().c_str());
      reply(c, r, nullptr);
      return;
    }
    DeclareRequest m;
    memcpy(&m, buffer, sizeof(m));
    handle_declare(c, m);
    return;
  }
  const Status checked = len > sizeof(buffer)
                             ? Status::invalid("message of " + std::to_string(len) + " bytes is too long")
                             : check_registration(buffer, len);
  if (!checked) {
    const std::string& why = checked.message();
    r.status = -EINVAL;
    snprintf(r.message, sizeof(r.message), "%s", why.c_str());
    log("pid %d: malformed registration: %s", int(c->pid), why.c_str());
    reply(c, r, nullptr);
    return;
  }
  RegisterRequest m;
  memcpy(&m, buffer, sizeof(m));
  handle_register(c, m);
}

void ServerImpl::handle_register(Connection* c, const RegisterRequest& m) {
  const rtaccel_registration_desc& desc = m.desc;
  const std::string callback = desc.chain.callbacks[desc.callback].name;
  RegisterReply r{};
  r.magic = kMagic;
  r.version = kProtocolVersion;
  Admitted admitted;
  Region* region = nullptr;
  // The server's own process is its gateway, which has checked the remote
  // peer's registration against the peer's rule already.
  Status st = c->pid == getpid() ? Status() : policy_.allows(c->uid, desc.chain.priority);
  if (st && by_callback_.count(callback)) st = Status::error("callback '" + callback + "' is already registered", EEXIST);
  for (uint32_t i = 0; st && i < desc.nservices; i++)
    if (devices_[0]->backend->lookup(desc.services[i].name) < 0)
      st = Status::error(std::string("service '") + desc.services[i].name + "' is not offered by the " +
                             std::string(workload::to_string(options_.backend)) + " backend",
                         ENOENT);
  if (st) st = fits_in_memory(desc);
  if (st) st = admission_->admit(desc, &admitted);
  if (st) {
    st = create_region(c, desc, admitted, &region);
    if (!st) admission_->release(desc.chain.name);
  }
  if (!st) {
    // The wire carries the errno and the reason.
    const std::string& why = st.message();
    r.status = -(st.err() ? st.err() : EINVAL);
    snprintf(r.message, sizeof(r.message), "%s", why.c_str());
    log("pid %d uid %u: registration of '%s' refused: %s", int(c->pid), unsigned(c->uid),
        callback.c_str(), why.c_str());
    reply(c, r, nullptr);
    return;
  }
  r.info.callback_id = region->id;
  r.info.device = region->device;
  r.info.bucket = region->bucket;
  r.info.priority = region->priority;
  r.info.wait = desc.chain.callbacks[desc.callback].wait;
  r.region_size = region->layout.size;
  if (options_.verbose)
    log("pid %d: callback '%s' of chain '%s' admitted: device %u, priority %d, bucket %u",
        int(c->pid), callback.c_str(), region->chain.c_str(), region->device, region->priority,
        region->bucket);
  reply(c, r, region);
}

void ServerImpl::handle_declare(Connection* c, const DeclareRequest& m) {
  RegisterReply r{};
  r.magic = kMagic;
  r.version = kProtocolVersion;
  Status st = c->pid == getpid() ? Status() : policy_.allows(c->uid, m.chain.priority);
  // Each held chain is a description of 29 KiB in the server's locked
  // memory, and the admission's analysis runs over all of them.
  if (st && declarations_held_ >= kMaxDeclared)
    st = Status::error("the server holds at most " + std::to_string(kMaxDeclared) + " declared chains", ENOSPC);
  const bool pushed = bool(st);
  if (pushed) {
    c->declaring.push_back(m.chain);
    declarations_held_++;
  }
  const bool last = m.flags & kDeclareLast;
  if (st && last) {
    st = admission_->declare(c->declaring);
    if (st) {
      for (const rtaccel_chain_desc& chain : c->declaring) c->declared.emplace_back(chain.name);
      refresh_all_buckets();
      if (options_.verbose)
        log("pid %d: %zu chain(s) declared and admitted", int(c->pid), c->declaring.size());
    }
  }
  if (!st) {
    r.status = -(st.err() ? st.err() : EINVAL);
    snprintf(r.message, sizeof(r.message), "%s", st.message().c_str());
    log("pid %d uid %u: declaration of %zu chain(s) refused: %s", int(c->pid), unsigned(c->uid),
        c->declaring.size() + (pushed ? 0 : 1), st.message().c_str());
  }
  if (!st) declarations_held_ -= c->declaring.size();  // what was pending goes
  if (!st || last) c->declaring.clear();
  reply(c, r, nullptr);
}

Status ServerImpl::create_region(Connection* c, const rtaccel_registration_desc& desc, const Admitted& admitted,
                                 Region** out) {
  auto r = std::make_unique<Region>();
  if (Status st = compute_layout(desc, &r->layout); !st) return st;
  if (Status st = make_shared_file("rtaccel-region", r->layout.size, 0, &r->memfd, &r->map); !st)
    return Status::error(st.message(), ENOMEM);
  Device& d = *devices_[admitted.device];
  r->id = next_id_++;
  r->owner = c;
  r->callback = desc.chain.callbacks[desc.callback].name;
  r->chain = desc.chain.name;
  r->device = admitted.device;
  RegionHeader* h = r->header();
  h->magic = kMagic;
  h->version = kProtocolVersion;
  h->callback_id = r->id;
  h->size = r->layout.size;
  h->nservices = r->layout.nservices;
  h->ring_entries = kRingEntries;
  h->entries_offset = r->layout.entries_offset;
  h->producer_offset = r->layout.producer_offset;
  for (uint32_t i = 0; i < r->layout.nservices; i++) {
    h->services[i] = r->layout.services[i];
    r->keys[i] = d.backend->lookup(r->layout.services[i].name);
  }
  if (Status st = d.backend->attach(r->map.bytes(), r->layout.size, &r->device_handle); !st)
    return Status::error(st.message(), ENOMEM);
  Region* region = r.release();
  {
    lock::MutexLock guard(d.mu);
    region->priority = admitted.priority;
    region->bucket = 0;
    d.buckets[0].push_back(region);
    if (!d.free_slots.empty()) {
      region->slot = d.free_slots.back();
      d.free_slots.pop_back();
      d.slots[region->slot] = region;
    }
    h->hint_slot = region->slot;  // before the client maps the region
  }
  c->regions.push_back(region);
  by_callback_[region->callback] = region;
  region_bytes_ += region->layout.size;
  refresh_buckets(d, region);
  *out = region;
  return Status();
}

void ServerImpl::reply(Connection* c, const RegisterReply& r, const Region* region) {
  iovec iov{const_cast<RegisterReply*>(&r), sizeof(r)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  if (region) {
    const Device& d = *devices_[region->device];
    const int fds[3] = {region->memfd.get(), d.doorbell_fd.get(), d.status_fd.get()};
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(fds));
    memcpy(CMSG_DATA(cm), fds, sizeof(fds));
  }
  // Never block the control thread on a client that does not read.
  if (sendmsg(c->fd.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
    log("pid %d: cannot send the registration reply: %s", int(c->pid), strerror(errno));
}

// Recomputes every region's request priority and bucket on the device after
// the admitted set changed, and moves regions whose bucket changed. Where it
// is the same, a new region (FRESH, in bucket 0) alone takes its place.
void ServerImpl::refresh_buckets(Device& d, Region* fresh) {
  const bool same = d.placed_at == admission_->generation();
  if (same && !fresh) return;
  if (!same) {
    d.placed = admission_->placements(d.index);
    d.placed_at = admission_->generation();
  }
  std::vector<std::pair<uint32_t, uint32_t>> moved;
  {
    lock::MutexLock guard(d.mu);
    std::vector<Region*> all;
    if (same) {
      auto& list = d.buckets[fresh->bucket];
      list.erase(std::remove(list.begin(), list.end(), fresh), list.end());
      delist(d, fresh);
      all.push_back(fresh);
    } else {
      for (uint32_t b = 0; b < d.levels; b++) {
        all.insert(all.end(), d.buckets[b].begin(), d.buckets[b].end());
        d.buckets[b].clear();
        d.candidates[b].clear();
      }
    }
    for (Region* r : all) {
      const uint32_t old = r->bucket;
      const auto it = d.placed.find(r->callback);
      const Placement p = it == d.placed.end() ? Placement{} : it->second;
      r->priority = p.priority;
      r->bucket = std::min(p.bucket, d.levels - 1);
      d.buckets[r->bucket].push_back(r);
      // A moved region may have requests its client hinted in the old
      // bucket: every one is looked at in its new bucket once.
      r->candidate = false;
      enlist(d, r);
      __atomic_store_n(&r->header()->bucket, r->bucket, __ATOMIC_SEQ_CST);
      if (old != r->bucket) moved.emplace_back(old, r->bucket);
    }
  }
  for (auto [from, to] : moved) {
    ring(d, from);
    ring(d, to);
  }
}

// After a change to the admitted set that no one region stands for (a
// declaration, a connection's declared chains let go of): every device's
// priorities may have been down-sampled anew.
void ServerImpl::refresh_all_buckets() {
  for (auto& d : devices_) refresh_buckets(*d);
}

void ServerImpl::unregister(Region* r) {
  Connection* c = r->owner;
  Device& d = *devices_[r->device];
  bool free_now = false;
  {
    lock::MutexLock guard(d.mu);
    auto& list = d.buckets[r->bucket];
    list.erase(std::remove(list.begin(), list.end(), r), list.end());
    delist(d, r);
    if (r->slot != kNoHintSlot) {
      d.slots[r->slot] = nullptr;
      d.free_slots.push_back(r->slot);
      r->slot = kNoHintSlot;
    }
    r->dead = true;  // queued requests are dropped; one running finishes
    free_now = r->inflight == 0;
  }
  c->regions.erase(std::remove(c->regions.begin(), c->regions.end(), r), c->regions.end());
  by_callback_.erase(r->callback);
  admission_->release(r->chain);
  r->owner = nullptr;
  if (free_now) destroy(d, r);
  refresh_buckets(d);
}

void ServerImpl::destroy(Device& d, Region* r) {
  d.backend->detach(r->device_handle);
  // The client may keep its mapping of the region, and the descriptor, past
  // the registration; the pages would then outlive it, locked and no longer
  // counted against the region limit, and a client that registered and
  // unregistered in a loop would hold memory without bound. Punching them
  // out of the file frees them whoever maps it: what the client touches
  // afterwards is new memory of its own, charged to it.
  if (fallocate(r->memfd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, off_t(r->layout.size)) < 0)
    log("freeing the region of callback %s: %s", r->callback.c_str(), strerror(errno));
  region_bytes_ -= r->layout.size;
  delete r;
}

// A region is resident from its registration on (the server locks its
// memory, the client maps it): a registration the memory cannot hold would
// have the kernel kill a process, the server first, as the one holding the
// most. It is refused before it is admitted, its size and the limit said.
Status ServerImpl::fits_in_memory(const rtaccel_registration_desc& desc) {
  Layout layout;
  if (Status st = compute_layout(desc, &layout); !st) return st;
  const auto mib = [](uint64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; };
  if (region_bytes_ + layout.size > region_limit_)
    return Status::error("its region of " + mib(layout.size) + " would bring the registrations' memory to " +
                             mib(region_bytes_ + layout.size) + ", above the server's limit of " +
                             mib(region_limit_) + " (--region-memory); smaller buffers, or fewer registrations",
                         ENOMEM);
  // The limit was weighed against the memory there was as the server
  // started; the machine's other processes, or the container's, may have
  // taken much of it since. What is left is read again (some 0.2 ms) once
  // the regions registered since the last reading come to a 64th of the
  // limit, and a region may take half of it at most.
  unweighed_bytes_ += layout.size;
  if (unweighed_bytes_ < region_limit_ / 64) return Status();
  unweighed_bytes_ = 0;
  const uint64_t left = rtaccel_memory_available();
  if (!left || layout.size <= left / 2) return Status();
  return Status::error("its region of " + mib(layout.size) + " would take more than half of the " + mib(left) +
                           " that the machine and the server's memory cgroup have left",
                       ENOMEM);
}

void ServerImpl::drop(Connection* c, const char* why) {
  auto it = connections_.find(c);
  if (it == connections_.end()) return;
  if (options_.verbose || !c->regions.empty())
    log("client pid %d %s; releasing %zu registration(s)", int(c->pid), why, c->regions.size());
  while (!c->regions.empty()) unregister(c->regions.back());
  declarations_held_ -= c->declaring.size() + c->declared.size();
  if (!c->declared.empty()) {
    for (const std::string& chain : c->declared) admission_->release(chain);
    refresh_all_buckets();
  }
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, c->fd.get(), nullptr);
  if (c->pidfd) epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, c->pidfd.get(), nullptr);
  connections_.erase(it);
}

// What a client said before the server was told to stop and the server
// had not read yet: its unregistrations, and its leaving. A client that
// unregistered everything and left did not leave at shutdown. A
// registration then is not served; the connection goes with the rest.
void ServerImpl::settle(Connection* c) {
  for (;;) {
    alignas(8) uint32_t header[3] = {};
    const ssize_t n = recv(c->fd.get(), header, sizeof(header), MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
    if (n == 0) {
      drop(c, "closed its connection");
      return;
    }
    if (n != ssize_t(sizeof(UnregisterRequest)) || header[2] != uint32_t(MessageType::kUnregister)) return;
    serve(c);
  }
}

void ServerImpl::reap() {
  for (auto& d : devices_) {
    Region* dead;
    {
      lock::MutexLock guard(d->mu);
      dead = std::exchange(d->graveyard, nullptr);
    }
    while (dead) {
      Region* next = dead->next_dead;
      destroy(*d, dead);
      dead = next;
    }
  }
}

void ServerImpl::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stopping_.store(true);
  for (auto& d : devices_) {
    for (uint32_t b = 0; b < d->levels; b++) ring(*d, b);
    for (auto& t : d->workers) t.join();
    d->workers.clear();
  }
  for (auto it = connections_.begin(); it != connections_.end();) settle((it++)->first);
  while (!connections_.empty()) drop(connections_.begin()->first, "left at shutdown");
  // After the connections: a gateway session waiting for a reply of the
  // control thread sees its connection close.
  gateway_.reset();
  reap();
  // Not a file put there since (a server started in our place).
  struct stat there {};
  if (bound_ && lstat(options_.socket_path.c_str(), &there) == 0 && S_ISSOCK(there.st_mode) &&
      there.st_ino == socket_inode_)
    unlink(options_.socket_path.c_str());
}

}  // namespace

Expected<std::unique_ptr<Server>> Server::create(const ServerOptions& options) {
  auto server = std::make_unique<ServerImpl>(options);
  if (Status st = server->open(); !st) return st;
  return std::unique_ptr<Server>(std::move(server));
}

std::string list_backends() {
  std::string out;
  for (const BackendProbe& p : probe_backends()) {
    char line[512];
    snprintf(line, sizeof(line), "%-8s %-12s %s\n", p.name.c_str(),
             !p.compiled ? "not built" : p.found ? "device found" : "no device", p.detail.c_str());
    out += line;
  }
  return out;
}

}  // namespace rtaccel::accel
