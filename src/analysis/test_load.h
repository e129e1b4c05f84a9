// Helper of the analysis layer's tests: a workload from YAML text, loaded as
// for a machine of four cores; a workload the loader refuses fails the test.
#ifndef RTACCEL_ANALYSIS_TEST_LOAD_H_
#define RTACCEL_ANALYSIS_TEST_LOAD_H_

#include <gtest/gtest.h>

#include <string>

#include "rtaccel/workload.hpp"

namespace rtaccel::analysis {

inline workload::Workload load(const std::string& text) {
  workload::LoadOptions options;
  options.machine_cores = 4;
  auto result = workload::load_string(text, "test.yaml", options);
  if (!result) ADD_FAILURE() << result.status().message();
  return result ? *result : workload::Workload{};
}

}  // namespace rtaccel::analysis

#endif  // RTACCEL_ANALYSIS_TEST_LOAD_H_
