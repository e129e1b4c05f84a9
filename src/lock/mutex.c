/* FIFO (ticket) mutex with futex sleeping and timeouts, and the helper that
 * creates priority-inheritance pthread mutexes. */
#include "lock_internal.h"

#include <string.h>

int rtaccel_mutex_init(rtaccel_mutex_t *m, const struct rtaccel_lock_attr *attr)
{
	memset(m, 0, sizeof(*m));
	if (attr) {
		if (attr->flags & ~RTACCEL_LOCK_PSHARED)
			return -EINVAL;
		m->flags = attr->flags;
	}
	return 0;
}

int rtaccel_mutex_destroy(rtaccel_mutex_t *m)
{
	return LOAD(&m->q.next) != LOAD(&m->q.serving) ? -EBUSY : 0;
}

static inline bool mutex_shared(const rtaccel_mutex_t *m) { return m->flags & RTACCEL_LOCK_PSHARED; }

int rtaccel_mutex_trylock(rtaccel_mutex_t *m)
{
	uint32_t ticket;
	if (!ticketq_try(&m->q, &ticket))
		return -EBUSY;
	STORE(&m->owner, lock_self_tid());
	return 0;
}

static int mutex_acquire(rtaccel_mutex_t *m, clockid_t clock, const struct timespec *abs)
{
	uint32_t me = lock_self_tid();
	if (LOAD_RELAXED(&m->owner) == me)
		return -EDEADLK;
	if (abs) {
		if (rtaccel_mutex_trylock(m) == 0)
			return 0;
		int r = check_deadline(clock, abs);
		if (r < 0)
			return r;
	}
	uint32_t ticket = FETCH_ADD(&m->q.next, 1);
	int r = ticketq_wait(&m->q, ticket, mutex_shared(m), clock, abs, NULL, NULL);
	if (r < 0)
		return r;
	STORE(&m->owner, me);
	return 0;
}

int rtaccel_mutex_lock(rtaccel_mutex_t *m) { return mutex_acquire(m, CLOCK_REALTIME, NULL); }

int rtaccel_mutex_clocklock(rtaccel_mutex_t *m, clockid_t clock, const struct timespec *abs)
{
	if (!abs)
		return -EINVAL;
	return mutex_acquire(m, clock, abs);
}

int rtaccel_mutex_timedlock(rtaccel_mutex_t *m, const struct timespec *abs)
{
	return rtaccel_mutex_clocklock(m, CLOCK_REALTIME, abs);
}

int rtaccel_mutex_unlock(rtaccel_mutex_t *m)
{
	if (LOAD_RELAXED(&m->owner) != lock_self_tid())
		return -EPERM;
	STORE(&m->owner, 0);
	ticketq_pass(&m->q, mutex_shared(m));
	return 0;
}

int rtaccel_pi_mutex_init(pthread_mutex_t *m, int type, bool pshared)
{
	pthread_mutexattr_t a;
	int r = pthread_mutexattr_init(&a);
	if (r == 0)
		r = pthread_mutexattr_settype(&a, type);
	if (r == 0)
		r = pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
	if (r == 0 && pshared)
		r = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (r == 0)
		r = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return -r;
}
