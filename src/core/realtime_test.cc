// Which cores a process may use, asked of the kernel, the caller put back where it was.
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

TEST(CoresUsable, CountsTheAffinityNotTheMachine) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  EXPECT_EQ(rtaccel_cores_usable(), CPU_COUNT(&before));
  int first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(rtaccel_cores_usable(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
}

}  // namespace
