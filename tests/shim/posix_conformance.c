/* POSIX conformance of the interposed functions: pthread_mutex_*,
 * pthread_rwlock_* and pthread_cond_*, for every mutex type, static and
 * initialised, private and process-shared.
 *
 * Two kinds of result:
 * - what POSIX requires (EXPECT): checked here, in every mode;
 * - what POSIX leaves to the implementation (RECORD): printed as "key value"
 *   with every required result too. conformance.sh runs the program without
 *   the interposer and under one mode and compares the two listings, so
 *   that the interposer changes nothing glibc does, except where docs/locks.md
 *   names a departure of that mode.
 *
 * Exit 0 pass, 1 fail. A watchdog turns a hang into a failure. */
#include "../lock/test_util.h"

#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/wait.h>

static int failures;

static void record(const char *key, long long value)
{
	printf("%s %lld\n", key, value);
}

#define KEY(buf, ...) (snprintf((buf), sizeof(buf), __VA_ARGS__), (buf))

static void expect(const char *key, long long got, long long want, int line)
{
	record(key, got);
	if (got != want) {
		fprintf(stderr, "posix_conformance.c:%d: %s: got %lld, POSIX requires %lld\n",
			line, key, got, want);
		failures++;
	}
}
#define EXPECT(key, got, want) expect((key), (got), (want), __LINE__)

/* Runs fn(arg) in a new thread and returns what it returned. */
static long in_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	void *ret;
	CHECK_EQ(pthread_create(&t, NULL, fn, arg), 0);
	CHECK_EQ(pthread_join(t, &ret), 0);
	return (long)(intptr_t)ret;
}

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static const struct timespec past = {1, 0};
static const struct timespec bad_nsec = {1, 1000000000L};
#define SHORT_NS (10 * 1000000ull)
/* Not a clock the timed functions accept. */
#define BAD_CLOCK CLOCK_PROCESS_CPUTIME_ID

/* --- mutexes ----------------------------------------------------------------- */

struct mutex_kind {
	const char *name;
	int type;      /* PTHREAD_MUTEX_*, -1 for a static initialiser */
	bool pshared;
	int protocol;  /* the program's own choice */
	bool robust;
};

static const struct mutex_kind mutex_kinds[] = {
	{"static", -1, false, PTHREAD_PRIO_NONE, false},
	{"static_recursive", -2, false, PTHREAD_PRIO_NONE, false},
	{"static_errorcheck", -3, false, PTHREAD_PRIO_NONE, false},
	{"null_attr", -4, false, PTHREAD_PRIO_NONE, false},
	{"default", PTHREAD_MUTEX_DEFAULT, false, PTHREAD_PRIO_NONE, false},
	{"normal", PTHREAD_MUTEX_NORMAL, false, PTHREAD_PRIO_NONE, false},
	{"errorcheck", PTHREAD_MUTEX_ERRORCHECK, false, PTHREAD_PRIO_NONE, false},
	{"recursive", PTHREAD_MUTEX_RECURSIVE, false, PTHREAD_PRIO_NONE, false},
	{"normal_pshared", PTHREAD_MUTEX_NORMAL, true, PTHREAD_PRIO_NONE, false},
	{"errorcheck_pshared", PTHREAD_MUTEX_ERRORCHECK, true, PTHREAD_PRIO_NONE, false},
	{"recursive_pshared", PTHREAD_MUTEX_RECURSIVE, true, PTHREAD_PRIO_NONE, false},
	{"normal_pi", PTHREAD_MUTEX_NORMAL, false, PTHREAD_PRIO_INHERIT, false},
	{"errorcheck_pi", PTHREAD_MUTEX_ERRORCHECK, false, PTHREAD_PRIO_INHERIT, false},
	{"recursive_pi", PTHREAD_MUTEX_RECURSIVE, false, PTHREAD_PRIO_INHERIT, false},
	{"errorcheck_robust", PTHREAD_MUTEX_ERRORCHECK, false, PTHREAD_PRIO_NONE, true},
};

static bool kind_recursive(const struct mutex_kind *k)
{
	return k->type == PTHREAD_MUTEX_RECURSIVE || k->type == -2;
}
static bool kind_errorcheck(const struct mutex_kind *k)
{
	return k->type == PTHREAD_MUTEX_ERRORCHECK || k->type == -3;
}
/* Types for which POSIX defines relocking and unlocking errors. */
static bool kind_checked(const struct mutex_kind *k)
{
	return kind_recursive(k) || kind_errorcheck(k) || k->robust;
}

/* Mutexes live in shared memory so that process-shared ones work across
 * fork; each case gets a fresh one. */
static pthread_mutex_t *mutex_new(const struct mutex_kind *k)
{
	static const pthread_mutex_t initialisers[] = {
		PTHREAD_MUTEX_INITIALIZER,
		PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP,
		PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP,
	};
	pthread_mutex_t *m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	if (k->type <= -1 && k->type >= -3) {
		*m = initialisers[-k->type - 1];
		return m;
	}
	if (k->type == -4) {
		CHECK_EQ(pthread_mutex_init(m, NULL), 0);
		return m;
	}
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	CHECK_EQ(pthread_mutexattr_settype(&a, k->type), 0);
	CHECK_EQ(pthread_mutexattr_setprotocol(&a, k->protocol), 0);
	if (k->pshared)
		CHECK_EQ(pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED), 0);
	if (k->robust)
		CHECK_EQ(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST), 0);
	CHECK_EQ(pthread_mutex_init(m, &a), 0);
	pthread_mutexattr_destroy(&a);
	return m;
}

static void mutex_free(pthread_mutex_t *m) { munmap(m, sizeof(*m)); }

/* What another thread sees of a mutex held by the caller. */
struct other_op {
	pthread_mutex_t *m;
	int op;
	clockid_t clock;
	const struct timespec *abs;
	uint64_t rel_ns;
};
enum { OP_TRYLOCK, OP_TIMEDLOCK, OP_CLOCKLOCK, OP_UNLOCK, OP_LOCK_UNLOCK };

static void *other_mutex_op(void *arg)
{
	struct other_op *o = arg;
	struct timespec dl;
	const struct timespec *abs = o->abs;
	if (!abs && o->rel_ns) {
		dl = deadline_in(o->clock == BAD_CLOCK ? CLOCK_MONOTONIC : o->clock, o->rel_ns);
		abs = &dl;
	}
	int r = 0;
	switch (o->op) {
	case OP_TRYLOCK:
		r = pthread_mutex_trylock(o->m);
		break;
	case OP_TIMEDLOCK:
		r = pthread_mutex_timedlock(o->m, abs);
		break;
	case OP_CLOCKLOCK:
		r = pthread_mutex_clocklock(o->m, o->clock, abs);
		/* A timed-out wait returns no earlier than its deadline. */
		if (r == ETIMEDOUT && o->clock != BAD_CLOCK && now_ns(o->clock) < ts_ns(abs))
			r = -1;
		break;
	case OP_UNLOCK:
		r = pthread_mutex_unlock(o->m);
		break;
	case OP_LOCK_UNLOCK:
		r = pthread_mutex_lock(o->m);
		if (r == 0)
			r = pthread_mutex_unlock(o->m);
		break;
	}
	if (r == 0 && (o->op == OP_TRYLOCK || o->op == OP_TIMEDLOCK || o->op == OP_CLOCKLOCK))
		pthread_mutex_unlock(o->m);
	return (void *)(intptr_t)r;
}

static int other(pthread_mutex_t *m, int op, clockid_t clock, const struct timespec *abs,
		 uint64_t rel_ns)
{
	struct other_op o = {m, op, clock, abs, rel_ns};
	return (int)in_thread(other_mutex_op, &o);
}

static void mutex_basics(const struct mutex_kind *k)
{
	char key[128];
	pthread_mutex_t *m = mutex_new(k);

	EXPECT(KEY(key, "mutex.%s.lock", k->name), pthread_mutex_lock(m), 0);
	EXPECT(KEY(key, "mutex.%s.other_trylock", k->name), other(m, OP_TRYLOCK, 0, NULL, 0),
	       EBUSY);
	EXPECT(KEY(key, "mutex.%s.other_timedlock_past", k->name),
	       other(m, OP_TIMEDLOCK, 0, &past, 0), ETIMEDOUT);
	EXPECT(KEY(key, "mutex.%s.other_clocklock_monotonic", k->name),
	       other(m, OP_CLOCKLOCK, CLOCK_MONOTONIC, NULL, SHORT_NS), ETIMEDOUT);
	EXPECT(KEY(key, "mutex.%s.other_clocklock_realtime", k->name),
	       other(m, OP_CLOCKLOCK, CLOCK_REALTIME, NULL, SHORT_NS), ETIMEDOUT);
	EXPECT(KEY(key, "mutex.%s.other_timedlock_bad_nsec", k->name),
	       other(m, OP_TIMEDLOCK, 0, &bad_nsec, 0), EINVAL);
	EXPECT(KEY(key, "mutex.%s.other_clocklock_bad_clock", k->name),
	       other(m, OP_CLOCKLOCK, BAD_CLOCK, NULL, SHORT_NS), EINVAL);
	if (kind_checked(k))
		EXPECT(KEY(key, "mutex.%s.other_unlock", k->name), other(m, OP_UNLOCK, 0, NULL, 0),
		       EPERM);

	/* Relocking by the owner. */
	int r = pthread_mutex_trylock(m);
	if (kind_recursive(k)) {
		EXPECT(KEY(key, "mutex.%s.self_trylock", k->name), r, 0);
		EXPECT(KEY(key, "mutex.%s.self_lock", k->name), pthread_mutex_lock(m), 0);
		struct timespec dl = deadline_in(CLOCK_REALTIME, SHORT_NS);
		EXPECT(KEY(key, "mutex.%s.self_timedlock", k->name), pthread_mutex_timedlock(m, &dl),
		       0);
		for (int i = 0; i < 3; i++)
			EXPECT(KEY(key, "mutex.%s.self_unlock_nested", k->name),
			       pthread_mutex_unlock(m), 0);
	} else if (kind_errorcheck(k)) {
		/* EBUSY, or EDEADLK as pthread_mutex_lock would say. */
		record(KEY(key, "mutex.%s.self_trylock", k->name), r);
		EXPECT(KEY(key, "mutex.%s.self_lock", k->name), pthread_mutex_lock(m), EDEADLK);
		struct timespec dl = deadline_in(CLOCK_REALTIME, SHORT_NS);
		EXPECT(KEY(key, "mutex.%s.self_timedlock", k->name), pthread_mutex_timedlock(m, &dl),
		       EDEADLK);
	} else {
		EXPECT(KEY(key, "mutex.%s.self_trylock", k->name), r, EBUSY);
	}
	EXPECT(KEY(key, "mutex.%s.unlock", k->name), pthread_mutex_unlock(m), 0);
	EXPECT(KEY(key, "mutex.%s.other_lock_unlock", k->name),
	       other(m, OP_LOCK_UNLOCK, 0, NULL, 0), 0);
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, SHORT_NS);
	EXPECT(KEY(key, "mutex.%s.clocklock_free", k->name),
	       pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &dl), 0);
	EXPECT(KEY(key, "mutex.%s.unlock_after_clocklock", k->name), pthread_mutex_unlock(m), 0);
	/* POSIX need not check the time of a lock that is free. */
	r = pthread_mutex_timedlock(m, &bad_nsec);
	record(KEY(key, "mutex.%s.timedlock_free_bad_nsec", k->name), r);
	if (r == 0)
		pthread_mutex_unlock(m);

	/* Unlocking a mutex nobody holds: an error for checked types; for the
	 * others POSIX leaves it undefined, and glibc's answer is recorded (a
	 * static and a default-initialised mutex must answer alike). */
	r = pthread_mutex_unlock(m);
	if (kind_checked(k))
		EXPECT(KEY(key, "mutex.%s.unlock_unlocked", k->name), r, EPERM);
	else
		record(KEY(key, "mutex.%s.unlock_unlocked", k->name), r);
	record(KEY(key, "mutex.%s.destroy_after_misuse", k->name), pthread_mutex_destroy(m));
	mutex_free(m);

	m = mutex_new(k);
	EXPECT(KEY(key, "mutex.%s.destroy_unused", k->name), pthread_mutex_destroy(m), 0);
	mutex_free(m);
	m = mutex_new(k);
	pthread_mutex_lock(m);
	pthread_mutex_unlock(m);
	EXPECT(KEY(key, "mutex.%s.destroy_used", k->name), pthread_mutex_destroy(m), 0);
	mutex_free(m);
}

/* A signal handled by a thread blocked in pthread_mutex_lock does not end
 * the wait: POSIX says the thread resumes waiting as if not interrupted. */
static volatile sig_atomic_t handled;
static uint64_t handler_sleep_ns;
static void on_signal(int sig)
{
	(void)sig;
	handled++;
	if (handler_sleep_ns)
		sleep_ns(handler_sleep_ns);
}

static void *lock_and_unlock(void *arg)
{
	int r = pthread_mutex_lock(arg);
	if (r == 0)
		r = pthread_mutex_unlock(arg);
	return (void *)(intptr_t)r;
}

static void mutex_signal_during_wait(const struct mutex_kind *k)
{
	char key[128];
	pthread_mutex_t *m = mutex_new(k);
	pthread_mutex_lock(m);
	handled = 0;
	handler_sleep_ns = 0;
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, lock_and_unlock, m), 0);
	sleep_ns(SHORT_NS);
	pthread_kill(t, SIGUSR1);
	sleep_ns(SHORT_NS);
	pthread_mutex_unlock(m);
	void *ret;
	pthread_join(t, &ret);
	EXPECT(KEY(key, "mutex.%s.lock_across_signal", k->name), (long)(intptr_t)ret, 0);
	EXPECT(KEY(key, "mutex.%s.signal_handled", k->name), handled, 1);
	EXPECT(KEY(key, "mutex.%s.destroy_after_signal", k->name), pthread_mutex_destroy(m), 0);
	mutex_free(m);
}

/* A process-shared mutex held by one process is busy for another. */
static void mutex_across_processes(const struct mutex_kind *k)
{
	char key[128];
	pthread_mutex_t *m = mutex_new(k);
	pthread_mutex_lock(m);
	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int r = pthread_mutex_trylock(m);
		_exit(r == EBUSY ? 0 : 10 + r);
	}
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	EXPECT(KEY(key, "mutex.%s.child_sees_busy", k->name),
	       WIFEXITED(status) ? WEXITSTATUS(status) : 99, 0);
	pthread_mutex_unlock(m);
	pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int r = pthread_mutex_lock(m);
		if (r == 0)
			r = pthread_mutex_unlock(m);
		_exit(r);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	EXPECT(KEY(key, "mutex.%s.child_locks", k->name),
	       WIFEXITED(status) ? WEXITSTATUS(status) : 99, 0);
	EXPECT(KEY(key, "mutex.%s.destroy_shared", k->name), pthread_mutex_destroy(m), 0);
	mutex_free(m);
}

/* A non-checking mutex unlocked by a thread that does not hold it: POSIX
 * leaves it undefined; glibc releases it, and programs written against
 * glibc rely on that. An unlock that answers 0 must have released it: A
 * locks and exits holding it, B unlocks, and a later locker C gets it (a
 * lock that never returns is a result, not a hang). Then the same with C
 * waiting in the lock's queue when B unlocks. */
struct later_locker {
	pthread_mutex_t *m;
	volatile pid_t tid;
};

static void *lock_and_keep(void *arg) { return (void *)(intptr_t)pthread_mutex_lock(arg); }

static void *lock_then_unlock(void *arg)
{
	struct later_locker *c = arg;
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	c->tid = self_tid();
	int r = pthread_mutex_lock(c->m);
	if (r == 0)
		r = pthread_mutex_unlock(c->m);
	return (void *)(intptr_t)r;
}

/* C's lock and unlock: their result, or -1 where the lock did not return
 * within 5 s (C is cancelled then). */
static long later_locker_result(pthread_t t)
{
	struct timespec dl = deadline_in(CLOCK_REALTIME, 5 * 1000000000ull);
	void *ret = NULL;
	if (pthread_timedjoin_np(t, &ret, &dl) == 0)
		return (long)(intptr_t)ret;
	CHECK_EQ(pthread_cancel(t), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	return -1;
}

static void mutex_unlocked_by_another(const struct mutex_kind *k)
{
	char key[128];
	pthread_mutex_t *m = mutex_new(k);
	EXPECT(KEY(key, "mutex.%s.unowned.holder_locks", k->name), in_thread(lock_and_keep, m), 0);
	int r = other(m, OP_UNLOCK, 0, NULL, 0);
	record(KEY(key, "mutex.%s.unowned.unlock", k->name), r);
	if (r == 0) {
		struct later_locker c = {m, 0};
		pthread_t t;
		CHECK_EQ(pthread_create(&t, NULL, lock_then_unlock, &c), 0);
		EXPECT(KEY(key, "mutex.%s.unowned.later_lock", k->name), later_locker_result(t), 0);
	} else {
		/* Not released: still busy for everybody. */
		EXPECT(KEY(key, "mutex.%s.unowned.later_trylock", k->name),
		       other(m, OP_TRYLOCK, 0, NULL, 0), EBUSY);
	}
	mutex_free(m); /* possibly held by a thread that is gone: never used again */

	m = mutex_new(k);
	EXPECT(KEY(key, "mutex.%s.unowned_contended.lock", k->name), pthread_mutex_lock(m), 0);
	struct later_locker c = {m, 0};
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, lock_then_unlock, &c), 0);
	while (!c.tid)
		sleep_ns(1000000);
	until_asleep(c.tid);
	r = other(m, OP_UNLOCK, 0, NULL, 0);
	record(KEY(key, "mutex.%s.unowned_contended.unlock", k->name), r);
	long waiter = 0;
	if (r == 0)
		waiter = later_locker_result(t);
	EXPECT(KEY(key, "mutex.%s.unowned_contended.owner_unlock", k->name),
	       pthread_mutex_unlock(m), 0);
	if (r != 0)
		waiter = later_locker_result(t);
	EXPECT(KEY(key, "mutex.%s.unowned_contended.waiter", k->name), waiter, 0);
	mutex_free(m);
}

/* A thread that locks a non-checking mutex it already holds waits for ever
 * (POSIX: a deadlock); cancelled asynchronously meanwhile, it ends: glibc
 * lets the cancellation through and runs its cleanup handlers. */
struct relock {
	pthread_mutex_t *m;
	volatile pid_t tid;
	volatile int cleaned;
};

static void relock_cleanup(void *arg) { ((struct relock *)arg)->cleaned = 1; }

static void *relock_and_wait(void *arg)
{
	struct relock *r = arg;
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	pthread_cleanup_push(relock_cleanup, r);
	pthread_mutex_lock(r->m);
	r->tid = self_tid();
	pthread_mutex_lock(r->m);
	pthread_cleanup_pop(0);
	return NULL;
}

static void mutex_relock_cancelled(const struct mutex_kind *k)
{
	char key[128];
	struct relock r = {mutex_new(k), 0, 0};
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, relock_and_wait, &r), 0);
	while (!r.tid)
		sleep_ns(1000000);
	until_asleep(r.tid);
	EXPECT(KEY(key, "mutex.%s.relock_cancel", k->name), pthread_cancel(t), 0);
	/* a wait the cancellation did not end is a result, not a hang */
	struct timespec dl = deadline_in(CLOCK_REALTIME, 5 * 1000000000ull);
	void *ret = NULL;
	int joined = pthread_timedjoin_np(t, &ret, &dl);
	record(KEY(key, "mutex.%s.relock_cancelled_ends", k->name), joined);
	if (joined == 0) {
		record(KEY(key, "mutex.%s.relock_cancelled_result", k->name), ret == PTHREAD_CANCELED);
		record(KEY(key, "mutex.%s.relock_cancelled_cleanup_ran", k->name), r.cleaned);
		mutex_free(r.m); /* held by a thread that is gone: never used again */
	}
}

/* Threads cancelled asynchronously at any point while they take, release
 * and destroy statically initialised locks (their first use is the
 * interposer's slow path): every other thread's locks go on working. POSIX
 * promises nothing here (pthread_mutex_lock is not async-cancel-safe), but
 * glibc's locks keep working and programs rely on it. Each round cancels
 * after a different delay; a lock that no longer answers is a result (0),
 * not a hang. */
static void *cycle_static_locks(void *arg)
{
	(void)arg;
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	for (;;) {
		pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
		pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
		pthread_mutex_lock(&m);
		pthread_mutex_unlock(&m);
		pthread_mutex_destroy(&m);
		pthread_rwlock_rdlock(&rw);
		pthread_rwlock_unlock(&rw);
		pthread_rwlock_destroy(&rw);
	}
	return NULL;
}

static void *fresh_locks_work(void *arg)
{
	(void)arg;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
	int r = pthread_mutex_lock(&m) || pthread_mutex_unlock(&m) || pthread_mutex_destroy(&m) ||
		pthread_rwlock_wrlock(&rw) || pthread_rwlock_unlock(&rw) || pthread_rwlock_destroy(&rw);
	return (void *)(intptr_t)(r == 0);
}

static void async_cancel_anywhere(void)
{
#if defined(__SANITIZE_ADDRESS__)
	/* The sanitizer's interceptors around every lock call are not
	 * async-cancel-safe: a cancellation landing inside one corrupts the
	 * sanitizer's own thread state, whatever the interposer does. */
	fprintf(stderr, "posix_conformance: async_cancel_anywhere not run under AddressSanitizer\n");
	return;
#endif
	int works = 1;
	for (int round = 0; round < 200 && works; round++) {
		pthread_t t;
		CHECK_EQ(pthread_create(&t, NULL, cycle_static_locks, NULL), 0);
		sleep_ns(100000 + (uint64_t)(round % 20) * 97000);
		CHECK_EQ(pthread_cancel(t), 0);
		CHECK_EQ(pthread_join(t, NULL), 0);
		pthread_t check;
		CHECK_EQ(pthread_create(&check, NULL, fresh_locks_work, NULL), 0);
		struct timespec dl = deadline_in(CLOCK_REALTIME, 2 * 1000000000ull);
		void *ret = NULL;
		works = pthread_timedjoin_np(check, &ret, &dl) == 0 && ret == (void *)1;
	}
	record("locks.after_async_cancel_anywhere.work", works);
}

/* --- condition variables -------------------------------------------------------- */

struct cond_case {
	pthread_cond_t *c;
	pthread_mutex_t *m;
	volatile int ready, go;
	int result;
};

static pthread_cond_t *cond_new(bool pshared, clockid_t clock)
{
	pthread_cond_t *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(c != MAP_FAILED);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	if (pshared)
		CHECK_EQ(pthread_condattr_setpshared(&a, PTHREAD_PROCESS_SHARED), 0);
	CHECK_EQ(pthread_condattr_setclock(&a, clock), 0);
	CHECK_EQ(pthread_cond_init(c, &a), 0);
	pthread_condattr_destroy(&a);
	return c;
}

static void *cond_waiter(void *arg)
{
	struct cond_case *cc = arg;
	pthread_mutex_lock(cc->m);
	cc->ready = 1;
	int r = 0;
	while (!cc->go && r == 0)
		r = pthread_cond_wait(cc->c, cc->m);
	cc->result = r;
	/* Holds the mutex again: another thread finds it busy. */
	if (other(cc->m, OP_TRYLOCK, 0, NULL, 0) != EBUSY)
		cc->result = -2;
	return (void *)(intptr_t)pthread_mutex_unlock(cc->m);
}

static void wake_waiter(struct cond_case *cc, bool broadcast)
{
	while (!cc->ready)
		sleep_ns(1000000);
	pthread_mutex_lock(cc->m);
	cc->go = 1;
	if (broadcast)
		pthread_cond_broadcast(cc->c);
	else
		pthread_cond_signal(cc->c);
	pthread_mutex_unlock(cc->m);
}

static void cond_with(const struct mutex_kind *k, clockid_t attr_clock)
{
	char key[160];
	const char *cn = attr_clock == CLOCK_MONOTONIC ? "monotonic" : "realtime";
	pthread_mutex_t *m = mutex_new(k);
	pthread_cond_t *c = cond_new(k->pshared, attr_clock);

	/* Timeouts return holding the mutex, which the caller can release. */
	EXPECT(KEY(key, "cond.%s.%s.lock", k->name, cn), pthread_mutex_lock(m), 0);
	EXPECT(KEY(key, "cond.%s.%s.timedwait_past", k->name, cn),
	       pthread_cond_timedwait(c, m, &past), ETIMEDOUT);
	EXPECT(KEY(key, "cond.%s.%s.busy_after_timeout", k->name, cn),
	       other(m, OP_TRYLOCK, 0, NULL, 0), EBUSY);
	struct timespec dl = deadline_in(attr_clock, SHORT_NS);
	int r = pthread_cond_timedwait(c, m, &dl);
	EXPECT(KEY(key, "cond.%s.%s.timedwait_short", k->name, cn), r, ETIMEDOUT);
	EXPECT(KEY(key, "cond.%s.%s.timedwait_not_early", k->name, cn),
	       now_ns(attr_clock) >= ts_ns(&dl), 1);
	static const clockid_t clocks[] = {CLOCK_MONOTONIC, CLOCK_REALTIME};
	for (int i = 0; i < 2; i++) {
		dl = deadline_in(clocks[i], SHORT_NS);
		EXPECT(KEY(key, "cond.%s.%s.clockwait_%d", k->name, cn, i),
		       pthread_cond_clockwait(c, m, clocks[i], &dl), ETIMEDOUT);
		EXPECT(KEY(key, "cond.%s.%s.clockwait_not_early_%d", k->name, cn, i),
		       now_ns(clocks[i]) >= ts_ns(&dl), 1);
	}
	EXPECT(KEY(key, "cond.%s.%s.clockwait_bad_clock", k->name, cn),
	       pthread_cond_clockwait(c, m, BAD_CLOCK, &dl), EINVAL);
	EXPECT(KEY(key, "cond.%s.%s.timedwait_bad_nsec", k->name, cn),
	       pthread_cond_timedwait(c, m, &bad_nsec), EINVAL);
	EXPECT(KEY(key, "cond.%s.%s.unlock_after_timeouts", k->name, cn), pthread_mutex_unlock(m),
	       0);
	EXPECT(KEY(key, "cond.%s.%s.free_after_timeouts", k->name, cn),
	       other(m, OP_LOCK_UNLOCK, 0, NULL, 0), 0);
	/* Waiting on a mutex the caller does not hold. */
	if (kind_checked(k)) {
		dl = deadline_in(attr_clock, SHORT_NS);
		record(KEY(key, "cond.%s.%s.wait_unheld", k->name, cn),
		       pthread_cond_timedwait(c, m, &dl));
	}

	for (int b = 0; b < 2; b++) {
		struct cond_case cc = {c, m, 0, 0, 0};
		pthread_t t;
		CHECK_EQ(pthread_create(&t, NULL, cond_waiter, &cc), 0);
		wake_waiter(&cc, b);
		void *ret;
		pthread_join(t, &ret);
		EXPECT(KEY(key, "cond.%s.%s.woken_%s", k->name, cn, b ? "broadcast" : "signal"),
		       cc.result, 0);
		EXPECT(KEY(key, "cond.%s.%s.unlock_after_wake_%d", k->name, cn, b),
		       (long)(intptr_t)ret, 0);
	}

	/* A signal during the wait: the wait goes on, or returns 0 (a spurious
	 * wake-up), never an error. */
	{
		struct cond_case cc = {c, m, 0, 0, 0};
		pthread_t t;
		handled = 0;
		handler_sleep_ns = 0;
		CHECK_EQ(pthread_create(&t, NULL, cond_waiter, &cc), 0);
		while (!cc.ready)
			sleep_ns(1000000);
		sleep_ns(SHORT_NS);
		pthread_kill(t, SIGUSR1);
		sleep_ns(SHORT_NS);
		wake_waiter(&cc, false);
		void *ret;
		pthread_join(t, &ret);
		EXPECT(KEY(key, "cond.%s.%s.wait_across_signal", k->name, cn), cc.result, 0);
		EXPECT(KEY(key, "cond.%s.%s.signal_handled", k->name, cn), handled, 1);
	}

	if (k->pshared) {
		/* The waiter in another process. */
		struct cond_case *cc = mmap(NULL, sizeof(*cc), PROT_READ | PROT_WRITE,
					    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		CHECK(cc != MAP_FAILED);
		*cc = (struct cond_case){c, m, 0, 0, 0};
		pid_t pid = test_fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			pthread_mutex_lock(m);
			cc->ready = 1;
			int rr = 0;
			while (!cc->go && rr == 0)
				rr = pthread_cond_wait(c, m);
			if (rr == 0)
				rr = pthread_mutex_unlock(m);
			_exit(rr);
		}
		wake_waiter(cc, false);
		int status;
		CHECK_EQ(waitpid(pid, &status, 0), pid);
		EXPECT(KEY(key, "cond.%s.%s.waiter_in_child", k->name, cn),
		       WIFEXITED(status) ? WEXITSTATUS(status) : 99, 0);
		munmap(cc, sizeof(*cc));
	}

	EXPECT(KEY(key, "cond.%s.%s.destroy", k->name, cn), pthread_cond_destroy(c), 0);
	EXPECT(KEY(key, "cond.%s.%s.mutex_destroy", k->name, cn), pthread_mutex_destroy(m), 0);
	munmap(c, sizeof(*c));
	mutex_free(m);
}

/* --- reader-writer locks ------------------------------------------------------------ */

struct rw_kind {
	const char *name;
	int init; /* 0 static, 1 NULL attributes, 2 process-shared */
};
static const struct rw_kind rw_kinds[] = {
	{"static", 0},
	{"null_attr", 1},
	{"pshared", 2},
};

static pthread_rwlock_t *rw_new(const struct rw_kind *k)
{
	static const pthread_rwlock_t initialiser = PTHREAD_RWLOCK_INITIALIZER;
	pthread_rwlock_t *rw = mmap(NULL, sizeof(*rw), PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(rw != MAP_FAILED);
	if (k->init == 0) {
		*rw = initialiser;
	} else if (k->init == 1) {
		CHECK_EQ(pthread_rwlock_init(rw, NULL), 0);
	} else {
		pthread_rwlockattr_t a;
		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		CHECK_EQ(pthread_rwlock_init(rw, &a), 0);
		pthread_rwlockattr_destroy(&a);
	}
	return rw;
}

enum { RW_TRYRD, RW_TRYWR, RW_TIMEDRD, RW_TIMEDWR, RW_CLOCKRD, RW_CLOCKWR, RW_UNLOCK };
struct rw_op {
	pthread_rwlock_t *rw;
	int op;
	clockid_t clock;
	const struct timespec *abs;
	uint64_t rel_ns;
};

static void *rw_op_run(void *arg)
{
	struct rw_op *o = arg;
	struct timespec dl;
	const struct timespec *abs = o->abs;
	if (!abs && o->rel_ns) {
		dl = deadline_in(o->clock == BAD_CLOCK ? CLOCK_MONOTONIC : o->clock, o->rel_ns);
		abs = &dl;
	}
	int r = 0;
	switch (o->op) {
	case RW_TRYRD: r = pthread_rwlock_tryrdlock(o->rw); break;
	case RW_TRYWR: r = pthread_rwlock_trywrlock(o->rw); break;
	case RW_TIMEDRD: r = pthread_rwlock_timedrdlock(o->rw, abs); break;
	case RW_TIMEDWR: r = pthread_rwlock_timedwrlock(o->rw, abs); break;
	case RW_CLOCKRD: r = pthread_rwlock_clockrdlock(o->rw, o->clock, abs); break;
	case RW_CLOCKWR: r = pthread_rwlock_clockwrlock(o->rw, o->clock, abs); break;
	case RW_UNLOCK: return (void *)(intptr_t)pthread_rwlock_unlock(o->rw);
	}
	if (r == ETIMEDOUT && (o->op == RW_CLOCKRD || o->op == RW_CLOCKWR) &&
	    o->clock != BAD_CLOCK && now_ns(o->clock) < ts_ns(abs))
		r = -1; /* returned before its deadline */
	if (r == 0)
		pthread_rwlock_unlock(o->rw);
	return (void *)(intptr_t)r;
}

static int rw_other(pthread_rwlock_t *rw, int op, clockid_t clock, const struct timespec *abs,
		    uint64_t rel_ns)
{
	struct rw_op o = {rw, op, clock, abs, rel_ns};
	return (int)in_thread(rw_op_run, &o);
}

/* Another thread's timed locks of one kind (wr or rd) on a lock it cannot
 * take: deadlines passed, invalid, short on both clocks, on an unknown clock. */
static void rw_timed_busy(const struct rw_kind *k, pthread_rwlock_t *rw, const char *held,
			  const char *kind, int timed_op, int clock_op)
{
	char key[160];
	const struct {
		const char *name;
		int op;
	} calls[] = {{"timed", timed_op}, {"clock", clock_op}};
	for (int c = 0; c < 2; c++) {
		EXPECT(KEY(key, "rw.%s.%s.other_%s%s_past", k->name, held, calls[c].name, kind),
		       rw_other(rw, calls[c].op, CLOCK_REALTIME, &past, 0), ETIMEDOUT);
		EXPECT(KEY(key, "rw.%s.%s.other_%s%s_bad_nsec", k->name, held, calls[c].name, kind),
		       rw_other(rw, calls[c].op, CLOCK_REALTIME, &bad_nsec, 0), EINVAL);
	}
	EXPECT(KEY(key, "rw.%s.%s.other_clock%s_monotonic", k->name, held, kind),
	       rw_other(rw, clock_op, CLOCK_MONOTONIC, NULL, SHORT_NS), ETIMEDOUT);
	EXPECT(KEY(key, "rw.%s.%s.other_clock%s_realtime", k->name, held, kind),
	       rw_other(rw, clock_op, CLOCK_REALTIME, NULL, SHORT_NS), ETIMEDOUT);
	EXPECT(KEY(key, "rw.%s.%s.other_clock%s_bad_clock", k->name, held, kind),
	       rw_other(rw, clock_op, BAD_CLOCK, NULL, SHORT_NS), EINVAL);
}

static void rw_busy_checks(const struct rw_kind *k, pthread_rwlock_t *rw, const char *held,
			   bool readers_blocked)
{
	char key[160];
	EXPECT(KEY(key, "rw.%s.%s.other_trywrlock", k->name, held),
	       rw_other(rw, RW_TRYWR, 0, NULL, 0), EBUSY);
	rw_timed_busy(k, rw, held, "wr", RW_TIMEDWR, RW_CLOCKWR);
	EXPECT(KEY(key, "rw.%s.%s.other_tryrdlock", k->name, held),
	       rw_other(rw, RW_TRYRD, 0, NULL, 0), readers_blocked ? EBUSY : 0);
	if (readers_blocked)
		rw_timed_busy(k, rw, held, "rd", RW_TIMEDRD, RW_CLOCKRD);
}

static void rw_basics(const struct rw_kind *k)
{
	char key[160];
	pthread_rwlock_t *rw = rw_new(k);

	EXPECT(KEY(key, "rw.%s.rdlock", k->name), pthread_rwlock_rdlock(rw), 0);
	EXPECT(KEY(key, "rw.%s.rdlock_again", k->name), pthread_rwlock_rdlock(rw), 0);
	EXPECT(KEY(key, "rw.%s.tryrdlock_again", k->name), pthread_rwlock_tryrdlock(rw), 0);
	rw_busy_checks(k, rw, "read_held", false);
	record(KEY(key, "rw.%s.read_held.self_trywrlock", k->name), pthread_rwlock_trywrlock(rw));
	for (int i = 0; i < 3; i++)
		EXPECT(KEY(key, "rw.%s.read_unlock", k->name), pthread_rwlock_unlock(rw), 0);

	EXPECT(KEY(key, "rw.%s.wrlock", k->name), pthread_rwlock_wrlock(rw), 0);
	EXPECT(KEY(key, "rw.%s.write_held.self_wrlock", k->name), pthread_rwlock_wrlock(rw),
	       EDEADLK);
	EXPECT(KEY(key, "rw.%s.write_held.self_rdlock", k->name), pthread_rwlock_rdlock(rw),
	       EDEADLK);
	record(KEY(key, "rw.%s.write_held.self_tryrdlock", k->name), pthread_rwlock_tryrdlock(rw));
	record(KEY(key, "rw.%s.write_held.self_trywrlock", k->name), pthread_rwlock_trywrlock(rw));
	struct timespec dl = deadline_in(CLOCK_REALTIME, SHORT_NS);
	EXPECT(KEY(key, "rw.%s.write_held.self_timedwrlock", k->name),
	       pthread_rwlock_timedwrlock(rw, &dl), EDEADLK);
	rw_busy_checks(k, rw, "write_held", true);
	EXPECT(KEY(key, "rw.%s.write_unlock", k->name), pthread_rwlock_unlock(rw), 0);

	dl = deadline_in(CLOCK_MONOTONIC, SHORT_NS);
	EXPECT(KEY(key, "rw.%s.clockwrlock_free", k->name),
	       pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &dl), 0);
	EXPECT(KEY(key, "rw.%s.unlock_clockwr", k->name), pthread_rwlock_unlock(rw), 0);
	int r = pthread_rwlock_timedrdlock(rw, &bad_nsec);
	record(KEY(key, "rw.%s.timedrdlock_free_bad_nsec", k->name), r);
	if (r == 0)
		pthread_rwlock_unlock(rw);
	r = pthread_rwlock_timedwrlock(rw, &bad_nsec);
	record(KEY(key, "rw.%s.timedwrlock_free_bad_nsec", k->name), r);
	if (r == 0)
		pthread_rwlock_unlock(rw);
	EXPECT(KEY(key, "rw.%s.destroy", k->name), pthread_rwlock_destroy(rw), 0);
	munmap(rw, sizeof(*rw));

	rw = rw_new(k);
	record(KEY(key, "rw.%s.unlock_unlocked", k->name), pthread_rwlock_unlock(rw));
	munmap(rw, sizeof(*rw));
}

/* A timed lock whose wait is interrupted by a signal handler that runs past
 * the deadline: the call returns 0 (the lock was released meanwhile) or
 * ETIMEDOUT, and in both cases the lock's state stays whole. */
struct timed_case {
	pthread_rwlock_t *rw;
	bool write;
	int result;
};

static void *timed_waiter(void *arg)
{
	struct timed_case *tc = arg;
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, 40 * 1000000ull);
	tc->result = tc->write ? pthread_rwlock_clockwrlock(tc->rw, CLOCK_MONOTONIC, &dl)
			       : pthread_rwlock_clockrdlock(tc->rw, CLOCK_MONOTONIC, &dl);
	if (tc->result == 0 && pthread_rwlock_unlock(tc->rw) != 0)
		tc->result = -3;
	return NULL;
}

static void rw_signal_past_timeout(const struct rw_kind *k)
{
	char key[160];
	/* held: 0 by a writer, 1 by a reader (then only a writer waits) */
	for (int held = 0; held < 2; held++)
	for (int released = 0; released < 2; released++)
		for (int write = held; write < 2; write++) {
			pthread_rwlock_t *rw = rw_new(k);
			CHECK_EQ(held ? pthread_rwlock_rdlock(rw) : pthread_rwlock_wrlock(rw), 0);
			struct timed_case tc = {rw, write, -1};
			handled = 0;
			handler_sleep_ns = 80 * 1000000ull;
			pthread_t t;
			CHECK_EQ(pthread_create(&t, NULL, timed_waiter, &tc), 0);
			sleep_ns(SHORT_NS);
			pthread_kill(t, SIGUSR1);
			if (released) {
				/* Released while the handler still runs. */
				sleep_ns(3 * SHORT_NS);
				pthread_rwlock_unlock(rw);
				pthread_join(t, NULL);
			} else {
				pthread_join(t, NULL);
				pthread_rwlock_unlock(rw);
			}
			handler_sleep_ns = 0;
			const char *what = held ? "wr_behind_reader" : write ? "wr" : "rd";
			if (released)
				record(KEY(key, "rw.%s.signal_past_timeout_released.%s", k->name, what),
				       tc.result);
			else
				EXPECT(KEY(key, "rw.%s.signal_past_timeout.%s", k->name, what),
				       tc.result, ETIMEDOUT);
			EXPECT(KEY(key, "rw.%s.signal_past_timeout_%d.%s.handled", k->name,
				   released, what), handled, 1);
			EXPECT(KEY(key, "rw.%s.signal_past_timeout_%d.%s.trywrlock", k->name,
				   released, what), pthread_rwlock_trywrlock(rw), 0);
			EXPECT(KEY(key, "rw.%s.signal_past_timeout_%d.%s.unlock", k->name,
				   released, what), pthread_rwlock_unlock(rw), 0);
			EXPECT(KEY(key, "rw.%s.signal_past_timeout_%d.%s.destroy", k->name,
				   released, what), pthread_rwlock_destroy(rw), 0);
			munmap(rw, sizeof(*rw));
		}
}

/* A thread that exits holding a lock: POSIX leaves destroying that lock
 * undefined, glibc destroys it (0), and programs that end threads this way
 * rely on that; a lock initialised again at the same place works. Held: a
 * read lock, a write lock, and each of them taken by a timed lock whose wait
 * a signal handler interrupted (the lock was released while it ran). */
struct exit_holding {
	pthread_rwlock_t *rw;
	bool write, timed;
	int result;
};

static void *lock_and_exit(void *arg)
{
	struct exit_holding *e = arg;
	if (!e->timed) {
		e->result = e->write ? pthread_rwlock_wrlock(e->rw) : pthread_rwlock_rdlock(e->rw);
		return NULL;
	}
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, 1000 * 1000000ull);
	e->result = e->write ? pthread_rwlock_clockwrlock(e->rw, CLOCK_MONOTONIC, &dl)
			     : pthread_rwlock_clockrdlock(e->rw, CLOCK_MONOTONIC, &dl);
	return NULL;
}

static void rw_exit_holding(const struct rw_kind *k)
{
	char key[160];
	for (int timed = 0; timed < 2; timed++)
		for (int write = 0; write < 2; write++) {
			const char *what = write ? "write" : "read";
			const char *how = timed ? "timed_after_signal" : "plain";
			pthread_rwlock_t *rw = rw_new(k);
			struct exit_holding e = {rw, write, timed, -1};
			pthread_t t;
			if (timed) {
				/* held by this thread; the waiter's handler runs while
				 * it lets go */
				CHECK_EQ(pthread_rwlock_wrlock(rw), 0);
				handled = 0;
				handler_sleep_ns = 50 * 1000000ull;
				CHECK_EQ(pthread_create(&t, NULL, lock_and_exit, &e), 0);
				sleep_ns(SHORT_NS);
				pthread_kill(t, SIGUSR1);
				sleep_ns(SHORT_NS);
				CHECK_EQ(pthread_rwlock_unlock(rw), 0);
			} else {
				CHECK_EQ(pthread_create(&t, NULL, lock_and_exit, &e), 0);
			}
			CHECK_EQ(pthread_join(t, NULL), 0);
			handler_sleep_ns = 0;
			EXPECT(KEY(key, "rw.%s.exit_holding_%s.%s.lock", k->name, what, how), e.result, 0);
			record(KEY(key, "rw.%s.exit_holding_%s.%s.destroy", k->name, what, how),
			       pthread_rwlock_destroy(rw));
			if (k->init == 0) {
				static const pthread_rwlock_t initialiser = PTHREAD_RWLOCK_INITIALIZER;
				*rw = initialiser;
			} else {
				CHECK_EQ(pthread_rwlock_init(rw, NULL), 0);
			}
			EXPECT(KEY(key, "rw.%s.exit_holding_%s.%s.reused", k->name, what, how),
			       pthread_rwlock_wrlock(rw), 0);
			EXPECT(KEY(key, "rw.%s.exit_holding_%s.%s.reused_unlock", k->name, what, how),
			       pthread_rwlock_unlock(rw), 0);
			EXPECT(KEY(key, "rw.%s.exit_holding_%s.%s.reused_destroy", k->name, what, how),
			       pthread_rwlock_destroy(rw), 0);
			munmap(rw, sizeof(*rw));
		}
}

/* POSIX, with SCHED_FIFO threads: a reader does not get the lock if a writer
 * holds it or writers of higher or equal priority wait for it; otherwise it
 * does. glibc's default rwlock lets every reader in while no writer holds the
 * lock, so glibc passes the "higher priority" half only. */
struct prio_thread {
	pthread_rwlock_t *rw;
	int priority;
	bool write;
	volatile int started;
	int result;
};

static void set_fifo(int priority)
{
	struct sched_param sp = {.sched_priority = priority};
	CHECK_EQ(pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp), 0);
}

static void *prio_locker(void *arg)
{
	struct prio_thread *p = arg;
	set_fifo(p->priority);
	p->started = 1;
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, 400 * 1000000ull);
	p->result = p->write ? pthread_rwlock_clockwrlock(p->rw, CLOCK_MONOTONIC, &dl)
			     : pthread_rwlock_clockrdlock(p->rw, CLOCK_MONOTONIC, &dl);
	if (p->result == 0)
		pthread_rwlock_unlock(p->rw);
	return NULL;
}

static void *prio_try_reader(void *arg)
{
	struct prio_thread *p = arg;
	set_fifo(p->priority);
	p->result = pthread_rwlock_tryrdlock(p->rw);
	if (p->result == 0)
		pthread_rwlock_unlock(p->rw);
	return NULL;
}

/* The exit status of a run that could not check readers' priorities (no
 * SCHED_FIFO here), or 0. */
static int fifo_skipped;

static void rw_reader_priority(const struct rw_kind *k)
{
	char key[160];
	if (!can_use_fifo()) {
		if (!fifo_skipped)
			fifo_skipped = test_skip_part("fifo", "rw.*.fifo_reader not checked: SCHED_FIFO not permitted");
		return;
	}
	/* reader priority relative to the waiting writer: above, then equal */
	static const struct {
		const char *name;
		int reader_prio;
	} cases[] = {{"higher", 20}, {"equal", 10}, {"sched_other", 0}};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		pthread_rwlock_t *rw = rw_new(k);
		CHECK_EQ(pthread_rwlock_rdlock(rw), 0);
		struct prio_thread writer = {rw, 10, true, 0, -1};
		pthread_t w;
		CHECK_EQ(pthread_create(&w, NULL, prio_locker, &writer), 0);
		while (!writer.started)
			sleep_ns(1000000);
		sleep_ns(2 * SHORT_NS); /* the writer is blocked now */
		struct prio_thread reader = {rw, cases[c].reader_prio, false, 0, -1};
		pthread_t r;
		if (cases[c].reader_prio) {
			CHECK_EQ(pthread_create(&r, NULL, prio_try_reader, &reader), 0);
			pthread_join(r, NULL);
		} else {
			reader.result = (int)rw_other(rw, RW_TRYRD, 0, NULL, 0);
		}
		if (cases[c].reader_prio > 10)
			EXPECT(KEY(key, "rw.%s.fifo_reader_%s.tryrdlock", k->name, cases[c].name),
			       reader.result, 0);
		else
			record(KEY(key, "rw.%s.fifo_reader_%s.tryrdlock", k->name, cases[c].name),
			       reader.result);
		if (cases[c].reader_prio > 10) {
			reader = (struct prio_thread){rw, cases[c].reader_prio, false, 0, -1};
			CHECK_EQ(pthread_create(&r, NULL, prio_locker, &reader), 0);
			pthread_join(r, NULL);
			EXPECT(KEY(key, "rw.%s.fifo_reader_%s.rdlock", k->name, cases[c].name),
			       reader.result, 0);
		}
		pthread_rwlock_unlock(rw);
		pthread_join(w, NULL);
		EXPECT(KEY(key, "rw.%s.fifo_reader_%s.writer", k->name, cases[c].name),
		       writer.result, 0);
		EXPECT(KEY(key, "rw.%s.fifo_reader_%s.destroy", k->name, cases[c].name),
		       pthread_rwlock_destroy(rw), 0);
		munmap(rw, sizeof(*rw));
	}
}

int main(void)
{
	watchdog(240);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);

	for (size_t i = 0; i < sizeof(mutex_kinds) / sizeof(mutex_kinds[0]); i++) {
		const struct mutex_kind *k = &mutex_kinds[i];
		mutex_basics(k);
		mutex_signal_during_wait(k);
		if (!kind_checked(k)) {
			mutex_relock_cancelled(k);
			mutex_unlocked_by_another(k);
		}
		if (k->pshared)
			mutex_across_processes(k);
		cond_with(k, CLOCK_REALTIME);
		cond_with(k, CLOCK_MONOTONIC);
	}
	for (size_t i = 0; i < sizeof(rw_kinds) / sizeof(rw_kinds[0]); i++) {
		rw_basics(&rw_kinds[i]);
		rw_signal_past_timeout(&rw_kinds[i]);
		rw_exit_holding(&rw_kinds[i]);
		rw_reader_priority(&rw_kinds[i]);
	}
	/* last: its thousands of short-lived locks fill the trace's table */
	async_cancel_anywhere();
	fflush(stdout);
	if (failures) {
		fprintf(stderr, "posix_conformance: %d results differ from POSIX\n", failures);
		return T_FAIL;
	}
	if (fifo_skipped)
		return fifo_skipped;
	fprintf(stderr, "posix_conformance: ok\n");
	return T_PASS;
}
