/* The gang lock's API: argument checks, membership rules, uncontended jobs,
 * the status snapshot, named locks shared by open, a thread's statistics. */
#include "rtaccel/isolate.h"
#include "test_util.h"

#include <sys/wait.h>

static rtaccel_gang_lock_t *lock;

static void *second_member(void *arg)
{
	(void)arg;
	/* Another thread may join the same gang; a different priority or
	 * threshold under the same name is refused. */
	CHECK_EQ(rtaccel_gang_join(lock, "g", 20, 0), -EEXIST);
	CHECK_EQ(rtaccel_gang_join(lock, "g", 10, 5), -EEXIST);
	CHECK_EQ(rtaccel_gang_join(lock, "g", 10, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	return NULL;
}

int main(void)
{
	watchdog(30);
	char name[64];
	snprintf(name, sizeof(name), "test-basic-%d", getpid());

	CHECK_EQ(rtaccel_gang_lock_open("bad/name", &lock), -EINVAL);
	CHECK_EQ(rtaccel_gang_lock_open("", &lock), -EINVAL);
	CHECK_EQ(rtaccel_gang_lock_open(name, &lock), 0);

	/* Not a member yet. */
	CHECK_EQ(rtaccel_gang_job_begin(), -EPERM);
	CHECK_EQ(rtaccel_gang_job_end(), -EPERM);
	CHECK_EQ(rtaccel_gang_leave(), -EPERM);

	CHECK_EQ(rtaccel_gang_join(lock, "g", 0, 0), -EINVAL);
	CHECK_EQ(rtaccel_gang_join(lock, "g", 100, 0), -EINVAL);
	CHECK_EQ(rtaccel_gang_join(lock, "", 10, 0), -EINVAL);
	CHECK_EQ(rtaccel_gang_join(lock, "a name that is far too long for a gang", 10, 0), -EINVAL);
	CHECK_EQ(rtaccel_gang_join(lock, "white space", 10, 0), -EINVAL);
	CHECK_EQ(rtaccel_gang_join(NULL, "g", 10, 0), -EINVAL);
	CHECK_EQ(rtaccel_gang_join(lock, "g", 10, 0), 0);
	CHECK_EQ(rtaccel_gang_join(lock, "g", 10, 0), -EBUSY);

	CHECK_EQ(rtaccel_gang_job_end(), -EINVAL);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), -EDEADLK);
	struct rtaccel_gang_status st;
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.running_priority, 10);
	CHECK_EQ(st.running, 1);
	CHECK_EQ(st.members, 1);
	CHECK_EQ(st.waiting, 0);
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.running_priority, 0);
	CHECK_EQ(st.running, 0);

	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, second_member, NULL), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);

	/* A second handle on the same name sees the same lock. */
	rtaccel_gang_lock_t *again;
	CHECK_EQ(rtaccel_gang_lock_open(name, &again), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	CHECK_EQ(rtaccel_gang_lock_status(again, &st), 0);
	CHECK_EQ(st.running_priority, 10);
	rtaccel_gang_lock_close(again);

	/* A forked child is not a member. */
	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(rtaccel_gang_job_end() == -EPERM ? 0 : 1);
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	CHECK_EQ(rtaccel_gang_job_end(), 0);
	struct rtaccel_gang_thread_stats ts;
	CHECK_EQ(rtaccel_gang_self_stats(&ts), 0);
	CHECK_EQ(ts.jobs, 2);
	CHECK_EQ(ts.waits, 0);
	CHECK_EQ(ts.parks, 0);

	/* Leaving inside a job ends it. */
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.running_priority, 0);
	CHECK_EQ(st.members, 0);

	/* Thresholds: the running virtual gang's smallest. */
	CHECK_EQ(rtaccel_gang_join(lock, "h", 30, 200), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.threshold_mbps, 200);
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);

	/* The park signal is the layer's: a process that handles it itself
	 * cannot join. */
	pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		signal(rtaccel_gang_signal(), watchdog_fired);
		_exit(rtaccel_gang_join(lock, "x", 5, 0) == -EBUSY ? 0 : 1);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	rtaccel_gang_lock_close(lock);
	CHECK_EQ(rtaccel_gang_lock_unlink(name), 0);
	CHECK_EQ(rtaccel_gang_lock_unlink(name), -ENOENT);
	printf("gang lock API: ok\n");
	return T_PASS;
}
