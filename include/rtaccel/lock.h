/*
 * rtaccel/lock.h - real-time locks usable between threads and processes.
 *
 * - rtaccel_rwlock_t: phase-fair reader-writer lock (Brandenburg & Anderson's
 *   ticket-based PF-T). A reader waits behind at most one writer phase; writers
 *   are served in FIFO order. Waiters spin briefly, then sleep on a futex.
 *   Optional progress mechanism: priority boosting of waiting and holding
 *   threads to a ceiling (RTACCEL_LOCK_BOOST).
 * - rtaccel_mutex_t: FIFO (ticket) mutex with error checking.
 * - rtaccel_pi_mutex_init(): a pthread mutex with priority inheritance.
 *
 * Conventions (as liburing): functions return 0 or a negative errno value and
 * never touch errno. Waits come as blocking, try (-EBUSY) and timed (absolute
 * time, -ETIMEDOUT). Locks are plain memory: place them in shared memory and set
 * RTACCEL_LOCK_PSHARED to use them between processes. A zero-filled lock is a
 * valid private lock without boosting (RTACCEL_RWLOCK_INITIALIZER).
 *
 * Limits: 65,535 threads inside or waiting for one rwlock at once; 32,767
 * timed readers giving up during one write phase (more wait for it to end);
 * 65,535 writers waiting at one real-time priority; 127 real-time readers
 * past waiting writers at once (more queue as other readers do).
 *
 * Readers of a real-time priority (SCHED_FIFO, SCHED_RR) keep POSIX's rule:
 * a reader whose priority is above that of every waiting writer enters while
 * no writer holds the lock, ahead of the write phase. Among other readers the
 * order is phase-fair.
 *
 * Real-time notes: no function allocates. Uncontended lock and unlock make no
 * system call, with or without boosting. A thread's first lock operation reads
 * its thread id once (one system call per thread lifetime).
 */
#ifndef RTACCEL_LOCK_H
#define RTACCEL_LOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RTACCEL_API __attribute__((visibility("default")))

/* Lock attribute flags. */
#define RTACCEL_LOCK_PSHARED 0x1u /* usable between processes (shared memory) */
#define RTACCEL_LOCK_BOOST   0x2u /* priority boosting progress mechanism (rwlock) */

/* A writer that times out leaves a mark in a ring of this many entries; with
 * more writers than this timing out at once, a timed-out writer waits for a
 * free entry before it returns. */
#define RTACCEL_TICKET_RING 32
/* Reader threads tracked for boosting. A reader that finds every slot taken
 * boosts itself on entry instead (one system call) so it is never unprotected. */
#define RTACCEL_RWLOCK_READER_SLOTS 8

struct rtaccel_lock_attr {
	uint32_t flags;    /* RTACCEL_LOCK_* */
	int boost_ceiling; /* SCHED_FIFO priority of boosted threads (1..99);
	                      0 picks 98, one below the highest, so that kernel
	                      threads at 99 (watchdog, migration) still run */
};

/* Saved scheduling attributes of a boosted thread (internal). */
struct rtaccel_sched_saved {
	uint32_t policy;
	int32_t priority;
	int32_t nice;
	uint32_t flags;
};

/* A thread that holds a lock, as seen by the boosting waiters (internal). */
struct rtaccel_lock_holder {
	uint64_t word; /* tid << 32 | state */
	struct rtaccel_sched_saved saved;
};

/* FIFO hand-over of a lock between waiters, with abandonment (internal). */
struct rtaccel_ticketq {
	uint32_t next;     /* next ticket to hand out */
	uint32_t serving;  /* ticket that owns the lock; futex word */
	uint32_t sleepers; /* waiters asleep on serving */
	uint32_t reserved;
	uint64_t abandoned[RTACCEL_TICKET_RING]; /* 1 << 32 | ticket of a waiter that gave up */
};

/* All fields are private. The layout is fixed so the lock can live in shared
 * memory between processes built from the same rtaccel version. */
typedef struct rtaccel_rwlock {
	uint64_t rin;      /* reader entries << 48 | readers let past a waiting
	                      writer by priority << 41 | writer inside << 40 |
	                      write-phase epoch << 16 | abandoned readers << 1 |
	                      writer present; the low half is the readers' futex
	                      word */
	uint32_t rout;     /* reader exits; futex word of the draining writer */
	uint32_t rsleep;   /* readers asleep on rin */
	uint32_t dsleep;   /* writer asleep on rout */
	uint32_t owner;    /* tid of the write holder, 0 if none */
	uint32_t flags;    /* RTACCEL_LOCK_* */
	int32_t ceiling;   /* boost ceiling, 0 = default */
	struct rtaccel_ticketq writers;
	struct rtaccel_lock_holder writer;
	struct rtaccel_lock_holder readers[RTACCEL_RWLOCK_READER_SLOTS];
	uint32_t gseq;     /* bumped as those readers leave; futex word of the
	                      writer waiting for them */
	uint32_t gsleep;   /* writer asleep on gseq */
	uint16_t waiting_writers[100]; /* by real-time priority (1..99) */
} __attribute__((aligned(64))) rtaccel_rwlock_t;

#define RTACCEL_RWLOCK_INITIALIZER {0}

typedef struct rtaccel_mutex {
	struct rtaccel_ticketq q;
	uint32_t owner; /* tid of the holder, 0 if none */
	uint32_t flags;
} __attribute__((aligned(64))) rtaccel_mutex_t;

#define RTACCEL_MUTEX_INITIALIZER {{0}, 0, 0}

/* --- reader-writer lock ------------------------------------------------- */

/* The calls mirror pthread's, variant by variant (try, timed, clock), so
 * that the interposer maps each POSIX function to one of them. */

/* Initialises l; attr NULL means private and no boosting. Does not allocate.
 * -EINVAL for unknown flags or a ceiling outside 1..99. */
RTACCEL_API int rtaccel_rwlock_init(rtaccel_rwlock_t *l, const struct rtaccel_lock_attr *attr);
/* -EBUSY while the lock is held or waited for. */
RTACCEL_API int rtaccel_rwlock_destroy(rtaccel_rwlock_t *l);

/* Read lock. Blocks behind at most one writer phase. Not recursive: a thread
 * that read-locks a lock it already read-holds may deadlock behind a waiting
 * writer (the phase-fair guarantee forbids letting it pass); -EDEADLK if the
 * caller holds the write lock. */
RTACCEL_API int rtaccel_rwlock_rdlock(rtaccel_rwlock_t *l);
/* -EBUSY if a writer holds or is entering the lock. Never blocks. */
RTACCEL_API int rtaccel_rwlock_tryrdlock(rtaccel_rwlock_t *l);
/* Blocks until abs on clock (CLOCK_REALTIME or CLOCK_MONOTONIC): -ETIMEDOUT.
 * -EINVAL for another clock or an abs with tv_nsec outside 0..999,999,999,
 * checked before the lock is looked at (as glibc does). */
RTACCEL_API int rtaccel_rwlock_clockrdlock(rtaccel_rwlock_t *l, clockid_t clock,
					   const struct timespec *abs);
RTACCEL_API int rtaccel_rwlock_timedrdlock(rtaccel_rwlock_t *l, const struct timespec *abs);

/* Write lock, FIFO among writers. -EDEADLK if the caller holds it. */
RTACCEL_API int rtaccel_rwlock_wrlock(rtaccel_rwlock_t *l);
/* -EBUSY unless the lock is free and no writer is queued. Never blocks. */
RTACCEL_API int rtaccel_rwlock_trywrlock(rtaccel_rwlock_t *l);
RTACCEL_API int rtaccel_rwlock_clockwrlock(rtaccel_rwlock_t *l, clockid_t clock,
					   const struct timespec *abs);
RTACCEL_API int rtaccel_rwlock_timedwrlock(rtaccel_rwlock_t *l, const struct timespec *abs);

/* Releases a read or a write hold of the caller. With boosting, restores the
 * caller's scheduling attributes exactly once it holds no boosting lock. */
RTACCEL_API int rtaccel_rwlock_unlock(rtaccel_rwlock_t *l);
RTACCEL_API int rtaccel_rwlock_rdunlock(rtaccel_rwlock_t *l);
RTACCEL_API int rtaccel_rwlock_wrunlock(rtaccel_rwlock_t *l);

/* --- FIFO mutex ---------------------------------------------------------- */

/* attr NULL means private. RTACCEL_LOCK_BOOST is not supported (-EINVAL). */
RTACCEL_API int rtaccel_mutex_init(rtaccel_mutex_t *m, const struct rtaccel_lock_attr *attr);
RTACCEL_API int rtaccel_mutex_destroy(rtaccel_mutex_t *m);
/* FIFO order of arrival. -EDEADLK if the caller holds it. */
RTACCEL_API int rtaccel_mutex_lock(rtaccel_mutex_t *m);
RTACCEL_API int rtaccel_mutex_trylock(rtaccel_mutex_t *m);
RTACCEL_API int rtaccel_mutex_clocklock(rtaccel_mutex_t *m, clockid_t clock,
					const struct timespec *abs);
RTACCEL_API int rtaccel_mutex_timedlock(rtaccel_mutex_t *m, const struct timespec *abs);
/* -EPERM if the caller does not hold it. */
RTACCEL_API int rtaccel_mutex_unlock(rtaccel_mutex_t *m);

/* --- priority inheritance ------------------------------------------------- */

/* Initialises a pthread mutex of the given type (PTHREAD_MUTEX_NORMAL,
 * _RECURSIVE, _ERRORCHECK) with PTHREAD_PRIO_INHERIT, process-shared if
 * pshared. Returns 0 or a negative errno value. */
RTACCEL_API int rtaccel_pi_mutex_init(pthread_mutex_t *m, int type, bool pshared);

/* --- progress mechanism --------------------------------------------------- */

/* Boosts that failed since start (no CAP_SYS_NICE or RLIMIT_RTPRIO too low).
 * The lock itself still works; only the progress guarantee is lost. */
RTACCEL_API uint64_t rtaccel_lock_boost_failures(void);

#ifdef __cplusplus
}
#endif

#endif /* RTACCEL_LOCK_H */
