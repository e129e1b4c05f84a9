/* The gang lock: one real-time gang (or virtual gang: one priority) in a job
 * at a time, across processes, on a stock kernel.
 *
 * The region holds a slot per member thread and one 64-bit word that the
 * fast paths use:
 *
 *   bits  0..7   running priority R (0: none)
 *   bits  8..23  threads of priority R in a job (running or parked)
 *   bit   24     CONTENDED: some other priority wants the lock
 *   bits 32..63  generation, bumped by every arbitration
 *
 * Uncontended (CONTENDED clear, R free or ours), job_begin and job_end are a
 * compare-and-swap on the word. Everything else is an arbitration under the
 * region lock: it freezes the fast paths (sets CONTENDED, bumps the
 * generation, so that a fast path in flight fails its CAS and comes here),
 * then recomputes the whole state from the slots, which are the truth: R is
 * the highest priority with a thread waiting, running or parked; waiters of R
 * are granted; running threads below R are sent the park signal. A thread
 * states its intent in its slot before its fast-path CAS, so a scan never
 * misses a thread that got in.
 *
 * A parked thread sits in the signal handler, on a futex, until R is its
 * priority again, which it confirms under the region lock. The handler never parks a thread that is in the slow path
 * (it would hold the region lock) or between preempt_disable and _enable: it
 * leaves a note that the thread acts on when it gets out, and the thread says
 * in its slot that it defers.
 *
 * The preemptor does not wait for every lower thread to park. Once the park
 * signal is pending, a thread runs no more of its own code before the
 * handler: one that is not on a CPU is stopped already, and one that is stops
 * at the next interrupt, which membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)
 * sends to every CPU running a member process and waits for. So the preemptor
 * waits for one inter-processor round trip, not for the lower threads to be
 * scheduled and park, and then only for the threads that defer (and for all,
 * where the kernel has no membarrier).
 *
 * The region lock is a PI futex (FUTEX_LOCK_PI), not a pthread mutex: the
 * signal handler may take it, and a dead owner is detected by the kernel
 * (ESRCH, or OWNER_DIED when waiters were queued) without glibc's robust
 * list, which a handler must not touch.
 */
#include "rtaccel/isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/futex.h"
#include "core/thread.h"
#include "isolate/shm.h"

#define GANG_MAGIC 0x676e6167u /* "gang" */
#define GANG_VERSION 2u
/* How often a blocked thread looks for dead members: recovery takes at most
 * this plus one arbitration. */
#define REAP_PERIOD_NS (20ull * 1000 * 1000)

#define W_PRIO(w) ((uint32_t)(w)&0xffu)
#define W_COUNT(w) (((uint32_t)(w) >> 8) & 0xffffu)
#define W_CONTENDED (1ull << 24)
#define W_GEN_ONE (1ull << 32)
#define W_GEN_MASK (~0ull << 32)

enum slot_state { SLOT_FREE = 0, SLOT_IDLE, SLOT_WANT, SLOT_RUN, SLOT_PARKED };

struct gang_def {
	char name[RTACCEL_GANG_NAME_MAX];
	int32_t priority;
	uint32_t threshold_mbps;
	uint32_t members;
	uint32_t reserved;
};

/* What a member thread that is in a job does with a park signal. */
enum defer_bits {
	DEFER_SLOW = 1,      /* in the lock's slow path: parks on the way out */
	DEFER_NOPREEMPT = 2, /* between preempt_disable and _enable */
};

struct gang_slot {
	_Atomic uint32_t state;
	_Atomic uint32_t park_requested;
	int32_t pid;
	int32_t tid;
	int32_t priority;
	int32_t gang;
	_Atomic uint32_t defers; /* enum defer_bits, written by the thread itself */
	uint32_t expedited;	 /* its process gets membarrier's interrupts */
	uint64_t reserved[4];
};

struct gang_region {
	struct isolate_shm_header header;
	_Atomic uint32_t lock; /* PI futex: owner tid, FUTEX_WAITERS, FUTEX_OWNER_DIED */
	uint32_t reserved0;
	_Alignas(64) _Atomic uint64_t word;
	_Atomic uint32_t seq;  /* futex: bumped when R changes or a waiter is granted */
	_Atomic uint32_t acks; /* futex: bumped by every thread that parks */
	/* Threads asleep on seq and on acks, so that a bump with nobody
	 * asleep makes no system call. A member that dies asleep leaves its
	 * count behind: wake-ups for nobody, never one missed. */
	_Atomic uint32_t seq_sleepers;
	_Atomic uint32_t ack_sleepers;
	/* Slots ever taken are below this (they are taken lowest first and
	 * never moved): scans stop here instead of reading every slot. */
	_Atomic uint32_t slots_used;
	_Atomic uint64_t preemptions;
	_Atomic uint64_t recoveries;
	uint32_t threshold_at[RTACCEL_GANG_PRIORITY_MAX + 1];
	struct gang_def gangs[RTACCEL_GANG_MAX_GANGS];
	struct gang_slot slots[RTACCEL_GANG_MAX_THREADS];
};

_Static_assert(sizeof(struct gang_slot) == 64, "slot layout");
_Static_assert(sizeof(struct gang_def) == 48, "gang layout");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4, "atomics");

struct rtaccel_gang_lock {
	struct gang_region *region;
};

/* The calling thread's membership. Touched by the thread and by its own
 * signal handler only. */
struct member {
	struct gang_region *r;
	struct gang_slot *slot;
	uint32_t priority;
	uint32_t tid;
	bool in_job;
	volatile sig_atomic_t in_slow;
	volatile sig_atomic_t nopreempt;
	volatile sig_atomic_t pending;
	struct rtaccel_gang_thread_stats stats;
};

static __thread struct member self;

static inline void compiler_barrier(void) { atomic_signal_fence(memory_order_seq_cst); }

static int slots_used(struct gang_region *r)
{
	uint32_t n = atomic_load_explicit(&r->slots_used, memory_order_acquire);
	return n < RTACCEL_GANG_MAX_THREADS ? (int)n : RTACCEL_GANG_MAX_THREADS;
}

int rtaccel_gang_signal(void) { return SIGRTMAX - 2; }

/* Writes a line to stderr from any context, signal handlers included. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0) {
		size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
		ssize_t ignored = write(STDERR_FILENO, line, len);
		(void)ignored;
	}
}

/* ---- region lock ------------------------------------------------------- */

static void region_lock(struct gang_region *r, uint32_t tid)
{
	uint32_t expected = 0;
	if (atomic_compare_exchange_strong_explicit(&r->lock, &expected, tid, memory_order_acquire,
						    memory_order_relaxed))
		return;
	for (;;) {
		if (syscall(SYS_futex, &r->lock, FUTEX_LOCK_PI, 0, NULL, NULL, 0) == 0) {
			uint32_t now = atomic_load_explicit(&r->lock, memory_order_relaxed);
			if (now & FUTEX_OWNER_DIED) {
				atomic_fetch_and_explicit(&r->lock, ~(uint32_t)FUTEX_OWNER_DIED,
							  memory_order_relaxed);
				say("rtaccel gang: a member died holding the gang lock's region; "
				    "its state is rebuilt\n");
			}
			return;
		}
		if (errno == ESRCH) {
			/* The owner is gone and nobody was queued: the kernel
			 * cannot hand the lock on, so take it over. */
			uint32_t seen = atomic_load_explicit(&r->lock, memory_order_relaxed);
			if (atomic_compare_exchange_strong_explicit(&r->lock, &seen, tid,
								    memory_order_acquire,
								    memory_order_relaxed)) {
				say("rtaccel gang: member %u died holding the gang lock's region; "
				    "its state is rebuilt\n", seen & FUTEX_TID_MASK);
				return;
			}
		}
		if (errno == EDEADLK)
			return; /* ours already: an arbitration rebuilt after our death is impossible */
		if (errno == ENOSYS) {
			/* No PI futexes: spin politely. */
			uint32_t zero = 0;
			while (!atomic_compare_exchange_weak_explicit(&r->lock, &zero, tid,
								      memory_order_acquire,
								      memory_order_relaxed)) {
				zero = 0;
				sched_yield();
			}
			return;
		}
		/* EINTR, EAGAIN, EBUSY (owner exiting): try again. */
	}
}

static void region_unlock(struct gang_region *r, uint32_t tid)
{
	uint32_t expected = tid;
	if (atomic_compare_exchange_strong_explicit(&r->lock, &expected, 0, memory_order_release,
						    memory_order_relaxed))
		return;
	syscall(SYS_futex, &r->lock, FUTEX_UNLOCK_PI, 0, NULL, NULL, 0);
}

/* ---- arbitration (under the region lock) -------------------------------- */

static bool demands(uint32_t state)
{
	return state == SLOT_WANT || state == SLOT_RUN || state == SLOT_PARKED;
}

/* Bumps a futex word and wakes its sleepers, if it has any. A sleeper counts
 * itself before it first reads the word and until it is done waiting; the
 * bump and the count's load are sequentially consistent with those, so
 * either the waker sees the sleeper or the sleeper sees the bump. */
static void wake_all(_Atomic uint32_t *word, _Atomic uint32_t *sleepers)
{
	atomic_fetch_add(word, 1);
	if (atomic_load(sleepers))
		futex_wake((uint32_t *)word, INT_MAX, true);
}

static int send_park(const struct gang_slot *s)
{
	return (int)syscall(SYS_tgkill, s->pid, s->tid, rtaccel_gang_signal());
}

static void arbitrate(struct gang_region *r)
{
	uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
	uint64_t frozen;
	do
		frozen = (w | W_CONTENDED) + W_GEN_ONE;
	while (!atomic_compare_exchange_weak(&r->word, &w, frozen));
	const uint32_t old_prio = W_PRIO(w);
	const int used = slots_used(r);

	uint32_t top = 0;
	for (int i = 0; i < used; i++) {
		struct gang_slot *s = &r->slots[i];
		if (demands(atomic_load_explicit(&s->state, memory_order_acquire)) &&
		    (uint32_t)s->priority > top)
			top = (uint32_t)s->priority;
	}
	uint32_t count = 0;
	bool contended = false, granted = false;
	int targets[RTACCEL_GANG_MAX_THREADS];
	int ntargets = 0;
	for (int i = 0; i < used; i++) {
		struct gang_slot *s = &r->slots[i];
		uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
		if (!demands(st))
			continue;
		if ((uint32_t)s->priority != top) {
			contended = true;
			if (st == SLOT_RUN && !atomic_exchange(&s->park_requested, 1))
				targets[ntargets++] = i;
			continue;
		}
		uint32_t want = SLOT_WANT;
		if (st == SLOT_WANT &&
		    atomic_compare_exchange_strong(&s->state, &want, SLOT_RUN))
			granted = true;
		count++;
	}
	atomic_store_explicit(&r->word,
			      (frozen & W_GEN_MASK) | top | ((uint64_t)count << 8) |
				      (contended ? W_CONTENDED : 0),
			      memory_order_release);
	/* A preemption is the running priority rising over threads that ran;
	 * re-signalling them later (recover) is not another one. */
	if (ntargets && top > old_prio)
		atomic_fetch_add_explicit(&r->preemptions, 1, memory_order_relaxed);
	/* Signals before the grant's wake-up: a preemptor woken here counts on
	 * the lower threads' signals being pending. */
	for (int i = 0; i < ntargets; i++)
		send_park(&r->slots[targets[i]]);
	if (top != old_prio || granted)
		wake_all(&r->seq, &r->seq_sleepers);
}

static const char *state_name(uint32_t st)
{
	static const char *const names[] = {"free", "idle", "waiting", "in a job", "parked in a job"};
	return st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}

/* Removes the slots of threads that no longer exist. */
static void reap(struct gang_region *r)
{
	const int used = slots_used(r);
	for (int i = 0; i < used; i++) {
		struct gang_slot *s = &r->slots[i];
		uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
		if (st == SLOT_FREE)
			continue;
		if (isolate_thread_alive(s->pid, s->tid))
			continue;
		struct gang_def *g = &r->gangs[s->gang];
		say("rtaccel gang: member thread %d (pid %d) of gang '%s' is gone (%s); removed\n",
		    s->tid, s->pid, g->name, state_name(st));
		if (g->members)
			g->members--;
		atomic_store_explicit(&s->park_requested, 0, memory_order_relaxed);
		atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
		atomic_fetch_add_explicit(&r->recoveries, 1, memory_order_relaxed);
	}
}

/* Reaps, re-signals threads below `prio` that still run (a park deferred
 * past its signal is re-requested), and arbitrates. */
static void recover(struct member *m)
{
	struct gang_region *r = m->r;
	region_lock(r, m->tid);
	reap(r);
	const int used = slots_used(r);
	for (int i = 0; i < used; i++)
		atomic_store_explicit(&r->slots[i].park_requested, 0, memory_order_relaxed);
	arbitrate(r);
	region_unlock(r, m->tid);
}

/* Sleeps while WORD still reads SEEN, at most until the next look for dead
 * members. */
static void sleep_on(struct member *m, _Atomic uint32_t *word, uint32_t seen)
{
	struct timespec until = rtaccel_deadline_in(CLOCK_MONOTONIC, REAP_PERIOD_NS);
	if (futex_wait((uint32_t *)word, seen, true, CLOCK_MONOTONIC, &until) == -ETIMEDOUT)
		recover(m);
}

/* ---- parking ------------------------------------------------------------ */

/* Whether a park request still stands: another priority runs. The request
 * is taken back first, so that an arbitration that finds it still set (and
 * sends no signal of its own) has frozen the word before we read it; a word
 * frozen mid-arbitration still shows the old priority, and then the
 * arbitration's outcome is waited for under the region lock. Called outside
 * the slow path only: this thread does not hold the region lock. */
static bool park_stands(struct member *m)
{
	struct gang_region *r = m->r;
	atomic_store(&m->slot->park_requested, 0);
	uint64_t w = atomic_load(&r->word);
	if (W_PRIO(w) == m->priority && (w & W_CONTENDED)) {
		region_lock(r, m->tid);
		w = atomic_load(&r->word);
		region_unlock(r, m->tid);
	}
	return W_PRIO(w) != m->priority;
}

static void park(struct member *m)
{
	struct gang_region *r = m->r;
	struct gang_slot *s = m->slot;
	if (!park_stands(m))
		return; /* a stale request: our priority runs */
	uint32_t run = SLOT_RUN;
	if (!atomic_compare_exchange_strong(&s->state, &run, SLOT_PARKED))
		return; /* not in a job */
	const uint64_t begin = rtaccel_monotonic_ns();
	wake_all(&r->acks, &r->ack_sleepers);
	atomic_fetch_add(&r->seq_sleepers, 1);
	for (;;) {
		uint32_t seq = atomic_load(&r->seq);
		/* Back in the job only under the region lock: an arbitration in
		 * flight still shows our priority in the frozen word, and one that
		 * scanned our slot as parked sent us no signal; running on from
		 * there would run beside the gang it grants. Under the lock the
		 * word is an arbitration's result, and the next one sees us run. */
		if (W_PRIO(atomic_load_explicit(&r->word, memory_order_acquire)) == m->priority) {
			region_lock(r, m->tid);
			const bool ours = W_PRIO(atomic_load(&r->word)) == m->priority;
			if (ours)
				atomic_store_explicit(&s->state, SLOT_RUN, memory_order_release);
			region_unlock(r, m->tid);
			if (ours)
				break;
		}
		sleep_on(m, &r->seq, seq);
	}
	atomic_fetch_sub(&r->seq_sleepers, 1);
	const uint64_t end = rtaccel_monotonic_ns();
	m->stats.parks++;
	m->stats.parked_ns += end - begin;
	m->stats.last_park_begin_ns = begin;
	m->stats.last_park_end_ns = end;
}

static void on_park_signal(int sig, siginfo_t *info, void *context)
{
	(void)sig;
	(void)info;
	(void)context;
	const int saved = errno;
	struct member *m = &self;
	if (m->r) {
		if (m->in_slow || m->nopreempt)
			m->pending = 1;
		else
			park(m);
	}
	errno = saved;
}

/* The slot says that the thread defers a park before the thread starts to
 * (a preemptor that read "does not defer" after membarrier knows the handler
 * will park it), and stops saying so only once it no longer does. */
static void publish_defers(struct member *m, bool in_slow, bool nopreempt)
{
	if (m->slot)
		atomic_store(&m->slot->defers,
			     (in_slow ? DEFER_SLOW : 0) | (nopreempt ? DEFER_NOPREEMPT : 0));
}

static void enter_slow(struct member *m)
{
	publish_defers(m, true, m->nopreempt);
	m->in_slow = 1;
	compiler_barrier();
}

static void leave_slow(struct member *m)
{
	compiler_barrier();
	m->in_slow = 0;
	compiler_barrier();
	if (m->pending && !m->nopreempt) {
		/* Out of a job too: park() takes the request back, so that the
		 * next arbitration signals this thread again. */
		m->pending = 0;
		park(m);
	}
	publish_defers(m, false, m->nopreempt);
}

void rtaccel_gang_preempt_disable(void)
{
	if (!self.nopreempt)
		publish_defers(&self, self.in_slow, true);
	self.nopreempt++;
	compiler_barrier();
}

void rtaccel_gang_preempt_enable(void)
{
	compiler_barrier();
	if (--self.nopreempt == 0) {
		if (self.pending && !self.in_slow) {
			self.pending = 0;
			if (self.r)
				park(&self);
		}
		publish_defers(&self, self.in_slow, false);
	}
}

/* ---- jobs ---------------------------------------------------------------- */

enum lower_kind {
	LOWER_IN_JOB,	  /* every lower thread in a job and not parked */
	LOWER_UNSTOPPED, /* those of them a pending park signal does not stop */
};

static bool lower_running(struct gang_region *r, uint32_t prio, enum lower_kind kind)
{
	const int used = slots_used(r);
	for (int i = 0; i < used; i++) {
		const struct gang_slot *s = &r->slots[i];
		if ((uint32_t)s->priority >= prio ||
		    atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_RUN)
			continue;
		if (kind == LOWER_IN_JOB || atomic_load(&s->defers) || !s->expedited)
			return true;
	}
	return false;
}

/* Whether this process asked for membarrier's interrupts: -1 not yet. */
static _Atomic int process_expedited = -1;

static bool register_expedited(void)
{
	int known = atomic_load(&process_expedited);
	if (known < 0) {
		known = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
		atomic_store(&process_expedited, known);
	}
	return known;
}

/* Once every lower thread in a job has its park signal pending: an
 * interrupt on every CPU that runs a member process, and back. After it no
 * lower thread runs its own code, except those that defer. */
static enum lower_kind stop_lower(void)
{
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0)
		return LOWER_UNSTOPPED;
	return LOWER_IN_JOB;
}

static int begin_slow(struct member *m)
{
	struct gang_region *r = m->r;
	enter_slow(m);
	region_lock(r, m->tid);
	atomic_store_explicit(&m->slot->state, SLOT_WANT, memory_order_release);
	arbitrate(r);
	region_unlock(r, m->tid);

	bool waited = false;
	atomic_fetch_add(&r->seq_sleepers, 1);
	for (;;) {
		uint32_t seq = atomic_load(&r->seq);
		if (atomic_load_explicit(&m->slot->state, memory_order_acquire) == SLOT_RUN)
			break;
		waited = true;
		sleep_on(m, &r->seq, seq);
	}
	atomic_fetch_sub(&r->seq_sleepers, 1);
	/* Granted, and the arbitration that granted us signalled every lower
	 * thread in a job: run once they have stopped. */
	if (lower_running(r, m->priority, LOWER_IN_JOB)) {
		const enum lower_kind kind = stop_lower();
		atomic_fetch_add(&r->ack_sleepers, 1);
		for (;;) {
			uint32_t acks = atomic_load(&r->acks);
			if (!lower_running(r, m->priority, kind))
				break;
			sleep_on(m, &r->acks, acks);
		}
		atomic_fetch_sub(&r->ack_sleepers, 1);
	}
	m->in_job = true;
	m->stats.jobs++;
	m->stats.waits += waited;
	leave_slow(m);
	return 0;
}

int rtaccel_gang_job_begin(void)
{
	struct member *m = &self;
	if (!m->r)
		return -EPERM;
	if (m->in_job)
		return -EDEADLK;
	struct gang_region *r = m->r;
	/* The intent first: an arbitration that freezes the word after our CAS
	 * must find this thread in its scan. */
	atomic_store_explicit(&m->slot->state, SLOT_RUN, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
	if (!(w & W_CONTENDED) && (W_PRIO(w) == 0 || W_PRIO(w) == m->priority)) {
		uint64_t next = (w & ~0xffffffull) | m->priority | ((uint64_t)(W_COUNT(w) + 1) << 8);
		if (atomic_compare_exchange_strong_explicit(&r->word, &w, next, memory_order_acq_rel,
							    memory_order_relaxed)) {
			m->in_job = true;
			m->stats.jobs++;
			return 0;
		}
	}
	return begin_slow(m);
}

static void end_slow(struct member *m)
{
	enter_slow(m);
	region_lock(m->r, m->tid);
	atomic_store_explicit(&m->slot->state, SLOT_IDLE, memory_order_release);
	atomic_store_explicit(&m->slot->park_requested, 0, memory_order_relaxed);
	arbitrate(m->r);
	region_unlock(m->r, m->tid);
	/* A preemptor may be waiting for this thread, which deferred its park
	 * past the end of its job. */
	wake_all(&m->r->acks, &m->r->ack_sleepers);
	leave_slow(m);
}

int rtaccel_gang_job_end(void)
{
	struct member *m = &self;
	if (!m->r)
		return -EPERM;
	if (!m->in_job)
		return -EINVAL;
	struct gang_region *r = m->r;
	m->in_job = false;
	atomic_store_explicit(&m->slot->state, SLOT_IDLE, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&r->word, memory_order_relaxed);
	if (!(w & W_CONTENDED) && W_PRIO(w) == m->priority && W_COUNT(w) > 0) {
		uint32_t left = W_COUNT(w) - 1;
		uint64_t next = (w & ~0xffffffull) | (left ? m->priority : 0) | ((uint64_t)left << 8);
		if (atomic_compare_exchange_strong_explicit(&r->word, &w, next, memory_order_release,
							    memory_order_relaxed))
			return 0;
	}
	end_slow(m);
	return 0;
}

/* ---- membership ---------------------------------------------------------- */

/* Membership is per thread and is not inherited: a forked child starts
 * outside every gang. */
static void forget_in_child(void) { memset(&self, 0, sizeof(self)); }
static void register_atfork(void) { pthread_atfork(NULL, NULL, forget_in_child); }

static int install_handler(void)
{
	static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
	pthread_once(&atfork_once, register_atfork);
	/* Asked every time: the program may have replaced it since. */
	struct sigaction old;
	if (sigaction(rtaccel_gang_signal(), NULL, &old) < 0)
		return -errno;
	if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_park_signal)
		return 0;
	if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
		return -EBUSY;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_park_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	return sigaction(rtaccel_gang_signal(), &sa, NULL) < 0 ? -errno : 0;
}

static void refresh_thresholds(struct gang_region *r)
{
	for (int p = 0; p <= RTACCEL_GANG_PRIORITY_MAX; p++)
		r->threshold_at[p] = UINT32_MAX;
	for (int g = 0; g < RTACCEL_GANG_MAX_GANGS; g++) {
		const struct gang_def *d = &r->gangs[g];
		if (d->name[0] && d->threshold_mbps < r->threshold_at[d->priority])
			r->threshold_at[d->priority] = d->threshold_mbps;
	}
	for (int p = 0; p <= RTACCEL_GANG_PRIORITY_MAX; p++)
		if (r->threshold_at[p] == UINT32_MAX)
			r->threshold_at[p] = 0;
}

int rtaccel_gang_join(rtaccel_gang_lock_t *lock, const char *gang, int priority,
		      uint32_t threshold_mbps)
{
	if (!lock || !isolate_valid_name(gang, RTACCEL_GANG_NAME_MAX) || priority < 1 ||
	    priority > RTACCEL_GANG_PRIORITY_MAX)
		return -EINVAL;
	struct member *m = &self;
	if (m->r)
		return -EBUSY;
	int err = install_handler();
	if (err)
		return err;
	struct gang_region *r = lock->region;
	const uint32_t tid = rtaccel_self_tid();
	const bool expedited = register_expedited();
	region_lock(r, tid);
	int g = -1, free_gang = -1;
	for (int i = 0; i < RTACCEL_GANG_MAX_GANGS; i++) {
		if (!r->gangs[i].name[0]) {
			if (free_gang < 0)
				free_gang = i;
		} else if (strcmp(r->gangs[i].name, gang) == 0) {
			g = i;
		}
	}
	if (g >= 0 && (r->gangs[g].priority != priority ||
		       r->gangs[g].threshold_mbps != threshold_mbps)) {
		err = -EEXIST;
		goto out;
	}
	int slot = -1;
	for (int i = 0; i < RTACCEL_GANG_MAX_THREADS && slot < 0; i++)
		if (atomic_load(&r->slots[i].state) == SLOT_FREE)
			slot = i;
	if (slot < 0 || (g < 0 && free_gang < 0)) {
		err = -ENOSPC;
		goto out;
	}
	if (g < 0) {
		g = free_gang;
		struct gang_def *d = &r->gangs[g];
		memset(d, 0, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", gang);
		d->priority = priority;
		d->threshold_mbps = threshold_mbps;
		refresh_thresholds(r);
	}
	r->gangs[g].members++;
	struct gang_slot *s = &r->slots[slot];
	s->pid = getpid();
	s->tid = (int32_t)tid;
	s->priority = priority;
	s->gang = g;
	s->expedited = expedited;
	if ((uint32_t)slot >= atomic_load(&r->slots_used))
		atomic_store_explicit(&r->slots_used, (uint32_t)slot + 1, memory_order_release);
	atomic_store(&s->defers, 0);
	atomic_store(&s->park_requested, 0);
	atomic_store_explicit(&s->state, SLOT_IDLE, memory_order_release);
	memset(m, 0, sizeof(*m));
	m->slot = s;
	m->priority = (uint32_t)priority;
	m->tid = tid;
	compiler_barrier();
	m->r = r; /* last: the handler acts once this is set */
out:
	region_unlock(r, tid);
	return err;
}

int rtaccel_gang_leave(void)
{
	struct member *m = &self;
	if (!m->r)
		return -EPERM;
	if (m->in_job)
		rtaccel_gang_job_end();
	struct gang_region *r = m->r;
	enter_slow(m);
	region_lock(r, m->tid);
	struct gang_slot *s = m->slot;
	if (r->gangs[s->gang].members)
		r->gangs[s->gang].members--;
	atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
	arbitrate(r);
	region_unlock(r, m->tid);
	m->r = NULL;
	compiler_barrier();
	memset(m, 0, sizeof(*m));
	return 0;
}

int rtaccel_gang_self_stats(struct rtaccel_gang_thread_stats *stats)
{
	if (!stats)
		return -EINVAL;
	*stats = self.stats;
	return self.r ? 0 : -EPERM;
}

/* ---- the region ---------------------------------------------------------- */

static int wrap(void *region, rtaccel_gang_lock_t **out)
{
	rtaccel_gang_lock_t *lock = malloc(sizeof(*lock));
	if (!lock) {
		munmap(region, sizeof(struct gang_region));
		return -ENOMEM;
	}
	lock->region = region;
	*out = lock;
	return 0;
}

int rtaccel_gang_lock_open(const char *name, rtaccel_gang_lock_t **lock)
{
	if (!lock)
		return -EINVAL;
	void *region;
	int err = isolate_shm_open("rtaccel-gang", name, sizeof(struct gang_region), GANG_MAGIC,
				   GANG_VERSION, &region);
	return err ? err : wrap(region, lock);
}

int rtaccel_gang_lock_create_private(rtaccel_gang_lock_t **lock)
{
	if (!lock)
		return -EINVAL;
	void *region;
	int err = isolate_shm_create_private("rtaccel-gang", sizeof(struct gang_region), GANG_MAGIC,
					     GANG_VERSION, &region);
	return err ? err : wrap(region, lock);
}

void rtaccel_gang_lock_close(rtaccel_gang_lock_t *lock)
{
	if (!lock)
		return;
	munmap(lock->region, sizeof(struct gang_region));
	free(lock);
}

int rtaccel_gang_lock_unlink(const char *name) { return isolate_shm_unlink("rtaccel-gang", name); }

int rtaccel_gang_lock_status(const rtaccel_gang_lock_t *lock, struct rtaccel_gang_status *out)
{
	if (!lock || !out)
		return -EINVAL;
	struct gang_region *r = lock->region;
	memset(out, 0, sizeof(*out));
	uint64_t w = atomic_load_explicit(&r->word, memory_order_acquire);
	out->running_priority = (int)W_PRIO(w);
	out->threshold_mbps = r->threshold_at[W_PRIO(w)];
	const int used = slots_used(r);
	for (int i = 0; i < used; i++) {
		uint32_t st = atomic_load_explicit(&r->slots[i].state, memory_order_acquire);
		out->members += st != SLOT_FREE;
		out->waiting += st == SLOT_WANT;
		out->parked += st == SLOT_PARKED;
		out->running += st == SLOT_RUN && (uint32_t)r->slots[i].priority == W_PRIO(w);
	}
	out->preemptions = atomic_load_explicit(&r->preemptions, memory_order_relaxed);
	out->recoveries = atomic_load_explicit(&r->recoveries, memory_order_relaxed);
	return 0;
}
