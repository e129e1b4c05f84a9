#include "request_phases.h"

#include <gtest/gtest.h>

namespace rtaccel::bench {
namespace {

// Times in ns on one device; {submit, start, end, resumed, priority, warm_up}.
TEST(RequestPhases, OneClientsOverheadIsItsRoundTripLessTheKernel) {
  const Phases p = split_phases({{1000, 1003, 1103, 1110, 10, false}, {2000, 2002, 2102, 2109, 10, false}});
  ASSERT_EQ(p.overhead.size(), 2u);
  EXPECT_EQ(p.queued[0], 0);
  EXPECT_EQ(p.dispatch[0], 3);
  EXPECT_EQ(p.to_resume[0], 7);
  EXPECT_EQ(p.overhead[0], (1110 - 1000) - (1103 - 1003));
  EXPECT_EQ(p.overhead[1], (2109 - 2000) - (2102 - 2002));
}

TEST(RequestPhases, WaitingBehindAnotherKernelIsQueuedNotOverhead) {
  // b arrives while a runs and starts 2 ns after a ends; c arrives after
  // b ended and the device was idle: only its own wake-up counts.
  const Phases p = split_phases({{0, 1, 101, 105, 10, false},
                                 {50, 103, 203, 210, 10, false},
                                 {300, 305, 405, 409, 10, false}});
  EXPECT_EQ(p.queued[1], 53 - 2);
  EXPECT_EQ(p.dispatch[1], 2);
  EXPECT_EQ(p.overhead[1], 2 + 7);
  EXPECT_EQ(p.queued[2], 0);
  EXPECT_EQ(p.dispatch[2], 5);
}

TEST(RequestPhases, APreemptingRequestsDispatchIsItsPreemptionDelay) {
  // low runs 400..700; high arrives at 450 and starts at 456 on top of it:
  // low's end is later than high's start and is no reason to wait.
  const Phases p = split_phases({{390, 400, 700, 705, 10, false}, {450, 456, 556, 560, 90, false}});
  EXPECT_EQ(p.queued[1], 0);
  EXPECT_EQ(p.dispatch[1], 6);
  EXPECT_EQ(p.kernel[0], 300);  // its kernel's wall time, the preemption in it
  EXPECT_EQ(p.priority[1], 90);
}

TEST(RequestPhases, AKernelOfNoTimeIsNotItsOwnReasonToWait) {
  const Phases p = split_phases({{10, 14, 14, 20, 10, false}});
  EXPECT_EQ(p.dispatch[0], 4);
  EXPECT_EQ(p.overhead[0], 4 + 6);
}

TEST(RequestPhases, ARemoteRequestsHopsAddUpToItsRoundTrip) {
  Sample s{1000, 1200, 1300, 1500, 10, false};
  s.gateway_arrival = 1040;
  s.gateway_taken = 1070;
  s.gateway_reply = 1330;
  s.arrival = 1450;
  const Phases p = split_phases({s});
  ASSERT_EQ(p.to_gateway.size(), 1u);
  EXPECT_EQ(p.to_gateway[0], 40);
  EXPECT_EQ(p.gateway_wake[0], 30);
  EXPECT_EQ(p.gateway_to_start[0], 130);
  EXPECT_EQ(p.end_to_reply[0], 30);
  EXPECT_EQ(p.reply_to_client[0], 120);
  EXPECT_EQ(p.client_wake[0], 50);
  EXPECT_EQ(p.to_gateway[0] + p.gateway_wake[0] + p.gateway_to_start[0] + p.kernel[0] + p.end_to_reply[0] +
                p.reply_to_client[0] + p.client_wake[0],
            1500 - 1000);
  EXPECT_TRUE(split_phases({{0, 1, 2, 3, 10, false}}).to_gateway.empty());  // a local request has no hops
}

TEST(RequestPhases, WarmUpRequestsShapeTheDeviceTimelineButAreNotMeasured) {
  const Phases p = split_phases({{0, 1, 101, 105, 10, true}, {50, 103, 203, 210, 10, false}});
  ASSERT_EQ(p.overhead.size(), 1u);
  EXPECT_EQ(p.dispatch[0], 2);
}

}  // namespace
}  // namespace rtaccel::bench
