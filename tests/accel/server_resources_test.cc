// End-to-end tests of rtaccel-server's resources under pressure: out of
// descriptors, its region memory, hundreds of registrations, and a memory
// cgroup's limit. See server_test.h.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accel/protocol.h"
#include "accel/test_descs.h"
#include "core/cgroup.h"
#include "core/clock.h"
#include "core/fd.h"
#include "rtaccel/accel.h"

#include "server_test.h"

namespace rtaccel::accel::server_test {
namespace {

// The bytes a file holds (its blocks, not its size).
uint64_t bytes_in(int fd) {
  struct stat st{};
  return fstat(fd, &st) == 0 ? uint64_t(st.st_blocks) * 512 : UINT64_MAX;
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

}  // namespace
}  // namespace rtaccel::accel::server_test
