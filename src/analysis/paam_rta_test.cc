// Small systems whose bounds are computed by hand in each test, with the
// arithmetic written out (all times in ms unless stated).
#include <gtest/gtest.h>

#include <string>

#include "analysis/test_load.h"
#include "rtaccel/analysis.hpp"

namespace rtaccel::analysis {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kUs = 1'000;

const ChainResult& find(const std::vector<ChainResult>& results, const std::string& name) {
  for (const auto& r : results) {
    if (r.chain == name) return r;
  }
  static ChainResult none;
  ADD_FAILURE() << "no chain " << name;
  return none;
}

// rtaccel's analysis without its two refinements (one segment per executor,
// arrivals bounded by a higher chain's bound): the terms of the paper's
// lemmas, which the tests below work out by hand; the refinements have tests
// of their own at the end.
Options unrefined() {
  Options options;
  options.one_segment_per_executor = false;
  options.jitter_from_bounds = false;
  options.jitter_from_earlier_bounds = false;
  options.blocking_shares_arrivals = false;
  options.blocking_without_own_segments = false;
  options.shared_callbacks_once = false;
  options.shared_segments_are_own = false;
  options.shared_heads = false;
  options.interference_once_per_chain = false;
  options.released_together = false;
  return options;
}

TEST(Lemma1, ArrivalsAreCeilingPlusOne) {
  EXPECT_EQ(arrivals(0, 10), 1u);   // ceil(0/10) + 1
  EXPECT_EQ(arrivals(1, 10), 2u);   // ceil(1/10) + 1
  EXPECT_EQ(arrivals(10, 10), 2u);  // ceil(10/10) + 1
  EXPECT_EQ(arrivals(11, 10), 3u);  // ceil(11/10) + 1
}

TEST(Buckets, EvenGroupsWithTheMostCriticalOnTop) {
  const std::vector<int> six = {10, 20, 30, 40, 50, 60};
  // 6 priorities on 4 levels: below_top = 0..5 -> 3 - floor(k * 4 / 6).
  EXPECT_EQ(bucket_of(60, six, 4), 3);  // k=0: 3 - 0
  EXPECT_EQ(bucket_of(50, six, 4), 3);  // k=1: 3 - floor(4/6)
  EXPECT_EQ(bucket_of(40, six, 4), 2);  // k=2: 3 - floor(8/6)
  EXPECT_EQ(bucket_of(30, six, 4), 1);  // k=3: 3 - floor(12/6)
  EXPECT_EQ(bucket_of(20, six, 4), 1);  // k=4: 3 - floor(16/6)
  EXPECT_EQ(bucket_of(10, six, 4), 0);  // k=5: 3 - floor(20/6)
  // Fewer priorities than levels: distinct buckets, the highest at the top.
  EXPECT_EQ(bucket_of(2, {1, 2}, 4), 3);
  EXPECT_EQ(bucket_of(1, {1, 2}, 4), 1);
  EXPECT_EQ(bucket_of(7, {7}, 1), 0);
  EXPECT_EQ(bucket_of(8, {7}, 4), -1);
  // The list in any order, with repeats, is the same six priorities (the
  // sorted one is read as it is, any other sorted first).
  const std::vector<int> shuffled = {40, 60, 10, 50, 20, 60, 30, 10};
  for (int p : six) EXPECT_EQ(bucket_of(p, shuffled, 4), bucket_of(p, six, 4)) << p;
  EXPECT_EQ(bucket_of(35, shuffled, 4), -1);
  EXPECT_EQ(bucket_of(35, six, 4), -1);
  EXPECT_EQ(bucket_of(70, six, 4), -1);
  EXPECT_EQ(bucket_of(5, six, 4), -1);
}

// No accelerator: one executor, chains A (T=10, E=1+1) and B (T=20, E=3),
// with release jitter J.
std::string picas_chains(int jitter_us) {
  return R"(
version: 1
name: picas
platform: {release_jitter_us: )" + std::to_string(jitter_us) + R"(}
executors: [{name: ex, core: 0, priority: 50}]
callbacks:
  - {name: a1, executor: ex, trigger: {timer_ms: 10}, publishes: ta, cpu_us: 1000}
  - {name: a2, executor: ex, trigger: {topic: ta}, cpu_us: 1000}
  - {name: b1, executor: ex, trigger: {timer_ms: 20}, cpu_us: 3000}
chains:
  - {name: A, priority: 2, path: [a1, a2]}
  - {name: B, priority: 1, path: [b1]}
)";
}

TEST(Lemma4, PicasChainsWithoutAccelerators) {
  auto r = analyze(load(picas_chains(0)), unrefined());
  // A: B_A = max LP callback = 3, E_A = 2, no HP: R = 5.
  EXPECT_EQ(find(r, "A").wcrt_ns, 5 * kMs);
  EXPECT_EQ(find(r, "A").breakdown.blocking_ns, 3 * kMs);
  // B: R0 = 3; R1 = 3 + (ceil(3/10)+1)*2 = 7; R2 = 3 + (ceil(7/10)+1)*2 = 7.
  EXPECT_EQ(find(r, "B").wcrt_ns, 7 * kMs);
  EXPECT_TRUE(find(r, "B").schedulable);
  EXPECT_STREQ(find(r, "B").dominant_term(), "interference");
}

TEST(ReleaseJitter, AddsToTheBoundAndToHigherPriorityArrivals) {
  auto r = analyze(load(picas_chains(5000)), unrefined());
  // The Lemma 4 system with J = 5. A: 5 as before, plus J = 10.
  EXPECT_EQ(find(r, "A").wcrt_ns, 10 * kMs);
  EXPECT_EQ(find(r, "A").breakdown.release_jitter_ns, 5 * kMs);
  // B: A's releases in a window t are those of t + J: R0 = 3;
  // R1 = 3 + (ceil(8/10)+1)*2 = 7; R2 = 3 + (ceil(12/10)+1)*2 = 9;
  // R3 = 3 + (ceil(14/10)+1)*2 = 9 (7 without jitter); plus J = 14.
  EXPECT_EQ(find(r, "B").wcrt_ns, 14 * kMs);
}

// The quickstart system (examples/quickstart.yaml): kappa = 50 us, epsilon = 40 us,
// 4 levels, chain hot (T=100: E=2+1, A=10) above chain log (T=500: E=5, A=20),
// both on executor ex1.
const char* kQuickstart = R"(
version: 1
name: quickstart
platform:
  accelerators: [{name: acc0, backend: cpu, core: 1, priority_levels: 4, preemption_cost_us: 50}]
server: {core: 1, overhead_us: 40}
executors: [{name: ex1, core: 0, priority: 80}]
callbacks:
  - {name: sensor, executor: ex1, trigger: {timer_ms: 100}, publishes: raw, cpu_us: 2000,
     segments: [{accelerator: acc0, service: busy, wcet_us: 10000}]}
  - {name: filter, executor: ex1, trigger: {topic: raw}, cpu_us: 1000}
  - {name: logger, executor: ex1, trigger: {timer_ms: 500}, cpu_us: 5000,
     segments: [{accelerator: acc0, service: matmul, wcet_us: 20000}]}
chains:
  - {name: hot, priority: 10, path: [sensor, filter], deadline_ms: 100}
  - {name: log, priority: 1, path: [logger], critical: false}
)";

TEST(Theorem1, QuickstartByHand) {
  auto w = load(kQuickstart);
  auto r = analyze(w, unrefined());
  // A* = A + 2 kappa: hot 10.1, log 20.1. Buckets: hot 3, log 1: no same-bucket blocking.
  // Lemma 2 for log's segment: H = 20.1 + (ceil(H/100)+1) * 10.1 = 20.1 + 2 * 10.1 = 40.3.
  // hot: B = E_logger + H_logger + eps = 5 + 40.3 + 0.04 = 45.34 (LP callback waits on acc)
  //      E = 3, H* = 10.1 + 0.04 = 10.14, R = 45.34 + 3 + 10.14 = 58.48.
  const auto& hot = find(r, "hot");
  EXPECT_EQ(hot.breakdown.blocking_ns, 45340 * kUs);
  EXPECT_EQ(hot.breakdown.accelerator_ns, 10140 * kUs);
  EXPECT_EQ(hot.wcrt_ns, 58480 * kUs);
  // log: H* = 40.3 + 0.04 = 40.34 (Lemma 3 equal here); hp: hot with mu(R) (E_h + H*_h).
  //      R0 = 5 + 40.34 + 2 * 13.14 = 71.62; mu(71.62, 100) = 2 -> fixed point 71.62.
  const auto& log = find(r, "log");
  EXPECT_EQ(log.wcrt_ns, 71620 * kUs);
  EXPECT_EQ(log.breakdown.interference_ns, 26280 * kUs);

  // The paper's Lemma 4 term charges the blocking callback's CPU time only: 5 ms.
  auto p = analyze(w, Options::paper());
  EXPECT_EQ(find(p, "hot").breakdown.blocking_ns, 5 * kMs);
  EXPECT_EQ(find(p, "hot").wcrt_ns, (5000 + 3000 + 10140) * kUs);
}

// Two chains on separate cores share one accelerator; one priority level, no
// overheads. L has 4 segments of 1 (E = 4 x 1), H one segment of 5 every 1000.
TEST(Lemma3, WinsForManySegmentsAgainstARareInterferer) {
  auto w = load(R"(
version: 1
name: lemma3
platform:
  accelerators: [{name: acc, backend: cpu, core: 3}]
server: {core: 3, overhead_us: 0}
executors:
  - {name: e0, core: 0, priority: 50}
  - {name: e1, core: 1, priority: 50}
callbacks:
  - {name: h1, executor: e1, trigger: {timer_ms: 1000}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 5000}]}
  - {name: l1, executor: e0, trigger: {timer_ms: 100}, publishes: t1, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 1000}]}
  - {name: l2, executor: e0, trigger: {topic: t1}, publishes: t2, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 1000}]}
  - {name: l3, executor: e0, trigger: {topic: t2}, publishes: t3, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 1000}]}
  - {name: l4, executor: e0, trigger: {topic: t3}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 1000}]}
chains:
  - {name: H, priority: 2, path: [h1]}
  - {name: L, priority: 1, path: [l1, l2, l3, l4]}
)");
  auto r = analyze(w, unrefined());
  // Lemma 2 per L segment: 1 + (ceil(H/1000)+1) * 5 = 11, four of them: 44.
  // Lemma 3: 4 * 1 + (ceil(R/1000)+1) * 5 = 14 for R < 1000. min = 14.
  const auto& low = find(r, "L");
  ASSERT_EQ(low.subchains.size(), 1u);
  EXPECT_EQ(low.subchains[0].lemma2_ns, 44 * kMs);
  EXPECT_EQ(low.subchains[0].lemma3_ns, 14 * kMs);
  EXPECT_TRUE(low.subchains[0].handling_by_lemma3);
  EXPECT_EQ(low.wcrt_ns, (4 + 14) * kMs);  // E + H*, nothing else on core 0
  // H: one level, so L's running request blocks: 5 + max(1) = 6; R = 1 + 6.
  EXPECT_EQ(find(r, "H").wcrt_ns, 7 * kMs);
}

// L has one segment of 1 and 50 of CPU; H (other core) has a segment of 2 every 10.
TEST(Lemma2, WinsForFewSegmentsInALongChain) {
  auto w = load(R"(
version: 1
name: lemma2
platform:
  accelerators: [{name: acc, backend: cpu, core: 3}]
server: {core: 3, overhead_us: 0}
executors:
  - {name: e0, core: 0, priority: 50}
  - {name: e1, core: 1, priority: 50}
callbacks:
  - {name: h1, executor: e1, trigger: {timer_ms: 10}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 2000}]}
  - {name: l1, executor: e0, trigger: {timer_ms: 100}, cpu_us: 50000, segments: [{accelerator: acc, service: busy, wcet_us: 1000}]}
chains:
  - {name: H, priority: 2, path: [h1]}
  - {name: L, priority: 1, path: [l1]}
)");
  auto r = analyze(w, unrefined());
  // Lemma 2: H0 = 1; 1 + (ceil(1/10)+1) * 2 = 5; 1 + (ceil(5/10)+1) * 2 = 5.
  // Lemma 3 at R = 55: 1 + (ceil(55/10)+1) * 2 = 15. min = 5, R = 50 + 5 = 55.
  const auto& low = find(r, "L");
  EXPECT_EQ(low.subchains[0].lemma2_ns, 5 * kMs);
  EXPECT_EQ(low.subchains[0].lemma3_ns, 15 * kMs);
  EXPECT_FALSE(low.subchains[0].handling_by_lemma3);
  EXPECT_EQ(low.wcrt_ns, 55 * kMs);
}

// Theorem 1's hpp term: executor eh (priority 90) and el (80) share core 0.
// H: T=20, E=2, A=5; L: T=100, E=10, no segment; epsilon = 0.5.
std::string spin_workload(const char* wait) {
  return std::string(R"(
version: 1
name: spin
platform:
  accelerators: [{name: acc, backend: cpu, core: 3}]
server: {core: 3, overhead_us: 500}
executors:
  - {name: eh, core: 0, priority: 90}
  - {name: el, core: 0, priority: 80}
callbacks:
  - {name: h1, executor: eh, trigger: {timer_ms: 20}, cpu_us: 2000, wait: )") + wait + R"(,
     segments: [{accelerator: acc, service: busy, wcet_us: 5000}]}
  - {name: l1, executor: el, trigger: {timer_ms: 100}, cpu_us: 10000}
chains:
  - {name: H, priority: 2, path: [h1]}
  - {name: L, priority: 1, path: [l1]}
)";
}

TEST(Theorem1, SuspendingHigherExecutorCostsEpsilonPerSegment) {
  auto r = analyze(load(spin_workload("suspend")), unrefined());
  // spin(H) = delta * eps = 0.5. R0 = 10; 10 + (ceil(10/20)+1)(2 + 0.5) = 15;
  // 10 + (ceil(15/20)+1) * 2.5 = 15.
  EXPECT_EQ(find(r, "L").wcrt_ns, 15 * kMs);
}

TEST(Theorem1, SpinningHigherExecutorCostsItsHandlingTime) {
  auto r = analyze(load(spin_workload("spin")), unrefined());
  // spin(H) = H + eps = 5 + 0.5. R0 = 10; 10 + 2 * 7.5 = 25; 10 + 3 * 7.5 = 32.5;
  // 10 + (ceil(32.5/20)+1) * 7.5 = 32.5.
  EXPECT_EQ(find(r, "L").wcrt_ns, 32500 * kUs);
}

// kappa and buckets: H (A=5) above L (A=3), one accelerator, separate cores.
std::string bucket_workload(int levels) {
  return R"(
version: 1
name: buckets
platform:
  accelerators: [{name: acc, backend: cpu, core: 3, preemption_cost_us: 100, priority_levels: )" +
         std::to_string(levels) + R"(}]
server: {core: 3, overhead_us: 0}
executors:
  - {name: e0, core: 0, priority: 50}
  - {name: e1, core: 1, priority: 50}
callbacks:
  - {name: h1, executor: e0, trigger: {timer_ms: 100}, cpu_us: 0, segments: [{accelerator: acc, service: busy, wcet_us: 5000}]}
  - {name: l1, executor: e1, trigger: {timer_ms: 100}, cpu_us: 0, segments: [{accelerator: acc, service: busy, wcet_us: 3000}]}
chains:
  - {name: H, priority: 2, path: [h1]}
  - {name: L, priority: 1, path: [l1]}
)";
}

TEST(Buckets, SeparateBucketsPreemptAndPayKappa) {
  // Two levels: H in bucket 1, L in bucket 0. H is never blocked, pays 2 kappa: 5.2.
  auto two = analyze(load(bucket_workload(2)));
  EXPECT_EQ(find(two, "H").wcrt_ns, 5200 * kUs);
  // One level: no preemption, so no kappa, but L's running request blocks: 5 + 3.
  auto one = analyze(load(bucket_workload(1)));
  EXPECT_EQ(find(one, "H").wcrt_ns, 8 * kMs);
}

TEST(Theorem1, ChainAcrossExecutorsAddsCommunication) {
  auto w = load(R"(
version: 1
name: across
platform: {communication_us: 200}
executors:
  - {name: e0, core: 0, priority: 50}
  - {name: e1, core: 1, priority: 50}
callbacks:
  - {name: a, executor: e0, trigger: {timer_ms: 50}, publishes: t, cpu_us: 3000}
  - {name: b, executor: e1, trigger: {topic: t}, publishes: u, cpu_us: 4000}
  - {name: c, executor: e0, trigger: {topic: u}, cpu_us: 1000}
chains:
  - {name: X, priority: 1, path: [a, b, c]}
)");
  auto r = analyze(w);
  // Three sub-chains (e0, e1, e0): 3 + 4 + 1, two hand-overs of 0.2.
  const auto& x = find(r, "X");
  EXPECT_EQ(x.subchains.size(), 3u);
  EXPECT_EQ(x.wcrt_ns, 8400 * kUs);
  EXPECT_EQ(x.breakdown.communication_ns, 400 * kUs);
}

// A (T=10, E=6) on its own higher-priority executor preempts B (T=20, E=9)
// and C (T=40, E=0.1) on the same core: B cannot be bounded.
const char* kOverloaded = R"(
version: 1
name: overloaded
executors:
  - {name: exa, core: 0, priority: 90}
  - {name: ex, core: 0, priority: 50}
callbacks:
  - {name: a, executor: exa, trigger: {timer_ms: 10}, cpu_us: 6000}
  - {name: b, executor: ex, trigger: {timer_ms: 20}, cpu_us: 9000}
  - {name: c, executor: ex, trigger: {timer_ms: 40}, cpu_us: 100}
chains:
  - {name: A, priority: 3, path: [a], deadline_ms: 10}
  - {name: B, priority: 2, path: [b], deadline_ms: 16}
  - {name: C, priority: 1, path: [c]}
)";

TEST(FailSafe, HorizonStopsTheIteration) {
  auto w = load(kOverloaded);
  // A: alone on exa: R = 6. B: R0 = 0.1 (blocking by c) + 9 = 9.1;
  // 9.1 + (ceil(9.1/10)+1) * 6 = 21.1 > 20 (period).
  auto by_period = analyze(w);
  const auto& b = find(by_period, "B");
  EXPECT_FALSE(b.bounded);
  EXPECT_FALSE(b.schedulable);
  EXPECT_NE(b.reason.find("period"), std::string::npos) << b.reason;
  Options deadline;
  deadline.horizon = Horizon::kDeadline;
  auto by_deadline = analyze(w, deadline);
  EXPECT_NE(find(by_deadline, "B").reason.find("deadline"), std::string::npos);
  // C relies on B through Lemma 1, so it has no bound either.
  EXPECT_FALSE(find(by_period, "C").bounded);
  EXPECT_NE(find(by_period, "C").reason.find("relies on chain 'B'"), std::string::npos);
  EXPECT_TRUE(find(by_period, "A").schedulable);
  EXPECT_FALSE(all_critical_schedulable(by_period));
}

TEST(FailSafe, BoundPastTheDeadlineIsReportedWithItsSize) {
  auto w = load(R"(
version: 1
name: late
executors: [{name: ex, core: 0, priority: 50}]
callbacks:
  - {name: a, executor: ex, trigger: {timer_ms: 10}, cpu_us: 2000}
  - {name: b, executor: ex, trigger: {timer_ms: 100}, cpu_us: 5000}
chains:
  - {name: A, priority: 2, path: [a]}
  - {name: B, priority: 1, path: [b], deadline_ms: 6}
)");
  // A is released with every B and not blocked by it: R_A = 2. B: 5 +
  // ceil((5 + 2)/10) * 2 = 7 > D = 6 but <= T = 100.
  auto r = analyze(w);
  EXPECT_TRUE(find(r, "B").bounded);
  EXPECT_EQ(find(r, "B").wcrt_ns, 7 * kMs);
  EXPECT_FALSE(find(r, "B").schedulable);
  EXPECT_NE(find(r, "B").reason.find("exceeds the deadline"), std::string::npos);
}

TEST(FailSafe, MultiThreadedExecutorIsNotAnalyzed) {
  auto w = load(R"(
version: 1
name: mt
executors: [{name: ex, core: 0, priority: 50, threads: 4}]
callbacks: [{name: a, executor: ex, trigger: {timer_ms: 10}, cpu_us: 1000}]
chains: [{name: A, priority: 1, path: [a]}]
)");
  auto r = analyze(w);
  EXPECT_FALSE(r[0].schedulable);
  EXPECT_NE(r[0].reason.find("single-threaded"), std::string::npos);
}

TEST(FailSafe, ServerSharingAnExecutorCoreIsNotAnalyzed) {
  auto w = load(R"(
version: 1
name: shared
platform:
  accelerators: [{name: acc, backend: cpu, core: 1}]
server: {core: 0, overhead_us: 40}
executors: [{name: ex, core: 0, priority: 50}]
callbacks: [{name: a, executor: ex, trigger: {timer_ms: 10}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 100}]}]
chains: [{name: A, priority: 1, path: [a]}]
)");
  auto r = analyze(w);
  EXPECT_FALSE(r[0].schedulable);
  EXPECT_NE(r[0].reason.find("R1"), std::string::npos) << r[0].reason;
}

TEST(Examples, EveryCriticalChainOfTheShippedWorkloadsIsSchedulable) {
  for (const char* name : {"quickstart", "paam_case_study_1", "autoware_reference"}) {
    workload::LoadOptions options;
    options.machine_cores = 2;
    auto result = workload::load_file(std::string(RTACCEL_SOURCE_DIR "/examples/") + name + ".yaml", options);
    ASSERT_TRUE(result) << name << ": " << result.status().message();
    EXPECT_TRUE(all_critical_schedulable(analyze(*result))) << name;
  }
}

// ---- rtaccel's refinements, each on a system worked out above ----------

// One segment per executor: while log's callback waits for its segment on
// ex1, hot's callbacks (also on ex1) cannot issue theirs, so hot's segment
// is not in the hps of log's; hot's own segment time is interference on ex1.
TEST(Refinements, ASegmentIsNotDelayedBySegmentsOfItsOwnExecutor) {
  Options options = unrefined();
  options.one_segment_per_executor = true;
  auto r = analyze(load(kQuickstart), options);
  // Lemma 2 for log's segment: 20.1 alone (was 20.1 + 2 * 10.1 = 40.3).
  // hot: B = 5 + 20.1 + 0.04 = 25.14, E = 3, H* = 10.14: R = 38.28.
  EXPECT_EQ(find(r, "hot").breakdown.blocking_ns, 25140 * kUs);
  EXPECT_EQ(find(r, "hot").wcrt_ns, 38280 * kUs);
  // log: H* = 20.1 + 0.04; R0 = 5 + 20.14 = 25.14; + 2 * (3 + 10.14) = 51.42,
  // and mu(51.42, 100) = 2 again.
  EXPECT_EQ(find(r, "log").breakdown.accelerator_ns, 20140 * kUs);
  EXPECT_EQ(find(r, "log").wcrt_ns, 51420 * kUs);
}

// Arrivals bounded by a higher chain's bound: an activation of A released at
// r does all its work in [r, r + R_A], so a window t meets the activations
// released in a span of t + R_A: at most ceil((t + R_A) / T_A).
TEST(Refinements, AHigherChainsBoundLimitsItsActivationsInAWindow) {
  Options options = unrefined();
  options.jitter_from_bounds = true;
  // R_A = 5 as before. B: R0 = 3, min(ceil(3/10)+1, ceil(8/10)) = 1 activation:
  // 3 + 2 = 5; min(2, ceil(10/10)) = 1: 5 (7 by Lemma 1). By hand: an A
  // released at or before B's release ends within 5, so at most one meets B.
  auto r = analyze(load(picas_chains(0)), options);
  EXPECT_EQ(find(r, "B").wcrt_ns, 5 * kMs);
  // With J = 5: R_A = 10. B: R0 = 3, min(ceil(8/10)+1, ceil(13/10)) = 2: 7;
  // min(ceil(12/10)+1, ceil(17/10)) = 2: 7; plus J = 12 (14 by Lemma 1).
  auto j = analyze(load(picas_chains(5000)), options);
  EXPECT_EQ(find(j, "B").wcrt_ns, 12 * kMs);
  // Quickstart, hot bounded by 58.48 (as in Theorem1.QuickstartByHand):
  // log's own Lemma 2: 20.1 + min(2, ceil((20.1 + 58.48)/100)) * 10.1 = 30.2.
  // R0 = 5 + 20.1 + 0.04 = 25.14: mu = min(2, ceil(83.62/100)) = 1, Lemma 3
  // 20.1 + 10.1 = 30.2, H* = 30.24, R1 = 5 + 30.24 + 13.14 = 48.38; then
  // mu = min(2, ceil(106.86/100)) = 2: Lemma 3 40.3, H* = 30.24,
  // R2 = 5 + 30.24 + 26.28 = 61.52, a fixed point (71.62 by Lemma 1).
  auto q = analyze(load(kQuickstart), options);
  EXPECT_EQ(find(q, "hot").wcrt_ns, 58480 * kUs);
  EXPECT_EQ(find(q, "log").wcrt_ns, 61520 * kUs);
  EXPECT_EQ(find(q, "log").subchains[0].lemma2_ns, 30200 * kUs);
}

// Executors e0 and e1 on cores 0 and 1, one accelerator of three levels
// (no kappa) with its server on core 3 (no epsilon).
std::string two_executors(const char* name) {
  return std::string("version: 1\nname: ") + name + R"(
platform:
  accelerators: [{name: acc, backend: cpu, core: 3, priority_levels: 3}]
server: {core: 3, overhead_us: 0}
executors:
  - {name: e0, core: 0, priority: 50}
  - {name: e1, core: 1, priority: 50})";
}

// A segment's bucket: its callback's priority among the request priorities
// on its device, three of them on three levels; b's second segment is on
// the same device, so it is in b's bucket.
TEST(Buckets, ASegmentsBucketIsItsCallbacksPriorityAmongTheRequestsOnItsDevice) {
  const auto w = load(two_executors("buckets") + R"(
callbacks:
  - {name: a, executor: e0, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 1000}]}
  - {name: b, executor: e0, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 1000}, {accelerator: acc, service: busy, wcet_us: 1000}]}
  - {name: c, executor: e1, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 1000}]}
chains:
  - {name: A, priority: 30, path: [a]}
  - {name: B, priority: 20, path: [b]}
  - {name: C, priority: 10, path: [c]}
)");
  EXPECT_EQ(segment_bucket(w, 0, 0), 2);
  EXPECT_EQ(segment_bucket(w, 1, 0), 1);
  EXPECT_EQ(segment_bucket(w, 1, 1), 1);
  EXPECT_EQ(segment_bucket(w, 2, 0), 0);
}

// The blocking callback's segment and ours wait in one window: H (T=100,
// bound 1 + 10 = 11, on its own executor) releases once in it, and its
// segment delays L's or C's, not both. C (E=1, A=2) above L (E=5, A=3) on
// e0; three levels, no kappa, no epsilon. L's 300 ms is no multiple of C's
// 200: it may be running at C's release.
TEST(Refinements, ABlockingSegmentAndOursShareTheHigherActivations) {
  auto w = load(two_executors("shared_window") + R"(
callbacks:
  - {name: h, executor: e1, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 10000}]}
  - {name: c, executor: e0, trigger: {timer_ms: 200}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 2000}]}
  - {name: l, executor: e0, trigger: {timer_ms: 300}, cpu_us: 5000, segments: [{accelerator: acc, service: busy, wcet_us: 3000}]}
chains:
  - {name: H, priority: 3, path: [h]}
  - {name: C, priority: 2, path: [c]}
  - {name: L, priority: 1, path: [l]}
)");
  // Apart: L's segment, 3 + min(2, ceil((3 + 11)/100)) * 10 = 13 (C's own
  // segment is of e0, left out), so B = 5 + 13 = 18; C's, 2 + 10 = 12.
  // C = 18 + 1 + 12 = 31.
  Options apart;
  apart.blocking_shares_arrivals = false;
  EXPECT_EQ(find(analyze(w, apart), "C").wcrt_ns, 31 * kMs);
  // Together: R0 = 5 + 1 + 2 = 8; Lemma 3 over both segments, 3 + 2 + one
  // H (ceil((8 + 11)/100) = 1) * 10 = 15, less C's own 12: L's segment adds
  // 3, B = 8, R1 = 8 + 1 + 12 = 21; ceil((21 + 11)/100) = 1 again: 21. By
  // hand: L starts just before C, H's segment queues before L's or C's.
  const auto results = analyze(w);
  const auto& c = find(results, "C");
  EXPECT_EQ(c.wcrt_ns, 21 * kMs);
  EXPECT_EQ(c.breakdown.blocking_ns, 8 * kMs);
  EXPECT_EQ(c.breakdown.accelerator_ns, 12 * kMs);
}

// H goes from h0 on e0 to h1 on e1, whose segment has a higher priority
// than L's; l on e0 (250 ms, no multiple of H's 100) blocks H's first
// sub-chain. Three levels, no kappa, no
// epsilon. By hand: l starts just before H's release, and its segment, 3,
// meets no segment of H's: H's previous activation has ended, and this
// one's h1 comes after h0, which waits for l. So l holds e0 for 1 + 3, h0
// runs 1, then h1 0.5 + 2: H = 7.5. Counted in the wait of l's segment,
// h1's came in at Lemma 1's ceil(7/100) + 1 = 2 activations of H (H has no
// bound yet as it is analysed): 1 + 3 + 2 * 2 = 8, H = 11.5.
TEST(Refinements, AChainsOwnSegmentsDoNotDelayWhatBlocksIt) {
  const std::string text = two_executors("own_segments") + R"(
callbacks:
  - {name: h0, executor: e0, trigger: {timer_ms: 100}, publishes: th, cpu_us: 1000}
  - {name: h1, executor: e1, trigger: {topic: th}, cpu_us: 500, segments: [{accelerator: acc, service: busy, wcet_us: 2000}]}
  - {name: l, executor: e0, trigger: {timer_ms: 250}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 3000}]}
chains:
  - {name: H, priority: 2, path: [h0, h1]}
  - {name: L, priority: 1, path: [l]}
)";
  const auto w = load(text);
  const auto results = analyze(w);
  const auto& h = find(results, "H");
  EXPECT_EQ(h.breakdown.blocking_ns, 4 * kMs);
  EXPECT_EQ(h.wcrt_ns, 7500 * kUs + w.communication_ns);
  Options with_own;
  with_own.blocking_without_own_segments = false;
  with_own.jitter_from_earlier_bounds = false;
  const auto results_with_own = analyze(w, with_own);
  const auto& before = find(results_with_own, "H");
  EXPECT_EQ(before.breakdown.blocking_ns, 8 * kMs);
  EXPECT_EQ(before.wcrt_ns, h.wcrt_ns + 4 * kMs);
}

// Two chains F and R fuse their sources into one callback and share its tail
// (as the Autoware hot paths do); B on another core shares the accelerator.
// Three levels, no kappa, no epsilon.
TEST(Refinements, ASharedTailIsCountedOnce) {
  auto w = load(two_executors("shared_tail") + R"(
callbacks:
  - {name: f_src, executor: e0, trigger: {timer_ms: 100}, publishes: tf, cpu_us: 1000}
  - {name: r_src, executor: e0, trigger: {timer_ms: 100}, publishes: tr, cpu_us: 1000}
  - {name: fuse, executor: e0, trigger: {topics: [tf, tr]}, publishes: tt, cpu_us: 2000,
     segments: [{accelerator: acc, service: busy, wcet_us: 4000}]}
  - {name: tail, executor: e0, trigger: {topic: tt}, cpu_us: 1000}
  - {name: b, executor: e1, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 2000}]}
chains:
  - {name: F, priority: 3, path: [f_src, fuse, tail]}
  - {name: R, priority: 2, path: [r_src, fuse, tail]}
  - {name: B, priority: 1, path: [b]}
)");
  // fuse fires once per pair of sources: each firing belongs to one F and
  // one R activation (a topic each; the loader gives a topic one publisher).
  // F waits at fuse for R's message of the same release. By hand: both
  // sources at 0, f_src 1, r_src 1, fuse 2 + 4, tail 1: both end at 9.
  // F: f_src alone, 1 (R's callbacks fire only for R, released with F: none
  // is in progress at F's release); R's through r_src, 1 + F's f_src = 2;
  // from there fuse and tail, 2 + 4 + 1, fed by e0 alone (nothing lower in
  // progress when it becomes ready): F = 2 + 7 = 9, with a wait of 1.
  // Apart, R's piece counts F's whole activation, 1 + 1 + 7 = 9: F = 16.
  Options apart;
  apart.shared_callbacks_once = false;
  auto a = analyze(w, apart);
  auto r = analyze(w);
  EXPECT_EQ(find(a, "F").wcrt_ns, 16 * kMs);
  EXPECT_EQ(find(r, "F").wcrt_ns, 9 * kMs);
  EXPECT_EQ(find(r, "F").breakdown.fusion_wait_ns, 1 * kMs);
  // R: 2 to fuse, F's f_src there already; fuse and tail 7, where F's
  // f_src of this release is done and the next comes after R's end: 9.
  // Apart: 9 to fuse, then fuse and tail 7 and F's own firing of them 7: 23.
  EXPECT_EQ(find(a, "R").wcrt_ns, 23 * kMs);
  EXPECT_EQ(find(r, "R").wcrt_ns, 9 * kMs);
  EXPECT_EQ(find(r, "R").breakdown.interference_ns, 1 * kMs);
  EXPECT_EQ(find(r, "R").breakdown.fusion_wait_ns, 0u);
  // B: its segment behind the fused one, once a period, not once per chain:
  // 1 + 2 + 4 = 7 (apart, 1 + 2 + 4 + 4 = 11).
  EXPECT_EQ(find(a, "B").wcrt_ns, 11 * kMs);
  EXPECT_EQ(find(r, "B").wcrt_ns, 7 * kMs);
}

// H and L start at one callback, head, so their activations are its
// firings; H goes on at h1 on the other core, L at l1 on head's executor.
// By hand, from a release at 0: head 0-1, its segment 1-4; then h1 1 and
// its segment 2 (H = 7), l1 on e0 at the same time, 1 (L = 5). No kappa,
// no epsilon.
TEST(Refinements, ChainsFromOneHeadAreNotEachOthersRivalsOnTheirCommonPart) {
  const std::string text = two_executors("one_head") + R"(
callbacks:
  - {name: head, executor: e0, trigger: {timer_ms: 100}, publishes: th, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 3000}]}
  - {name: h1, executor: e1, trigger: {topic: th}, cpu_us: 1000, segments: [{accelerator: acc, service: busy, wcet_us: 2000}]}
  - {name: l1, executor: e0, trigger: {topic: th}, cpu_us: 1000}
chains:
  - {name: H, priority: 2, path: [head, h1]}
  - {name: L, priority: 1, path: [head, l1]}
)";
  const auto w = load(text);
  const auto r = analyze(w);
  EXPECT_EQ(find(r, "H").wcrt_ns, 7 * kMs);
  EXPECT_EQ(find(r, "L").wcrt_ns, 5 * kMs);
  // head's segment as L's is a lower segment in h1's bucket, which a
  // request of h1 may find running (R3): 3 more. But every firing of head
  // is one of H's activations: H's own, ended before h1's.
  Options rivals;
  rivals.shared_segments_are_own = false;
  EXPECT_EQ(find(analyze(w, rivals), "H").wcrt_ns, 10 * kMs);
  // h1's segment, of the higher chain, delays head's by Lemma 2 (one
  // activation: 2 more). But h1 fires for the release whose head it
  // follows, after it.
  Options before;
  before.shared_heads = false;
  EXPECT_EQ(find(analyze(w, before), "L").wcrt_ns, 7 * kMs);
}

// The same on the CPU: H goes on at a, on an executor of higher OS
// priority on head's core, L at b on the other core. By hand: head 0-1,
// then a 1-3 on core 0 and b 1-4 on core 1: L = 4. Charged a in head's
// window (L's first sub-chain, 1 + 2), L would be 6.
TEST(Refinements, ACallbackAfterTheCommonPartFiresOnceThatPartHasEnded) {
  const std::string text = R"(version: 1
name: one_head_cpu
platform: {cores: 2}
executors:
  - {name: e0, core: 0, priority: 50}
  - {name: e2, core: 0, priority: 60}
  - {name: e1, core: 1, priority: 50}
callbacks:
  - {name: head, executor: e0, trigger: {timer_ms: 100}, publishes: th, cpu_us: 1000}
  - {name: a, executor: e2, trigger: {topic: th}, cpu_us: 2000}
  - {name: b, executor: e1, trigger: {topic: th}, cpu_us: 3000}
chains:
  - {name: H, priority: 2, path: [head, a]}
  - {name: L, priority: 1, path: [head, b]}
)";
  const auto w = load(text);
  EXPECT_EQ(find(analyze(w), "L").wcrt_ns, 4 * kMs + w.communication_ns);
  EXPECT_EQ(find(analyze(w), "H").wcrt_ns, 3 * kMs + w.communication_ns);
  Options before;
  before.shared_heads = false;
  EXPECT_EQ(find(analyze(w, before), "L").wcrt_ns, 6 * kMs + w.communication_ns);
}

// C runs c1 on ea and c2 on eb, both below eh on core 0, where H's one
// callback h preempts either. Each of C's sub-chains, bounded on its own,
// meets one activation of H: 2 + 3 each, 10 in all. By hand: H releases
// once within C's activation, and its 3 ms delay whichever of c1 and c2 is
// running then, once: C = 2 + 2 + 3 = 7.
TEST(Refinements, AHigherActivationDelaysAChainOnceOverItsSubchains) {
  const std::string text = R"(version: 1
name: once_per_chain
platform: {cores: 2}
executors:
  - {name: ea, core: 0, priority: 50}
  - {name: eb, core: 0, priority: 50}
  - {name: eh, core: 0, priority: 60}
callbacks:
  - {name: c1, executor: ea, trigger: {timer_ms: 100}, publishes: t1, cpu_us: 2000}
  - {name: c2, executor: eb, trigger: {topic: t1}, cpu_us: 2000}
  - {name: h, executor: eh, trigger: {timer_ms: 100}, cpu_us: 3000}
chains:
  - {name: C, priority: 1, path: [c1, c2]}
  - {name: H, priority: 2, path: [h]}
)";
  const auto w = load(text);
  const auto results = analyze(w);
  const auto& c = find(results, "C");
  EXPECT_EQ(c.wcrt_ns, 7 * kMs + w.communication_ns);
  EXPECT_EQ(c.breakdown.interference_ns, 3 * kMs);
  ASSERT_EQ(c.subchains.size(), 2u);
  EXPECT_EQ(c.subchains[0].breakdown.interference_ns, 3 * kMs);  // each on its own
  EXPECT_EQ(c.subchains[1].breakdown.interference_ns, 3 * kMs);
  Options apart;
  apart.interference_once_per_chain = false;
  EXPECT_EQ(find(analyze(w, apart), "C").wcrt_ns, 10 * kMs + w.communication_ns);
}

// A workload's head with one executor, ex on core 0, and no accelerator.
std::string one_executor(const char* name) {
  return std::string("version: 1\nname: ") + name + R"(
platform: {cores: 2}
executors: [{name: ex, core: 0, priority: 50}])";
}

// A and B start at timers of one period on one executor: at A's release,
// B has ended its previous activation and waits for A, so b does not block
// A. At another period it can be in progress: 1 + 3.
TEST(Refinements, ALowerChainReleasedTogetherDoesNotBlock) {
  const std::string text = one_executor("together") + R"(
callbacks:
  - {name: a, executor: ex, trigger: {timer_ms: 100}, cpu_us: 1000}
  - {name: b, executor: ex, trigger: {timer_ms: 100}, cpu_us: 3000}
chains:
  - {name: A, priority: 2, path: [a]}
  - {name: B, priority: 1, path: [b]}
)";
  EXPECT_EQ(find(analyze(load(text)), "A").wcrt_ns, 1 * kMs);
  Options apart;
  apart.released_together = false;
  EXPECT_EQ(find(analyze(load(text), apart), "A").wcrt_ns, 4 * kMs);
  std::string other = text;
  other.replace(other.find("timer_ms: 100}, cpu_us: 3000"), 13, "timer_ms: 50");
  EXPECT_EQ(find(analyze(load(other)), "A").wcrt_ns, 4 * kMs);
}

// The same chains whose timers are not started together (another process's,
// a ROS 2 node's, a sensor's): the premise of item 5 is not there, and B's 3
// blocks A, whichever of the two says so.
TEST(Refinements, ATimerNotReleasedWithTheOthersBlocksAsInThePaper) {
  const std::string text = one_executor("unaligned") + R"(
callbacks:
  - {name: a, executor: ex, trigger: {timer_ms: 100}, cpu_us: 1000}
  - {name: b, executor: ex, trigger: {timer_ms: 100}, cpu_us: 3000}
chains:
  - {name: A, priority: 2, path: [a]}
  - {name: B, priority: 1, path: [b]}
)";
  for (const char* which : {"timer_ms: 100}, cpu_us: 1000", "timer_ms: 100}, cpu_us: 3000"}) {
    std::string unaligned = text;
    unaligned.replace(unaligned.find(which), 14, "timer_ms: 100, release: unaligned}");
    const auto r = analyze(load(unaligned));
    EXPECT_EQ(find(r, "A").wcrt_ns, 4 * kMs) << which;
    EXPECT_EQ(find(r, "A").breakdown.blocking_ns, 3 * kMs) << which;
  }
  // Said of both, as the runner does by default: together again.
  std::string both = text;
  for (int i = 0; i < 2; i++) both.replace(both.find("timer_ms: 100}"), 14, "timer_ms: 100, release: together}");
  EXPECT_EQ(find(analyze(load(both)), "A").wcrt_ns, 1 * kMs);
}

// L, of lower chain priority, runs on an executor of higher OS priority on
// H's core: it interferes with H, and has no bound yet as H is analysed, so
// Lemma 1 counts it: H: 10 + (ceil(10/40) + 1) * 5 = 20, a fixed point. L
// itself: 5. Analysed again with L's 5: ceil((10 + 5)/40) = 1, H = 15, and
// ceil((15 + 5)/40) = 1 again. By hand: an L released more than 5 before
// H's release has ended, and the next comes 40 later: one in H's 15.
TEST(Refinements, ALowerChainsBoundLimitsItsActivationsTheNextTime) {
  const std::string text = R"(version: 1
name: lower_above
platform: {cores: 2}
executors:
  - {name: eh, core: 0, priority: 50}
  - {name: el, core: 0, priority: 60}
callbacks:
  - {name: h, executor: eh, trigger: {timer_ms: 100}, cpu_us: 10000}
  - {name: l, executor: el, trigger: {timer_ms: 40}, cpu_us: 5000}
chains:
  - {name: H, priority: 2, path: [h]}
  - {name: L, priority: 1, path: [l]}
)";
  const auto r = analyze(load(text));
  EXPECT_EQ(find(r, "L").wcrt_ns, 5 * kMs);
  EXPECT_EQ(find(r, "H").wcrt_ns, 15 * kMs);
  EXPECT_EQ(find(r, "H").breakdown.interference_ns, 5 * kMs);
  Options once;
  once.jitter_from_earlier_bounds = false;
  EXPECT_EQ(find(analyze(load(text), once), "H").wcrt_ns, 20 * kMs);
}

// A lower chain whose period is a multiple of a higher one's is released at
// some of its releases only, and where it is bounded within the higher's
// period it has ended by the next. By hand: at 0 both are released, h runs
// 0-2, l 2-7; at 10 h runs alone.
TEST(Refinements, ALowerChainReleasedWithEveryOtherReleaseDoesNotBlock) {
  const std::string text = one_executor("harmonic") + R"(
callbacks:
  - {name: h, executor: ex, trigger: {timer_ms: 10}, cpu_us: 2000}
  - {name: l, executor: ex, trigger: {timer_ms: 20}, cpu_us: 5000}
chains:
  - {name: H, priority: 2, path: [h]}
  - {name: L, priority: 1, path: [l]}
)";
  auto r = analyze(load(text));
  EXPECT_EQ(find(r, "H").wcrt_ns, 2 * kMs);
  EXPECT_EQ(find(r, "L").wcrt_ns, 7 * kMs);  // 5 + ceil((5 + 2)/10) * 2
  // L every 15 ms: at H's release at 20, L's from 15 may still run.
  std::string apart = text;
  apart.replace(apart.find("timer_ms: 20"), 12, "timer_ms: 15");
  EXPECT_EQ(find(analyze(load(apart)), "H").wcrt_ns, 7 * kMs);
  // L of 7 ms: its bound, ceil((7 + 2)/10) = 1 and ceil((9 + 2)/10) = 2
  // arrivals of H, 7 + 2 * 2 = 11, passes H's period: the premise fails
  // and L blocks H (2 + 7), as it does with the paper's analysis.
  std::string longer = text;
  longer.replace(longer.find("cpu_us: 5000"), 12, "cpu_us: 7000");
  const auto blocked = analyze(load(longer));
  EXPECT_EQ(find(blocked, "H").wcrt_ns, 9 * kMs);
  EXPECT_EQ(find(blocked, "H").breakdown.blocking_ns, 7 * kMs);
  EXPECT_EQ(find(blocked, "L").wcrt_ns, 11 * kMs);
}

// Fusions. One executor, no accelerator; A and B start at timers of one
// period, so they are released together, and fuse at f.
const std::string kFusion = one_executor("fusion") + R"(
callbacks:
  - {name: a1, executor: ex, trigger: {timer_ms: 100}, publishes: ta, cpu_us: 1000}
  - {name: b0, executor: ex, trigger: {timer_ms: 100}, publishes: tb0, cpu_us: 2000}
  - {name: b1, executor: ex, trigger: {topic: tb0}, publishes: tb, cpu_us: 3000}
  - {name: f, executor: ex, trigger: {topics: [ta, tb]}, cpu_us: 2000}
chains:
  - {name: A, priority: 2, path: [a1, f]}
  - {name: B, priority: 1, path: [b0, b1, f]}
)";

// By hand, from the common release at 0: a1 ends at 1, b0 at 3, b1 at 6, f
// at 8, for both chains. A: a1 alone, 1 (B's callbacks fire only for B,
// released with A: none is in progress at A's release); f waits for B's
// message of the same release, B's bound through b1, 2 + 3 + a1's 1 = 6;
// f from 6, fed by ex alone (nothing lower in progress as it becomes
// ready), 2: A = 8, of which 5 is the wait. B: 6 to f, A's a1 there
// already; f 2, where a1 of this release is done and the next comes after
// B's end: B = 8.
TEST(Fusions, AChainWaitsForTheOtherBranchOfItsRelease) {
  const auto r = analyze(load(kFusion));
  EXPECT_EQ(find(r, "A").wcrt_ns, 8 * kMs);
  EXPECT_EQ(find(r, "A").breakdown.fusion_wait_ns, 5 * kMs);
  EXPECT_EQ(find(r, "A").breakdown.blocking_ns, 0u);
  EXPECT_EQ(find(r, "B").wcrt_ns, 8 * kMs);
  EXPECT_EQ(find(r, "B").breakdown.fusion_wait_ns, 0u);
  EXPECT_EQ(find(r, "B").breakdown.interference_ns, 1 * kMs);
  for (const auto& x : r) EXPECT_EQ(x.wcrt_ns, x.breakdown.blocking_ns + x.breakdown.cpu_ns +
                                                   x.breakdown.interference_ns + x.breakdown.fusion_wait_ns);
  // The paper's chain does not wait: a1 and f in one busy window, blocked
  // by b1 once, 1 + 2 + 3 = 6, below what A takes by hand.
  EXPECT_EQ(find(analyze(load(kFusion), Options::paper()), "A").wcrt_ns, 6 * kMs);
}

// D fuses its own message with C's, of another period. Every release of D
// brings one message of td, so g fires at most once per release, and C
// publishes three times in each of D's periods. By hand, both released at
// 0: d1 0-1, c1 1-2 (g waits for tc), g 2-3: D = 3. At 100, g last took
// tc at 2; C's message of 90 is there by 93: d1 100-101, g 101-102, D = 2.
// The bound: d1 and c1 as blocking (C is released apart from D), 2; C's
// bound (c1, d1 and g once each), 3, is when its first message is there:
// the wait ends at 3, g's 1 makes D = 4. Later releases: g took its
// messages by 3 + 1, C's next comes by 4 + 30 + 3 = 37, before 100.
// B's timer started apart from A's: f's message from B is not the one of A's
// release but one that may come a period of B and its bound through b1
// later, 100 + 6 with b0's 1 ms of blocking: past A's period, no bound.
TEST(Fusions, AnInputNotReleasedWithTheChainIsWaitedForAsOneOfAnotherRate) {
  std::string apart = kFusion;
  apart.replace(apart.find("timer_ms: 100}, publishes: tb0"), 14, "timer_ms: 100, release: unaligned}");
  const auto r = analyze(load(apart));
  EXPECT_FALSE(find(r, "A").bounded);
  EXPECT_NE(find(r, "A").reason.find("waits at fusions (107000 us)"), std::string::npos) << find(r, "A").reason;
}

TEST(Fusions, AnInputOfAnotherPeriodIsWaitedForFromTheFusionsLastFiring) {
  const std::string text = one_executor("fusion") + R"(
callbacks:
  - {name: d1, executor: ex, trigger: {timer_ms: 100}, publishes: td, cpu_us: 1000}
  - {name: c1, executor: ex, trigger: {timer_ms: 30}, publishes: tc, cpu_us: 1000}
  - {name: g, executor: ex, trigger: {topics: [td, tc]}, cpu_us: 1000}
chains:
  - {name: D, priority: 2, path: [d1, g]}
  - {name: C, priority: 1, path: [c1]}
)";
  const auto r = analyze(load(text));
  EXPECT_EQ(find(r, "C").wcrt_ns, 3 * kMs);
  EXPECT_EQ(find(r, "D").wcrt_ns, 4 * kMs);
  EXPECT_EQ(find(r, "D").breakdown.fusion_wait_ns, 1 * kMs);
  EXPECT_EQ(find(r, "D").breakdown.blocking_ns, 1 * kMs);
  // Counted from a message just taken: C's messages arrive at most 30 + 3
  // apart, so D's may wait that long, and g's 1 after: D = 36.
  Options taken;
  taken.fusion_waits_from_last_firing = false;
  const auto old = analyze(load(text), taken);
  EXPECT_EQ(find(old, "D").wcrt_ns, 36 * kMs);
  EXPECT_EQ(find(old, "D").breakdown.fusion_wait_ns, 33 * kMs);
  EXPECT_EQ(std::string(find(old, "D").dominant_term()), "fusion wait");
  // The gang analysis composes the same waits: C's first message is there
  // before D's own arrives, where a message just taken costs C's period.
  const auto gangs = analyze_gangs(load(text)), gangs_old = analyze_gangs(load(text), taken);
  ASSERT_TRUE(find(gangs, "D").bounded && find(gangs_old, "D").bounded);
  EXPECT_EQ(find(gangs, "D").breakdown.fusion_wait_ns, 0u);
  EXPECT_EQ(find(gangs_old, "D").wcrt_ns, find(gangs, "D").wcrt_ns + find(gangs_old, "D").breakdown.fusion_wait_ns);
  EXPECT_GT(find(gangs_old, "D").breakdown.fusion_wait_ns, 30 * kMs);
  // C slower than D: C's messages may come 150 + 3 apart, more than D's
  // period less g, so a release may find the last one taken: no bound
  // within D's period, as counted from a message just taken.
  std::string slower = text;
  slower.replace(slower.find("timer_ms: 30"), 12, "timer_ms: 150");
  EXPECT_FALSE(find(analyze(load(slower)), "D").bounded);
  // c1 longer than its period: C has no bound, nor has the wait.
  std::string slow = text;
  slow.replace(slow.find("timer_ms: 30}, publishes: tc, cpu_us: 1000"), 42, "timer_ms: 30}, publishes: tc, cpu_us: 40000");
  const auto late = analyze(load(slow));
  EXPECT_FALSE(find(late, "D").bounded);
  EXPECT_EQ(find(late, "D").reason,
            "waits at 'g' for 'tc', and chain 'C', which publishes it, has no bound through its publisher");
}

// The first release's wait rests on the runner starting both timers at one
// instant: with C's on another node, D's first message may find none of
// C's yet, and the first release may wait as long as a message just taken.
// A chain that does not start at a timer brings its messages at no known
// rate: the same.
TEST(Fusions, FromTheLastFiringOnlyWhereTheFirstReleaseAndTheRateAreKnown) {
  // D still waits more than C's period, as counted from a message just taken.
  auto as_from_a_message_just_taken = [](const std::string& text) {
    Options taken;
    taken.fusion_waits_from_last_firing = false;
    const auto r = analyze(load(text)), old = analyze(load(text), taken);
    ASSERT_TRUE(find(r, "D").bounded);
    EXPECT_GT(find(r, "D").breakdown.fusion_wait_ns, 30 * kMs);
    EXPECT_EQ(find(r, "D").wcrt_ns, find(old, "D").wcrt_ns);
  };
  as_from_a_message_just_taken(R"(version: 1
name: apart
nodes: [{name: soc1}, {name: soc2}]
links: [{name: eth0, between: [soc1, soc2], transport: tcp, rate_mbps: 1000}]
platform: {cores: 2}
executors:
  - {name: ex1, node: soc1, core: 0, priority: 50}
  - {name: ex2, node: soc2, core: 1, priority: 50}
callbacks:
  - {name: d1, executor: ex1, trigger: {timer_ms: 100}, publishes: td, cpu_us: 1000}
  - {name: c1, executor: ex2, trigger: {timer_ms: 30}, publishes: tc, cpu_us: 1000}
  - {name: g, executor: ex1, trigger: {topics: [td, tc]}, cpu_us: 1000}
chains:
  - {name: D, priority: 2, path: [d1, g]}
  - {name: C, priority: 1, path: [c1]}
)");
  as_from_a_message_just_taken(one_executor("relayed") + R"(
callbacks:
  - {name: s, executor: ex, trigger: {timer_ms: 100}, publishes: ts, cpu_us: 1000}
  - {name: d1, executor: ex, trigger: {topic: ts}, publishes: td, cpu_us: 1000}
  - {name: c1, executor: ex, trigger: {timer_ms: 30}, publishes: tc, cpu_us: 1000}
  - {name: g, executor: ex, trigger: {topics: [td, tc]}, cpu_us: 1000}
chains:
  - {name: S, priority: 3, path: [s]}
  - {name: D, priority: 2, period_ms: 100, path: [d1, g]}
  - {name: C, priority: 1, path: [c1]}
)");
}

// An input that no chain from a timer publishes has no bound on its wait.
TEST(Fusions, AnInputWithoutAKnownRateLeavesTheChainWithoutABound) {
  const auto r = analyze(load(one_executor("fusion") + R"(
callbacks:
  - {name: a1, executor: ex, trigger: {timer_ms: 100}, publishes: ta, cpu_us: 1000}
  - {name: s, executor: ex, trigger: {timer_ms: 100}, publishes: ts, cpu_us: 1000}
  - {name: h, executor: ex, trigger: {topic: ts}, publishes: th, cpu_us: 1000}
  - {name: g, executor: ex, trigger: {topics: [ta, th]}, cpu_us: 1000}
chains:
  - {name: A, priority: 3, path: [a1, g]}
  - {name: S, priority: 2, path: [s]}
  - {name: H, priority: 1, period_ms: 100, path: [h]}
)"));
  EXPECT_FALSE(find(r, "A").bounded);
  EXPECT_EQ(find(r, "A").reason, "waits at 'g' for 'th', whose publisher no chain from a timer reaches without a fusion before it");
}

// A topic the chain itself published earlier on its path is there before
// the chain reaches the fusion: no wait, and one busy window as before.
TEST(Fusions, ATopicOfTheChainsOwnEarlierCallbackIsThereAlready) {
  const std::string diamond = one_executor("diamond") + R"(
callbacks:
  - {name: p, executor: ex, trigger: {timer_ms: 100}, publishes: tp, cpu_us: 1000}
  - {name: m, executor: ex, trigger: {topic: tp}, publishes: tm, cpu_us: 1000}
  - {name: v, executor: ex, trigger: {topics: [tm, tp]}, cpu_us: 1000}
chains:
  - {name: P, priority: 1, path: [p, m, v]}
)";
  const auto r = analyze(load(diamond));
  EXPECT_EQ(find(r, "P").wcrt_ns, 3 * kMs);
  ASSERT_EQ(find(r, "P").subchains.size(), 1u);
}

// All, as `rtaccel analyze` runs by default; the paper's analysis untouched.
TEST(Refinements, TogetherByDefaultAndNeverInThePapersAnalysis) {
  auto r = analyze(load(kQuickstart));
  // hot: every release of the logger's 500 ms timer is one of the sensor's
  // 100 ms timer, and log is bounded within 100 ms (below): no blocking,
  // 3 + 10.14 = 13.14. log: R0 = 25.14, mu = min(2, ceil((25.14 +
  // 13.14)/100)) = 1: 25.14 + 13.14 = 38.28, and ceil(51.42/100) = 1 again.
  EXPECT_EQ(find(r, "hot").wcrt_ns, 13140 * kUs);
  EXPECT_EQ(find(r, "hot").breakdown.blocking_ns, 0u);
  EXPECT_EQ(find(r, "log").wcrt_ns, 38280 * kUs);
  EXPECT_EQ(find(r, "log").breakdown.interference_ns, 13140 * kUs);
  auto paper = analyze(load(kQuickstart), Options::paper());
  // The paper: hot blocked by the logger's CPU time only (5 + 3 + 10.14), log
  // as Lemma 1 and all hps give it: 71.62.
  EXPECT_EQ(find(paper, "hot").wcrt_ns, 18140 * kUs);
  EXPECT_EQ(find(paper, "log").wcrt_ns, 71620 * kUs);
}

}  // namespace
}  // namespace rtaccel::analysis
