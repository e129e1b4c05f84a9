/* Futex wait and wake, and the spin-wait hint (core, internal; C and C++):
 * the lock layer, the accelerator server's shared-memory protocol and the
 * executors' shared run all sleep on futexes through these. */
#ifndef RTACCEL_CORE_FUTEX_H
#define RTACCEL_CORE_FUTEX_H

#include <errno.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Sleeps while *word == expected, until abs on clock (CLOCK_MONOTONIC or
 * CLOCK_REALTIME; NULL: no deadline). 0 when woken (or the word differed),
 * else -ETIMEDOUT, -EINTR or -EAGAIN. shared: the word may be in memory
 * shared between processes. */
static inline int futex_wait(uint32_t *word, uint32_t expected, bool shared, clockid_t clock,
			     const struct timespec *abs)
{
	int op = FUTEX_WAIT_BITSET | (shared ? 0 : FUTEX_PRIVATE_FLAG);
	if (abs && clock == CLOCK_REALTIME)
		op |= FUTEX_CLOCK_REALTIME;
	long r = syscall(SYS_futex, word, op, expected, abs, NULL, FUTEX_BITSET_MATCH_ANY);
	return r < 0 ? -errno : 0;
}

/* Wakes up to count sleepers on word. */
static inline void futex_wake(uint32_t *word, int count, bool shared)
{
	syscall(SYS_futex, word, FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG), count, NULL,
		NULL, 0);
}

#endif
