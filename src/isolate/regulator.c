/* The memory-bandwidth regulator: see regulator.h and docs/isolate.md.
 *
 * A period of core c, as its thread sees it:
 *
 *   boundary  read the meter (used = count - count at the last boundary),
 *             record the period, charge the task that was throttled (TFS),
 *             work out the threshold in force and the budget, set the
 *             meter's sample period to the budget (PERF_EVENT_IOC_PERIOD
 *             also restarts its countdown)
 *   wait      sigtimedwait for the overflow signal until the next boundary
 *   overflow  the budget is spent: note when the meter overflowed (the
 *             sample's time in its ring buffer) and which task spent it,
 *             drop to the park priority and spin until the boundary
 *
 * The meter counts only while best-effort work runs on the core (a cgroup
 * event) or everything on it (a per-core event, without the cgroup), so
 * spinning costs no budget and generates no memory traffic.
 */
#include "isolate/regulator.h"
#include "isolate/regulator_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/cgroup.h"
#include "core/clock.h"
#include "core/futex.h"
#include "core/thread.h"
#include "isolate/shm.h"

#define RING_PAGES 2		/* the metadata page and one page of samples */
#define MAX_DEBTORS 32
#define LINE_BYTES 64
/* The cpu-time meter's shortest sample period. perf allows 10 us for its
 * hrtimer-driven events, but the timer fires at that rate for as long as a
 * best-effort task runs, until this thread parks the core; where one timer
 * interrupt takes longer than that (17.7 us on a slow virtual machine),
 * the interrupts keep the core from this thread, and it never parks. At
 * 50 us an interrupt takes a third of the period at most; a smaller budget
 * is metered as 50 us of best-effort time, within the overflow's onset. */
#define MIN_TIME_BUDGET_NS 50000ull


void regulator_config_defaults(struct regulator_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->period_ns = 1000 * 1000;
	cfg->meter = REGULATOR_METER_AUTO;
	cfg->threshold_mbps = RTACCEL_BWLOCK_UNLIMITED;
	cfg->be_peak_mbps = 10000;
	cfg->control_priority = 99;
	cfg->park_priority = 1;
	cfg->max_records = 120000;
}

static const char *meter_names[] = {"auto", "llc-misses", "raw", "cpu-time"};

const char *regulator_meter_name(const struct regulator *reg) { return meter_names[reg->meter]; }

/* ---- meters ------------------------------------------------------------- */

static int perf_open(struct perf_event_attr *attr, int pid, int cpu, unsigned long flags)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1, flags | PERF_FLAG_FD_CLOEXEC);
}

static void meter_attr(const struct regulator *reg, enum regulator_meter meter,
		       struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	switch (meter) {
	case REGULATOR_METER_LLC:
		a->type = PERF_TYPE_HARDWARE;
		a->config = PERF_COUNT_HW_CACHE_MISSES;
		break;
	case REGULATOR_METER_RAW:
		a->type = reg->cfg.raw_type;
		a->config = reg->cfg.raw_config;
		break;
	default:
		a->type = PERF_TYPE_SOFTWARE;
		a->config = PERF_COUNT_SW_CPU_CLOCK;
		break;
	}
	a->sample_period = 1ull << 40; /* unlimited until the first boundary */
	a->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
}

static int open_meter(struct regulator *reg, int core, enum regulator_meter meter)
{
	struct perf_event_attr a;
	meter_attr(reg, meter, &a);
	if (reg->cgroup_fd >= 0)
		return perf_open(&a, reg->cgroup_fd, core, PERF_FLAG_PID_CGROUP);
	return perf_open(&a, -1, core, 0);
}

/* Which meter AUTO means on this machine: one clear line when it is not the
 * hardware one. */
static int choose_meter(struct regulator *reg, char *err, size_t len)
{
	if (reg->cfg.meter != REGULATOR_METER_AUTO) {
		reg->meter = reg->cfg.meter;
	} else {
		int fd = open_meter(reg, reg->cfg.cores[0], REGULATOR_METER_LLC);
		if (fd >= 0) {
			close(fd);
			reg->meter = REGULATOR_METER_LLC;
		} else {
			if (!reg->cfg.quiet)
				fprintf(stderr,
					"rtaccel-isolate: this machine counts no LLC misses "
					"(perf_event_open: %s); metering best-effort CPU time, "
					"budget = threshold / %u MB/s of the period\n",
					strerror(errno), reg->cfg.be_peak_mbps);
			reg->meter = REGULATOR_METER_CPU_TIME;
		}
	}
	if (reg->meter == REGULATOR_METER_CPU_TIME && reg->cgroup_fd < 0) {
		snprintf(err, len, "the cpu-time meter needs the best-effort cgroup (--cgroup): "
				   "a per-core clock would count idle time too");
		return -EINVAL;
	}
	return 0;
}

/* The meter's budget for one period at THRESHOLD; UINT64_MAX: unlimited. */
static uint64_t budget_of(const struct regulator *reg, uint32_t threshold)
{
	if (threshold == RTACCEL_BWLOCK_UNLIMITED)
		return UINT64_MAX;
	const uint64_t period = reg->cfg.period_ns;
	if (reg->meter == REGULATOR_METER_CPU_TIME) {
		if (threshold >= reg->cfg.be_peak_mbps)
			return UINT64_MAX;
		return period * threshold / reg->cfg.be_peak_mbps;
	}
	/* MB/s x ns = 1e6 B/s x 1e-9 s = 1e-3 B */
	return (uint64_t)threshold * period / (1000ull * LINE_BYTES);
}

/* The threshold in force; the leader also publishes it and its sources. */
static uint32_t threshold_now(struct regulator *reg, bool publish)
{
	uint32_t t = reg->cfg.threshold_mbps;
	uint32_t held = RTACCEL_BWLOCK_UNLIMITED;
	if (reg->bwlock) {
		held = isolate_bwlock_threshold(reg->bwlock);
		if (held < t)
			t = held;
	}
	struct rtaccel_gang_status st = {0};
	if (reg->gang && rtaccel_gang_lock_status(reg->gang, &st) == 0 && st.running_priority &&
	    st.threshold_mbps < t)
		t = st.threshold_mbps;
	if (publish) {
		struct status_region *s = reg->status;
		atomic_store_explicit(&s->threshold_mbps, t, memory_order_relaxed);
		atomic_store_explicit(&s->bwlock_held, held != RTACCEL_BWLOCK_UNLIMITED,
				      memory_order_relaxed);
		atomic_store_explicit(&s->gang_priority, (uint32_t)st.running_priority,
				      memory_order_relaxed);
	}
	return t;
}

static uint64_t read_count(int fd)
{
	uint64_t v = 0;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return 0;
	return v;
}

/* The newest overflow sample in the ring since the last look: when and who. */
static bool newest_sample(struct core_ctx *c, uint64_t *time_ns, int32_t *tid)
{
	struct perf_event_mmap_page *pg = c->ring;
	const uint64_t size = pg->data_size, head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	const unsigned char *data = (const unsigned char *)c->ring + pg->data_offset;
	bool found = false;
	uint64_t tail = c->ring_tail;
	if (head - tail > size)
		tail = head - size; /* overrun: older records are lost, the newest are not */
	while (tail < head) {
		struct perf_event_header h;
		for (size_t i = 0; i < sizeof(h); i++)
			((unsigned char *)&h)[i] = data[(tail + i) % size];
		if (h.size == 0)
			break;
		if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof(h) + 16) {
			struct { uint32_t pid, tid; uint64_t time; } s;
			for (size_t i = 0; i < sizeof(s); i++)
				((unsigned char *)&s)[i] = data[(tail + sizeof(h) + i) % size];
			*time_ns = s.time;
			*tid = (int32_t)s.tid;
			found = true;
		}
		tail += h.size;
	}
	c->ring_tail = head;
	__atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
	return found;
}

/* ---- throttle-fair charging ------------------------------------------------ */

static uint64_t run_ns_of(int fd)
{
	char buf[96];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return UINT64_MAX;
	buf[n] = 0;
	return strtoull(buf, NULL, 10);
}

static void forgive(struct core_ctx *c, int i)
{
	struct debtor *d = &c->debtors[i];
	struct sched_param sp = {0};
	sched_setscheduler(d->tid, d->policy, &sp);
	close(d->stat_fd);
	c->debtors[i] = c->debtors[--c->ndebtors];
}

/* The paper's Eq. 2 on a stock kernel: a task throttled for delta owes
 * rho x delta of CPU time to the other best-effort tasks on the core, and
 * runs under SCHED_IDLE (weight 3 against 1024 for nice 0) until they have
 * had it. Time the core spends on others, or idle, repays the debt, so no
 * task starves: alone on the core, a debtor runs as before. */
static void charge(struct core_ctx *c, int32_t tid, uint64_t throttled_ns)
{
	const struct regulator_config *cfg = &c->reg->cfg;
	if (cfg->rho <= 0 || tid <= 0)
		return;
	int policy = sched_getscheduler(tid);
	if (policy < 0 || (policy != SCHED_OTHER && policy != SCHED_BATCH && policy != SCHED_IDLE))
		return; /* real-time tasks are never best-effort work */
	struct debtor *d = NULL;
	for (int i = 0; i < c->ndebtors; i++)
		if (c->debtors[i].tid == tid)
			d = &c->debtors[i];
	if (!d) {
		if (c->ndebtors == MAX_DEBTORS || policy == SCHED_IDLE)
			return;
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/schedstat", tid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		struct sched_param sp = {0};
		if (sched_setscheduler(tid, SCHED_IDLE, &sp) < 0) {
			close(fd);
			return;
		}
		d = &c->debtors[c->ndebtors++];
		*d = (struct debtor){.tid = tid, .policy = policy, .stat_fd = fd,
				     .last_run_ns = run_ns_of(fd)};
		atomic_fetch_add_explicit(&c->reg->status->cores[c->index].charged, 1,
					  memory_order_relaxed);
	}
	/* Capped, as CFS places a task that wakes near the others: a task
	 * throttled while alone must not owe the next arrival seconds. */
	const int64_t cap = (int64_t)(8 * cfg->rho * (double)cfg->period_ns);
	d->debt_ns += (int64_t)(cfg->rho * (double)throttled_ns);
	if (d->debt_ns > cap)
		d->debt_ns = cap;
}

static void repay(struct core_ctx *c, uint64_t period_ns, uint64_t throttled_ns)
{
	for (int i = c->ndebtors - 1; i >= 0; i--) {
		struct debtor *d = &c->debtors[i];
		uint64_t run = run_ns_of(d->stat_fd);
		if (run == UINT64_MAX) { /* gone */
			close(d->stat_fd);
			c->debtors[i] = c->debtors[--c->ndebtors];
			continue;
		}
		uint64_t own = run - d->last_run_ns;
		d->last_run_ns = run;
		int64_t others = (int64_t)period_ns - (int64_t)throttled_ns - (int64_t)own;
		if (others > 0)
			d->debt_ns -= others;
		if (d->debt_ns <= 0)
			forgive(c, i);
	}
}

/* ---- the period loop ---------------------------------------------------- */

static int set_fifo(int priority)
{
	struct sched_param sp = {.sched_priority = priority};
	return sched_setscheduler(0, SCHED_FIFO, &sp);
}

static void park_until(uint64_t deadline)
{
	while (rtaccel_monotonic_ns() < deadline)
		cpu_relax();
}

static int setup_core(struct core_ctx *c)
{
	struct regulator *reg = c->reg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(c->core, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
		snprintf(c->error, sizeof(c->error), "core %d: cannot run there", c->core);
		return -EINVAL;
	}
	if (set_fifo(reg->cfg.control_priority) < 0) {
		snprintf(c->error, sizeof(c->error),
			 "core %d: SCHED_FIFO %d refused (%s): the regulator needs CAP_SYS_NICE "
			 "and real-time runtime in its cgroup",
			 c->core, reg->cfg.control_priority, strerror(errno));
		return -EPERM;
	}
	c->meter_fd = open_meter(reg, c->core, reg->meter);
	if (c->meter_fd < 0) {
		snprintf(c->error, sizeof(c->error), "core %d: perf_event_open for the %s meter: %s",
			 c->core, meter_names[reg->meter], strerror(errno));
		return -errno;
	}
	const long page = sysconf(_SC_PAGESIZE);
	c->ring = mmap(NULL, (size_t)page * RING_PAGES, PROT_READ | PROT_WRITE, MAP_SHARED,
		       c->meter_fd, 0);
	if (c->ring == MAP_FAILED) {
		c->ring = NULL;
		snprintf(c->error, sizeof(c->error), "core %d: mapping the meter's ring: %s",
			 c->core, strerror(errno));
		return -errno;
	}
	struct f_owner_ex owner = {.type = F_OWNER_TID, .pid = (pid_t)rtaccel_self_tid()};
	if (fcntl(c->meter_fd, F_SETOWN_EX, &owner) < 0 ||
	    fcntl(c->meter_fd, F_SETSIG, reg->signo) < 0 ||
	    fcntl(c->meter_fd, F_SETFL, O_ASYNC | O_NONBLOCK) < 0) {
		snprintf(c->error, sizeof(c->error), "core %d: overflow signal: %s", c->core,
			 strerror(errno));
		return -errno;
	}
	const size_t records = reg->cfg.max_records ? reg->cfg.max_records : 1;
	const size_t bytes = records * sizeof(*c->periods);
	c->periods = malloc(bytes);
	if (!c->periods)
		return -ENOMEM;
	/* Each page touched now, not at its first record inside a period: a
	 * page fault in this real-time thread, and memory that grows through
	 * a long run. Not by memset(0): the compiler makes malloc and memset
	 * one calloc, which leaves fresh pages untouched. */
	for (size_t off = 0; off < bytes; off += (size_t)page)
		((volatile char *)c->periods)[off] = 0;
	return 0;
}

static void record(struct core_ctx *c, const struct regulator_period *p)
{
	struct status_core *sc = &c->reg->status->cores[c->index];
	if (c->nperiods < c->reg->cfg.max_records)
		c->periods[c->nperiods++] = *p;
	atomic_fetch_add_explicit(&sc->periods, 1, memory_order_relaxed);
	atomic_store_explicit(&sc->budget, p->budget, memory_order_relaxed);
	atomic_store_explicit(&sc->used, p->used, memory_order_relaxed);
	if (p->throttled_ns) {
		atomic_fetch_add_explicit(&sc->throttled_periods, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&sc->throttled_ns, p->throttled_ns, memory_order_relaxed);
		atomic_store_explicit(&sc->onset_ns, p->onset_ns, memory_order_relaxed);
	}
}

/* Parks the core until DEADLINE, from PARKED on: this thread spins at
 * SCHED_FIFO, below the park priority where it differs (so that a gang's
 * real-time threads still run), and the time counts as throttled. */
static void park(struct core_ctx *c, struct regulator_period *p, uint64_t parked, uint64_t deadline)
{
	const struct regulator_config *cfg = &c->reg->cfg;
	const bool drop = cfg->park_priority != cfg->control_priority;
	if (drop)
		set_fifo(cfg->park_priority);
	park_until(deadline);
	const uint64_t end = rtaccel_monotonic_ns();
	p->throttled_ns = (uint32_t)(end - parked);
	c->parked_ns += end - parked;
	if (drop)
		set_fifo(cfg->control_priority);
}

/* The leader's chore at each boundary: a holder of the bandwidth lock that
 * died holding it no longer keeps best-effort cores throttled. */
static void reap_dead_holders(struct regulator *reg)
{
	if (!reg->bwlock)
		return;
	int n = isolate_bwlock_reap_held(reg->bwlock);
	if (n <= 0)
		return;
	atomic_fetch_add_explicit(&reg->status->reaped, (uint64_t)n, memory_order_relaxed);
	if (!reg->cfg.quiet)
		fprintf(stderr, "rtaccel-isolate: released the bandwidth lock of %d dead holder(s)\n",
			n);
}

/* A new period from START: its threshold and budget, the meter armed with
 * the budget (the overflow that ends it), and older overflows forgotten:
 * their samples, and their signals, which would otherwise fill the queue
 * until the kernel sends SIGIO. Returns the count the meter was armed at. */
static uint64_t begin_period(struct core_ctx *c, struct regulator_period *p, uint64_t start,
			     const sigset_t *wait_set)
{
	struct regulator *reg = c->reg;
	const uint64_t now = rtaccel_monotonic_ns();
	memset(p, 0, sizeof(*p));
	p->start_ns = start;
	p->late_ns = now > start ? (uint32_t)(now - start < UINT32_MAX ? now - start : UINT32_MAX) : 0;
	p->threshold_mbps = threshold_now(reg, c->index == 0);
	p->budget = budget_of(reg, p->threshold_mbps);
	/* Budget 0 parks the whole period: nothing to meter. */
	uint64_t sample_period = p->budget == UINT64_MAX || p->budget == 0 ? 1ull << 40 : p->budget;
	if (reg->meter == REGULATOR_METER_CPU_TIME && sample_period < MIN_TIME_BUDGET_NS)
		sample_period = MIN_TIME_BUDGET_NS;
	if (sample_period == 0)
		sample_period = 1;
	/* Also restarts the countdown: the whole budget is this period's. */
	ioctl(c->meter_fd, PERF_EVENT_IOC_PERIOD, &sample_period);
	newest_sample(c, &(uint64_t){0}, &(int32_t){0});
	siginfo_t stale;
	while (sigtimedwait(wait_set, &stale, &(struct timespec){0, 0}) > 0)
		;
	return sample_period;
}

/* Waits for the budget's overflow signal until DEADLINE; on it, parks the
 * core for the rest of the period. COUNT0 is the meter at the period's
 * start, ARMED what the meter was armed with. */
static void meter_period(struct core_ctx *c, struct regulator_period *p, uint64_t deadline,
			 uint64_t count0, uint64_t armed, const sigset_t *wait_set)
{
	for (;;) {
		const uint64_t t = rtaccel_monotonic_ns();
		if (t >= deadline)
			return;
		struct timespec rel = rtaccel_timespec_of(deadline - t);
		siginfo_t info;
		if (sigtimedwait(wait_set, &info, &rel) < 0)
			continue; /* EAGAIN: the boundary; EINTR: look again */
		/* Running here at SCHED_FIFO, this thread keeps the core from
		 * best-effort work from now on. */
		const uint64_t parked = rtaccel_monotonic_ns();
		if (p->budget == UINT64_MAX)
			continue;
		/* A late signal of an earlier period spent nothing. */
		if (read_count(c->meter_fd) - count0 + armed / 16 < armed)
			continue;
		uint64_t overflow_ns = 0;
		int32_t tid = 0;
		if (newest_sample(c, &overflow_ns, &tid) && overflow_ns <= parked)
			p->onset_ns = (uint32_t)(parked - overflow_ns < UINT32_MAX ? parked - overflow_ns
										   : UINT32_MAX);
		p->tid = tid;
		park(c, p, parked, deadline);
		return;
	}
}

static void *core_main(void *arg)
{
	struct core_ctx *c = arg;
	struct regulator *reg = c->reg;
	sigset_t wait_set;
	sigemptyset(&wait_set);
	sigaddset(&wait_set, reg->signo);
	pthread_sigmask(SIG_BLOCK, &wait_set, NULL);

	int err = setup_core(c);
	__atomic_store_n(&c->ready, err ? -1 : 1, __ATOMIC_RELEASE);
	futex_wake((uint32_t *)&c->ready, 1, false);
	if (err)
		return NULL;
	while (__atomic_load_n(&reg->go, __ATOMIC_ACQUIRE) == 0)
		futex_wait(&reg->go, 0, false, CLOCK_MONOTONIC, NULL);

	const uint64_t period = reg->cfg.period_ns;
	const uint64_t cpu0 = rtaccel_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t start = reg->started_ns;
	rtaccel_sleep_until(CLOCK_MONOTONIC, start); /* all cores begin together */
	uint64_t count0 = read_count(c->meter_fd);
	struct regulator_period p;
	while (!atomic_load_explicit(&reg->stop, memory_order_relaxed)) {
		if (c->index == 0)
			reap_dead_holders(reg);
		const uint64_t armed = begin_period(c, &p, start, &wait_set);
		const uint64_t deadline = start + period;
		if (p.budget == 0) /* no best-effort traffic at all */
			park(c, &p, rtaccel_monotonic_ns(), deadline);
		else
			meter_period(c, &p, deadline, count0, armed, &wait_set);
		const uint64_t count1 = read_count(c->meter_fd);
		p.used = count1 - count0;
		count0 = count1;
		record(c, &p);
		if (p.throttled_ns && p.tid)
			charge(c, p.tid, p.throttled_ns);
		if (c->ndebtors)
			repay(c, period, p.throttled_ns);
		/* After a stall, skip the periods that are already over. */
		start = deadline;
		const uint64_t after = rtaccel_monotonic_ns();
		if (after >= start + period)
			start += (after - start) / period * period;
	}
	/* No more signals for a thread that is gone. */
	fcntl(c->meter_fd, F_SETFL, O_NONBLOCK);
	while (c->ndebtors)
		forgive(c, c->ndebtors - 1);
	c->cpu_ns = rtaccel_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	return NULL;
}

/* ---- start and stop ------------------------------------------------------- */

static int open_status(struct regulator *reg)
{
	const char *name = reg->cfg.bwlock[0] ? reg->cfg.bwlock : "default";
	snprintf(reg->status_name, sizeof(reg->status_name), "%s", name);
	void *region;
	int err = isolate_shm_open(RTACCEL_REGULATOR_STATUS_PREFIX, name, sizeof(struct status_region),
				   STATUS_MAGIC, STATUS_VERSION, &region);
	if (err)
		return err;
	struct status_region *s = region;
	int32_t other = atomic_load(&s->pid);
	if (other && other != getpid() && isolate_thread_alive(other, other)) {
		munmap(region, sizeof(*s));
		return -EBUSY;
	}
	memset((char *)s + sizeof(s->header), 0, sizeof(*s) - sizeof(s->header));
	s->ncores = (uint32_t)reg->cfg.ncores;
	s->period_ns = reg->cfg.period_ns;
	s->be_peak_mbps = reg->cfg.be_peak_mbps;
	for (int i = 0; i < reg->cfg.ncores; i++)
		s->cores[i].core = reg->cfg.cores[i];
	atomic_store(&s->pid, getpid());
	reg->status = s;
	return 0;
}

int regulator_start(const struct regulator_config *cfg, struct regulator **out, char *err,
		    size_t len)
{
	if (cfg->ncores < 1 || cfg->ncores > REGULATOR_MAX_CORES) {
		snprintf(err, len, "no core to regulate");
		return -EINVAL;
	}
	if (cfg->period_ns < 100 * 1000 || cfg->period_ns > 1000 * 1000 * 1000) {
		snprintf(err, len, "the period must be between 100 us and 1 s");
		return -EINVAL;
	}
	if (cfg->park_priority < 1 || cfg->park_priority > 99 || cfg->control_priority < 1 ||
	    cfg->control_priority > 99 || cfg->park_priority > cfg->control_priority) {
		snprintf(err, len, "priorities: 1 <= park <= control <= 99");
		return -EINVAL;
	}
	if (cfg->be_peak_mbps == 0 || !(cfg->rho >= 0 && cfg->rho <= 100)) {
		snprintf(err, len, "be_peak_mbps must be > 0 and rho in 0..100");
		return -EINVAL;
	}
	struct regulator *reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	reg->cfg = *cfg;
	reg->cgroup_fd = -1;
	reg->signo = SIGRTMIN + 4;
	int rc = 0;
	if (cfg->cgroup[0]) {
		reg->cgroup_fd = open(cfg->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (reg->cgroup_fd < 0) {
			rc = -errno;
			snprintf(err, len, "best-effort cgroup %s: %s", cfg->cgroup, strerror(errno));
			goto fail;
		}
	}
	if ((rc = choose_meter(reg, err, len)))
		goto fail;
	if (cfg->bwlock[0] && (rc = rtaccel_bwlock_open(cfg->bwlock, &reg->bwlock))) {
		snprintf(err, len, "bandwidth lock '%s': %s", cfg->bwlock, strerror(-rc));
		goto fail;
	}
	if (cfg->gang[0] && (rc = rtaccel_gang_lock_open(cfg->gang, &reg->gang))) {
		snprintf(err, len, "gang lock '%s': %s", cfg->gang, strerror(-rc));
		goto fail;
	}
	if ((rc = open_status(reg))) {
		snprintf(err, len, rc == -EBUSY ? "another regulator runs for bandwidth lock '%s'"
						: "status region for '%s': %s",
			 reg->status_name, strerror(-rc));
		goto fail;
	}
	snprintf(reg->status->meter, sizeof(reg->status->meter), "%s", meter_names[reg->meter]);
	/* A core's thread needs little stack, and with the process's memory
	 * locked each thread's stack is resident whole: 8 MiB by default, a
	 * tenth of a gigabyte on a machine of a dozen regulated cores. */
	for (int i = 0; i < cfg->ncores; i++) {
		struct core_ctx *c = &reg->cores[i];
		c->reg = reg;
		c->index = i;
		c->core = cfg->cores[i];
		c->meter_fd = -1;
		if (rtaccel_thread_create(&c->thread, RTACCEL_THREAD_STACK, core_main, c) != 0) {
			rc = -EAGAIN;
			snprintf(err, len, "cannot start the thread of core %d", c->core);
			goto fail_threads;
		}
		c->started = true;
		while (__atomic_load_n(&c->ready, __ATOMIC_ACQUIRE) == 0)
			futex_wait((uint32_t *)&c->ready, 0, false, CLOCK_MONOTONIC, NULL);
		if (c->ready < 0) {
			rc = -EPERM;
			snprintf(err, len, "%s", c->error);
			goto fail_threads;
		}
	}
	/* Periods of all cores start together, once all are ready. */
	reg->started_ns = rtaccel_monotonic_ns() + cfg->period_ns;
	reg->status->started_ns = reg->started_ns;
	__atomic_store_n(&reg->go, 1, __ATOMIC_RELEASE);
	futex_wake(&reg->go, INT_MAX, false);
	*out = reg;
	return 0;
fail_threads:
	regulator_stop(reg);
	regulator_free(reg);
	return rc;
fail:
	regulator_free(reg);
	return rc;
}

void regulator_stop(struct regulator *reg)
{
	if (!reg || atomic_exchange(&reg->stop, 1))
		return;
	/* Threads still waiting to start go straight to their end. */
	__atomic_store_n(&reg->go, 1, __ATOMIC_RELEASE);
	futex_wake(&reg->go, INT_MAX, false);
	for (int i = 0; i < reg->cfg.ncores; i++) {
		struct core_ctx *c = &reg->cores[i];
		if (!c->started)
			continue;
		pthread_kill(c->thread, reg->signo); /* cuts the wait short */
		pthread_join(c->thread, NULL);
		c->started = false;
	}
	reg->stopped_ns = rtaccel_monotonic_ns();
	if (reg->status)
		atomic_store(&reg->status->pid, 0);
}

void regulator_free(struct regulator *reg)
{
	if (!reg)
		return;
	const long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < REGULATOR_MAX_CORES; i++) {
		struct core_ctx *c = &reg->cores[i];
		if (c->ring)
			munmap(c->ring, (size_t)page * RING_PAGES);
		if (c->meter_fd >= 0 && c->reg)
			close(c->meter_fd);
		free(c->periods);
	}
	if (reg->status)
		munmap(reg->status, sizeof(*reg->status));
	if (reg->cgroup_fd >= 0)
		close(reg->cgroup_fd);
	rtaccel_bwlock_close(reg->bwlock);
	rtaccel_gang_lock_close(reg->gang);
	free(reg);
}

const struct regulator_period *regulator_periods(const struct regulator *reg, int i,
						 uint64_t *count)
{
	*count = reg->cores[i].nperiods;
	return reg->cores[i].periods;
}

uint64_t regulator_overhead_ns(const struct regulator *reg, int i)
{
	const struct core_ctx *c = &reg->cores[i];
	return c->cpu_ns > c->parked_ns ? c->cpu_ns - c->parked_ns : 0;
}

uint64_t regulator_wall_ns(const struct regulator *reg)
{
	uint64_t end = reg->stopped_ns ? reg->stopped_ns : rtaccel_monotonic_ns();
	return end > reg->started_ns ? end - reg->started_ns : 0;
}

