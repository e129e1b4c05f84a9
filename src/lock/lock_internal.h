/* Internal helpers of the lock layer: futex wrappers, the cached thread id, the
 * FIFO ticket queue and the priority-boosting protocol. */
#ifndef RTACCEL_LOCK_INTERNAL_H
#define RTACCEL_LOCK_INTERNAL_H

#include "rtaccel/lock.h"
#include "core/futex.h"
#include "core/thread.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LOCK_TLS __attribute__((tls_model("initial-exec")))

/* Spin iterations before sleeping: long enough to cover a short critical
 * section on another core, short enough to cost little when the holder is
 * preempted on ours. */
#define LOCK_SPIN 128

#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LOAD_RELAXED(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define FETCH_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define CAS(p, expp, v) \
	__atomic_compare_exchange_n((p), (expp), (v), false, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE)

/* A timed call's clock and deadline: -EINVAL unless usable. */
static inline int deadline_valid(clockid_t clock, const struct timespec *abs)
{
	if (!abs || abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L)
		return -EINVAL;
	if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)
		return -EINVAL;
	return 0;
}

/* Checks a timed call's deadline the way POSIX does once the call would block. */
static inline int check_deadline(clockid_t clock, const struct timespec *abs)
{
	int r = deadline_valid(clock, abs);
	if (r < 0)
		return r;
	if (abs->tv_sec < 0)
		return -ETIMEDOUT;
	return 0;
}

/* The calling thread's kernel id, read once per thread (and again after fork). */
static inline uint32_t lock_self_tid(void) { return rtaccel_self_tid(); }

/* --- ticket queue ------------------------------------------------------- */

/* Waits until ticket t is served. Returns 0 when served (also when the
 * deadline passed just as it was), -ETIMEDOUT after giving the ticket up.
 * boost_hook, if set, runs before each sleep. */
int ticketq_wait(struct rtaccel_ticketq *q, uint32_t t, bool shared, clockid_t clock,
		 const struct timespec *abs, void (*boost_hook)(void *), void *arg);
/* Serves the next ticket, skipping abandoned ones, and wakes the sleepers. */
void ticketq_pass(struct rtaccel_ticketq *q, bool shared);
/* Takes a ticket only if it is served at once. */
bool ticketq_try(struct rtaccel_ticketq *q, uint32_t *ticket);

/* --- priority boosting -------------------------------------------------- */

enum holder_state {
	HOLDER_FREE = 0,
	HOLDER_HELD = 1,     /* holds the lock, not boosted by a waiter */
	HOLDER_BOOSTING = 2, /* a waiter is boosting it right now */
	HOLDER_BOOSTED = 3,  /* boosted by a waiter; saved holds what to restore */
};

int boost_ceiling_of(int configured);
/* Marks the caller as holder in h (0 on success, -EBUSY if h is taken). */
int holder_claim(struct rtaccel_lock_holder *h, uint32_t tid);
/* Claims one of n slots; if none is free the caller boosts itself. */
void holder_claim_any(struct rtaccel_lock_holder *slots, int n, uint32_t tid, int ceiling);
/* Clears the caller's claim, taking over any boost a waiter applied. */
void holder_release(struct rtaccel_lock_holder *h, uint32_t tid);
void holder_release_any(struct rtaccel_lock_holder *slots, int n, uint32_t tid);
/* Raises a holder that is not boosted yet to the ceiling (slow path only). */
void holder_boost(struct rtaccel_lock_holder *h, int ceiling);
/* A waiter raises itself to the ceiling before it sleeps. */
void boost_self(int ceiling);
/* Bookkeeping of boosting locks held by the caller; the last release (or a
 * failed wait while holding none) restores the caller's attributes. */
void boost_note_acquired(void);
void boost_note_released(void);
void boost_note_wait_failed(void);
/* The caller's own SCHED_FIFO/SCHED_RR priority, 0 for other policies; a
 * boosted thread's is the one it will get back (slow path: system calls). */
int self_rt_priority(void);

#endif
