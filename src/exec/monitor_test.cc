// The run's monitor: which broken assumption explains a chain instance over
// its bound, from trace events and core samples made for the purpose; the
// cores' samples from /proc/stat; and the memory walk a callback's work makes.
#include "exec/monitor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "core/busy.h"

namespace rtaccel::exec {
namespace {

using nlohmann::json;

constexpr uint64_t kMs = 1000000;

// Two callbacks on core 0, a chain each: `a` (WCET 2 ms, bound 10 ms here)
// and `b` (WCET 1 ms), at other periods, so that `b` can be in progress at
// `a`'s release (timers of one period are released together).
const char kWorkload[] = R"(
version: 1
name: monitored
platform: {cores: 2}
executors:
  - {name: ex, core: 0, priority: 80}
callbacks:
  - {name: a, executor: ex, trigger: {timer_ms: 100}, cpu_us: 2000}
  - {name: b, executor: ex, trigger: {timer_ms: 50}, cpu_us: 1000}
chains:
  - {name: ca, priority: 2, path: [a]}
  - {name: cb, priority: 1, path: [b]}
)";

// Two callbacks on core 0 that call the accelerator: `hi` from the higher
// chain, in the higher of its two buckets, and `lo`, each kernel declared at
// 5 ms.
const char kAcceleratorWorkload[] = R"(
version: 1
name: monitored
platform:
  cores: 2
  accelerators:
    - {name: acc0, backend: cpu, core: 1, priority_levels: 2}
server: {core: 1, overhead_us: 50}
executors:
  - {name: ex, core: 0, priority: 80}
callbacks:
  - {name: hi, executor: ex, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 5000}]}
  - {name: lo, executor: ex, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 5000}]}
chains:
  - {name: chi, priority: 2, path: [hi]}
  - {name: clo, priority: 1, path: [lo]}
)";

// Two executors on core 0: `hi` above `lo`, a timer callback each.
const char kTwoExecutors[] = R"(
version: 1
name: monitored
platform: {cores: 2}
executors:
  - {name: hi, core: 0, priority: 80}
  - {name: lo, core: 0, priority: 70}
callbacks:
  - {name: a, executor: hi, trigger: {timer_ms: 100}, cpu_us: 2000}
  - {name: b, executor: lo, trigger: {timer_ms: 100}, cpu_us: 1000}
chains:
  - {name: ca, priority: 2, path: [a]}
  - {name: cb, priority: 1, path: [b]}
)";

// Two executors on core 0, `hi` above `lo`, whose callbacks call the
// accelerator.
const char kTwoExecutorsAndAccelerator[] = R"(
version: 1
name: monitored
platform:
  cores: 2
  accelerators:
    - {name: acc0, backend: cpu, core: 1, priority_levels: 2}
server: {core: 1, overhead_us: 50}
executors:
  - {name: hi, core: 0, priority: 80}
  - {name: lo, core: 0, priority: 70}
callbacks:
  - {name: a, executor: hi, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 5000}]}
  - {name: b, executor: lo, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 5000}]}
chains:
  - {name: ca, priority: 2, path: [a]}
  - {name: cb, priority: 1, path: [b]}
)";

// Two nodes: the accelerator on `a`, the callback that calls it on `b`, and
// a higher executor on `a`'s core 0.
const char kRemoteAccelerator[] = R"(
version: 1
name: monitored
nodes: [{name: a}, {name: b}]
links:
  - {name: eth0, between: [a, b], transport: tcp, rate_mbps: 1000, per_chunk_us: 5}
platform:
  accelerators:
    - {name: acc0, node: a, backend: cpu, core: 1, priority_levels: 2}
server: {core: 1, overhead_us: 50}
executors:
  - {name: ex, node: b, core: 0, priority: 80}
  - {name: hi, node: a, core: 0, priority: 90}
callbacks:
  - {name: r, executor: ex, trigger: {timer_ms: 100}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 5000, request_kb: 64, response_kb: 64}]}
  - {name: h, executor: hi, trigger: {timer_ms: 100}, cpu_us: 1000}
chains:
  - {name: cr, priority: 1, path: [r]}
  - {name: ch, priority: 2, path: [h]}
)";

class Monitor : public ::testing::Test {
 protected:
  void SetUp() override { load(kWorkload); }
  void load(const char* yaml) {
    auto loaded = workload::load_string(yaml, "monitored.yaml");
    ASSERT_TRUE(loaded) << loaded.status().message();
    workload_ = *loaded;
    auto plan = make_plan(workload_);
    ASSERT_TRUE(plan) << plan.status().message();
    plan_ = *plan;
    // Room for every chain, timer and executor of the workload.
    ASSERT_TRUE(shared_.create(plan_, Capacity{std::vector<uint64_t>(workload_.chains.size(), 16),
                                               std::vector<uint64_t>(plan_.timers.size(), 16),
                                               std::vector<uint64_t>(plan_.by_executor.size() + plan_.bridges.size(), 64)}));
  }

  // Chain C's instance [start, end].
  void instance(size_t c, uint64_t start, uint64_t end) {
    auto* state = shared_.chain(c);
    const uint64_t i = state->count.load();
    shared_.samples(c)[i] = {start, end};
    state->count.store(i + 1);
  }
  // Callback CB ran [begin, end] with CPU time CPU, on its executor's THREAD.
  void callback(size_t cb, uint64_t begin, uint64_t end, uint64_t cpu, uint32_t thread = 0) {
    TraceEvent ev{};
    ev.thread = thread;
    ev.kind = static_cast<uint32_t>(TraceKind::kCallback);
    ev.callback = static_cast<uint32_t>(cb);
    ev.submit_ns = ev.begin_ns = begin;
    ev.end_ns = end;
    ev.cpu_ns = cpu;
    record(ev);
  }
  // Callback CB's kernel ran [begin, end] in BUCKET of the server, its
  // request submitted at SUBMIT (0: at BEGIN) and its client going on
  // RESUMED after its end, on its executor's THREAD.
  void kernel(size_t cb, int bucket, uint64_t begin, uint64_t end, uint64_t submit = 0, uint32_t resumed = 0,
              uint32_t thread = 0) {
    TraceEvent ev{};
    ev.thread = thread;
    ev.kind = static_cast<uint32_t>(TraceKind::kSegment);
    ev.callback = static_cast<uint32_t>(cb);
    ev.bucket = bucket;
    ev.submit_ns = submit ? submit : begin;
    ev.begin_ns = begin;
    ev.end_ns = end;
    ev.resumed_after_ns = resumed;
    record(ev);
  }
  // Into the trace of its callback's executor, as long as it has room (an
  // executor counts the events it could not keep).
  void record(const TraceEvent& ev) {
    const size_t e = workload_.callbacks[ev.callback].executor;
    const uint64_t i = shared_.executor(e)->trace_used.fetch_add(1);
    if (i < shared_.trace_capacity(e)) shared_.trace(e)[i] = ev;
  }
  // The summary's chains as the runner makes them, bound 10 ms each, over
  // it as many as the samples say; the monitor without the analysis.
  // The executors told to stop at STOP; under a policy the bounds are not
  // for where not POLICY_ANALYSED.
  json check(json* chains, std::vector<Finding>* findings = nullptr, uint64_t stop = UINT64_MAX,
             bool policy_analysed = true) {
    *chains = json::array();
    for (size_t c = 0; c < workload_.chains.size(); ++c) {
      uint64_t over = 0;
      for (uint64_t i = 0; i < shared_.chain(c)->count.load(); ++i)
        over += shared_.samples(c)[i].end_ns <= stop &&
                shared_.samples(c)[i].end_ns - shared_.samples(c)[i].start_ns > 10 * kMs;
      chains->push_back({{"chain", workload_.chains[c].name}, {"wcrt_us", 10000.0}, {"over_bound", over}});
    }
    MonitorInput in{&workload_, &plan_, nullptr, &shared_, &cores_, 0, {}, &speed_, 0.9, stop, policy_analysed};
    return check_assumptions(in, chains, findings);
  }
  // The same with the analysis' own bounds, and the analysis to run again
  // with the run's times.
  json check_with_analysis(json* chains, std::vector<Finding>* findings = nullptr) {
    const auto bounds = analysis::analyze(workload_);
    *chains = json::array();
    for (size_t c = 0; c < workload_.chains.size(); ++c) {
      uint64_t over = 0;
      for (uint64_t i = 0; i < shared_.chain(c)->count.load(); ++i)
        over += shared_.samples(c)[i].end_ns - shared_.samples(c)[i].start_ns > bounds[c].wcrt_ns;
      chains->push_back({{"chain", workload_.chains[c].name},
                         {"wcrt_us", static_cast<double>(bounds[c].wcrt_ns) / 1000.0},
                         {"over_bound", over}});
    }
    MonitorInput in{&workload_, &plan_, &bounds, &shared_, &cores_, 0,
                    [](const workload::Workload& measured) { return analysis::analyze(measured); }};
    return check_assumptions(in, chains, findings);
  }

  workload::Workload workload_;
  Plan plan_;
  SharedRun shared_;
  CoreSampler cores_{{0, 1}};
  SpeedSampler speed_;
};

TEST_F(Monitor, AnInstanceOverItsBoundIsExplainedByTheCallbackOverItsWcetInItsTime) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  instance(0, 10 * kMs, 14 * kMs);   // within
  instance(0, 50 * kMs, 62 * kMs);   // over, while b overran
  callback(0, 10 * kMs, 12 * kMs, 1900000);
  callback(1, 50 * kMs, 54500000, 4500000);  // b: 4.5 ms against 1 ms
  callback(0, 54500000, 56500000, 1900000);
  json chains;
  const json a = check(&chains);
  ASSERT_EQ(chains[0]["explained_by"].size(), 1u) << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][0], "callback b ran up to 4.5 ms of CPU against a WCET of 1.0 ms in "
                                          "1 instance of the 1 over the bound");
  EXPECT_EQ(chains[0]["unexplained"], 0);
  EXPECT_EQ(a["unexplained_violations"], 0);
  ASSERT_EQ(a["broken"].size(), 1u);
  EXPECT_EQ(a["broken"][0], "callback b ran up to 4.5 ms of CPU against a WCET of 1.0 ms in 1 instance of 1");
  EXPECT_EQ(a["callbacks"][1]["over"], 1);
  EXPECT_DOUBLE_EQ(a["callbacks"][1]["max_us"].get<double>(), 4500.0);
}

TEST_F(Monitor, InstancesAfterAnExecutorsTraceFilledAreNotCheckedNorCalledTheAnalysisFault) {
  cores_.record(0, {{}, {}});
  cores_.record(200 * kMs, {{}, {}});
  // The executor's 64 events fill by 50 ms; b overruns after that, unseen.
  for (uint64_t k = 0; k < 64; ++k) callback(1, k * 500000, k * 500000 + 400000, 400000);
  callback(1, 60 * kMs, 70 * kMs, 10 * kMs);
  instance(0, 10 * kMs, 22 * kMs);  // over, checked: nothing broke in its time
  instance(0, 60 * kMs, 72 * kMs);  // over, after the trace filled
  json chains;
  const json a = check(&chains);
  EXPECT_EQ(chains[0]["unexplained"], 1) << chains[0].dump();
  EXPECT_EQ(chains[0]["unchecked"], 1) << chains[0].dump();
  EXPECT_EQ(a["unexplained_violations"], 1);
  ASSERT_TRUE(a["trace_filled"].is_object()) << a.dump();
  EXPECT_EQ(a["trace_filled"]["of"], "executor 'ex'");
  EXPECT_EQ(a["trace_filled"]["events"], 64);
  EXPECT_NEAR(a["trace_filled"]["at_s"].get<double>(), 0.0319, 1e-9);
  EXPECT_EQ(chains[0]["explained_by"][0], "1 instance over the bound ended after the trace of executor 'ex' filled "
                                          "(64 events, 0.0 s into the run): the run could not check it");
}

TEST_F(Monitor, AnOverrunReadsAsOneWhereItIsSmallerThanATenthOfAMillisecond) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  instance(0, 10 * kMs, 14 * kMs);
  callback(0, 10 * kMs, 12 * kMs, 2000300);  // a: 300 ns over its 2 ms
  callback(1, 12 * kMs, 13 * kMs, 1040000);  // b: 1.04 ms against 1 ms
  callback(1, 20 * kMs, 21 * kMs, 1000300);  // and 1.0003 ms
  json chains;
  const json a = check(&chains);
  ASSERT_EQ(a["broken"].size(), 2u) << a.dump();
  EXPECT_EQ(a["broken"][0], "callback a ran up to 2.0003 ms of CPU against a WCET of 2.0000 ms in 1 instance of 1");
  EXPECT_EQ(a["broken"][1], "callback b ran up to 1.04 ms of CPU against a WCET of 1.00 ms in 2 instances of 2");
  EXPECT_EQ(a["callbacks"][1]["over"], 2);
}

TEST_F(Monitor, CoreLossesInAnInstancesTimeExplainItAndLossesElsewhereDoNot) {
  // Core 0 loses 20 ms to softirqs between 40 and 60 ms and 10 ms to steal
  // between 80 and 100 ms; core 1, which runs no executor, loses more.
  cores_.record(0, {{0, 0, 0}, {0, 0, 0}});
  cores_.record(40 * kMs, {{0, 0, 0}, {0, 50 * kMs, 0}});
  cores_.record(60 * kMs, {{0, 20 * kMs, 0}, {0, 90 * kMs, 0}});
  cores_.record(80 * kMs, {{0, 20 * kMs, 0}, {0, 90 * kMs, 0}});
  cores_.record(100 * kMs, {{0, 20 * kMs, 10 * kMs}, {0, 90 * kMs, 0}});
  instance(0, 45 * kMs, 58 * kMs);  // over, in the softirq interval
  instance(0, 46 * kMs, 59 * kMs);  // over, the same interval: counted once
  instance(1, 62 * kMs, 75 * kMs);  // over, in an interval without loss
  json chains;
  const json a = check(&chains);
  ASSERT_EQ(chains[0]["explained_by"].size(), 1u) << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][0], "core 0 lost 20.0 ms to softirqs in the time of the instances over the bound");
  EXPECT_EQ(chains[0]["unexplained"], 0);
  // Nothing broke in cb's time: the run says the analysis is at fault.
  EXPECT_EQ(chains[1]["unexplained"], 1);
  ASSERT_EQ(chains[1]["explained_by"].size(), 1u);
  EXPECT_NE(chains[1]["explained_by"][0].get<std::string>().find("a bug in rtaccel's analysis"), std::string::npos);
  EXPECT_EQ(a["unexplained_violations"], 1);
  ASSERT_EQ(a["cores"].size(), 1u);  // the executors' cores only
  EXPECT_DOUBLE_EQ(a["cores"][0]["softirq_ms"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(a["cores"][0]["steal_ms"].get<double>(), 10.0);
  EXPECT_EQ(a["broken"][0], "core 0 lost 20.0 ms to softirqs, 10.0 ms to the hypervisor (steal) in the run");
}

TEST_F(Monitor, UnderAPolicyTheBoundsAreNotForAnInstanceWithNothingBrokenIsThePolicysDoing) {
  // As above: core 0 loses 20 ms to softirqs in a's instance, nothing breaks
  // in b's. Under ros2 or picas the bounds are still paam's.
  cores_.record(0, {{0, 0, 0}, {0, 0, 0}});
  cores_.record(40 * kMs, {{0, 0, 0}, {0, 0, 0}});
  cores_.record(60 * kMs, {{0, 20 * kMs, 0}, {0, 0, 0}});
  cores_.record(100 * kMs, {{0, 20 * kMs, 0}, {0, 0, 0}});
  instance(0, 45 * kMs, 58 * kMs);
  instance(1, 62 * kMs, 75 * kMs);
  instance(1, 76 * kMs, 89 * kMs);
  json chains;
  std::vector<Finding> findings;
  const json a = check(&chains, &findings, UINT64_MAX, /*policy_analysed=*/false);
  ASSERT_EQ(chains[0]["explained_by"].size(), 1u) << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][0], "core 0 lost 20.0 ms to softirqs in the time of the instances over the bound");
  // Not the analysis' fault, nor said to be.
  EXPECT_EQ(chains[1]["unexplained"], 0);
  ASSERT_EQ(chains[1]["explained_by"].size(), 1u) << chains[1].dump();
  EXPECT_EQ(chains[1]["explained_by"][0], "2 instances over the bound had no assumption broken in their time: the bound "
                                          "is for paam's scheduling, which this run's policy does not follow");
  EXPECT_EQ(a["unexplained_violations"], 0);
  for (const Finding& f : findings) EXPECT_TRUE(f.explained) << f.what;
}

TEST_F(Monitor, ATimerThatStartsLateOnAnIdleCoreBreaksTheReleaseJitter) {
  // The workload declares no release jitter. a's timer released at 50 ms
  // and started it at 53 ms with nothing else running on core 0: the OS was
  // late. b, released at 50 ms too, waited for a until 55 ms: interference,
  // which the bound covers, not jitter.
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  shared_.timer_records(0)[0] = {50 * kMs, 53 * kMs};
  shared_.timer(0)->count.store(1);
  shared_.timer_records(1)[0] = {50 * kMs, 55 * kMs};
  shared_.timer(1)->count.store(1);
  callback(0, 53 * kMs, 55 * kMs, 1900000);
  callback(1, 55 * kMs, 56 * kMs, 900000);
  instance(0, 50 * kMs, 61 * kMs);  // over its 10 ms
  json chains;
  const json a = check(&chains);
  // b's one activation waited for a's callback: it is not counted.
  ASSERT_EQ(a["releases"].size(), 1u) << a.dump();
  EXPECT_EQ(a["releases"][0]["timer"], "a");
  EXPECT_EQ(a["releases"][0]["over"], 1);
  ASSERT_EQ(chains[0]["explained_by"].size(), 1u) << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][0], "the timer of callback a started it up to 3.0 ms after its release "
                                          "against a release jitter of 0 us in 1 activation of the 1 over the bound");
  EXPECT_EQ(a["unexplained_violations"], 0);
}

TEST_F(Monitor, AJitterThatEveryReleaseBreaksIsSaidToBeBelowThisMachines) {
  // a's timer started it 80 to 190 us late in each of twelve activations on
  // an idle core, against the workload's jitter of 0: the declaration is
  // below what this machine takes, which the sentence says. With one
  // activation on time it is not.
  cores_.record(0, {{}, {}});
  cores_.record(1300 * kMs, {{}, {}});
  for (uint64_t i = 0; i < 12; ++i) {
    const uint64_t release = (i + 1) * 100 * kMs, late = 80000 + i * 10000;
    shared_.timer_records(0)[i] = {release, release + late};
    callback(0, release + late, release + late + 2 * kMs, 1800000);
  }
  shared_.timer(0)->count.store(12);
  json chains;
  EXPECT_EQ(check(&chains)["broken"],
            json::array({"the timer of callback a started it up to 190 us after its release against a release jitter "
                         "of 0 us in 12 activations of 12; at least 80 us in each activation of the run: below what "
                         "this machine takes (`rtaccel calibrate` measures it)"}));
  shared_.timer_records(0)[11].start_ns = shared_.timer_records(0)[11].release_ns;
  EXPECT_EQ(check(&chains)["broken"],
            json::array({"the timer of callback a started it up to 180 us after its release against a release jitter "
                         "of 0 us in 11 activations of 12"}));
}

TEST_F(Monitor, ACallbackKeptOffItsCoreIsToldFromOneThatWaitedForAHigherOne) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  // a: 1.9 ms of CPU in 5 ms, nothing else on core 0 then: 3.1 ms gone.
  callback(0, 20 * kMs, 25 * kMs, 1900000);
  instance(0, 20 * kMs, 31 * kMs);
  // b: 0.9 ms of CPU in 4 ms, of which a took 1.9 ms of CPU inside it: 1.2
  // ms gone.
  callback(1, 40 * kMs, 44 * kMs, 900000);
  callback(0, 41 * kMs, 43 * kMs, 1900000);
  // b: 0.9 ms of CPU in 1.1 ms: within the slack for its queue work.
  callback(1, 60 * kMs, 61100000, 900000);
  json chains;
  const json a = check(&chains);
  ASSERT_EQ(a["off_core"].size(), 2u) << a.dump();
  EXPECT_EQ(a["off_core"][0]["over"], 1);
  EXPECT_DOUBLE_EQ(a["off_core"][0]["max_us"].get<double>(), 3100.0);
  EXPECT_EQ(a["off_core"][1]["over"], 1);
  EXPECT_DOUBLE_EQ(a["off_core"][1]["max_us"].get<double>(), 1200.0);
  ASSERT_EQ(chains[0]["explained_by"].size(), 1u) << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][0], "callback a was kept off core 0 for up to 3.1 ms while it ran (steal, "
                                          "or a thread outside the workload) in 1 instance of the 1 over the bound");
}

// Once the executors are told to stop, a higher one's exit can hold a lower
// one's core: what ended after the stop is the wind-down's, not the run's.
TEST_F(Monitor, WhatEndedAfterTheExecutorsWereToldToStopIsLeftOut) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  callback(0, 10 * kMs, 11500000, 1500000);
  instance(0, 10 * kMs, 11500000);
  callback(0, 88 * kMs, 99 * kMs, 2500000);  // over its WCET, ended after the stop
  instance(0, 88 * kMs, 99 * kMs);           // over its bound, likewise
  json chains;
  std::vector<Finding> findings;
  const json a = check(&chains, &findings, 90 * kMs);
  ASSERT_EQ(a["callbacks"].size(), 2u) << a.dump();
  EXPECT_EQ(a["callbacks"][0]["count"], 1) << a.dump();
  EXPECT_EQ(a["callbacks"][0]["over"], 0) << a.dump();
  EXPECT_TRUE(a["broken"].empty()) << a.dump();
  EXPECT_TRUE(findings.empty());
  // The same run without a stop counts both.
  const json all = check(&chains, &findings);
  EXPECT_EQ(all["callbacks"][0]["count"], 2) << all.dump();
  EXPECT_EQ(all["callbacks"][0]["over"], 1) << all.dump();
  EXPECT_EQ(chains[0]["over_bound"], 1);
}

// The machine ran the work at 0.7 of its calibrated speed at 50 ms: below
// the work fraction (0.9), so that CPU work ran over; the probes around an
// instance (every 20 ms here) say so for it.
TEST_F(Monitor, AMachineSlowerThanTheWorkWasSizedForIsNamed) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  for (uint64_t at = 0; at <= 100 * kMs; at += 20 * kMs) speed_.record(at, at == 60 * kMs ? 0.7 : 1.0);
  callback(0, 50 * kMs, 52600000, 2200000);  // a: 2.2 ms against 2
  instance(0, 50 * kMs, 61 * kMs);
  instance(0, 90 * kMs, 95 * kMs);  // within its bound
  json chains;
  const json a = check(&chains);
  EXPECT_DOUBLE_EQ(a["speed"]["slowest"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(a["speed"]["p50"].get<double>(), 1.0);
  EXPECT_EQ(a["speed"]["samples"], 6);
  EXPECT_EQ(a["broken"].back(), "the machine ran the calibrated CPU work at as little as 0.70x its speed at the start "
                                "in the run, below the work fraction 0.90");
  // What the machine did comes before the overruns it explains.
  ASSERT_EQ(chains[0]["explained_by"].size(), 3u) << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][0], "the machine ran the calibrated CPU work at as little as 0.70x its "
                                          "speed at the start in the time of the instances over the bound, below "
                                          "the work fraction 0.90");
  // Unsampled, nothing is said of it.
  speed_ = SpeedSampler();
  EXPECT_TRUE(check(&chains)["speed"].is_null());
}

// The analysis bounds ca at 3 ms (a's 2 ms, and b's 1 ms ahead of it on the
// executor). b ran 4.5 ms: with that, 6.5 ms.
TEST_F(Monitor, AnInstanceWithinTheBoundOfTheRunsOwnTimesIsExplained) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  callback(1, 50 * kMs, 54500000, 4500000);
  callback(0, 54500000, 56400000, 1900000);
  instance(0, 50 * kMs, 56400000);  // 6.4 ms: over 3, within 6.5
  json chains;
  const json a = check_with_analysis(&chains);
  ASSERT_EQ(chains[0]["over_bound"], 1) << chains.dump();
  EXPECT_DOUBLE_EQ(chains[0]["measured_wcrt_us"].get<double>(), 6500.0);
  ASSERT_EQ(chains[0]["explained_by"].size(), 2u) << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][0], "with the run's longest times in place of the declared ones the analysis "
                                          "bounds it at 6.5 ms, which covers every instance");
  EXPECT_EQ(chains[0]["unexplained"], 0);
  EXPECT_EQ(a["unexplained_violations"], 0);
}

// An overrun in its time no longer explains an instance that went further
// beyond the bound with the run's own times than its core lost.
TEST_F(Monitor, BeyondTheBoundOfItsOwnTimesAnInstanceIsTheAnalysisUnlessItsCoreLostAsMuch) {
  // Core 0 loses 4 ms to softirqs between 140 and 170 ms, nothing before.
  cores_.record(0, {{0, 0, 0}, {}});
  cores_.record(140 * kMs, {{0, 0, 0}, {}});
  cores_.record(170 * kMs, {{0, 4 * kMs, 0}, {}});
  callback(1, 50 * kMs, 54500000, 4500000);
  callback(0, 58 * kMs, 59900000, 1900000);
  instance(0, 50 * kMs, 60 * kMs);  // 10 ms: 3.5 beyond 6.5, nothing lost
  callback(1, 150 * kMs, 154500000, 4500000);
  callback(0, 158 * kMs, 159900000, 1900000);
  instance(0, 150 * kMs, 160 * kMs);  // the same, with 4 ms lost meanwhile
  json chains;
  std::vector<Finding> findings;
  const json a = check_with_analysis(&chains, &findings);
  ASSERT_EQ(chains[0]["over_bound"], 2) << chains.dump();
  EXPECT_EQ(chains[0]["explained_by"][0], "with the run's longest times in place of the declared ones the analysis "
                                          "bounds it at 6.5 ms, and 2 instances went beyond that, by up to 3.5 ms");
  EXPECT_EQ(chains[0]["unexplained"], 1);
  EXPECT_EQ(a["unexplained_violations"], 1);
  EXPECT_EQ(chains[0]["explained_by"].back(), "1 instance beyond even that bound by more than its cores lost in its "
                                              "time: the analysis does not hold for this run (a bug in rtaccel's "
                                              "analysis)");
  // For the trace: b over its WCET twice, and each instance with whether
  // the run explains it, in time order.
  ASSERT_EQ(findings.size(), 4u);
  EXPECT_EQ(findings[0].kind, Finding::kCpu);
  EXPECT_EQ(findings[0].what, "b");
  EXPECT_EQ(findings[0].took_ns, 4500000u);
  EXPECT_EQ(findings[0].allowed_ns, 1 * kMs);
  EXPECT_EQ(findings[1].kind, Finding::kInstance);
  EXPECT_EQ(findings[1].what, workload_.chains[0].name);
  EXPECT_EQ(findings[1].begin_ns, 50 * kMs);
  EXPECT_EQ(findings[1].took_ns, 10 * kMs);
  EXPECT_EQ(findings[1].measured_bound_ns, 6500000u);
  EXPECT_FALSE(findings[1].explained);
  EXPECT_EQ(findings[2].kind, Finding::kCpu);
  EXPECT_EQ(findings[3].kind, Finding::kInstance);
  EXPECT_EQ(findings[3].begin_ns, 150 * kMs);
  EXPECT_TRUE(findings[3].explained);
}

// A long run on a slow host finds hundreds of thousands of overruns. Each
// finding names its callback or chain where the workload does, without a
// copy, and together they take the room they need, not what growing by
// doubling leaves spare (50 findings: 64 places).
TEST_F(Monitor, FindingsTakeTheRoomTheyNeedAndNameWhatTheyAreAboutWithoutACopy) {
  cores_.record(0, {{}, {}});
  cores_.record(2000 * kMs, {{}, {}});
  for (uint64_t i = 0; i < 49; ++i) callback(1, i * 20 * kMs, i * 20 * kMs + 4500000, 4500000);  // b over its WCET
  instance(0, 0, 12 * kMs);  // over its bound of 10 ms
  json chains;
  std::vector<Finding> findings;
  check(&chains, &findings);
  ASSERT_EQ(findings.size(), 50u);
  EXPECT_EQ(findings.capacity(), findings.size());
  EXPECT_EQ(findings[0].kind, Finding::kCpu);
  EXPECT_EQ(findings[0].what.data(), workload_.callbacks[1].name.data());
  EXPECT_EQ(findings[1].kind, Finding::kInstance);
  EXPECT_EQ(findings[1].what.data(), workload_.chains[0].name.data());
}

// A kernel's time on the accelerator is its own: the higher bucket's kernels
// that ran within its span are interference, which the analysis charges.
class MonitorOfKernels : public Monitor {
 protected:
  void SetUp() override { load(kAcceleratorWorkload); }
};

TEST_F(MonitorOfKernels, AKernelsTimeLeavesOutTheHigherBucketsKernelsThatRanWithinIt) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  kernel(1, 0, 10 * kMs, 20 * kMs);  // lo: 10 ms, of which hi ran 3 + 2
  kernel(0, 1, 11 * kMs, 14 * kMs);
  kernel(0, 1, 16 * kMs, 18 * kMs);
  kernel(0, 1, 19 * kMs, 23 * kMs);  // hi again, 1 ms of it within lo's
  kernel(1, 0, 30 * kMs, 36 * kMs);  // lo alone: 6 ms against 5
  json chains;
  std::vector<Finding> findings;
  const json a = check(&chains, &findings);
  ASSERT_EQ(a["segments"].size(), 2u) << a.dump();
  EXPECT_EQ(a["segments"][0]["callback"], "hi");
  EXPECT_EQ(a["segments"][0]["over"], 0);
  EXPECT_DOUBLE_EQ(a["segments"][0]["max_us"].get<double>(), 4000.0);
  EXPECT_EQ(a["segments"][1]["callback"], "lo");
  EXPECT_EQ(a["segments"][1]["count"], 2);
  EXPECT_EQ(a["segments"][1]["over"], 1);
  EXPECT_DOUBLE_EQ(a["segments"][1]["max_us"].get<double>(), 6000.0);
  EXPECT_DOUBLE_EQ(a["segments"][1]["min_us"].get<double>(), 4000.0);
  ASSERT_EQ(a["broken"].size(), 1u) << a.dump();
  EXPECT_EQ(a["broken"][0], "segment 1 of callback lo (busy) ran up to 6.0 ms on the accelerator against 5.0 ms "
                            "in 1 instance of 2 (4.0 ms at its fastest in the run)");
  // The trace marks the one kernel over its own time, not the one that
  // only waited for the higher bucket.
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, Finding::kSegment);
  EXPECT_EQ(findings[0].what, "lo: busy");
  EXPECT_EQ(findings[0].what.data(), plan_.callbacks[1].segment_names[0].data());  // the plan's, not a copy
  EXPECT_EQ(findings[0].begin_ns, 30 * kMs);
  EXPECT_EQ(findings[0].end_ns, 36 * kMs);
  EXPECT_EQ(findings[0].took_ns, 6 * kMs);
  EXPECT_EQ(findings[0].allowed_ns, 5 * kMs);
}

// Each higher kernel costs the lower one it preempted up to 2 kappa more
// (the switch, then the resumption), which the analysis charges to the
// higher one: the lower kernel is over its time only beyond that.
TEST_F(MonitorOfKernels, APreemptedKernelsResumptionIsTheHigherKernelsUpToTwiceKappa) {
  std::string text = kAcceleratorWorkload;
  const std::string levels = "priority_levels: 2}";
  text.replace(text.find(levels), levels.size(), "priority_levels: 2, preemption_cost_us: 500}");
  load(text.c_str());
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  kernel(1, 0, 10 * kMs, 17500000);  // 5.5 ms beside hi's 2: 4.5 after 2 kappa
  kernel(0, 1, 12 * kMs, 14 * kMs);
  kernel(1, 0, 30 * kMs, 37 * kMs);  // two preemptions: 7 - 1 - 2, 4 ms
  kernel(0, 1, 31 * kMs, 32 * kMs);
  kernel(0, 1, 34 * kMs, 35 * kMs);
  kernel(1, 0, 50 * kMs, 58500000);  // 7.5 ms beside hi's 1: 6.5, over 5
  kernel(0, 1, 52 * kMs, 53 * kMs);
  json chains;
  std::vector<Finding> findings;
  const json a = check(&chains, &findings);
  ASSERT_EQ(a["segments"].size(), 2u) << a.dump();
  EXPECT_EQ(a["segments"][1]["callback"], "lo");
  EXPECT_EQ(a["segments"][1]["count"], 3);
  EXPECT_EQ(a["segments"][1]["over"], 1);
  EXPECT_DOUBLE_EQ(a["segments"][1]["max_us"].get<double>(), 6500.0);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].begin_ns, 50 * kMs);
  EXPECT_EQ(findings[0].took_ns, 6500000u);
}

// epsilon (50 us here) bounds the server's own time per request: before
// the kernel, from the later of the submission and the previous kernel's
// end, and after it, until the client goes on.
TEST_F(MonitorOfKernels, ARequestsServerOverheadIsCheckedAgainstEpsilon) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  // hi: submitted at 10 ms, started 20 us later, its client on 20 us after
  // its end: 40 us.
  kernel(0, 1, 10020000, 15 * kMs, 10 * kMs, 20000);
  // lo: submitted at 12 ms while hi ran, started 100 us after hi's end, its
  // client on 80 us after its own end: 180 us.
  kernel(1, 0, 15100000, 19 * kMs, 12 * kMs, 80000);
  instance(1, 11 * kMs, 22 * kMs);  // clo, over its 10 ms bound
  json chains;
  std::vector<Finding> findings;
  const json a = check(&chains, &findings);
  ASSERT_EQ(a["requests"].size(), 2u) << a.dump();
  EXPECT_EQ(a["requests"][0]["callback"], "hi");
  EXPECT_EQ(a["requests"][0]["over"], 0);
  EXPECT_DOUBLE_EQ(a["requests"][0]["max_us"].get<double>(), 40.0);
  EXPECT_EQ(a["requests"][1]["callback"], "lo");
  EXPECT_DOUBLE_EQ(a["requests"][1]["epsilon_us"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(a["requests"][1]["max_us"].get<double>(), 180.0);
  EXPECT_EQ(a["broken"], json::array({"the requests of segment 1 of callback lo (busy) cost the server up to 180 us "
                                      "against its overhead (epsilon) of 50 us in 1 instance of 1"}))
      << a.dump();
  EXPECT_EQ(chains[1]["explained_by"][0], "the requests of segment 1 of callback lo (busy) cost the server up to "
                                          "180 us against its overhead (epsilon) of 50 us in 1 instance of the 1 "
                                          "over the bound");
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].kind, Finding::kInstance);
  EXPECT_EQ(findings[1].kind, Finding::kOverhead);
  EXPECT_EQ(findings[1].what, "lo: busy");
  EXPECT_EQ(findings[1].begin_ns, 12 * kMs);
  EXPECT_EQ(findings[1].end_ns, 19080000u);
  EXPECT_EQ(findings[1].allowed_ns, 50000u);
}

TEST_F(MonitorOfKernels, TheAcceleratorsCoreLossesWhileAKernelOverranAreSaidBesideIt) {
  // Core 1 is acc0's: it loses 6 ms to steal between 20 and 40 ms, while
  // lo's kernel overruns (20-31 ms, 11 ms against 5), and 4 ms more between
  // 60 and 80 ms, while no kernel over its time runs.
  cores_.record(0, {{}, {}});
  cores_.record(20 * kMs, {{}, {}});
  cores_.record(40 * kMs, {{}, {0, 0, 6 * kMs}});
  cores_.record(60 * kMs, {{}, {0, 0, 6 * kMs}});
  cores_.record(80 * kMs, {{}, {0, 0, 10 * kMs}});
  kernel(1, 0, 22 * kMs, 33 * kMs);
  kernel(1, 0, 62 * kMs, 66 * kMs);  // within its 5 ms
  instance(1, 21 * kMs, 35 * kMs);   // clo, over its 10 ms bound
  json chains;
  const json a = check(&chains);
  EXPECT_EQ(chains[1]["explained_by"], json::array({
      "acc0's core 1 lost 6.0 ms to the hypervisor (steal) while its kernels over their declared times ran in the "
      "instances over the bound",
      "segment 1 of callback lo (busy) ran up to 11.0 ms on the accelerator against 5.0 ms in 1 instance of the 1 "
      "over the bound (4.0 ms at its fastest in the run)"}))
      << chains[1].dump();
  EXPECT_EQ(a["broken"], json::array({"segment 1 of callback lo (busy) ran up to 11.0 ms on the accelerator against "
                                      "5.0 ms in 1 instance of 2 (4.0 ms at its fastest in the run)",
                                      "acc0's core 1 lost 6.0 ms to the hypervisor (steal) while its kernels over "
                                      "their declared times ran"}))
      << a.dump();
  // Core 1 runs no executor: it is in the cores of the accelerators only.
  EXPECT_TRUE(a["cores"].empty() || a["cores"][0]["core"] == 0) << a.dump();
  ASSERT_EQ(a["accelerator_cores"].size(), 1u) << a.dump();
  EXPECT_EQ(a["accelerator_cores"][0]["accelerator"], "acc0");
  EXPECT_EQ(a["accelerator_cores"][0]["core"], 1);
  EXPECT_DOUBLE_EQ(a["accelerator_cores"][0]["steal_ms"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(a["accelerator_cores"][0]["lost_in_overruns_ms"].get<double>(), 6.0);
}

// An instance's overruns are said by what they can have added to it, the
// most first, whatever their kind: lo's kernel 6 ms over, before hi's CPU
// work 0.2 ms over.
TEST_F(MonitorOfKernels, TheOverrunsThatCanHaveAddedTheMostAreSaidFirst) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  callback(0, 20 * kMs, 21200000, 1200000);
  kernel(1, 0, 22 * kMs, 33 * kMs);
  instance(1, 20 * kMs, 35 * kMs);  // clo, over its 10 ms bound
  json chains;
  check(&chains);
  EXPECT_EQ(chains[1]["explained_by"], json::array({
      "segment 1 of callback lo (busy) ran up to 11.0 ms on the accelerator against 5.0 ms in 1 instance of the 1 "
      "over the bound (11.0 ms at its fastest in the run)",
      "callback hi ran up to 1.2 ms of CPU against a WCET of 1.0 ms in 1 instance of the 1 over the bound"}))
      << chains[1].dump();
}

class MonitorOfTwoExecutors : public Monitor {
 protected:
  void SetUp() override { load(kTwoExecutors); }
};

// a's executor preempts b's: b running at a's release does not excuse a's
// late start, which breaks the release jitter.
TEST_F(MonitorOfTwoExecutors, ALowerExecutorsCallbackDoesNotExcuseALateTimer) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  shared_.timer_records(0)[0] = {50 * kMs, 53 * kMs};
  shared_.timer(0)->count.store(1);
  callback(1, 49 * kMs, 60 * kMs, 900000);  // b: from before a's release, its wait included
  callback(0, 53 * kMs, 55 * kMs, 1900000);
  instance(0, 50 * kMs, 55 * kMs);
  json chains;
  const json a = check(&chains);
  ASSERT_EQ(a["releases"].size(), 1u) << a.dump();
  EXPECT_EQ(a["releases"][0]["timer"], "a");
  EXPECT_EQ(a["releases"][0]["over"], 1);
  EXPECT_DOUBLE_EQ(a["releases"][0]["max_us"].get<double>(), 3000.0);
}

// Nor does it account for a's time off the core: b cannot run while a is
// ready, and b's wait for the accelerator inside a's span takes no core.
TEST_F(MonitorOfTwoExecutors, ALowerExecutorsCallbackDoesNotAccountForTimeOffTheCore) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  callback(0, 10 * kMs, 15 * kMs, 1900000);  // a: 1.9 ms of CPU in 5 ms
  callback(1, 11 * kMs, 30 * kMs, 900000);   // b began inside it and waited
  json chains;
  const json a = check(&chains);
  ASSERT_EQ(a["off_core"].size(), 2u) << a.dump();
  EXPECT_EQ(a["off_core"][0]["callback"], "a");
  EXPECT_DOUBLE_EQ(a["off_core"][0]["max_us"].get<double>(), 3100.0);
}

class MonitorOfTwoExecutorsAndAccelerator : public Monitor {
 protected:
  void SetUp() override { load(kTwoExecutorsAndAccelerator); }
};

// b's client goes on only once a's executor, above it on core 0, leaves the
// core: the bound charges that wait as a's interference, and the server's
// overhead is what remains. While a itself waits for its kernel, b could go
// on: what b waited then is the server's.
TEST_F(MonitorOfTwoExecutorsAndAccelerator, AHigherExecutorHoldingTheClientsCoreIsNotTheServersOverhead) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  // b's kernel [10.02, 15] ms, submitted at 10 ms: 20 us before it. Its
  // client went on 1 030 us after its end, while a held core 0 for the
  // first 1 000 of them: 50 us, within epsilon.
  kernel(1, 0, 10020000, 15 * kMs, 10 * kMs, 1030000);
  callback(1, 9 * kMs, 16100000, 900000);
  callback(0, 15 * kMs, 16 * kMs, 1000000);
  // b's kernel [40.02, 45] ms, its client on 3 050 us after its end. a ran
  // from 45 to 48 ms, but waited for its own kernel from 45.5 ms until its
  // thread went on at 47.5 ms: a held the core 1 000 us of the 3 050, and
  // b's requests cost 20 + 2 050 us.
  kernel(1, 0, 40020000, 45 * kMs, 40 * kMs, 3050000);
  callback(1, 39 * kMs, 48100000, 900000);
  kernel(0, 1, 45520000, 47400000, 45500000, 100000);
  callback(0, 45 * kMs, 48 * kMs, 1000000);
  json chains;
  std::vector<Finding> findings;
  const json a = check(&chains, &findings);
  ASSERT_EQ(a["requests"].size(), 2u) << a.dump();
  EXPECT_EQ(a["requests"][0]["callback"], "a");
  EXPECT_DOUBLE_EQ(a["requests"][0]["max_us"].get<double>(), 120.0);
  EXPECT_EQ(a["requests"][1]["callback"], "b");
  EXPECT_EQ(a["requests"][1]["count"], 2);
  EXPECT_EQ(a["requests"][1]["over"], 1);
  EXPECT_DOUBLE_EQ(a["requests"][1]["max_us"].get<double>(), 2070.0);
  std::vector<const Finding*> overheads;
  for (const Finding& f : findings)
    if (f.kind == Finding::kOverhead) overheads.push_back(&f);
  ASSERT_EQ(overheads.size(), 2u);
  EXPECT_EQ(overheads[0]->what, "b: busy");
  EXPECT_EQ(overheads[0]->begin_ns, 40 * kMs);
  EXPECT_EQ(overheads[1]->what, "a: busy");
  // Neither callback was kept off its core: a's wait for its kernel lasted
  // until its thread went on, and b's until a let it.
  ASSERT_EQ(a["off_core"].size(), 2u) << a.dump();
  EXPECT_EQ(a["off_core"][0]["over"], 0) << a.dump();
  EXPECT_EQ(a["off_core"][1]["over"], 0) << a.dump();
}

class MonitorOfARemoteRequest : public Monitor {
 protected:
  void SetUp() override { load(kRemoteAccelerator); }
};

// A request served on another node: its time on the link (request and
// response) against the bound the network term gives them, the server's
// overhead as its gateway there meets it against epsilon, and an instance
// over its bound with a late one explained by them.
TEST_F(MonitorOfARemoteRequest, ItsRequestAndResponseOnTheLinkAreCheckedAgainstTheirBound) {
  const uint64_t bound = analysis::NetworkTerms(workload_).segment_ns(0, 0);
  ASSERT_GT(bound, 0u);
  cores_.record(0, {{}, {}});
  cores_.record(300 * kMs, {{}, {}});
  // Within both: half the bound on the link, 30 + 10 us at the server. The
  // gateway's thread took the request 1 005 us after it arrived (at 8.97 ms)
  // and replied 1 010 us after the kernel's end, while h, above the callback
  // on the core the analysis gives it there, held that core for 1 000 us
  // each time.
  kernel(0, 1, 10 * kMs, 15 * kMs, 8 * kMs, 900000);
  shared_.trace(0)[0].legs_ns = static_cast<uint32_t>(bound / 2);
  shared_.trace(0)[0].arrival_to_taken_ns = 1005000;
  shared_.trace(0)[0].arrival_to_start_ns = 1030000;
  shared_.trace(0)[0].end_to_reply_ns = 1010000;
  callback(1, 8970000, 9970000, 1000000);
  callback(1, 15 * kMs, 16 * kMs, 1000000);
  // Over both: 3 ms over the bound on the link, 20 + 60 us at the server.
  kernel(0, 1, 110 * kMs, 115 * kMs, 100 * kMs, 900000);
  shared_.trace(0)[1].legs_ns = static_cast<uint32_t>(bound + 3 * kMs);
  shared_.trace(0)[1].arrival_to_taken_ns = 5000;
  shared_.trace(0)[1].arrival_to_start_ns = 20000;
  shared_.trace(0)[1].end_to_reply_ns = 60000;
  instance(0, 99 * kMs, 120 * kMs);  // over its 10 ms bound here
  json chains;
  std::vector<Finding> findings;
  const json a = check(&chains, &findings);
  ASSERT_EQ(a["remote_requests"].size(), 1u) << a.dump();
  const json& r = a["remote_requests"][0];
  EXPECT_EQ(r["callback"], "r");
  EXPECT_EQ(r["count"], 2);
  EXPECT_EQ(r["over"], 1);
  EXPECT_DOUBLE_EQ(r["bound_us"].get<double>(), static_cast<double>(bound) / 1000.0);
  EXPECT_DOUBLE_EQ(r["max_us"].get<double>(), static_cast<double>(bound + 3 * kMs) / 1000.0);
  ASSERT_EQ(a["requests"].size(), 1u) << a.dump();
  EXPECT_EQ(a["requests"][0]["count"], 2);
  EXPECT_EQ(a["requests"][0]["over"], 1);
  EXPECT_DOUBLE_EQ(a["requests"][0]["max_us"].get<double>(), 80.0);
  // The link's 3 ms over before the server's 30 us.
  ASSERT_EQ(chains[0]["explained_by"].size(), 2u) << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][0].get<std::string>().rfind(
                "the request and response of segment 1 of callback r (busy) took up to ", 0),
            0u)
      << chains[0].dump();
  EXPECT_EQ(chains[0]["explained_by"][1], "the requests of segment 1 of callback r (busy) cost the server up to 80 us "
                                          "against its overhead (epsilon) of 50 us in 1 instance of the 1 over the bound");
  ASSERT_EQ(findings.size(), 3u);
  EXPECT_EQ(findings[0].kind, Finding::kInstance);
  const Finding& late = findings[1].kind == Finding::kLegs ? findings[1] : findings[2];
  EXPECT_EQ(late.kind, Finding::kLegs);
  EXPECT_EQ(late.what, "r: busy");
  EXPECT_EQ(late.allowed_ns, bound);
}

// kAcceleratorWorkload with two threads in its executor.
// b was kept off its core for 3 ms: 10 ms of wall time, 2 of CPU, 5 waiting
// for its kernel. a, above it, ran its 2 ms inside that wait, where it
// kept b from nothing: counted against b's time as well, it would hide 2 of
// b's 3 ms.
TEST_F(MonitorOfTwoExecutorsAndAccelerator, AHigherCallbackWithinTheWaitDoesNotAccountForTimeOffTheCore) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  kernel(1, 0, 41 * kMs, 45900000, 41 * kMs, 100000);
  callback(1, 40 * kMs, 50 * kMs, 2 * kMs);
  callback(0, 42 * kMs, 44 * kMs, 2 * kMs);
  json chains;
  const json a = check(&chains);
  ASSERT_EQ(a["off_core"].size(), 2u) << a.dump();
  EXPECT_EQ(a["off_core"][1]["callback"], "b");
  EXPECT_DOUBLE_EQ(a["off_core"][1]["max_us"].get<double>(), 3000.0) << a.dump();
}

class MonitorOfTwoThreads : public Monitor {
 protected:
  void SetUp() override {
    std::string yaml = kAcceleratorWorkload;
    yaml.replace(yaml.find("priority: 80}"), 13, "priority: 80, threads: 2}");
    load(yaml.c_str());
  }
};

// The same within one executor of two threads on one core: the thread
// that holds the core keeps the other from going on.
TEST_F(MonitorOfTwoThreads, AnotherThreadOfTheExecutorHoldingTheClientsCoreIsNotTheServersOverhead) {
  cores_.record(0, {{}, {}});
  cores_.record(100 * kMs, {{}, {}});
  // lo's kernel [10.02, 15] ms on thread 0, its client on 1 030 us after
  // its end, while hi's callback on thread 1 held core 0 for 1 000 of them.
  kernel(1, 0, 10020000, 15 * kMs, 10 * kMs, 1030000, 0);
  callback(1, 9 * kMs, 16100000, 900000, 0);
  callback(0, 15 * kMs, 16 * kMs, 1000000, 1);
  json chains;
  const json a = check(&chains);
  ASSERT_EQ(a["requests"].size(), 1u) << a.dump();
  EXPECT_EQ(a["requests"][0]["callback"], "lo");
  EXPECT_DOUBLE_EQ(a["requests"][0]["max_us"].get<double>(), 50.0);
  EXPECT_EQ(a["requests"][0]["over"], 0);
}

// /proc/stat of a 64-core machine: each core's irq, softirq and steal ticks
// from `ticks` (core -> {irq, softirq, steal}), zero for the rest; cores in
// `offline` left out, as the kernel leaves out a core taken offline.
std::string proc_stat(const std::map<int, std::array<int, 3>>& ticks, const std::set<int>& offline = {}) {
  // The machine's total comes first; its first count (user ticks, here 62)
  // must not read as core 62, which is not there to correct it when offline.
  std::string text = "cpu  62 0 0 0 0 99 99 99 0 0\n";
  for (int core = 0; core < 64; ++core) {
    if (offline.count(core)) continue;
    std::array<int, 3> t{};
    if (auto it = ticks.find(core); it != ticks.end()) t = it->second;
    text += "cpu" + std::to_string(core) + " 5 0 5 100 0 " + std::to_string(t[0]) + " " + std::to_string(t[1]) +
            " " + std::to_string(t[2]) + " 0 0\n";
  }
  return text + "intr 12345 0 0 0\nctxt 999\n";
}

TEST(CoreSampler, KeepsTheCoresItWatchesOnlyAndAnOfflineCoreLosesNothing) {
  const std::string path = std::filesystem::temp_directory_path() / ("rtaccel-stat-" + std::to_string(getpid()));
  auto write = [&](const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  };
  const uint64_t tick = 1000000000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
  CoreSampler cores({62, 1, 62});
  EXPECT_EQ(cores.cores(), (std::vector<int>{1, 62}));
  write(proc_stat({{1, {0, 0, 0}}, {5, {1, 1, 1}}, {62, {10, 20, 30}}}));
  cores.sample(0, path.c_str());
  write(proc_stat({{1, {0, 0, 3}}, {5, {9, 9, 9}}, {62, {15, 20, 30}}}));
  cores.sample(100 * kMs, path.c_str());
  // Core 62 offline, then online again with its counts started afresh.
  write(proc_stat({{1, {0, 0, 3}}, {5, {9, 9, 9}}}, {62}));
  cores.sample(200 * kMs, path.c_str());
  write(proc_stat({{1, {0, 0, 3}}, {62, {1, 0, 0}}}));
  cores.sample(300 * kMs, path.c_str());

  EXPECT_EQ(cores.lost(1).steal_ns, 3 * tick);
  EXPECT_EQ(cores.lost(1).total(), 3 * tick);
  EXPECT_EQ(cores.lost(62).irq_ns, 5 * tick);
  EXPECT_EQ(cores.lost(62).total(), 5 * tick);
  EXPECT_EQ(cores.lost(62, 150 * kMs, 300 * kMs, nullptr).total(), 0u);
  EXPECT_EQ(cores.lost(5).total(), 0u);  // not watched
  EXPECT_TRUE(cores.intervals(5).empty());
  ASSERT_EQ(cores.intervals(62).size(), 3u);
  EXPECT_EQ(cores.intervals(62)[0].second.irq_ns, 5 * tick);

  // A long run's samples take the watched cores' room, not the machine's.
  write(proc_stat({}));
  for (uint64_t k = 4; k < 1000; ++k) cores.sample(k * 100 * kMs, path.c_str());
  EXPECT_LE(cores.bytes(), 2 * 1000 * (sizeof(uint64_t) + 2 * sizeof(CoreLoss)));
  EXPECT_LT(cores.bytes(), 1000 * 64 * sizeof(CoreLoss) / 8);
  std::filesystem::remove(path);
}

TEST(CoreSampler, ARunThatReservesItsSamplesTakesNoMoreRoomWhileItSamples) {
  CoreSampler cores({0, 1});
  SpeedSampler speed;
  cores.reserve(500);
  speed.reserve(500);
  const size_t room = cores.bytes();
  EXPECT_GE(room, 500 * (sizeof(uint64_t) + 2 * sizeof(CoreLoss)));
  const auto* speeds = speed.samples().data();
  for (uint64_t k = 0; k < 500; ++k) {
    cores.record(k * 20 * kMs, {{k, k, k}, {k, 0, 0}});
    speed.record(k * 20 * kMs, 1.0);
  }
  EXPECT_EQ(cores.bytes(), room);
  EXPECT_EQ(speed.samples().data(), speeds);
  EXPECT_EQ(cores.lost(0).total(), 3 * 499u);
}

TEST(MemoryWalk, RandomVisitsEveryLineOnceBeforeItRepeats) {
  core::MemoryWalk walk;
  ASSERT_TRUE(walk.init(64 * 1000, /*random=*/true));
  ASSERT_EQ(walk.lines(), 1000u);
  // One cycle through all lines: after `lines` steps it is back where it
  // started, and not before.
  std::set<size_t> seen;
  for (size_t i = 0; i < walk.lines(); ++i) {
    walk.walk(1);
    seen.insert(walk.position());
  }
  EXPECT_EQ(seen.size(), walk.lines());
  EXPECT_EQ(walk.position(), 0u);
}

TEST(MemoryWalk, StreamGoesOnWhereItStoppedAndWrapsAround) {
  core::MemoryWalk walk;
  ASSERT_TRUE(walk.init(100, /*random=*/false));  // rounded up to 2 lines
  ASSERT_EQ(walk.lines(), 2u);
  walk.walk(3);
  EXPECT_EQ(walk.position(), 1u);
  EXPECT_GT(core::calibrate_walk(1 << 20, false), 0.0);
  EXPECT_GT(core::calibrate_walk(1 << 20, true), 0.0);
}

}  // namespace
}  // namespace rtaccel::exec
