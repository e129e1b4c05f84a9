/* Internals of librtaccel_shim.so: configuration, the real pthread functions,
 * and the tracer's hooks. */
#ifndef RTACCEL_SHIM_INTERNAL_H
#define RTACCEL_SHIM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "core/clock.h"

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

/* Tracer hooks (trace.c). created: a lock was initialised at call site pc.
 * acquired: op succeeded after waiting wait_ns (0 = uncontended) starting at
 * t0. released: the caller let go. */
void trace_created(const void *lock, enum trace_kind kind, const void *pc);
void trace_destroyed(const void *lock);
/* The program destroyed lock while it was held or waited for (glibc lets it). */
void trace_destroyed_held(const void *lock);
void trace_acquired(const void *lock, enum trace_kind kind, enum trace_op op, const void *pc,
		    uint64_t t0, uint64_t wait_ns);
void trace_released(const void *lock, enum trace_kind kind, enum trace_op op, const void *pc);
void trace_init(void);
void trace_write_report(void);
void trace_after_fork_child(void);

/* CUDA interposition (cuda.c). shim_in_cuda is 1 + the API the thread is in
 * (0: none); shim_cuda_lock_ops counts the locks it took inside CUDA calls. */
#define SHIM_CUDA_API_MAX 64
extern __thread SHIM_TLS int shim_in_cuda;
extern __thread SHIM_TLS uint32_t shim_cuda_lock_ops;
extern const char *const shim_cuda_api_names[];
void shim_cuda_init(void);
void shim_cuda_after_fork_child(void);
void shim_cuda_segments(uint64_t *count, uint64_t *total_ns, uint64_t *max_ns, bool *open);
/* Calls found() for every loaded object that carries a CUDA runtime of its
 * own (linked statically), whose CUDA calls the shim never sees. */
void shim_cuda_scan_static(void (*found)(const char *path, void *arg), void *arg);

/* The tracer's CUDA hooks (trace.c). */
void trace_cuda_call(int api, uint64_t t0, uint64_t dur_ns, uint32_t lock_ops, uintptr_t stream,
		     int error);
void trace_gpu_segment(uint64_t number, uint64_t start_ns, uint64_t dur_ns);

#endif
