/* POSIX semantics of mutexes, rwlocks and condition variables as a program
 * sees them, run without the interposer and under each of its modes (ctest
 * sets LD_PRELOAD and RTACCEL_SHIM). Under pi, it also checks that the
 * mutexes really got priority inheritance. */
#include "../lock/test_util.h"

#include <sys/mman.h>
#include <sys/wait.h>

static pthread_mutex_t static_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t static_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_rwlock_t static_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static int mode_has(const char *word)
{
	const char *m = getenv("RTACCEL_SHIM");
	const char *ld = getenv("LD_PRELOAD");
	return m && ld && strstr(ld, "rtaccel_shim") && strstr(m, word);
}

static void *try_mutex_busy(void *arg)
{
	pthread_mutex_t *m = arg;
	CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
	struct timespec dl = deadline_in(CLOCK_REALTIME, 20 * 1000000ull);
	CHECK_EQ(pthread_mutex_timedlock(m, &dl), ETIMEDOUT);
	dl = deadline_in(CLOCK_MONOTONIC, 20 * 1000000ull);
	CHECK_EQ(pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
	return NULL;
}

static void *unlock_not_owner(void *arg)
{
	CHECK_EQ(pthread_mutex_unlock(arg), EPERM);
	return NULL;
}

static void in_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, fn, arg), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
}

static void mutexes(void)
{
	CHECK_EQ(pthread_mutex_lock(&static_mutex), 0);
	in_thread(try_mutex_busy, &static_mutex);
	CHECK_EQ(pthread_mutex_unlock(&static_mutex), 0);

	CHECK_EQ(pthread_mutex_lock(&static_recursive), 0);
	CHECK_EQ(pthread_mutex_lock(&static_recursive), 0);
	CHECK_EQ(pthread_mutex_trylock(&static_recursive), 0);
	in_thread(try_mutex_busy, &static_recursive);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(pthread_mutex_unlock(&static_recursive), 0);

	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_t checked;
	CHECK_EQ(pthread_mutex_init(&checked, &a), 0);
	CHECK_EQ(pthread_mutex_lock(&checked), 0);
	CHECK_EQ(pthread_mutex_lock(&checked), EDEADLK);
	in_thread(unlock_not_owner, &checked);
	CHECK_EQ(pthread_mutex_unlock(&checked), 0);

	if (mode_has("pi")) {
		CHECK(checked.__data.__kind & 0x20); /* PTHREAD_MUTEX_PRIO_INHERIT_NP */
		pthread_mutex_t *redirected = (pthread_mutex_t *)static_mutex.__data.__list.__prev;
		CHECK(redirected != NULL);
		CHECK(redirected->__data.__kind & 0x20);
		redirected = (pthread_mutex_t *)static_recursive.__data.__list.__prev;
		CHECK(redirected != NULL && (redirected->__data.__kind & 0x20));
		CHECK_EQ(redirected->__data.__kind & 3, PTHREAD_MUTEX_RECURSIVE);
		puts("pi: explicit and static mutexes have priority inheritance");
	}
	CHECK_EQ(pthread_mutex_destroy(&checked), 0);
	pthread_mutexattr_destroy(&a);
}

static void *writer_waits(void *arg)
{
	(void)arg;
	CHECK_EQ(pthread_rwlock_wrlock(&static_rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&static_rw), 0);
	return NULL;
}

static void *rw_busy_for_others(void *arg)
{
	int writer_holds = *(int *)arg;
	if (writer_holds)
		CHECK_EQ(pthread_rwlock_tryrdlock(&static_rw), EBUSY);
	CHECK_EQ(pthread_rwlock_trywrlock(&static_rw), EBUSY);
	struct timespec dl = deadline_in(CLOCK_REALTIME, 20 * 1000000ull);
	CHECK_EQ(pthread_rwlock_timedwrlock(&static_rw, &dl), ETIMEDOUT);
	dl = deadline_in(CLOCK_MONOTONIC, 20 * 1000000ull);
	CHECK_EQ(pthread_rwlock_clockwrlock(&static_rw, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
	if (writer_holds) {
		dl = deadline_in(CLOCK_REALTIME, 20 * 1000000ull);
		CHECK_EQ(pthread_rwlock_timedrdlock(&static_rw, &dl), ETIMEDOUT);
		dl = deadline_in(CLOCK_MONOTONIC, 20 * 1000000ull);
		CHECK_EQ(pthread_rwlock_clockrdlock(&static_rw, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
	}
	return NULL;
}

static void rwlocks(void)
{
	/* Recursive read locks must not deadlock behind a waiting writer. */
	CHECK_EQ(pthread_rwlock_rdlock(&static_rw), 0);
	pthread_t w;
	CHECK_EQ(pthread_create(&w, NULL, writer_waits, NULL), 0);
	sleep_ns(30 * 1000000ull);
	CHECK_EQ(pthread_rwlock_rdlock(&static_rw), 0);
	CHECK_EQ(pthread_rwlock_tryrdlock(&static_rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&static_rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&static_rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&static_rw), 0);
	CHECK_EQ(pthread_join(w, NULL), 0);

	int writer = 0;
	CHECK_EQ(pthread_rwlock_rdlock(&static_rw), 0);
	in_thread(rw_busy_for_others, &writer);
	CHECK_EQ(pthread_rwlock_unlock(&static_rw), 0);

	writer = 1;
	CHECK_EQ(pthread_rwlock_wrlock(&static_rw), 0);
	CHECK_EQ(pthread_rwlock_wrlock(&static_rw), EDEADLK);
	CHECK_EQ(pthread_rwlock_rdlock(&static_rw), EDEADLK);
	in_thread(rw_busy_for_others, &writer);
	CHECK_EQ(pthread_rwlock_unlock(&static_rw), 0);

	pthread_rwlock_t explicit_rw;
	CHECK_EQ(pthread_rwlock_init(&explicit_rw, NULL), 0);
	CHECK_EQ(pthread_rwlock_trywrlock(&explicit_rw), 0);
	CHECK_EQ(pthread_rwlock_unlock(&explicit_rw), 0);
	CHECK_EQ(pthread_rwlock_destroy(&explicit_rw), 0);
}

static int queue_len, produced_all;

static void *consumer(void *arg)
{
	long *got = arg;
	pthread_mutex_lock(&static_mutex);
	for (;;) {
		while (queue_len == 0 && !produced_all)
			pthread_cond_wait(&cond, &static_mutex);
		if (queue_len == 0)
			break;
		queue_len--;
		(*got)++;
	}
	pthread_mutex_unlock(&static_mutex);
	return NULL;
}

static void condition_variables(void)
{
	long got[4] = {0};
	pthread_t c[4];
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&c[i], NULL, consumer, &got[i]), 0);
	for (int i = 0; i < 2000; i++) {
		pthread_mutex_lock(&static_mutex);
		queue_len++;
		pthread_cond_signal(&cond);
		pthread_mutex_unlock(&static_mutex);
	}
	pthread_mutex_lock(&static_mutex);
	produced_all = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&static_mutex);
	long total = 0;
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(pthread_join(c[i], NULL), 0);
		total += got[i];
	}
	CHECK_EQ(total, 2000);

	/* A timed wait returns ETIMEDOUT holding the mutex again. */
	pthread_mutex_lock(&static_mutex);
	struct timespec dl = deadline_in(CLOCK_REALTIME, 10 * 1000000ull);
	CHECK_EQ(pthread_cond_timedwait(&cond, &static_mutex, &dl), ETIMEDOUT);
	dl = deadline_in(CLOCK_MONOTONIC, 10 * 1000000ull);
	CHECK_EQ(pthread_cond_clockwait(&cond, &static_mutex, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
	in_thread(try_mutex_busy, &static_mutex);
	pthread_mutex_unlock(&static_mutex);
}

static long mutex_counter, rwlock_counter;

static void *hammer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 300; i++) {
		pthread_mutex_lock(&static_mutex);
		mutex_counter++;
		pthread_mutex_unlock(&static_mutex);
		pthread_rwlock_wrlock(&static_rw);
		rwlock_counter++;
		pthread_rwlock_unlock(&static_rw);
		pthread_rwlock_rdlock(&static_rw);
		pthread_rwlock_unlock(&static_rw);
	}
	return NULL;
}

static void many_threads(void)
{
	enum { N = 300 };
	static pthread_t t[N];
	for (int i = 0; i < N; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < N; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	CHECK_EQ(mutex_counter, N * 300L);
	CHECK_EQ(rwlock_counter, N * 300L);
}

static void fork_and_shared(void)
{
	struct shm {
		pthread_rwlock_t rw;
		long value;
	} *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(s != MAP_FAILED);
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	CHECK_EQ(pthread_rwlock_init(&s->rw, &a), 0);
	pid_t kids[3];
	for (int k = 0; k < 3; k++) {
		kids[k] = test_fork();
		CHECK(kids[k] >= 0);
		if (kids[k] == 0) {
			/* Locks inherited from the parent work in the child. */
			CHECK_EQ(pthread_mutex_lock(&static_mutex), 0);
			CHECK_EQ(pthread_mutex_unlock(&static_mutex), 0);
			for (int i = 0; i < 1000; i++) {
				CHECK_EQ(pthread_rwlock_wrlock(&s->rw), 0);
				s->value++;
				CHECK_EQ(pthread_rwlock_unlock(&s->rw), 0);
			}
			_exit(0);
		}
	}
	for (int k = 0; k < 3; k++) {
		int status;
		CHECK_EQ(waitpid(kids[k], &status, 0), kids[k]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	CHECK_EQ(s->value, 3000);
	CHECK_EQ(pthread_rwlock_destroy(&s->rw), 0);
}

int main(void)
{
	watchdog(100);
	mutexes();
	rwlocks();
	condition_variables();
	many_threads();
	fork_and_shared();
	printf("shim_semantics: ok (RTACCEL_SHIM=%s)\n", getenv("RTACCEL_SHIM") ? getenv("RTACCEL_SHIM") : "");
	return T_PASS;
}
