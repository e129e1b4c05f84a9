#include "exec/run_options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rtaccel::exec {
namespace {

// A default the table says is the one RunOptions has: set from its text, a
// fresh RunOptions is what it was.
TEST(RunOptions, EachDefaultTheTableGivesIsRunOptionsOwn) {
  for (const RunOptionSpec& spec : run_option_specs()) {
    if (!spec.given) continue;
    RunOptions set, fresh;
    ASSERT_TRUE(spec.set(&set, spec.given)) << spec.name;
    EXPECT_EQ(set.policy, fresh.policy) << spec.name;
    EXPECT_EQ(set.duration_s, fresh.duration_s) << spec.name;
    EXPECT_EQ(set.out_dir, fresh.out_dir) << spec.name;
    EXPECT_EQ(set.work_fraction, fresh.work_fraction) << spec.name;
  }
}

TEST(RunOptions, NamesAreOnceAndEveryOptionIsInTheUsage) {
  std::set<std::string> names;
  std::set<char> shorts;
  const std::string usage = run_usage();
  for (const RunOptionSpec& spec : run_option_specs()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    if (spec.short_name) {
      EXPECT_TRUE(shorts.insert(spec.short_name).second) << spec.name;
    }
    EXPECT_NE(usage.find(std::string("--") + spec.name + (spec.value ? " " : "")), std::string::npos) << spec.name;
    EXPECT_EQ(find_run_option(spec.name), &spec);
    // What an option with a value takes is said when a value is refused.
    if (spec.value) {
      EXPECT_NE(spec.takes, nullptr) << spec.name;
    }
  }
  EXPECT_EQ(find_run_option("no-such-option"), nullptr);
}

TEST(RunOptions, ValuesAreParsedIntoTheRunsOptionsOrRefused) {
  RunOptions o;
  EXPECT_TRUE(find_run_option("walk")->set(&o, "64:random:1.5"));
  EXPECT_EQ(o.walk_ns_per_line.at({64u << 10, true}), 1.5);
  EXPECT_FALSE(find_run_option("walk")->set(&o, "64:zigzag:1"));
  EXPECT_TRUE(find_run_option("fail-link")->set(&o, "eth0@2.5"));
  EXPECT_FALSE(find_run_option("fail-link")->set(&o, "@2"));
  ASSERT_EQ(o.link_failures.size(), 1u);
  EXPECT_EQ(o.link_failures[0].first, "eth0");
  EXPECT_TRUE(find_run_option("shim")->set(&o, "boost,pi"));
  EXPECT_EQ(o.shim_modes, "trace,pi,boost");  // the interposer's order, trace always on
  EXPECT_FALSE(find_run_option("shim")->set(&o, "pi,,boost"));
  EXPECT_FALSE(find_run_option("best-effort")->set(&o, " \t"));
  EXPECT_FALSE(find_run_option("duration")->set(&o, "-1"));
  EXPECT_TRUE(find_run_option("no-gang")->set(&o, nullptr));
  EXPECT_EQ(o.gang, false);
  EXPECT_TRUE(find_run_option("epsilon-floor-us")->set(&o, "42.5"));
  EXPECT_EQ(o.epsilon_floor_ns, 42500u);
}

}  // namespace
}  // namespace rtaccel::exec
