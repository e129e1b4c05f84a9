/* The FIFO mutex serves waiters in arrival order, also when a timed waiter in
 * the middle of the queue gives up. The arrival order is made, not waited
 * for: each waiter is asleep in the queue before the next one starts. */
#include <stdatomic.h>
#include <stdbool.h>

#include "rtaccel/lock.h"
#include "test_util.h"

static rtaccel_mutex_t m = RTACCEL_MUTEX_INITIALIZER;
static char order[32];
static int order_len;
static const uint64_t give_up = 30 * 1000000ull;

struct waiter {
	char who;
	_Atomic pid_t tid;
};

static void *wait_for_mutex(void *arg)
{
	struct waiter *w = arg;
	atomic_store(&w->tid, self_tid());
	if (w->who == 'x') { /* gives up while the mutex is still held */
		struct timespec dl = deadline_in(CLOCK_MONOTONIC, give_up);
		CHECK_EQ(rtaccel_mutex_clocklock(&m, CLOCK_MONOTONIC, &dl), -ETIMEDOUT);
		return NULL;
	}
	if (w->who == 'y') { /* gives up, unless the ring is full and it is served */
		struct timespec dl = deadline_in(CLOCK_MONOTONIC, give_up);
		int r = rtaccel_mutex_clocklock(&m, CLOCK_MONOTONIC, &dl);
		CHECK(r == 0 || r == -ETIMEDOUT);
		if (r == 0)
			CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
		return NULL;
	}
	CHECK_EQ(rtaccel_mutex_lock(&m), 0);
	order[order_len++] = w->who;
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	return NULL;
}

int main(void)
{
	watchdog(60);
	static const char names[] = "abxcdxe";
	const int n = (int)strlen(names);
	static struct waiter w[16];
	pthread_t t[16];
	CHECK_EQ(rtaccel_mutex_lock(&m), 0);
	for (int i = 0; i < n; i++) {
		w[i].who = names[i];
		CHECK_EQ(pthread_create(&t[i], NULL, wait_for_mutex, &w[i]), 0);
		while (!atomic_load(&w[i].tid))
			sleep_ns(100000);
		until_asleep(atomic_load(&w[i].tid)); /* queued: the next arrives after it */
	}
	/* the two that give up have done so before the mutex is free */
	for (int i = 0; i < n; i++)
		if (names[i] == 'x')
			CHECK_EQ(pthread_join(t[i], NULL), 0);
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	for (int i = 0; i < n; i++)
		if (names[i] != 'x')
			CHECK_EQ(pthread_join(t[i], NULL), 0);
	printf("arrivals %s, entries %s\n", names, order);
	CHECK(strcmp(order, "abcde") == 0);

	/* More waiters give up at once than the abandonment ring holds: those
	 * beyond it wait for the queue to move, then give up or are served
	 * (either is right, so no order is needed). */
	CHECK_EQ(rtaccel_mutex_lock(&m), 0);
	static struct waiter many[79];
	pthread_t u[79];
	for (int i = 0; i < 79; i++) {
		many[i].who = 'y';
		CHECK_EQ(pthread_create(&u[i], NULL, wait_for_mutex, &many[i]), 0);
	}
	sleep_ns(4 * give_up);
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	for (int i = 0; i < 79; i++)
		CHECK_EQ(pthread_join(u[i], NULL), 0);
	CHECK_EQ(rtaccel_mutex_trylock(&m), 0);
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	CHECK_EQ(rtaccel_mutex_destroy(&m), 0);
	return T_PASS;
}
