// The run's processes' memory and descriptors, read from /proc: growth is
// seen where it happens, a process that ended is not an error.
#include "exec/resources.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace rtaccel::exec {
namespace {

// A child that waits for its end, as a run's process does; -1 if none.
pid_t waiting_child() {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  return child;
}

TEST(Resources, GrowthInDescriptorsAndMemoryIsSeen) {
  ResourceSampler sampler;
  sampler.watch(getpid(), "this test");
  sampler.sample(1);
  std::vector<int> opened;
  for (int i = 0; i < 5; i++) opened.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Fresh pages: a heap block could reuse memory that is resident already.
  constexpr size_t kBytes = 16u << 20;
  void* touched = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(touched, MAP_FAILED);
  memset(touched, 1, kBytes);
  // And as much shared memory, as a server's region is: resident, not private.
  void* shared = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  memset(shared, 1, kBytes);
  sampler.sample(2);
  munmap(touched, kBytes);
  munmap(shared, kBytes);
  for (int fd : opened) close(fd);
  const nlohmann::json s = sampler.summary();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["process"], "this test");
  EXPECT_EQ(s[0]["samples"], 2);
  const auto& fds = s[0]["descriptors"];
  EXPECT_EQ(fds["last"].get<uint64_t>(), fds["first"].get<uint64_t>() + 5) << s.dump();
  EXPECT_EQ(fds["max"], fds["last"]);
  const auto& rss = s[0]["rss_kb"];
  EXPECT_GE(rss["last"].get<uint64_t>(), rss["first"].get<uint64_t>() + 31 * 1024) << s.dump();
  const auto& own = s[0]["private_kb"];
  const uint64_t private_grew = own["last"].get<uint64_t>() - own["first"].get<uint64_t>();
  EXPECT_GE(private_grew, 15u * 1024) << s.dump();
  EXPECT_LE(private_grew, 17u * 1024) << s.dump();
  // Closed again: flat from first to last.
  sampler.sample(3);
  const nlohmann::json after = sampler.summary();
  EXPECT_EQ(after[0]["descriptors"]["last"], after[0]["descriptors"]["first"]) << after.dump();
  EXPECT_EQ(sampler.processes()[0].samples.size(), 3u);
  EXPECT_EQ(sampler.processes()[0].samples[1].first, 2u);
}

TEST(Resources, SamplesReservedForTheRunGrowInPlace) {
  ResourceSampler sampler;
  sampler.watch(getpid(), "this test");
  sampler.reserve(50);
  const auto* room = sampler.processes()[0].samples.data();
  for (uint64_t k = 0; k < 50; ++k) sampler.sample(k);
  EXPECT_EQ(sampler.processes()[0].samples.size(), 50u);
  EXPECT_EQ(sampler.processes()[0].samples.data(), room);
}

TEST(Resources, AProcessThatEndedKeepsWhatWasSampledOfIt) {
  const pid_t child = waiting_child();
  ASSERT_GT(child, 0);
  ResourceSampler sampler;
  sampler.watch(child, "child");
  sampler.watch(-1, "never started");  // not a process: not watched
  sampler.sample(1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ProcessResources r;
  EXPECT_FALSE(read_resources(child, &r));
  sampler.sample(2);
  const nlohmann::json s = sampler.summary();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["samples"], 1);
  EXPECT_GT(s[0]["descriptors"]["first"].get<uint64_t>(), 0u);
  EXPECT_GT(s[0]["rss_kb"]["first"].get<uint64_t>(), 0u);
}

TEST(Resources, AProcessThatEndedAndIsNotYetReapedIsGoneToo) {
  const pid_t child = waiting_child();
  ASSERT_GT(child, 0);
  ResourceSampler sampler;
  sampler.watch(child, "child");
  sampler.sample(1);
  kill(child, SIGKILL);
  // Its parent, this test, has not waited for it: a zombie, once the kill
  // has landed.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  ProcessResources r;
  EXPECT_FALSE(read_resources(child, &r));
  sampler.sample(2);
  waitpid(child, nullptr, 0);
  const nlohmann::json s = sampler.summary();
  EXPECT_EQ(s[0]["samples"], 1);
  EXPECT_EQ(s[0]["descriptors"]["last"], s[0]["descriptors"]["first"]);
}

}  // namespace
}  // namespace rtaccel::exec
