// The run's timeline file: an event a line, and other programs' traces
// merged into it on the run's clock, whatever shape they arrive in.
#include "exec/timeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace rtaccel::exec {
namespace {

using nlohmann::json;

class Timeline : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rtaccel-timeline-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path file(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  static std::vector<std::string> lines(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  static json events(const std::filesystem::path& path) {
    std::ifstream in(path);
    return json::parse(in)["traceEvents"];
  }
  // The run's own trace so far: two processes, then OTHER merged into it.
  json merged(const std::filesystem::path& other, const std::string& process_name = {}) const {
    TraceFile trace;
    EXPECT_TRUE(trace.open(dir_ / "trace.json"));
    trace.add({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", "executor ex"}}}});
    trace.add({{"ph", "X"}, {"name", "cb"}, {"pid", 2}, {"tid", 0}, {"ts", 10.0}, {"dur", 5.0}});
    merge_trace(other, kT0Ns, &trace, process_name);
    EXPECT_TRUE(trace.close());
    json all = events(dir_ / "trace.json");
    return json(all.begin() + 2, all.end());  // what the merge added
  }

  static constexpr uint64_t kT0Ns = 2'000'000;  // the run's t0: 2000 us on CLOCK_MONOTONIC
  std::filesystem::path dir_;
};

// As the regulator writes its trace: otherData first, its origin 5000 us.
constexpr const char* kHead = "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"clock\": \"CLOCK_MONOTONIC\", "
                              "\"origin_us\": 5000}, \"traceEvents\": [\n";
constexpr const char* kEvents =
    "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"regulator\"}},\n"
    "{\"name\": \"throttled\", \"ph\": \"X\", \"pid\": 1, \"tid\": 7, \"ts\": 100, \"dur\": 50},\n"
    "{\"name\": \"budget used core 0\", \"ph\": \"C\", \"pid\": 9, \"ts\": 200, \"args\": {\"MB\": 3}}";

TEST_F(Timeline, EachEventIsALineAndTheWholeIsOneDocument) {
  TraceFile trace;
  ASSERT_TRUE(trace.open(dir_ / "t.json"));
  trace.add({{"ph", "M"}, {"name", "process_name"}, {"pid", 3}, {"args", {{"name", "a"}}}});
  trace.add({{"ph", "X"}, {"name", "x"}, {"pid", 7}, {"ts", 1.5}, {"dur", 2.0}});
  trace.add({{"ph", "C"}, {"name", "c"}, {"pid", 5}, {"ts", 3.0}, {"args", {{"v", 1}}}});
  EXPECT_EQ(trace.last_pid(), 7);
  ASSERT_TRUE(trace.close());
  const auto text = lines(dir_ / "t.json");
  ASSERT_EQ(text.size(), 5u);
  EXPECT_EQ(text[0], "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
  for (size_t i = 1; i <= 3; ++i) EXPECT_EQ(json::parse(text[i].substr(0, text[i].find_last_of('}') + 1))["ph"],
                                            std::string(1, "MXC"[i - 1]));
  EXPECT_EQ(text[4], "]}");
  EXPECT_EQ(events(dir_ / "t.json").size(), 3u);
}

TEST_F(Timeline, AnotherProgramsTraceIsOnTheRunsClockWithProcessesOfItsOwn) {
  const json added = merged(file("regulator.trace.json", std::string(kHead) + kEvents + "\n]}\n"), "regulator (run)");
  ASSERT_EQ(added.size(), 3u) << added.dump();
  // Its pids 1 and 9 follow the run's highest (2), in the order first seen.
  EXPECT_EQ(added[0]["pid"], 3);
  EXPECT_EQ(added[0]["args"]["name"], "regulator (run)");
  EXPECT_EQ(added[1]["pid"], 3);
  EXPECT_EQ(added[2]["pid"], 4);
  // Its 0 is 5000 us on the clock, the run's 2000: 3000 us later.
  EXPECT_DOUBLE_EQ(added[1]["ts"].get<double>(), 3100.0);
  EXPECT_DOUBLE_EQ(added[1]["dur"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(added[2]["ts"].get<double>(), 3200.0);
  // Without a name to give, its own stays.
  EXPECT_EQ(merged(dir_ / "regulator.trace.json")[0]["args"]["name"], "regulator");
}

TEST_F(Timeline, ATraceCutShortKeepsWhatCameBeforeTheCut) {
  const std::string whole = std::string(kHead) + kEvents;
  const json added = merged(file("cut.json", whole.substr(0, whole.rfind("\"ts\": 200"))));
  ASSERT_EQ(added.size(), 2u) << added.dump();
  EXPECT_EQ(added[1]["name"], "throttled");
}

TEST_F(Timeline, WhatIsNotATraceOnTheRunsClockIsLeftOut) {
  // No file, no trace, no origin to place it by, events before the origin.
  EXPECT_TRUE(merged(dir_ / "missing.json").empty());
  EXPECT_TRUE(merged(file("text", "chain,start_us\nc,1\n")).empty());
  EXPECT_TRUE(merged(file("binary", std::string("\xff\x00\x17{[", 5))).empty());
  EXPECT_TRUE(merged(file("no_origin.json", std::string("{\"traceEvents\": [\n") + kEvents + "]}")).empty());
  EXPECT_TRUE(merged(file("late_origin.json", std::string("{\"traceEvents\": [\n") + kEvents +
                                                  "], \"otherData\": {\"origin_us\": 5000}}"))
                  .empty());
  // An event of another shape among good ones: it alone is left out.
  const json added = merged(file("odd.json", std::string(kHead) +
                                                 "{\"name\": \"a\", \"ph\": \"X\", \"pid\": \"one\", \"ts\": 1},\n" +
                                                 "7,\n" + kEvents + "]}"));
  ASSERT_EQ(added.size(), 3u) << added.dump();
  EXPECT_EQ(added[0]["args"]["name"], "regulator");
}

}  // namespace
}  // namespace rtaccel::exec
