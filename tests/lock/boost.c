/* The boosting progress mechanism: a waiter raises itself and the holders to
 * the ceiling, and each thread gets exactly its own attributes back when it
 * holds no boosting lock any more - after nested holds released out of order,
 * after a try-lock, after a timed wait that gave up, for SCHED_OTHER (with its
 * nice value) and SCHED_RR threads. Needs SCHED_FIFO rights. */
#include <stdatomic.h>

#include "rtaccel/lock.h"
#include "test_util.h"

#include <semaphore.h>
#include <sys/resource.h>

#define CEILING 60

struct attrs {
	uint32_t policy;
	int prio;
	int nice;
};

static struct attrs attrs_of(pid_t tid)
{
	struct {
		uint32_t size, policy;
		uint64_t flags;
		int32_t nice;
		uint32_t prio;
		uint64_t runtime, deadline, period;
	} a;
	memset(&a, 0, sizeof(a));
	CHECK(syscall(SYS_sched_getattr, tid, &a, sizeof(a), 0) == 0);
	struct attrs r = {a.policy, (int)a.prio, a.nice};
	return r;
}

static int is_boosted(pid_t tid)
{
	struct attrs a = attrs_of(tid);
	return a.policy == SCHED_FIFO && a.prio == CEILING;
}

static void wait_until_boosted(pid_t tid, int want)
{
	for (int i = 0; i < 2000 && is_boosted(tid) != want; i++)
		sleep_ns(1000000);
	CHECK_EQ(is_boosted(tid), want);
}

static rtaccel_rwlock_t l1, l2;
static sem_t go_release_1, go_release_2, released, holder_ready;
static pid_t holder_tid;
static struct attrs holder_before;

enum hold_kind { READ, WRITE, TRY_READ };

static void hold(rtaccel_rwlock_t *l, enum hold_kind k)
{
	if (k == READ)
		CHECK_EQ(rtaccel_rwlock_rdlock(l), 0);
	else if (k == WRITE)
		CHECK_EQ(rtaccel_rwlock_wrlock(l), 0);
	else
		CHECK_EQ(rtaccel_rwlock_tryrdlock(l), 0);
}

struct holder_plan {
	int policy, prio, nice;
	enum hold_kind k1, k2;
	int two_locks;
};

static void set_self(int policy, int prio, int nice)
{
	struct sched_param sp = {.sched_priority = prio};
	CHECK_EQ(pthread_setschedparam(pthread_self(), policy, &sp), 0);
	if (policy == SCHED_OTHER)
		CHECK_EQ(setpriority(PRIO_PROCESS, (id_t)self_tid(), nice), 0);
}

static void *holder(void *arg)
{
	struct holder_plan *p = arg;
	set_self(p->policy, p->prio, p->nice);
	holder_tid = self_tid();
	holder_before = attrs_of(0);
	hold(&l1, p->k1);
	if (p->two_locks)
		hold(&l2, p->k2);
	sem_post(&holder_ready);
	sem_wait(&go_release_1);
	CHECK_EQ(rtaccel_rwlock_unlock(&l1), 0); /* out of order when nested */
	sem_post(&released);
	if (p->two_locks) {
		sem_wait(&go_release_2);
		CHECK_EQ(rtaccel_rwlock_unlock(&l2), 0);
		sem_post(&released);
	}
	sem_wait(&go_release_1);
	return NULL;
}

struct waiter_plan {
	rtaccel_rwlock_t *l;
	int write;
	int policy, prio, nice;
	_Atomic pid_t tid; /* set by the waiter before it asks for the lock */
};

static void *waiter(void *arg)
{
	struct waiter_plan *p = arg;
	set_self(p->policy, p->prio, p->nice);
	atomic_store(&p->tid, self_tid());
	struct attrs before = attrs_of(0);
	CHECK_EQ(p->write ? rtaccel_rwlock_wrlock(p->l) : rtaccel_rwlock_rdlock(p->l), 0);
	CHECK(is_boosted(0)); /* it had to wait, so it holds at the ceiling */
	CHECK_EQ(rtaccel_rwlock_unlock(p->l), 0);
	struct attrs after = attrs_of(0);
	CHECK(after.policy == before.policy && after.prio == before.prio &&
	      after.nice == before.nice);
	return NULL;
}

static void check_holder_restored(void)
{
	struct attrs a = attrs_of(holder_tid);
	CHECK_EQ(a.policy, holder_before.policy);
	CHECK_EQ(a.prio, holder_before.prio);
	CHECK_EQ(a.nice, holder_before.nice);
}

static void scenario(const char *name, struct holder_plan hp, struct waiter_plan w1,
		     struct waiter_plan w2)
{
	pthread_t h, t1, t2;
	CHECK_EQ(pthread_create(&h, NULL, holder, &hp), 0);
	sem_wait(&holder_ready);
	CHECK(!is_boosted(holder_tid)); /* lazy: holding alone costs nothing */
	CHECK_EQ(pthread_create(&t1, NULL, waiter, &w1), 0);
	wait_until_boosted(holder_tid, 1);
	if (hp.two_locks) {
		/* the second waiter waits on l2 before l1 is released: made sure
		 * of, since the holder must stay boosted for it */
		atomic_store(&w2.tid, 0);
		CHECK_EQ(pthread_create(&t2, NULL, waiter, &w2), 0);
		while (!atomic_load(&w2.tid))
			sleep_ns(1000000);
		until_asleep(atomic_load(&w2.tid));
	}
	sem_post(&go_release_1);
	sem_wait(&released);
	if (hp.two_locks) {
		CHECK(is_boosted(holder_tid)); /* still holds l2 */
		sem_post(&go_release_2);
		sem_wait(&released);
	}
	check_holder_restored();
	sem_post(&go_release_1);
	CHECK_EQ(pthread_join(h, NULL), 0);
	CHECK_EQ(pthread_join(t1, NULL), 0);
	if (hp.two_locks)
		CHECK_EQ(pthread_join(t2, NULL), 0);
	printf("%-44s boosted while waited on, restored exactly\n", name);
}

static void *timed_waiter(void *arg)
{
	(void)arg;
	set_self(SCHED_OTHER, 0, 3);
	struct attrs before = attrs_of(0);
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, 100 * 1000000ull);
	CHECK_EQ(rtaccel_rwlock_clockwrlock(&l1, CLOCK_MONOTONIC, &dl), -ETIMEDOUT);
	struct attrs after = attrs_of(0);
	CHECK(after.policy == before.policy && after.nice == before.nice);
	return NULL;
}

int main(void)
{
	watchdog(60);
	if (!can_use_fifo())
		test_skip("fifo", "boosting needs SCHED_FIFO rights (root or CAP_SYS_NICE)");
	struct rtaccel_lock_attr a = {RTACCEL_LOCK_BOOST, CEILING};
	CHECK_EQ(rtaccel_rwlock_init(&l1, &a), 0);
	CHECK_EQ(rtaccel_rwlock_init(&l2, &a), 0);
	sem_init(&go_release_1, 0, 0);
	sem_init(&go_release_2, 0, 0);
	sem_init(&released, 0, 0);
	sem_init(&holder_ready, 0, 0);

	struct waiter_plan wr1 = {&l1, 1, SCHED_FIFO, 10, 0, 0};
	struct waiter_plan rd1 = {&l1, 0, SCHED_FIFO, 20, 0, 0};
	struct waiter_plan wr2 = {&l2, 1, SCHED_OTHER, 0, 0, 0};
	struct waiter_plan rd2 = {&l2, 0, SCHED_FIFO, 30, 0, 0};
	scenario("reader SCHED_OTHER nice 5, writer waits",
		 (struct holder_plan){SCHED_OTHER, 0, 5, READ, READ, 0}, wr1, wr1);
	scenario("writer SCHED_RR 5, reader waits",
		 (struct holder_plan){SCHED_RR, 5, 0, WRITE, READ, 0}, rd1, rd1);
	scenario("try-locked reader SCHED_BATCH-like nice 10",
		 (struct holder_plan){SCHED_OTHER, 0, 10, TRY_READ, READ, 0}, wr1, wr1);
	scenario("nested read+write, released out of order",
		 (struct holder_plan){SCHED_OTHER, 0, 2, READ, WRITE, 1}, wr1, rd2);
	scenario("nested write+read, released out of order",
		 (struct holder_plan){SCHED_FIFO, 7, 0, WRITE, READ, 1}, rd1, wr2);

	/* A waiter that gives up gets its own attributes back. */
	CHECK_EQ(rtaccel_rwlock_wrlock(&l1), 0);
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, timed_waiter, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(rtaccel_rwlock_unlock(&l1), 0);
	CHECK_EQ(rtaccel_lock_boost_failures(), 0);
	puts("timed waiter that gives up                   restored exactly");
	return T_PASS;
}
