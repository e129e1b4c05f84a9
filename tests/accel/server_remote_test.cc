// End-to-end tests of clients on another node, served through rtaccel-server's
// gateway (--listen): results, admission, the peer policy, clients and
// servers that die, malformed messages, and where waits spin. See
// server_test.h.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "accel/remote.h"
#include "core/clock.h"
#include "core/daemon.h"
#include "rtaccel/accel.h"
#include "rtaccel/net.h"

#include "server_test.h"

namespace rtaccel::accel::server_test {
namespace {

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

}  // namespace
}  // namespace rtaccel::accel::server_test
