#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "rtaccel/workload.hpp"

namespace rtaccel::workload {
namespace {

constexpr uint64_t kMs = 1'000'000;

// What the loader said, in a shape for the checks: the workload, or its
// errors one a line ("w.yaml:line:col: message").
struct Loaded {
  std::optional<Workload> workload;
  std::vector<std::string> errors;
  bool ok() const { return workload.has_value(); }
};

Loaded loaded(Expected<Workload> r) {
  if (r) return {r.take(), {}};
  EXPECT_TRUE(r.status().invalid_input()) << r.status().message();
  return {std::nullopt, r.status().lines()};
}

Loaded load(const std::string& text) {
  LoadOptions options;
  options.machine_cores = 4;
  return loaded(load_string(text, "w.yaml", options));
}

// The line and column of "w.yaml:line:col: message".
int line_of(const std::string& error) { return std::atoi(error.c_str() + error.find(':') + 1); }
int column_of(const std::string& error) {
  const size_t first = error.find(':');
  return std::atoi(error.c_str() + error.find(':', first + 1) + 1);
}

// A valid workload; tests replace one piece of it.
const std::string kValid = R"(version: 1
name: valid
platform:
  accelerators:
    - {name: acc0, backend: cpu, core: 1, priority_levels: 4, preemption_cost_us: 50}
server: {core: 1, overhead_us: 40}
executors:
  - {name: ex1, core: 0, priority: 80}
callbacks:
  - name: sensor
    executor: ex1
    trigger: {timer_ms: 100}
    publishes: raw
    cpu_us: 2000
    segments: [{accelerator: acc0, service: busy, wcet_us: 10000}]
    wait: spin
  - {name: filter, executor: ex1, trigger: {topic: raw}, cpu_us: 1000.5}
chains:
  - {name: hot, priority: 10, path: [sensor, filter], deadline_ms: 90}
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

TEST(Loader, ReadsTheContractIntoNanoseconds) {
  auto r = load(kValid);
  ASSERT_TRUE(r.ok());
  const Workload& w = *r.workload;
  EXPECT_EQ(w.name, "valid");
  EXPECT_EQ(w.cores, 4);
  ASSERT_EQ(w.accelerators.size(), 1u);
  EXPECT_EQ(w.accelerators[0].preemption_cost_ns, 50'000u);
  EXPECT_EQ(w.server->overhead_ns, 40'000u);
  EXPECT_EQ(w.communication_ns, 40'000u);  // defaults to the server overhead
  ASSERT_EQ(w.callbacks.size(), 2u);
  EXPECT_EQ(w.callbacks[0].trigger.timer_ns, 100 * kMs);
  // The runner starts it with the run's other timers unless told otherwise.
  EXPECT_EQ(w.callbacks[0].trigger.release_group, Trigger::kRunStart);
  EXPECT_EQ(w.callbacks[0].wait, WaitMode::kSpin);
  EXPECT_EQ(w.callbacks[0].segments[0].wcet_ns, 10 * kMs);
  EXPECT_EQ(w.callbacks[1].cpu_ns, 1'000'500u);
  EXPECT_EQ(w.callbacks[1].wait, WaitMode::kSuspend);
  ASSERT_EQ(w.chains.size(), 1u);
  EXPECT_EQ(w.chains[0].period_ns, 100 * kMs);
  EXPECT_EQ(w.chains[0].deadline_ns, 90 * kMs);
  EXPECT_TRUE(w.chains[0].critical);
  EXPECT_EQ(w.callback_priority(1), 10);
  EXPECT_EQ(w.callbacks[0].where.line, 10);
}

struct BadCase {
  const char* name;
  std::string from, to;
  const char* message;  // substring of the one expected diagnostic
  int line;             // its line
};

class LoaderRefuses : public ::testing::TestWithParam<BadCase> {};

TEST_P(LoaderRefuses, WithOneClearDiagnostic) {
  const BadCase& c = GetParam();
  auto r = load(replace(kValid, c.from, c.to));
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u) << (r.errors.empty() ? "" : r.errors[0] + " / " + r.errors.back());
  EXPECT_NE(r.errors[0].find(c.message), std::string::npos) << r.errors[0];
  EXPECT_EQ(line_of(r.errors[0]), c.line) << r.errors[0];
  EXPECT_EQ(r.errors[0].rfind("w.yaml:" + std::to_string(c.line) + ":", 0), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, LoaderRefuses,
    ::testing::Values(
        BadCase{"UnknownKey", "wait: spin", "wiat: spin", "unknown key 'wiat'", 16},
        BadCase{"MissingField", "    cpu_us: 2000\n", "", "missing required key 'cpu_us'", 10},
        BadCase{"WrongType", "cpu_us: 2000", "cpu_us: lots", "cpu_us must be a number, got 'lots'", 14},
        BadCase{"NegativeTime", "cpu_us: 2000", "cpu_us: -1", "at least 0", 14},
        BadCase{"NotFinite", "cpu_us: 2000", "cpu_us: .inf", "must be a number", 14},
        BadCase{"ListExpected", "path: [sensor, filter]", "path: sensor", "path must be a list", 19},
        BadCase{"DuplicateKey", "cpu_us: 1000.5}", "cpu_us: 1000.5, cpu_us: 3}", "duplicate key 'cpu_us'", 17},
        BadCase{"BadChoice", "wait: spin", "wait: doze", "wait must be one of suspend, spin", 16},
        BadCase{"BadName", "name: valid", "name: 'two words'", "must be a name", 2},
        BadCase{"Version", "version: 1", "version: 3", "version 3 is not supported", 1},
        BadCase{"PriorityRange", "priority: 80", "priority: 100", "between 1 and 99", 8},
        BadCase{"DanglingExecutor", "executor: ex1\n", "executor: ex9\n", "no executor named 'ex9'", 11},
        BadCase{"DanglingAccelerator", "{accelerator: acc0,", "{accelerator: gpu,", "no accelerator named 'gpu'", 15},
        BadCase{"DanglingPath", "path: [sensor, filter]", "path: [sensor, filtr]", "no callback named 'filtr'", 19},
        BadCase{"ChainWithoutPriority", "{name: hot, priority: 10, ", "{name: hot, ", "chain 'hot': missing required key 'priority'", 19},
        BadCase{"UnreadableTopic", "cpu_us: 1000.5}", "reads: [cooked], cpu_us: 1000.5}", "reads topic 'cooked', published by no callback", 17},
        BadCase{"PathNotFollowingTopics", "trigger: {topic: raw}", "trigger: {timer_ms: 100}", "'filter' does not follow 'sensor'", 19},
        BadCase{"CoreBeyondMachine", "{name: ex1, core: 0", "{name: ex1, core: 7", "core 7 does not exist: there are 4", 8},
        BadCase{"ExecutorOnDeviceCore", "{name: ex1, core: 0", "{name: ex1, core: 1", "is the device of accelerator 'acc0'", 8},
        BadCase{"DeadlineAbovePeriod", "deadline_ms: 90", "deadline_ms: 150", "constrained deadlines", 19},
        BadCase{"TwoTriggers", "{topic: raw}", "{topic: raw, timer_ms: 5}", "exactly one of timer_ms, topic or topics", 17},
        BadCase{"ReleaseOfASubscription", "{topic: raw}", "{topic: raw, release: unaligned}",
                "release is a timer's", 17},
        BadCase{"ReleaseChoice", "{timer_ms: 100}", "{timer_ms: 100, release: sometime}",
                "release must be one of together, unaligned", 12},
        BadCase{"NoServer", "server: {core: 1, overhead_us: 40}\n", "", "needs a server", 9},
        BadCase{"OpenClIsOneQueue", "backend: cpu, core: 1, priority_levels: 4", "backend: opencl, priority_levels: 4",
                "priority_levels must be 1", 5},
        BadCase{"TopicFirstChainNeedsAPeriod", "path: [sensor, filter]", "path: [filter]", "needs period_ms", 19},
        BadCase{"SyntaxError", "path: [sensor, filter]", "path: [sensor, filter", "YAML syntax error", 19},
        BadCase{"WorkAboveWcet", "cpu_us: 1000.5}", "cpu_us: 1000.5, work_us: 1200}", "work_us (1200) is more than cpu_us", 17},
        BadCase{"MemoryPattern", "cpu_us: 1000.5}", "cpu_us: 1000.5, memory: {working_set_kb: 64, pattern: zigzag}}",
                "memory: pattern must be one of stream, random", 17},
        BadCase{"MemoryNeedsASize", "cpu_us: 1000.5}", "cpu_us: 1000.5, memory: {pattern: random}}",
                "memory: missing required key 'working_set_kb'", 17},
        BadCase{"IsolationChain", "deadline_ms: 90}\n", "deadline_ms: 90}\nisolation: {bandwidth_lock: {chains: [cold]}}\n",
                "bandwidth_lock: chain 'cold' is not defined", 20},
        BadCase{"IsolationCore", "deadline_ms: 90}\n", "deadline_ms: 90}\nisolation: {regulator: {cores: [0, 9]}}\n",
                "regulator: core 9 does not exist", 20},
        BadCase{"IsolationKey", "deadline_ms: 90}\n", "deadline_ms: 90}\nisolation: {regulatr: {}}\n",
                "isolation: unknown key 'regulatr' (expected regulator, bandwidth_lock)", 20},
        BadCase{"MergeOfAScalar", "cpu_us: 1000.5}", "cpu_us: 1000.5, <<: 5}",
                "callback 'filter': '<<' must merge a mapping or a list of mappings, got '5'", 17},
        BadCase{"MergeOfAListOfScalars", "cpu_us: 1000.5}", "cpu_us: 1000.5, <<: [{wait: spin}, 5]}",
                "callback 'filter': '<<' must merge mappings, got '5'", 17},
        // Merged keys are read as the mapping's own: a wrong one is said
        // where it is written.
        BadCase{"MergedKeyUnknown", "cpu_us: 1000.5}", "cpu_us: 1000.5, <<: {wiat: spin}}",
                "callback 'filter': unknown key 'wiat'", 17},
        BadCase{"QuotedMergeKeyIsAKey", "cpu_us: 1000.5}", "cpu_us: 1000.5, '<<': {wait: spin}}",
                "callback 'filter': unknown key '<<'", 17}),
    [](const ::testing::TestParamInfo<BadCase>& param_info) { return std::string(param_info.param.name); });

TEST(Loader, MemoryWorkAndIsolation) {
  std::string text = replace(kValid, "cpu_us: 1000.5}",
                             "cpu_us: 1000.5, work_us: 600, memory: {working_set_kb: 16384, pattern: random}}");
  text += "isolation:\n  regulator: {cores: [1, 0], period_us: 500, threshold_mbps: 2000, be_peak_mbps: 8000, cost_us: 20}\n"
          "  bandwidth_lock: {chains: [hot], threshold_mbps: 100}\n";
  auto r = load(text);
  ASSERT_TRUE(r.ok()) << r.errors[0];
  const Callback& filter = r.workload->callbacks[1];
  EXPECT_EQ(filter.work_ns, 600000u);
  EXPECT_EQ(filter.working_set_bytes, 16384u << 10);
  EXPECT_EQ(filter.pattern, MemoryPattern::kRandom);
  EXPECT_EQ(r.workload->callbacks[0].working_set_bytes, 0u);  // no memory: the busy loop
  const Isolation& iso = r.workload->isolation;
  EXPECT_TRUE(iso.declared);
  EXPECT_EQ(iso.cores, (std::vector<int>{1, 0}));
  EXPECT_EQ(iso.period_ns, 500000u);
  EXPECT_EQ(iso.threshold_mbps, 2000u);
  EXPECT_EQ(iso.be_peak_mbps, 8000u);
  EXPECT_EQ(iso.cost_ns, 20000u);
  EXPECT_EQ(iso.bwlock_chains, (std::vector<size_t>{0}));
  EXPECT_EQ(iso.bwlock_threshold_mbps, 100u);
  EXPECT_FALSE(load(kValid).workload->isolation.declared);
}

// Two nodes and a link; the filter runs on the second node.
const std::string kTwoNodes = R"(version: 1
name: two
nodes:
  - {name: soc1}
  - {name: soc2}
links:
  - {name: eth0, between: [soc1, soc2], transport: tcp, rate_mbps: 1000, chunk_kb: 64, per_chunk_us: 5, kernel_ns_per_kb: 250}
platform:
  accelerators:
    - {name: acc0, node: soc1, backend: cpu, core: 1, priority_levels: 4}
server: {core: 1, overhead_us: 40}
executors:
  - {name: ex1, node: soc1, core: 0, priority: 80}
  - {name: ex2, node: soc2, core: 2, priority: 80}
callbacks:
  - name: sensor
    executor: ex1
    trigger: {timer_ms: 100}
    publishes: raw
    message_kb: 1024
    cpu_us: 2000
    segments: [{accelerator: acc0, service: busy, wcet_us: 10000}]
  - {name: filter, executor: ex2, trigger: {topic: raw}, cpu_us: 1000}
chains:
  - {name: hot, priority: 10, path: [sensor, filter], deadline_ms: 90}
)";

TEST(Loader, MergeKeysAndKeysLeftToTheUser) {
  // YAML's merge key, as a workload of many alike callbacks uses it, with
  // its anchors under a key left to the user (x-...).
  const std::string text = replace(replace(kValid, "callbacks:\n", R"(x-defaults:
  - &fast {executor: ex1, cpu_us: 500, wait: spin}
  - &slow {cpu_us: 3000, x-note: measured under the regulator}
callbacks:
)"), "  - {name: filter, executor: ex1, trigger: {topic: raw}, cpu_us: 1000.5}\n",
                                   R"(  - {name: filter, trigger: {topic: raw}, cpu_us: 1000.5, <<: *fast}
  - {name: late, trigger: {topic: raw}, <<: [*slow, *fast]}
  - {name: merged-twice, trigger: {topic: raw}, <<: [*fast, {<<: *fast, wait: suspend}]}
)");
  auto r = load(replace(text, "deadline_ms: 90}\n",
                        "deadline_ms: 90}\n  - {name: cold, priority: 5, path: [sensor, late]}\n"
                        "  - {name: colder, priority: 4, path: [sensor, merged-twice]}\n"));
  ASSERT_TRUE(r.ok()) << r.errors[0];
  const auto& cbs = r.workload->callbacks;
  ASSERT_EQ(cbs.size(), 4u);
  EXPECT_EQ(cbs[1].cpu_ns, 1'000'500u);  // its own key wins over the merged one
  EXPECT_EQ(cbs[1].wait, WaitMode::kSpin);
  EXPECT_EQ(cbs[2].cpu_ns, 3'000'000u);  // of a list, the earlier mapping's key wins
  EXPECT_EQ(cbs[2].executor, cbs[1].executor);
  EXPECT_EQ(cbs[3].wait, WaitMode::kSpin);  // merged first, from the list's first mapping
}

TEST(Loader, MergeKeysThatMultiplyOrNestTooDeepAreBounded) {
  // A mapping merged by every mapping of a chain of them: merged once,
  // not 20^15 times.
  std::string anchors = "x-0: &m0 {executor: ex1, cpu_us: 1000.5}\n";
  for (int i = 1; i < 16; ++i) {
    std::string list;
    for (int j = 0; j < 20; ++j) list += (j ? ", *m" : "*m") + std::to_string(i - 1);
    anchors += "x-" + std::to_string(i) + ": &m" + std::to_string(i) + " {<<: [" + list + "]}\n";
  }
  std::string text = replace(kValid, "callbacks:\n", anchors + "callbacks:\n");
  auto r = load(replace(text, "{name: filter, executor: ex1, trigger: {topic: raw}, cpu_us: 1000.5}",
                        "{name: filter, trigger: {topic: raw}, <<: *m15}"));
  ASSERT_TRUE(r.ok()) << r.errors[0];
  EXPECT_EQ(r.workload->callbacks[1].cpu_ns, 1'000'500u);

  // A mapping that merges itself.
  r = load(replace(kValid, "{name: filter, executor: ex1,", "&self {name: filter, <<: *self, executor: ex1,"));
  EXPECT_TRUE(r.ok()) << r.errors[0];

  // Merges nested past the limit are refused where the limit is passed.
  anchors = "x-0: &m0 {executor: ex1, cpu_us: 1000.5}\n";
  for (int i = 1; i < 40; ++i)
    anchors += "x-" + std::to_string(i) + ": &m" + std::to_string(i) + " {<<: *m" + std::to_string(i - 1) + "}\n";
  text = replace(kValid, "callbacks:\n", anchors + "callbacks:\n");
  r = load(replace(text, "{name: filter, executor: ex1, trigger: {topic: raw}, cpu_us: 1000.5}",
                   "{name: filter, trigger: {topic: raw}, <<: *m39}"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.errors[0].find("merge keys ('<<') nested more than 16 deep"), std::string::npos) << r.errors[0];
}

TEST(Loader, NodesAndLinks) {
  auto r = load(kTwoNodes);
  ASSERT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0]);
  const Workload& w = *r.workload;
  ASSERT_EQ(w.nodes.size(), 2u);
  ASSERT_EQ(w.links.size(), 1u);
  EXPECT_EQ(w.links[0].rate_bytes_per_s, 125'000'000u);
  EXPECT_EQ(w.links[0].chunk_bytes, 64u << 10);
  EXPECT_EQ(w.links[0].per_chunk_ns, 5000u);
  EXPECT_EQ(w.links[0].kernel_ns_per_kb, 250u);
  EXPECT_STREQ(w.links[0].transport->name, "tcp");
  EXPECT_EQ(w.node_of_callback(0), 0u);
  EXPECT_EQ(w.node_of_callback(1), 1u);
  EXPECT_EQ(w.link_between(1, 0), 0);
  EXPECT_EQ(w.callbacks[0].message_bytes, 1u << 20);
  EXPECT_EQ(w.callbacks[1].message_bytes, 4096u);  // the default
}

class MultiNodeRefuses : public ::testing::TestWithParam<BadCase> {};

TEST_P(MultiNodeRefuses, WithOneClearDiagnostic) {
  const BadCase& c = GetParam();
  auto r = load(replace(kTwoNodes, c.from, c.to));
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u) << (r.errors.empty() ? "" : r.errors[0] + " / " + r.errors.back());
  EXPECT_NE(r.errors[0].find(c.message), std::string::npos) << r.errors[0];
  EXPECT_EQ(line_of(r.errors[0]), c.line) << r.errors[0];
  EXPECT_GT(column_of(r.errors[0]), 0) << r.errors[0];
}

INSTANTIATE_TEST_SUITE_P(
    Rules, MultiNodeRefuses,
    ::testing::Values(
        BadCase{"UnknownNode", "{name: ex2, node: soc2", "{name: ex2, node: soc3", "no node named 'soc3' (nodes: soc1, soc2)", 14},
        BadCase{"NodeMissing", "{name: ex2, node: soc2, ", "{name: ex2, ", "the workload has nodes, so it needs node: (one of soc1, soc2)", 14},
        BadCase{"NoLink", "links:\n  - {name: eth0, between: [soc1, soc2], transport: tcp, rate_mbps: 1000, chunk_kb: 64, per_chunk_us: 5, kernel_ns_per_kb: 250}\n", "",
                "topic 'raw' comes from node 'soc1', and no link joins 'soc1' and 'soc2'", 21},
        BadCase{"LinkToUnknownNode", "between: [soc1, soc2]", "between: [soc1, soc9]", "link 'eth0': no node named 'soc9'", 7},
        BadCase{"LinkToItself", "between: [soc1, soc2]", "between: [soc1, soc1]", "joins node 'soc1' with itself", 7},
        BadCase{"LinkOfThree", "between: [soc1, soc2]", "between: [soc1, soc2, soc1]", "between must name two nodes", 7},
        BadCase{"BadTransport", "transport: tcp", "transport: carrier-pigeon", "transport must be one of tcp, rdma, shm", 7},
        BadCase{"NoRate", "rate_mbps: 1000, ", "", "missing required key 'rate_mbps'", 7},
        BadCase{"NegativeKernelWork", "kernel_ns_per_kb: 250", "kernel_ns_per_kb: -1",
                "link 'eth0': kernel_ns_per_kb must be between 0 and 1000000", 7},
        BadCase{"MessageWithoutTopic", "cpu_us: 1000}", "cpu_us: 1000, message_kb: 4}", "message_kb without publishes", 23}),
    [](const ::testing::TestParamInfo<BadCase>& param_info) { return std::string(param_info.param.name); });

TEST(Loader, AcceleratorOnANodeWithoutALinkIsRefused) {
  // a third node, linked to neither, whose callback uses soc1's accelerator
  std::string text = replace(kTwoNodes, "  - {name: soc2}\n", "  - {name: soc2}\n  - {name: soc3}\n");
  text = replace(text, "  - {name: ex2, node: soc2, core: 2, priority: 80}\n",
                 "  - {name: ex2, node: soc2, core: 2, priority: 80}\n  - {name: ex3, node: soc3, core: 3, priority: 70}\n");
  text = replace(text, "chains:\n",
                 "  - {name: far, executor: ex3, trigger: {timer_ms: 100}, cpu_us: 1,\n"
                 "     segments: [{accelerator: acc0, service: busy, wcet_us: 1}]}\nchains:\n");
  text += "  - {name: far, priority: 1, path: [far]}\n";
  auto r = load(text);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u) << r.errors[0];
  EXPECT_NE(r.errors[0].find("callback 'far' on node 'soc3': accelerator 'acc0' is on node 'soc1', and no link "
                             "joins 'soc3' and 'soc1'"),
            std::string::npos)
      << r.errors[0];
  EXPECT_EQ(line_of(r.errors[0]), 27);
  // with a link to soc1 it is a remote client, and allowed
  text = replace(text, "links:\n", "links:\n  - {name: eth1, between: [soc3, soc1], transport: rdma, rate_mbps: 100}\n");
  EXPECT_TRUE(load(text).ok());
}

TEST(Loader, NodeWithoutNodesIsNamed) {
  auto r = load(replace(kValid, "{name: ex1, core: 0", "{name: ex1, node: soc1, core: 0"));
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("no node named 'soc1' (the workload declares no nodes)"), std::string::npos) << r.errors[0];
}

TEST(Loader, UnpublishedTriggerTopicAlsoBreaksTheChainPath) {
  auto r = load(replace(kValid, "trigger: {topic: raw}", "trigger: {topic: cooked}"));
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_NE(r.errors[0].find("topic 'cooked' is published by no callback"), std::string::npos);
  EXPECT_NE(r.errors[1].find("'filter' does not follow 'sensor'"), std::string::npos);
}

TEST(Loader, ReportsEveryErrorAtOnceInFileOrder) {
  std::string text = replace(kValid, "priority: 80", "priority: 0");
  text = replace(text, "executor: ex1\n", "executor: nope\n");
  text = replace(text, "path: [sensor, filter]", "path: [sensor, filter, ghost]");
  auto r = load(text);
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(line_of(r.errors[0]), 8);
  EXPECT_EQ(line_of(r.errors[1]), 11);
  EXPECT_EQ(line_of(r.errors[2]), 19);
}

TEST(Loader, DuplicateChainPrioritiesAndNames) {
  std::string text = kValid + "  - {name: hot, priority: 10, path: [filter], period_ms: 100}\n";
  auto r = load(text);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_NE(r.errors[0].find("chain 'hot' is defined twice"), std::string::npos);
  EXPECT_NE(r.errors[1].find("priority 10 is already taken"), std::string::npos);
}

TEST(Loader, CallbackOutsideEveryChainIsRefused) {
  std::string text = replace(kValid, "chains:\n", "  - {name: idle, executor: ex1, trigger: {timer_ms: 5}, cpu_us: 1}\nchains:\n");
  auto r = load(text);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("'idle' is in no chain"), std::string::npos);
}

TEST(Loader, FusionTriggerAndTopicFirstChain) {
  std::string text = replace(kValid, "chains:\n", R"(  - {name: other, executor: ex1, trigger: {timer_ms: 50}, publishes: side, cpu_us: 1}
  - {name: fuse, executor: ex1, trigger: {topics: [raw, side]}, reads: [raw], cpu_us: 1}
chains:
  - {name: side, priority: 3, path: [other, fuse]}
  - {name: tail, priority: 2, path: [fuse], period_ms: 50, critical: false}
)");
  auto r = load(text);
  for (const auto& e : r.errors) ADD_FAILURE() << e;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.workload->chains[1].period_ns, 50 * kMs);
  EXPECT_FALSE(r.workload->chains[1].critical);
  EXPECT_EQ(r.workload->callbacks[3].trigger.topics.size(), 2u);
}

TEST(Loader, DeclaredCoresOverrideTheMachine) {
  auto r = load(replace(kValid, "platform:\n", "platform:\n  cores: 16\n"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.workload->cores, 16);
}

TEST(Loader, HostileInputIsRefusedWithoutCrashing) {
  const std::string inputs[] = {
      "",
      "~",
      "[1, 2, 3]",
      "version: 1\nname: x\nexecutors: {a: b}\ncallbacks: 7\nchains: []\n",
      std::string(100000, '['),
      std::string(50000, '-') + " x",
      "a: &a [*a]",
      "version: 1\nname: x\nexecutors:\n  - &e {name: e, core: 0, priority: 1}\n  - *e\ncallbacks: []\nchains: []\n",
      "\xff\xfe\x00garbage",
      "version: 99999999999999999999999",
      "{? [a]: b}",
  };
  for (const auto& text : inputs) {
    auto r = load(text);
    EXPECT_FALSE(r.ok());
    ASSERT_FALSE(r.errors.empty());
    for (const auto& e : r.errors) EXPECT_FALSE(e.empty());
  }
}

TEST(Loader, MissingFileIsADiagnostic) {
  auto r = loaded(load_file("/nonexistent/w.yaml"));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "/nonexistent/w.yaml: cannot open the file: No such file or directory");
  r = loaded(load_file("/"));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "/: a folder, not a workload file");
  // A device that never ends is read up to a bound, not for ever.
  r = loaded(load_file("/dev/zero"));
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0], "/dev/zero: larger than 16 MB, which no workload is (a device or a pipe?)");
}

TEST(Loader, RefusesInputThatIsNotUtf8WithItsPlace) {
  // Invalid lead byte, overlong form, surrogate, cut short at the end.
  for (const std::string& bad : {std::string("\xdd x"), std::string("\xc0\xaf"),
                                std::string("\xed\xa0\x80"), std::string("\xe2\x82")}) {
    Loaded r = load("name: ok\nchains: [" + bad);
    ASSERT_FALSE(r.ok());
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(line_of(r.errors[0]), 2);
    EXPECT_EQ(column_of(r.errors[0]), 10);
    EXPECT_NE(r.errors[0].find("not UTF-8 text"), std::string::npos);
  }
  // Nor may it hold a control character, a NUL the first.
  for (const std::string& bad : {std::string("x\0", 2), std::string("x\x1b"), std::string("x\x7f")}) {
    Loaded r = load("name: ok\nchains: [" + bad + "]\n");
    ASSERT_FALSE(r.ok());
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(line_of(r.errors[0]), 2);
    EXPECT_EQ(column_of(r.errors[0]), 11);
    EXPECT_NE(r.errors[0].find("a control character"), std::string::npos) << r.errors[0];
  }
  // Valid multi-byte text goes on to the YAML parser.
  Loaded r = load(replace(kValid, "name: valid", "name: valid  # \xc3\xa9t\xc3\xa9 \xf0\x9f\x9a\x97"));
  EXPECT_TRUE(r.ok()) << (r.errors.empty() ? "" : r.errors[0]);
}

TEST(Loader, EveryDiagnosticIsOneLine) {
  // yaml-cpp quotes the character after a bad escape, here a newline.
  const Diagnostic d{"w\x01.yaml", {9, 1}, "unknown escape character: \n"};
  EXPECT_EQ(d.to_string(), "w\\x01.yaml:9:1: unknown escape character: \\n");
  auto r = load("name: \"a\\\n\"\n");
  ASSERT_FALSE(r.ok());
  for (const auto& e : r.errors) EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace
}  // namespace rtaccel::workload
