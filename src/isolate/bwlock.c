/* The bandwidth lock (BWLOCK++) in shared memory.
 *
 * A slot per holder and one counter of the slots that hold the lock. Take
 * and release touch the holder's own slot and, on the outermost take and
 * release, the counter: two atomic operations, no system call. The regulator
 * reads the counter every period and scans the slots for the smallest
 * threshold only while it is not zero.
 *
 * A slot is claimed by a compare-and-swap from FREE, so there is no region
 * lock whose owner could die holding it. A slot whose process has exited is
 * released by whoever calls rtaccel_bwlock_reap (the regulator, every
 * period): the same compare-and-swap from HELD decides between it and a
 * holder that is releasing at that moment, which cannot happen for a dead
 * process anyway.
 */
#include "rtaccel/isolate.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/thread.h"
#include "isolate/regulator.h"
#include "isolate/shm.h"

#define BWLOCK_MAGIC 0x6b6c7762u /* "bwlk" */
#define BWLOCK_VERSION 1u

enum { BW_FREE = 0, BW_IDLE, BW_HELD };

struct bw_slot {
	_Atomic uint32_t state;
	uint32_t threshold_mbps;
	int32_t pid;
	uint32_t reserved;
	_Atomic uint64_t takes; /* written by the holder only */
	char label[RTACCEL_GANG_NAME_MAX];
	uint64_t reserved1;
};

struct bw_region {
	struct isolate_shm_header header;
	_Alignas(64) _Atomic uint32_t held;
	_Atomic uint64_t takes;
	_Atomic uint64_t reaped;
	_Alignas(64) struct bw_slot slots[RTACCEL_BWLOCK_MAX_HOLDERS];
};

_Static_assert(sizeof(struct bw_slot) == 64, "slot layout");

struct rtaccel_bwlock {
	struct bw_region *region;
};

struct rtaccel_bwlock_holder {
	struct bw_region *region;
	struct bw_slot *slot;
	uint32_t depth;
	int ceiling;
	/* The policy the ceiling replaced, and whose it was. */
	pid_t boosted_tid;
	int saved_policy;
	struct sched_param saved_param;
};

int rtaccel_bwlock_open(const char *name, rtaccel_bwlock_t **lock)
{
	if (!lock)
		return -EINVAL;
	void *region;
	int err = isolate_shm_open("rtaccel-bwlock", name, sizeof(struct bw_region), BWLOCK_MAGIC,
				   BWLOCK_VERSION, &region);
	if (err)
		return err;
	rtaccel_bwlock_t *l = malloc(sizeof(*l));
	if (!l) {
		munmap(region, sizeof(struct bw_region));
		return -ENOMEM;
	}
	l->region = region;
	*lock = l;
	return 0;
}

void rtaccel_bwlock_close(rtaccel_bwlock_t *lock)
{
	if (!lock)
		return;
	munmap(lock->region, sizeof(struct bw_region));
	free(lock);
}

int rtaccel_bwlock_unlink(const char *name) { return isolate_shm_unlink("rtaccel-bwlock", name); }

int rtaccel_regulator_status_unlink(const char *name)
{
	return isolate_shm_unlink(RTACCEL_REGULATOR_STATUS_PREFIX, name);
}

int rtaccel_bwlock_holder_init(rtaccel_bwlock_t *lock, const char *label, uint32_t threshold_mbps,
			       int ceiling_priority, rtaccel_bwlock_holder_t **holder)
{
	if (!lock || !holder || !isolate_valid_name(label, RTACCEL_GANG_NAME_MAX) ||
	    ceiling_priority < 0 || ceiling_priority > RTACCEL_GANG_PRIORITY_MAX ||
	    threshold_mbps == RTACCEL_BWLOCK_UNLIMITED)
		return -EINVAL;
	rtaccel_bwlock_holder_t *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	struct bw_region *r = lock->region;
	for (int i = 0; i < RTACCEL_BWLOCK_MAX_HOLDERS; i++) {
		struct bw_slot *s = &r->slots[i];
		uint32_t free_state = BW_FREE;
		if (!atomic_compare_exchange_strong(&s->state, &free_state, BW_IDLE))
			continue;
		s->threshold_mbps = threshold_mbps;
		s->pid = getpid();
		atomic_store_explicit(&s->takes, 0, memory_order_relaxed);
		snprintf(s->label, sizeof(s->label), "%s", label);
		h->region = r;
		h->slot = s;
		h->ceiling = ceiling_priority;
		*holder = h;
		return 0;
	}
	free(h);
	return -ENOSPC;
}

void rtaccel_bwlock_holder_destroy(rtaccel_bwlock_holder_t *h)
{
	if (!h)
		return;
	if (h->depth) {
		h->depth = 1;
		rtaccel_bwlock_release(h);
	}
	atomic_store_explicit(&h->slot->state, BW_FREE, memory_order_release);
	free(h);
}

static int boost(rtaccel_bwlock_holder_t *h)
{
	if (pthread_getschedparam(pthread_self(), &h->saved_policy, &h->saved_param) != 0)
		return -EPERM;
	struct sched_param sp = {.sched_priority = h->ceiling};
	if (h->saved_policy == SCHED_FIFO && h->saved_param.sched_priority >= h->ceiling)
		return 0; /* already at or above the ceiling */
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
		return -EPERM;
	h->boosted_tid = (pid_t)rtaccel_self_tid();
	return 0;
}

static void unboost(rtaccel_bwlock_holder_t *h)
{
	if (!h->boosted_tid)
		return;
	/* By thread id: another thread of the process may release. */
	sched_setscheduler(h->boosted_tid, h->saved_policy, &h->saved_param);
	h->boosted_tid = 0;
}

int rtaccel_bwlock_take(rtaccel_bwlock_holder_t *h)
{
	if (!h)
		return -EINVAL;
	if (h->depth++)
		return 0;
	struct bw_slot *s = h->slot;
	atomic_store_explicit(&s->takes, atomic_load_explicit(&s->takes, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	/* HELD before the count: a regulator that sees the count scans and finds
	 * the slot. */
	atomic_store_explicit(&s->state, BW_HELD, memory_order_release);
	atomic_fetch_add_explicit(&h->region->held, 1, memory_order_acq_rel);
	atomic_fetch_add_explicit(&h->region->takes, 1, memory_order_relaxed);
	return h->ceiling ? boost(h) : 0;
}

int rtaccel_bwlock_release(rtaccel_bwlock_holder_t *h)
{
	if (!h || h->depth == 0)
		return -EINVAL;
	if (--h->depth)
		return 0;
	unboost(h);
	uint32_t held = BW_HELD;
	if (atomic_compare_exchange_strong_explicit(&h->slot->state, &held, BW_IDLE,
						    memory_order_acq_rel, memory_order_relaxed))
		atomic_fetch_sub_explicit(&h->region->held, 1, memory_order_acq_rel);
	return 0;
}

int rtaccel_bwlock_get_status(const rtaccel_bwlock_t *lock, struct rtaccel_bwlock_status *st)
{
	if (!lock || !st)
		return -EINVAL;
	struct bw_region *r = lock->region;
	memset(st, 0, sizeof(*st));
	st->threshold_mbps = RTACCEL_BWLOCK_UNLIMITED;
	st->takes = atomic_load_explicit(&r->takes, memory_order_relaxed);
	st->reaped = atomic_load_explicit(&r->reaped, memory_order_relaxed);
	for (int i = 0; i < RTACCEL_BWLOCK_MAX_HOLDERS; i++) {
		const struct bw_slot *s = &r->slots[i];
		uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
		st->holders += state != BW_FREE;
		if (state != BW_HELD)
			continue;
		st->held++;
		if (s->threshold_mbps < st->threshold_mbps)
			st->threshold_mbps = s->threshold_mbps;
	}
	return 0;
}

int rtaccel_bwlock_holders(const rtaccel_bwlock_t *lock, struct rtaccel_bwlock_holder_info *out,
			   int max)
{
	if (!lock || (max > 0 && !out))
		return -EINVAL;
	int n = 0;
	for (int i = 0; i < RTACCEL_BWLOCK_MAX_HOLDERS; i++) {
		const struct bw_slot *s = &lock->region->slots[i];
		uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
		if (state == BW_FREE)
			continue;
		if (n < max) {
			struct rtaccel_bwlock_holder_info *o = &out[n];
			memset(o, 0, sizeof(*o));
			memcpy(o->label, s->label, sizeof(o->label));
			o->label[sizeof(o->label) - 1] = 0;
			o->pid = s->pid;
			o->threshold_mbps = s->threshold_mbps;
			o->held = state == BW_HELD;
			o->takes = atomic_load_explicit(&s->takes, memory_order_relaxed);
		}
		n++;
	}
	return n;
}

static int reap(rtaccel_bwlock_t *lock, bool idle_too)
{
	if (!lock)
		return -EINVAL;
	struct bw_region *r = lock->region;
	int n = 0;
	for (int i = 0; i < RTACCEL_BWLOCK_MAX_HOLDERS; i++) {
		struct bw_slot *s = &r->slots[i];
		uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
		if (state == BW_FREE || (state == BW_IDLE && !idle_too) ||
		    isolate_thread_alive(s->pid, s->pid))
			continue;
		if (!atomic_compare_exchange_strong(&s->state, &state, BW_FREE))
			continue;
		if (state == BW_HELD) {
			atomic_fetch_sub_explicit(&r->held, 1, memory_order_acq_rel);
			atomic_fetch_add_explicit(&r->reaped, 1, memory_order_relaxed);
			n++;
		}
	}
	return n;
}

int rtaccel_bwlock_reap(rtaccel_bwlock_t *lock) { return reap(lock, true); }

int isolate_bwlock_reap_held(rtaccel_bwlock_t *lock)
{
	if (atomic_load_explicit(&lock->region->held, memory_order_acquire) == 0)
		return 0;
	return reap(lock, false);
}

/* For the regulator: the threshold in force, without a scan when no one
 * holds the lock. */
uint32_t isolate_bwlock_threshold(const rtaccel_bwlock_t *lock)
{
	if (atomic_load_explicit(&lock->region->held, memory_order_acquire) == 0)
		return RTACCEL_BWLOCK_UNLIMITED;
	struct rtaccel_bwlock_status st;
	rtaccel_bwlock_get_status(lock, &st);
	return st.threshold_mbps;
}
