// Starting a child: what reaches it between fork and its program.
#include "core/daemon.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/clock.h"

namespace rtaccel::core {
namespace {

volatile sig_atomic_t parent_got;
void note(int sig) { parent_got = sig; }

// Whether CHILD ended within TIMEOUT_NS; its wait status in *STATUS.
bool ends_within(Child& child, uint64_t timeout_ns, int* status) {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  while (monotonic_ns() < deadline) {
    if (child.exited(status)) return true;
    sleep_ns(2000000);
  }
  return false;
}

// A parent that takes SIGTERM with a handler of its own (the runner does)
// and a SIGTERM sent while the child has yet to start its program: the
// child is held in open() of its log, a FIFO nobody reads yet, until the
// signal was sent. The child ends by it. Before, the child ran its copy of
// the parent's handler, execve forgot that, and the program ran on: the
// supervisor of a best-effort program was killed two seconds later, and
// the program was left running.
TEST(Child, ASigtermBeforeItsProgramStartsEndsIt) {
  char dir[] = "/tmp/rtaccel-daemon-test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/log";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  struct sigaction took {}, was {};
  took.sa_handler = note;
  sigemptyset(&took.sa_mask);
  ASSERT_EQ(sigaction(SIGTERM, &took, &was), 0);

  SpawnOptions options;
  options.log_path = fifo;
  options.as_started = true;
  auto spawned = Child::spawn({"/bin/sleep", "30"}, options);
  ASSERT_TRUE(spawned) << spawned.status().message();
  Child child = spawned.take();
  ASSERT_EQ(kill(child.pid(), SIGTERM), 0);
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // lets the child go on
  ASSERT_GE(reader, 0);
  int status = 0;
  const bool ended = ends_within(child, 10 * RTACCEL_NS_PER_S, &status);
  close(reader);
  sigaction(SIGTERM, &was, nullptr);
  unlink(fifo.c_str());
  rmdir(dir);
  ASSERT_TRUE(ended) << "the child's program ran on after the SIGTERM";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << describe_wait_status(status);
  EXPECT_EQ(parent_got, 0) << "the signal was the child's";
}

}  // namespace
}  // namespace rtaccel::core
