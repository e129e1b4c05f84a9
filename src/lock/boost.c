/* Priority boosting: the progress mechanism of the phase-fair lock.
 *
 * A thread that must wait raises itself to the lock's ceiling before it
 * sleeps, and raises every current holder that is not raised yet. Holders
 * publish themselves in slots of the lock with one compare-and-swap, so a
 * lock that is free or uncontended costs no system call ("lazy" boosting).
 * All state a waiter needs lives in the lock itself, so this works between
 * processes too.
 *
 * Restoring is exact: the attributes saved before the first raise (policy,
 * priority, nice, reset-on-fork) are put back, with sched_setattr, when the
 * thread holds no boosting lock any more, whatever order it released them in,
 * and whatever policy it ran under (SCHED_OTHER, BATCH, IDLE, RR, FIFO).
 * SCHED_DEADLINE threads already run above every SCHED_FIFO level and are
 * left alone. */
#include "lock_internal.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
#define SCHED_FLAG_RESET_ON_FORK_ 0x01

struct sched_attr_v0 {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
};

struct boost_self_state {
	int held;     /* boosting locks held (read or write) */
	bool boosted; /* base holds the attributes to restore */
	int level;    /* ceiling we raised ourselves to */
	struct rtaccel_sched_saved base;
};

static __thread LOCK_TLS struct boost_self_state self;
static uint64_t boost_failures;

uint64_t rtaccel_lock_boost_failures(void) { return LOAD_RELAXED(&boost_failures); }

int boost_ceiling_of(int configured) { return configured > 0 ? configured : 98; }

static int rank(uint32_t policy, int priority, int nice)
{
	switch (policy) {
	case SCHED_DEADLINE:
		return 1000;
	case SCHED_FIFO:
	case SCHED_RR:
		return 100 + priority;
	case SCHED_IDLE:
		return 0;
	default: /* SCHED_OTHER, SCHED_BATCH: nice -20..19 maps to 70..31 */
		return 50 - nice;
	}
}

static int rank_saved(const struct rtaccel_sched_saved *s)
{
	return rank(s->policy, s->priority, s->nice);
}

static int get_attr(uint32_t tid, struct rtaccel_sched_saved *out)
{
	struct sched_attr_v0 a;
	memset(&a, 0, sizeof(a));
	if (syscall(SYS_sched_getattr, (pid_t)tid, &a, sizeof(a), 0) < 0)
		return -errno;
	out->policy = a.sched_policy;
	out->priority = (int32_t)a.sched_priority;
	out->nice = a.sched_nice;
	out->flags = (uint32_t)(a.sched_flags & SCHED_FLAG_RESET_ON_FORK_);
	return 0;
}

static int set_attr(uint32_t tid, const struct rtaccel_sched_saved *s)
{
	struct sched_attr_v0 a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.sched_policy = s->policy;
	a.sched_flags = s->flags;
	a.sched_nice = s->nice;
	a.sched_priority = (uint32_t)s->priority;
	if (syscall(SYS_sched_setattr, (pid_t)tid, &a, 0) < 0)
		return -errno;
	return 0;
}

static int raise_to(uint32_t tid, int ceiling, const struct rtaccel_sched_saved *now)
{
	struct rtaccel_sched_saved fifo = {SCHED_FIFO, ceiling, 0, now->flags};
	int r = set_attr(tid, &fifo);
	if (r < 0)
		__atomic_fetch_add(&boost_failures, 1, __ATOMIC_RELAXED);
	return r;
}

/* Remembers what to restore: the lowest of the saved attributes, because
 * every raise only goes up, so the lowest one is what the thread had before. */
static void merge_base(const struct rtaccel_sched_saved *saved)
{
	if (!self.boosted) {
		self.base = *saved;
		self.boosted = true;
	} else if (rank_saved(saved) < rank_saved(&self.base)) {
		self.base = *saved;
	}
}

static void restore_if_idle(void)
{
	if (self.held == 0 && self.boosted) {
		self.boosted = false;
		self.level = 0;
		if (set_attr(0, &self.base) < 0)
			__atomic_fetch_add(&boost_failures, 1, __ATOMIC_RELAXED);
	}
}

void boost_self(int ceiling)
{
	if (self.boosted && self.level >= ceiling)
		return;
	struct rtaccel_sched_saved now;
	if (get_attr(0, &now) < 0 || rank_saved(&now) >= rank(SCHED_FIFO, ceiling, 0))
		return;
	if (raise_to(0, ceiling, &now) < 0)
		return;
	merge_base(&now);
	self.level = ceiling;
}

int self_rt_priority(void)
{
	struct rtaccel_sched_saved now;
	if (self.boosted)
		now = self.base;
	else if (get_attr(0, &now) < 0)
		return 0;
	return now.policy == SCHED_FIFO || now.policy == SCHED_RR ? now.priority : 0;
}

void boost_note_acquired(void) { self.held++; }

void boost_note_released(void)
{
	self.held--;
	restore_if_idle();
}

void boost_note_wait_failed(void) { restore_if_idle(); }

static inline uint64_t holder_word(uint32_t tid, enum holder_state s)
{
	return (uint64_t)tid << 32 | (uint32_t)s;
}

int holder_claim(struct rtaccel_lock_holder *h, uint32_t tid)
{
	uint64_t expected = 0;
	return CAS(&h->word, &expected, holder_word(tid, HOLDER_HELD)) ? 0 : -EBUSY;
}

void holder_claim_any(struct rtaccel_lock_holder *slots, int n, uint32_t tid, int ceiling)
{
	for (int i = 0; i < n; i++)
		if (LOAD_RELAXED(&slots[i].word) == 0 && holder_claim(&slots[i], tid) == 0)
			return;
	/* No slot: nobody could raise us later, so raise now. */
	boost_self(ceiling);
}

void holder_release(struct rtaccel_lock_holder *h, uint32_t tid)
{
	uint64_t w = holder_word(tid, HOLDER_HELD);
	if (CAS(&h->word, &w, 0))
		return;
	/* A waiter is raising us or has: wait for it to finish, take over the
	 * attributes it saved, and restore once we hold nothing. */
	for (int i = 0; (uint32_t)(w = LOAD(&h->word)) == HOLDER_BOOSTING; i++) {
		if (i < LOCK_SPIN)
			cpu_relax();
		else
			sched_yield();
	}
	if ((uint32_t)w == HOLDER_BOOSTED) {
		struct rtaccel_sched_saved saved = h->saved;
		merge_base(&saved);
	}
	STORE(&h->word, 0);
}

void holder_release_any(struct rtaccel_lock_holder *slots, int n, uint32_t tid)
{
	for (int i = 0; i < n; i++) {
		uint64_t w = LOAD_RELAXED(&slots[i].word);
		if (w != 0 && (uint32_t)(w >> 32) == tid) {
			holder_release(&slots[i], tid);
			return;
		}
	}
	/* Not in a slot: it raised itself on entry; the TLS state restores it. */
}

void holder_boost(struct rtaccel_lock_holder *h, int ceiling)
{
	uint64_t w = LOAD(&h->word);
	if ((uint32_t)w != HOLDER_HELD)
		return;
	uint32_t tid = (uint32_t)(w >> 32);
	if (!CAS(&h->word, &w, holder_word(tid, HOLDER_BOOSTING)))
		return;
	enum holder_state next = HOLDER_HELD;
	struct rtaccel_sched_saved now;
	if (get_attr(tid, &now) == 0 && rank_saved(&now) < rank(SCHED_FIFO, ceiling, 0)) {
		h->saved = now;
		if (raise_to(tid, ceiling, &now) == 0)
			next = HOLDER_BOOSTED;
	}
	STORE(&h->word, holder_word(tid, next));
}
