/* Phase-fair reader-writer lock, ticket-based (PF-T), after Brandenburg and
 * Anderson, "Spin-based reader-writer synchronization for multiprocessor
 * real-time systems" (Real-Time Systems 46(1), 2010), with futex sleeping,
 * timeouts and the boosting progress mechanism of boost.c.
 *
 * rin counts reader entries and says whether a writer is present (PRES). A
 * reader that arrives while a writer is present waits only until that write
 * phase ends, i.e. until PRES clears or a new phase starts. PF-T tells phases
 * apart with one alternating bit, which is enough when every writer waits for
 * the readers that entered before it. Timed writers break that: a writer that
 * gives up ends its phase without waiting, so a reader still asleep from an
 * earlier phase could see two later phases with the same bit and sleep
 * through its turn. Phases therefore carry a 32-bit epoch instead.
 *
 * Writers queue on a ticket (FIFO), then wait for the readers that entered
 * before them (rout catches up with the entry count they saw).
 *
 * A timed reader that gives up while blocked is counted in rin, so it cannot
 * just leave: it adds itself to the "abandoned" field of rin with a
 * compare-and-swap that also proves its phase is still on. The writer turns
 * those into exits (rout) when its phase ends, as if they had entered and left
 * the read phase at once.
 *
 * POSIX's rule for real-time readers: a SCHED_FIFO or SCHED_RR reader whose
 * priority is above that of every waiting writer gets the lock unless a
 * writer holds it. Writers that block count themselves in waiting_writers by
 * priority; such a reader, instead of waiting for the write phase, passes
 * the "gate", a second reader count in rin that the writer closes (RW_WIN,
 * writer inside) only once it has drained the ordinary readers and the
 * gate's. The gate lives in rin so that the uncontended writer closes it in
 * the compare-and-swap that starts its phase: it costs that writer nothing.
 * Only the slow paths look at priorities. */
#include "lock_internal.h"

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#define RW_PRES 0x1ull
#define RW_AINC 0x2ull
#define RW_AMASK 0xfffeull
#define RW_LOW 0xffffull /* PRES and abandoned readers */
#define RW_EPOCH_SHIFT 16
#define RW_EPOCH_MASK 0xffffff0000ull /* 24 bits */
#define RW_PHASE (RW_EPOCH_MASK | RW_PRES)
#define RW_WIN (1ull << 40)           /* a writer is inside: the gate is shut */
#define RW_GINC (1ull << 41)          /* readers inside through the gate */
#define RW_GMASK (0x7full << 41)
#define RW_COUNT_SHIFT 48
#define RW_RINC (1ull << RW_COUNT_SHIFT) /* the count wraps out of the word */

/* The layout lock.h calls fixed: processes of one rtaccel version share locks
 * in memory. Every word is updated with lock-free atomics, which a lock
 * shared between processes needs. */
_Static_assert(sizeof(rtaccel_rwlock_t) == 768 && _Alignof(rtaccel_rwlock_t) == 64, "rwlock layout");
_Static_assert(offsetof(rtaccel_rwlock_t, rout) == 8 && offsetof(rtaccel_rwlock_t, owner) == 20 &&
		       offsetof(rtaccel_rwlock_t, writers) == 32 && offsetof(rtaccel_rwlock_t, writer) == 304 &&
		       offsetof(rtaccel_rwlock_t, readers) == 328 && offsetof(rtaccel_rwlock_t, gseq) == 520 &&
		       offsetof(rtaccel_rwlock_t, waiting_writers) == 528,
	       "rwlock field offsets");
_Static_assert(sizeof(rtaccel_mutex_t) == 320 && offsetof(rtaccel_mutex_t, owner) == 272, "mutex layout");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_SHORT_LOCK_FREE == 2,
	       "lock-free atomics for locks shared between processes");


static inline uint16_t rw_entries(uint64_t rin) { return (uint16_t)(rin >> RW_COUNT_SHIFT); }

/* Locks this thread read-holds through the gate, for the unlock. */
#define GATE_HOLDS 8
struct gate_hold {
	rtaccel_rwlock_t *lock;
	uint32_t count;
};
static __thread LOCK_TLS struct gate_hold gate_holds[GATE_HOLDS];
static __thread LOCK_TLS uint32_t gate_holds_total;

/* The half of rin that holds PRES and the epoch: every phase end changes it. */
static inline uint32_t *rin_futex(rtaccel_rwlock_t *l)
{
	uint32_t *half = (uint32_t *)&l->rin;
	return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? half : half + 1;
}

static inline bool rw_shared(const rtaccel_rwlock_t *l) { return l->flags & RTACCEL_LOCK_PSHARED; }
static inline bool rw_boost(const rtaccel_rwlock_t *l) { return l->flags & RTACCEL_LOCK_BOOST; }
static inline int rw_ceiling(const rtaccel_rwlock_t *l) { return boost_ceiling_of(l->ceiling); }

int rtaccel_rwlock_init(rtaccel_rwlock_t *l, const struct rtaccel_lock_attr *attr)
{
	memset(l, 0, sizeof(*l));
	if (attr) {
		if (attr->flags & ~(RTACCEL_LOCK_PSHARED | RTACCEL_LOCK_BOOST))
			return -EINVAL;
		if (attr->boost_ceiling < 0 || attr->boost_ceiling > 99)
			return -EINVAL;
		l->flags = attr->flags;
		l->ceiling = attr->boost_ceiling;
	}
	return 0;
}

int rtaccel_rwlock_destroy(rtaccel_rwlock_t *l)
{
	uint64_t rin = LOAD(&l->rin);
	if ((rin & (RW_LOW | RW_WIN | RW_GMASK)) || rw_entries(rin) != (uint16_t)LOAD(&l->rout) ||
	    LOAD(&l->writers.next) != LOAD(&l->writers.serving))
		return -EBUSY;
	return 0;
}

/* --- real-time readers past waiting writers ---------------------------- */

static int highest_waiting_writer(rtaccel_rwlock_t *l)
{
	for (int p = 99; p > 0; p--)
		if (LOAD_RELAXED(&l->waiting_writers[p]))
			return p;
	return 0;
}

/* True if POSIX lets a reader of priority prio in now: no writer inside and
 * none of its priority or above waiting. */
static bool gate_open_for(rtaccel_rwlock_t *l, int prio)
{
	return prio > 0 && !(LOAD(&l->rin) & RW_WIN) && highest_waiting_writer(l) < prio;
}

static struct gate_hold *gate_hold_slot(rtaccel_rwlock_t *l)
{
	for (int i = 0; i < GATE_HOLDS; i++)
		if (gate_holds[i].lock == l)
			return &gate_holds[i];
	return NULL;
}

/* Enters through the gate: 0, or -EAGAIN if a writer closed it first. */
static int gate_enter(rtaccel_rwlock_t *l)
{
	struct gate_hold *h = gate_hold_slot(l);
	if (!h && !(h = gate_hold_slot(NULL)))
		return -EAGAIN; /* too many at once: take the ordinary way */
	uint64_t x = LOAD(&l->rin);
	do {
		if ((x & RW_WIN) || (x & RW_GMASK) == RW_GMASK)
			return -EAGAIN; /* a writer is in, or the gate is full */
	} while (!CAS(&l->rin, &x, x + RW_GINC));
	h->lock = l;
	h->count++;
	gate_holds_total++;
	return 0;
}

/* Leaves the gate if the caller came in through it. */
static bool gate_leave(rtaccel_rwlock_t *l)
{
	if (__builtin_expect(gate_holds_total == 0, 1))
		return false;
	struct gate_hold *h = gate_hold_slot(l);
	if (!h)
		return false;
	if (--h->count == 0)
		h->lock = NULL;
	gate_holds_total--;
	FETCH_ADD(&l->rin, (uint64_t)0 - RW_GINC);
	if (LOAD(&l->gsleep)) {
		FETCH_ADD(&l->gseq, 1);
		futex_wake(&l->gseq, 1, rw_shared(l));
	}
	return true;
}

/* The writer, ordinary readers drained, waits for the gate's readers and
 * shuts the gate (RW_WIN). (An uncontended writer shuts it in trywrlock's
 * compare-and-swap instead.) */
static int gate_close(rtaccel_rwlock_t *l, clockid_t clock, const struct timespec *abs)
{
	for (;;) {
		uint64_t x = LOAD(&l->rin);
		if (!(x & RW_GMASK)) {
			if (CAS(&l->rin, &x, x | RW_WIN))
				return 0;
			continue;
		}
		FETCH_ADD(&l->gsleep, 1);
		uint32_t seq = LOAD(&l->gseq);
		int r = (LOAD(&l->rin) & RW_GMASK) ? futex_wait(&l->gseq, seq, rw_shared(l), clock, abs) : 0;
		FETCH_ADD(&l->gsleep, (uint32_t)-1);
		if (r == -ETIMEDOUT) {
			x = LOAD(&l->rin);
			return !(x & RW_GMASK) && CAS(&l->rin, &x, x | RW_WIN) ? 0 : -ETIMEDOUT;
		}
	}
}

static void writer_waits(rtaccel_rwlock_t *l, int prio, int delta)
{
	if (prio > 0 && prio < 100)
		__atomic_fetch_add(&l->waiting_writers[prio], (uint16_t)delta, __ATOMIC_SEQ_CST);
}

/* Raises the caller and everyone holding the lock (slow path only). */
static void boost_all_holders(void *arg)
{
	rtaccel_rwlock_t *l = arg;
	int ceiling = rw_ceiling(l);
	boost_self(ceiling);
	holder_boost(&l->writer, ceiling);
	for (int i = 0; i < RTACCEL_RWLOCK_READER_SLOTS; i++)
		holder_boost(&l->readers[i], ceiling);
}

/* Ends a write phase (unlock, or a writer that gave up): clears the writer
 * bits, turns abandoned readers into exits, wakes readers, serves the next
 * writer. */
static void end_write_phase(rtaccel_rwlock_t *l)
{
	uint64_t x = LOAD(&l->rin);
	while (!CAS(&l->rin, &x, x & ~(RW_LOW | RW_WIN)))
		;
	uint32_t abandoned = (uint32_t)((x & RW_AMASK) / RW_AINC);
	if (abandoned)
		FETCH_ADD(&l->rout, abandoned);
	if (LOAD(&l->rsleep))
		futex_wake(rin_futex(l), INT_MAX, rw_shared(l));
	ticketq_pass(&l->writers, rw_shared(l));
}

static int reader_abandon(rtaccel_rwlock_t *l, uint64_t phase)
{
	uint64_t x = LOAD(&l->rin);
	for (;;) {
		if ((x & RW_PHASE) != phase)
			return 0; /* the phase ended meanwhile: we are in */
		if ((x & RW_AMASK) == RW_AMASK) {
			sched_yield(); /* field full: wait for the phase to end */
			x = LOAD(&l->rin);
			continue;
		}
		if (CAS(&l->rin, &x, x + RW_AINC))
			return -ETIMEDOUT;
	}
}

/* reader_wait_phase's answer when the reader gave its entry up to take the
 * gate instead. */
#define READER_TAKE_GATE 1

static int reader_wait_phase(rtaccel_rwlock_t *l, uint64_t phase, clockid_t clock,
			     const struct timespec *abs)
{
	for (int i = 0; i < LOCK_SPIN; i++) {
		if ((LOAD(&l->rin) & RW_PHASE) != phase)
			return 0;
		cpu_relax();
	}
	int prio = self_rt_priority();
	int ceiling = rw_ceiling(l);
	if (rw_boost(l))
		boost_self(ceiling);
	for (;;) {
		if ((LOAD(&l->rin) & RW_PHASE) != phase)
			return 0;
		if (gate_open_for(l, prio)) {
			/* Leave the phase's queue as a timed-out reader does. */
			if (reader_abandon(l, phase) == 0)
				return 0; /* the phase ended meanwhile: we are in */
			return READER_TAKE_GATE;
		}
		if (rw_boost(l))
			holder_boost(&l->writer, ceiling);
		FETCH_ADD(&l->rsleep, 1);
		uint32_t half = LOAD(rin_futex(l));
		int r = (LOAD(&l->rin) & RW_PHASE) != phase
				? 0
				: futex_wait(rin_futex(l), half, rw_shared(l), clock, abs);
		FETCH_ADD(&l->rsleep, (uint32_t)-1);
		if (r == -ETIMEDOUT)
			return reader_abandon(l, phase);
	}
}

static int read_acquire(rtaccel_rwlock_t *l, clockid_t clock, const struct timespec *abs)
{
	uint32_t me = lock_self_tid();
	if (LOAD_RELAXED(&l->owner) == me)
		return -EDEADLK;
	if (abs) {
		int r = deadline_valid(clock, abs);
		if (r == 0 && (LOAD(&l->rin) & RW_PRES))
			r = check_deadline(clock, abs);
		if (r < 0)
			return r;
	}
	for (;;) {
		uint64_t seen = FETCH_ADD(&l->rin, RW_RINC);
		if (!(seen & RW_PRES))
			break;
		int r = reader_wait_phase(l, seen & RW_PHASE, clock, abs);
		if (r == READER_TAKE_GATE && gate_enter(l) < 0)
			continue; /* a writer got in first: queue again */
		if (r < 0) {
			if (rw_boost(l))
				boost_note_wait_failed();
			return r;
		}
		break;
	}
	if (rw_boost(l)) {
		holder_claim_any(l->readers, RTACCEL_RWLOCK_READER_SLOTS, me, rw_ceiling(l));
		boost_note_acquired();
	}
	return 0;
}

int rtaccel_rwlock_rdlock(rtaccel_rwlock_t *l) { return read_acquire(l, CLOCK_REALTIME, NULL); }

int rtaccel_rwlock_clockrdlock(rtaccel_rwlock_t *l, clockid_t clock, const struct timespec *abs)
{
	if (!abs)
		return -EINVAL;
	return read_acquire(l, clock, abs);
}

int rtaccel_rwlock_timedrdlock(rtaccel_rwlock_t *l, const struct timespec *abs)
{
	return rtaccel_rwlock_clockrdlock(l, CLOCK_REALTIME, abs);
}

int rtaccel_rwlock_tryrdlock(rtaccel_rwlock_t *l)
{
	uint64_t x = LOAD(&l->rin);
	do {
		if (x & RW_PRES) {
			/* As rdlock would: past a waiting writer of lower priority.
			 * A writer inside (the caller too) refuses every reader:
			 * no need to read the caller's priority then. */
			if ((x & RW_WIN) || !gate_open_for(l, self_rt_priority()) || gate_enter(l) < 0)
				return -EBUSY;
			break;
		}
	} while (!CAS(&l->rin, &x, x + RW_RINC));
	if (rw_boost(l)) {
		holder_claim_any(l->readers, RTACCEL_RWLOCK_READER_SLOTS, lock_self_tid(),
				 rw_ceiling(l));
		boost_note_acquired();
	}
	return 0;
}

/* The value of rin's low half for a new write phase: PRES and the next epoch. */
static inline uint64_t new_phase(uint64_t rin)
{
	uint64_t epoch = ((rin & RW_EPOCH_MASK) + (1ull << RW_EPOCH_SHIFT)) & RW_EPOCH_MASK;
	return (rin & ~(RW_EPOCH_MASK | RW_LOW)) | epoch | RW_PRES;
}

static void writer_enter(rtaccel_rwlock_t *l, uint32_t me)
{
	STORE(&l->owner, me);
	if (rw_boost(l)) {
		holder_claim(&l->writer, me);
		boost_note_acquired();
	}
}

int rtaccel_rwlock_trywrlock(rtaccel_rwlock_t *l)
{
	uint32_t me = lock_self_tid();
	uint32_t ticket;
	if (LOAD_RELAXED(&l->owner) == me || !ticketq_try(&l->writers, &ticket))
		return -EBUSY;
	uint64_t x = LOAD(&l->rin);
	/* No reader inside, through the gate or not: the phase starts with the
	 * gate shut, in one compare-and-swap. */
	if ((x & (RW_LOW | RW_GMASK)) == 0 && rw_entries(x) == (uint16_t)LOAD(&l->rout) &&
	    CAS(&l->rin, &x, new_phase(x) | RW_WIN)) {
		writer_enter(l, me);
		return 0;
	}
	ticketq_pass(&l->writers, rw_shared(l)); /* readers inside: give the turn on */
	return -EBUSY;
}

static int writer_drain(rtaccel_rwlock_t *l, uint16_t readers_before, clockid_t clock,
			const struct timespec *abs)
{
	for (int i = 0; i < LOCK_SPIN; i++) {
		if ((uint16_t)LOAD(&l->rout) == readers_before)
			return 0;
		cpu_relax();
	}
	for (;;) {
		if ((uint16_t)LOAD(&l->rout) == readers_before)
			return 0;
		if (rw_boost(l))
			boost_all_holders(l);
		FETCH_ADD(&l->dsleep, 1);
		uint32_t x = LOAD(&l->rout);
		int r = (uint16_t)x == readers_before
				? 0
				: futex_wait(&l->rout, x, rw_shared(l), clock, abs);
		FETCH_ADD(&l->dsleep, (uint32_t)-1);
		if (r == -ETIMEDOUT)
			return (uint16_t)LOAD(&l->rout) == readers_before ? 0 : -ETIMEDOUT;
	}
}

static int write_acquire(rtaccel_rwlock_t *l, clockid_t clock, const struct timespec *abs)
{
	uint32_t me = lock_self_tid();
	if (LOAD_RELAXED(&l->owner) == me)
		return -EDEADLK;
	if (abs) {
		int r = deadline_valid(clock, abs);
		if (r < 0)
			return r;
	}
	if (rtaccel_rwlock_trywrlock(l) == 0)
		return 0;
	if (abs) {
		int r = check_deadline(clock, abs);
		if (r < 0)
			return r;
	}
	/* Blocked: real-time readers of a higher priority may pass. */
	int prio = self_rt_priority();
	writer_waits(l, prio, 1);
	uint32_t ticket = FETCH_ADD(&l->writers.next, 1);
	int r = ticketq_wait(&l->writers, ticket, rw_shared(l), clock, abs,
			     rw_boost(l) ? boost_all_holders : NULL, l);
	if (r == 0) {
		uint64_t x = LOAD(&l->rin);
		while (!CAS(&l->rin, &x, new_phase(x)))
			;
		r = writer_drain(l, rw_entries(x), clock, abs);
		if (r == 0)
			r = gate_close(l, clock, abs);
		if (r < 0)
			end_write_phase(l); /* gave up: an empty write phase */
	}
	writer_waits(l, prio, -1);
	if (r < 0) {
		if (rw_boost(l))
			boost_note_wait_failed();
		return r;
	}
	writer_enter(l, me);
	return 0;
}

int rtaccel_rwlock_wrlock(rtaccel_rwlock_t *l) { return write_acquire(l, CLOCK_REALTIME, NULL); }

int rtaccel_rwlock_clockwrlock(rtaccel_rwlock_t *l, clockid_t clock, const struct timespec *abs)
{
	if (!abs)
		return -EINVAL;
	return write_acquire(l, clock, abs);
}

int rtaccel_rwlock_timedwrlock(rtaccel_rwlock_t *l, const struct timespec *abs)
{
	return rtaccel_rwlock_clockwrlock(l, CLOCK_REALTIME, abs);
}

int rtaccel_rwlock_wrunlock(rtaccel_rwlock_t *l)
{
	uint32_t me = lock_self_tid();
	if (LOAD_RELAXED(&l->owner) != me)
		return -EPERM;
	STORE(&l->owner, 0);
	if (rw_boost(l))
		holder_release(&l->writer, me);
	end_write_phase(l); /* also opens the gate */
	if (rw_boost(l))
		boost_note_released();
	return 0;
}

int rtaccel_rwlock_rdunlock(rtaccel_rwlock_t *l)
{
	if (rw_boost(l))
		holder_release_any(l->readers, RTACCEL_RWLOCK_READER_SLOTS, lock_self_tid());
	if (!gate_leave(l)) {
		FETCH_ADD(&l->rout, 1);
		if (LOAD(&l->dsleep))
			futex_wake(&l->rout, 1, rw_shared(l));
	}
	if (rw_boost(l))
		boost_note_released();
	return 0;
}

int rtaccel_rwlock_unlock(rtaccel_rwlock_t *l)
{
	if (LOAD_RELAXED(&l->owner) == lock_self_tid())
		return rtaccel_rwlock_wrunlock(l);
	return rtaccel_rwlock_rdunlock(l);
}
