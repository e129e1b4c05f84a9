// The run plan of the Autoware reference system: queues, fusion depth, and how
// chain start times travel.
#include "exec/plan.h"
#include "exec/shared.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

namespace rtaccel::exec {
namespace {

// What a test says the machine has available.
constexpr uint64_t kSixteenGiB = uint64_t{16} << 30;

size_t index_of(const workload::Workload& w, const std::string& name) {
  for (size_t i = 0; i < w.callbacks.size(); ++i)
    if (w.callbacks[i].name == name) return i;
  ADD_FAILURE() << "no callback " << name;
  return 0;
}

size_t chain_of(const workload::Workload& w, const std::string& name) {
  for (size_t i = 0; i < w.chains.size(); ++i)
    if (w.chains[i].name == name) return i;
  ADD_FAILURE() << "no chain " << name;
  return 0;
}

class AutowarePlan : public ::testing::Test {
 protected:
  void SetUp() override {
    workload::LoadOptions options;
    options.machine_cores = 2;
    auto loaded = workload::load_file(RTACCEL_SOURCE_DIR "/examples/autoware_reference.yaml", options);
    ASSERT_TRUE(loaded) << loaded.status().message();
    workload_ = *loaded;
    auto plan = make_plan(workload_);
    ASSERT_TRUE(plan) << plan.status().message();
    plan_ = *plan;
  }
  workload::Workload workload_;
  Plan plan_;
};

TEST_F(AutowarePlan, OneQueuePerSubscriptionInputAndFusionKeepsTheLatest) {
  const auto& fusion = plan_.callbacks[index_of(workload_, "point_cloud_fusion")];
  ASSERT_EQ(fusion.inputs.size(), 2u);
  for (uint32_t q : fusion.inputs) EXPECT_EQ(plan_.queues[q].depth, kFusionDepth);
  const auto& filter = plan_.callbacks[index_of(workload_, "ray_ground_filter")];
  ASSERT_EQ(filter.inputs.size(), 1u);
  EXPECT_EQ(plan_.queues[filter.inputs[0]].depth, kQueueDepth);
  // The fusion's topic feeds the filter and the voxel grid downsampler.
  EXPECT_EQ(fusion.outputs.size(), 2u);
  EXPECT_NE(std::find(fusion.outputs.begin(), fusion.outputs.end(), filter.inputs[0]), fusion.outputs.end());
}

TEST_F(AutowarePlan, ChainStampsComeFromThePreviousCallbacksInput) {
  const auto& fusion = plan_.callbacks[index_of(workload_, "point_cloud_fusion")];
  const size_t front = chain_of(workload_, "hot_path_front"), rear = chain_of(workload_, "hot_path_rear");
  ASSERT_EQ(fusion.roles.size(), 2u);
  for (const auto& role : fusion.roles) {
    const auto& topic = plan_.queues[fusion.inputs[static_cast<size_t>(role.input)]].topic;
    EXPECT_EQ(topic, role.chain == front ? "PointsTransformerFront" : "PointsTransformerRear");
    EXPECT_TRUE(role.chain == front || role.chain == rear);
  }
  // A chain starts at its timer and ends at its last callback.
  const auto& lidar = plan_.callbacks[index_of(workload_, "front_lidar_driver")];
  ASSERT_EQ(lidar.roles.size(), 1u);
  EXPECT_EQ(lidar.roles[0].input, -1);
  EXPECT_GE(lidar.timer, 0);
  const auto& end = plan_.callbacks[index_of(workload_, "object_collision_estimator")];
  EXPECT_EQ(end.chain_ends.size(), 2u);
  // A chain that starts at a subscription has its start there.
  const auto& voxel = plan_.callbacks[index_of(workload_, "voxel_grid_downsampler")];
  ASSERT_EQ(voxel.roles.size(), 1u);
  EXPECT_EQ(voxel.roles[0].input, -1);
}

TEST_F(AutowarePlan, QueuesKnowWhichChainsCrossThem) {
  // Dropping a message on the filter's input loses hot-path instances; on the
  // downsampler's input it loses none of them.
  const auto& filter = plan_.callbacks[index_of(workload_, "ray_ground_filter")];
  const auto& voxel = plan_.callbacks[index_of(workload_, "voxel_grid_downsampler")];
  EXPECT_EQ(plan_.queues[filter.inputs[0]].chains.size(), 2u);
  EXPECT_TRUE(plan_.queues[voxel.inputs[0]].chains.empty());
}

TEST_F(AutowarePlan, CallbacksKeepRegistrationOrderPerExecutor) {
  size_t total = 0;
  for (const auto& callbacks : plan_.by_executor) {
    EXPECT_TRUE(std::is_sorted(callbacks.begin(), callbacks.end()));
    total += callbacks.size();
  }
  EXPECT_EQ(total, workload_.callbacks.size());
  EXPECT_EQ(plan_.timers.size(), 7u);
}

TEST_F(AutowarePlan, RecordsThatWouldNotFitTheMachineAreRefusedBeforeAnyIsMapped) {
  // A minute of the reference system: its samples, releases and trace events.
  const Capacity minute = capacity_for(workload_, plan_, 60ull * 1000000000, 1000000, false, kSixteenGiB);
  SharedRun fits;
  ASSERT_TRUE(fits.create(plan_, minute));
  // A chain of a billion instances a second would not fit any machine: the
  // run is refused with what it would take, not left to the OOM killer.
  Capacity huge = minute;
  huge.samples_per_chain[0] = uint64_t{1} << 42;
  SharedRun refused;
  const Status st = refused.create(plan_, huge);
  ASSERT_FALSE(st);
  EXPECT_TRUE(st.invalid_input());
  EXPECT_NE(st.message().find("MiB for its duration, more than half of the"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("shorten --duration"), std::string::npos) << st.message();
}

TEST_F(AutowarePlan, TraceEventsASecondFollowTheTimersThroughTheTopics) {
  // ex_misc: the 25 ms settings timer and the two callbacks it drives, a
  // segment each: 40 runs a second of three callbacks, two events a run.
  // ex_hot: the two 100 ms drivers and what they drive, the fusion at their
  // rate once both have arrived. ex_map: lanelet2_global_planner waits for
  // the 60 ms visualizer and the localizer, which waits for the 120 ms map:
  // 1/120 ms. ex_plan: the 100 ms planner (no segment) and three callbacks
  // of one segment after it.
  const std::vector<double> rates = trace_events_per_second(workload_, plan_, false);
  ASSERT_EQ(rates.size(), 4u);
  const double map = 1e3 / 120, visualizer = 1e3 / 60;
  EXPECT_NEAR(rates[0], 2 * 2 * 10 + 2 * 2 * 10 + 4 * 2 * 10, 1e-9);  // ex_hot
  EXPECT_NEAR(rates[1], 10 + 3 * 2 * 10, 1e-9);                      // ex_plan
  EXPECT_NEAR(rates[2], 2 * (10 + map + map + map + visualizer + map + 10 + map + map + map), 1e-9);  // ex_map
  EXPECT_NEAR(rates[3], 3 * 2 * 40, 1e-9);                           // ex_misc
  // Under gangs, a job event more per run.
  const std::vector<double> gang = trace_events_per_second(workload_, plan_, true);
  EXPECT_NEAR(gang[3], 3 * 3 * 40, 1e-9);
  EXPECT_EQ(trace_owner(workload_, plan_, 3), "executor 'ex_misc'");
  // Half an hour is mapped for what the timers drive each executor to, a
  // quarter more, not for every callback at the fastest timer's 40 a second
  // (ex_hot and ex_map: over the million kept), where that is less: ex_misc
  // runs at that rate. Under gangs a job's events vary: the bound.
  const uint64_t half_hour = 1800ull * 1000000000;
  const Capacity sized = capacity_for(workload_, plan_, half_hour, 1000000, false, kSixteenGiB);
  EXPECT_EQ(sized.events_per_executor, (std::vector<uint64_t>{361000, 158500, 428500, 3 * 2 * (72000 + 8)}));
  const Capacity bound = capacity_for(workload_, plan_, half_hour, 1000000, true, kSixteenGiB);
  EXPECT_EQ(bound.events_per_executor, (std::vector<uint64_t>(4, 1000000)));
}

TEST_F(AutowarePlan, ByDefaultTracesKeepTheWholeRunAsFarAsAQuarterOfTheMemoryHoldsThem) {
  // Two hours: ex_misc makes 240 events a second, 1.7 million; a million
  // kept would leave the run unchecked from 69 minutes on.
  const uint64_t two_hours = 7200ull * 1000000000;
  const std::vector<double> rates = trace_events_per_second(workload_, plan_, false);
  const Capacity whole = capacity_for(workload_, plan_, two_hours, 0, false, kSixteenGiB);
  uint64_t total = 0;
  for (size_t e = 0; e < rates.size(); ++e) {
    EXPECT_GE(static_cast<double>(whole.events_per_executor[e]), rates[e] * 7200) << e;
    total += whole.events_per_executor[e];
  }
  EXPECT_GT(whole.events_per_executor[3], 1000000u);
  EXPECT_LE(total * kCheckedEventBytes, kSixteenGiB / 4);
  // An explicit count is kept to.
  const Capacity capped = capacity_for(workload_, plan_, two_hours, 1000000, false, kSixteenGiB);
  EXPECT_EQ(capped.events_per_executor[3], 1000000u);

  // 1 GiB available: a quarter holds 771 366 events, shared by the rate
  // each executor makes them at, so that every trace fills at the same
  // time: 771 366 / 660 a second, 19.5 minutes in.
  const uint64_t one_gib = uint64_t{1} << 30;
  const Capacity cut = capacity_for(workload_, plan_, two_hours, 0, false, one_gib);
  uint64_t kept = 0;
  for (uint64_t events : cut.events_per_executor) kept += events;
  EXPECT_LE(kept, one_gib / 4 / kCheckedEventBytes);
  EXPECT_GE(kept, one_gib / 4 / kCheckedEventBytes - cut.events_per_executor.size());
  const double rate = std::accumulate(rates.begin(), rates.end(), 0.0);
  for (size_t e = 0; e < rates.size(); ++e)
    EXPECT_NEAR(static_cast<double>(cut.events_per_executor[e]) / rates[e], static_cast<double>(kept) / rate, 1.0)
        << e;

  // What the machine has unknown: a million each at most, as before.
  const Capacity unknown = capacity_for(workload_, plan_, two_hours, 0, false, 0);
  for (size_t e = 0; e < rates.size(); ++e)
    EXPECT_EQ(unknown.events_per_executor[e], std::min<uint64_t>(whole.events_per_executor[e], kTraceEventsWithoutMemory));
}

TEST(Plan, PoliciesByName) {
  EXPECT_EQ(parse_policy("ros2"), Policy::kRos2);
  EXPECT_EQ(parse_policy("picas"), Policy::kPicas);
  EXPECT_EQ(parse_policy("paam"), Policy::kPaam);
  EXPECT_FALSE(parse_policy("fifo"));
  EXPECT_EQ(to_string(Policy::kPaam), "paam");
}

}  // namespace
}  // namespace rtaccel::exec
