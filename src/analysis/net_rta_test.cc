// The net layer's per-link bound against numbers worked by hand.
#include <gtest/gtest.h>

#include "rtaccel/analysis.hpp"

namespace rtaccel::analysis {
namespace {

// 1 Gbit/s: 1 MiB takes 8,388,608 ns; the chunk (64 KiB) and the window
// (128 KiB) together 1,572,864 ns.
NetLink gigabit() { return NetLink{125e6, 64 << 10, 128 << 10, 0}; }

TEST(NetRta, ByHand) {
  const std::vector<NetFlow> flows = {
      {"hi", 3, 1 << 20, 100'000'000, 0, 0},
      {"mid", 2, 1 << 20, 50'000'000, 0, 0},
      {"lo", 1, 4 << 20, 200'000'000, 0, 0},
      {"lo2", 1, 1 << 20, 200'000'000, 0, 0},
  };
  const auto r = analyze_net_link(gigabit(), flows);
  ASSERT_EQ(r.size(), 4u);
  // hi: its own transfer and one chunk plus the window of a lower one
  EXPECT_TRUE(r[0].bounded);
  EXPECT_EQ(r[0].transmission_ns, 8'388'608u);
  EXPECT_EQ(r[0].blocking_ns, 1'572'864u);
  EXPECT_EQ(r[0].wcrt_ns, 9'961'472u);
  // mid: and one transfer of hi
  EXPECT_EQ(r[1].wcrt_ns, 18'350'080u);
  EXPECT_EQ(r[1].interference_ns, 8'388'608u);
  // lo: no lower flow, one transfer of its equal lo2 ahead (FIFO), one of
  // hi and two of mid
  EXPECT_EQ(r[2].blocking_ns, 0u);
  EXPECT_EQ(r[2].wcrt_ns, 67'108'864u);
  EXPECT_TRUE(r[2].schedulable);
}

TEST(NetRta, ChunkCostJitterAndNoBound) {
  NetLink link = gigabit();
  link.per_chunk_ns = 10'000;
  EXPECT_EQ(net_transfer_ns(link, 1 << 20), 8'388'608u + 16 * 10'000u);
  EXPECT_EQ(net_transfer_ns(link, 0), 10'000u);  // one empty chunk still goes
  // a higher flow with jitter can land twice in a short window
  const std::vector<NetFlow> flows = {
      {"hi", 2, 64 << 10, 10'000'000, 9'900'000, 0},
      {"lo", 1, 1 << 20, 100'000'000, 0, 0},
  };
  const auto r = analyze_net_link(link, flows);
  const uint64_t hi = net_transfer_ns(link, 64 << 10);
  EXPECT_EQ(r[1].wcrt_ns, net_transfer_ns(link, 1 << 20) + 2 * hi);
  // more than the link carries: no bound, and it says so
  const std::vector<NetFlow> over = {
      {"hi", 2, 1 << 20, 5'000'000, 0, 0},
      {"lo", 1, 1 << 20, 100'000'000, 0, 0},
  };
  const auto o = analyze_net_link(link, over);
  EXPECT_FALSE(o[0].schedulable);
  EXPECT_FALSE(o[1].bounded);
  EXPECT_NE(o[1].reason.find("no bound"), std::string::npos);
  const auto none = analyze_net_link(NetLink{}, over);
  EXPECT_EQ(none[0].reason, "the link has no rate");
}

}  // namespace
}  // namespace rtaccel::analysis
