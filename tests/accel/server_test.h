// What the end-to-end tests of rtaccel-server share (tests/accel/server*_test.cc,
// one behaviour a file): each test starts the real server binary on a
// private socket (ServerProcess) and talks to it through the client library
// (Client), or by hand (RawClient) where a test must break the protocol. A
// helper that one file alone uses stays in that file.
//
// Timing assertions compare against the bad case with wide margins (a dropped
// request queue against one that was not dropped, preemption against waiting
// for a 200 ms kernel), never against absolute latencies.
//
// The helpers are inline in a namespace of their own, not in each file's
// anonymous namespace: the files share one ServerProcess (and RemoteServer)
// counter, so no two servers of the run get the same socket or policy file.
#ifndef RTACCEL_TESTS_ACCEL_SERVER_TEST_H_
#define RTACCEL_TESTS_ACCEL_SERVER_TEST_H_

#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "accel/protocol.h"
#include "accel/test_descs.h"
#include "core/clock.h"
#include "core/daemon.h"
#include "core/fd.h"
#include "core/futex.h"
#include "core/procfs.h"
#include "rtaccel/accel.h"
#include "../harness/skip.h"

// Skips the test for want of NEED (tests/harness/skip.h), or fails it where
// RTACCEL_TEST_REQUIRE says this machine has NEED.
#define SKIP_WITHOUT(need, why)                                                          \
  do {                                                                                   \
    if (test_required(need)) GTEST_FAIL() << "required " << (need) << ": " << why;      \
    GTEST_SKIP() << "needs " << (need) << ": " << why;                                   \
  } while (0)

namespace rtaccel::accel::server_test {

using test::CallbackSpec;
using test::one_callback;

inline constexpr uint64_t kMs = 1000000;
inline constexpr uint64_t kSecond = 1000000000;

inline int register_desc(rtaccel_client* c, const rtaccel_registration_desc& d, rtaccel_registration** r,
                         char* why, size_t why_len) {
  return rtaccel_client_register(c, &d, r, why, why_len);
}

// --- the server process --------------------------------------------------------

// The server beside the build, or in RTACCEL_LIB_DIR (the GPU campaign runs
// these tests from a bundle, away from the build that made them).
inline std::string server_bin() {
  const char* dir = getenv("RTACCEL_LIB_DIR");
  return dir && *dir ? std::string(dir) + "/rtaccel-server" : std::string(RTACCEL_SERVER_BIN);
}

class ServerProcess {
 public:
  // KEEP_LOG: its output goes to a file of its own (log()), not the test's.
  // WRAPPER: a command that execs the server as its arguments (the server
  // keeps its pid).
  explicit ServerProcess(std::vector<std::string> args, bool keep_log = false,
                         const std::vector<std::string>& wrapper = {}) {
    static int counter = 0;
    const std::string name = "/tmp/rtaccel-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    socket_ = name + ".sock";
    if (keep_log) log_ = name + ".log";
    args.insert(args.begin(), {server_bin(), "--socket", socket_});
    args.insert(args.begin(), wrapper.begin(), wrapper.end());
    core::SpawnOptions options;
    options.ready_handshake = true;
    options.log_path = log_;
    auto child = core::Child::spawn(args, options);
    if (child) child_ = child.take();
  }
  // A server a test did not stop ends as a user's would (SIGTERM), and the
  // socket file of one a test killed goes too: a test leaves nothing behind.
  ~ServerProcess() {
    stop();
    unlink(socket_.c_str());
    if (!log_.empty()) unlink(log_.c_str());
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  // SIGTERM, then SIGKILL after 5 s; the wait status (-1 if already gone).
  int stop() { return child_.terminate(5000000000ull); }
  // Waits until the server serves clients (its readiness handshake, 10 s).
  bool ready() {
    const Status s = child_.wait_ready(10000000000ull);
    if (!s.ok()) fprintf(stderr, "rtaccel-server did not get ready: %s\n", s.message().c_str());
    return s.ok();
  }
  void kill_now() { child_.kill_now(); }
  const char* socket() const { return socket_.c_str(); }
  // What it wrote so far, where it keeps a log.
  std::string log() const {
    std::ostringstream text;
    text << std::ifstream(log_).rdbuf();
    return text.str();
  }
  pid_t pid() const { return child_.pid(); }
  // Its state as /proc says it ('R', 'S', 'T', 'Z': ended, not reaped);
  // '?' once it is gone.
  char state() const {
    rtaccel_proc_stat st{};
    return rtaccel_read_proc_stat(child_.pid(), &st) ? st.state : '?';
  }
  bool alive() const {
    const char now = state();
    return now != 'Z' && now != '?';
  }

  size_t open_fds() const {
    size_t n = 0;
    std::string dir = "/proc/" + std::to_string(child_.pid()) + "/fd";
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  }
  size_t maps_containing(const char* needle) const {
    std::ifstream in("/proc/" + std::to_string(child_.pid()) + "/maps");
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += !needle || line.find(needle) != std::string::npos;
    return n;
  }
  // Each of the server's threads named NAME_PREFIX...: the cores it may run on.
  std::vector<std::string> cores_of_threads(const std::string& name_prefix) const {
    std::vector<std::string> cores;
    const std::string dir = "/proc/" + std::to_string(child_.pid()) + "/task";
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::string comm;
        std::getline(std::ifstream(dir + "/" + e->d_name + "/comm"), comm);
        if (comm.rfind(name_prefix, 0) != 0) continue;
        std::ifstream status(dir + "/" + e->d_name + "/status");
        for (std::string line; std::getline(status, line);)
          if (line.rfind("Cpus_allowed_list:", 0) == 0) cores.push_back(line.substr(line.find_first_not_of(" \t", 18)));
      }
      closedir(d);
    }
    std::sort(cores.begin(), cores.end());
    return cores;
  }
  long rss_kb() const {
    std::ifstream in("/proc/" + std::to_string(child_.pid()) + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("VmRSS:", 0) == 0) return atol(line.c_str() + 6);
    return -1;
  }

 private:
  std::string socket_;
  std::string log_;
  core::Child child_;
};

// Server options used by most tests: device core 1 (the last on a 2-core
// machine is fine too), control thread on core 0.
inline std::vector<std::string> cpu_args(std::vector<std::string> extra = {}) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<std::string> a = {"--device", std::to_string(cores > 1 ? 1 : 0)};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

struct Client {
  rtaccel_client* c = nullptr;
  explicit Client(const ServerProcess& s) { EXPECT_EQ(rtaccel_client_connect(s.socket(), &c), 0); }
  ~Client() { rtaccel_client_close(c); }
  rtaccel_registration* reg(const rtaccel_registration_desc& d) {
    rtaccel_registration* r = nullptr;
    char why[256] = "";
    EXPECT_EQ(register_desc(c, d, &r, why, sizeof(why)), 0) << why;
    return r;
  }
};

inline rtaccel_registration_desc busy_chain(const std::string& name, int priority, uint64_t wcet_ns = kMs,
                                            rtaccel_wait_mode wait = RTACCEL_WAIT_SUSPEND) {
  CallbackSpec cb{.name = name + "-cb", .executor = name + "-ex", .core = 0, .wcet_ns = wcet_ns, .wait = wait};
  return one_callback(name, priority, 10 * kSecond, cb, 64, 64, /*critical=*/false);
}

inline int submit_busy(rtaccel_registration* r, uint64_t ns, rtaccel_ticket* t) {
  const int s = rtaccel_service_index(r, "busy");
  auto* req = static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(r, s, nullptr));
  req->ns = ns;
  return rtaccel_submit(r, s, sizeof(*req), t);
}

inline rtaccel_request_times times_of(rtaccel_registration* r, const rtaccel_ticket& t) {
  rtaccel_request_times times;
  rtaccel_request_timestamps(r, &t, &times);
  return times;
}

// Waits until the server has started the ticket's request (it left "submitted").
inline bool wait_started(rtaccel_registration* r, const rtaccel_ticket& t) {
  for (int i = 0; i < 5000; i++) {
    const rtaccel_request_times times = times_of(r, t);
    if (times.start_ns >= times.submit_ns) return true;
    usleep(1000);
  }
  return false;
}

// --- a client that speaks the protocol by hand ----------------------------------

class RawClient {
 public:
  explicit RawClient(const char* socket_path) {
    fd_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", socket_path);
    connected_ = connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  bool connected() const { return connected_; }
  int send_bytes(const void* data, size_t len) { return int(send(fd_.get(), data, len, MSG_NOSIGNAL)); }

  // Sends a message and reads the reply; maps the shared memory it carries.
  int exchange(const void* message, size_t len, RegisterReply* reply) {
    if (send(fd_.get(), message, len, MSG_NOSIGNAL) < 0) return -errno;
    pollfd p{fd_.get(), POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return -ETIMEDOUT;
    iovec iov{reply, sizeof(*reply)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    if (recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC) != ssize_t(sizeof(*reply))) return -EPROTO;
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    if (reply->status == 0 && cm) {
      int fds[3];
      memcpy(fds, CMSG_DATA(cm), sizeof(fds));
      core::UniqueFd region(fds[0]), doorbell(fds[1]), status(fds[2]);
      region_ = core::Mapping::map(region.get(), reply->region_size, PROT_READ | PROT_WRITE);
      doorbell_ = core::Mapping::map(doorbell.get(), 4096, PROT_READ | PROT_WRITE);
      status_ = core::Mapping::map(status.get(), 4096, PROT_READ);
      // The status page is sealed: a client cannot map it writable.
      status_writable_ = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, status.get(), 0) != MAP_FAILED;
      shrinkable_ = ftruncate(region.get(), 4096) == 0;
      region_fd_ = std::move(region);
    }
    return reply->status;
  }
  int register_desc(const rtaccel_registration_desc& d, RegisterReply* reply) {
    RegisterRequest m{};
    m.magic = kMagic;
    m.version = kProtocolVersion;
    m.type = uint32_t(MessageType::kRegister);
    m.desc = d;
    return exchange(&m, sizeof(m), reply);
  }

  RegionHeader* header() { return region_.at<RegionHeader>(0); }
  RequestEntry* entry(uint32_t i) { return region_.at<RequestEntry>(header()->entries_offset) + (i % kRingEntries); }
  uint32_t* head() { return region_.at<uint32_t>(header()->producer_offset); }

  // Writes the next entry as given, publishes it, sets its hint and rings
  // the doorbell, as rtaccel_submit does.
  uint32_t submit(const RequestEntry& fields) {
    const uint32_t index = *head();
    RequestEntry* e = entry(index);
    const uint32_t state = entry_next_submit(e->state);
    RequestEntry copy = fields;
    copy.state = state;
    *e = copy;
    __atomic_store_n(head(), index + 1, __ATOMIC_SEQ_CST);
    if (const uint32_t slot = header()->hint_slot; slot < kHintSlots)
      __atomic_fetch_or(&doorbell()->hints[slot / 64], uint64_t(1) << (slot % 64), __ATOMIC_RELEASE);
    ring();
    return index;
  }
  DoorbellPage* doorbell() { return doorbell_.at<DoorbellPage>(0); }
  void ring() {
    const uint32_t b = header()->bucket;
    auto* db = doorbell();
    __atomic_fetch_add(&db->bucket[b].seq, 1, __ATOMIC_SEQ_CST);
    futex_wake(&db->bucket[b].seq, INT_MAX, true);
  }
  // Status of the request on `index` once done, or 1 if it never completes.
  int wait_done(uint32_t index, uint64_t timeout_ns) {
    const uint64_t until = core::monotonic_ns() + timeout_ns;
    while (core::monotonic_ns() < until) {
      if (entry_phase(__atomic_load_n(&entry(index)->state, __ATOMIC_ACQUIRE)) == kDone) return entry(index)->status;
      usleep(200);
    }
    return 1;
  }
  bool status_writable() const { return status_writable_; }
  bool shrinkable() const { return shrinkable_; }
  int region_fd() const { return region_fd_.get(); }  // the last registration's
  uint64_t callback_id() { return header()->callback_id; }

 private:
  core::UniqueFd fd_;
  core::UniqueFd region_fd_;  // kept as a client may keep it
  bool connected_ = false;
  core::Mapping region_, doorbell_, status_;
  bool status_writable_ = false;
  bool shrinkable_ = false;
};

// --- client processes that end, and what they leave -----------------------------

// For a process that outlives its parent on purpose: ends once the test
// process TEST has, or after 30 s, whichever comes first, so that a test
// that fails before it ends the process leaves nothing behind for long.
[[noreturn]] inline void live_while(pid_t test) {
  for (int i = 0; i < 3000 && kill(test, 0) == 0; i++) usleep(10000);
  _exit(0);
}

// A check run in a client's process: true where it holds.
using ClientCheck = bool (*)(rtaccel_client* c, rtaccel_registration* r);

// The child a client's process left running: killed as the test ends.
struct LeftChild {
  pid_t pid = -1;
  ~LeftChild() {
    if (pid > 0) kill(pid, SIGKILL);
  }
};

// A client's process that registers chain NAME at ADDRESS and forks: the
// child runs IN_CHILD, then the parent AFTER (each may be null), and the
// parent ends without a word while the child lives on. The child's pid, or
// -1 where a step failed; *STATUS is the parent's wait status.
inline pid_t client_that_ends_leaving_a_child(const char* address, const char* name, ClientCheck in_child,
                                              ClientCheck after, int* status) {
  int left[2], checked[2];
  if (pipe(left)) return -1;
  if (pipe(checked)) {
    close(left[0]);
    close(left[1]);
    return -1;
  }
  const pid_t test = getpid();
  const pid_t parent = fork();
  if (parent == 0) {
    rtaccel_client* c = nullptr;
    rtaccel_registration* r = nullptr;
    if (rtaccel_client_connect(address, &c) || register_desc(c, busy_chain(name, 5), &r, nullptr, 0)) _exit(1);
    const pid_t child = fork();
    if (child == 0) {
      const char held = !in_child || in_child(c, r);
      if (write(checked[1], &held, 1) != 1) _exit(1);
      live_while(test);
    }
    char held = 0;
    if (read(checked[0], &held, 1) != 1 || !held) _exit(2);
    if (after && !after(c, r)) _exit(3);
    if (write(left[1], &child, sizeof(child)) != ssize_t(sizeof(child))) _exit(1);
    _exit(0);  // without closing the client, as a process that dies
  }
  close(left[1]);
  close(checked[0]);
  close(checked[1]);
  pid_t child = -1;
  const bool got = read(left[0], &child, sizeof(child)) == ssize_t(sizeof(child));
  close(left[0]);
  waitpid(parent, status, 0);
  return got && WIFEXITED(*status) && WEXITSTATUS(*status) == 0 ? child : -1;
}

// --- watching the server from outside -------------------------------------------

// CPU time PID has had so far.
inline uint64_t cpu_ns_of(pid_t pid) {
  clockid_t clock;
  timespec ts{};
  if (clock_getcpuclockid(pid, &clock) || clock_gettime(clock, &ts)) return 0;
  return uint64_t(ts.tv_sec) * kSecond + uint64_t(ts.tv_nsec);
}

// Registers BUSY_CHAIN(NAME) from a process of its own, bounded in time:
// the registration's status, or -ETIMEDOUT where it did not come back in
// 10 s (the process is then killed). WHY gets the server's reason.
inline int register_elsewhere(const ServerProcess& server, const std::string& name, std::string* why) {
  int answer[2];
  if (pipe(answer)) return -errno;
  const pid_t child = fork();
  if (child == 0) {
    char reason[256] = "";
    rtaccel_client* c = nullptr;
    rtaccel_registration* r = nullptr;
    int err = rtaccel_client_connect(server.socket(), &c);
    if (!err) err = register_desc(c, busy_chain(name, 5), &r, reason, sizeof(reason));
    const bool said = write(answer[1], &err, sizeof(err)) == ssize_t(sizeof(err)) &&
                      write(answer[1], reason, sizeof(reason)) == ssize_t(sizeof(reason));
    _exit(said ? 0 : 1);
  }
  close(answer[1]);
  int err = -ETIMEDOUT;
  char reason[256] = "";
  pollfd p{answer[0], POLLIN, 0};
  if (poll(&p, 1, 10000) == 1 && read(answer[0], &err, sizeof(err)) == ssize_t(sizeof(err)) &&
      read(answer[0], reason, sizeof(reason)) == ssize_t(sizeof(reason)))
    *why = std::string(reason, strnlen(reason, sizeof(reason)));
  close(answer[0]);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return err;
}

inline size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
  return n;
}

// --- a server with a gateway (--listen) -------------------------------------------

// A port on 127.0.0.1 that nothing listens on now.
inline int free_port() {
  core::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) < 0)
    return -1;
  return ntohs(a.sin_port);
}

// A server with a gateway on 127.0.0.1 and a policy file.
struct RemoteServer {
  std::string policy_path;
  std::string address;
  std::unique_ptr<ServerProcess> server;
  // DEVICE: the backend and device options (the cpu backend's by default).
  explicit RemoteServer(const std::string& policy, std::vector<std::string> extra = {}, bool keep_log = false,
                        std::vector<std::string> device = cpu_args()) {
    static int counter = 0;
    policy_path = "/tmp/rtaccel-test-policy-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".yaml";
    std::ofstream(policy_path) << policy;
    address = "tcp:127.0.0.1:" + std::to_string(free_port());
    std::vector<std::string> args = std::move(device);
    for (const std::string& a : {std::string("--policy"), policy_path, std::string("--listen"), address})
      args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    server = std::make_unique<ServerProcess>(args, keep_log);
  }
  ~RemoteServer() { unlink(policy_path.c_str()); }
};

}  // namespace rtaccel::accel::server_test

#endif  // RTACCEL_TESTS_ACCEL_SERVER_TEST_H_
