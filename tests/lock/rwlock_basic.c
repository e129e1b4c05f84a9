/* Single-operation semantics of rtaccel_rwlock_t: try, timed and error codes
 * as POSIX specifies them for pthread_rwlock_*. */
#include "rtaccel/lock.h"
#include "test_util.h"

static rtaccel_rwlock_t lock = RTACCEL_RWLOCK_INITIALIZER;

static volatile int write_held, write_release;

/* Holds the write lock from another thread until told to let go. */
static void *hold_write(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_rwlock_wrlock(&lock), 0);
	write_held = 1;
	while (!write_release)
		sleep_ns(1000000);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	return NULL;
}

static void *timed_write_while_read_held(void *arg)
{
	(void)arg;
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, 50 * 1000000ull);
	CHECK_EQ(rtaccel_rwlock_clockwrlock(&lock, CLOCK_MONOTONIC, &dl), -ETIMEDOUT);
	CHECK_EQ(rtaccel_rwlock_trywrlock(&lock), -EBUSY);
	return NULL;
}

static void *try_and_timed_read_while_written(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_rwlock_tryrdlock(&lock), -EBUSY);
	struct timespec dl = deadline_in(CLOCK_REALTIME, 50 * 1000000ull);
	CHECK_EQ(rtaccel_rwlock_timedrdlock(&lock, &dl), -ETIMEDOUT);
	struct timespec bad = {0, 2000000000L};
	CHECK_EQ(rtaccel_rwlock_timedrdlock(&lock, &bad), -EINVAL);
	CHECK_EQ(rtaccel_rwlock_clockrdlock(&lock, CLOCK_PROCESS_CPUTIME_ID, &dl), -EINVAL);
	return NULL;
}

static void *try_write_while_written(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_rwlock_trywrlock(&lock), -EBUSY);
	struct timespec past = {1, 0};
	CHECK_EQ(rtaccel_rwlock_timedwrlock(&lock, &past), -ETIMEDOUT);
	return NULL;
}

static void run(void *(*fn)(void *))
{
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, fn, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
}

int main(void)
{
	watchdog(30);
	struct rtaccel_lock_attr bad_flags = {0x100, 0}, bad_ceiling = {RTACCEL_LOCK_BOOST, 100};
	CHECK_EQ(rtaccel_rwlock_init(&lock, &bad_flags), -EINVAL);
	CHECK_EQ(rtaccel_rwlock_init(&lock, &bad_ceiling), -EINVAL);
	CHECK_EQ(rtaccel_rwlock_init(&lock, NULL), 0);

	/* Readers share. */
	CHECK_EQ(rtaccel_rwlock_rdlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_tryrdlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_destroy(&lock), -EBUSY);
	run(timed_write_while_read_held);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);

	/* An invalid deadline is refused before the lock is looked at, as glibc
	 * does, even when the lock is free. */
	struct timespec bad = {0, -1};
	CHECK_EQ(rtaccel_rwlock_timedwrlock(&lock, &bad), -EINVAL);
	CHECK_EQ(rtaccel_rwlock_timedrdlock(&lock, &bad), -EINVAL);
	struct timespec later = deadline_in(CLOCK_MONOTONIC, 1000000ull);
	CHECK_EQ(rtaccel_rwlock_clockwrlock(&lock, CLOCK_PROCESS_CPUTIME_ID, &later), -EINVAL);
	CHECK_EQ(rtaccel_rwlock_wrlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_wrlock(&lock), -EDEADLK);
	CHECK_EQ(rtaccel_rwlock_rdlock(&lock), -EDEADLK);
	run(try_and_timed_read_while_written);
	run(try_write_while_written);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_wrunlock(&lock), -EPERM);

	/* After the timeouts above the lock is free and consistent. */
	CHECK_EQ(rtaccel_rwlock_trywrlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_tryrdlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);

	/* A blocked timed reader that gives up does not hold back the next writer. */
	pthread_t w;
	CHECK_EQ(pthread_create(&w, NULL, hold_write, NULL), 0);
	while (!write_held)
		sleep_ns(1000000);
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, 20 * 1000000ull);
	CHECK_EQ(rtaccel_rwlock_clockrdlock(&lock, CLOCK_MONOTONIC, &dl), -ETIMEDOUT);
	write_release = 1;
	CHECK_EQ(pthread_join(w, NULL), 0);
	CHECK_EQ(rtaccel_rwlock_wrlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	CHECK_EQ(rtaccel_rwlock_destroy(&lock), 0);

	/* The FIFO mutex: error checking. */
	rtaccel_mutex_t m = RTACCEL_MUTEX_INITIALIZER;
	CHECK_EQ(rtaccel_mutex_unlock(&m), -EPERM);
	CHECK_EQ(rtaccel_mutex_lock(&m), 0);
	CHECK_EQ(rtaccel_mutex_lock(&m), -EDEADLK);
	CHECK_EQ(rtaccel_mutex_trylock(&m), -EBUSY);
	CHECK_EQ(rtaccel_mutex_destroy(&m), -EBUSY);
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	CHECK_EQ(rtaccel_mutex_destroy(&m), 0);

	pthread_mutex_t pi;
	CHECK_EQ(rtaccel_pi_mutex_init(&pi, PTHREAD_MUTEX_ERRORCHECK, false), 0);
	CHECK_EQ(pthread_mutex_lock(&pi), 0);
	CHECK_EQ(pthread_mutex_lock(&pi), EDEADLK);
	CHECK_EQ(pthread_mutex_unlock(&pi), 0);
	CHECK_EQ(pthread_mutex_destroy(&pi), 0);
	puts("rwlock_basic: ok");
	return T_PASS;
}
