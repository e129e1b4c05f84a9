// End-to-end tests of rtaccel-server's data plane, the shared memory between a
// client and the workers: the doorbell page's hints, asynchronous requests
// overlapping CPU work, and submit and completion without a system call. See
// server_test.h.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <new>
#include <string>

#include "accel/protocol.h"
#include "accel/test_descs.h"
#include "core/clock.h"
#include "rtaccel/accel.h"

#include "server_test.h"

namespace rtaccel::accel::server_test {
namespace {

// A client may write the doorbell page as it likes. Taking the others'
// hints away delays their requests, by at most kUntrustedPageBoundNs: the
// workers look at every registration that often. Here the hint is wiped
// while the server stands still, so that only that look can find the
// request.
TEST(Server, ARequestWhoseHintAClientWipedIsServedWithinTheBound) {
  ServerProcess server(cpu_args({"--poll-us", "0"}));
  ASSERT_TRUE(server.ready());
  Client victim(server);
  rtaccel_registration* r = victim.reg(busy_chain("victim", 10));
  ASSERT_TRUE(r);
  RawClient hostile(server.socket());
  RegisterReply reply;
  ASSERT_EQ(hostile.register_desc(busy_chain("hostile", 5), &reply), 0) << reply.message;
  const int s = rtaccel_service_index(r, "busy");
  static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(r, s, nullptr))->ns = 100000;
  for (int round = 0; round < 3; round++) {
    ASSERT_EQ(kill(server.pid(), SIGSTOP), 0);
    // Whichever way this round ends, the server goes on: a failed check
    // must not leave it stopped for its SIGTERM to wait out.
    struct Resume {
      pid_t pid;
      ~Resume() { kill(pid, SIGCONT); }
    } resume{server.pid()};
    const uint64_t asked = core::monotonic_ns();
    while (server.state() != 'T' && core::monotonic_ns() - asked < 10 * kSecond) usleep(1000);
    ASSERT_EQ(server.state(), 'T');
    rtaccel_ticket t{};
    ASSERT_EQ(rtaccel_submit(r, s, sizeof(rtaccel_busy_request), &t), 0);
    DoorbellPage* db = hostile.doorbell();
    uint64_t hints = 0;
    for (uint64_t& w : db->hints) hints |= __atomic_exchange_n(&w, 0, __ATOMIC_SEQ_CST);
    ASSERT_NE(hints, 0u) << "the client set no hint";
    const uint64_t resumed = core::monotonic_ns();
    ASSERT_EQ(kill(server.pid(), SIGCONT), 0);
    ASSERT_EQ(rtaccel_wait(r, &t, 5 * kSecond, nullptr), 0) << "round " << round << ": the request was lost";
    // The bound, and room for this machine's stalls; a lost request would
    // have waited for the 5 s.
    EXPECT_LT(core::monotonic_ns() - resumed, kUntrustedPageBoundNs + 950 * kMs) << round;
  }
}

// The registrations past a device's hint slots have none, and are looked
// at whenever a worker looks for work: their requests wait for no look at
// every registration.
TEST(Server, RegistrationsPastTheHintSlotsAreServedAtOnce) {
  ServerProcess server(cpu_args({"--poll-us", "0"}));
  ASSERT_TRUE(server.ready());
  Client holder(server);
  constexpr uint32_t kPerChain = RTACCEL_MAX_CALLBACKS;
  for (uint32_t i = 0; i < kHintSlots; i++) {
    const std::string chain = "slots-" + std::to_string(i / kPerChain);
    rtaccel_registration_desc d = one_callback(chain, 1, 100 * kSecond, CallbackSpec{.name = chain}, 64, 64,
                                               /*critical=*/false);
    d.chain.ncallbacks = kPerChain;
    for (uint32_t k = 0; k < kPerChain; k++)
      test::set_callback(&d.chain.callbacks[k], CallbackSpec{.name = chain + "-" + std::to_string(k),
                                                             .executor = "slots-ex", .cpu_ns = 1000, .wcet_ns = 1000});
    d.callback = i % kPerChain;
    ASSERT_TRUE(holder.reg(d)) << i;
  }
  RawClient past(server.socket());
  RegisterReply reply;
  ASSERT_EQ(past.register_desc(busy_chain("past", 2), &reply), 0) << reply.message;
  EXPECT_EQ(past.header()->hint_slot, kNoHintSlot);
  Client client(server);
  rtaccel_registration* r = client.reg(busy_chain("past-too", 3));
  ASSERT_TRUE(r);
  const int s = rtaccel_service_index(r, "busy");
  static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(r, s, nullptr))->ns = 10000;
  // A hundred calls, the worker asleep before each: some 20 ms in all here.
  // Found only by the looks at every registration, they would take about
  // half the bound each, some 2.5 s.
  const uint64_t start = core::monotonic_ns();
  for (int i = 0; i < 100; i++) {
    usleep(500);
    size_t len = 0;
    ASSERT_EQ(rtaccel_call(r, s, sizeof(rtaccel_busy_request), 5 * kSecond, &len), 0) << i;
  }
  EXPECT_LT(core::monotonic_ns() - start, 1250 * kMs);
}

TEST(Server, AsynchronousRequestsOverlapCpuWork) {
  ServerProcess server(cpu_args({"--levels", "1"}));
  ASSERT_TRUE(server.ready());
  Client client(server);
  // A long request on the only level holds the worker, so none of the ring's
  // requests can complete (and free its entry) before the ring-full check,
  // however slowly this process runs.
  rtaccel_registration* blocker = client.reg(busy_chain("blocker", 1, kSecond));
  ASSERT_TRUE(blocker);
  rtaccel_ticket tb;
  ASSERT_EQ(submit_busy(blocker, kSecond, &tb), 0);
  ASSERT_TRUE(wait_started(blocker, tb));
  rtaccel_registration* r = client.reg(busy_chain("async", 5, 20 * kMs));
  rtaccel_ticket t[kRingEntries];
  for (uint32_t i = 0; i < kRingEntries; i++) ASSERT_EQ(submit_busy(r, 1 * kMs, &t[i]), 0);
  rtaccel_ticket extra;
  EXPECT_EQ(submit_busy(r, 1 * kMs, &extra), -EBUSY);  // the ring is full
  EXPECT_EQ(rtaccel_poll(r, &t[kRingEntries - 1], nullptr), -EAGAIN);
  for (uint32_t i = 0; i < kRingEntries; i++) ASSERT_EQ(rtaccel_wait(r, &t[i], 10 * kSecond, nullptr), 0);
  ASSERT_EQ(rtaccel_wait(blocker, &tb, 10 * kSecond, nullptr), 0);
  for (uint32_t i = 1; i < kRingEntries; i++)  // one registration: in order
    EXPECT_GE(times_of(r, t[i]).start_ns, times_of(r, t[i - 1]).end_ns);
  rtaccel_ticket timeout;
  ASSERT_EQ(submit_busy(r, 300 * kMs, &timeout), 0);
  EXPECT_EQ(rtaccel_wait(r, &timeout, 10 * kMs, nullptr), -ETIMEDOUT);
  EXPECT_EQ(rtaccel_wait(r, &timeout, 10 * kSecond, nullptr), 0);
}

// What the child of SubmitAndSpinCompletionMakeNoSystemCall saw, in memory
// it shares with the test.
struct SyscallCount {
  uint32_t clean;       // iterations with no system call
  uint32_t excused;     // with one, after a stall long enough to explain it
  uint32_t unexcused;   // with one and no such stall: the defect looked for
  int nr;               // the first unexcused system call's number
  uint64_t stall_ns;    // how long its iteration had run when it made it
};

volatile sig_atomic_t g_trapped;

volatile sig_atomic_t g_trapped_nr;

// When the iteration's first system call was made: what excuses it is the
// stall before it, not the one after (a wake-up that fails stalls the next
// request by the worker's 50 ms sleep).
volatile uint64_t g_trapped_at_ns;

// The filter traps every system call but exit_group and rt_sigreturn; this
// counts it and makes it fail with ENOSYS, which the client survives: a failed
// liveness poll reads as a live server, and a failed futex wake-up leaves the
// worker to its sleep's 50 ms limit.
void count_syscall(int, siginfo_t* info, void* context) {
  g_trapped = g_trapped + 1;
  if (g_trapped_nr == 0) {  // the first in its iteration
    g_trapped_nr = info->si_syscall;
    g_trapped_at_ns = core::monotonic_ns();  // the vDSO: no system call
  }
#if defined(__x86_64__)
  static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#elif defined(__aarch64__)
  static_cast<ucontext_t*>(context)->uc_mcontext.regs[0] = uint64_t(-ENOSYS);
#endif
}

// While the worker polls, a spinning client's submit and completion make no
// system call. A child runs them under a seccomp filter that traps any. The
// client does make two on purpose: a liveness poll after spinning 50 ms on one
// request, and a wake-up of a worker that stopped polling (here after 10 s
// without a request). Either needs the child to have gone 50 ms or more since
// its last completion, which a loaded machine can do to it by descheduling the
// child or the worker, so a system call fails the test only where it was made
// sooner than that.
TEST(Server, SubmitAndSpinCompletionMakeNoSystemCall) {
#if !defined(__x86_64__) && !defined(__aarch64__)
  GTEST_SKIP() << "the SIGSYS handler sets the return register of x86-64 and arm64 only";
#endif
  ServerProcess server(cpu_args({"--levels", "1", "--poll-us", "10000000"}));
  ASSERT_TRUE(server.ready());
  void* shared = mmap(nullptr, sizeof(SyscallCount), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* count = new (shared) SyscallCount{};
  constexpr uint64_t kExcuseNs = 50 * kMs;  // client.cc's kLivenessCheckNs
  pid_t child = fork();
  if (child == 0) {
    rtaccel_client* c;
    rtaccel_registration* r;
    if (rtaccel_client_connect(server.socket(), &c) ||
        register_desc(c, busy_chain("nosys", 5, kMs, RTACCEL_WAIT_SPIN), &r, nullptr, 0))
      _exit(3);
    rtaccel_ticket t;
    if (submit_busy(r, 0, &t) || rtaccel_wait(r, &t, 0, nullptr)) _exit(3);  // wakes the worker
    struct sigaction sa{};
    sa.sa_sigaction = count_syscall;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSYS, &sa, nullptr)) _exit(3);
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) _exit(2);
    uint64_t last = core::monotonic_ns();
    for (int i = 0; i < 20000; i++) {
      const sig_atomic_t before = g_trapped;
      // The liveness poll fails here, so a worker that stopped would spin
      // the child forever: a timeout (the clock is the vDSO's) ends it.
      if (submit_busy(r, 0, &t) || rtaccel_wait(r, &t, 10 * kSecond, nullptr)) _exit(1);
      const uint64_t now = core::monotonic_ns();
      if (g_trapped == before) {
        count->clean++;
      } else if (g_trapped_at_ns - last >= kExcuseNs) {
        count->excused++;
      } else if (count->unexcused++ == 0) {
        count->nr = g_trapped_nr;
        count->stall_ns = g_trapped_at_ns - last;
      }
      g_trapped_nr = 0;
      last = now;
    }
    syscall(SYS_exit_group, 0);
  }
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const SyscallCount seen = *count;
  munmap(shared, sizeof(SyscallCount));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) SKIP_WITHOUT("seccomp", "no seccomp filter here");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the client failed: " << (WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exit status")
      << " " << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  EXPECT_EQ(seen.unexcused, 0u) << "the hot path made system call " << seen.nr << " "
                                << seen.stall_ns / 1000 << " us after the last completion";
  EXPECT_GT(seen.clean, 0u) << "every iteration stalled " << kExcuseNs / kMs << " ms or more";
  if (seen.excused) printf("%u of 20000 iterations stalled and made an expected system call\n", seen.excused);
}

}  // namespace
}  // namespace rtaccel::accel::server_test
