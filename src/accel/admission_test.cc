#include "accel/admission.h"

#include <gtest/gtest.h>

#include "accel/test_descs.h"
#include "rtaccel/analysis.hpp"

namespace rtaccel::accel {
namespace {

using test::CallbackSpec;
using test::one_callback;
using test::wire_status;

constexpr uint64_t kMs = 1000000;

AdmissionOptions options(uint32_t devices = 1, uint32_t levels = 4) {
  AdmissionOptions o;
  o.epsilon_ns = 50000;
  o.kappa_ns = 50000;
  o.device_levels.assign(devices, levels);
  return o;
}

TEST(Admission, AdmitsASchedulableSetAndRefusesAMissWithTheChainAndItsBound) {
  Admission a(options());
  Admitted out;
  std::string why;
  auto hot = one_callback("hot", 10, 100 * kMs, {.name = "sensor", .wcet_ns = 10 * kMs});
  hot.chain.deadline_ns = 20 * kMs;
  ASSERT_EQ(wire_status(a.admit(hot, &out), &why), 0) << why;
  // 15 ms of higher-priority accelerator work, twice in a window, pushes
  // 'hot' past its 20 ms deadline.
  auto heavy = one_callback("heavy", 20, 100 * kMs, {.name = "planner", .executor = "ex2", .core = 1, .wcet_ns = 15 * kMs});
  EXPECT_EQ(wire_status(a.admit(heavy, &out), &why), -EDEADLK);
  EXPECT_NE(why.find("chain 'hot': bound "), std::string::npos) << why;
  EXPECT_NE(why.find("exceeds deadline 20.000 ms"), std::string::npos) << why;
  EXPECT_NE(why.find("admitting chain 'heavy'"), std::string::npos) << why;
  EXPECT_EQ(a.chains(), 1u);  // a refusal changes nothing
  // 95 ms every 100 ms leaves no bound at all: refused too, with the reason.
  auto hopeless = one_callback("hopeless", 5, 100 * kMs, {.name = "h", .executor = "ex3", .core = 2, .wcet_ns = 95 * kMs});
  EXPECT_EQ(wire_status(a.admit(hopeless, &out), &why), -EDEADLK);
  EXPECT_NE(why.find("chain '"), std::string::npos) << why;
  // A lighter one fits.
  auto light = one_callback("light", 20, 100 * kMs, {.name = "planner", .executor = "ex2", .core = 1, .wcet_ns = 1 * kMs});
  EXPECT_EQ(wire_status(a.admit(light, &out), &why), 0) << why;
  EXPECT_EQ(out.priority, 20);
}

// The executor runs the higher chain's callbacks first; two chains of one
// priority on one executor have no order, and the analysis, which needs
// the higher one's bound first, found none for either: the second was
// refused as "would break chain 'a': relies on chain 'b', which has no
// bound". A workload file may not give two chains one priority; a chain
// registered with another's, on an executor they share, is refused saying
// so where either is critical. On executors of their own they may (clients
// at the same level), and where neither asks for a bound.
TEST(Admission, TwoChainsOfOnePriorityOnOneExecutorAreRefusedSayingSo) {
  Admission a(options());
  Admitted out;
  std::string why;
  ASSERT_EQ(wire_status(a.admit(one_callback("a", 10, 50 * kMs, {.name = "a1", .wcet_ns = kMs}), &out), &why), 0)
      << why;
  EXPECT_EQ(wire_status(a.admit(one_callback("b", 10, 50 * kMs, {.name = "b1", .wcet_ns = kMs}), &out), &why),
            -EINVAL);
  EXPECT_EQ(why, "chain 'b': priority 10 is chain 'a''s too, and both run on executor 'ex', which runs the higher "
                 "chain's callbacks first: give the chains priorities of their own");
  EXPECT_EQ(a.chains(), 1u);
  EXPECT_EQ(wire_status(a.admit(one_callback("c", 10, 50 * kMs, {.name = "c1", .executor = "ec", .wcet_ns = kMs}),
                                &out), &why), 0) << why;
  const auto best_effort = [](const std::string& name) {
    return one_callback(name, 3, 50 * kMs, {.name = name + "1", .executor = "eb", .core = 1, .wcet_ns = kMs}, 64, 64,
                        false);
  };
  EXPECT_EQ(wire_status(a.admit(best_effort("d"), &out), &why), 0) << why;
  EXPECT_EQ(wire_status(a.admit(best_effort("e"), &out), &why), 0) << why;
}

TEST(Admission, AgreesWithTheAnalysisOfTheSameWorkload) {
  Admission a(options());
  Admitted out;
  std::string why;
  ASSERT_EQ(wire_status(a.admit(one_callback("a", 10, 50 * kMs, {.name = "a1", .wcet_ns = 5 * kMs}), &out), &why), 0);
  ASSERT_EQ(wire_status(a.admit(one_callback("b", 20, 20 * kMs, {.name = "b1", .executor = "eb", .core = 1, .wcet_ns = 2 * kMs}), &out), &why), 0);
  const auto results = analysis::analyze(a.workload());
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) EXPECT_TRUE(r.schedulable) << r.chain << ": " << r.reason;
}

TEST(Admission, SameChainTwiceIsOneChainAndDifferentDescriptionsConflict) {
  Admission a(options());
  Admitted out;
  std::string why;
  auto d = one_callback("c", 10, 100 * kMs, {.name = "cb"});
  ASSERT_EQ(wire_status(a.admit(d, &out), &why), 0);
  ASSERT_EQ(wire_status(a.admit(d, &out), &why), 0);
  EXPECT_EQ(a.chains(), 1u);
  auto other = d;
  other.chain.deadline_ns = 50 * kMs;
  EXPECT_EQ(wire_status(a.admit(other, &out), &why), -EINVAL);
  EXPECT_NE(why.find("different description"), std::string::npos);
  // A callback shared by two chains must be described alike in both.
  auto shared = one_callback("d", 5, 100 * kMs, {.name = "cb", .cpu_ns = 1});
  EXPECT_EQ(wire_status(a.admit(shared, &out), &why), -EINVAL);
  EXPECT_NE(why.find("callback 'cb'"), std::string::npos) << why;
  // So must an executor.
  auto moved = one_callback("e", 5, 100 * kMs, {.name = "x", .core = 1});
  EXPECT_EQ(wire_status(a.admit(moved, &out), &why), -EINVAL);
  EXPECT_NE(why.find("executor 'ex'"), std::string::npos) << why;
  // Two references: the chain stays after one release, goes after the second.
  a.release("c");
  EXPECT_EQ(a.chains(), 1u);
  a.release("c");
  EXPECT_EQ(a.chains(), 0u);
}

TEST(Admission, PlacesCallbacksWorstFitAcrossDevices) {
  Admission a(options(2));
  Admitted out;
  std::string why;
  ASSERT_EQ(wire_status(a.admit(one_callback("big", 10, 100 * kMs, {.name = "b", .wcet_ns = 40 * kMs}), &out), &why), 0) << why;
  const uint32_t first = out.device;
  ASSERT_EQ(wire_status(a.admit(one_callback("small", 9, 100 * kMs, {.name = "s", .executor = "e2", .core = 1, .wcet_ns = 10 * kMs}), &out), &why), 0) << why;
  EXPECT_NE(out.device, first);  // the emptier device
  ASSERT_EQ(wire_status(a.admit(one_callback("tiny", 8, 100 * kMs, {.name = "t", .executor = "e3", .core = 2, .wcet_ns = 5 * kMs}), &out), &why), 0) << why;
  EXPECT_NE(out.device, first);  // 10% < 40%
  EXPECT_NEAR(a.device_utilisation(first), 0.40, 1e-9);
  EXPECT_NEAR(a.device_utilisation(1 - first), 0.15, 1e-9);
}

TEST(Admission, BucketsFollowTheAnalysisDownSampling) {
  Admission a(options(1, 2));
  Admitted out;
  std::string why;
  const int priorities[] = {1, 2, 3, 4};
  for (int p : priorities) {
    const std::string n = "c" + std::to_string(p);
    ASSERT_EQ(wire_status(a.admit(one_callback(n, p, 1000 * kMs, {.name = n + "cb", .executor = n, .core = p, .wcet_ns = kMs}), &out), &why), 0) << why;
  }
  const std::vector<int> all(std::begin(priorities), std::end(priorities));
  for (int p : priorities)
    EXPECT_EQ(int(a.bucket("c" + std::to_string(p) + "cb")), analysis::bucket_of(p, all, 2));
  EXPECT_EQ(a.bucket("c1cb"), 0u);
  EXPECT_EQ(a.bucket("c4cb"), 1u);
}

const analysis::ChainResult& result_of(const std::vector<analysis::ChainResult>& results, const std::string& chain) {
  for (const auto& r : results)
    if (r.chain == chain) return r;
  ADD_FAILURE() << "no result for chain " << chain;
  static const analysis::ChainResult none;
  return none;
}

// Registered without its topics, a chain through a fusion looked like one
// that never waits there: 'front' was admitted with a bound of a few
// milliseconds while its fusion waits 20 ms for the rear driver's kernel.
// With the topics its bound holds the wait, and a chain whose other input
// no admitted chain publishes has no bound: what feeds a fusion is
// declared with it.
TEST(Admission, AFusionWaitsForTheChainsDeclaredWithItInEitherOrder) {
  const test::FusionPair p = test::fusion_pair(100 * kMs, 20 * kMs);
  Admitted out;
  std::string why;
  {
    Admission alone(options());
    EXPECT_EQ(wire_status(alone.admit(test::registration_of(p.front, 1), &out), &why), -EDEADLK);
    EXPECT_NE(why.find("waits at 'fusion' for 'Rear'"), std::string::npos) << why;
    EXPECT_EQ(alone.chains(), 0u);
  }
  for (const bool front_first : {true, false}) {
    Admission a(options());
    const std::vector<rtaccel_chain_desc> both =
        front_first ? std::vector{p.front, p.rear} : std::vector{p.rear, p.front};
    ASSERT_EQ(wire_status(a.declare(both), &why), 0) << why;
    EXPECT_EQ(a.chains(), 2u);
    const auto results = analysis::analyze(a.workload());
    const analysis::ChainResult& front = result_of(results, "front");
    EXPECT_TRUE(front.schedulable) << front.reason;
    EXPECT_GE(front.breakdown.fusion_wait_ns, 19 * kMs);
    EXPECT_GE(front.wcrt_ns, 20 * kMs);
    // What the server saw before: the same chains, no topics.
    workload::Workload untold = a.workload();
    for (auto& cb : untold.callbacks) {
      cb.publishes.clear();
      if (!cb.trigger.timer_ns) cb.trigger.topics.clear();
    }
    EXPECT_LT(result_of(analysis::analyze(untold), "front").wcrt_ns, 10 * kMs);
    // The fusion's registration finds its chain admitted.
    ASSERT_EQ(wire_status(a.admit(test::registration_of(p.front, 1), &out), &why), 0) << why;
    EXPECT_EQ(a.chains(), 2u);
    EXPECT_EQ(out.priority, 20);
  }
}

// Two chains of one period on one executor: released together, the lower
// one's 3 ms do not block the higher one (docs/analysis.md, item 5); that
// holds only for chains whose timers start at one instant, which only the
// client that declares them all at once can say.
TEST(Admission, OnlyChainsDeclaredTogetherAreTakenToBeReleasedTogether) {
  rtaccel_chain_desc high = one_callback("high", 20, 100 * kMs, {.name = "h", .cpu_ns = 1 * kMs, .service = ""}).chain;
  rtaccel_chain_desc low = one_callback("low", 10, 100 * kMs, {.name = "l", .cpu_ns = 3 * kMs, .service = ""}).chain;
  const auto bound_of_high = [](const Admission& a) { return result_of(analysis::analyze(a.workload()), "high"); };
  std::string why;
  Admitted out;
  {  // registered one by one, by clients that start their own timers
    Admission a(options());
    ASSERT_EQ(wire_status(a.admit(test::registration_of(high, 0), &out), &why), 0) << why;
    ASSERT_EQ(wire_status(a.admit(test::registration_of(low, 0), &out), &why), 0) << why;
    EXPECT_EQ(bound_of_high(a).breakdown.blocking_ns, 3 * kMs);
  }
  {  // declared together, but not said to start together
    Admission a(options());
    ASSERT_EQ(wire_status(a.declare({high, low}), &why), 0) << why;
    EXPECT_EQ(bound_of_high(a).breakdown.blocking_ns, 3 * kMs);
  }
  high.release = low.release = RTACCEL_RELEASE_TOGETHER;
  {  // what rtaccel run declares: its runner starts both at one instant
    Admission a(options());
    ASSERT_EQ(wire_status(a.declare({high, low}), &why), 0) << why;
    EXPECT_EQ(bound_of_high(a).breakdown.blocking_ns, 0u);
    EXPECT_EQ(bound_of_high(a).wcrt_ns, 1 * kMs);
  }
  {  // two declarations (two runs on one server): each has its own start
    Admission a(options());
    ASSERT_EQ(wire_status(a.declare({high}), &why), 0) << why;
    ASSERT_EQ(wire_status(a.declare({low}), &why), 0) << why;
    EXPECT_EQ(bound_of_high(a).breakdown.blocking_ns, 3 * kMs);
  }
  {  // a registration that says otherwise than the declaration conflicts
    Admission a(options());
    ASSERT_EQ(wire_status(a.declare({high, low}), &why), 0) << why;
    rtaccel_chain_desc unaligned = low;
    unaligned.release = RTACCEL_RELEASE_UNALIGNED;
    EXPECT_EQ(wire_status(a.admit(test::registration_of(unaligned, 0), &out), &why), -EINVAL);
  }
}

TEST(Admission, ADeclarationIsAdmittedWholeOrNotAtAll) {
  Admission a(options());
  std::string why;
  // 'front' cannot end within 10 ms of its release while its fusion waits
  // for a 20 ms kernel: neither chain is added.
  const test::FusionPair tight = test::fusion_pair(10 * kMs, 20 * kMs);
  EXPECT_EQ(wire_status(a.declare({tight.rear, tight.front}), &why), -EDEADLK);
  EXPECT_NE(why.find("chain 'front': bound "), std::string::npos) << why;
  EXPECT_NE(why.find("exceeds deadline 10.000 ms"), std::string::npos) << why;
  EXPECT_EQ(a.chains(), 0u);
  const test::FusionPair p = test::fusion_pair(100 * kMs, 20 * kMs);
  ASSERT_EQ(wire_status(a.declare({p.rear, p.front}), &why), 0) << why;
  // A chain that breaks an admitted one names the chains it came with.
  auto heavy = one_callback("heavy", 30, 100 * kMs, {.name = "h", .executor = "ex_h", .core = 3, .wcet_ns = 85 * kMs});
  auto light = one_callback("light", 5, 100 * kMs, {.name = "l", .executor = "ex_l", .core = 3, .wcet_ns = kMs});
  EXPECT_EQ(wire_status(a.declare({light.chain, heavy.chain}), &why), -EDEADLK);
  EXPECT_NE(why.find("admitting 2 chains would break chain '"), std::string::npos) << why;
  // One conflicting description refuses the rest with it.
  auto other_rear = p.rear;
  other_rear.callbacks[0].cpu_ns += 1;
  EXPECT_EQ(wire_status(a.declare({light.chain, other_rear}), &why), -EINVAL);
  EXPECT_NE(why.find("'rear' was admitted with a different description"), std::string::npos) << why;
  EXPECT_EQ(a.chains(), 2u);
  // Declared again: another reference each, released one by one.
  ASSERT_EQ(wire_status(a.declare({p.front, p.rear}), &why), 0) << why;
  a.release("front");
  a.release("rear");
  EXPECT_EQ(a.chains(), 2u);
  a.release("front");
  a.release("rear");
  EXPECT_EQ(a.chains(), 0u);
}

// The regulator's thread takes 100 us of every 1 ms period on the cores it
// regulates, above everything there: the executor's core 0 and the cpu
// backend's device, core 1. 'hot' alone: 1 ms of CPU time, then a 4 ms
// kernel on the device: without the regulator B0 = 1 + 4 + 2 kappa +
// epsilon = 5.15 ms.
TEST(Admission, TheRegulatorsTimeIsChargedOnTheCoresItRegulates) {
  const auto bound = [](std::vector<int> regulated, uint64_t cost_ns, uint64_t deadline_ns, std::string* why) {
    AdmissionOptions o = options();
    o.device_cores = {1};
    o.regulator_cost_ns = cost_ns;
    o.regulator_period_ns = kMs;
    o.regulated_cores = std::move(regulated);
    Admission a(o);
    Admitted out;
    auto hot = one_callback("hot", 10, 100 * kMs, {.name = "c", .cpu_ns = kMs, .wcet_ns = 4 * kMs});
    hot.chain.deadline_ns = deadline_ns;
    if (wire_status(a.admit(hot, &out), why) != 0) return uint64_t{0};
    return result_of(analysis::analyze(a.workload()), "hot").wcrt_ns;
  };
  std::string why;
  const uint64_t b0 = bound({}, 0, 100 * kMs, &why);
  ASSERT_EQ(b0, 5150000u) << why;
  // Core 2 holds neither the executor nor the device.
  EXPECT_EQ(bound({2}, 100000, 100 * kMs, &why), b0) << why;
  // The device's core: the kernel A' = 4 + 0.1 * arrivals(A'), the periods
  // that reach a window of A' (one more than it spans): from 4 ms, 4 + 0.5
  // = 4.5, then 4 + 0.6 = 4.6, which spans five periods and reaches six.
  EXPECT_EQ(bound({1}, 100000, 100 * kMs, &why), b0 + 600000) << why;
  // The executor's core: R = B0 + 0.1 * arrivals(R): 5.15 reaches seven
  // periods, 5.85 too.
  EXPECT_EQ(bound({0}, 100000, 100 * kMs, &why), 5850000u) << why;
  // Both, as with no cores given (every core): R = B0 + 0.6 + 0.1 *
  // arrivals(R): 5.75, then 6.45 (seven periods), 6.55 (eight), which
  // reaches eight.
  const uint64_t both = bound({}, 100000, 100 * kMs, &why);
  EXPECT_EQ(both, 6550000u) << why;
  EXPECT_EQ(bound({0, 1}, 100000, 100 * kMs, &why), both) << why;
  // A deadline between the two: admitted only where the regulator is not
  // told of, refused with it.
  EXPECT_EQ(bound({}, 0, b0 + 500000, &why), b0) << why;
  EXPECT_EQ(bound({}, 100000, b0 + 500000, &why), 0u);
  EXPECT_NE(why.find("chain 'hot': bound "), std::string::npos) << why;
}

}  // namespace
}  // namespace rtaccel::accel
