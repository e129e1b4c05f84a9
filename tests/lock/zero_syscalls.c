/* Uncontended lock and unlock make no system call, with boosting on too: a
 * child runs them under a seccomp filter that kills it on any system call but
 * write and exit_group. */
#include "rtaccel/lock.h"
#include "test_util.h"

static rtaccel_rwlock_t plain, boosted;
static rtaccel_mutex_t fifo;

static void exercise(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		rtaccel_rwlock_t *l = i & 1 ? &boosted : &plain;
		if (rtaccel_rwlock_rdlock(l) || rtaccel_rwlock_unlock(l) ||
		    rtaccel_rwlock_wrlock(l) || rtaccel_rwlock_unlock(l) ||
		    rtaccel_rwlock_tryrdlock(l) || rtaccel_rwlock_rdunlock(l) ||
		    rtaccel_rwlock_trywrlock(l) || rtaccel_rwlock_wrunlock(l) ||
		    rtaccel_mutex_lock(&fifo) || rtaccel_mutex_unlock(&fifo))
			_exit(T_FAIL);
		/* Nested holds of two boosting-capable locks. */
		if (rtaccel_rwlock_rdlock(&boosted) || rtaccel_rwlock_wrlock(&plain) ||
		    rtaccel_rwlock_unlock(&boosted) || rtaccel_rwlock_unlock(&plain))
			_exit(T_FAIL);
	}
}

/* The thread id is read once, before the filter. */
static void prepare(void) { exercise(1); }
static void body(void) { exercise(100000); }

int main(void)
{
	watchdog(30);
	struct rtaccel_lock_attr b = {RTACCEL_LOCK_BOOST, 0};
	CHECK_EQ(rtaccel_rwlock_init(&plain, NULL), 0);
	CHECK_EQ(rtaccel_rwlock_init(&boosted, &b), 0);
	CHECK_EQ(rtaccel_mutex_init(&fifo, NULL), 0);
	return run_without_syscalls(prepare, body, "a lock operation");
}
