/* Helpers for the lock tests: one program per feature, exit 0 pass, 1 fail,
 * 77 skip. A watchdog (alarm) turns a hang into a failure. */
#ifndef RTACCEL_TEST_UTIL_H
#define RTACCEL_TEST_UTIL_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../harness/skip.h"

#define T_PASS 0
#define T_FAIL 1

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                               \
			exit(T_FAIL);                                                 \
		}                                                                     \
	} while (0)

#define CHECK_EQ(a, b)                                                                \
	do {                                                                          \
		long long a_ = (long long)(a), b_ = (long long)(b);                   \
		if (a_ != b_) {                                                       \
			fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n",   \
				__FILE__, __LINE__, #a, a_, #b, b_);                  \
			exit(T_FAIL);                                                 \
		}                                                                     \
	} while (0)

static inline uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline struct timespec deadline_in(clockid_t clock, uint64_t ns)
{
	uint64_t t = now_ns(clock) + ns;
	struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
	return ts;
}

static inline void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void watchdog_fired(int sig)
{
	(void)sig;
	static const char msg[] = "watchdog: test hung\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void)r;
	_exit(T_FAIL);
}

static inline void watchdog(unsigned seconds)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, watchdog_fired);
	alarm(seconds);
}

static inline pid_t self_tid(void) { return (pid_t)syscall(SYS_gettid); }

/* Until thread TID (self_tid() of a thread of this process) sleeps in the
 * kernel: for a thread that has just called a lock another one holds, until
 * it waits in the lock's queue. How a test lines waiters up in a known order
 * by construction, not by guessing how long they take to get there. Fails
 * after 10 s. */
static inline void until_asleep(pid_t tid)
{
	char path[64], stat[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	for (int i = 0; i < 10000; i++) {
		FILE *f = fopen(path, "r");
		CHECK(f != NULL);
		char *line = fgets(stat, sizeof(stat), f);
		fclose(f);
		const char *state = line ? strrchr(stat, ')') : NULL;
		if (state && state[1] == ' ' && state[2] == 'S')
			return;
		sleep_ns(1000000);
	}
	fprintf(stderr, "thread %d never went to sleep\n", (int)tid);
	exit(T_FAIL);
}

/* fork() for tests: the child is killed when the test process dies, however
 * it ends (a failed CHECK, a crash, the watchdog), so that no child outlives
 * its test, keeps running stopped, or holds the test's output open. The
 * kernel ties PR_SET_PDEATHSIG to the thread that forks: call this from one
 * that outlives the child, the main thread. (Under ctest the guard,
 * tests/harness/test_guard.c, also ends whatever a test leaves.) */
static inline pid_t test_fork(void)
{
	const pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
		_exit(T_FAIL);
	return pid;
}

/* True if this process may use SCHED_FIFO (root, CAP_SYS_NICE or RLIMIT_RTPRIO). */
static inline int can_use_fifo(void)
{
	struct sched_param sp = {.sched_priority = 1};
	int policy;
	struct sched_param old;
	pthread_getschedparam(pthread_self(), &policy, &old);
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0)
		return 0;
	pthread_setschedparam(pthread_self(), policy, &old);
	return 1;
}

/* Installs a seccomp filter that kills the process on any system call but
 * write and exit_group: for checks that a fast path makes none. 0, or -1
 * where seccomp is not available (the caller skips). */
static inline int forbid_syscalls(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* Runs prepare (system calls allowed), then body under forbid_syscalls(), in
 * a child; either may _exit(T_FAIL). The test's result: T_PASS, T_SKIP
 * without seccomp (T_FAIL where seccomp is required), T_FAIL when body made a system call (the filter kills the
 * child) or failed. what names the operations in the messages. */
static inline int run_without_syscalls(void (*prepare)(void), void (*body)(void), const char *what)
{
	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prepare();
		if (forbid_syscalls() < 0)
			_exit(test_skip_part("seccomp", "no seccomp filter here: %s", strerror(errno)));
		body();
		static const char ok[] = "uncontended fast paths made no system call\n";
		if (write(1, ok, sizeof(ok) - 1) < 0)
			_exit(T_FAIL);
		syscall(SYS_exit_group, 0);
	}
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == T_SKIP)
		return T_SKIP;
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "child killed by signal %d: %s made a system call\n", WTERMSIG(status), what);
		return T_FAIL;
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return T_PASS;
}

#endif
