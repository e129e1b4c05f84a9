// The net layer's per-link bound against numbers worked by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/saturating.h"
#include "analysis/test_load.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

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

// A chain across two nodes of a 1 Gbit/s link, and a best-effort flow of
// 8 MiB beside it on the same direction.
// Bytes over TCP at 1 Gbit/s: 1448 of every 1514 bytes on the wire are
// payload.
uint64_t tcp_ns(uint64_t bytes) {
  return static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) * 1e9 / (125e6 * (1448.0 / 1514.0))));
}

constexpr const char* kTwoNodes = R"(version: 1
name: two
nodes: [{name: soc1}, {name: soc2}]
links:
  - {name: eth0, between: [soc1, soc2], transport: tcp, rate_mbps: 1000, chunk_kb: 64, per_chunk_us: 5}
executors:
  - {name: ex1, node: soc1, core: 0, priority: 80}
  - {name: ex2, node: soc2, core: 1, priority: 80}
  - {name: ex3, node: soc1, core: 2, priority: 10}
callbacks:
  - {name: sensor, executor: ex1, trigger: {timer_ms: 100}, publishes: raw, message_kb: 1024, cpu_us: 1000}
  - {name: filter, executor: ex2, trigger: {topic: raw}, cpu_us: 1000}
  - {name: upload, executor: ex3, trigger: {timer_ms: 1000}, publishes: map, message_kb: 8192, cpu_us: 1000}
  - {name: merge, executor: ex2, trigger: {topic: map}, cpu_us: 1000}
chains:
  - {name: hot, priority: 10, path: [sensor, filter], deadline_ms: 100}
  - {name: map, priority: 1, path: [upload, merge], critical: false}
)";

TEST(NetRta, ChainsAcrossNodesAddTheirLinkBound) {
  const workload::Workload w = load(kTwoNodes);
  ASSERT_EQ(w.chains.size(), 2u);
  const auto results = analyze(w);
  ASSERT_EQ(results.size(), 2u);
  // hot: 1 MiB in 16 chunks at 1 Gbit/s, plus one chunk, the window (two
  // chunks) and the 64 KiB a TCP socket may take beyond it of the 8 MiB
  // upload, plus that chunk's cost
  const uint64_t own = tcp_ns(1 << 20) + 16 * 5'000;
  const uint64_t blocking = tcp_ns(256 << 10) + 5'000;
  EXPECT_EQ(results[0].breakdown.network_ns, own + blocking);
  // map: its 8 MiB, and the hot flow's transfers that arrive meanwhile
  // (jitter: hot's deadline)
  const uint64_t map_own = tcp_ns(8 << 20) + 128 * 5'000;
  const uint64_t map = results[1].breakdown.network_ns;
  EXPECT_GE(map, map_own + own);
  EXPECT_EQ((map - map_own) % own, 0u);
  // the same chains on one node have no network term
  const NetworkTerms none([&] {
    workload::Workload one = w;
    one.nodes.clear();
    return one;
  }());
  EXPECT_EQ(none.hop_ns(0, 1), 0u);
  EXPECT_EQ(NetworkTerms(w).flows().size(), 2u);
}

TEST(NetRta, TheKernelsWorkForALinkIsChargedOnTheCoresOfItsEnds) {
  const workload::Workload plain = load(kTwoNodes);
  ASSERT_EQ(plain.chains.size(), 2u);
  workload::Workload w = plain;
  workload::raise_overheads(&w, 0, 0, 0, 100);  // 100 ns per KiB
  const NetworkTerms terms(w);
  // In 1 ms on a core of either node: raw (1 MiB, every 100 ms, jitter its
  // chain's 100 ms deadline) twice, map (8 MiB, every 1000 ms, jitter 1000
  // ms) twice, at 100 ns per KiB.
  const uint64_t raw = 1024 * 100, map = 8192 * 100, window = 2 * raw + 2 * map;
  for (int core : {0, 1, 2}) EXPECT_EQ(terms.kernel_ns(core, 1'000'000), window) << core;
  EXPECT_EQ(terms.kernel_ns(3, 1'000'000), 0u);  // no executor of theirs there
  EXPECT_EQ(NetworkTerms(plain).kernel_ns(0, 1'000'000), 0u);
  // hot: sensor on core 0 and filter on core 1, 1 ms each alone; each
  // window grows to 2.84 ms, where the counts are still two and two.
  const auto before = analyze(plain), after = analyze(w);
  EXPECT_EQ(before[0].breakdown.network_kernel_ns, 0u);
  EXPECT_EQ(after[0].breakdown.network_kernel_ns, 2 * window);
  EXPECT_EQ(after[0].wcrt_ns, before[0].wcrt_ns + 2 * window);
  // Under gangs the same: each of hot's two jobs, and the chain as one
  // window of the gang lock over its two cores, meet two of each message
  // while their windows stay below 100 ms.
  const auto gang_before = analyze_gangs(plain), gang_after = analyze_gangs(w);
  ASSERT_TRUE(gang_before[0].bounded && gang_after[0].bounded);
  EXPECT_EQ(gang_before[0].breakdown.network_kernel_ns, 0u);
  EXPECT_EQ(gang_after[0].breakdown.network_kernel_ns, 2 * window);
  EXPECT_EQ(gang_after[0].wcrt_ns, gang_before[0].wcrt_ns + 2 * window);
}

TEST(NetRta, RemoteAcceleratorRequestsAndResponses) {
  constexpr const char* kRemote = R"(version: 1
name: remote
nodes: [{name: soc1}, {name: soc2}]
links: [{name: eth0, between: [soc1, soc2], transport: tcp, rate_mbps: 1000}]
platform:
  accelerators: [{name: acc0, node: soc1, backend: cpu, core: 1, priority_levels: 2}]
server: {core: 1, overhead_us: 40}
executors: [{name: ex2, node: soc2, core: 0, priority: 80}]
callbacks:
  - {name: remote, executor: ex2, trigger: {timer_ms: 100}, cpu_us: 1000,
     segments: [{accelerator: acc0, service: busy, wcet_us: 5000, request_kb: 64, response_kb: 16}]}
chains:
  - {name: c, priority: 1, path: [remote]}
)";
  const workload::Workload w = load(kRemote);
  ASSERT_EQ(w.chains.size(), 1u);
  // 64 KiB there and 16 KiB back at 1 Gbit/s, nothing else on the link
  const uint64_t both = tcp_ns(64 << 10) + tcp_ns(16 << 10);
  EXPECT_EQ(NetworkTerms(w).segment_ns(0, 0), both);
  const auto results = analyze(w);
  EXPECT_EQ(results[0].breakdown.network_ns, both);
  EXPECT_EQ(analyze_gangs(w)[0].breakdown.network_ns, both);
}

// Three callbacks in a row on soc2, each with a request to soc1's
// accelerator, while soc1 sends a 256 KiB cloud of a more critical chain
// over the direction their responses take.
constexpr const char* kThreeRequests = R"(version: 1
name: three
nodes: [{name: soc1}, {name: soc2}]
links: [{name: eth0, between: [soc1, soc2], transport: tcp, rate_mbps: 1000, per_chunk_us: 5}]
platform:
  accelerators: [{name: acc0, node: soc1, backend: cpu, core: 1, priority_levels: 2}]
server: {core: 1, overhead_us: 40}
executors:
  - {name: ex1, node: soc1, core: 0, priority: 90}
  - {name: ex2, node: soc2, core: 0, priority: 80}
callbacks:
  - {name: lidar, executor: ex1, trigger: {timer_ms: 100}, publishes: cloud, message_kb: 256, cpu_us: 500}
  - {name: sink, executor: ex2, trigger: {topic: cloud}, cpu_us: 100}
  - {name: a, executor: ex2, trigger: {timer_ms: 100}, publishes: ta, cpu_us: 200,
     segments: [{accelerator: acc0, service: busy, wcet_us: 500, request_kb: 4, response_kb: 4}]}
  - {name: b, executor: ex2, trigger: {topic: ta}, publishes: tb, cpu_us: 200,
     segments: [{accelerator: acc0, service: busy, wcet_us: 500, request_kb: 4, response_kb: 4}]}
  - {name: c, executor: ex2, trigger: {topic: tb}, cpu_us: 200,
     segments: [{accelerator: acc0, service: busy, wcet_us: 500, request_kb: 4, response_kb: 4}]}
chains:
  - {name: cloud, priority: 10, path: [lidar, sink]}
  - {name: control, priority: 5, path: [a, b, c]}
)";

TEST(NetRta, AHigherTransferDelaysOneOfAChainsLegsNotEach) {
  const workload::Workload w = load(kThreeRequests);
  ASSERT_EQ(w.chains.size(), 2u);
  const uint64_t small = tcp_ns(4 << 10) + 5'000, cloud = tcp_ns(256 << 10) + 4 * 5'000;
  // Each leg alone: its 4 KiB and the two other legs of its priority on its
  // direction (FIFO), and, for a response, the cloud twice (its jitter is
  // its chain's 100 ms deadline, its period 100 ms).
  const NetworkTerms terms(w);
  const uint64_t alone = 3 * small + 3 * small + 2 * cloud;
  for (size_t cb : {2u, 3u, 4u}) EXPECT_EQ(terms.segment_ns(cb, 0), alone) << cb;
  // The chain's six legs, one after another within its 100 ms period: the
  // clouds sent meanwhile are the three whose sends can fall in 100 ms plus
  // the cloud's bound plus its jitter, not six. The first response takes
  // two of them, the second the third, the last none.
  const auto legs = terms.chain_legs(w.chains[1].path, 100'000'000);
  EXPECT_EQ(legs.segment_ns(2, 0), alone);
  EXPECT_EQ(legs.segment_ns(3, 0), 6 * small + cloud);
  EXPECT_EQ(legs.segment_ns(4, 0), 6 * small);
  // Waiting at b for another chain, the legs from b's request on start
  // when that chain's message comes: they meet the clouds anew, as many as
  // their own bounds charge, within the same three.
  const auto fused = terms.chain_legs(w.chains[1].path, 100'000'000, {false, true, false});
  EXPECT_EQ(fused.segment_ns(2, 0), alone);
  EXPECT_EQ(fused.segment_ns(3, 0), alone);
  EXPECT_EQ(fused.segment_ns(4, 0), 6 * small + cloud);
  const auto unlimited = terms.chain_legs(w.chains[1].path, kUnbounded);
  for (size_t cb : {2u, 3u, 4u}) EXPECT_EQ(unlimited.segment_ns(cb, 0), alone) << cb;

  const auto results = analyze(w);
  EXPECT_EQ(results[1].breakdown.network_ns, 18 * small + 3 * cloud);
  Options per_leg;
  per_leg.transfers_once_per_chain = false;
  EXPECT_EQ(analyze(w, per_leg)[1].breakdown.network_ns, 18 * small + 6 * cloud);
  EXPECT_EQ(analyze(w, Options::paper())[1].breakdown.network_ns, 18 * small + 6 * cloud);
  EXPECT_EQ(results[1].wcrt_ns + 3 * cloud, analyze(w, per_leg)[1].wcrt_ns);
  // Under gangs the same legs.
  EXPECT_EQ(analyze_gangs(w)[1].breakdown.network_ns, 18 * small + 3 * cloud);
  EXPECT_EQ(analyze_gangs(w, per_leg)[1].breakdown.network_ns, 18 * small + 6 * cloud);
  // The cloud's own chain has one leg: nothing to share.
  EXPECT_EQ(results[0].breakdown.network_ns, analyze(w, per_leg)[0].breakdown.network_ns);
}

}  // namespace
}  // namespace rtaccel::analysis
