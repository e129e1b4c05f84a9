/* Uncontended job_begin and job_end make no system call: a child runs them
 * under a seccomp filter that kills it on any system call but write and
 * exit_group. preempt_disable/enable too. */
#include "rtaccel/isolate.h"
#include "test_util.h"

static rtaccel_gang_lock_t *lock;

static void join(void)
{
	if (rtaccel_gang_join(lock, "solo", 10, 0) != 0)
		_exit(T_FAIL);
}

static void jobs(void)
{
	for (int i = 0; i < 100000; i++) {
		if (rtaccel_gang_job_begin() != 0)
			_exit(T_FAIL);
		rtaccel_gang_preempt_disable();
		rtaccel_gang_preempt_enable();
		if (rtaccel_gang_job_end() != 0)
			_exit(T_FAIL);
	}
}

int main(void)
{
	watchdog(30);
	CHECK_EQ(rtaccel_gang_lock_create_private(&lock), 0);
	return run_without_syscalls(join, jobs, "a gang operation");
}
