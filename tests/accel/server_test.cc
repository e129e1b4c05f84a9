// End-to-end tests of rtaccel-server: each test starts the real server binary
// on a private socket and talks to it through the client library, or by hand
// (RawClient) where a test must break the protocol.
//
// Timing assertions compare against the bad case with wide margins (a dropped
// request queue against one that was not dropped, preemption against waiting
// for a 200 ms kernel), never against absolute latencies.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "accel/protocol.h"
#include "accel/remote.h"
#include "accel/test_descs.h"
#include "core/cgroup.h"
#include "core/clock.h"
#include "core/daemon.h"
#include "core/fd.h"
#include "core/futex.h"
#include "core/procfs.h"
#include "rtaccel/accel.h"
#include "rtaccel/net.h"
#include "rtaccel/requests.h"
#include "../harness/skip.h"

// Skips the test for want of NEED (tests/harness/skip.h), or fails it where
// RTACCEL_TEST_REQUIRE says this machine has NEED.
#define SKIP_WITHOUT(need, why)                                                          \
  do {                                                                                   \
    if (test_required(need)) GTEST_FAIL() << "required " << (need) << ": " << why;      \
    GTEST_SKIP() << "needs " << (need) << ": " << why;                                   \
  } while (0)

namespace rtaccel::accel {
namespace {

using test::CallbackSpec;
using test::one_callback;

constexpr uint64_t kMs = 1000000;
constexpr uint64_t kSecond = 1000000000;

int register_desc(rtaccel_client* c, const rtaccel_registration_desc& d, rtaccel_registration** r,
                  char* why, size_t why_len) {
  return rtaccel_client_register(c, &d, r, why, why_len);
}

// --- the server process --------------------------------------------------------

// The server beside the build, or in RTACCEL_LIB_DIR (the GPU campaign runs
// these tests from a bundle, away from the build that made them).
std::string server_bin() {
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
std::vector<std::string> cpu_args(std::vector<std::string> extra = {}) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<std::string> a = {"--device", std::to_string(cores > 1 ? 1 : 0)};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Clients never run on the device core (nor do executors in a real system):
// a client placed there would wait behind the SCHED_FIFO worker it talks to.
class KeepOffTheDeviceCore : public ::testing::Environment {
 public:
  void SetUp() override {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 2) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (long c = 0; c < cores; c++)
      if (c != 1) CPU_SET(int(c), &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
};
const auto* const keep_off = ::testing::AddGlobalTestEnvironment(new KeepOffTheDeviceCore);

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

rtaccel_registration_desc busy_chain(const std::string& name, int priority, uint64_t wcet_ns = kMs,
                                     rtaccel_wait_mode wait = RTACCEL_WAIT_SUSPEND) {
  CallbackSpec cb{.name = name + "-cb", .executor = name + "-ex", .core = 0, .wcet_ns = wcet_ns, .wait = wait};
  return one_callback(name, priority, 10 * kSecond, cb, 64, 64, /*critical=*/false);
}

int submit_busy(rtaccel_registration* r, uint64_t ns, rtaccel_ticket* t) {
  const int s = rtaccel_service_index(r, "busy");
  auto* req = static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(r, s, nullptr));
  req->ns = ns;
  return rtaccel_submit(r, s, sizeof(*req), t);
}

rtaccel_request_times times_of(rtaccel_registration* r, const rtaccel_ticket& t) {
  rtaccel_request_times times;
  rtaccel_request_timestamps(r, &t, &times);
  return times;
}

// Waits until the server has started the ticket's request (it left "submitted").
bool wait_started(rtaccel_registration* r, const rtaccel_ticket& t) {
  for (int i = 0; i < 5000; i++) {
    const rtaccel_request_times times = times_of(r, t);
    if (times.start_ns >= times.submit_ns) return true;
    usleep(1000);
  }
  return false;
}

// The bytes a file holds (its blocks, not its size).
uint64_t bytes_in(int fd) {
  struct stat st{};
  return fstat(fd, &st) == 0 ? uint64_t(st.st_blocks) * 512 : UINT64_MAX;
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

// --- tests -----------------------------------------------------------------------

TEST(Server, ListsItsBackends) {
  FILE* p = popen((server_bin() + " --list-backends").c_str(), "r");
  ASSERT_TRUE(p);
  char buf[4096] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  EXPECT_EQ(pclose(p), 0);
  std::string out(buf, n);
  EXPECT_NE(out.find("cpu      device found"), std::string::npos) << out;
  EXPECT_NE(out.find("opencl"), std::string::npos) << out;
}

TEST(Server, BadArgumentsAreRefusedClearly) {
  FILE* p = popen((server_bin() + " --levels 0 2>&1").c_str(), "r");
  char buf[4096] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(std::string(buf, n).find("bad --levels"), std::string::npos);
  // A device that does not exist is bad input too (2), not a failure (3).
  p = popen((server_bin() + " --socket /tmp/rtaccel-x.sock --device 4000 2>&1").c_str(), "r");
  n = fread(buf, 1, sizeof(buf) - 1, p);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(std::string(buf, n).find("core 4000 does not exist"), std::string::npos) << std::string(buf, n);
  // Buckets that one in-order queue could not let preempt each other.
  p = popen((server_bin() + " --socket /tmp/rtaccel-x.sock --levels 4 --backend opencl 2>&1").c_str(), "r");
  n = fread(buf, 1, sizeof(buf) - 1, p);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(std::string(buf, n).find("bad --levels for the opencl backend (one queue: 1) '4'"), std::string::npos)
      << std::string(buf, n);
}

// The server replaces a socket file a dead server left, and deleted any
// other file given for its socket (as root, a policy file named by
// mistake, /etc/passwd). It refuses such a path and leaves the file, and at
// its end removes its own socket only, not one another server put there.
TEST(Server, ASocketPathThatIsNotASocketIsRefusedAndLeftAlone) {
  const std::string base = "/tmp/rtaccel-test-" + std::to_string(getpid()) + "-notasocket";
  std::ofstream(base + ".txt") << "precious\n";
  mkdir((base + ".d").c_str(), 0755);
  for (const std::string& path : {base + ".txt", base + ".d"}) {
    // (bounded: a server that took the path would listen on it for ever)
    const std::string command =
        "timeout 10 " + server_bin() + " " + cpu_args()[0] + " " + cpu_args()[1] + " --socket " + path + " 2>&1";
    FILE* p = popen(command.c_str(), "r");
    char buf[4096] = {};
    const size_t n = fread(buf, 1, sizeof(buf) - 1, p);
    EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
    EXPECT_NE(std::string(buf, n).find(path + ": exists and is not a socket; give another --socket"),
              std::string::npos)
        << std::string(buf, n);
  }
  std::string kept;
  std::getline(std::ifstream(base + ".txt"), kept);
  EXPECT_EQ(kept, "precious");
  struct stat st {};
  EXPECT_TRUE(stat((base + ".d").c_str(), &st) == 0 && S_ISDIR(st.st_mode));
  unlink((base + ".txt").c_str());
  rmdir((base + ".d").c_str());

  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  // Another server's socket in its place (as one started when this one did
  // not answer would leave it).
  ASSERT_EQ(unlink(server.socket()), 0);
  core::UniqueFd other(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", server.socket());
  ASSERT_EQ(bind(other.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(access(server.socket(), F_OK), 0) << "the server removed the socket another put there";
}

// A user without root started the server with the default socket, in
// /run/rtaccel, which only root may make: it said "/run/rtaccel/server.sock:
// No such file or directory". It says what it could not make, and where a
// socket of this user's goes.
TEST(Server, AUserWhoMayNotWriteTheSocketsFolderIsToldWhereToPutIt) {
  // Root without the power to write what is not writable (the folder is
  // 0555): as another user would be, with the build still readable to it.
  if (geteuid() != 0) SKIP_WITHOUT("root", "the server is run as root stripped of CAP_DAC_OVERRIDE");
  const std::string folder = "/tmp/rtaccel-test-" + std::to_string(getpid()) + "-unwritable";
  ASSERT_EQ(mkdir(folder.c_str(), 0555), 0);
  const std::string hint = "give --socket a path in a folder this user may write, such as $XDG_RUNTIME_DIR/rtaccel.sock";
  for (const std::string& socket : {folder + "/s.sock", folder + "/sub/s.sock"}) {
    const std::string command = "timeout 10 setpriv --inh-caps=-all --bounding-set=-dac_override,-dac_read_search -- " +
                                server_bin() + " --no-fifo " + cpu_args()[0] + " " + cpu_args()[1] + " --socket " +
                                socket + " 2>&1";
    FILE* p = popen(command.c_str(), "r");
    char buf[4096] = {};
    const std::string said(buf, fread(buf, 1, sizeof(buf) - 1, p));
    EXPECT_EQ(WEXITSTATUS(pclose(p)), 3) << said;
    EXPECT_NE(said.find(socket.ends_with("sub/s.sock")
                            ? "cannot make the socket's folder " + folder + "/sub: Permission denied; " + hint
                            : socket + ": Permission denied; " + hint),
              std::string::npos)
        << said;
  }
  rmdir(folder.c_str());
}

// The server locks its memory, and with it every page of each worker's
// stack: 23 workers on the default 8 MiB stacks kept 184 MiB resident.
TEST(Server, ItsWorkersStacksAreSizedNotTheDefaultAndSayWhatTheyUsed) {
  if (geteuid() != 0) SKIP_WITHOUT("root", "the server locks its memory (and so its stacks) only where allowed");
  const std::vector<std::string> many = {"--levels", "8", "--lowest-workers", "16"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), many.begin(), many.end());
    return cpu_args(extra);
  };
  long rss_default = 0, rss_8mib = 0;
  std::string log;
  {
    ServerProcess server(with({}), /*keep_log=*/true);
    ASSERT_TRUE(server.ready());
    Client client(server);  // one request, so that a worker ran a service
    rtaccel_registration* r = client.reg(busy_chain("stack", 90, kMs));
    ASSERT_TRUE(r);
    const int s = rtaccel_service_index(r, "busy");
    static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(r, s, nullptr))->ns = 100000;
    size_t len = 0;
    ASSERT_EQ(rtaccel_call(r, s, sizeof(rtaccel_busy_request), 5 * kSecond, &len), 0);
    rss_default = server.rss_kb();
    ASSERT_EQ(server.stop(), 0);
    log = server.log();
  }
  // Each worker says, as it ends, what it used of its stack: the built-in
  // services a few dozen KiB of 1024.
  std::istringstream in(log);
  size_t said = 0;
  for (std::string line; std::getline(in, line);) {
    unsigned used = 0, size = 0;
    const size_t at = line.find("a worker used ");
    if (at == std::string::npos || sscanf(line.c_str() + at, "a worker used %u of its %u KiB", &used, &size) != 2)
      continue;
    ++said;
    EXPECT_EQ(size, 1024u) << line;
    EXPECT_GT(used, 0u) << line;
    EXPECT_LT(used, 128u) << line;
  }
  EXPECT_EQ(said, 23u);
  {
    ServerProcess server(with({"--worker-stack-kib", "8192"}));
    ASSERT_TRUE(server.ready());
    rss_8mib = server.rss_kb();
  }
  // The stacks, not the rest (the locked binary alone is some 20 MiB under
  // AddressSanitizer, and grows with the code): 8 MiB stacks hold 7 MiB more
  // each than the default's.
  EXPECT_GE(rss_8mib, 23 * 8192) << rss_default;
  EXPECT_GE(rss_8mib - rss_default, 23 * (8192 - 1024) * 9 / 10) << rss_default << " " << rss_8mib;
  // Too small a stack is refused before any thread runs on it.
  FILE* p = popen((server_bin() + " --worker-stack-kib 16 2>&1").c_str(), "r");
  char buf[4096] = {};
  const size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(std::string(buf, n).find("bad --worker-stack-kib (64..65536)"), std::string::npos) << buf;
}

TEST(Server, PluginServicesAreOffered) {
  ServerProcess server(cpu_args({"--plugin", RTACCEL_PLUGIN}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  CallbackSpec cb{.name = "scaler", .service = "scale"};
  rtaccel_registration* r = client.reg(one_callback("plugin", 10, kSecond, cb, 8 + 16 * 4, 16 * 4, false));
  ASSERT_TRUE(r);
  const int s = rtaccel_service_index(r, "scale");
  auto* req = static_cast<uint32_t*>(rtaccel_request_buffer(r, s, nullptr));
  req[0] = 16;
  float factor = 2.5f;
  memcpy(&req[1], &factor, 4);
  float* x = reinterpret_cast<float*>(req + 2);
  for (int i = 0; i < 16; i++) x[i] = float(i);
  size_t len;
  ASSERT_EQ(rtaccel_call(r, s, 8 + 16 * 4, 5 * kSecond, &len), 0);
  const float* y = static_cast<const float*>(rtaccel_response_buffer(r, s, nullptr));
  for (int i = 0; i < 16; i++) EXPECT_EQ(y[i], 2.5f * float(i));
  // A service the server does not have is refused at registration.
  CallbackSpec unknown{.name = "u", .service = "fft"};
  rtaccel_registration* bad = nullptr;
  char why[256];
  EXPECT_EQ(register_desc(client.c, one_callback("nope", 10, kSecond, unknown), &bad, why, sizeof(why)), -ENOENT);
  EXPECT_NE(std::string(why).find("service 'fft'"), std::string::npos) << why;
}

// One bucket: requests wait in chain-priority order, FIFO among equals.
TEST(Server, OneBucketServesByPriorityThenArrival) {
  ServerProcess server(cpu_args({"--levels", "1"}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  rtaccel_registration* blocker = client.reg(busy_chain("blocker", 1, 100 * kMs));
  rtaccel_registration* a = client.reg(busy_chain("a", 5));
  rtaccel_registration* b = client.reg(busy_chain("b", 9));
  rtaccel_registration* c = client.reg(busy_chain("c", 9));
  rtaccel_registration* low = client.reg(busy_chain("low", 1));
  ASSERT_TRUE(blocker && a && b && c && low);
  rtaccel_ticket tb, t[4];
  ASSERT_EQ(submit_busy(blocker, 100 * kMs, &tb), 0);
  ASSERT_TRUE(wait_started(blocker, tb));
  rtaccel_registration* order[] = {low, a, b, c};  // submission order
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(submit_busy(order[i], 1 * kMs, &t[i]), 0);
    usleep(2000);  // distinct arrivals
  }
  for (int i = 0; i < 4; i++) ASSERT_EQ(rtaccel_wait(order[i], &t[i], 10 * kSecond, nullptr), 0);
  ASSERT_EQ(rtaccel_wait(blocker, &tb, 10 * kSecond, nullptr), 0);
  const uint64_t s_low = times_of(low, t[0]).start_ns, s_a = times_of(a, t[1]).start_ns,
                 s_b = times_of(b, t[2]).start_ns, s_c = times_of(c, t[3]).start_ns;
  EXPECT_LT(s_b, s_c);  // equal priority: first come first served
  EXPECT_LT(s_c, s_a);  // 9 before 5
  EXPECT_LT(s_a, s_low);  // 5 before 1, although 1 came first
  EXPECT_GE(s_b, times_of(blocker, tb).end_ns);  // non-preemptive inside a bucket
}

// The higher bucket's worker then sleeps, however long it would otherwise
// poll: polling at its priority kept the preempted kernel off the device
// core for the whole poll (200 ms here), and again after each of its 50 ms
// sleeps. The poll stays well under the kernel's real-time budget
// (sched_rt_runtime_us, 950 ms a second): the workers' first polls at a
// second each used it up, and throttling stopped the low kernel for
// hundreds of milliseconds under load.
TEST(Server, HigherBucketPreemptsALowerOne) {
  constexpr uint64_t kPollNs = 200 * kMs;
  ServerProcess server(cpu_args({"--levels", "2", "--poll-us", std::to_string(kPollNs / 1000)}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  rtaccel_registration* low = client.reg(busy_chain("low", 1, 200 * kMs));
  rtaccel_registration* high = client.reg(busy_chain("high", 9));
  ASSERT_TRUE(low && high);
  rtaccel_registration_info li, hi;
  rtaccel_registration_query(low, &li);
  rtaccel_registration_query(high, &hi);
  ASSERT_EQ(li.bucket, 0u);
  ASSERT_EQ(hi.bucket, 1u);
  rtaccel_ticket tl, th;
  ASSERT_EQ(submit_busy(low, 200 * kMs, &tl), 0);
  ASSERT_TRUE(wait_started(low, tl));
  ASSERT_EQ(submit_busy(high, 1 * kMs, &th), 0);
  ASSERT_EQ(rtaccel_wait(high, &th, 10 * kSecond, nullptr), 0);
  ASSERT_EQ(rtaccel_wait(low, &tl, 10 * kSecond, nullptr), 0);
  const rtaccel_request_times h = times_of(high, th), l = times_of(low, tl);
  // It did not wait for the 200 ms kernel: it ended first, and took less
  // than half the time that waiting would have taken (a host stall lengthens
  // both alike).
  EXPECT_LT(h.end_ns, l.end_ns);
  EXPECT_LT(h.end_ns - h.submit_ns, (l.end_ns - h.submit_ns) / 2);
  // 201 ms of kernels; the polls would have made it about a second.
  EXPECT_LT(l.end_ns - l.start_ns, 200 * kMs + kPollNs);
}

// A region's bucket follows the admitted chains: a higher chain admitted
// moves a lower chain's region down, a registration to a chain admitted
// already moves nothing and takes its own place, and the higher chain's end
// moves the lower region back. The server keeps a device's placements while
// the admitted set is the same; each check here is one it must not keep.
TEST(Server, RegionsFollowTheAdmittedChainsBetweenBuckets) {
  ServerProcess server(cpu_args({"--levels", "4"}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  auto bucket = [](rtaccel_registration* r) {
    rtaccel_registration_info info;
    rtaccel_registration_query(r, &info);
    return info.bucket;
  };
  // The server reads a connection's messages in order: a refused
  // registration's reply comes after it has read what was sent before.
  auto settled = [&](const rtaccel_registration_desc& d) {
    rtaccel_registration* r = nullptr;
    char why[256] = "";
    EXPECT_EQ(register_desc(client.c, d, &r, why, sizeof(why)), -EEXIST) << why;
  };
  rtaccel_registration* low = client.reg(busy_chain("low", 1));
  ASSERT_TRUE(low);
  EXPECT_EQ(bucket(low), 3u);  // the one priority: the top bucket of four

  // Priorities 1 and 9 on four levels: 9 on top, 1 in bucket 1.
  rtaccel_registration_desc high = busy_chain("high", 9);
  high.chain.ncallbacks = 2;
  high.chain.callbacks[1] = high.chain.callbacks[0];
  snprintf(high.chain.callbacks[1].name, sizeof(high.chain.callbacks[1].name), "high-cb2");
  rtaccel_registration* first = client.reg(high);
  ASSERT_TRUE(first);
  EXPECT_EQ(bucket(first), 3u);
  EXPECT_EQ(bucket(low), 1u);
  high.callback = 1;
  rtaccel_registration* second = client.reg(high);
  ASSERT_TRUE(second);
  EXPECT_EQ(bucket(second), 3u) << "a registration to an admitted chain was left where it began";
  EXPECT_EQ(bucket(low), 1u);

  // One of the chain's two gone: still admitted, nothing moves.
  rtaccel_client_unregister(first);
  settled(high);
  EXPECT_EQ(bucket(low), 1u);
  EXPECT_EQ(bucket(second), 3u);
  // The other: the chain is let go of, and the low region goes back up.
  rtaccel_client_unregister(second);
  settled(busy_chain("low", 1));
  EXPECT_EQ(bucket(low), 3u) << "the lower region stayed where the higher chain had put it";
}

// A client may write the doorbell page as it likes. Taking the others'
// hints away delays their requests, by at most kUntrustedPageBoundNs: the
// workers look at every registration that often. Here the hint is wiped
// while the server stands still, so that only that look can find the
// request.
TEST(Server, ARequestWhoseHintAClientWipedIsServedWithinTheBound) {
  ServerProcess server(cpu_args({"--poll-us", "0"}));
  ASSERT_TRUE(server.ready());
  Client victim(server);
  rtaccel_registration* r = victim.reg(busy_chain("victim", 10));
  ASSERT_TRUE(r);
  RawClient hostile(server.socket());
  RegisterReply reply;
  ASSERT_EQ(hostile.register_desc(busy_chain("hostile", 5), &reply), 0) << reply.message;
  const int s = rtaccel_service_index(r, "busy");
  static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(r, s, nullptr))->ns = 100000;
  for (int round = 0; round < 3; round++) {
    ASSERT_EQ(kill(server.pid(), SIGSTOP), 0);
    // Whichever way this round ends, the server goes on: a failed check
    // must not leave it stopped for its SIGTERM to wait out.
    struct Resume {
      pid_t pid;
      ~Resume() { kill(pid, SIGCONT); }
    } resume{server.pid()};
    const uint64_t asked = core::monotonic_ns();
    while (server.state() != 'T' && core::monotonic_ns() - asked < 10 * kSecond) usleep(1000);
    ASSERT_EQ(server.state(), 'T');
    rtaccel_ticket t{};
    ASSERT_EQ(rtaccel_submit(r, s, sizeof(rtaccel_busy_request), &t), 0);
    DoorbellPage* db = hostile.doorbell();
    uint64_t hints = 0;
    for (uint64_t& w : db->hints) hints |= __atomic_exchange_n(&w, 0, __ATOMIC_SEQ_CST);
    ASSERT_NE(hints, 0u) << "the client set no hint";
    const uint64_t resumed = core::monotonic_ns();
    ASSERT_EQ(kill(server.pid(), SIGCONT), 0);
    ASSERT_EQ(rtaccel_wait(r, &t, 5 * kSecond, nullptr), 0) << "round " << round << ": the request was lost";
    // The bound, and room for this machine's stalls; a lost request would
    // have waited for the 5 s.
    EXPECT_LT(core::monotonic_ns() - resumed, kUntrustedPageBoundNs + 950 * kMs) << round;
  }
}

// The registrations past a device's hint slots have none, and are looked
// at whenever a worker looks for work: their requests wait for no look at
// every registration.
TEST(Server, RegistrationsPastTheHintSlotsAreServedAtOnce) {
  ServerProcess server(cpu_args({"--poll-us", "0"}));
  ASSERT_TRUE(server.ready());
  Client holder(server);
  constexpr uint32_t kPerChain = RTACCEL_MAX_CALLBACKS;
  for (uint32_t i = 0; i < kHintSlots; i++) {
    const std::string chain = "slots-" + std::to_string(i / kPerChain);
    rtaccel_registration_desc d = one_callback(chain, 1, 100 * kSecond, CallbackSpec{.name = chain}, 64, 64,
                                               /*critical=*/false);
    d.chain.ncallbacks = kPerChain;
    for (uint32_t k = 0; k < kPerChain; k++)
      test::set_callback(&d.chain.callbacks[k], CallbackSpec{.name = chain + "-" + std::to_string(k),
                                                             .executor = "slots-ex", .cpu_ns = 1000, .wcet_ns = 1000});
    d.callback = i % kPerChain;
    ASSERT_TRUE(holder.reg(d)) << i;
  }
  RawClient past(server.socket());
  RegisterReply reply;
  ASSERT_EQ(past.register_desc(busy_chain("past", 2), &reply), 0) << reply.message;
  EXPECT_EQ(past.header()->hint_slot, kNoHintSlot);
  Client client(server);
  rtaccel_registration* r = client.reg(busy_chain("past-too", 3));
  ASSERT_TRUE(r);
  const int s = rtaccel_service_index(r, "busy");
  static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(r, s, nullptr))->ns = 10000;
  // A hundred calls, the worker asleep before each: some 20 ms in all here.
  // Found only by the looks at every registration, they would take about
  // half the bound each, some 2.5 s.
  const uint64_t start = core::monotonic_ns();
  for (int i = 0; i < 100; i++) {
    usleep(500);
    size_t len = 0;
    ASSERT_EQ(rtaccel_call(r, s, sizeof(rtaccel_busy_request), 5 * kSecond, &len), 0) << i;
  }
  EXPECT_LT(core::monotonic_ns() - start, 1250 * kMs);
}

TEST(Server, RefusesForgedRequestsAndKeepsServingOthers) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  Client client(server);
  CallbackSpec vb{.name = "honest", .service = "vecadd"};
  rtaccel_registration* honest = client.reg(one_callback("honest", 5, kSecond, vb, 8 + 2 * 16 * 4, 16 * 4, false));
  ASSERT_TRUE(honest);
  rtaccel_registration_info hinfo;
  rtaccel_registration_query(honest, &hinfo);

  RawClient raw(server.socket());
  ASSERT_TRUE(raw.connected());
  RegisterReply reply{};
  auto rd = one_callback("raw", 5, kSecond, {.name = "raw-cb", .service = "vecadd"}, 8 + 2 * 16 * 4, 16 * 4, false);
  ASSERT_EQ(raw.register_desc(rd, &reply), 0) << reply.message;
  EXPECT_FALSE(raw.status_writable());  // the wake-up flags are sealed
  EXPECT_FALSE(raw.shrinkable());       // so is the region's size

  const ServiceArea area = raw.header()->services[0];
  RequestEntry good{};
  good.callback_id = reply.info.callback_id;
  good.service = 0;
  good.request_offset = area.request_offset;
  good.request_len = 8;  // n = 0 is a valid empty request
  good.response_offset = area.response_offset;
  good.response_cap = area.response_max;
  memset(reinterpret_cast<char*>(raw.header()) + area.request_offset, 0, 8);
  EXPECT_EQ(raw.wait_done(raw.submit(good), 5 * kSecond), 0);

  auto check_refused = [&](const RequestEntry& forged, const char* what) {
    EXPECT_EQ(raw.wait_done(raw.submit(forged), 5 * kSecond), -EINVAL) << what;
    // The honest client is still served, correctly.
    const int s = rtaccel_service_index(honest, "vecadd");
    auto* v = static_cast<rtaccel_vector_request*>(rtaccel_request_buffer(honest, s, nullptr));
    v->n = 16;
    float* x = reinterpret_cast<float*>(v + 1);
    for (int i = 0; i < 32; i++) x[i] = float(i);
    size_t len;
    ASSERT_EQ(rtaccel_call(honest, s, 8 + 32 * 4, 5 * kSecond, &len), 0) << what;
    EXPECT_EQ(static_cast<const float*>(rtaccel_response_buffer(honest, s, nullptr))[3], 3.0f + 19.0f);
  };
  RequestEntry f = good;
  f.callback_id = hinfo.callback_id;  // another client's id
  check_refused(f, "another client's id");
  f = good;
  f.callback_id = 999999;
  check_refused(f, "unknown id");
  f = good;
  f.service = 5;
  check_refused(f, "service index");
  f = good;
  f.request_offset = 0;  // the region's header
  check_refused(f, "request over the header");
  f = good;
  f.request_len = area.request_max + 64;
  check_refused(f, "request past its buffer");
  f = good;
  f.response_offset = area.request_offset;
  check_refused(f, "response over the request");
  f = good;
  f.response_cap = 0xffffffffu;
  check_refused(f, "response past the region");
  f = good;
  f.request_offset += 4;
  check_refused(f, "misaligned");
  // A producer index that jumps past the ring: the raw client's requests are
  // ignored from then on, the honest one is still served.
  __atomic_fetch_add(raw.head(), 1000u, __ATOMIC_SEQ_CST);
  raw.ring();
  usleep(20000);
  size_t len;
  const int s = rtaccel_service_index(honest, "vecadd");
  EXPECT_EQ(rtaccel_call(honest, s, 8 + 32 * 4, 5 * kSecond, &len), 0);
}

TEST(Server, MalformedRegistrationsGetAnErrorAndTheServerCarriesOn) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  std::mt19937 rng(7);
  for (size_t len : {size_t(1), size_t(12), size_t(24), sizeof(RegisterRequest) - 1, sizeof(RegisterRequest),
                     sizeof(RegisterRequest) + 1, size_t(20000)}) {
    RawClient raw(server.socket());
    ASSERT_TRUE(raw.connected());
    std::vector<uint8_t> junk(len);
    for (auto& b : junk) b = uint8_t(rng());
    RegisterReply reply{};
    EXPECT_EQ(raw.exchange(junk.data(), junk.size(), &reply), -EINVAL) << len << " bytes";
    reply.message[sizeof(reply.message) - 1] = 0;
    EXPECT_GT(strlen(reply.message), 0u) << len;
  }
  // A well-formed header around a hostile description.
  RawClient raw(server.socket());
  auto d = busy_chain("x", 1);
  d.chain.ncallbacks = 1000;
  RegisterReply reply{};
  EXPECT_EQ(raw.register_desc(d, &reply), -EINVAL);
  EXPECT_NE(std::string(reply.message).find("callbacks"), std::string::npos) << reply.message;
  // And an unregister of an id that is not the client's is ignored.
  UnregisterRequest u{kMagic, kProtocolVersion, uint32_t(MessageType::kUnregister), 0, 12345};
  EXPECT_GT(raw.send_bytes(&u, sizeof(u)), 0);
  Client client(server);
  EXPECT_TRUE(client.reg(busy_chain("after", 1)));
}

// A client and a server of two rtaccel versions: the registration is
// refused naming both versions, not as a malformed reply.
TEST(Server, AServerOfAnotherProtocolVersionIsNamedAsSuch) {
  const std::string path = "/tmp/rtaccel-test-" + std::to_string(getpid()) + "-other-version.sock";
  unlink(path.c_str());
  core::UniqueFd listener(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(listener.get(), 1), 0);
  std::thread other([&] {
    core::UniqueFd peer(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    RegisterRequest m;
    if (recv(peer.get(), &m, sizeof(m), 0) <= 0) return;
    RegisterReply r{};
    r.magic = kMagic;
    r.version = kProtocolVersion - 1;
    send(peer.get(), &r, sizeof(r), MSG_NOSIGNAL);
  });
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(path.c_str(), &c), 0);
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  EXPECT_EQ(register_desc(c, busy_chain("versions", 1), &r, why, sizeof(why)), -EPROTONOSUPPORT) << why;
  EXPECT_NE(std::string(why).find("protocol version " + std::to_string(kProtocolVersion - 1) +
                                  " and this client " + std::to_string(kProtocolVersion)),
            std::string::npos)
      << why;
  other.join();
  rtaccel_client_close(c);
  unlink(path.c_str());
}

TEST(Server, PolicyDecidesWhoMayRegisterWhichPriority) {
  char path[] = "/tmp/rtaccel-policy-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "allow:\n  - {uid: " + std::to_string(getuid()) + ", priorities: [0, 5]}\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), ssize_t(text.size()));
  close(fd);
  ServerProcess server(cpu_args({"--policy", path}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  rtaccel_registration* r = nullptr;
  char why[256];
  EXPECT_EQ(register_desc(client.c, busy_chain("too-high", 10), &r, why, sizeof(why)), -EPERM);
  EXPECT_NE(std::string(why).find("0..5 only, not 10"), std::string::npos) << why;
  EXPECT_EQ(register_desc(client.c, busy_chain("fine", 5), &r, why, sizeof(why)), 0) << why;
  unlink(path);
}

// A chain through a fusion is admitted with what feeds it, declared by a
// process that registers nothing (as `rtaccel run` declares a workload's
// chains); the declared chains stay until that client goes.
TEST(Server, DeclaredChainsAreAdmittedTogetherAndGoWithTheirClient) {
  ServerProcess server(cpu_args({"--epsilon-us", "50", "--kappa-us", "50"}));
  ASSERT_TRUE(server.ready());
  const test::FusionPair p = test::fusion_pair(100 * kMs, 20 * kMs);
  Client registering(server);
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  EXPECT_EQ(register_desc(registering.c, test::registration_of(p.front, 1), &r, why, sizeof(why)), -EDEADLK);
  EXPECT_NE(std::string(why).find("waits at 'fusion' for 'Rear'"), std::string::npos) << why;
  auto declaring = std::make_unique<Client>(server);
  const rtaccel_chain_desc both[] = {p.front, p.rear};
  ASSERT_EQ(rtaccel_client_declare(declaring->c, both, 2, why, sizeof(why)), 0) << why;
  EXPECT_EQ(rtaccel_client_declare(declaring->c, nullptr, 0, why, sizeof(why)), 0);
  ASSERT_TRUE(registering.reg(test::registration_of(p.front, 1)));
  // While declared, 'rear' is the description declared.
  auto other_rear = test::registration_of(p.rear, 0);
  other_rear.chain.callbacks[0].cpu_ns += 1;
  EXPECT_EQ(register_desc(registering.c, other_rear, &r, why, sizeof(why)), -EINVAL);
  EXPECT_NE(std::string(why).find("'rear' was admitted with a different description"), std::string::npos) << why;
  // A declaration refused leaves what was admitted.
  const rtaccel_chain_desc heavy =
      one_callback("heavy", 30, 100 * kMs, {.name = "h", .executor = "ex_h", .core = 3, .wcet_ns = 85 * kMs}).chain;
  EXPECT_EQ(rtaccel_client_declare(declaring->c, &heavy, 1, why, sizeof(why)), -EDEADLK);
  EXPECT_NE(std::string(why).find("admitting chain 'heavy' would break chain '"), std::string::npos) << why;
  // Its client gone, 'rear' goes (once the server has seen the close): the
  // other description is no longer a conflict, but registered alone its
  // timer is not started with 'front''s, whose wait at the fusion then
  // passes its period (docs/analysis.md, item 5).
  declaring.reset();
  int err = -EINVAL;
  for (int i = 0; i < 500 && err == -EINVAL; i++) {
    err = register_desc(registering.c, other_rear, &r, why, sizeof(why));
    if (err == -EINVAL) usleep(10000);
  }
  EXPECT_EQ(err, -EDEADLK) << why;
  EXPECT_NE(std::string(why).find("admitting chain 'rear' would break chain 'front': with its waits at fusions"),
            std::string::npos) << why;
}

TEST(Server, DeclarationsPastTheLimitOrMalformedAreRefusedAndTheServerGoesOn) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  RawClient raw(server.socket());
  ASSERT_TRUE(raw.connected());
  DeclareRequest m{};
  m.magic = kMagic;
  m.version = kProtocolVersion;
  m.type = uint32_t(MessageType::kDeclare);
  m.chain = busy_chain("c", 1).chain;
  RegisterReply reply{};
  // A client that never says "last" holds at most kMaxDeclared chains, and
  // another client none beside them.
  for (uint32_t i = 0; i < kMaxDeclared; i++) {
    snprintf(m.chain.name, sizeof(m.chain.name), "c%u", i);
    ASSERT_EQ(raw.exchange(&m, sizeof(m), &reply), 0) << i << ": " << reply.message;
  }
  {
    Client other(server);
    char why[256] = "";
    const rtaccel_chain_desc one = busy_chain("other", 2).chain;
    EXPECT_EQ(rtaccel_client_declare(other.c, &one, 1, why, sizeof(why)), -ENOSPC) << why;
  }
  EXPECT_EQ(raw.exchange(&m, sizeof(m), &reply), -ENOSPC);
  EXPECT_NE(std::string(reply.message).find("at most 1024 declared chains"), std::string::npos) << reply.message;
  m.flags = 4;
  EXPECT_EQ(raw.exchange(&m, sizeof(m), &reply), -EINVAL);
  EXPECT_NE(std::string(reply.message).find("unknown flags"), std::string::npos) << reply.message;
  m.flags = kDeclareLast;
  EXPECT_EQ(raw.exchange(&m, sizeof(m) - 1, &reply), -EINVAL);
  // The refusal dropped what was pending: a declaration of one is admitted.
  ASSERT_EQ(raw.exchange(&m, sizeof(m), &reply), 0) << reply.message;
  Client client(server);
  EXPECT_TRUE(client.reg(busy_chain("after", 1)));
}

// 'hot' (10 ms of work, deadline 20 ms) and 'heavy', of a higher chain
// priority, whose 15 ms on the same core break hot's deadline by the PAAM
// analysis.
struct HotAndHeavy {
  rtaccel_registration_desc hot, heavy;
  HotAndHeavy() {
    CallbackSpec sensor{.name = "sensor", .executor = "e1", .core = 0, .wcet_ns = 10 * kMs};
    hot = one_callback("hot", 10, 100 * kMs, sensor);
    hot.chain.deadline_ns = 20 * kMs;
    CallbackSpec planner{.name = "planner", .executor = "e2", .core = 0, .executor_priority = 40, .wcet_ns = 15 * kMs};
    heavy = one_callback("heavy", 20, 100 * kMs, planner);
  }
};

TEST(Server, AdmissionControlRefusesARegistrationThatBreaksADeadline) {
  ServerProcess server(cpu_args({"--epsilon-us", "50", "--kappa-us", "50"}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  const HotAndHeavy d;
  const rtaccel_registration_desc& hd = d.hot;
  ASSERT_TRUE(client.reg(hd));
  rtaccel_registration* r = nullptr;
  char why[256];
  EXPECT_EQ(register_desc(client.c, d.heavy, &r, why, sizeof(why)), -EDEADLK);
  EXPECT_NE(std::string(why).find("chain 'hot': bound"), std::string::npos) << why;
  EXPECT_NE(std::string(why).find("exceeds deadline 20.000 ms"), std::string::npos) << why;
  // The same callback twice is refused too.
  EXPECT_EQ(register_desc(client.c, hd, &r, why, sizeof(why)), -EEXIST);
}

// 'hot' ends 10.25 ms after its release (its 10 ms kernel, 0.1 ms of CPU
// time, 2 kappa and epsilon). A regulator that takes half of every 1 ms on
// the device's core about doubles its kernel, past the 20 ms deadline; on
// a core that is neither the device's nor the executor's it costs nothing.
TEST(Server, AdmissionControlChargesTheRegulatorItIsToldOf) {
  const HotAndHeavy d;
  const std::vector<std::string> regulator = {"--epsilon-us", "50", "--kappa-us", "50", "--regulator-cost-us", "500",
                                              "--regulator-period-us", "1000", "--regulated-cores"};
  {
    auto args = regulator;
    args.push_back(cpu_args()[1]);
    ServerProcess server(cpu_args(args));
    ASSERT_TRUE(server.ready());
    Client client(server);
    rtaccel_registration* r = nullptr;
    char why[256] = "";
    EXPECT_EQ(register_desc(client.c, d.hot, &r, why, sizeof(why)), -EDEADLK);
    EXPECT_NE(std::string(why).find("chain 'hot': bound"), std::string::npos) << why;
  }
  auto args = regulator;
  args.push_back("7");
  ServerProcess server(cpu_args(args));
  ASSERT_TRUE(server.ready());
  Client client(server);
  EXPECT_TRUE(client.reg(d.hot));
}

TEST(Server, WithoutTheDeadlineCheckAdmissionPlacesButRefusesOnlyConflicts) {
  // A system whose bounds come from another analysis (gangs): the heavy
  // chain that breaks 'hot' by the PAAM analysis is admitted and placed.
  ServerProcess server(cpu_args({"--epsilon-us", "50", "--kappa-us", "50", "--no-deadline-check"}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  const HotAndHeavy d;
  const rtaccel_registration_desc& hd = d.hot;
  ASSERT_TRUE(client.reg(hd));
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  ASSERT_EQ(register_desc(client.c, d.heavy, &r, why, sizeof(why)), 0) << why;
  rtaccel_registration_info info;
  rtaccel_registration_query(r, &info);
  EXPECT_EQ(info.priority, 20);
  rtaccel_ticket t;
  ASSERT_EQ(submit_busy(r, kMs, &t), 0);
  EXPECT_EQ(rtaccel_wait(r, &t, 10 * kSecond, nullptr), 0);
  // Conflicts are still refused: the same callback again, and a chain of
  // another description under an admitted name.
  EXPECT_EQ(register_desc(client.c, hd, &r, why, sizeof(why)), -EEXIST);
  CallbackSpec other{.name = "sensor2", .executor = "e1", .core = 0, .wcet_ns = 10 * kMs};
  EXPECT_EQ(register_desc(client.c, one_callback("hot", 11, 100 * kMs, other), &r, why, sizeof(why)), -EINVAL) << why;
}

TEST(Server, WorstFitDecreasingAcrossDevices) {
  ServerProcess server({"--device", "0", "--device", "1", "--no-fifo"});
  ASSERT_TRUE(server.ready());
  Client client(server);
  rtaccel_registration_desc d[3] = {
      one_callback("small", 3, 100 * kMs, {.name = "s", .executor = "e1", .wcet_ns = 5 * kMs}),
      one_callback("big", 2, 100 * kMs, {.name = "b", .executor = "e2", .wcet_ns = 40 * kMs}),
      one_callback("mid", 1, 100 * kMs, {.name = "m", .executor = "e3", .wcet_ns = 10 * kMs}),
  };
  for (auto& x : d) x.chain.critical = 0;
  rtaccel_registration* r[3];
  char why[256];
  // register_all sorts by utilisation: big (40%), mid (10%), small (5%).
  ASSERT_EQ(rtaccel_client_register_all(client.c, d, 3, r, why, sizeof(why)), 0) << why;
  rtaccel_registration_info info[3];
  for (int i = 0; i < 3; i++) rtaccel_registration_query(r[i], &info[i]);
  EXPECT_NE(info[1].device, info[2].device);  // mid goes next to nothing, not next to big
  EXPECT_EQ(info[0].device, info[2].device);  // small joins mid (15% < 40%)
}

// The bad case is a server that drains a dead client's queue: its memory
// would be released, and the next request would start, only after the dead
// client's 600 ms of work. Both are compared with that, in the same run.
TEST(Server, ADeadClientsQueueIsDroppedAndItsMemoryReleasedAtOnce) {
  ServerProcess server(cpu_args({"--levels", "1"}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  rtaccel_registration* blocker = client.reg(busy_chain("blocker", 1, 600 * kMs));
  ASSERT_TRUE(blocker);
  rtaccel_ticket tb;
  ASSERT_EQ(submit_busy(blocker, 600 * kMs, &tb), 0);
  ASSERT_TRUE(wait_started(blocker, tb));
  const size_t regions_before = server.maps_containing("rtaccel-region");

  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    rtaccel_client* c;
    rtaccel_registration* r;
    if (rtaccel_client_connect(server.socket(), &c) ||
        register_desc(c, busy_chain("doomed", 9, 150 * kMs), &r, nullptr, 0))
      _exit(1);
    for (int i = 0; i < 4; i++) {  // 600 ms of work queued behind the blocker
      rtaccel_ticket t;
      if (submit_busy(r, 150 * kMs, &t)) _exit(1);
    }
    char ok = 1;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  EXPECT_EQ(server.maps_containing("rtaccel-region"), regions_before + 1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  const uint64_t killed = core::monotonic_ns();
  while (server.maps_containing("rtaccel-region") > regions_before && core::monotonic_ns() - killed < 10 * kSecond)
    usleep(1000);
  const uint64_t released = core::monotonic_ns();
  EXPECT_EQ(server.maps_containing("rtaccel-region"), regions_before) << "the dead client's region is still mapped";

  // Its queued 600 ms of requests never run: a request of equal priority
  // submitted now starts right after the blocker, long before they would
  // have ended; and its region went while the blocker still ran.
  rtaccel_registration* next = client.reg(busy_chain("next", 9));
  rtaccel_ticket tn;
  ASSERT_EQ(submit_busy(next, 1 * kMs, &tn), 0);
  ASSERT_EQ(rtaccel_wait(next, &tn, 10 * kSecond, nullptr), 0);
  ASSERT_EQ(rtaccel_wait(blocker, &tb, 10 * kSecond, nullptr), 0);
  const uint64_t blocker_end = times_of(blocker, tb).end_ns;
  EXPECT_LT(times_of(next, tn).start_ns - blocker_end, 300 * kMs);
  EXPECT_LT(released, blocker_end) << "the region went " << (released - blocker_end) / 1000
                                   << " us after the blocker, as if the server drained the queue";
}

// A run's executors unregister and leave, then the run stops the server:
// what they said may still wait in their sockets when it is told to stop.
// The server reads it before it drops the connections that are left.
TEST(Server, AClientThatUnregisteredAndLeftBeforeTheStopDidNotLeaveAtShutdown) {
  ServerProcess server(cpu_args(), /*keep_log=*/true);
  ASSERT_TRUE(server.ready());
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(server.socket(), &c), 0);
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  ASSERT_EQ(register_desc(c, busy_chain("leaving", 1), &r, why, sizeof(why)), 0) << why;

  // Stopped, the server reads nothing while the client unregisters and
  // closes its connection. The stop request then goes to its control
  // thread (the main one, pid = tid), which ends the wait for its sockets
  // with EINTR before it sees what they hold.
  const pid_t pid = server.pid();
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  const uint64_t asked = core::monotonic_ns();
  while (server.state() != 'T' && core::monotonic_ns() - asked < 10 * kSecond) usleep(1000);
  ASSERT_EQ(server.state(), 'T');
  rtaccel_client_close(c);
  ASSERT_EQ(syscall(SYS_tgkill, pid, pid, SIGTERM), 0);
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(server.log().find("left at shutdown"), std::string::npos) << server.log();
}

// Connects to ADDRESS, registers chain NAME and has one request of it
// served: true where all went well. The client stays open, in *OUT.
bool connect_and_serve_one(const char* address, const char* name, rtaccel_client** out) {
  rtaccel_registration* r = nullptr;
  rtaccel_ticket t;
  return rtaccel_client_connect(address, out) == 0 && register_desc(*out, busy_chain(name, 5), &r, nullptr, 0) == 0 &&
         submit_busy(r, kMs, &t) == 0 && rtaccel_wait(r, &t, 10 * kSecond, nullptr) == 0;
}

// For a process that outlives its parent on purpose: ends once the test
// process TEST has, or after 30 s, whichever comes first, so that a test
// that fails before it ends the process leaves nothing behind for long.
[[noreturn]] void live_while(pid_t test) {
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
pid_t client_that_ends_leaving_a_child(const char* address, const char* name, ClientCheck in_child,
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

// A child forked from a client's process (a helper, a daemon's second half)
// has copies of the client and its registrations. Closing them there, as a
// C++ wrapper's destructor does on the child's way out, unregistered the
// parent's callbacks: its next request waited for a server that had dropped
// them.
TEST(Server, AForkedChildCannotUseItsParentsRegistrationsNorEndThem) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  Client client(server);
  rtaccel_registration* r = client.reg(busy_chain("parent", 5));
  ASSERT_TRUE(r);
  const size_t regions = server.maps_containing("rtaccel-region");

  const pid_t child = fork();
  if (child == 0) {
    // A well-formed ticket (the refused submission leaves it as it was):
    // wait and poll check a ticket before whose client it is, and one of
    // the stack's leftovers would be refused as -EINVAL.
    rtaccel_ticket t{};
    if (submit_busy(r, kMs, &t) != -ENOTCONN) _exit(10);
    if (rtaccel_wait(r, &t, kSecond, nullptr) != -ENOTCONN || rtaccel_poll(r, &t, nullptr) != -ENOTCONN) _exit(11);
    rtaccel_registration* other = nullptr;
    char why[256] = "";
    if (register_desc(client.c, busy_chain("child", 5), &other, why, sizeof(why)) != -ENOTCONN ||
        !strstr(why, "forked"))
      _exit(12);
    rtaccel_client_unregister(r);
    rtaccel_client_close(client.c);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's check " << status << " failed";

  EXPECT_EQ(server.maps_containing("rtaccel-region"), regions) << "the child's close unregistered the parent";
  rtaccel_ticket t;
  ASSERT_EQ(submit_busy(r, kMs, &t), 0);
  EXPECT_EQ(rtaccel_wait(r, &t, 10 * kSecond, nullptr), 0);
  // and a child may connect on its own
  const pid_t second = fork();
  if (second == 0) {
    rtaccel_client* c = nullptr;
    if (!connect_and_serve_one(server.socket(), "own", &c)) _exit(20);
    rtaccel_client_close(c);
    _exit(0);
  }
  ASSERT_EQ(waitpid(second, &status, 0), second);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The server watches a client's process, not only its socket: a child with a
// copy of the socket does not keep its parent's registrations, and the
// accelerator time admission control gave them, once the parent has ended.
TEST(Server, AClientsRegistrationsEndWithItsProcessThoughAChildLivesOn) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  const size_t regions = server.maps_containing("rtaccel-region");
  int status = 0;
  LeftChild child{client_that_ends_leaving_a_child(server.socket(), "mortal", nullptr, nullptr, &status)};
  ASSERT_GT(child.pid, 0) << core::describe_wait_status(status);

  const uint64_t ended = core::monotonic_ns();
  while (server.maps_containing("rtaccel-region") > regions && core::monotonic_ns() - ended < 10 * kSecond)
    usleep(1000);
  EXPECT_EQ(server.maps_containing("rtaccel-region"), regions)
      << "the server keeps the registration of a process that ended, while its child lives";
  EXPECT_EQ(kill(child.pid, 0), 0) << "the child ended before the check";
}

// CPU time PID has had so far.
uint64_t cpu_ns_of(pid_t pid) {
  clockid_t clock;
  timespec ts{};
  if (clock_getcpuclockid(pid, &clock) || clock_gettime(clock, &ts)) return 0;
  return uint64_t(ts.tv_sec) * kSecond + uint64_t(ts.tv_nsec);
}

// Registers BUSY_CHAIN(NAME) from a process of its own, bounded in time:
// the registration's status, or -ETIMEDOUT where it did not come back in
// 10 s (the process is then killed). WHY gets the server's reason.
int register_elsewhere(const ServerProcess& server, const std::string& name, std::string* why) {
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

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
  return n;
}

// A server out of descriptors could not accept: the waiting client stayed
// in the backlog, and the control thread, woken again at once for it, spun
// on its core and logged a line a turn (a million lines in three seconds),
// while the client's registration hung. A local user could do it by opening
// connections. Now each such client is refused at once, with why, the log
// says it once, and the server accepts again once descriptors are free.
TEST(Server, OutOfDescriptorsItRefusesClientsAtOnceWithoutSpinning) {
  // Room for three clients (a socket and a pidfd each), and one descriptor
  // more or not: with an even number free, the accept is what fails; with
  // an odd one, the pidfd.
  for (rlim_t spare : {6, 7}) {
    SCOPED_TRACE("descriptors free: " + std::to_string(spare));
    ServerProcess server(cpu_args(), /*keep_log=*/true);
    ASSERT_TRUE(server.ready());
    const rlim_t limit = server.open_fds() + spare;
    const rlimit low{limit, limit};
    ASSERT_EQ(prlimit(server.pid(), RLIMIT_NOFILE, &low, nullptr), 0) << strerror(errno);
    std::vector<std::unique_ptr<RawClient>> idle;
    for (int i = 0; i < 20; i++) {
      idle.push_back(std::make_unique<RawClient>(server.socket()));
      ASSERT_TRUE(idle.back()->connected());
    }
    std::string why;
    EXPECT_EQ(register_elsewhere(server, "refused", &why), -EMFILE);
    EXPECT_NE(why.find("no descriptor left for a client"), std::string::npos) << why;

    const uint64_t cpu_before = cpu_ns_of(server.pid());
    usleep(1000000);
    const uint64_t cpu = cpu_ns_of(server.pid()) - cpu_before;
    EXPECT_LT(cpu, 300 * kMs) << "the server used " << cpu / kMs << " ms of CPU in the second after";
    const std::string log = server.log();
    EXPECT_EQ(count_of(log, "no descriptor left for a client"), 1u) << log.substr(0, 2000);

    idle.clear();
    EXPECT_EQ(register_elsewhere(server, "accepted", &why), 0) << why;
    // The 17 idle connections past the three that fit, and the registration.
    const std::string again = server.log();
    const size_t at = again.find("accepting clients again; ");
    ASSERT_NE(at, std::string::npos) << again.substr(0, 2000);
    EXPECT_GE(atoi(again.c_str() + at + strlen("accepting clients again; ")), 10) << again.substr(at, 80);
  }
}

// A registration whose region holds about MIB MiB: the busy service's
// buffers, MIB / 2 each way.
rtaccel_registration_desc big_chain(const std::string& name, uint32_t mib) {
  rtaccel_registration_desc d = busy_chain(name, 5);
  d.services[0].request_max = d.services[0].response_max = mib << 19;
  return d;
}

// The server holds every registration's region resident (it locks its
// memory), up to 256 MiB each, and it admitted them by time alone: a client
// the policy allows could have it hold more than the machine had. The
// registrations' memory has a limit; past it a registration is refused with
// its size and the limit, and one fits again once another has gone.
TEST(Server, RegistrationsPastItsRegionMemoryAreRefusedWithWhy) {
  ServerProcess server(cpu_args({"--region-memory", "160M"}), /*keep_log=*/true);
  ASSERT_TRUE(server.ready());
  EXPECT_NE(server.log().find("regions up to 160 MiB"), std::string::npos) << server.log();
  Client client(server);
  rtaccel_registration* first = client.reg(big_chain("first", 100));
  ASSERT_NE(first, nullptr);
  rtaccel_registration* second = nullptr;
  char why[256] = "";
  EXPECT_EQ(register_desc(client.c, big_chain("second", 100), &second, why, sizeof(why)), -ENOMEM);
  EXPECT_NE(strstr(why, "would bring the registrations' memory to 200 MiB, above the server's limit of 160 MiB"),
            nullptr) << why;
  // What fits still does.
  rtaccel_registration* small = client.reg(big_chain("small", 40));
  EXPECT_NE(small, nullptr);
  rtaccel_client_unregister(first);
  // The server frees the region as it reads the unregistration; the
  // registration after it, on the same connection, is read after it.
  EXPECT_NE(second = client.reg(big_chain("second", 100)), nullptr);
}

// A client may keep its region's mapping and descriptor after it
// unregisters, as a hostile or careless one would. The pages were the
// server's, locked, and no longer counted against the region limit once the
// registration went: a client that registered, kept the mapping and
// unregistered, round after round, held memory without bound, past the
// limit. The server frees a region's pages as it lets the region go.
TEST(Server, ARegionsMemoryGoesWithItsRegistrationThoughTheClientKeepsIt) {
  ServerProcess server(cpu_args({"--region-memory", "160M"}));
  ASSERT_TRUE(server.ready());
  RawClient raw(server.socket());
  ASSERT_TRUE(raw.connected());
  constexpr uint64_t kMiB = 1 << 20;
  std::vector<core::UniqueFd> kept;
  for (int round = 0; round <= 4; round++) {  // 400 MiB in all, a limit of 160
    // A registration on the connection is read after the unregistration
    // before it: once it is answered, the last region has gone.
    RegisterReply reply{};
    ASSERT_EQ(raw.register_desc(big_chain("kept-" + std::to_string(round), round < 4 ? 100 : 1), &reply), 0)
        << "round " << round << ": " << reply.message;
    if (round > 0) {
      EXPECT_EQ(bytes_in(kept.back().get()), 0u) << "round " << round - 1 << ": the unregistered region still holds "
                                                 << bytes_in(kept.back().get()) / kMiB << " MiB";
    }
    if (round == 4) break;
    kept.emplace_back(dup(raw.region_fd()));
    // The request buffer is the client's to write: written, its 50 MiB are
    // in the file whether or not the server locked the region in.
    const ServiceArea& area = raw.header()->services[0];
    memset(reinterpret_cast<char*>(raw.header()) + area.request_offset, 0x5a, area.request_max);
    ASSERT_GE(bytes_in(kept.back().get()), 50 * kMiB) << "round " << round;
    UnregisterRequest u{kMagic, kProtocolVersion, uint32_t(MessageType::kUnregister), 0, raw.callback_id()};
    ASSERT_EQ(raw.send_bytes(&u, sizeof(u)), int(sizeof(u)));
  }
}

// Registration I: callback I % 8 of critical chain I / 8 (a priority of its
// own), on eight executors of the clients' core.
rtaccel_registration_desc one_of_many(int i) {
  const std::string chain = "many-" + std::to_string(i / 8);
  rtaccel_registration_desc d = one_callback(chain, 1 + i / 8, 100 * kSecond, CallbackSpec{.name = chain});
  d.chain.ncallbacks = 8;
  for (int k = 0; k < 8; k++)
    test::set_callback(&d.chain.callbacks[k],
                       CallbackSpec{.name = chain + "-" + std::to_string(k), .executor = "many-ex-" + std::to_string(k),
                                    .core = 0, .executor_priority = 10 + k, .cpu_ns = 1000, .wcet_ns = 1000});
  d.callback = uint32_t(i % 8);
  return d;
}

// Each registration had the server place every region of the device anew,
// a callback at a time through every chain admitted, and let go of one by
// scanning them all: time cubic in the registrations, in the control thread
// that serves every client's registrations and sees clients end. At 200
// callbacks (25 chains) a registration took 0.14 s and the release of a
// client's 200 took 7 s (`rtaccel bench registrations`); 400 took minutes.
TEST(Server, HundredsOfRegistrationsAreAdmittedAndReleasedInSeconds) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  Client holder(server);
  char why[256] = "";
  const uint64_t start = core::monotonic_ns();
  for (int i = 0; i < 400; i++) {
    rtaccel_registration* r = nullptr;
    ASSERT_EQ(register_desc(holder.c, one_of_many(i), &r, why, sizeof(why)), 0) << i << ": " << why;
    ASSERT_LT(core::monotonic_ns() - start, 60 * kSecond) << i + 1 << " registrations took 60 s";
  }
  // Another client is served beside them.
  std::string beside;
  EXPECT_EQ(register_elsewhere(server, "beside", &beside), 0) << beside;

  // The holder leaves: its registrations go at once, and their names with
  // them (refused, -EEXIST, while they are there).
  rtaccel_client_close(holder.c);
  holder.c = nullptr;
  Client other(server);
  const uint64_t left = core::monotonic_ns();
  int err;
  do {
    rtaccel_registration* r = nullptr;
    err = register_desc(other.c, one_of_many(0), &r, why, sizeof(why));
  } while (err == -EEXIST && core::monotonic_ns() - left < 10 * kSecond);
  EXPECT_EQ(err, 0) << why;
  EXPECT_LT(core::monotonic_ns() - left, 10 * kSecond) << "the 400 registrations of a client that left were "
                                                          "still there after 10 s";
}

// A memory cgroup of its own with LIMIT bytes, for a process run in it:
// cgroup v2 where v2 holds the memory controller, else v1's. Removed with
// this object, once what ran in it has ended.
class MemoryCgroup {
 public:
  explicit MemoryCgroup(uint64_t limit) {
    std::ifstream mounts("/proc/self/mounts");
    std::string v2, v1;
    for (std::string device, dir, type, options, rest; mounts >> device >> dir >> type >> options;) {
      std::getline(mounts, rest);
      std::string controllers;
      if (type == "cgroup2") std::getline(std::ifstream(dir + "/cgroup.controllers"), controllers);
      if (type == "cgroup2" && (" " + controllers + " ").find(" memory ") != std::string::npos) v2 = dir;
      if (type == "cgroup" && rtaccel_mount_has_option(options.c_str(), "memory")) v1 = dir;
    }
    if (v2.empty() && v1.empty()) {
      why_ = "no memory cgroup controller here (cgroup v2's memory, or v1's)";
      return;
    }
    // v2 gives a group the controller through its parent's subtree_control.
    if (!v2.empty()) rtaccel_cgroup_write(v2.c_str(), "cgroup.subtree_control", "+memory");
    const std::string path = (v2.empty() ? v1 : v2) + "/rtaccel-test-memory-" + std::to_string(getpid());
    if (mkdir(path.c_str(), 0755) < 0) {
      why_ = path + ": " + strerror(errno);
      return;
    }
    path_ = path;
    v2_ = !v2.empty();
    if (int err = set_limit(limit)) why_ = path + ": memory limit: " + strerror(-err);
  }
  int set_limit(uint64_t limit) const {
    return rtaccel_cgroup_write(path_.c_str(), v2_ ? "memory.max" : "memory.limit_in_bytes",
                                std::to_string(limit).c_str());
  }
  // What its processes use now, file cache and all.
  uint64_t current() const {
    uint64_t used = 0;
    std::ifstream(path_ + (v2_ ? "/memory.current" : "/memory.usage_in_bytes")) >> used;
    return used;
  }
  ~MemoryCgroup() {
    if (!path_.empty()) rmdir(path_.c_str());
  }
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;
  // Empty where it is there, else why not.
  const std::string& why_not() const { return why_; }
  // The command that moves itself into the group and execs its arguments.
  std::vector<std::string> wrapper() const {
    return {"/bin/sh", "-c", "echo $$ > " + path_ + "/cgroup.procs && exec \"$@\"", "sh"};
  }

 private:
  std::string path_;
  std::string why_;
  bool v2_ = false;
};

// Each test's server in a memory cgroup of 400 MiB of its own.
class InAMemoryCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) SKIP_WITHOUT("root", "a memory cgroup is made for the server");
    cgroup_.emplace(uint64_t{400} << 20);
    if (!cgroup_->why_not().empty()) SKIP_WITHOUT("memcg", cgroup_->why_not());
  }
  // After a refusal: the server lives, and a small registration still fits.
  static void expect_alive_and_serving(const ServerProcess& server) {
    EXPECT_TRUE(server.alive()) << "the server died: " << server.log();
    std::string why;
    EXPECT_EQ(register_elsewhere(server, "small", &why), 0) << why;
  }
  std::optional<MemoryCgroup> cgroup_;
};

// In a container (a memory cgroup with a limit) the server's regions come
// out of the container's memory. Registrations past it had the kernel kill
// the server (seen: "Memory cgroup out of memory: Killed process
// (rtaccel-server)" at the third of 256 MiB under a 700 MiB limit). By
// default it keeps its regions within half of what its cgroup leaves it.
TEST_F(InAMemoryCgroup, TheServersRegionsStayWithinTheLimitAndItLives) {
  {
    ServerProcess server(cpu_args(), /*keep_log=*/true, cgroup_->wrapper());
    ASSERT_TRUE(server.ready()) << server.log();
    const std::string log = server.log();
    const size_t at = log.find("regions up to ");
    ASSERT_NE(at, std::string::npos) << log;
    EXPECT_LE(atoi(log.c_str() + at + strlen("regions up to ")), 200) << log;
    Client client(server);
    int err = 0;
    char why[256] = "";
    for (int i = 0; i < 6 && !err; i++) {
      rtaccel_registration* r = nullptr;
      err = register_desc(client.c, big_chain("big" + std::to_string(i), 100), &r, why, sizeof(why));
    }
    EXPECT_EQ(err, -ENOMEM) << why;
    EXPECT_NE(strstr(why, "above the server's limit"), nullptr) << why;
    expect_alive_and_serving(server);
    // Gone before its cgroup is removed.
    server.stop();
  }
}

// The limit is weighed against what memory there is as the server starts.
// Where the container's memory shrinks after that (here its limit is
// lowered to what it uses and 40 MiB more), a registration within the limit
// had the kernel kill the server as it locked the region in. The server
// reads what is left again and refuses what would take more than half.
TEST_F(InAMemoryCgroup, ARegistrationTheMemoryLeftCannotHoldIsRefusedThoughWithinTheLimit) {
  {
    ServerProcess server(cpu_args(), /*keep_log=*/true, cgroup_->wrapper());
    ASSERT_TRUE(server.ready()) << server.log();
    Client client(server);
    char why[256] = "";
    rtaccel_registration* first = nullptr;
    ASSERT_EQ(register_desc(client.c, big_chain("first", 50), &first, why, sizeof(why)), 0) << why;
    ASSERT_EQ(cgroup_->set_limit(cgroup_->current() + (uint64_t{40} << 20)), 0);
    rtaccel_registration* second = nullptr;
    EXPECT_EQ(register_desc(client.c, big_chain("second", 50), &second, why, sizeof(why)), -ENOMEM) << why;
    EXPECT_NE(strstr(why, "would take more than half of the"), nullptr) << why;
    expect_alive_and_serving(server);
    server.stop();
  }
}

// Where pidfd_open does not exist (a kernel before 5.3) or is forbidden (a
// container's seccomp profile, Docker's before 20.10), the server refused
// every client, which read "the server is gone". It serves them, sees a
// client's end by its socket, and says once why it watches sockets alone.
TEST(Server, WithoutPidfdOpenClientsAreServedAndTheirEndSeenByTheirSocket) {
  const pid_t scenario = fork();
  if (scenario == 0) {
    // The server inherits the filter from this process.
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) _exit(2);
    std::string problem;
    {
      ServerProcess server(cpu_args(), /*keep_log=*/true);
      if (!server.ready()) problem = "the server did not get ready";
      const size_t regions = server.maps_containing("rtaccel-region");
      int status = 0;
      if (problem.empty()) {  // a client served, that ends without a word
        const pid_t client = fork();
        if (client == 0) {
          rtaccel_client* c = nullptr;
          _exit(connect_and_serve_one(server.socket(), "first", &c) ? 0 : 1);
        }
        waitpid(client, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) problem = "the client was not served";
      }
      const uint64_t ended = core::monotonic_ns();
      while (problem.empty() && server.maps_containing("rtaccel-region") > regions &&
             core::monotonic_ns() - ended < 10 * kSecond)
        usleep(1000);
      if (problem.empty() && server.maps_containing("rtaccel-region") > regions)
        problem = "the ended client's registration is still there";
      std::string why;
      if (problem.empty() && register_elsewhere(server, "second", &why) != 0) problem = "a second client: " + why;
      if (problem.empty() && count_of(server.log(), "pidfd_open") != 1) problem = "the log:\n" + server.log();
    }
    if (!problem.empty()) fprintf(stderr, "%s\n", problem.c_str());
    _exit(problem.empty() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(scenario, &status, 0), scenario);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) SKIP_WITHOUT("seccomp", "no seccomp filter here");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << core::describe_wait_status(status);
}

TEST(Server, ADeadServerFailsWaitingClientsInsteadOfHangingThem) {
  for (rtaccel_wait_mode mode : {RTACCEL_WAIT_SUSPEND, RTACCEL_WAIT_SPIN}) {
    ServerProcess server(cpu_args());
    ASSERT_TRUE(server.ready());
    Client client(server);
    rtaccel_registration* r = client.reg(busy_chain("victim", 1, 5 * kSecond, mode));
    ASSERT_TRUE(r);
    rtaccel_ticket t;
    ASSERT_EQ(submit_busy(r, 5 * kSecond, &t), 0);
    ASSERT_TRUE(wait_started(r, t));
    server.kill_now();
    const uint64_t start = core::monotonic_ns();
    EXPECT_EQ(rtaccel_wait(r, &t, 0, nullptr), -EPIPE) << "wait mode " << mode;
    EXPECT_LT(core::monotonic_ns() - start, kSecond);
    EXPECT_EQ(rtaccel_poll(r, &t, nullptr), -EPIPE);
    rtaccel_registration* again = nullptr;
    EXPECT_EQ(register_desc(client.c, busy_chain("late", 1), &again, nullptr, 0), -EPIPE);
  }
}

TEST(Server, AsynchronousRequestsOverlapCpuWork) {
  ServerProcess server(cpu_args({"--levels", "1"}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  // A long request on the only level holds the worker, so none of the ring's
  // requests can complete (and free its entry) before the ring-full check,
  // however slowly this process runs.
  rtaccel_registration* blocker = client.reg(busy_chain("blocker", 1, kSecond));
  ASSERT_TRUE(blocker);
  rtaccel_ticket tb;
  ASSERT_EQ(submit_busy(blocker, kSecond, &tb), 0);
  ASSERT_TRUE(wait_started(blocker, tb));
  rtaccel_registration* r = client.reg(busy_chain("async", 5, 20 * kMs));
  rtaccel_ticket t[kRingEntries];
  for (uint32_t i = 0; i < kRingEntries; i++) ASSERT_EQ(submit_busy(r, 1 * kMs, &t[i]), 0);
  rtaccel_ticket extra;
  EXPECT_EQ(submit_busy(r, 1 * kMs, &extra), -EBUSY);  // the ring is full
  EXPECT_EQ(rtaccel_poll(r, &t[kRingEntries - 1], nullptr), -EAGAIN);
  for (uint32_t i = 0; i < kRingEntries; i++) ASSERT_EQ(rtaccel_wait(r, &t[i], 10 * kSecond, nullptr), 0);
  ASSERT_EQ(rtaccel_wait(blocker, &tb, 10 * kSecond, nullptr), 0);
  for (uint32_t i = 1; i < kRingEntries; i++)  // one registration: in order
    EXPECT_GE(times_of(r, t[i]).start_ns, times_of(r, t[i - 1]).end_ns);
  rtaccel_ticket timeout;
  ASSERT_EQ(submit_busy(r, 300 * kMs, &timeout), 0);
  EXPECT_EQ(rtaccel_wait(r, &timeout, 10 * kMs, nullptr), -ETIMEDOUT);
  EXPECT_EQ(rtaccel_wait(r, &timeout, 10 * kSecond, nullptr), 0);
}

// What the child of SubmitAndSpinCompletionMakeNoSystemCall saw, in memory
// it shares with the test.
struct SyscallCount {
  uint32_t clean;       // iterations with no system call
  uint32_t excused;     // with one, after a stall long enough to explain it
  uint32_t unexcused;   // with one and no such stall: the defect looked for
  int nr;               // the first unexcused system call's number
  uint64_t stall_ns;    // how long its iteration had run when it made it
};

volatile sig_atomic_t g_trapped;
volatile sig_atomic_t g_trapped_nr;
// When the iteration's first system call was made: what excuses it is the
// stall before it, not the one after (a wake-up that fails stalls the next
// request by the worker's 50 ms sleep).
volatile uint64_t g_trapped_at_ns;

// The filter traps every system call but exit_group and rt_sigreturn; this
// counts it and makes it fail with ENOSYS, which the client survives: a failed
// liveness poll reads as a live server, and a failed futex wake-up leaves the
// worker to its sleep's 50 ms limit.
void count_syscall(int, siginfo_t* info, void* context) {
  g_trapped = g_trapped + 1;
  if (g_trapped_nr == 0) {  // the first in its iteration
    g_trapped_nr = info->si_syscall;
    g_trapped_at_ns = core::monotonic_ns();  // the vDSO: no system call
  }
#if defined(__x86_64__)
  static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#elif defined(__aarch64__)
  static_cast<ucontext_t*>(context)->uc_mcontext.regs[0] = uint64_t(-ENOSYS);
#endif
}

// While the worker polls, a spinning client's submit and completion make no
// system call. A child runs them under a seccomp filter that traps any. The
// client does make two on purpose: a liveness poll after spinning 50 ms on one
// request, and a wake-up of a worker that stopped polling (here after 10 s
// without a request). Either needs the child to have gone 50 ms or more since
// its last completion, which a loaded machine can do to it by descheduling the
// child or the worker, so a system call fails the test only where it was made
// sooner than that.
TEST(Server, SubmitAndSpinCompletionMakeNoSystemCall) {
#if !defined(__x86_64__) && !defined(__aarch64__)
  GTEST_SKIP() << "the SIGSYS handler sets the return register of x86-64 and arm64 only";
#endif
  ServerProcess server(cpu_args({"--levels", "1", "--poll-us", "10000000"}));
  ASSERT_TRUE(server.ready());
  void* shared = mmap(nullptr, sizeof(SyscallCount), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* count = new (shared) SyscallCount{};
  constexpr uint64_t kExcuseNs = 50 * kMs;  // client.cc's kLivenessCheckNs
  pid_t child = fork();
  if (child == 0) {
    rtaccel_client* c;
    rtaccel_registration* r;
    if (rtaccel_client_connect(server.socket(), &c) ||
        register_desc(c, busy_chain("nosys", 5, kMs, RTACCEL_WAIT_SPIN), &r, nullptr, 0))
      _exit(3);
    rtaccel_ticket t;
    if (submit_busy(r, 0, &t) || rtaccel_wait(r, &t, 0, nullptr)) _exit(3);  // wakes the worker
    struct sigaction sa{};
    sa.sa_sigaction = count_syscall;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSYS, &sa, nullptr)) _exit(3);
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) _exit(2);
    uint64_t last = core::monotonic_ns();
    for (int i = 0; i < 20000; i++) {
      const sig_atomic_t before = g_trapped;
      // The liveness poll fails here, so a worker that stopped would spin
      // the child forever: a timeout (the clock is the vDSO's) ends it.
      if (submit_busy(r, 0, &t) || rtaccel_wait(r, &t, 10 * kSecond, nullptr)) _exit(1);
      const uint64_t now = core::monotonic_ns();
      if (g_trapped == before) {
        count->clean++;
      } else if (g_trapped_at_ns - last >= kExcuseNs) {
        count->excused++;
      } else if (count->unexcused++ == 0) {
        count->nr = g_trapped_nr;
        count->stall_ns = g_trapped_at_ns - last;
      }
      g_trapped_nr = 0;
      last = now;
    }
    syscall(SYS_exit_group, 0);
  }
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const SyscallCount seen = *count;
  munmap(shared, sizeof(SyscallCount));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) SKIP_WITHOUT("seccomp", "no seccomp filter here");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the client failed: " << (WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exit status")
      << " " << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  EXPECT_EQ(seen.unexcused, 0u) << "the hot path made system call " << seen.nr << " "
                                << seen.stall_ns / 1000 << " us after the last completion";
  EXPECT_GT(seen.clean, 0u) << "every iteration stalled " << kExcuseNs / kMs << " ms or more";
  if (seen.excused) printf("%u of 20000 iterations stalled and made an expected system call\n", seen.excused);
}

TEST(Server, ThousandClientsDyingAtRandomLeakNothing) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  std::mt19937 rng(42);
  auto churn = [&](int clients) {
    std::vector<pid_t> live;
    for (int i = 0; i < clients; i++) {
      const int fate = int(rng() % 4);
      pid_t pid = fork();
      if (pid == 0) {
        rtaccel_client* c;
        rtaccel_registration* r;
        const std::string name = "churn" + std::to_string(getpid());
        if (rtaccel_client_connect(server.socket(), &c)) _exit(1);
        if (fate == 0) _exit(0);  // connects and dies before registering
        if (register_desc(c, busy_chain(name, 1 + int(getpid() % 20), 100000), &r, nullptr, 0)) _exit(1);
        rtaccel_ticket t;
        submit_busy(r, 100000, &t);
        if (fate == 1) _exit(0);  // dies with a request queued or running
        if (fate == 2) {
          rtaccel_wait(r, &t, kSecond, nullptr);
          rtaccel_client_close(c);  // leaves politely
          _exit(0);
        }
        pause();  // killed by the parent, at random
        _exit(0);
      }
      live.push_back(pid);
      if (live.size() > 16 || i + 1 == clients) {
        std::shuffle(live.begin(), live.end(), rng);
        for (pid_t p : live) {
          if (rng() % 2) usleep(useconds_t(rng() % 2000));
          kill(p, SIGKILL);
          waitpid(p, nullptr, 0);
        }
        live.clear();
      }
    }
  };
  auto settle = [&] {
    // Departures are processed asynchronously; wait until quiet.
    for (int i = 0; i < 200 && server.maps_containing("rtaccel-region") > 0; i++) usleep(10000);
    usleep(50000);
  };
  churn(100);  // warm up the allocator and the page cache
  settle();
  const size_t fds = server.open_fds(), maps = server.maps_containing(nullptr);
  const long rss = server.rss_kb();
  churn(1000);
  settle();
  EXPECT_EQ(server.maps_containing("rtaccel-region"), 0u);
  EXPECT_EQ(server.open_fds(), fds);
#if !defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer freed memory sits in quarantine and the allocator
  // maps more; there LeakSanitizer checks the server at exit instead (below).
  EXPECT_EQ(server.maps_containing(nullptr), maps);
  EXPECT_LT(server.rss_kb() - rss, 2048) << "RSS grew from " << rss << " kB to " << server.rss_kb() << " kB";
#else
  (void)maps;
  (void)rss;
#endif
  {
    Client client(server);
    EXPECT_TRUE(client.reg(busy_chain("survivor", 1)));
  }
  const int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "server exit status " << status;
}

// --- OpenCL ----------------------------------------------------------------------

bool opencl_device_found() {
  FILE* p = popen((server_bin() + " --list-backends").c_str(), "r");
  char buf[4096] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  pclose(p);
  return std::string(buf, n).find("opencl   device found") != std::string::npos;
}

TEST(OpenCl, WithoutADeviceNamedTheServerTakesTheFirst) {
  if (!opencl_device_found()) SKIP_WITHOUT("opencl", "no OpenCL device (install pocl-opencl-icd)");
  ServerProcess server({"--backend", "opencl"}, /*keep_log=*/true);
  ASSERT_TRUE(server.ready()) << server.log();
  Client client(server);
  rtaccel_registration* r = client.reg(busy_chain("cl", 10));
  ASSERT_TRUE(r);
  rtaccel_registration_info info;
  rtaccel_registration_query(r, &info);
  EXPECT_EQ(info.device, 0u);
  EXPECT_EQ(info.bucket, 0u);  // one level
}

TEST(OpenCl, TheDevicesOwnThreadsRunOnTheServersCore) {
  if (!opencl_device_found()) SKIP_WITHOUT("opencl", "no OpenCL device (install pocl-opencl-icd)");
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) SKIP_WITHOUT("cores2", "one core: every thread is on it anyway");
  // PoCL runs kernels on a pool of threads of its own, made as the device
  // opens: they ran on every core, the executors' too, and took them from
  // the callbacks (a 1.7 ms kernel took up to 28 ms in a run).
  ServerProcess server({"--backend", "opencl", "--server-core", "0"});
  ASSERT_TRUE(server.ready());
  Client client(server);
  rtaccel_registration* r = client.reg(busy_chain("cl", 10));
  ASSERT_TRUE(r);
  rtaccel_ticket t;
  ASSERT_EQ(submit_busy(r, kMs, &t), 0);
  ASSERT_EQ(rtaccel_wait(r, &t, 10 * kSecond, nullptr), 0);
  const std::vector<std::string> cores = server.cores_of_threads("");
  EXPECT_GT(cores.size(), 2u);  // the control thread, the worker, the runtime's
  for (const std::string& c : cores) EXPECT_EQ(c, "0");
}

// --- CUDA --------------------------------------------------------------------------

std::string cuda_line() {
  FILE* p = popen((server_bin() + " --list-backends").c_str(), "r");
  char buf[4096] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  pclose(p);
  const std::string all(buf, n);
  const size_t at = all.find("cuda ");
  return at == std::string::npos ? "" : all.substr(at, all.find('\n', at) - at);
}

bool cuda_device_found() { return cuda_line().find("device found") != std::string::npos; }

TEST(Direct, ProbeSaysWhatEachBackendFinds) {
  char detail[512] = "";
  EXPECT_EQ(rtaccel_backend_probe("cpu", detail, sizeof(detail)), 1);
  EXPECT_NE(std::string(detail).find("cores"), std::string::npos) << detail;
  EXPECT_EQ(rtaccel_backend_probe("gpu", detail, sizeof(detail)), -ENOENT);
  EXPECT_EQ(rtaccel_backend_probe(nullptr, nullptr, 0), -ENOENT);
  // cuda: found exactly when --list-backends says so, with its reason if not.
  const int cuda = rtaccel_backend_probe("cuda", detail, sizeof(detail));
  EXPECT_EQ(cuda, cuda_device_found() ? 1 : 0) << detail;
  EXPECT_NE(detail[0], '\0');
}

TEST(Cuda, TheBackendIsBuiltAndSaysWhatItFound) {
  const std::string line = cuda_line();
  ASSERT_FALSE(line.empty()) << "--list-backends names no cuda backend";
#ifdef RTACCEL_HAVE_CUDA
  // nvcc was there at build time: the module loads, whether or not a GPU is.
  EXPECT_EQ(line.find("not part of this build"), std::string::npos) << line;
  EXPECT_EQ(line.find("cannot load"), std::string::npos) << line;
#else
  EXPECT_NE(line.find("not part of this build"), std::string::npos) << line;
#endif
  if (cuda_device_found()) {
    // A GPU is here: the line names it and direct invocation opens it.
    EXPECT_EQ(line.find("no CUDA device"), std::string::npos) << line;
    rtaccel_direct* d = nullptr;
    ASSERT_EQ(rtaccel_direct_open("cuda", 0, 0, &d), 0) << line;
    ASSERT_NE(d, nullptr);
    rtaccel_direct_close(d);
  } else {
    std::printf("no CUDA device here: %s\n", line.c_str());
    // The server refuses the backend with the reason instead of starting.
    FILE* p = popen((server_bin() + " --backend cuda --socket /tmp/rtaccel-no-gpu.sock 2>&1").c_str(), "r");
    ASSERT_TRUE(p);
    char buf[1024] = {};
    const size_t n = fread(buf, 1, sizeof(buf) - 1, p);
    const int status = pclose(p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << status;  // a runtime failure
    EXPECT_NE(std::string(buf, n).find("rtaccel-server: "), std::string::npos) << buf;
    rtaccel_direct* d = nullptr;
    EXPECT_EQ(rtaccel_direct_open("cuda", 0, 0, &d), -ENODEV);
  }
}

TEST(Cuda, HigherStreamPriorityOvertakesALowerBucket) {
  if (!cuda_device_found()) SKIP_WITHOUT("cuda", "no CUDA device: " << cuda_line());
  ServerProcess server({"--backend", "cuda", "--device", "0", "--levels", "2"});
  ASSERT_TRUE(server.ready());
  Client client(server);
  rtaccel_registration* low = client.reg(busy_chain("low", 1, 200 * kMs));
  rtaccel_registration* high = client.reg(busy_chain("high", 9));
  ASSERT_TRUE(low && high);
  rtaccel_registration_info li, hi;
  rtaccel_registration_query(low, &li);
  rtaccel_registration_query(high, &hi);
  ASSERT_EQ(li.bucket, 0u);
  ASSERT_EQ(hi.bucket, 1u);
  rtaccel_ticket tl, th;
  ASSERT_EQ(submit_busy(low, 200 * kMs, &tl), 0);
  ASSERT_TRUE(wait_started(low, tl));
  usleep(20000);  // the low kernel's blocks now hold the whole GPU
  ASSERT_EQ(submit_busy(high, 1 * kMs, &th), 0);
  ASSERT_EQ(rtaccel_wait(high, &th, 10 * kSecond, nullptr), 0);
  ASSERT_EQ(rtaccel_wait(low, &tl, 10 * kSecond, nullptr), 0);
  const rtaccel_request_times h = times_of(high, th), l = times_of(low, tl);
  EXPECT_LT(h.end_ns, l.end_ns);  // it did not wait for the 200 ms kernel
  EXPECT_LT(h.end_ns - h.submit_ns, 50 * kMs);
}

// Direct calls on attached (page-locked) memory, as the server's regions are:
// the same results, and the memory is the caller's again after detaching.
TEST(Direct, CallsOnAttachedMemoryGiveTheSameResults) {
  const char* backends[] = {"cpu", "cuda"};
  for (const char* backend : backends) {
    if (!strcmp(backend, "cuda") && !cuda_device_found()) {
      std::printf("[ SKIPPED  ] cuda part: no CUDA device: %s\n", cuda_line().c_str());
      continue;
    }
    rtaccel_direct* d;
    ASSERT_EQ(rtaccel_direct_open(backend, 0, 0, &d), 0) << backend;
    const size_t n = 1 << 20, size = 8 + 3 * n * sizeof(float);
    void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    ASSERT_EQ(rtaccel_direct_attach(d, mem, size), 0) << backend;
    EXPECT_EQ(rtaccel_direct_attach(d, mem, size), -EEXIST) << backend;
    EXPECT_EQ(rtaccel_direct_attach(d, nullptr, size), -EINVAL) << backend;
    EXPECT_EQ(rtaccel_direct_attach(d, mem, 0), -EINVAL) << backend;
    const rtaccel_vector_request h{uint32_t(n), 0};
    memcpy(mem, &h, 8);
    auto* x = reinterpret_cast<float*>(static_cast<char*>(mem) + 8);
    for (size_t i = 0; i < 2 * n; i++) x[i] = float(i % 1000);
    float* sum = x + 2 * n;
    size_t len = 0;
    ASSERT_EQ(rtaccel_direct_call(d, "vecadd", mem, 8 + 2 * n * sizeof(float), sum, n * sizeof(float), &len), 0)
        << backend;
    EXPECT_EQ(len, n * sizeof(float));
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += sum[i] != float(i % 1000) + float((n + i) % 1000);
    EXPECT_EQ(wrong, 0u) << backend;
    rtaccel_direct_detach(d, mem);
    rtaccel_direct_detach(d, mem);  // a second time: nothing attached, nothing done
    ASSERT_EQ(rtaccel_direct_attach(d, mem, size), 0) << backend;  // attachable again
    rtaccel_direct_close(d);  // detaches what is still attached
    munmap(mem, size);
  }
}

TEST(Direct, UnknownServicesBackendsAndDevicesAreRefused) {
  rtaccel_direct* d;
  ASSERT_EQ(rtaccel_direct_open("cpu", 0, 0, &d), 0);
  uint8_t request[8] = {}, response[8];
  size_t len = 0;
  EXPECT_EQ(rtaccel_direct_call(d, "nosuch", request, sizeof(request), response, sizeof(response), &len), -ENOENT);
  rtaccel_direct_close(d);
  EXPECT_EQ(rtaccel_direct_open("tpu", 0, 0, &d), -ENOENT);
  EXPECT_EQ(rtaccel_direct_open("cpu", 5000, 0, &d), -ENODEV);
}

// --- clients on another node (the gateway, --listen) ------------------------

// A port on 127.0.0.1 that nothing listens on now.
int free_port() {
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

const char kPeerPolicy[] = "allow:\n  - {user: root, priorities: [0, 99]}\n  - {peer: 127.0.0.1, priorities: [0, 20]}\n";

TEST(Remote, AClientOnAnotherNodeIsServedAndAdmittedAsALocalOne) {
  RemoteServer rs(kPeerPolicy);
  ASSERT_TRUE(rs.server->ready());
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(rs.address.c_str(), &c), 0);
  const uint32_t most = 1 << 16;
  auto d = busy_chain("remote", 9);
  d.nservices = 2;
  snprintf(d.services[1].name, 32, "vecadd");
  d.services[1].request_max = 8 + 2 * most * 4;
  d.services[1].response_max = most * 4;
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  ASSERT_EQ(register_desc(c, d, &r, why, sizeof(why)), 0) << why;
  rtaccel_registration_info info;
  rtaccel_registration_query(r, &info);
  EXPECT_EQ(info.priority, 9);
  // the results of a service, over the link: a small request, and one of
  // 512 KiB that crosses it in several chunks
  const int s = rtaccel_service_index(r, "vecadd");
  for (uint32_t n : {64u, most}) {
    auto* v = static_cast<rtaccel_vector_request*>(rtaccel_request_buffer(r, s, nullptr));
    v->n = n;
    float* x = reinterpret_cast<float*>(v + 1);
    for (uint32_t i = 0; i < 2 * n; i++) x[i] = float(i);
    size_t len = 0;
    ASSERT_EQ(rtaccel_call(r, s, 8 + 2 * n * 4, 5 * kSecond, &len), 0) << n << " elements";
    EXPECT_EQ(len, n * 4);
    const float* y = static_cast<const float*>(rtaccel_response_buffer(r, s, nullptr));
    for (uint32_t i = 0; i < n; i++) ASSERT_EQ(y[i], float(i) + float(n + i)) << n << " elements, " << i;
  }
  // one request in flight; wait, poll and timeouts as for a local client
  rtaccel_ticket t, extra;
  ASSERT_EQ(submit_busy(r, 200 * kMs, &t), 0);
  EXPECT_EQ(submit_busy(r, kMs, &extra), -EBUSY);
  EXPECT_EQ(rtaccel_poll(r, &t, nullptr), -EAGAIN);
  rtaccel_remote_times hops;
  EXPECT_EQ(rtaccel_request_remote_times(r, &t, &hops), -EAGAIN);
  EXPECT_EQ(rtaccel_wait(r, &t, 10 * kMs, nullptr), -ETIMEDOUT);
  ASSERT_EQ(rtaccel_wait(r, &t, 10 * kSecond, nullptr), 0);
  // the server's timestamps come across (one clock: both ends on this
  // machine), and the gateway's hops fall in order around them
  const rtaccel_request_times times = times_of(r, t);
  EXPECT_GE(times.start_ns, times.submit_ns);
  EXPECT_GT(times.end_ns, times.start_ns);
  ASSERT_EQ(rtaccel_request_remote_times(r, &t, &hops), 0);
  EXPECT_LE(times.submit_ns, hops.gateway_arrival_ns);
  EXPECT_LE(hops.gateway_arrival_ns, hops.gateway_taken_ns);
  EXPECT_LE(hops.gateway_taken_ns, times.start_ns);
  EXPECT_LE(times.end_ns, hops.gateway_reply_ns);
  EXPECT_LE(hops.gateway_reply_ns, hops.arrival_ns);
  const rtaccel_ticket first = t;
  ASSERT_EQ(submit_busy(r, kMs, &t), 0);
  ASSERT_EQ(rtaccel_wait(r, &t, 10 * kSecond, nullptr), 0);
  EXPECT_EQ(rtaccel_request_remote_times(r, &first, &hops), -ESTALE);
  // the same callback cannot register twice, remote or local
  rtaccel_registration* again = nullptr;
  EXPECT_EQ(register_desc(c, d, &again, why, sizeof(why)), -EEXIST);
  Client local(*rs.server);
  EXPECT_EQ(register_desc(local.c, d, &again, why, sizeof(why)), -EEXIST);
  // unregistered, it can
  rtaccel_client_unregister(r);
  ASSERT_EQ(register_desc(c, d, &r, why, sizeof(why)), 0) << why;
  ASSERT_EQ(submit_busy(r, kMs, &t), 0);
  EXPECT_EQ(rtaccel_wait(r, &t, 10 * kSecond, nullptr), 0);
  rtaccel_client_close(c);
}

TEST(Remote, ThePolicyNamesWhichPeersMayClaimWhichPriorities) {
  RemoteServer rs(kPeerPolicy, {"--epsilon-us", "50", "--kappa-us", "50"});
  ASSERT_TRUE(rs.server->ready());
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(rs.address.c_str(), &c), 0);
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  EXPECT_EQ(register_desc(c, busy_chain("greedy", 30), &r, why, sizeof(why)), -EPERM);
  EXPECT_NE(std::string(why).find("peer 127.0.0.1 may register chain priorities 0..20 only, not 30"),
            std::string::npos)
      << why;
  // chains are declared on the server's node
  const rtaccel_chain_desc declared = busy_chain("declared", 5).chain;
  EXPECT_EQ(rtaccel_client_declare(c, &declared, 1, why, sizeof(why)), -EOPNOTSUPP);
  EXPECT_NE(std::string(why).find("on its own node"), std::string::npos) << why;
  // admission control answers a remote client as it answers a local one
  CallbackSpec hot{.name = "sensor", .executor = "e1", .core = 0, .wcet_ns = 10 * kMs};
  auto hd = one_callback("hot", 10, 100 * kMs, hot);
  hd.chain.deadline_ns = 20 * kMs;
  ASSERT_EQ(register_desc(c, hd, &r, why, sizeof(why)), 0) << why;
  CallbackSpec heavy{.name = "planner", .executor = "e2", .core = 0, .executor_priority = 40, .wcet_ns = 15 * kMs};
  EXPECT_EQ(register_desc(c, one_callback("heavy", 20, 100 * kMs, heavy), &r, why, sizeof(why)), -EDEADLK);
  EXPECT_NE(std::string(why).find("chain 'hot': bound"), std::string::npos) << why;
  rtaccel_client_close(c);

  // A peer the policy does not name cannot connect at all.
  RemoteServer other("allow:\n  - {peer: 127.0.0.2, priorities: [0, 99]}\n");
  ASSERT_TRUE(other.server->ready());
  rtaccel_client* stranger = nullptr;
  EXPECT_NE(rtaccel_client_connect(other.address.c_str(), &stranger), 0);

  // --listen without a peer in the policy: the server says so and stops.
  RemoteServer none("allow:\n  - {user: root, priorities: [0, 99]}\n");
  EXPECT_FALSE(none.server->ready());
}

TEST(Remote, AClientDyingMidRequestLeavesNothingBehind) {
  RemoteServer rs(kPeerPolicy);
  ASSERT_TRUE(rs.server->ready());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    rtaccel_client* c;
    rtaccel_registration* r;
    if (int err = rtaccel_client_connect(rs.address.c_str(), &c)) _exit(10 + (-err % 100));
    char why[256] = "";
    if (register_desc(c, busy_chain("doomed", 5, 500 * kMs), &r, why, sizeof(why))) {
      fprintf(stderr, "remote registration refused: %s\n", why);
      _exit(2);
    }
    rtaccel_ticket t;
    if (submit_busy(r, 300 * kMs, &t)) _exit(3);
    char ok = 1;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  close(ready[1]);  // a child that fails before it is ready gives end of file
  char ok = 0;
  const ssize_t got = read(ready[0], &ok, 1);
  if (got != 1) {
    int status = 0;
    waitpid(child, &status, 0);
    FAIL() << "the remote client did not get ready: " << core::describe_wait_status(status);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // Its registration goes with its link (once the request in hand is done):
  // the same callback registers again, here from a local client.
  Client local(*rs.server);
  rtaccel_registration* r = nullptr;
  int err = -EEXIST;
  const uint64_t deadline = core::monotonic_ns() + 5 * kSecond;
  while (err == -EEXIST && core::monotonic_ns() < deadline) {
    err = register_desc(local.c, busy_chain("doomed", 5, 500 * kMs), &r, nullptr, 0);
    if (err == -EEXIST) usleep(20000);
  }
  EXPECT_EQ(err, 0);
  close(ready[0]);
}

// A remote client's registrations go with its link. A child forked from the
// client's process has copies of the link's descriptors: it must neither use
// the registrations nor, by living on, keep them after the parent ended.
TEST(Remote, AForkedChildNeitherUsesNorKeepsItsParentsRegistrations) {
  RemoteServer rs(kPeerPolicy);
  ASSERT_TRUE(rs.server->ready());
  ClientCheck refused = [](rtaccel_client* c, rtaccel_registration* r) {
    rtaccel_ticket t{};  // well-formed: poll checks a ticket before whose client it is
    rtaccel_registration* other = nullptr;
    const bool held = submit_busy(r, kMs, &t) == -ENOTCONN && rtaccel_poll(r, &t, nullptr) == -ENOTCONN &&
                      register_desc(c, busy_chain("child", 5), &other, nullptr, 0) == -ENOTCONN;
    rtaccel_client_close(c);
    return held;
  };
  ClientCheck still_served = [](rtaccel_client*, rtaccel_registration* r) {
    rtaccel_ticket t;  // the child's close left the parent's registration
    return submit_busy(r, kMs, &t) == 0 && rtaccel_wait(r, &t, 10 * kSecond, nullptr) == 0;
  };
  int status = 0;
  LeftChild child{client_that_ends_leaving_a_child(rs.address.c_str(), "forking", refused, still_served, &status)};
  ASSERT_GT(child.pid, 0) << core::describe_wait_status(status);

  // The parent's registration went with it: the same callback registers again.
  Client local(*rs.server);
  rtaccel_registration* r = nullptr;
  int err = -EEXIST;
  const uint64_t deadline = core::monotonic_ns() + 5 * kSecond;
  while (err == -EEXIST && core::monotonic_ns() < deadline) {
    err = register_desc(local.c, busy_chain("forking", 5), &r, nullptr, 0);
    if (err == -EEXIST) usleep(20000);
  }
  EXPECT_EQ(err, 0) << "the gateway keeps the registration of a process that ended, while its child lives";
  EXPECT_EQ(kill(child.pid, 0), 0) << "the child ended before the check";
}

// The gateway out of descriptors: each peer that comes is refused at once,
// its connect fails, the log says so once, and the gateway's thread waits
// for the next peer instead of spinning on the one it could not take.
TEST(Remote, OutOfDescriptorsTheGatewayRefusesPeersAtOnceWithoutSpinning) {
  RemoteServer rs(kPeerPolicy, {}, /*keep_log=*/true);
  ASSERT_TRUE(rs.server->ready());
  const rlim_t limit = rs.server->open_fds() + 9;
  const rlimit low{limit, limit};
  ASSERT_EQ(prlimit(rs.server->pid(), RLIMIT_NOFILE, &low, nullptr), 0) << strerror(errno);
  std::vector<rtaccel_client*> clients;
  int refused = 0;
  for (int i = 0; i < 12; i++) {
    rtaccel_client* c = nullptr;
    const uint64_t asked = core::monotonic_ns();
    if (int err = rtaccel_client_connect(rs.address.c_str(), &c)) {
      refused++;
      EXPECT_LT(core::monotonic_ns() - asked, 2 * kSecond) << "refused late: " << strerror(-err);
    } else {
      clients.push_back(c);
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(clients.size(), 0u);
  const uint64_t cpu_before = cpu_ns_of(rs.server->pid());
  usleep(1000000);
  const uint64_t cpu = cpu_ns_of(rs.server->pid()) - cpu_before;
  EXPECT_LT(cpu, 300 * kMs) << "the server used " << cpu / kMs << " ms of CPU in the second after";
  const std::string log = rs.server->log();
  EXPECT_EQ(count_of(log, "no descriptor left for a peer"), 1u) << log.substr(0, 2000);

  for (rtaccel_client* c : clients) rtaccel_client_close(c);
  // The gateway lets a session's descriptors go once it has seen its end.
  int err = -1;
  for (const uint64_t deadline = core::monotonic_ns() + 5 * kSecond; err && core::monotonic_ns() < deadline;) {
    rtaccel_client* c = nullptr;
    err = rtaccel_client_connect(rs.address.c_str(), &c);
    if (err) usleep(100000);
    rtaccel_client_close(c);
  }
  EXPECT_EQ(err, 0);
  EXPECT_NE(rs.server->log().find("accepting peers again; "), std::string::npos) << rs.server->log().substr(0, 2000);
}

TEST(Remote, ADeadServerFailsARemoteWaitInsteadOfHangingIt) {
  RemoteServer rs(kPeerPolicy);
  ASSERT_TRUE(rs.server->ready());
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(rs.address.c_str(), &c), 0);
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  ASSERT_EQ(register_desc(c, busy_chain("victim", 1, 5 * kSecond), &r, why, sizeof(why)), 0) << why;
  rtaccel_ticket t;
  ASSERT_EQ(submit_busy(r, 5 * kSecond, &t), 0);
  usleep(100000);
  rs.server->kill_now();
  const uint64_t start = core::monotonic_ns();
  EXPECT_EQ(rtaccel_wait(r, &t, 0, nullptr), -EPIPE);
  EXPECT_LT(core::monotonic_ns() - start, 2 * kSecond);
  rtaccel_registration* late = nullptr;
  EXPECT_EQ(register_desc(c, busy_chain("late", 1), &late, why, sizeof(why)), -EPIPE);
  rtaccel_client_close(c);
}

// The gateway takes whatever the peer sends: malformed requests are answered
// with -EINVAL, a malformed control message ends only that session.
// Voluntary context switches of the calling thread so far: a thread that
// sleeps makes one each time; one that spins, none.
long voluntary_switches() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_nvcsw;
}

// A remote registration that asks to spin busy-waits for its response once
// its link's receive thread runs above its executor, as a local one does for
// the server; where the receive thread cannot outrank the executor (at 99),
// or the registration suspends, the wait sleeps. The gateway sleeps for the
// server whatever the peer's mode: on this machine, a gateway thread that
// spun at 99 while the worker ran the request on the other core left this
// thread no core, so that its waits found the response there already.
TEST(Remote, TheGatewaysThreadRunsOnTheCoreAdmissionControlGaveTheCallback) {
  RemoteServer rs(kPeerPolicy);
  ASSERT_TRUE(rs.server->ready());
  // The server's own threads run where this test does, off the device core
  // (KeepOffTheDeviceCore); the callbacks' executors are on that core.
  const std::vector<std::string> own = rs.server->cores_of_threads("rtaccel-server");
  ASSERT_FALSE(own.empty());
  const int last = int(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(rs.address.c_str(), &c), 0);
  auto register_on = [&](const char* name, int core, rtaccel_wait_mode wait) {
    CallbackSpec cb{.name = std::string(name) + "-cb", .executor = std::string(name) + "-ex", .core = core,
                    .wcet_ns = kMs, .wait = wait};
    rtaccel_registration* r = nullptr;
    char why[256] = "";
    EXPECT_EQ(register_desc(c, one_callback(name, 5, 10 * kSecond, cb, 64, 64, false), &r, why, sizeof(why)), 0)
        << why;
    // Its thread has set itself up once it has answered a request.
    rtaccel_ticket t;
    if (r && submit_busy(r, 10000, &t) == 0) {
      EXPECT_EQ(rtaccel_wait(r, &t, 10 * kSecond, nullptr), 0);
    }
    return r;
  };
  // A suspending callback's thread is where the analysis reads the
  // callback: its executor's core, as a core of the server's machine.
  ASSERT_TRUE(register_on("sleeping", last, RTACCEL_WAIT_SUSPEND));
  EXPECT_EQ(rs.server->cores_of_threads("rtaccel-gw"), std::vector<std::string>{std::to_string(last)});
  // A spinning one's is not pinned: on one machine its client would spin on
  // that core above it.
  ASSERT_TRUE(register_on("spinning", last, RTACCEL_WAIT_SPIN));
  std::vector<std::string> expected = {own[0], std::to_string(last)};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(rs.server->cores_of_threads("rtaccel-gw"), expected);
  rtaccel_client_close(c);
}

TEST(Remote, ASpinningClientOnTheServersCoreIsServedFromAnotherCore) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) SKIP_WITHOUT("cores2", "one core: nowhere else to serve it from");
  // The server may use every core and pins its control thread to core 0,
  // the core this client spins on, as `rtaccel bench request-overhead
  // --remote --wait spin` places the two nodes on one machine. The
  // gateway's threads inherited that pin and waited behind the spinner.
  // The test's own cores and policy back whatever fails below.
  struct Restore {
    cpu_set_t cores;
    ~Restore() {
      sched_param p{};
      sched_setscheduler(0, SCHED_OTHER, &p);
      sched_setaffinity(0, sizeof(cores), &cores);
    }
  } restore;
  ASSERT_EQ(sched_getaffinity(0, sizeof(restore.cores), &restore.cores), 0);
  cpu_set_t every;
  CPU_ZERO(&every);
  for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN); c++) CPU_SET(int(c), &every);
  ASSERT_EQ(sched_setaffinity(0, sizeof(every), &every), 0);
  RemoteServer rs(kPeerPolicy, {"--server-core", "0"});
  cpu_set_t zero;
  CPU_ZERO(&zero);
  CPU_SET(0, &zero);
  ASSERT_EQ(sched_setaffinity(0, sizeof(zero), &zero), 0);
  ASSERT_TRUE(rs.server->ready());
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(rs.address.c_str(), &c), 0);
  CallbackSpec cb{.name = "spinner-cb", .executor = "spinner-ex", .core = 0, .wcet_ns = 10 * kMs,
                  .wait = RTACCEL_WAIT_SPIN};
  cb.executor_priority = 40;
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  ASSERT_EQ(register_desc(c, one_callback("spinner", 5, 10 * kSecond, cb, 64, 64, false), &r, why, sizeof(why)),
            0) << why;
  // The client at its executor's priority, as an executor runs it; its
  // link's receive thread one above.
  sched_param p{};
  p.sched_priority = 40;
  if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) {
    rtaccel_client_close(c);
    SKIP_WITHOUT("fifo", "the client cannot spin at SCHED_FIFO: " << strerror(errno));
  }
  int result = 0;
  for (int i = 0; i < 3 && result == 0; i++) {
    rtaccel_ticket t;
    result = submit_busy(r, kMs, &t);
    if (result == 0) result = rtaccel_wait(r, &t, 2 * kSecond, nullptr);
  }
  p.sched_priority = 0;
  sched_setscheduler(0, SCHED_OTHER, &p);
  EXPECT_EQ(result, 0) << strerror(-result);
  // The registration's thread may leave the server's core; the server's
  // own control thread stays on it.
  const std::vector<std::string> gw = rs.server->cores_of_threads("rtaccel-gw");
  ASSERT_EQ(gw.size(), 1u);
  EXPECT_NE(gw[0], "0");
  rtaccel_client_close(c);
}

TEST(Remote, ASpinningWaitBusyWaitsOnlyWhereTheReceiveThreadOutranksIt) {
  RemoteServer rs(kPeerPolicy);
  ASSERT_TRUE(rs.server->ready());
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(rs.address.c_str(), &c), 0);
  auto register_at = [&](const char* name, int executor_priority, rtaccel_wait_mode wait) {
    CallbackSpec cb{.name = std::string(name) + "-cb", .executor = std::string(name) + "-ex", .core = 0,
                    .wcet_ns = 30 * kMs, .wait = wait};
    cb.executor_priority = executor_priority;
    rtaccel_registration* r = nullptr;
    char why[256] = "";
    EXPECT_EQ(register_desc(c, one_callback(name, 5, 10 * kSecond, cb, 64, 64, false), &r, why, sizeof(why)), 0)
        << why;
    return r;
  };
  // The switches one wait of 20 ms made, and its result.
  auto one_wait = [](rtaccel_registration* r, long* switches) {
    rtaccel_ticket t;
    if (int err = submit_busy(r, 20 * kMs, &t)) return err;
    const long before = voluntary_switches();
    const int err = rtaccel_wait(r, &t, 10 * kSecond, nullptr);
    *switches = voluntary_switches() - before;
    return err;
  };
  rtaccel_registration* spinning = register_at("spinning", 40, RTACCEL_WAIT_SPIN);
  rtaccel_registration* top = register_at("top", 99, RTACCEL_WAIT_SPIN);
  rtaccel_registration* sleeping = register_at("sleeping", 40, RTACCEL_WAIT_SUSPEND);
  ASSERT_TRUE(spinning && top && sleeping);
  long switches = -1;
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(one_wait(sleeping, &switches), 0);
    EXPECT_GE(switches, 1) << "a suspending wait that never slept";
    ASSERT_EQ(one_wait(top, &switches), 0);
    EXPECT_GE(switches, 1) << "a spinning wait above its receive thread that never slept";
  }
  // The receive thread goes to 41 where this process may schedule it so.
  sched_param p{};
  p.sched_priority = 41;
  if (sched_setscheduler(0, SCHED_FIFO, &p) != 0)
    SKIP_WITHOUT("fifo", "the receive thread cannot run at SCHED_FIFO: " << strerror(errno));
  p.sched_priority = 0;
  sched_setscheduler(0, SCHED_OTHER, &p);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(one_wait(spinning, &switches), 0);
    EXPECT_EQ(switches, 0) << "a spinning wait slept";
  }
  // The responses are right, and the hops as for a sleeping wait.
  rtaccel_ticket t;
  ASSERT_EQ(submit_busy(spinning, kMs, &t), 0);
  ASSERT_EQ(rtaccel_wait(spinning, &t, 10 * kSecond, nullptr), 0);
  rtaccel_remote_times hops;
  ASSERT_EQ(rtaccel_request_remote_times(spinning, &t, &hops), 0);
  EXPECT_LE(times_of(spinning, t).end_ns, hops.gateway_reply_ns);
  EXPECT_LE(hops.gateway_reply_ns, hops.arrival_ns);
  // A timeout ends a spinning wait as a sleeping one.
  ASSERT_EQ(submit_busy(spinning, 200 * kMs, &t), 0);
  EXPECT_EQ(rtaccel_wait(spinning, &t, 10 * kMs, nullptr), -ETIMEDOUT);
  EXPECT_EQ(rtaccel_wait(spinning, &t, 10 * kSecond, nullptr), 0);
  rtaccel_client_close(c);
}

// A peer that speaks the gateway's protocol by hand (accel/remote.h),
// registered on slot 0 with a busy service: what a hostile or broken client
// can send.
struct RawPeer {
  rtaccel_net_link_t* link = nullptr;
  rtaccel_net_channel_t *control = nullptr, *requests = nullptr, *responses = nullptr;
  uint64_t control_seen = 0, responses_seen = 0;

  // Connects, says hello until the gateway answers and registers; false
  // with the gtest failure said.
  bool open(const std::string& address, const rtaccel_registration_desc& desc) {
    rtaccel_net_options o;
    rtaccel_net_options_default(&o);
    o.max_transfer = kRemoteMaxTransfer;
    EXPECT_EQ(rtaccel_net_connect(address.c_str(), "raw", &o, 5 * kSecond, &link), 0);
    if (!link) return false;
    rtaccel_net_channel_attr a{};
    a.id = kControlChannel;
    a.max_size = sizeof(RemoteControl);
    EXPECT_EQ(rtaccel_net_channel_open(link, &a, &control), 0);
    a = {};
    a.id = request_channel(0);
    EXPECT_EQ(rtaccel_net_channel_open(link, &a, &requests), 0);
    a = {};
    a.id = response_channel(0);
    a.max_size = 1 << 16;
    EXPECT_EQ(rtaccel_net_channel_open(link, &a, &responses), 0);
    if (!control || !requests || !responses) return false;
    rtaccel_net_msg msg;
    auto m = std::make_unique<RemoteControl>();
    m->magic = kRemoteMagic;
    m->version = kRemoteVersion;
    m->type = uint32_t(RemoteType::kHello);
    int answered = -ETIMEDOUT;
    for (int i = 0; i < 50 && answered == -ETIMEDOUT; i++) {  // until the gateway has its channel open
      EXPECT_EQ(rtaccel_net_send(control, m.get(), sizeof(*m), 0, kSecond), 0);
      answered = rtaccel_net_take(control, &control_seen, 100 * kMs, &msg);
    }
    EXPECT_EQ(answered, 0);
    if (answered) return false;
    rtaccel_net_release(&msg);
    usleep(200000);  // and the answers to the other hellos, taken below as older
    m->type = uint32_t(RemoteType::kRegister);
    m->slot = 0;
    m->desc = desc;
    EXPECT_EQ(rtaccel_net_send(control, m.get(), sizeof(*m), 0, kSecond), 0);
    RemoteControl reply{};
    do {  // skipping late answers to hellos
      if (rtaccel_net_take(control, &control_seen, 5 * kSecond, &msg)) {
        ADD_FAILURE() << "no answer to the registration";
        return false;
      }
      EXPECT_EQ(msg.len, sizeof(reply));
      memcpy(&reply, msg.data, std::min(msg.len, sizeof(reply)));
      rtaccel_net_release(&msg);
    } while (reply.type == uint32_t(RemoteType::kHello));
    EXPECT_EQ(reply.type, uint32_t(RemoteType::kRegistered));
    EXPECT_EQ(reply.status, 0) << reply.message;
    return reply.type == uint32_t(RemoteType::kRegistered) && reply.status == 0;
  }
  ~RawPeer() {
    if (link) rtaccel_net_close(link);
  }

  // The next response, or one with status -ETIMEDOUT.
  RemoteResponse response() {
    RemoteResponse h{};
    h.status = -ETIMEDOUT;
    rtaccel_net_msg r;
    if (rtaccel_net_take(responses, &responses_seen, 5 * kSecond, &r) == 0) {
      if (r.len >= sizeof(h)) memcpy(&h, r.data, sizeof(h));
      rtaccel_net_release(&r);
    }
    return h;
  }
};

TEST(Remote, MalformedMessagesAreRefusedAndTheServerGoesOn) {
  RemoteServer rs(kPeerPolicy);
  ASSERT_TRUE(rs.server->ready());
  RawPeer peer;
  ASSERT_TRUE(peer.open(rs.address, busy_chain("raw", 5)));
  rtaccel_net_msg msg;
  struct {
    RemoteRequest h;
    uint64_t ns;
  } req{};
  auto answer = [&](size_t len) {
    EXPECT_EQ(rtaccel_net_send(peer.requests, &req, len, 0, kSecond), 0);
    return peer.response().status;
  };
  req.h = {kRemoteMagic, 7, 1, 8};  // a service the registration does not have
  EXPECT_EQ(answer(sizeof(req)), -EINVAL);
  req.h = {kRemoteMagic, 0, 2, 1u << 30};  // longer than the buffer
  EXPECT_EQ(answer(sizeof(req)), -EINVAL);
  req.h = {kRemoteMagic, 0, 3, 8};
  EXPECT_EQ(answer(sizeof(req) - 4), -EINVAL);  // shorter than it says
  req.h = {0xdeadbeef, 0, 4, 8};
  EXPECT_EQ(answer(sizeof(req)), -EINVAL);
  req.h = {kRemoteMagic, 0, 5, 8};
  req.ns = kMs;
  EXPECT_EQ(answer(sizeof(req)), 0);  // and a good one still runs
  // a control message that is not one: the session ends, the link closes
  char junk[64];
  memset(junk, 0x5a, sizeof(junk));
  ASSERT_EQ(rtaccel_net_send(peer.control, junk, sizeof(junk), 0, kSecond), 0);
  EXPECT_NE(rtaccel_net_take(peer.responses, &peer.responses_seen, 5 * kSecond, &msg), -ETIMEDOUT);
  // the server goes on: another remote client is served
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(rs.address.c_str(), &c), 0);
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  ASSERT_EQ(register_desc(c, busy_chain("after", 5), &r, why, sizeof(why)), 0) << why;
  rtaccel_ticket t;
  ASSERT_EQ(submit_busy(r, kMs, &t), 0);
  EXPECT_EQ(rtaccel_wait(r, &t, 10 * kSecond, nullptr), 0);
  rtaccel_client_close(c);
}

// A peer's request that comes while its previous one runs waits on the
// link; the gateway's thread for the registration takes it once it has
// answered the first: never skipped, and not left to the thread's next look.
TEST(Remote, ARequestThatComesWhileAnotherRunsIsAnsweredAfterIt) {
  RemoteServer rs(kPeerPolicy);
  ASSERT_TRUE(rs.server->ready());
  RawPeer peer;
  ASSERT_TRUE(peer.open(rs.address, busy_chain("raw", 5)));
  struct {
    RemoteRequest h;
    uint64_t ns;
  } req{};
  int late = 0;
  for (uint64_t seq = 1; seq <= 20; seq += 2) {
    req.h = {kRemoteMagic, 0, seq, 8};
    req.ns = 20 * kMs;
    ASSERT_EQ(rtaccel_net_send(peer.requests, &req, sizeof(req), 0, kSecond), 0);
    req.h.seq = seq + 1;
    req.ns = kMs;
    ASSERT_EQ(rtaccel_net_send(peer.requests, &req, sizeof(req), 0, kSecond), 0);
    RemoteResponse h = peer.response();
    if (h.seq == seq) {
      EXPECT_EQ(h.status, 0);
      h = peer.response();
    }
    const uint64_t waited_ns = h.gateway_taken_ns - h.gateway_arrival_ns;
    ASSERT_EQ(h.seq, seq + 1) << "the second request was not answered (status " << h.status << ")";
    EXPECT_EQ(h.status, 0);
    // It waited for the first one's 20 ms in the channel, and was taken
    // when that was answered, not at the thread's next look (every 100 ms),
    // which would make every round late.
    if (waited_ns >= 80 * kMs) {
      printf("request %lu taken %lu ms after it arrived\n", (unsigned long)(seq + 1), (unsigned long)(waited_ns / kMs));
      late++;
    }
  }
  EXPECT_LE(late, 3) << "of 10";
}

// --- every backend alike: the built-in services ------------------------------

// One request to a built-in service and what every backend must answer: the
// status, and for a success the result a reference computed here gives (in
// long double, or exactly where the arithmetic is exact in float).
struct ServiceCase {
  std::string what;
  int service = RTACCEL_BUSY;  // enum rtaccel_builtin
  std::vector<uint8_t> request;
  int status = 0;
  std::vector<float> sums;       // vecadd, matmul: the result, element by element
  double total = 0;              // reduction: the sum ...
  double tolerance = 0;          // ... within this
  std::vector<uint32_t> counts;  // histogram
  bool needs_double = false;     // the answer asks for double arithmetic
};

constexpr const char* kServiceNames[RTACCEL_BUILTINS] = {"busy", "vecadd", "matmul", "reduction", "histogram"};

std::vector<uint8_t> request_of(int service, uint64_t n, uint32_t bins, float lo, float hi,
                                const std::vector<float>& inputs) {
  uint64_t floats = 0, response = 0;
  EXPECT_EQ(rtaccel_request_sizes(service, n, bins, &floats, &response), 0);
  std::vector<uint8_t> bytes(rtaccel_request_header_size(service) + floats * sizeof(float));
  EXPECT_EQ(rtaccel_request_encode(service, n, bins, lo, hi, bytes.data(), bytes.size()), long(bytes.size()));
  EXPECT_EQ(inputs.size(), floats);
  if (!inputs.empty())  // an empty vector's data() may be null, which memcpy may not take
    memcpy(bytes.data() + rtaccel_request_header_size(service), inputs.data(), inputs.size() * sizeof(float));
  return bytes;
}

// A header the encoder would refuse, written as a hostile client would.
template <typename Header>
std::vector<uint8_t> raw_request(const Header& h, size_t floats) {
  std::vector<uint8_t> bytes(sizeof(h) + floats * sizeof(float));
  memcpy(bytes.data(), &h, sizeof(h));
  return bytes;
}

ServiceCase vecadd_case(const std::string& what, uint32_t n) {
  std::vector<float> in(2 * size_t(n));
  for (size_t i = 0; i < in.size(); i++) in[i] = float(int(i % 2003) - 1000) * 0.37f;
  ServiceCase c{.what = what, .service = RTACCEL_VECADD, .request = request_of(RTACCEL_VECADD, n, 0, 0, 0, in)};
  for (size_t i = 0; i < n; i++) c.sums.push_back(in[i] + in[n + i]);  // one IEEE addition each
  return c;
}

ServiceCase matmul_case(uint32_t n) {
  // Small integers: every product and partial sum is exact in float, so any
  // order of summation (cuBLAS's, a work-item's) gives the same result.
  std::vector<float> in(2 * size_t(n) * n);
  for (size_t i = 0; i < in.size(); i++) in[i] = float(int((i * 7 + i / 5) % 9) - 4);
  ServiceCase c{.what = "matmul " + std::to_string(n) + "x" + std::to_string(n), .service = RTACCEL_MATMUL,
                .request = request_of(RTACCEL_MATMUL, n, 0, 0, 0, in)};
  const float* a = in.data();
  const float* b = a + size_t(n) * n;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = 0; j < n; j++) {
      long sum = 0;
      for (uint32_t k = 0; k < n; k++) sum += long(a[i * n + k]) * long(b[k * n + j]);
      c.sums.push_back(float(sum));
    }
  return c;
}

ServiceCase reduction_case(const std::string& what, const std::vector<float>& x) {
  ServiceCase c{.what = what, .service = RTACCEL_REDUCTION,
                .request = request_of(RTACCEL_REDUCTION, x.size(), 0, 0, 0, x)};
  long double sum = 0, magnitude = 0;
  for (float v : x) sum += v, magnitude += std::fabs(v);
  c.total = double(sum);
  // What a sum in double may be off by (about n ulps of the magnitude); a
  // sum in float is off by far more on the cases below.
  c.tolerance = double(magnitude) * double(x.size()) * 1.2e-16;
  return c;
}

ServiceCase histogram_case(const std::string& what, uint32_t bins, float lo, float hi, const std::vector<float>& x) {
  ServiceCase c{.what = what, .service = RTACCEL_HISTOGRAM,
                .request = request_of(RTACCEL_HISTOGRAM, x.size(), bins, lo, hi, x)};
  c.counts.assign(bins, 0);
  for (float v : x) {
    if (!(v >= lo && v < hi)) continue;
    const long double at = (static_cast<long double>(v) - lo) / (static_cast<long double>(hi) - lo) * bins;
    c.counts[std::min<uint64_t>(uint64_t(at), bins - 1)]++;
  }
  return c;
}

// The centre of each of BINS bins over [lo, hi), REPEAT times: no rounding
// puts one in a neighbour's bin.
std::vector<float> bin_centres(uint32_t bins, double lo, double hi, uint32_t repeat) {
  std::vector<float> x;
  for (uint32_t r = 0; r < repeat; r++)
    for (uint32_t b = 0; b < bins; b++) x.push_back(float(lo + (hi - lo) * (b + 0.5) / bins));
  return x;
}

std::vector<ServiceCase> service_cases() {
  std::vector<ServiceCase> cases;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  cases.push_back({.what = "busy 0 ns", .service = RTACCEL_BUSY, .request = request_of(RTACCEL_BUSY, 0, 0, 0, 0, {})});
  cases.push_back(vecadd_case("vecadd of nothing", 0));
  cases.push_back(vecadd_case("vecadd of one", 1));
  cases.push_back(vecadd_case("vecadd of 100 003", 100003));  // not a multiple of any work-group
  for (uint32_t n : {0u, 1u, 3u, 17u, 64u}) cases.push_back(matmul_case(n));
  cases.push_back(reduction_case("reduction of nothing", {}));
  cases.push_back(reduction_case("reduction of one", {1.5f}));
  {
    std::vector<float> x(100003);
    for (size_t i = 0; i < x.size(); i++) x[i] = float(int(i % 10) - 3);
    cases.push_back(reduction_case("reduction of small integers", x));
  }
  {
    // 2^24 and then ones: a float accumulator that starts from 2^24 never
    // moves again.
    std::vector<float> x(100000, 1.0f);
    x[0] = 16777216.0f;
    cases.push_back(reduction_case("reduction of 2^24 and ones", x));
    cases.back().needs_double = true;
  }
  {
    std::vector<float> x(1 << 20);
    for (size_t i = 0; i < x.size(); i++) x[i] = 0.1f + float(i % 7) * 0.013f;
    cases.push_back(reduction_case("reduction of a million fractions", x));
    cases.back().needs_double = true;
  }
  cases.push_back(histogram_case("histogram of nothing", 5, 0.0f, 1.0f, {}));
  cases.push_back(histogram_case("histogram, 4 bins", 4, 0.0f, 4.0f, bin_centres(4, 0, 4, 25)));
  cases.push_back(histogram_case("histogram, 1000 bins", 1000, -10.0f, 10.0f, bin_centres(1000, -10, 10, 101)));
  cases.push_back(histogram_case("histogram, one bin", 1, -1.0f, 1.0f, {-1.0f, 0.0f, 0.999f, 1.0f, 2.0f}));
  // lo is in the first bin, hi in none, the float below hi in the last;
  // whatever is not a number in [lo, hi) in none.
  cases.push_back(histogram_case("histogram's edges", 3, -1.5f, 1.5f,
                                 {-1.5f, 1.5f, std::nextafter(1.5f, 0.0f), std::nextafter(-1.5f, -2.0f), -7.0f,
                                  nan, inf, -inf, 0.0f, -0.0f}));
  // Wider than a float can hold from end to end: x - lo overflows in float.
  cases.push_back(histogram_case("histogram over [-3e38, 3e38)", 6, -3e38f, 3e38f, bin_centres(6, -3e38, 3e38, 3)));
  cases.back().needs_double = true;
  cases.push_back(histogram_case("histogram over [1, 1 + 1/64)", 8, 1.0f, 1.0f + 1.0f / 64,
                                 bin_centres(8, 1.0, 1.0 + 1.0 / 64, 3)));
  // Refused alike: each is -EINVAL from every backend.
  auto refused = [&](const std::string& what, int service, std::vector<uint8_t> request) {
    cases.push_back({.what = what, .service = service, .request = std::move(request), .status = -EINVAL});
  };
  refused("busy of more than an hour", RTACCEL_BUSY, raw_request(rtaccel_busy_request{RTACCEL_BUSY_MAX_NS + 1}, 0));
  refused("busy shorter than its header", RTACCEL_BUSY, std::vector<uint8_t>(4));
  refused("vecadd of more than it holds", RTACCEL_VECADD, raw_request(rtaccel_vector_request{10, 0}, 19));
  refused("matmul past 8192", RTACCEL_MATMUL, raw_request(rtaccel_vector_request{RTACCEL_MATMUL_MAX_N + 1, 0}, 0));
  refused("reduction of more than it holds", RTACCEL_REDUCTION, raw_request(rtaccel_vector_request{5, 0}, 4));
  refused("histogram of no bins", RTACCEL_HISTOGRAM, raw_request(rtaccel_histogram_request{1, 0, 0.0f, 1.0f}, 1));
  refused("histogram with lo = hi", RTACCEL_HISTOGRAM, raw_request(rtaccel_histogram_request{1, 4, 1.0f, 1.0f}, 1));
  refused("histogram with lo > hi", RTACCEL_HISTOGRAM, raw_request(rtaccel_histogram_request{1, 4, 2.0f, 1.0f}, 1));
  refused("histogram with lo NaN", RTACCEL_HISTOGRAM, raw_request(rtaccel_histogram_request{1, 4, nan, 1.0f}, 1));
  refused("histogram from -inf", RTACCEL_HISTOGRAM, raw_request(rtaccel_histogram_request{1, 4, -inf, 1.0f}, 1));
  refused("histogram to +inf", RTACCEL_HISTOGRAM, raw_request(rtaccel_histogram_request{1, 4, 0.0f, inf}, 1));
  return cases;
}

// What is wrong with a backend's answer to C, or "".
std::string check_answer(const ServiceCase& c, int status, const uint8_t* response, size_t len) {
  std::ostringstream wrong;
  if (status != c.status) {
    wrong << "status " << status << ", expected " << c.status;
    return wrong.str();
  }
  if (status != 0) return "";
  size_t want_len = 0;
  rtaccel_request_view v;
  if (rtaccel_request_decode(c.service, c.request.data(), c.request.size(), SIZE_MAX, &v) == 0)
    want_len = v.response_len;
  if (len != want_len) {
    wrong << "response of " << len << " bytes, expected " << want_len;
    return wrong.str();
  }
  if (!c.sums.empty()) {
    for (size_t i = 0; i < c.sums.size(); i++) {
      float got;
      memcpy(&got, response + 4 * i, 4);
      if (got != c.sums[i]) {
        wrong << "element " << i << " is " << got << ", expected " << c.sums[i];
        return wrong.str();
      }
    }
  } else if (c.service == RTACCEL_REDUCTION) {
    double got;
    memcpy(&got, response, 8);
    if (!(std::fabs(got - c.total) <= c.tolerance)) {
      wrong.precision(17);
      wrong << "sum " << got << ", expected " << c.total << " within " << c.tolerance;
      return wrong.str();
    }
  } else if (c.service == RTACCEL_HISTOGRAM) {
    for (size_t b = 0; b < c.counts.size(); b++) {
      uint32_t got;
      memcpy(&got, response + 4 * b, 4);
      if (got != c.counts[b]) {
        wrong << "bin " << b << " holds " << got << ", expected " << c.counts[b];
        return wrong.str();
      }
    }
  }
  return "";
}

std::string backend_of(const ::testing::TestParamInfo<const char*>& info) {
  return strcmp(info.param, "cpu") == 0 ? "Cpu" : strcmp(info.param, "opencl") == 0 ? "OpenCl" : "Cuda";
}

class Services : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    if (backend_ == "opencl" && !opencl_device_found())
      SKIP_WITHOUT("opencl", "no OpenCL device (install pocl-opencl-icd)");
    if (backend_ == "cuda" && !cuda_device_found()) SKIP_WITHOUT("cuda", "no CUDA device: " << cuda_line());
  }
  std::vector<std::string> server_args() const {
    if (backend_ == "cpu") return cpu_args();
    if (backend_ == "cuda") return {"--backend", "cuda", "--device", "0", "--levels", "2"};
    return {"--backend", backend_, "--device", "0"};
  }
  int device() const { return backend_ == "cpu" ? std::stoi(cpu_args()[1]) : 0; }
  // An OpenCL device without double precision computes in float, as its
  // line in the probe says.
  bool float_only() const {
    char detail[1024] = "";
    if (backend_ != "opencl" || rtaccel_backend_probe("opencl", detail, sizeof(detail)) != 1) return false;
    const std::string line(detail);
    return line.substr(0, line.find("; ")).find("no double precision") != std::string::npos;
  }
  std::string backend_;
};

// Every backend gives the cpu service's answer to every request, through the
// server, through its gateway and called directly (which stages the buffers
// differently), and refuses the same requests.
TEST_P(Services, AnswerEveryRequestAsTheReferenceDoes) {
  const std::vector<ServiceCase> cases = service_cases();
  size_t request_max = 64, response_max = 64;
  for (const ServiceCase& c : cases) {
    request_max = std::max(request_max, c.request.size());
    rtaccel_request_view v;
    if (rtaccel_request_decode(c.service, c.request.data(), c.request.size(), SIZE_MAX, &v) == 0)
      response_max = std::max(response_max, v.response_len);
  }
  // Whoever runs the suite (not always root where the GPU is) and this node.
  const std::string policy = "allow:\n  - {uid: " + std::to_string(geteuid()) +
                             ", priorities: [0, 99]}\n  - {peer: 127.0.0.1, priorities: [0, 20]}\n";
  RemoteServer server(policy, {}, false, server_args());
  ASSERT_TRUE(server.server->ready());
  Client client(*server.server);
  rtaccel_client* peer = nullptr;
  ASSERT_EQ(rtaccel_client_connect(server.address.c_str(), &peer), 0);
  rtaccel_registration* regs[2] = {};
  for (int i = 0; i < 2; i++) {
    auto d = busy_chain(i == 0 ? "services" : "services-remote", 10);
    d.nservices = RTACCEL_BUILTINS;
    for (int k = 0; k < RTACCEL_BUILTINS; k++) {
      snprintf(d.services[k].name, sizeof(d.services[k].name), "%s", kServiceNames[k]);
      d.services[k].request_max = uint32_t(request_max);
      d.services[k].response_max = uint32_t(response_max);
    }
    char why[256] = "";
    ASSERT_EQ(register_desc(i == 0 ? client.c : peer, d, &regs[i], why, sizeof(why)), 0) << why;
  }
  rtaccel_direct* direct = nullptr;
  ASSERT_EQ(rtaccel_direct_open(backend_.c_str(), device(), 0, &direct), 0);
  std::vector<uint8_t> response(response_max);
  const bool float_only = this->float_only();
  for (const ServiceCase& c : cases) {
    if (c.needs_double && float_only) {
      std::printf("[ SKIPPED  ] %s: the OpenCL device has no double precision\n", c.what.c_str());
      continue;
    }
    for (int i = 0; i < 2; i++) {
      rtaccel_registration* r = regs[i];
      const int s = rtaccel_service_index(r, kServiceNames[c.service]);
      memcpy(rtaccel_request_buffer(r, s, nullptr), c.request.data(), c.request.size());
      size_t len = 0;
      const int served = rtaccel_call(r, s, c.request.size(), 60 * kSecond, &len);
      EXPECT_EQ(check_answer(c, served, static_cast<const uint8_t*>(rtaccel_response_buffer(r, s, nullptr)), len), "")
          << c.what << (i == 0 ? ", through the server" : ", through the gateway");
    }
    size_t len = 0;
    const int called = rtaccel_direct_call(direct, kServiceNames[c.service], c.request.data(), c.request.size(),
                                           response.data(), response.size(), &len);
    EXPECT_EQ(check_answer(c, called, response.data(), len), "") << c.what << ", called directly";
  }
  // Refused for what the buffers cannot hold: the registration's request
  // room, the caller's response.
  for (rtaccel_registration* r : regs) {
    size_t len;
    EXPECT_EQ(rtaccel_call(r, rtaccel_service_index(r, "vecadd"), request_max + 1, 5 * kSecond, &len), -EMSGSIZE);
  }
  const ServiceCase ten = vecadd_case("vecadd of ten", 10);
  size_t len;
  EXPECT_EQ(rtaccel_direct_call(direct, "vecadd", ten.request.data(), ten.request.size(), response.data(), 39, &len),
            -EINVAL);
  rtaccel_direct_close(direct);
  // busy takes the time asked: at least that, and on a GPU that nothing else
  // uses, not twice it.
  rtaccel_registration* r = regs[0];
  rtaccel_ticket t;
  ASSERT_EQ(submit_busy(r, 20 * kMs, &t), 0);
  ASSERT_EQ(rtaccel_wait(r, &t, 30 * kSecond, nullptr), 0);
  const uint64_t took = times_of(r, t).end_ns - times_of(r, t).start_ns;
  // The cpu and OpenCL loops count iterations calibrated at start-up, which
  // a faster moment of the machine then makes short (18.9 ms for 20 in one
  // run under ASan); cuda's watches the GPU's clock.
  EXPECT_GE(took, backend_ == "cuda" ? 19 * kMs : 10 * kMs);
  if (backend_ == "cuda") {
    EXPECT_LT(took, 40 * kMs);
  }
  rtaccel_remote_times hops;
  EXPECT_EQ(rtaccel_request_remote_times(r, &t, &hops), -EINVAL);  // no gateway in between
  rtaccel_client_close(peer);
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, Services, ::testing::Values("cpu", "opencl", "cuda"), backend_of);

}  // namespace
}  // namespace rtaccel::accel
