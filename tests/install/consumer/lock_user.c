/* Uses the installed lock library: one phase-fair rwlock, read then write. */
#include <rtaccel/lock.h>
#include <stdio.h>

int main(void)
{
	rtaccel_rwlock_t lock = RTACCEL_RWLOCK_INITIALIZER;
	if (rtaccel_rwlock_rdlock(&lock) || rtaccel_rwlock_unlock(&lock) ||
	    rtaccel_rwlock_wrlock(&lock) || rtaccel_rwlock_unlock(&lock) ||
	    rtaccel_rwlock_destroy(&lock)) {
		fputs("lock_user: the installed lock library misbehaves\n", stderr);
		return 1;
	}
	puts("lock_user: ok");
	return 0;
}
