/* Internals of librtaccel_shim.so: configuration, the real pthread functions,
 * and the tracer's hooks. */
#ifndef RTACCEL_SHIM_INTERNAL_H
#define RTACCEL_SHIM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define SHIM_TLS __attribute__((tls_model("initial-exec")))
#define SHIM_EXPORT __attribute__((visibility("default")))

struct shim_config {
	bool trace;
	bool pi;
	bool phase_fair;
	bool boost;
	int ceiling;
	char out_dir[512];
};
extern struct shim_config shim_cfg;

/* The functions the shim replaces, as glibc defines them. */
struct shim_real {
	int (*mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
	int (*mutex_destroy)(pthread_mutex_t *);
	int (*mutex_lock)(pthread_mutex_t *);
	int (*mutex_trylock)(pthread_mutex_t *);
	int (*mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
	int (*mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
	int (*mutex_unlock)(pthread_mutex_t *);
	int (*rwlock_init)(pthread_rwlock_t *, const pthread_rwlockattr_t *);
	int (*rwlock_destroy)(pthread_rwlock_t *);
	int (*rwlock_rdlock)(pthread_rwlock_t *);
	int (*rwlock_tryrdlock)(pthread_rwlock_t *);
	int (*rwlock_timedrdlock)(pthread_rwlock_t *, const struct timespec *);
	int (*rwlock_clockrdlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*rwlock_wrlock)(pthread_rwlock_t *);
	int (*rwlock_trywrlock)(pthread_rwlock_t *);
	int (*rwlock_timedwrlock)(pthread_rwlock_t *, const struct timespec *);
	int (*rwlock_clockwrlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*rwlock_unlock)(pthread_rwlock_t *);
	int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
	int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	int (*cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
			      const struct timespec *);
};
extern struct shim_real shim_real;
void shim_resolve(void);

/* Set while the shim itself runs on this thread: calls that come back into the
 * interposed functions (from backtrace, dladdr, the exit report) go straight
 * to glibc and are not traced. */
extern __thread SHIM_TLS int shim_busy;

enum trace_kind { KIND_MUTEX = 0, KIND_RWLOCK = 1 };
enum trace_op {
	OP_MUTEX_LOCK, OP_MUTEX_TRYLOCK, OP_MUTEX_TIMEDLOCK, OP_MUTEX_UNLOCK,
	OP_RDLOCK, OP_TRYRDLOCK, OP_TIMEDRDLOCK, OP_WRLOCK, OP_TRYWRLOCK, OP_TIMEDWRLOCK,
	OP_RWLOCK_UNLOCK, OP_COND_WAIT, OP_COUNT
};

static inline uint64_t shim_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Tracer hooks (trace.c). created: a lock was initialised at call site pc.
 * acquired: op succeeded after waiting wait_ns (0 = uncontended) starting at
 * t0. released: the caller let go. */
void trace_created(const void *lock, enum trace_kind kind, const void *pc);
void trace_destroyed(const void *lock);
void trace_acquired(const void *lock, enum trace_kind kind, enum trace_op op, const void *pc,
		    uint64_t t0, uint64_t wait_ns);
void trace_released(const void *lock, enum trace_kind kind, enum trace_op op, const void *pc);
void trace_init(void);
void trace_write_report(void);
void trace_after_fork_child(void);

#endif
