// The gang analysis against bounds computed by hand, and the workload's gang
// rules.
#include <gtest/gtest.h>

#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::analysis {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

TEST(GangTasks, ClassicRecurrenceWithoutPreemptionCost) {
  // R1 = 1; R2 = 2 + ceil(3/4)*1 = 3; R3: 3 -> 6 -> 7 -> 9 -> 10 -> 10.
  std::vector<GangTask> tasks = {{"t1", 3, 1 * kMs, 4 * kMs, 4 * kMs},
                                 {"t2", 2, 2 * kMs, 6 * kMs, 6 * kMs},
                                 {"t3", 1, 3 * kMs, 12 * kMs, 12 * kMs}};
  auto r = analyze_gang_tasks(tasks, 0);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].wcrt_ns, 1 * kMs);
  EXPECT_EQ(r[1].wcrt_ns, 3 * kMs);
  EXPECT_EQ(r[2].wcrt_ns, 10 * kMs);
  for (const auto& x : r) EXPECT_TRUE(x.schedulable) << x.name;
  EXPECT_EQ(r[2].interference_ns, 7 * kMs);
  EXPECT_EQ(r[2].preemption_ns, 0u);
}

TEST(GangTasks, PreemptionCostChargedTwicePerHigherJob) {
  // delta = 100 us, so each higher job costs C + 200 us.
  // R2 = 2 + 1.2 = 3.2. R3: 3 -> 3+1.2+2.2 = 6.4 -> 3+2.4+4.4 = 9.8
  //    -> 3+3.6+4.4 = 11.0 -> 11.0.
  std::vector<GangTask> tasks = {{"t1", 3, 1 * kMs, 4 * kMs, 4 * kMs},
                                 {"t2", 2, 2 * kMs, 6 * kMs, 6 * kMs},
                                 {"t3", 1, 3 * kMs, 12 * kMs, 12 * kMs}};
  auto r = analyze_gang_tasks(tasks, 100 * kUs);
  EXPECT_EQ(r[0].wcrt_ns, 1 * kMs);
  EXPECT_EQ(r[1].wcrt_ns, 3200 * kUs);
  EXPECT_EQ(r[2].wcrt_ns, 11 * kMs);
  EXPECT_EQ(r[2].preemption_ns, 5 * 200 * kUs);  // 3 jobs of t1, 2 of t2
  EXPECT_TRUE(r[2].schedulable);
}

TEST(GangTasks, VirtualGangMembersDoNotDelayEachOther) {
  std::vector<GangTask> tasks = {{"a", 2, 2 * kMs, 10 * kMs, 10 * kMs},
                                 {"b", 2, 3 * kMs, 10 * kMs, 10 * kMs},
                                 {"low", 1, 1 * kMs, 10 * kMs, 10 * kMs}};
  auto r = analyze_gang_tasks(tasks, 0);
  EXPECT_EQ(r[0].wcrt_ns, 2 * kMs);
  EXPECT_EQ(r[1].wcrt_ns, 3 * kMs);
  EXPECT_EQ(r[2].wcrt_ns, 6 * kMs);  // 1 + 2 + 3
}

TEST(GangTasks, OverloadHasNoBound) {
  // t2 needs 3 ms every 4 ms beside t1's 2 ms every 4 ms.
  std::vector<GangTask> tasks = {{"t1", 2, 2 * kMs, 4 * kMs, 4 * kMs},
                                 {"t2", 1, 3 * kMs, 4 * kMs, 4 * kMs}};
  auto r = analyze_gang_tasks(tasks, 0);
  EXPECT_TRUE(r[0].schedulable);
  EXPECT_FALSE(r[1].bounded);
  EXPECT_FALSE(r[1].schedulable);
  EXPECT_NE(r[1].reason.find("no bound within the period"), std::string::npos);
  // Bounded but late: a deadline below the bound.
  tasks[1].wcet_ns = 1 * kMs;
  tasks[1].deadline_ns = 2 * kMs;
  r = analyze_gang_tasks(tasks, 0);
  EXPECT_TRUE(r[1].bounded);
  EXPECT_EQ(r[1].wcrt_ns, 3 * kMs);
  EXPECT_FALSE(r[1].schedulable);
  EXPECT_NE(r[1].reason.find("exceeds the deadline"), std::string::npos);
}

const char* kGangWorkload = R"(version: 1
name: gangs
platform: {cores: 2, gang_preemption_us: 100}
executors:
  - {name: ex_hi, core: 0, priority: 80}
  - {name: ex_lo, core: 1, priority: 70}
  - {name: ex_lo2, core: 0, priority: 60}
gangs:
  - {name: g_hi, priority: 20, executors: [ex_hi]}
  - {name: g_lo, priority: 10, threshold_mbps: 300, executors: [ex_lo]}
callbacks:
  - {name: a, executor: ex_hi, trigger: {timer_ms: 10}, cpu_us: 2000}
  - {name: b, executor: ex_lo, trigger: {timer_ms: 20}, cpu_us: 5000}
  - {name: c, executor: ex_lo2, trigger: {timer_ms: 20}, cpu_us: 1000}
chains:
  - {name: A, priority: 3, path: [a]}
  - {name: B, priority: 2, path: [b]}
  - {name: C, priority: 1, path: [c]}
)";

TEST(GangWorkload, ChainsByHand) {
  workload::LoadOptions lo;
  auto w = workload::load_string(kGangWorkload, "g.yaml", lo);
  ASSERT_TRUE(w) << w.status().message();
  const workload::Workload& wl = *w;
  EXPECT_TRUE(wl.gang_scheduling);
  EXPECT_EQ(wl.gang_preemption_ns, 100 * kUs);
  // ex_lo2 is in no gang: it forms gang "ex_lo2" at its own priority (60),
  // above both declared gangs.
  auto gangs = wl.effective_gangs();
  ASSERT_EQ(gangs.size(), 3u);
  EXPECT_EQ(gangs[2].name, "ex_lo2");
  EXPECT_EQ(gangs[2].priority, 60);
  EXPECT_EQ(gangs[1].threshold_mbps, 300u);
  auto r = analyze_gangs(wl);
  ASSERT_EQ(r.size(), 3u);
  // A job waits up to delta (0.1 ms) for a lower gang to stop, when there
  // is one. C (gang 60): nothing above it, nothing of its priority on core
  // 0: 1 + 0.1.
  EXPECT_EQ(r[2].wcrt_ns, 1100 * kUs);
  EXPECT_EQ(r[2].breakdown.blocking_ns, 100 * kUs);
  // A (gang 20): c above, 1 + 0.2 per 20 ms: 2 + 0.1 + 1.2 = 3.3 ms.
  EXPECT_EQ(r[0].wcrt_ns, 3300 * kUs);
  // B (gang 10), the lowest, stops nobody: a and c above: 5 -> 5 + 2.2 +
  // 1.2 = 8.4 -> 8.4.
  EXPECT_EQ(r[1].wcrt_ns, 8400 * kUs);
  EXPECT_EQ(r[1].breakdown.cpu_ns, 5 * kMs);
  EXPECT_EQ(r[1].breakdown.blocking_ns, 0u);
  EXPECT_EQ(r[1].breakdown.interference_ns, 3400 * kUs);
  for (const auto& x : r) EXPECT_TRUE(x.schedulable) << x.chain << ": " << x.reason;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

// A chain of two callbacks in the low gang, the high gang's job released
// once per 100 ms. Callback by callback, each of a1 and a2 waits for h:
// 2 + 3.2 twice, 10.4 ms. In one window of the chain h runs once at most:
// 4 + ceil((L + 3.1) / 100) x 3.2 = 7.2 ms (3.1: h's own bound, 3 + delta,
// how long before the window a job of h that runs in it can have come).
TEST(GangWorkload, AJobOfAnotherChainCountsOncePerWindowOfTheChain) {
  auto w = workload::load_string(R"(version: 1
name: window
platform: {cores: 2, gang_preemption_us: 100}
executors:
  - {name: hi, core: 0, priority: 80}
  - {name: lo, core: 0, priority: 70}
gang_scheduling: true
callbacks:
  - {name: h, executor: hi, trigger: {timer_ms: 100}, cpu_us: 3000}
  - {name: a1, executor: lo, trigger: {timer_ms: 50}, publishes: t, cpu_us: 2000}
  - {name: a2, executor: lo, trigger: {topic: t}, cpu_us: 2000}
chains:
  - {name: H, priority: 2, path: [h]}
  - {name: A, priority: 1, path: [a1, a2]}
)", "w.yaml", {});
  ASSERT_TRUE(w) << w.status().message();
  const auto r = analyze_gangs(*w);
  EXPECT_EQ(r[0].wcrt_ns, 3100 * kUs);
  EXPECT_EQ(r[1].wcrt_ns, 7200 * kUs);
  EXPECT_EQ(r[1].breakdown.cpu_ns, 4 * kMs);
  EXPECT_EQ(r[1].breakdown.blocking_ns, 0u);
  EXPECT_EQ(r[1].breakdown.interference_ns, 3200 * kUs);
  EXPECT_TRUE(r[1].schedulable) << r[1].reason;
}

// One executor, one thread: the callbacks run one at a time, the highest
// priority first. b (3 ms every 10 ms, chain priority 1) can only have
// started before a1 and make it wait once; a2 follows a1 there and never
// waits for b: 2 + 3 + 2 = 7 ms, where counting b as interference gave
// 4 + ceil((L + 7) / 10) x 3 = 10 ms. b waits for a1 and a2: 3 + 4.
TEST(GangWorkload, ALowerCallbackOfTheSameExecutorBlocksOnceAndNotAfterItsPredecessor) {
  auto w = workload::load_string(R"(version: 1
name: order
platform: {cores: 2, gang_preemption_us: 100}
executors:
  - {name: ex, core: 0, priority: 80}
gang_scheduling: true
callbacks:
  - {name: a1, executor: ex, trigger: {timer_ms: 100}, publishes: t, cpu_us: 2000}
  - {name: a2, executor: ex, trigger: {topic: t}, cpu_us: 2000}
  - {name: b, executor: ex, trigger: {timer_ms: 10}, cpu_us: 3000}
chains:
  - {name: A, priority: 2, path: [a1, a2]}
  - {name: B, priority: 1, path: [b]}
)", "o.yaml", {});
  ASSERT_TRUE(w) << w.status().message();
  const auto r = analyze_gangs(*w);
  EXPECT_EQ(r[0].wcrt_ns, 7 * kMs);
  EXPECT_EQ(r[0].breakdown.blocking_ns, 3 * kMs);
  EXPECT_EQ(r[0].breakdown.interference_ns, 0u);
  EXPECT_EQ(r[1].wcrt_ns, 7 * kMs);
  EXPECT_EQ(r[1].breakdown.interference_ns, 4 * kMs);
}

// A stopped gang's request keeps its place at the server: the high gang's
// job waits for a low gang's kernel in its bucket or above, not for one it
// preempts (which costs kappa before and after its own kernel instead).
TEST(GangWorkload, AStoppedGangsKernelInTheJobsBucketBlocksIt) {
  const std::string text = R"(version: 1
name: kernels
platform:
  cores: 2
  gang_preemption_us: 100
  accelerators:
    - {name: acc0, backend: cpu, core: 1, priority_levels: LEVELS, preemption_cost_us: 50}
server: {core: 1, overhead_us: 10}
executors:
  - {name: hi, core: 0, priority: 80}
  - {name: lo, core: 0, priority: 70}
gang_scheduling: true
callbacks:
  - {name: h, executor: hi, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 2000}]}
  - {name: l, executor: lo, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 5000}]}
chains:
  - {name: H, priority: 2, path: [h]}
  - {name: L, priority: 1, path: [l]}
)";
  // One bucket: h's kernel (2 + 0.01) queues behind l's (5.01), and delta.
  auto one = workload::load_string(replaced(text, "LEVELS", "1"), "k.yaml", {});
  ASSERT_TRUE(one) << one.status().message();
  auto r = analyze_gangs(*one);
  EXPECT_EQ(r[0].wcrt_ns, 8120 * kUs);
  EXPECT_EQ(r[0].breakdown.blocking_ns, 5110 * kUs);
  // Two: l's kernel is in the lower bucket; h's kernel costs 2 + 2 x 0.05
  // + 0.01.
  auto two = workload::load_string(replaced(text, "LEVELS", "2"), "k.yaml", {});
  ASSERT_TRUE(two) << two.status().message();
  r = analyze_gangs(*two);
  EXPECT_EQ(r[0].wcrt_ns, 3210 * kUs);
  EXPECT_EQ(r[0].breakdown.blocking_ns, 100 * kUs);
}

// Two executors of one gang on two cores run side by side, but their
// kernels share the accelerator's one queue: each waits for the other's.
TEST(GangWorkload, AVirtualGangsMembersWaitForEachOthersKernels) {
  auto w = workload::load_string(R"(version: 1
name: members
platform:
  cores: 3
  accelerators:
    - {name: acc0, backend: cpu, core: 2, priority_levels: 1}
server: {core: 2, overhead_us: 10}
executors:
  - {name: ea, core: 0, priority: 80}
  - {name: eb, core: 1, priority: 80}
gangs:
  - {name: g, priority: 50, executors: [ea, eb]}
callbacks:
  - {name: x, executor: ea, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 2000}]}
  - {name: y, executor: eb, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 3000}]}
chains:
  - {name: X, priority: 2, path: [x]}
  - {name: Y, priority: 1, path: [y]}
)", "m.yaml", {});
  ASSERT_TRUE(w) << w.status().message();
  const auto r = analyze_gangs(*w);
  // 1 + 2.01 of its own, 3.01 of y's kernel; y: 1 + 3.01 and 2.01 of x's.
  EXPECT_EQ(r[0].wcrt_ns, 6020 * kUs);
  EXPECT_EQ(r[1].wcrt_ns, 6020 * kUs);
  EXPECT_EQ(r[0].breakdown.interference_ns, 3010 * kUs);
}

// The regulator's thread, 0.1 ms every 1 ms on core 0, in both analyses:
// a callback of 2 ms alone on core 0 takes 2 + 0.1 x (ceil(R / 1) + 1):
// 2 -> 2.3 -> 2.4 -> 2.4 ms. Without isolation, 2 ms.
TEST(Isolation, TheRegulatorIsChargedOnTheCoresItRegulates) {
  const std::string base = R"(version: 1
name: regulated
platform: {cores: 2}
executors:
  - {name: ex, core: 0, priority: 50}
  - {name: other, core: 1, priority: 50}
callbacks:
  - {name: a, executor: ex, trigger: {timer_ms: 10}, cpu_us: 2000}
  - {name: b, executor: other, trigger: {timer_ms: 10}, cpu_us: 2000}
chains:
  - {name: A, priority: 2, path: [a]}
  - {name: B, priority: 1, path: [b]}
)";
  for (bool gang : {false, true}) {
    std::string text = base + "gang_scheduling: " + (gang ? "true" : "false") + "\n";
    auto plain = workload::load_string(text, "r.yaml", {});
    ASSERT_TRUE(plain) << plain.status().message();
    text += "isolation: {regulator: {cores: [0], period_us: 1000, cost_us: 100}}\n";
    auto regulated = workload::load_string(text, "r.yaml", {});
    ASSERT_TRUE(regulated) << regulated.status().message();
    const auto before = gang ? analyze_gangs(*plain) : analyze(*plain);
    const auto after = gang ? analyze_gangs(*regulated) : analyze(*regulated);
    // Under gangs the two executors' gangs have one priority: one virtual
    // gang, on two cores, so neither delays the other.
    EXPECT_EQ(before[0].wcrt_ns, 2 * kMs) << (gang ? "gang" : "paam");
    EXPECT_EQ(after[0].wcrt_ns, 2400 * kUs) << (gang ? "gang" : "paam");
    EXPECT_EQ(after[0].breakdown.regulator_ns, 400 * kUs) << (gang ? "gang" : "paam");
    // Core 1 is not regulated.
    EXPECT_EQ(after[1].breakdown.regulator_ns, 0u);
    EXPECT_EQ(regulator_ns(*regulated, 1, 5 * kMs), 0u);
    EXPECT_EQ(regulator_ns(*regulated, 0, 5 * kMs), 600 * kUs);
  }
}

std::vector<std::string> errors_of(const std::string& text) {
  auto w = workload::load_string(text, "g.yaml", {});
  if (w) return {};
  return w.status().lines();
}

TEST(GangWorkload, RulesWithPositions) {
  auto e = errors_of(replaced(kGangWorkload, "executors: [ex_hi]", "executors: [ex_nope]"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0], "g.yaml:9:44: gang 'g_hi': no executor named 'ex_nope'");

  e = errors_of(replaced(kGangWorkload, "executors: [ex_lo]", "executors: [ex_lo, ex_hi]"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("g.yaml:10:"), std::string::npos) << e[0];
  EXPECT_NE(e[0].find("executor 'ex_hi' is already in gang 'g_hi'"), std::string::npos) << e[0];

  e = errors_of(replaced(kGangWorkload, "name: g_lo,", "name: g_hi,"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("g.yaml:10:5: gang 'g_hi' is defined twice (first at line 9)"), std::string::npos) << e[0];

  e = errors_of(replaced(kGangWorkload, "priority: 20, executors", "priority: 100, executors"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("g.yaml:9:28: gang 'g_hi': priority must be between 1 and 99, got 100"), std::string::npos)
      << e[0];

  e = errors_of(replaced(kGangWorkload, "threshold_mbps: 300", "threshold: 300"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("unknown key 'threshold'"), std::string::npos) << e[0];

  e = errors_of(replaced(kGangWorkload, "name: g_hi,", "name: ex_lo2,"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("gang 'ex_lo2': executor 'ex_lo2' is in no gang, so it forms a gang of its own name"),
            std::string::npos) << e[0];

  e = errors_of(replaced(kGangWorkload, "gangs:\n", "gang_scheduling: maybe\ngangs:\n"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("g.yaml:8:18: workload: gang_scheduling must be"), std::string::npos) << e[0];

  e = errors_of(replaced(kGangWorkload, "executors: [ex_hi]", "executors: []"));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("executors is empty"), std::string::npos) << e[0];
}

TEST(GangWorkload, SchedulingSwitch) {
  auto w = workload::load_string(replaced(kGangWorkload, "gangs:\n", "gang_scheduling: false\ngangs:\n"), "g.yaml", {});
  ASSERT_TRUE(w) << w.status().message();
  EXPECT_FALSE(w->gang_scheduling);
  EXPECT_EQ(w->gangs.size(), 2u);
}

// Chain A, a1 -> f on exA (gang 50, core 0), and chain B, b0 -> b1 -> f on
// B_EXECUTOR, with EXECUTORS; no gang preemption cost.
workload::Workload gang_fusion(const std::string& executors, const std::string& b_executor) {
  auto w = workload::load_string(R"(version: 1
name: gang_fusion
platform: {cores: 2, gang_preemption_us: 0, communication_us: 0}
gang_scheduling: true
executors:
)" + executors + R"(
callbacks:
  - {name: a1, executor: exA, trigger: {timer_ms: 100}, publishes: ta, cpu_us: 1000}
  - {name: f, executor: exA, trigger: {topics: [ta, tb]}, cpu_us: 2000}
  - {name: b0, executor: )" + b_executor + R"(, trigger: {timer_ms: 100}, publishes: tb0, cpu_us: 2000}
  - {name: b1, executor: )" + b_executor + R"(, trigger: {topic: tb0}, publishes: tb, cpu_us: 3000}
chains:
  - {name: A, priority: 2, path: [a1, f]}
  - {name: B, priority: 1, path: [b0, b1, f]}
)", "g.yaml", {});
  if (!w) ADD_FAILURE() << w.status().message();
  return w ? *w : workload::Workload{};
}

// A fusion under gangs: a1 and f in the gang of exA (50, core 0), b0 and
// b1 in exB's (40, core 1), no gang preemption cost. Jobs by hand: a1 = 1 +
// f's 2 (its gang and core) = 3; f = 2 + a1's 1 = 3; b0 = 2 + a1 + f above
// + b1 of its gang and core = 8; b1, after b0 on its executor, 3 + 1 + 2 + 2
// = 8. Their sum would have A reach f at 3 and wait for B's message of the
// same release until B's bound through b1, 16. As one window of the gang
// lock, B's piece up to b1 holds b0 and b1 (5) and at most one job each of
// a1 and f, whose releases lie within the window's reach: 8. So A waits
// from 3 to 8 and ends after f's 3 (2 and a1's 1): 11, of which 5 is the
// wait; B ends after the same f: 11 (a1 published long before). By hand:
// a1 runs 0-1, b0 1-3, b1 3-6, f 6-8. Without the wait the chain as one
// window holds a1 and f alone, 3, although f cannot start before b1 ends.
TEST(GangWorkload, AChainWaitsAtAFusionForTheOtherBranch) {
  const auto w = gang_fusion("  - {name: exA, core: 0, priority: 50}\n  - {name: exB, core: 1, priority: 40}", "exB");
  auto r = analyze_gangs(w);
  EXPECT_EQ(r[0].wcrt_ns, 11 * kMs);
  EXPECT_EQ(r[0].breakdown.fusion_wait_ns, 5 * kMs);
  EXPECT_EQ(r[1].wcrt_ns, 11 * kMs);
  EXPECT_EQ(r[1].breakdown.fusion_wait_ns, 0u);
  Options no_wait;
  no_wait.fusions_wait = false;
  EXPECT_EQ(analyze_gangs(w, no_wait)[0].wcrt_ns, 3 * kMs);
}

// The same four callbacks on exA alone. a1 = 1 + f 2 + b1 blocking 3 = 6;
// f, fed by exA alone, is ready as exA ends a1 or b1: nothing of lower
// priority in progress, 2 + a1 = 3 (6 with b1 as blocking). B's piece up
// to b1 as one window: b0 and b1 (5), one a1 and one f: 8. A: 6, waits
// for B until 8, then f: 11; B: 8 and f: 11. By hand: a1 0-1, b0 1-3, b1
// 3-6, f 6-8.
TEST(GangWorkload, AFusionFedByItsOwnExecutorIsNotBlocked) {
  auto r = analyze_gangs(gang_fusion("  - {name: exA, core: 0, priority: 50}", "exA"));
  EXPECT_EQ(r[0].wcrt_ns, 11 * kMs);
  EXPECT_EQ(r[0].breakdown.blocking_ns, 3 * kMs);
  EXPECT_EQ(r[1].wcrt_ns, 11 * kMs);
}

// Three callbacks of 10 ms on exC (gang 40, core 0) and a job of 30 ms every
// 100 ms in a higher gang on core 1. Each callback on its own meets that job:
// 40 each, 120 in all, past the period. As one window the chain meets it
// once: 30 + 30 = 60, which is the schedule by hand (h 0-30, then c1, c2,
// c3 to 60).
TEST(GangWorkload, AChainWhoseJobsSumPastItsPeriodIsBoundedAsOneWindow) {
  auto w = workload::load_string(R"(version: 1
name: gang_window
platform: {cores: 2, gang_preemption_us: 0, communication_us: 0}
gang_scheduling: true
executors:
  - {name: exH, core: 1, priority: 50}
  - {name: exC, core: 0, priority: 40}
callbacks:
  - {name: h, executor: exH, trigger: {timer_ms: 100}, cpu_us: 30000}
  - {name: c1, executor: exC, trigger: {timer_ms: 100}, publishes: t1, cpu_us: 10000}
  - {name: c2, executor: exC, trigger: {topic: t1}, publishes: t2, cpu_us: 10000}
  - {name: c3, executor: exC, trigger: {topic: t2}, cpu_us: 10000}
chains:
  - {name: H, priority: 2, path: [h]}
  - {name: C, priority: 1, path: [c1, c2, c3]}
)", "g.yaml", {});
  ASSERT_TRUE(w) << w.status().message();
  const auto r = analyze_gangs(*w);
  ASSERT_TRUE(r[1].bounded) << r[1].reason;
  EXPECT_EQ(r[1].wcrt_ns, 60 * kMs);
  EXPECT_EQ(r[1].breakdown.interference_ns, 30 * kMs);
}

// BWLOCK++ Eq. 4 by hand: E = C + G^m + G^e; B = the longest locked segment
// of a lower-priority task; higher-priority jobs interfere with E each.
TEST(BwlockRta, Equation4ByHand) {
  constexpr uint64_t ms = 1000000;
  std::vector<BwlockTask> tasks = {
      {"t1", 3, 1 * ms, ms / 2, 3 * ms / 2, 1 * ms, 10 * ms, 0},
      {"t2", 2, 2 * ms, 0, 2 * ms, 2 * ms, 20 * ms, 0},
      {"t3", 1, 1 * ms, 1 * ms, 4 * ms, 3 * ms, 50 * ms, 0},
  };
  auto r = analyze_bwlock_tasks(tasks);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].blocking_ns, 3 * ms);  // t3's 3 ms kernel cannot be preempted
  EXPECT_EQ(r[0].wcrt_ns, 6 * ms);
  EXPECT_EQ(r[1].blocking_ns, 3 * ms);
  EXPECT_EQ(r[1].wcrt_ns, 10 * ms);     // 4 + 3 + one job of t1 (3)
  EXPECT_EQ(r[2].blocking_ns, 0u);
  EXPECT_EQ(r[2].wcrt_ns, 16 * ms);     // 6 + two jobs of t1 + one of t2
  EXPECT_EQ(r[2].interference_ns, 10 * ms);
  for (const auto& x : r) EXPECT_TRUE(x.schedulable) << x.name;

  tasks[1].deadline_ns = 9 * ms;  // the lower task's kernel alone pushes it past
  r = analyze_bwlock_tasks(tasks);
  EXPECT_FALSE(r[1].schedulable);
  EXPECT_NE(r[1].reason.find("exceeds the deadline 9000 us"), std::string::npos) << r[1].reason;

  tasks[0].cpu_ns = 9 * ms;  // t1 alone fills its period: no bound for t3
  r = analyze_bwlock_tasks(tasks);
  EXPECT_FALSE(r[2].bounded);
  EXPECT_FALSE(r[2].schedulable);
}

}  // namespace
}  // namespace rtaccel::analysis
