/* Phase fairness, checked by order of entry:
 * - a reader that arrives while a writer holds enters right after that writer,
 *   before writers queued behind it (no writer preference: readers are not
 *   starved by a stream of writers);
 * - a writer that arrives while readers hold enters as soon as those readers
 *   leave, before readers that arrive after it (no reader preference);
 * - writers enter in the order they arrived. */
#include <stdatomic.h>
#include <stdbool.h>

#include "rtaccel/lock.h"
#include "test_util.h"

static rtaccel_rwlock_t lock = RTACCEL_RWLOCK_INITIALIZER;
static char order[64];
static int order_len;

static void record(char who)
{
	int i = __atomic_fetch_add(&order_len, 1, __ATOMIC_SEQ_CST);
	order[i] = who;
}

/* One arrival: a writer (upper case) or a reader (lower case). It says its
 * thread id before it asks for the lock, so that the test can see it asleep
 * in the queue before the next one arrives: the arrival order is made, not
 * hoped for. */
struct arrival {
	char who;
	_Atomic pid_t tid;
};

static void *arrive(void *arg)
{
	struct arrival *a = arg;
	const bool is_writer = a->who >= 'A' && a->who <= 'Z';
	atomic_store(&a->tid, self_tid());
	CHECK_EQ(is_writer ? rtaccel_rwlock_wrlock(&lock) : rtaccel_rwlock_rdlock(&lock), 0);
	record(a->who);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	return NULL;
}

/* HOLDER ('W' writes, 'r' reads) holds the lock while ARRIVALS queue one by
 * one, then lets go; the order of entry must be EXPECTED. */
static void queued_behind(char holder, const char *arrivals, const char *expected)
{
	order_len = 0;
	memset(order, 0, sizeof(order));
	CHECK_EQ(holder == 'W' ? rtaccel_rwlock_wrlock(&lock) : rtaccel_rwlock_rdlock(&lock), 0);
	record(holder);
	static struct arrival a[16];
	pthread_t t[16];
	const int n = (int)strlen(arrivals);
	for (int i = 0; i < n; i++) {
		a[i] = (struct arrival){.who = arrivals[i]};
		CHECK_EQ(pthread_create(&t[i], NULL, arrive, &a[i]), 0);
		while (!atomic_load(&a[i].tid))
			sleep_ns(100000);
		until_asleep(atomic_load(&a[i].tid));
	}
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	printf("held by %c, arrivals %-6s entries %-8s (expected %s)\n", holder, arrivals, order,
	       expected);
	CHECK(strcmp(order, expected) == 0);
}

int main(void)
{
	watchdog(60);
	/* Writer holds; writer A queues, then reader b: b enters after W (one
	 * write phase), before A. Then A. */
	queued_behind('W', "Ab", "WbA");
	/* Writer holds; A, B queue, then c: c enters after W, then A, then B
	 * (FIFO among writers). */
	queued_behind('W', "ABc", "WcAB");
	/* Reader holds; writer A queues, then reader b: b waits for A. */
	queued_behind('r', "Ab", "rAb");
	return T_PASS;
}
