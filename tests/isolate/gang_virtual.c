/* Virtual gangs: two gangs of one priority, in two processes, run their jobs
 * together; a higher gang stops both; a lower gang gets the lock only when
 * the last thread of the virtual gang has ended its job. */
#include "rtaccel/isolate.h"
#include "test_util.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

struct shared {
	_Atomic int b_in_job;
	_Atomic int b_may_end;
	_Atomic uint64_t b_ended_ns;
	_Atomic uint64_t b_stamp;
	_Atomic long b_waits;
};

static struct shared *sh;
static rtaccel_gang_lock_t *lock;

static void *lower_thread(void *arg)
{
	uint64_t *granted = arg;
	CHECK_EQ(rtaccel_gang_join(lock, "lower", 10, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	*granted = now_ns(CLOCK_MONOTONIC);
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	return NULL;
}

static void *high_thread(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_gang_join(lock, "high", 50, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	uint64_t before = atomic_load(&sh->b_stamp);
	sleep_ns(50 * 1000 * 1000);
	CHECK_EQ(atomic_load(&sh->b_stamp), before); /* b is parked */
	struct rtaccel_gang_status st;
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.parked, 2);
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	return NULL;
}

int main(void)
{
	watchdog(60);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	CHECK_EQ(rtaccel_gang_lock_create_private(&lock), 0);

	/* Gang "a": this process. */
	CHECK_EQ(rtaccel_gang_join(lock, "a", 20, 100), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);

	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* Gang "b", same priority: in without waiting. */
		CHECK_EQ(rtaccel_gang_join(lock, "b", 20, 50), 0);
		CHECK_EQ(rtaccel_gang_job_begin(), 0);
		atomic_store(&sh->b_in_job, 1);
		while (!atomic_load(&sh->b_may_end))
			atomic_store(&sh->b_stamp, now_ns(CLOCK_MONOTONIC));
		struct rtaccel_gang_thread_stats ts;
		CHECK_EQ(rtaccel_gang_self_stats(&ts), 0);
		atomic_store(&sh->b_waits, (long)ts.waits);
		atomic_store(&sh->b_ended_ns, now_ns(CLOCK_MONOTONIC));
		CHECK_EQ(rtaccel_gang_job_end(), 0);
		CHECK_EQ(rtaccel_gang_leave(), 0);
		_exit(0);
	}
	for (int i = 0; !atomic_load(&sh->b_in_job); i++) {
		CHECK(i < 2000);
		sleep_ns(1000 * 1000);
	}
	struct rtaccel_gang_status st;
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.running_priority, 20);
	CHECK_EQ(st.running, 2);
	CHECK_EQ(st.threshold_mbps, 50); /* the virtual gang's smallest */

	/* A higher gang stops both members (this thread is parked while the
	 * high thread runs, so the check runs there). */
	pthread_t high;
	CHECK_EQ(pthread_create(&high, NULL, high_thread, NULL), 0);
	CHECK_EQ(pthread_join(high, NULL), 0);

	/* A lower gang waits for the last of a and b. */
	uint64_t lower_granted = 0;
	pthread_t lower;
	CHECK_EQ(pthread_create(&lower, NULL, lower_thread, &lower_granted), 0);
	sleep_ns(30 * 1000 * 1000);
	CHECK_EQ(rtaccel_gang_job_end(), 0); /* a ends; b is still in */
	sleep_ns(30 * 1000 * 1000);
	CHECK_EQ(__atomic_load_n(&lower_granted, __ATOMIC_SEQ_CST), 0);
	atomic_store(&sh->b_may_end, 1);
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(pthread_join(lower, NULL), 0);
	CHECK(lower_granted >= atomic_load(&sh->b_ended_ns));
	CHECK_EQ(atomic_load(&sh->b_waits), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	printf("virtual gang: members run together, preempted together, release together: ok\n");
	return T_PASS;
}
