// Whether a core may be used, asked of the kernel without moving the caller.
#include "core/realtime.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>

namespace {

TEST(CoreAllowed, EveryCoreOfTheAffinityIsAllowedAndTheAffinityIsPutBack) {
  cpu_set_t before, after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  for (int core = 0; core < CPU_SETSIZE; ++core) {
    if (CPU_ISSET(core, &before)) {
      EXPECT_EQ(rtaccel_core_allowed(core), 0) << "core " << core;
    }
  }
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

TEST(CoreAllowed, ACoreThatDoesNotExistIsRefused) {
  const long cores = sysconf(_SC_NPROCESSORS_CONF);
  ASSERT_GT(cores, 0);
  EXPECT_EQ(rtaccel_core_allowed(static_cast<int>(cores)), -EINVAL);
  EXPECT_EQ(rtaccel_core_allowed(-1), -EINVAL);
  EXPECT_EQ(rtaccel_core_allowed(CPU_SETSIZE), -EINVAL);
}

}  // namespace
