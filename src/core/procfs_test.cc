// What /proc says of a process, read as the supervisor and the runner read it.
#include "core/procfs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <set>
#include <string>
#include <thread>

namespace {

// PID's state once it is WANTED, or the last one read in 10 s.
char settled_state(pid_t pid, char wanted) {
  rtaccel_proc_stat st{};
  for (int i = 0; i < 10000; i++) {
    if (rtaccel_read_proc_stat(pid, &st) && st.state == wanted) break;
    usleep(1000);
  }
  return st.state;
}

TEST(ProcStat, ANameWithSpacesAndParenthesesStateParentAndGroup) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A name that a parser splitting at the first ')' or at spaces misreads.
    prctl(PR_SET_NAME, "a) b (c) 9 9");
    setpgid(0, 0);
    char ok = 1;
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  close(ready[1]);

  rtaccel_proc_stat st{};
  ASSERT_TRUE(rtaccel_read_proc_stat(child, &st));
  EXPECT_STREQ(st.name, "a) b (c) 9 9");
  EXPECT_EQ(st.parent, getpid());
  EXPECT_EQ(st.group, child);
  EXPECT_EQ(settled_state(child, 'S'), 'S');

  kill(child, SIGSTOP);
  EXPECT_EQ(settled_state(child, 'T'), 'T');
  kill(child, SIGKILL);
  EXPECT_EQ(settled_state(child, 'Z'), 'Z');  // ended, not yet reaped
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(rtaccel_read_proc_stat(child, &st));
}

// A child forked by a thread other than the main one is on that thread's
// children list, while the thread lives: the runner reads every thread's
// list to find a best-effort program's processes.
TEST(ProcChildren, EveryThreadsChildrenAndNoOneElses) {
  const pid_t first = fork();
  ASSERT_GE(first, 0);
  if (first == 0) {
    pause();
    _exit(0);
  }
  std::promise<pid_t> forked;
  std::promise<void> read;
  std::thread thread([&forked, done = read.get_future()]() mutable {
    const pid_t second = fork();
    if (second == 0) {
      pause();
      _exit(0);
    }
    forked.set_value(second);
    done.wait();
  });
  const pid_t second = forked.get_future().get();
  std::set<long> found;
  auto add = [](long child, void* arg) { static_cast<std::set<long>*>(arg)->insert(child); };
  const int counted = rtaccel_for_each_child(getpid(), add, &found);
  read.set_value();
  thread.join();
  ASSERT_GT(second, 0);
  EXPECT_EQ(counted, 2);
  EXPECT_EQ(found, (std::set<long>{first, second}));
  std::set<long> none;
  EXPECT_EQ(rtaccel_for_each_child(first, add, &none), 0);
  EXPECT_TRUE(none.empty());
  for (pid_t pid : {first, second}) {
    kill(pid, SIGKILL);
    ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  }
  EXPECT_EQ(rtaccel_for_each_child(first, add, &none), -1);  // gone
}

}  // namespace
