// End-to-end tests of rtaccel-server's buckets and priorities: one bucket
// serves by priority, then arrival; a higher bucket preempts a lower one; a
// region moves between buckets as the admitted chains change. See
// server_test.h.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "rtaccel/accel.h"

#include "server_test.h"

namespace rtaccel::accel::server_test {
namespace {

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

}  // namespace
}  // namespace rtaccel::accel::server_test
