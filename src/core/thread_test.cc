// Threads on a stack of a chosen size, and what they used of it.
#include "core/thread.h"

#include <gtest/gtest.h>


namespace rtaccel::core {
namespace {

// Writes BYTES of its own frame, so that the compiler keeps them.
__attribute__((noinline)) unsigned deep(size_t bytes) {
  volatile unsigned char frame[96 << 10];
  const size_t n = bytes < sizeof(frame) ? bytes : sizeof(frame);
  for (size_t i = 0; i < n; i += 64) frame[sizeof(frame) - 1 - i] = static_cast<unsigned char>(i);
  return frame[sizeof(frame) - 1];
}

TEST(Thread, RunsOnTheStackItWasGivenAndTellsHowMuchOfItItUsed) {
  size_t shallow = 0, deeper = 0, size = 0;
  {
    Thread t;
    ASSERT_EQ(t.start(256 << 10, [&] {
      rtaccel_stack_mark();
      shallow = rtaccel_stack_used(&size);
      deep(64 << 10);
      deeper = rtaccel_stack_used(nullptr);
    }), 0);
    EXPECT_TRUE(t.joinable());
  }  // joined here
  // The size asked for (glibc takes the guard page out of it, if anything),
  // not the default of RLIMIT_STACK.
  EXPECT_GE(size, 252u << 10);
  EXPECT_LE(size, 256u << 10);
  EXPECT_LT(shallow, 16u << 10);
  EXPECT_GE(deeper, 64u << 10);
  EXPECT_LT(deeper, 160u << 10);  // a probing prologue touches the whole frame
}

TEST(Thread, TheMainThreadAndAnUnmarkedStackReadNothing) {
  size_t size = 1;
  rtaccel_stack_mark();  // not the main thread's: it grows on demand
  EXPECT_EQ(rtaccel_stack_used(&size), 0u);
  Thread t;
  size_t used = 1;
  ASSERT_EQ(t.start(RTACCEL_THREAD_STACK, [&] { used = rtaccel_stack_used(nullptr); }), 0);
  t.join();
  EXPECT_FALSE(t.joinable());
  EXPECT_EQ(used, 0u);
}

TEST(Thread, AStackTooLargeToMapIsRefusedAndNothingRuns) {
  bool ran = false;
  Thread t;
  // More than the address space leaves: pthread_create's error, no thread.
  const int err = t.start(size_t{1} << 62, [&] { ran = true; });
  EXPECT_NE(err, 0);
  EXPECT_FALSE(t.joinable());
  t.join();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace rtaccel::core
