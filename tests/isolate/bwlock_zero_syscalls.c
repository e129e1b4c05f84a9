/* Taking and releasing the bandwidth lock makes no system call: a child runs
 * them under a seccomp filter that kills it on any system call but write and
 * exit_group. */
#include "rtaccel/isolate.h"
#include "test_util.h"

static rtaccel_bwlock_t *lock;
static rtaccel_bwlock_holder_t *holder;
static char name[64];

static void prepare(void)
{
	if (rtaccel_bwlock_open(name, &lock) != 0 ||
	    rtaccel_bwlock_holder_init(lock, "zero", 100, 0, &holder) != 0)
		_exit(T_FAIL);
}

static void take_release(void)
{
	for (int i = 0; i < 100000; i++) {
		if (rtaccel_bwlock_take(holder) != 0 || rtaccel_bwlock_take(holder) != 0 ||
		    rtaccel_bwlock_release(holder) != 0 || rtaccel_bwlock_release(holder) != 0)
			_exit(T_FAIL);
	}
}

int main(void)
{
	watchdog(30);
	snprintf(name, sizeof(name), "test-zero.%d", getpid());
	int rc = run_without_syscalls(prepare, take_release, "a bandwidth lock take or release");
	rtaccel_bwlock_unlink(name);
	return rc;
}
