/* librtaccel_shim.so: interposes glibc's pthread mutex, rwlock and condition
 * variable waits (LD_PRELOAD) to trace them and to fix their real-time
 * behaviour in programs that cannot be rebuilt.
 *
 * Modes (RTACCEL_SHIM=trace,pi,phase-fair,boost, set by `rtaccel shim`):
 * - pi: every mutex gets PTHREAD_PRIO_INHERIT. Mutexes initialised through
 *   pthread_mutex_init are converted in place (and marked so in their unused
 *   robust-list field); statically initialised ones are redirected, on first
 *   use, to a PI mutex whose address is kept in that field. glibc's PI
 *   mutexes report a few errors differently from its plain ones; for a
 *   converted mutex the shim gives the program the plain mutex's answers
 *   (pi_plain_result), so that the conversion is invisible.
 * - phase-fair: every process-private rwlock is redirected to an
 *   rtaccel_rwlock_t; recursive read locks, which POSIX allows, are counted
 *   per thread so they never queue behind a writer.
 * - boost: phase-fair plus the boosting progress mechanism.
 * - trace: see trace.c.
 *
 * The shim never calls malloc; redirected locks come from an mmap'd pool. */
#include "shim_internal.h"

#include "rtaccel/lock.h"
#include "rtaccel/shim.h"

#include <dlfcn.h>
#include <linux/futex.h>
#include <errno.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "the shim relies on glibc's x86_64 pthread_mutex_t/pthread_rwlock_t layout"
#endif
_Static_assert(sizeof(pthread_rwlock_t) == 56, "glibc rwlock layout");
_Static_assert(sizeof(pthread_mutex_t) == 40, "glibc mutex layout");

/* glibc's mutex kind bits (nptl/pthreadP.h). */
#define KIND_TYPE_MASK 0x3
#define KIND_ROBUST 0x10
#define KIND_PRIO_INHERIT 0x20
#define KIND_PRIO_PROTECT 0x40
#define KIND_PSHARED 0x80

struct shim_config shim_cfg;
struct shim_real shim_real;
__thread SHIM_TLS int shim_busy;

/* --- resolving glibc's functions ------------------------------------------- */

/* Exported aliases: calling them needs no dlsym, so the shim works even when
 * it is entered before its constructor ran. */
extern int __pthread_mutex_init(pthread_mutex_t *, const pthread_mutexattr_t *);
extern int __pthread_mutex_destroy(pthread_mutex_t *);
extern int __pthread_mutex_lock(pthread_mutex_t *);
extern int __pthread_mutex_trylock(pthread_mutex_t *);
extern int __pthread_mutex_unlock(pthread_mutex_t *);
extern int __pthread_rwlock_init(pthread_rwlock_t *, const pthread_rwlockattr_t *);
extern int __pthread_rwlock_destroy(pthread_rwlock_t *);
extern int __pthread_rwlock_rdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_tryrdlock(pthread_rwlock_t *);
extern int __pthread_rwlock_wrlock(pthread_rwlock_t *);
extern int __pthread_rwlock_trywrlock(pthread_rwlock_t *);
extern int __pthread_rwlock_unlock(pthread_rwlock_t *);

static void *next_symbol(const char *name, const char *version)
{
	void *p = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
	return p ? p : dlsym(RTLD_NEXT, name);
}

void shim_resolve(void)
{
	if (shim_real.cond_clockwait)
		return;
	shim_busy++;
	shim_real.mutex_init = __pthread_mutex_init;
	shim_real.mutex_destroy = __pthread_mutex_destroy;
	shim_real.mutex_lock = __pthread_mutex_lock;
	shim_real.mutex_trylock = __pthread_mutex_trylock;
	shim_real.mutex_unlock = __pthread_mutex_unlock;
	shim_real.rwlock_init = __pthread_rwlock_init;
	shim_real.rwlock_destroy = __pthread_rwlock_destroy;
	shim_real.rwlock_rdlock = __pthread_rwlock_rdlock;
	shim_real.rwlock_tryrdlock = __pthread_rwlock_tryrdlock;
	shim_real.rwlock_wrlock = __pthread_rwlock_wrlock;
	shim_real.rwlock_trywrlock = __pthread_rwlock_trywrlock;
	shim_real.rwlock_unlock = __pthread_rwlock_unlock;
	shim_real.mutex_timedlock = next_symbol("pthread_mutex_timedlock", NULL);
	shim_real.mutex_clocklock = next_symbol("pthread_mutex_clocklock", NULL);
	shim_real.rwlock_timedrdlock = next_symbol("pthread_rwlock_timedrdlock", NULL);
	shim_real.rwlock_clockrdlock = next_symbol("pthread_rwlock_clockrdlock", NULL);
	shim_real.rwlock_timedwrlock = next_symbol("pthread_rwlock_timedwrlock", NULL);
	shim_real.rwlock_clockwrlock = next_symbol("pthread_rwlock_clockwrlock", NULL);
	shim_real.cond_wait = next_symbol("pthread_cond_wait", "GLIBC_2.3.2");
	shim_real.cond_timedwait = next_symbol("pthread_cond_timedwait", "GLIBC_2.3.2");
	__atomic_store_n(&shim_real.cond_clockwait,
			 next_symbol("pthread_cond_clockwait", NULL), __ATOMIC_RELEASE);
	shim_busy--;
}

#define REAL(fn) (__builtin_expect(shim_real.fn != NULL, 1) ? 0 : (shim_resolve(), 0), shim_real.fn)

/* --- pool of redirected locks (no malloc) ----------------------------------- */

struct pool {
	size_t size;
	char *chunk;
	size_t used, capacity;
	void *free_list;
	int spin;
};
static struct pool mutex_pool = {sizeof(pthread_mutex_t), NULL, 0, 0, NULL, 0};
static struct pool rwlock_pool = {sizeof(rtaccel_rwlock_t), NULL, 0, 0, NULL, 0};

static void pool_lock(struct pool *p)
{
	while (__atomic_exchange_n(&p->spin, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}
static void pool_unlock(struct pool *p) { __atomic_store_n(&p->spin, 0, __ATOMIC_RELEASE); }

/* The pool held by a thread that cannot be cancelled meanwhile: one
 * cancelled asynchronously inside would leave the pool held for ever, and
 * every thread's next first use of a lock would spin (glibc's own locks
 * survive such a cancellation, so programs do it). Asynchronous
 * cancellation is glibc's signal SIGCANCEL (__SIGRTMIN): blocked here, it
 * acts once the pool is free. pthread_setcancelstate would be the portable
 * way, but glibc 2.36 still acts on a cancellation that arrives while it
 * disables it; and its sigprocmask will not block SIGCANCEL, so the mask is
 * set with the system call (on the pool's slow paths only: a lock's first
 * use and the destruction of a redirected one). */
#define SIGCANCEL_BIT (1ull << (32 - 1))

static uint64_t pool_enter(struct pool *p)
{
	uint64_t block = SIGCANCEL_BIT, old = 0;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &block, &old, sizeof(block));
	pool_lock(p);
	return old;
}
static void pool_leave(struct pool *p, uint64_t old_mask)
{
	pool_unlock(p);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old_mask, NULL, sizeof(old_mask));
}

static void *pool_alloc(struct pool *p)
{
	void *obj = NULL;
	uint64_t mask = pool_enter(p);
	if (p->free_list) {
		obj = p->free_list;
		p->free_list = *(void **)obj;
	} else {
		if (p->used + p->size > p->capacity) {
			size_t cap = 1 << 20;
			void *c = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				       -1, 0);
			if (c == MAP_FAILED) {
				pool_leave(p, mask);
				return NULL;
			}
			p->chunk = c;
			p->used = 0;
			p->capacity = cap;
		}
		obj = p->chunk + p->used;
		p->used += (p->size + 63) & ~(size_t)63;
	}
	pool_leave(p, mask);
	memset(obj, 0, p->size);
	return obj;
}

static void pool_free(struct pool *p, void *obj)
{
	uint64_t mask = pool_enter(p);
	*(void **)obj = p->free_list;
	p->free_list = obj;
	pool_leave(p, mask);
}

/* --- mutexes ----------------------------------------------------------------- */

/* attr with PTHREAD_PRIO_INHERIT where it asks for no protocol; true if
 * that changed it. */
static bool mutex_attr_with_pi(const pthread_mutexattr_t *attr, pthread_mutexattr_t *out)
{
	int protocol = PTHREAD_PRIO_NONE;
	if (attr) {
		*out = *attr;
		pthread_mutexattr_getprotocol(out, &protocol);
	} else {
		pthread_mutexattr_init(out);
	}
	if (protocol != PTHREAD_PRIO_NONE)
		return false;
	pthread_mutexattr_setprotocol(out, PTHREAD_PRIO_INHERIT);
	return true;
}

/* Marks a mutex that pthread_mutex_init converted to PI in place. Robust
 * mutexes use the field themselves and are not marked. */
#define PI_CONVERTED_MARK ((void *)0x72746163636c7069ull) /* "rtaccpi" */

static bool pi_converted(pthread_mutex_t *m, pthread_mutex_t *target)
{
	return target != m || m->__data.__list.__next == PI_CONVERTED_MARK;
}

/* An unchecked (normal, default) plain mutex unlocked by a thread that does
 * not hold it: glibc releases it, whoever holds it, and counts one user less
 * (which a later destroy notices: EBUSY); unlocked already, it says 0 all
 * the same. A PI mutex can be released that way only while its futex word
 * is its owner's TID alone, as glibc's own unlock does it, from user space.
 * Once a waiter has queued, the kernel keeps the owner and hands the lock on
 * at the owner's FUTEX_UNLOCK_PI only, so the answer is glibc's PI one,
 * EPERM: never success without the release. */
static int pi_release_unowned(pthread_mutex_t *t)
{
	int word = __atomic_load_n(&t->__data.__lock, __ATOMIC_RELAXED);
	for (;;) {
		if ((unsigned)word & (FUTEX_WAITERS | FUTEX_OWNER_DIED))
			return EPERM;
		int owner = t->__data.__owner;
		t->__data.__owner = 0;
		__atomic_fetch_sub(&t->__data.__nusers, 1, __ATOMIC_RELAXED);
		if (word == 0 || __atomic_compare_exchange_n(&t->__data.__lock, &word, 0, false,
							     __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return 0;
		/* Taken, released or waited for meanwhile: look again. */
		__atomic_fetch_add(&t->__data.__nusers, 1, __ATOMIC_RELAXED);
		t->__data.__owner = owner;
	}
}

/* What glibc's plain mutex would have answered where its PI mutex answered r
 * (slow path only: r is an error). Plain mutexes never say EDEADLK to a
 * try-lock; an unchecked one unlocked by a thread that does not hold it is
 * released (pi_release_unowned). */
static int pi_plain_result(pthread_mutex_t *m, pthread_mutex_t *target, int op, int r)
{
	if (!shim_cfg.pi || !pi_converted(m, target))
		return r;
	int type = __atomic_load_n(&target->__data.__kind, __ATOMIC_RELAXED) & KIND_TYPE_MASK;
	bool unchecked = type == PTHREAD_MUTEX_NORMAL || type == PTHREAD_MUTEX_ADAPTIVE_NP;
	if (op == OP_MUTEX_TRYLOCK && r == EDEADLK)
		return EBUSY;
	if (op == OP_MUTEX_UNLOCK && r == EPERM && unchecked)
		return pi_release_unowned(target);
	return r;
}

/* The mutex to operate on in pi mode: m itself if it has a protocol already,
 * else the PI mutex it is redirected to. */
static pthread_mutex_t *pi_target(pthread_mutex_t *m, bool for_unlock)
{
	int kind = __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED);
	if (!shim_cfg.pi || (kind & (KIND_PRIO_INHERIT | KIND_PRIO_PROTECT | KIND_PSHARED)))
		return m;
	pthread_mutex_t **slot = (pthread_mutex_t **)&m->__data.__list.__prev;
	pthread_mutex_t *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (p)
		return p;
	/* Held from before pi mode was on (early constructors): leave it be. */
	if (__atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 0 || for_unlock)
		return m;
	p = pool_alloc(&mutex_pool);
	if (!p)
		return m;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	int type = kind & KIND_TYPE_MASK;
	pthread_mutexattr_settype(&a, type == PTHREAD_MUTEX_ADAPTIVE_NP ? PTHREAD_MUTEX_NORMAL : type);
	pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	REAL(mutex_init)(p, &a);
	pthread_mutexattr_destroy(&a);
	pthread_mutex_t *expected = NULL;
	if (!__atomic_compare_exchange_n(slot, &expected, p, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		pool_free(&mutex_pool, p);
		p = expected;
	}
	return p;
}

SHIM_EXPORT int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
	int r;
	if (shim_cfg.pi) {
		pthread_mutexattr_t a;
		bool converted = mutex_attr_with_pi(attr, &a);
		r = REAL(mutex_init)(m, &a);
		int robust = 0;
		pthread_mutexattr_getrobust(&a, &robust);
		if (r == 0 && converted && robust == PTHREAD_MUTEX_STALLED)
			m->__data.__list.__next = PI_CONVERTED_MARK;
		pthread_mutexattr_destroy(&a);
	} else {
		r = REAL(mutex_init)(m, attr);
	}
	if (r == 0 && shim_cfg.trace && !shim_busy)
		trace_created(m, KIND_MUTEX, __builtin_return_address(0));
	return r;
}

SHIM_EXPORT int pthread_mutex_destroy(pthread_mutex_t *m)
{
	pthread_mutex_t *t = pi_target(m, true);
	int r = REAL(mutex_destroy)(t);
	if (r == 0 && t != m) {
		m->__data.__list.__prev = NULL;
		pool_free(&mutex_pool, t);
	}
	if (r == 0 && shim_cfg.trace)
		trace_destroyed(m);
	return r;
}

/* Acquires through try first, so the trace knows whether it had to wait.
 * args_ok false (arguments glibc refuses before it looks at the lock) goes
 * straight to the real call, which gives glibc's error. */
#define TRACED_ACQUIRE_CHECKED(kind, op, lockobj, args_ok, try_call, wait_call)         \
	do {                                                                            \
		if (!shim_cfg.trace || shim_busy || !(args_ok))                         \
			return wait_call;                                               \
		const void *pc_ = __builtin_return_address(0);                          \
		uint64_t t0_ = rtaccel_monotonic_ns();                                  \
		int r_ = try_call;                                                      \
		bool contended_ = r_ == EBUSY;                                          \
		if (contended_)                                                         \
			r_ = wait_call;                                                 \
		if (r_ == 0)                                                            \
			trace_acquired(lockobj, kind, op, pc_, t0_,                     \
				       contended_ ? rtaccel_monotonic_ns() - t0_ + 1 : 0); \
		return r_;                                                              \
	} while (0)
#define TRACED_ACQUIRE(kind, op, lockobj, try_call, wait_call) \
	TRACED_ACQUIRE_CHECKED(kind, op, lockobj, true, try_call, wait_call)

/* The clocks glibc's timed lock functions accept. */
static inline bool clock_ok(clockid_t clock)
{
	return clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC;
}
/* glibc's rwlocks check the deadline before they look at the lock. */
static inline bool rw_deadline_ok(clockid_t clock, const struct timespec *abs)
{
	return clock_ok(clock) && abs && abs->tv_nsec >= 0 && abs->tv_nsec < 1000000000L;
}

SHIM_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	pthread_mutex_t *t = pi_target(m, false);
	TRACED_ACQUIRE(KIND_MUTEX, OP_MUTEX_LOCK, m, REAL(mutex_trylock)(t), REAL(mutex_lock)(t));
}

SHIM_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
	pthread_mutex_t *t = pi_target(m, false);
	int r = REAL(mutex_trylock)(t);
	if (__builtin_expect(r == EDEADLK, 0))
		r = pi_plain_result(m, t, OP_MUTEX_TRYLOCK, r);
	if (r == 0 && shim_cfg.trace && !shim_busy)
		trace_acquired(m, KIND_MUTEX, OP_MUTEX_TRYLOCK, __builtin_return_address(0), 0, 0);
	return r;
}

SHIM_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs)
{
	pthread_mutex_t *t = pi_target(m, false);
	TRACED_ACQUIRE(KIND_MUTEX, OP_MUTEX_TIMEDLOCK, m, REAL(mutex_trylock)(t),
		       REAL(mutex_timedlock)(t, abs));
}

SHIM_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock,
					const struct timespec *abs)
{
	pthread_mutex_t *t = pi_target(m, false);
	TRACED_ACQUIRE_CHECKED(KIND_MUTEX, OP_MUTEX_TIMEDLOCK, m, clock_ok(clock),
			       REAL(mutex_trylock)(t), REAL(mutex_clocklock)(t, clock, abs));
}

SHIM_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	pthread_mutex_t *t = pi_target(m, true);
	int r = REAL(mutex_unlock)(t);
	if (__builtin_expect(r == EPERM, 0))
		r = pi_plain_result(m, t, OP_MUTEX_UNLOCK, r);
	if (r == 0 && shim_cfg.trace && !shim_busy)
		trace_released(m, KIND_MUTEX, OP_MUTEX_UNLOCK, __builtin_return_address(0));
	return r;
}

/* --- condition variables ------------------------------------------------------ */

#define COND_WAIT(call)                                                                   \
	do {                                                                            \
		pthread_mutex_t *t = pi_target(m, true);                                \
		bool traced = shim_cfg.trace && !shim_busy;                             \
		const void *pc = __builtin_return_address(0);                           \
		if (traced)                                                             \
			trace_released(m, KIND_MUTEX, OP_COND_WAIT, pc);                \
		int r = call;                                                           \
		if (traced)                                                             \
			trace_acquired(m, KIND_MUTEX, OP_COND_WAIT, pc, 0, 0);          \
		return r;                                                               \
	} while (0)

SHIM_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	COND_WAIT(REAL(cond_wait)(c, t));
}

SHIM_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
				       const struct timespec *abs)
{
	COND_WAIT(REAL(cond_timedwait)(c, t, abs));
}

SHIM_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
				       const struct timespec *abs)
{
	COND_WAIT(REAL(cond_clockwait)(c, t, clock, abs));
}

/* --- reader-writer locks -------------------------------------------------------- */

/* One entry point per POSIX function, each with glibc's exact signature: the
 * timed and clock variants below are alike in shape on purpose, and what
 * they share is in TRACED_ACQUIRE(_CHECKED) and pf_read. */

/* Read holds of this thread on phase-fair locks, for recursion. */
#define READ_HOLDS 64
struct read_hold {
	rtaccel_rwlock_t *lock;
	uint32_t depth;
};
static __thread SHIM_TLS struct read_hold read_holds[READ_HOLDS];

static struct read_hold *find_read_hold(rtaccel_rwlock_t *l)
{
	for (int i = 0; i < READ_HOLDS; i++)
		if (read_holds[i].lock == l)
			return &read_holds[i];
	return NULL;
}

/* Where a redirected rwlock keeps its phase-fair lock, or NULL if rw stays
 * glibc's (mode off, or process-shared). */
static rtaccel_rwlock_t **pf_slot(pthread_rwlock_t *rw)
{
	if (!shim_cfg.phase_fair || __atomic_load_n(&rw->__data.__shared, __ATOMIC_RELAXED))
		return NULL;
	return (rtaccel_rwlock_t **)&rw->__data.__pad2;
}

static rtaccel_rwlock_t *pf_target(pthread_rwlock_t *rw)
{
	rtaccel_rwlock_t **slot = pf_slot(rw);
	if (!slot)
		return NULL;
	rtaccel_rwlock_t *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (p)
		return p;
	p = pool_alloc(&rwlock_pool);
	if (!p)
		return NULL;
	struct rtaccel_lock_attr a = {shim_cfg.boost ? RTACCEL_LOCK_BOOST : 0, shim_cfg.ceiling};
	rtaccel_rwlock_init(p, &a);
	rtaccel_rwlock_t *expected = NULL;
	if (!__atomic_compare_exchange_n(slot, &expected, p, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		pool_free(&rwlock_pool, p);
		p = expected;
	}
	return p;
}

SHIM_EXPORT int pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *attr)
{
	int pshared = PTHREAD_PROCESS_PRIVATE;
	if (attr)
		pthread_rwlockattr_getpshared(attr, &pshared);
	int r = 0;
	if (shim_cfg.phase_fair && pshared == PTHREAD_PROCESS_PRIVATE) {
		memset(rw, 0, sizeof(*rw));
		r = pf_target(rw) ? 0 : ENOMEM;
	} else {
		r = REAL(rwlock_init)(rw, attr);
	}
	if (r == 0 && shim_cfg.trace && !shim_busy)
		trace_created(rw, KIND_RWLOCK, __builtin_return_address(0));
	return r;
}

SHIM_EXPORT int pthread_rwlock_destroy(pthread_rwlock_t *rw)
{
	rtaccel_rwlock_t **slot = pf_slot(rw);
	rtaccel_rwlock_t *p = slot ? __atomic_load_n(slot, __ATOMIC_ACQUIRE) : NULL;
	int r;
	if (!slot) {
		r = REAL(rwlock_destroy)(rw);
	} else if (!p) {
		r = 0; /* never used */
	} else {
		/* glibc destroys a lock that is still held or waited for and says
		 * 0 (POSIX leaves it undefined), and programs rely on it: one whose
		 * thread exited holding a read lock, say. So does the shim. Such a
		 * phase-fair lock is forgotten, not reused: a thread may still hold
		 * or wait on it. The trace reports the misuse. */
		bool held = rtaccel_rwlock_destroy(p) < 0;
		*slot = NULL;
		if (!held)
			pool_free(&rwlock_pool, p);
		if (held && shim_cfg.trace)
			trace_destroyed_held(rw);
		r = 0;
	}
	if (r == 0 && shim_cfg.trace)
		trace_destroyed(rw);
	return r;
}

/* Read lock on a phase-fair lock, counting recursion per thread. */
static int pf_read(rtaccel_rwlock_t *p, int (*acquire)(rtaccel_rwlock_t *, clockid_t,
						       const struct timespec *),
		   clockid_t clock, const struct timespec *abs)
{
	struct read_hold *h = find_read_hold(p);
	if (h) {
		h->depth++;
		return 0;
	}
	int r = -acquire(p, clock, abs);
	if (r == 0 && (h = find_read_hold(NULL)) != NULL) {
		h->lock = p;
		h->depth = 1;
	}
	return r;
}

static int pf_rd_block(rtaccel_rwlock_t *p, clockid_t c, const struct timespec *a)
{
	(void)c, (void)a;
	return rtaccel_rwlock_rdlock(p);
}
static int pf_rd_try(rtaccel_rwlock_t *p, clockid_t c, const struct timespec *a)
{
	(void)c, (void)a;
	return rtaccel_rwlock_tryrdlock(p);
}
static int pf_rd_timed(rtaccel_rwlock_t *p, clockid_t c, const struct timespec *a)
{
	return rtaccel_rwlock_clockrdlock(p, c, a);
}

SHIM_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *rw)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	if (p)
		TRACED_ACQUIRE(KIND_RWLOCK, OP_RDLOCK, rw, pf_read(p, pf_rd_try, 0, NULL),
			       pf_read(p, pf_rd_block, 0, NULL));
	TRACED_ACQUIRE(KIND_RWLOCK, OP_RDLOCK, rw, REAL(rwlock_tryrdlock)(rw),
		       REAL(rwlock_rdlock)(rw));
}

SHIM_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *rw)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	int r = p ? pf_read(p, pf_rd_try, 0, NULL) : REAL(rwlock_tryrdlock)(rw);
	if (r == 0 && shim_cfg.trace && !shim_busy)
		trace_acquired(rw, KIND_RWLOCK, OP_TRYRDLOCK, __builtin_return_address(0), 0, 0);
	return r;
}

SHIM_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *rw, const struct timespec *abs)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	bool ok = rw_deadline_ok(CLOCK_REALTIME, abs);
	if (p)
		TRACED_ACQUIRE_CHECKED(KIND_RWLOCK, OP_TIMEDRDLOCK, rw, ok,
				       pf_read(p, pf_rd_try, 0, NULL),
				       pf_read(p, pf_rd_timed, CLOCK_REALTIME, abs));
	TRACED_ACQUIRE_CHECKED(KIND_RWLOCK, OP_TIMEDRDLOCK, rw, ok,
			       REAL(rwlock_tryrdlock)(rw),
			       REAL(rwlock_timedrdlock)(rw, abs));
}

SHIM_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *rw, clockid_t clock,
					   const struct timespec *abs)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	bool ok = rw_deadline_ok(clock, abs);
	if (p)
		TRACED_ACQUIRE_CHECKED(KIND_RWLOCK, OP_TIMEDRDLOCK, rw, ok,
				       pf_read(p, pf_rd_try, 0, NULL),
				       pf_read(p, pf_rd_timed, clock, abs));
	TRACED_ACQUIRE_CHECKED(KIND_RWLOCK, OP_TIMEDRDLOCK, rw, ok,
			       REAL(rwlock_tryrdlock)(rw),
			       REAL(rwlock_clockrdlock)(rw, clock, abs));
}

SHIM_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *rw)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	if (p)
		TRACED_ACQUIRE(KIND_RWLOCK, OP_WRLOCK, rw, -rtaccel_rwlock_trywrlock(p),
			       -rtaccel_rwlock_wrlock(p));
	TRACED_ACQUIRE(KIND_RWLOCK, OP_WRLOCK, rw, REAL(rwlock_trywrlock)(rw),
		       REAL(rwlock_wrlock)(rw));
}

SHIM_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *rw)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	int r = p ? -rtaccel_rwlock_trywrlock(p) : REAL(rwlock_trywrlock)(rw);
	if (r == 0 && shim_cfg.trace && !shim_busy)
		trace_acquired(rw, KIND_RWLOCK, OP_TRYWRLOCK, __builtin_return_address(0), 0, 0);
	return r;
}

SHIM_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *rw, const struct timespec *abs)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	bool ok = rw_deadline_ok(CLOCK_REALTIME, abs);
	if (p)
		TRACED_ACQUIRE_CHECKED(KIND_RWLOCK, OP_TIMEDWRLOCK, rw, ok,
				       -rtaccel_rwlock_trywrlock(p),
				       -rtaccel_rwlock_timedwrlock(p, abs));
	TRACED_ACQUIRE_CHECKED(KIND_RWLOCK, OP_TIMEDWRLOCK, rw, ok,
			       REAL(rwlock_trywrlock)(rw),
			       REAL(rwlock_timedwrlock)(rw, abs));
}

SHIM_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *rw, clockid_t clock,
					   const struct timespec *abs)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	bool ok = rw_deadline_ok(clock, abs);
	if (p)
		TRACED_ACQUIRE_CHECKED(KIND_RWLOCK, OP_TIMEDWRLOCK, rw, ok,
				       -rtaccel_rwlock_trywrlock(p),
				       -rtaccel_rwlock_clockwrlock(p, clock, abs));
	TRACED_ACQUIRE_CHECKED(KIND_RWLOCK, OP_TIMEDWRLOCK, rw, ok,
			       REAL(rwlock_trywrlock)(rw),
			       REAL(rwlock_clockwrlock)(rw, clock, abs));
}

SHIM_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
	rtaccel_rwlock_t *p = pf_target(rw);
	int r;
	if (!p) {
		r = REAL(rwlock_unlock)(rw);
	} else if ((r = -rtaccel_rwlock_wrunlock(p)) != EPERM) {
		/* the caller held it for writing (EPERM: it does not) */
	} else {
		struct read_hold *h = find_read_hold(p);
		if (!h) {
			r = -rtaccel_rwlock_rdunlock(p); /* untracked: more than READ_HOLDS locks */
		} else {
			r = 0;
			if (--h->depth == 0) {
				h->lock = NULL;
				r = -rtaccel_rwlock_rdunlock(p);
			}
		}
	}
	if (r == 0 && shim_cfg.trace && !shim_busy)
		trace_released(rw, KIND_RWLOCK, OP_RWLOCK_UNLOCK, __builtin_return_address(0));
	return r;
}

/* --- set-up ------------------------------------------------------------------- */

static void before_fork(void)
{
	pool_lock(&mutex_pool);
	pool_lock(&rwlock_pool);
}
static void after_fork_parent(void)
{
	pool_unlock(&rwlock_pool);
	pool_unlock(&mutex_pool);
}
static void after_fork_child(void)
{
	after_fork_parent();
	shim_cuda_after_fork_child();
	if (shim_cfg.trace)
		trace_after_fork_child();
}

static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

static void warn_static_runtime(const char *path, void *arg)
{
	(void)arg;
	fprintf(stderr, "rtaccel shim: %s has the CUDA runtime linked in statically: its CUDA calls "
		"are not seen (GPU segments and CUDA tracing miss them; build with nvcc -cudart "
		"shared)\n", path);
}

__attribute__((constructor)) static void shim_start(void)
{
	shim_resolve();
	const char *modes = getenv("RTACCEL_SHIM");
	if (!modes)
		modes = "";
	shim_cfg.boost = has_word(modes, "boost");
	shim_cfg.phase_fair = shim_cfg.boost || has_word(modes, "phase-fair");
	shim_cfg.pi = has_word(modes, "pi");
	const char *ceiling = getenv("RTACCEL_SHIM_CEILING");
	shim_cfg.ceiling = ceiling ? atoi(ceiling) : 0;
	if (shim_cfg.ceiling < 0 || shim_cfg.ceiling > 99)
		shim_cfg.ceiling = 0;
	const char *dir = getenv("RTACCEL_SHIM_OUT");
	strncpy(shim_cfg.out_dir, dir && *dir ? dir : ".", sizeof(shim_cfg.out_dir) - 1);
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	if (has_word(modes, "trace")) {
		trace_init();
		shim_cfg.trace = true;
	}
	shim_cuda_init();
	if (shim_cfg.trace || getenv("RTACCEL_SHIM_GPU_HOOKS"))
		shim_cuda_scan_static(warn_static_runtime, NULL);
}

SHIM_EXPORT int rtaccel_shim_write_report(void)
{
	if (!shim_cfg.trace)
		return -1;
	shim_cfg.trace = false;
	trace_write_report();
	return 0;
}

__attribute__((destructor)) static void shim_stop(void)
{
	rtaccel_shim_write_report();
}
