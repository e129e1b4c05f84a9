/* FIFO hand-over between waiters (writers of the rwlock, the FIFO mutex).
 *
 * A waiter that times out cannot leave the middle of a ticket queue, so it
 * leaves a mark for its ticket in a small ring; whoever serves that ticket
 * skips it. If the mark races with the serve, the two sides settle it with one
 * compare-and-swap on the mark: whoever clears it owns the ticket. */
#include "lock_internal.h"

#include <sched.h>

static inline uint64_t abandon_mark(uint32_t t) { return (uint64_t)1 << 32 | t; }

bool ticketq_try(struct rtaccel_ticketq *q, uint32_t *ticket)
{
	uint32_t serving = LOAD(&q->serving);
	uint32_t expected = serving;
	if (!CAS(&q->next, &expected, serving + 1))
		return false;
	*ticket = serving;
	return true;
}

void ticketq_pass(struct rtaccel_ticketq *q, bool shared)
{
	uint32_t t = FETCH_ADD(&q->serving, 1) + 1;
	for (;;) {
		uint64_t *slot = &q->abandoned[t % RTACCEL_TICKET_RING];
		uint64_t mark = abandon_mark(t);
		if (LOAD(slot) != mark || !CAS(slot, &mark, 0))
			break;
		t = FETCH_ADD(&q->serving, 1) + 1;
	}
	if (LOAD(&q->sleepers))
		futex_wake(&q->serving, INT_MAX, shared);
}

/* Gives ticket t up. Returns 0 if t turned out to be served meanwhile (the
 * caller owns the lock), -ETIMEDOUT otherwise. */
static int ticketq_abandon(struct rtaccel_ticketq *q, uint32_t t)
{
	uint64_t *slot = &q->abandoned[t % RTACCEL_TICKET_RING];
	uint64_t mark = abandon_mark(t);
	for (;;) {
		if (LOAD(&q->serving) == t)
			return 0;
		uint64_t empty = 0;
		if (CAS(slot, &empty, mark))
			break;
		/* The entry holds a ticket RTACCEL_TICKET_RING places away: wait for
		 * the queue to move past it. */
		sched_yield();
	}
	if (LOAD(&q->serving) == t) {
		uint64_t expected = mark;
		if (CAS(slot, &expected, 0))
			return 0;
	}
	return -ETIMEDOUT;
}

int ticketq_wait(struct rtaccel_ticketq *q, uint32_t t, bool shared, clockid_t clock,
		 const struct timespec *abs, void (*boost_hook)(void *), void *arg)
{
	for (int i = 0; i < LOCK_SPIN; i++) {
		if (LOAD(&q->serving) == t)
			return 0;
		cpu_relax();
	}
	for (;;) {
		uint32_t s = LOAD(&q->serving);
		if (s == t)
			return 0;
		if (boost_hook)
			boost_hook(arg);
		FETCH_ADD(&q->sleepers, 1);
		s = LOAD(&q->serving);
		int r = s == t ? 0 : futex_wait(&q->serving, s, shared, clock, abs);
		FETCH_ADD(&q->sleepers, (uint32_t)-1);
		if (r == -ETIMEDOUT)
			return ticketq_abandon(q, t);
	}
}
