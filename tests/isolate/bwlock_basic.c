/* The bandwidth lock's semantics: nesting, the smallest threshold among the
 * holders in force, holders of several processes, the priority ceiling, a
 * dead holder released by reap, a full lock, bad arguments. */
#include <sched.h>
#include <sys/wait.h>

#include "rtaccel/isolate.h"
#include "test_util.h"

static struct rtaccel_bwlock_status status_of(rtaccel_bwlock_t *lock)
{
	struct rtaccel_bwlock_status st;
	CHECK_EQ(rtaccel_bwlock_get_status(lock, &st), 0);
	return st;
}

static void nesting_and_thresholds(rtaccel_bwlock_t *lock)
{
	rtaccel_bwlock_holder_t *a, *b;
	CHECK_EQ(rtaccel_bwlock_holder_init(lock, "a", 500, 0, &a), 0);
	CHECK_EQ(rtaccel_bwlock_holder_init(lock, "b", 200, 0, &b), 0);
	CHECK_EQ(status_of(lock).threshold_mbps, RTACCEL_BWLOCK_UNLIMITED);
	CHECK_EQ(status_of(lock).holders, 2);
	CHECK_EQ(rtaccel_bwlock_take(a), 0);
	CHECK_EQ(status_of(lock).threshold_mbps, 500);
	CHECK_EQ(rtaccel_bwlock_take(a), 0); /* nested */
	CHECK_EQ(rtaccel_bwlock_take(b), 0);
	CHECK_EQ(status_of(lock).threshold_mbps, 200);
	CHECK_EQ(status_of(lock).held, 2);
	CHECK_EQ(rtaccel_bwlock_release(b), 0);
	CHECK_EQ(status_of(lock).threshold_mbps, 500);
	CHECK_EQ(rtaccel_bwlock_release(a), 0);
	CHECK_EQ(status_of(lock).threshold_mbps, 500); /* still held once */
	CHECK_EQ(rtaccel_bwlock_release(a), 0);
	CHECK_EQ(status_of(lock).threshold_mbps, RTACCEL_BWLOCK_UNLIMITED);
	CHECK_EQ(rtaccel_bwlock_release(a), -EINVAL);
	CHECK_EQ(status_of(lock).takes, 2); /* outermost takes only */

	struct rtaccel_bwlock_holder_info info[4];
	CHECK_EQ(rtaccel_bwlock_holders(lock, info, 4), 2);
	CHECK(strcmp(info[0].label, "a") == 0 && info[0].threshold_mbps == 500);
	CHECK_EQ(info[0].pid, getpid());
	CHECK_EQ(info[0].takes, 1);

	/* Destroying a holder that holds the lock releases it. */
	CHECK_EQ(rtaccel_bwlock_take(b), 0);
	rtaccel_bwlock_holder_destroy(b);
	CHECK_EQ(status_of(lock).held, 0);
	CHECK_EQ(status_of(lock).holders, 1);
	rtaccel_bwlock_holder_destroy(a);
}

/* A holder in another process counts; one that dies holding the lock keeps
 * it held until reap releases it. */
static void processes_and_dead_holders(const char *name, rtaccel_bwlock_t *lock)
{
	int to_parent[2];
	CHECK_EQ(pipe(to_parent), 0);
	pid_t child = test_fork();
	CHECK(child >= 0);
	if (child == 0) {
		rtaccel_bwlock_t *l;
		rtaccel_bwlock_holder_t *h;
		if (rtaccel_bwlock_open(name, &l) || rtaccel_bwlock_holder_init(l, "child", 50, 0, &h) ||
		    rtaccel_bwlock_take(h))
			_exit(T_FAIL);
		char c = 1;
		if (write(to_parent[1], &c, 1) != 1)
			_exit(T_FAIL);
		pause();
		_exit(T_PASS);
	}
	char c;
	CHECK_EQ(read(to_parent[0], &c, 1), 1);
	CHECK_EQ(status_of(lock).threshold_mbps, 50);
	CHECK_EQ(rtaccel_bwlock_reap(lock), 0); /* alive */
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	CHECK_EQ(status_of(lock).held, 1); /* nobody released it */
	CHECK_EQ(rtaccel_bwlock_reap(lock), 1);
	struct rtaccel_bwlock_status st = status_of(lock);
	CHECK_EQ(st.held, 0);
	CHECK_EQ(st.holders, 0);
	CHECK_EQ(st.reaped, 1);
	CHECK_EQ(st.threshold_mbps, RTACCEL_BWLOCK_UNLIMITED);
	close(to_parent[0]);
	close(to_parent[1]);
}

/* T_PASS, or the skip's status where SCHED_FIFO is not to be had. */
static int ceiling(rtaccel_bwlock_t *lock)
{
	struct sched_param sp = {.sched_priority = 10};
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		return test_skip_part("fifo", "the priority ceiling not checked: %s", strerror(errno));
	rtaccel_bwlock_holder_t *h;
	CHECK_EQ(rtaccel_bwlock_holder_init(lock, "ceiling", 100, 70, &h), 0);
	CHECK_EQ(rtaccel_bwlock_take(h), 0);
	CHECK_EQ(sched_getscheduler(0), SCHED_FIFO);
	CHECK_EQ(sched_getparam(0, &sp), 0);
	CHECK_EQ(sp.sched_priority, 70);
	CHECK_EQ(rtaccel_bwlock_release(h), 0);
	CHECK_EQ(sched_getparam(0, &sp), 0);
	CHECK_EQ(sp.sched_priority, 10);
	rtaccel_bwlock_holder_destroy(h);
	sp.sched_priority = 0;
	sched_setscheduler(0, SCHED_OTHER, &sp);
	return T_PASS;
}

static void limits_and_errors(rtaccel_bwlock_t *lock)
{
	rtaccel_bwlock_holder_t *h[RTACCEL_BWLOCK_MAX_HOLDERS + 1];
	for (int i = 0; i < RTACCEL_BWLOCK_MAX_HOLDERS; i++)
		CHECK_EQ(rtaccel_bwlock_holder_init(lock, "many", 1, 0, &h[i]), 0);
	CHECK_EQ(rtaccel_bwlock_holder_init(lock, "one-more", 1, 0, &h[RTACCEL_BWLOCK_MAX_HOLDERS]),
		 -ENOSPC);
	for (int i = 0; i < RTACCEL_BWLOCK_MAX_HOLDERS; i++)
		rtaccel_bwlock_holder_destroy(h[i]);

	rtaccel_bwlock_holder_t *x;
	CHECK_EQ(rtaccel_bwlock_holder_init(lock, "bad/label", 1, 0, &x), -EINVAL);
	CHECK_EQ(rtaccel_bwlock_holder_init(lock, "", 1, 0, &x), -EINVAL);
	CHECK_EQ(rtaccel_bwlock_holder_init(lock, "x", RTACCEL_BWLOCK_UNLIMITED, 0, &x), -EINVAL);
	CHECK_EQ(rtaccel_bwlock_holder_init(lock, "x", 1, 100, &x), -EINVAL);
	CHECK_EQ(rtaccel_bwlock_take(NULL), -EINVAL);
	rtaccel_bwlock_t *l;
	CHECK_EQ(rtaccel_bwlock_open("../escape", &l), -EINVAL);
	CHECK_EQ(rtaccel_bwlock_open(NULL, &l), -EINVAL);
}

int main(void)
{
	watchdog(30);
	char name[64];
	snprintf(name, sizeof(name), "test-basic.%d", getpid());
	rtaccel_bwlock_t *lock;
	CHECK_EQ(rtaccel_bwlock_open(name, &lock), 0);
	nesting_and_thresholds(lock);
	processes_and_dead_holders(name, lock);
	const int result = ceiling(lock);
	limits_and_errors(lock);
	rtaccel_bwlock_close(lock);
	CHECK_EQ(rtaccel_bwlock_unlink(name), 0);
	return result;
}
