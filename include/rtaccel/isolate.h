/* rtaccel isolate layer: one real-time gang at a time across all cores
 * (RT-Gang), and the bandwidth lock that makes the memory-bandwidth
 * regulator throttle best-effort work (BWLOCK++), on a stock kernel.
 *
 * A gang is a set of threads, in one process or several, with a priority
 * (1..99) and the memory bandwidth (MB/s) it lets best-effort work use beside
 * it (0: none). Gangs that share a priority form a virtual gang and run
 * together. All of them share one gang lock, a small region of shared memory:
 *
 *   rtaccel_gang_lock_t *lock;
 *   rtaccel_gang_lock_open("cell0", &lock);            // every process
 *   rtaccel_gang_join(lock, "perception", 60, 100);    // every thread of the gang
 *   for (;;) {
 *           wait_for_release();
 *           rtaccel_gang_job_begin();   // blocks while a higher gang runs;
 *           work();                     // preempts a lower one on every core
 *           rtaccel_gang_job_end();     // the last thread out lets others in
 *   }
 *
 * While threads of priority P are in a job, no thread of another priority runs
 * inside a job anywhere: lower-priority gangs wait at job_begin, blocked on a
 * futex, so their cores are free for best-effort work; a higher-priority gang
 * arriving stops every running thread of the lower one (a signal whose handler
 * parks the thread on a futex) and runs once all of them have stopped. The
 * parked threads resume where they were when the lock comes back to their
 * priority. Uncontended, begin and end are one compare-and-swap each and make
 * no system call.
 *
 * A member that dies inside a job is found by the threads that wait for the
 * lock (they look every 20 ms), removed, and reported on stderr; the others
 * go on.
 *
 * The layer schedules jobs, not threads: give the member threads SCHED_FIFO
 * priorities yourself (rtaccel's executors do) so that they also preempt
 * best-effort work. docs/isolate.md explains the design and its limits.
 */
#ifndef RTACCEL_ISOLATE_H
#define RTACCEL_ISOLATE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Each public header stands alone: whichever comes first defines this. */
#ifndef RTACCEL_API
#define RTACCEL_API __attribute__((visibility("default")))
#endif

#define RTACCEL_GANG_MAX_THREADS 256 /* member threads of one lock */
#define RTACCEL_GANG_MAX_GANGS 64    /* gangs of one lock */
#define RTACCEL_GANG_NAME_MAX 32     /* with the terminating NUL */
#define RTACCEL_GANG_PRIORITY_MAX 99

typedef struct rtaccel_gang_lock rtaccel_gang_lock_t;

/* Opens the gang lock NAME (a POSIX shared-memory object,
 * /dev/shm/rtaccel-gang.NAME), creating it if it does not exist. The lock
 * lives until rtaccel_gang_lock_unlink(). 0 or -errno (-EINVAL: bad name,
 * -EPROTO: an object of that name that is not a gang lock of this version). */
RTACCEL_API int rtaccel_gang_lock_open(const char *name, rtaccel_gang_lock_t **lock);

/* A gang lock in anonymous shared memory: shared with the children this
 * process forks afterwards, gone with the last of them. */
RTACCEL_API int rtaccel_gang_lock_create_private(rtaccel_gang_lock_t **lock);

/* Unmaps the lock. The calling process's threads must have left it. */
RTACCEL_API void rtaccel_gang_lock_close(rtaccel_gang_lock_t *lock);

RTACCEL_API int rtaccel_gang_lock_unlink(const char *name);

/* The calling thread joins gang GANG of LOCK. The first thread of a gang
 * fixes its priority and threshold; a later join with other values fails
 * with -EEXIST. -EBUSY: the thread is a member already, or the process
 * handles the park signal (RTACCEL_GANG_SIGNAL) itself; -ENOSPC: no room for
 * the thread or the gang. */
RTACCEL_API int rtaccel_gang_join(rtaccel_gang_lock_t *lock, const char *gang, int priority,
		      uint32_t threshold_mbps);

/* The calling thread leaves its gang (ending its job if it is in one). */
RTACCEL_API int rtaccel_gang_leave(void);

/* Enter and leave a job of the calling thread's gang. job_begin returns once
 * the gang may run and every thread of a lower gang has stopped. -EPERM: not
 * a member; -EDEADLK: begin while in a job, -EINVAL: end outside one. */
RTACCEL_API int rtaccel_gang_job_begin(void);
RTACCEL_API int rtaccel_gang_job_end(void);

/* Defers the calling thread's parking until the matching enable (nestable).
 * For code that holds a lock a thread of another gang may need, such as a
 * process-shared queue's mutex: parking there would stop that gang too.
 * Async-signal-safe, no system call unless a park was deferred. */
RTACCEL_API void rtaccel_gang_preempt_disable(void);
RTACCEL_API void rtaccel_gang_preempt_enable(void);

/* The signal that parks a member thread: SIGRTMAX - 2. */
RTACCEL_API int rtaccel_gang_signal(void);

struct rtaccel_gang_status {
	int running_priority;	   /* 0: no gang is in a job */
	uint32_t threshold_mbps;   /* best-effort bandwidth the running gang allows */
	uint32_t running;	   /* threads in a job of the running priority */
	uint32_t waiting;	   /* threads blocked in job_begin */
	uint32_t parked;	   /* threads preempted in the middle of a job */
	uint32_t members;	   /* threads that joined */
	uint64_t preemptions;	   /* gang preemptions since the lock was made */
	uint64_t recoveries;	   /* dead members removed */
};

/* A snapshot of the lock, without locking it (the hook the bandwidth
 * regulator polls). */
RTACCEL_API int rtaccel_gang_lock_status(const rtaccel_gang_lock_t *lock, struct rtaccel_gang_status *status);

/* What happened to the calling thread: for traces and measurements. */
struct rtaccel_gang_thread_stats {
	uint64_t jobs;
	uint64_t waits;		    /* jobs that blocked in job_begin */
	uint64_t parks;		    /* times the thread was preempted */
	uint64_t parked_ns;	    /* total time parked */
	uint64_t last_park_begin_ns; /* CLOCK_MONOTONIC */
	uint64_t last_park_end_ns;
};
RTACCEL_API int rtaccel_gang_self_stats(struct rtaccel_gang_thread_stats *stats);


/* ---- the bandwidth lock (BWLOCK++) ---------------------------------------
 *
 * While any holder holds it, the memory-bandwidth regulator (rtaccel-isolate
 * regulate) throttles best-effort work on the cores it regulates to the
 * smallest threshold among the holders (MB/s; 0: no best-effort memory
 * traffic at all). Unlike a mutex it excludes no one: every holder gets in at
 * once, and holding it only tightens the regulation.
 *
 *   rtaccel_bwlock_t *bw;
 *   rtaccel_bwlock_holder_t *h;
 *   rtaccel_bwlock_open("default", &bw);            // /dev/shm/rtaccel-bwlock.default
 *   rtaccel_bwlock_holder_init(bw, "detector", 100, 0, &h);   // once, slow
 *   rtaccel_bwlock_take(h);     // no system call
 *   critical_work();            // a GPU kernel, a copy, a CPU task
 *   rtaccel_bwlock_release(h);  // no system call
 *
 * A holder is one slot of the lock; take and release nest. A holder is used
 * by one thread at a time (different threads may take and release it if the
 * caller orders them, as the shim's GPU segments do). A process that dies
 * holding it is released by the regulator within one period.
 */
#define RTACCEL_BWLOCK_MAX_HOLDERS 256
#define RTACCEL_BWLOCK_UNLIMITED UINT32_MAX /* threshold when no one holds it */

typedef struct rtaccel_bwlock rtaccel_bwlock_t;
typedef struct rtaccel_bwlock_holder rtaccel_bwlock_holder_t;

/* Opens (creating it if needed) the bandwidth lock NAME: a POSIX shared-memory
 * object /dev/shm/rtaccel-bwlock.NAME. 0 or -errno (-EINVAL: bad name,
 * -EPROTO: not a bandwidth lock of this version). */
RTACCEL_API int rtaccel_bwlock_open(const char *name, rtaccel_bwlock_t **lock);
RTACCEL_API void rtaccel_bwlock_close(rtaccel_bwlock_t *lock);
RTACCEL_API int rtaccel_bwlock_unlink(const char *name);

/* The live status region of the regulator that enforces the bandwidth lock
 * NAME: /dev/shm/rtaccel-regulator.NAME, which `rtaccel isolate status`
 * reads and the regulator leaves behind for it when it ends. Removed by
 * whoever started the regulator, once it has. 0 or -errno (-EINVAL: bad
 * name, -ENOENT: none). */
#define RTACCEL_REGULATOR_STATUS_PREFIX "rtaccel-regulator"
RTACCEL_API int rtaccel_regulator_status_unlink(const char *name);

/* A holder of LOCK named LABEL (for status and traces) that allows
 * THRESHOLD_MBPS of best-effort bandwidth while it holds the lock. With
 * CEILING_PRIORITY in 1..99, take also raises the calling thread to
 * SCHED_FIFO CEILING_PRIORITY and release restores its policy: the paper's
 * priority ceiling, which costs two system calls per take. -ENOSPC: no free
 * slot. */
RTACCEL_API int rtaccel_bwlock_holder_init(rtaccel_bwlock_t *lock, const char *label,
					   uint32_t threshold_mbps, int ceiling_priority,
					   rtaccel_bwlock_holder_t **holder);
/* Releases the holder if it holds the lock and frees its slot. */
RTACCEL_API void rtaccel_bwlock_holder_destroy(rtaccel_bwlock_holder_t *holder);

/* Take and release (nestable). -EINVAL: release without take; -EPERM: the
 * ceiling could not be set (the lock is held all the same). */
RTACCEL_API int rtaccel_bwlock_take(rtaccel_bwlock_holder_t *holder);
RTACCEL_API int rtaccel_bwlock_release(rtaccel_bwlock_holder_t *holder);

struct rtaccel_bwlock_status {
	uint32_t threshold_mbps; /* in force: RTACCEL_BWLOCK_UNLIMITED when not held */
	uint32_t held;		 /* holders holding it */
	uint32_t holders;	 /* holders that exist */
	uint32_t reserved;
	uint64_t takes;		 /* takes since the lock was made (0 -> held) */
	uint64_t reaped;	 /* dead holders released */
};
RTACCEL_API int rtaccel_bwlock_get_status(const rtaccel_bwlock_t *lock,
				      struct rtaccel_bwlock_status *status);

struct rtaccel_bwlock_holder_info {
	char label[RTACCEL_GANG_NAME_MAX];
	int32_t pid;
	uint32_t threshold_mbps;
	uint32_t held;
	uint32_t reserved;
	uint64_t takes;
};
/* Copies up to MAX holders into OUT; returns how many there are. */
RTACCEL_API int rtaccel_bwlock_holders(const rtaccel_bwlock_t *lock,
				       struct rtaccel_bwlock_holder_info *out, int max);

/* Releases the holders whose process has exited; returns how many. The
 * regulator calls it every period. */
RTACCEL_API int rtaccel_bwlock_reap(rtaccel_bwlock_t *lock);

#ifdef __cplusplus
}
#endif

#endif
