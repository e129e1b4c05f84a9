/* POSIX's rule for SCHED_FIFO readers, on top of phase fairness: a reader
 * whose priority is above every waiting writer's enters while no writer
 * holds the lock (through the gate); one of equal priority waits for the
 * writer, as does every SCHED_OTHER reader (phase fairness). A writer that
 * has drained the ordinary readers still waits for the gate's, and the lock
 * is whole after all of it. Needs SCHED_FIFO: skipped without it. */
#include <stdatomic.h>
#include <stdbool.h>

#include "rtaccel/lock.h"
#include "test_util.h"

static rtaccel_rwlock_t lock;
static volatile int writer_in;
static _Atomic pid_t writer_tid;

/* Explicitly, also for SCHED_OTHER: a thread inherits its creator's policy,
 * and with boosting the creator (a read holder) runs at the ceiling. */
static void set_fifo(int priority)
{
	struct sched_param sp = {.sched_priority = priority};
	CHECK_EQ(pthread_setschedparam(pthread_self(), priority ? SCHED_FIFO : SCHED_OTHER, &sp), 0);
}

static void *writer(void *arg)
{
	(void)arg;
	set_fifo(10);
	atomic_store(&writer_tid, self_tid());
	CHECK_EQ(rtaccel_rwlock_wrlock(&lock), 0);
	writer_in = 1;
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	return NULL;
}

struct reader_case {
	int priority; /* 0: SCHED_OTHER */
	bool hold;    /* until release is set */
	int result;   /* of a 100 ms timed read lock */
	volatile int inside, release;
};

static void *reader(void *arg)
{
	struct reader_case *c = arg;
	set_fifo(c->priority);
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, 100 * 1000000ull);
	c->result = -rtaccel_rwlock_clockrdlock(&lock, CLOCK_MONOTONIC, &dl);
	if (c->result == 0) {
		c->inside = 1;
		while (c->hold && !c->release)
			sleep_ns(1000000);
		c->inside = 0;
		CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	}
	return NULL;
}

static void *try_reader(void *arg)
{
	struct reader_case *c = arg;
	set_fifo(c->priority);
	c->result = -rtaccel_rwlock_tryrdlock(&lock);
	if (c->result == 0)
		CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	return NULL;
}

static int run(void *(*fn)(void *), struct reader_case *c)
{
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, fn, c), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	return c->result;
}

static void scenario(uint32_t flags)
{
	struct rtaccel_lock_attr attr = {flags, 0};
	CHECK_EQ(rtaccel_rwlock_init(&lock, &attr), 0);
	writer_in = 0;
	atomic_store(&writer_tid, 0);

	/* An ordinary reader holds; a SCHED_FIFO 10 writer waits for it (asleep
	 * in the lock: made sure of, not waited for). */
	CHECK_EQ(rtaccel_rwlock_rdlock(&lock), 0);
	pthread_t w;
	CHECK_EQ(pthread_create(&w, NULL, writer, NULL), 0);
	while (!atomic_load(&writer_tid))
		sleep_ns(1000000);
	until_asleep(atomic_load(&writer_tid));

	struct reader_case other = {.priority = 0, .result = -1}, equal = {.priority = 10, .result = -1},
			   higher = {.priority = 20, .result = -1};
	CHECK_EQ(run(try_reader, &other), EBUSY);   /* phase fairness */
	CHECK_EQ(run(try_reader, &equal), EBUSY);   /* POSIX: equal priority waits */
	CHECK_EQ(run(try_reader, &higher), 0);      /* POSIX: higher priority enters */
	CHECK_EQ(run(reader, &equal), ETIMEDOUT);
	CHECK_EQ(run(reader, &higher), 0);

	/* A higher reader inside the gate when the ordinary reader leaves: the
	 * writer, drained, waits for it too, as long as it holds. */
	struct reader_case holder = {.priority = 20, .hold = true, .result = -1};
	pthread_t h;
	CHECK_EQ(pthread_create(&h, NULL, reader, &holder), 0);
	while (!holder.inside && holder.result != ETIMEDOUT)
		sleep_ns(1000000);
	CHECK_EQ(holder.result, 0);
	CHECK_EQ(rtaccel_rwlock_unlock(&lock), 0);
	sleep_ns(20 * 1000000ull); /* the writer's chance to get in wrongly */
	CHECK(holder.inside && !writer_in); /* it waits at the gate */
	holder.release = 1;
	CHECK_EQ(pthread_join(h, NULL), 0);
	CHECK_EQ(pthread_join(w, NULL), 0);
	CHECK(writer_in);
	CHECK_EQ(rtaccel_rwlock_destroy(&lock), 0);
	CHECK_EQ(rtaccel_lock_boost_failures(), 0);
}

int main(void)
{
	watchdog(60);
	if (!can_use_fifo())
		test_skip("fifo", "SCHED_FIFO not permitted (root or CAP_SYS_NICE)");
	scenario(0);
	scenario(RTACCEL_LOCK_BOOST);
	scenario(RTACCEL_LOCK_PSHARED);
	puts("rwlock_rt_readers: ok");
	return T_PASS;
}
