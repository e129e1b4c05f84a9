/* Phase fairness, checked by order of entry:
 * - a reader that arrives while a writer holds enters right after that writer,
 *   before writers queued behind it (no writer preference: readers are not
 *   starved by a stream of writers);
 * - a writer that arrives while readers hold enters as soon as those readers
 *   leave, before readers that arrive after it (no reader preference);
 * - writers enter in the order they arrived. */
#include "rtaccel/lock.h"
#include "test_util.h"

static rtaccel_rwlock_t lock = RTACCEL_RWLOCK_INITIALIZER;
static char order[64];
static int order_len;
static const uint64_t gap = 40 * 1000000ull; /* wide, so arrival order is certain */

static void record(char who)
{
	int i = __atomic_fetch_add(&order_len, 1, __ATOMIC_SEQ_CST);
	order[i] = who;
}

static void *writer(void *arg)
{
	CHECK_EQ(rtaccel_rwlock_wrlock(&lock), 0);
	record(*(char *)arg);
	sleep_ns(gap / 4);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	return NULL;
}

static void *reader(void *arg)
{
	CHECK_EQ(rtaccel_rwlock_rdlock(&lock), 0);
	record(*(char *)arg);
	sleep_ns(gap / 4);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	return NULL;
}

/* The first arrival holds the lock for a long time so the others queue. */
static void *long_writer(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_rwlock_wrlock(&lock), 0);
	record('W');
	sleep_ns(gap * 5);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	return NULL;
}

static void *long_reader(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_rwlock_rdlock(&lock), 0);
	record('r');
	sleep_ns(gap * 5);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	return NULL;
}

static void queued_behind(void *(*first)(void *), const char *arrivals, const char *expected)
{
	pthread_t head;
	order_len = 0;
	memset(order, 0, sizeof(order));
	CHECK_EQ(pthread_create(&head, NULL, first, NULL), 0);
	sleep_ns(gap / 2);
	pthread_t t[16];
	static char names[16];
	int n = (int)strlen(arrivals);
	for (int i = 0; i < n; i++) {
		names[i] = arrivals[i];
		bool is_writer = arrivals[i] >= 'A' && arrivals[i] <= 'Z';
		CHECK_EQ(pthread_create(&t[i], NULL, is_writer ? writer : reader, &names[i]), 0);
		sleep_ns(gap / 2);
	}
	CHECK_EQ(pthread_join(head, NULL), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	printf("held by %c, arrivals %-6s entries %-8s (expected %s)\n",
	       first == long_writer ? 'W' : 'r', arrivals, order, expected);
	CHECK(strcmp(order, expected) == 0);
}

int main(void)
{
	watchdog(60);
	/* Writer holds; writer A queues, then reader b: b enters after W (one
	 * write phase), before A. Then A. */
	queued_behind(long_writer, "Ab", "WbA");
	/* Writer holds; A, B queue, then c: c enters after W, then A, then B
	 * (FIFO among writers). */
	queued_behind(long_writer, "ABc", "WcAB");
	/* Reader holds; writer A queues, then reader b: b waits for A. */
	queued_behind(long_reader, "Ab", "rAb");
	return T_PASS;
}
