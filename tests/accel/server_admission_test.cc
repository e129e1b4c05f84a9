// End-to-end tests of who may register what with rtaccel-server: the policy,
// declarations admitted together, admission control's deadline check and the
// regulator it charges, and placement across devices. See server_test.h.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "accel/protocol.h"
#include "accel/test_descs.h"
#include "rtaccel/accel.h"

#include "server_test.h"

namespace rtaccel::accel::server_test {
namespace {

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

}  // namespace
}  // namespace rtaccel::accel::server_test
