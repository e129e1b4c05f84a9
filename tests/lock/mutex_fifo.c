/* The FIFO mutex serves waiters in arrival order, also when a timed waiter in
 * the middle of the queue gives up. */
#include "rtaccel/lock.h"
#include "test_util.h"

static rtaccel_mutex_t m = RTACCEL_MUTEX_INITIALIZER;
static char order[32];
static int order_len;
static const uint64_t gap = 30 * 1000000ull;

static void *waiter(void *arg)
{
	char who = *(char *)arg;
	if (who == 'x') { /* gives up long before the holder releases */
		struct timespec dl = deadline_in(CLOCK_MONOTONIC, gap);
		CHECK_EQ(rtaccel_mutex_clocklock(&m, CLOCK_MONOTONIC, &dl), -ETIMEDOUT);
		return NULL;
	}
	if (who == 'y') { /* gives up, unless the ring is full and it is served */
		struct timespec dl = deadline_in(CLOCK_MONOTONIC, gap);
		int r = rtaccel_mutex_clocklock(&m, CLOCK_MONOTONIC, &dl);
		CHECK(r == 0 || r == -ETIMEDOUT);
		if (r == 0)
			CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
		return NULL;
	}
	CHECK_EQ(rtaccel_mutex_lock(&m), 0);
	order[order_len++] = who;
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	return NULL;
}

int main(void)
{
	watchdog(60);
	static char names[] = "abxcdxe";
	int n = (int)strlen(names);
	pthread_t t[16];
	CHECK_EQ(rtaccel_mutex_lock(&m), 0);
	for (int i = 0; i < n; i++) {
		CHECK_EQ(pthread_create(&t[i], NULL, waiter, &names[i]), 0);
		sleep_ns(gap / 2);
	}
	sleep_ns(3 * gap);
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	printf("arrivals %s, entries %s\n", names, order);
	CHECK(strcmp(order, "abcde") == 0);

	/* More waiters give up at once than the abandonment ring holds: those
	 * beyond it wait for the queue to move, then give up or are served. */
	CHECK_EQ(rtaccel_mutex_lock(&m), 0);
	static char many[80];
	memset(many, 'y', sizeof(many) - 1);
	pthread_t u[79];
	for (int i = 0; i < 79; i++)
		CHECK_EQ(pthread_create(&u[i], NULL, waiter, &many[i]), 0);
	sleep_ns(4 * gap);
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	for (int i = 0; i < 79; i++)
		CHECK_EQ(pthread_join(u[i], NULL), 0);
	CHECK_EQ(rtaccel_mutex_trylock(&m), 0);
	CHECK_EQ(rtaccel_mutex_unlock(&m), 0);
	CHECK_EQ(rtaccel_mutex_destroy(&m), 0);
	return T_PASS;
}
