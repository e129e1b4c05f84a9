// End-to-end tests of rtaccel-server as a program: the backends it lists, the
// options and socket paths it refuses and how it says why, its workers'
// stacks, plugins. The other behaviours have files of their own
// (server_*_test.cc), and what they share is server_test.h; the environment
// every test of the executable runs in, clients kept off the device core,
// is here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/fd.h"
#include "rtaccel/accel.h"

#include "server_test.h"

namespace rtaccel::accel::server_test {
namespace {

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

}  // namespace
}  // namespace rtaccel::accel::server_test
