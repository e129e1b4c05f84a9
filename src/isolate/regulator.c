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

#include "core/clock.h"
#include "core/futex.h"
#include "core/percentile.h"
#include "core/thread.h"
#include "isolate/cgroup.h"
#include "isolate/shm.h"

#define STATUS_MAGIC 0x67657262u /* "breg" */
#define STATUS_VERSION 1u
#define RING_PAGES 2		/* the metadata page and one page of samples */
#define MAX_DEBTORS 32
#define LINE_BYTES 64
/* perf clamps hrtimer-driven sample periods to this. */
#define MIN_TIME_BUDGET_NS 10000ull

struct status_core {
	int32_t core;
	uint32_t reserved;
	_Atomic uint64_t periods;
	_Atomic uint64_t throttled_periods;
	_Atomic uint64_t throttled_ns;
	_Atomic uint64_t budget;
	_Atomic uint64_t used;
	_Atomic uint64_t onset_ns;
	_Atomic uint64_t charged;
};

struct status_region {
	struct isolate_shm_header header;
	_Atomic int32_t pid; /* 0 once the regulator stopped */
	uint32_t ncores;
	uint64_t period_ns;
	uint64_t started_ns;
	char meter[32];
	_Atomic uint32_t threshold_mbps;
	uint32_t be_peak_mbps;
	_Atomic uint32_t bwlock_held;
	_Atomic uint32_t gang_priority;
	_Atomic uint64_t reaped;
	struct status_core cores[REG_MAX_CORES];
};

struct debtor {
	pid_t tid;
	int policy; /* restored when the debt is paid */
	int stat_fd;
	int64_t debt_ns;
	uint64_t last_run_ns;
};

struct core_ctx {
	struct regulator *reg;
	int index, core;
	pthread_t thread;
	bool started;
	int meter_fd;
	void *ring;
	uint64_t ring_tail;
	struct reg_period *periods;
	uint64_t nperiods;
	uint64_t parked_ns, cpu_ns;
	struct debtor debtors[MAX_DEBTORS];
	int ndebtors;
	char error[200];
	int ready; /* futex: 1 started, -1 failed */
};

struct regulator {
	struct reg_config cfg;
	enum reg_meter meter;
	int cgroup_fd;
	int signo;
	rtaccel_bwlock_t *bwlock;
	rtaccel_gang_lock_t *gang;
	struct status_region *status;
	char status_name[64];
	_Atomic int stop;
	uint32_t go; /* futex: set once every core is set up and the start is known */
	uint64_t started_ns, stopped_ns;
	struct core_ctx cores[REG_MAX_CORES];
};

void reg_config_defaults(struct reg_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->period_ns = 1000 * 1000;
	cfg->meter = REG_METER_AUTO;
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

static void meter_attr(const struct regulator *reg, enum reg_meter meter,
		       struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	switch (meter) {
	case REG_METER_LLC:
		a->type = PERF_TYPE_HARDWARE;
		a->config = PERF_COUNT_HW_CACHE_MISSES;
		break;
	case REG_METER_RAW:
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

static int open_meter(struct regulator *reg, int core, enum reg_meter meter)
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
	if (reg->cfg.meter != REG_METER_AUTO) {
		reg->meter = reg->cfg.meter;
	} else {
		int fd = open_meter(reg, reg->cfg.cores[0], REG_METER_LLC);
		if (fd >= 0) {
			close(fd);
			reg->meter = REG_METER_LLC;
		} else {
			if (!reg->cfg.quiet)
				fprintf(stderr,
					"rtaccel-isolate: this machine counts no LLC misses "
					"(perf_event_open: %s); metering best-effort CPU time, "
					"budget = threshold / %u MB/s of the period\n",
					strerror(errno), reg->cfg.be_peak_mbps);
			reg->meter = REG_METER_CPU_TIME;
		}
	}
	if (reg->meter == REG_METER_CPU_TIME && reg->cgroup_fd < 0) {
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
	if (reg->meter == REG_METER_CPU_TIME) {
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
	const struct reg_config *cfg = &c->reg->cfg;
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
	c->periods = malloc(records * sizeof(*c->periods));
	if (!c->periods)
		return -ENOMEM;
	/* Touched now, not at the first write of each page inside a period. */
	memset(c->periods, 0, records * sizeof(*c->periods));
	return 0;
}

static void record(struct core_ctx *c, const struct reg_period *p)
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
	const bool leader = c->index == 0;
	const bool drop = reg->cfg.park_priority != reg->cfg.control_priority;
	uint64_t start = reg->started_ns, count0 = read_count(c->meter_fd);
	uint64_t cpu0 = 0;
	{
		struct timespec ts;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		cpu0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	struct reg_period p = {0};
	uint64_t armed = 0;
	rtaccel_sleep_until(CLOCK_MONOTONIC, start); /* all cores begin together */
	count0 = read_count(c->meter_fd);
	while (!atomic_load_explicit(&reg->stop, memory_order_relaxed)) {
		/* Boundary: the threshold and budget of the new period. */
		const uint64_t now = rtaccel_monotonic_ns();
		if (leader && reg->bwlock) {
			int n = isolate_bwlock_reap_held(reg->bwlock);
			if (n > 0) {
				atomic_fetch_add_explicit(&reg->status->reaped, (uint64_t)n,
							  memory_order_relaxed);
				if (!reg->cfg.quiet)
					fprintf(stderr, "rtaccel-isolate: released the bandwidth "
							"lock of %d dead holder(s)\n", n);
			}
		}
		memset(&p, 0, sizeof(p));
		p.start_ns = start;
		p.late_ns = now > start ? (uint32_t)(now - start < UINT32_MAX ? now - start : UINT32_MAX) : 0;
		p.threshold_mbps = threshold_now(reg, leader);
		p.budget = budget_of(reg, p.threshold_mbps);
		/* Budget 0 parks the whole period: nothing to meter. */
		uint64_t sample_period = p.budget == UINT64_MAX || p.budget == 0 ? 1ull << 40
										 : p.budget;
		if (reg->meter == REG_METER_CPU_TIME && sample_period < MIN_TIME_BUDGET_NS)
			sample_period = MIN_TIME_BUDGET_NS;
		if (sample_period == 0)
			sample_period = 1;
		/* Also restarts the countdown: the whole budget is this period's. */
		ioctl(c->meter_fd, PERF_EVENT_IOC_PERIOD, &sample_period);
		armed = sample_period;
		/* Forget older overflows: their samples, and their signals, which
		 * would otherwise fill the queue until the kernel sends SIGIO. */
		newest_sample(c, &(uint64_t){0}, &(int32_t){0});
		siginfo_t stale;
		while (sigtimedwait(&wait_set, &stale, &(struct timespec){0, 0}) > 0)
			;
		const uint64_t deadline = start + period;

		if (p.budget == 0) {
			/* No best-effort traffic at all: park for the whole period. */
			if (drop)
				set_fifo(reg->cfg.park_priority);
			const uint64_t t0 = rtaccel_monotonic_ns();
			park_until(deadline);
			p.throttled_ns = (uint32_t)(rtaccel_monotonic_ns() - t0);
			c->parked_ns += p.throttled_ns;
			if (drop)
				set_fifo(reg->cfg.control_priority);
		} else {
			for (;;) {
				const uint64_t t = rtaccel_monotonic_ns();
				if (t >= deadline)
					break;
				struct timespec rel = {(time_t)((deadline - t) / 1000000000ull),
						       (long)((deadline - t) % 1000000000ull)};
				siginfo_t info;
				if (sigtimedwait(&wait_set, &info, &rel) < 0)
					continue; /* EAGAIN: the boundary; EINTR: look again */
				/* Running here at SCHED_FIFO, this thread keeps the core
				 * from best-effort work from now on. */
				const uint64_t parked = rtaccel_monotonic_ns();
				if (p.budget == UINT64_MAX)
					continue;
				uint64_t used = read_count(c->meter_fd) - count0;
				/* A late signal of an earlier period spent nothing. */
				if (used + armed / 16 < armed)
					continue;
				uint64_t overflow_ns = 0;
				int32_t tid = 0;
				if (newest_sample(c, &overflow_ns, &tid) && overflow_ns <= parked)
					p.onset_ns = (uint32_t)(parked - overflow_ns < UINT32_MAX
									? parked - overflow_ns
									: UINT32_MAX);
				p.tid = tid;
				if (drop)
					set_fifo(reg->cfg.park_priority);
				park_until(deadline);
				const uint64_t end = rtaccel_monotonic_ns();
				p.throttled_ns = (uint32_t)(end - parked);
				c->parked_ns += end - parked;
				if (drop)
					set_fifo(reg->cfg.control_priority);
				break;
			}
		}
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
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	c->cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec - cpu0;
	return NULL;
}

/* ---- start and stop ------------------------------------------------------- */

static int open_status(struct regulator *reg)
{
	const char *name = reg->cfg.bwlock[0] ? reg->cfg.bwlock : "default";
	snprintf(reg->status_name, sizeof(reg->status_name), "%s", name);
	void *region;
	int err = isolate_shm_open("rtaccel-regulator", name, sizeof(struct status_region),
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

int regulator_start(const struct reg_config *cfg, struct regulator **out, char *err, size_t len)
{
	if (cfg->ncores < 1 || cfg->ncores > REG_MAX_CORES) {
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
	for (int i = 0; i < cfg->ncores; i++) {
		struct core_ctx *c = &reg->cores[i];
		c->reg = reg;
		c->index = i;
		c->core = cfg->cores[i];
		c->meter_fd = -1;
		if (pthread_create(&c->thread, NULL, core_main, c) != 0) {
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
	for (int i = 0; i < REG_MAX_CORES; i++) {
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

const struct reg_period *regulator_periods(const struct regulator *reg, int i, uint64_t *count)
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

/* ---- summary and trace ---------------------------------------------------- */

double reg_percentile(double *v, size_t n, double q)
{
	if (!n)
		return 0;
	rtaccel_sort_double(v, n);
	return rtaccel_percentile_sorted(v, n, q);
}

void regulator_write_summary(const struct regulator *reg, FILE *out)
{
	const uint64_t wall = regulator_wall_ns(reg);
	fprintf(out, "{\"meter\": \"%s\", \"period_us\": %.1f, \"be_peak_mbps\": %u, "
		     "\"rho\": %.2f, \"wall_s\": %.3f, \"cores\": [",
		meter_names[reg->meter], (double)reg->cfg.period_ns / 1e3, reg->cfg.be_peak_mbps,
		reg->cfg.rho, (double)wall / 1e9);
	for (int i = 0; i < reg->cfg.ncores; i++) {
		const struct core_ctx *c = &reg->cores[i];
		double *onset = calloc(c->nperiods + 1, sizeof(double));
		double *ratio = calloc(c->nperiods + 1, sizeof(double));
		double *late = calloc(c->nperiods + 1, sizeof(double));
		size_t no = 0, nr = 0, nl = 0, throttled = 0;
		double throttled_ns = 0;
		for (uint64_t k = 0; onset && ratio && late && k < c->nperiods; k++) {
			const struct reg_period *p = &c->periods[k];
			late[nl++] = p->late_ns / 1e3;
			if (!p->throttled_ns)
				continue;
			throttled++;
			throttled_ns += p->throttled_ns;
			if (p->onset_ns)
				onset[no++] = p->onset_ns / 1e3;
			if (p->budget && p->budget != UINT64_MAX)
				ratio[nr++] = (double)p->used / (double)p->budget;
		}
		const uint64_t overhead = regulator_overhead_ns(reg, i);
		fprintf(out,
			"%s{\"core\": %d, \"periods\": %llu, \"throttled_periods\": %zu, "
			"\"throttled_ms\": %.3f, \"onset_p50_us\": %.2f, \"onset_p99_us\": %.2f, "
			"\"budget_ratio_p50\": %.3f, \"budget_ratio_p99\": %.3f, "
			"\"late_p50_us\": %.2f, \"late_p99_us\": %.2f, \"overhead_cpu\": %.4f}",
			i ? ", " : "", c->core, (unsigned long long)c->nperiods, throttled,
			throttled_ns / 1e6, reg_percentile(onset, no, 0.5), reg_percentile(onset, no, 0.99),
			reg_percentile(ratio, nr, 0.5), reg_percentile(ratio, nr, 0.99), reg_percentile(late, nl, 0.5),
			reg_percentile(late, nl, 0.99), wall ? (double)overhead / (double)wall : 0.0);
		free(onset);
		free(ratio);
		free(late);
	}
	fprintf(out, "], \"bwlock_reaped\": %llu}\n",
		reg->status ? (unsigned long long)atomic_load(&reg->status->reaped) : 0ull);
}

int regulator_write_trace(const struct regulator *reg, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	const double t0 = (double)reg->started_ns / 1e3;
	fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n"
		   "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, "
		   "\"args\": {\"name\": \"rtaccel regulator (%s meter)\"}}",
		meter_names[reg->meter]);
	for (int i = 0; i < reg->cfg.ncores; i++) {
		const struct core_ctx *c = &reg->cores[i];
		fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
			   "\"args\": {\"name\": \"core %d\"}}", c->core, c->core);
		uint32_t last_threshold = 0;
		for (uint64_t k = 0; k < c->nperiods; k++) {
			const struct reg_period *p = &c->periods[k];
			const double ts = (double)p->start_ns / 1e3 - t0;
			if (k == 0 || p->threshold_mbps != last_threshold) {
				fprintf(f, ",\n{\"name\": \"threshold MB/s core %d\", \"ph\": \"C\", "
					   "\"pid\": 1, \"ts\": %.3f, \"args\": {\"MB/s\": %lld}}",
					c->core, ts,
					p->threshold_mbps == RTACCEL_BWLOCK_UNLIMITED
						? -1ll : (long long)p->threshold_mbps);
				last_threshold = p->threshold_mbps;
			}
			/* Budget used, per regulated period: the counter track that
			 * shows a task spending its budget early or late. */
			if (p->budget && p->budget != UINT64_MAX)
				fprintf(f, ",\n{\"name\": \"budget used core %d\", \"ph\": \"C\", "
					   "\"pid\": 1, \"ts\": %.3f, \"args\": {\"%%\": %.1f}}",
					c->core, ts, 100.0 * (double)p->used / (double)p->budget);
			if (!p->throttled_ns)
				continue;
			const double dur = p->throttled_ns / 1e3;
			fprintf(f, ",\n{\"name\": \"throttled\", \"cat\": \"regulator\", \"ph\": \"X\", "
				   "\"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
				   "\"args\": {\"task\": %d, \"onset_us\": %.2f, \"budget\": %llu, "
				   "\"used\": %llu}}",
				c->core, ts + (double)reg->cfg.period_ns / 1e3 - dur, dur, p->tid,
				p->onset_ns / 1e3, (unsigned long long)p->budget,
				(unsigned long long)p->used);
		}
	}
	fprintf(f, "\n]}\n");
	return fclose(f) == 0 ? 0 : -EIO;
}

/* ---- live status ---------------------------------------------------------- */

int regulator_print_status(const char *name, bool json, FILE *out)
{
	char path[256];
	if (!isolate_valid_name(name, 64))
		return -EINVAL;
	snprintf(path, sizeof(path), "/dev/shm/rtaccel-regulator.%s", name);
	if (access(path, F_OK) < 0)
		return -ENOENT;
	void *region;
	int err = isolate_shm_open("rtaccel-regulator", name, sizeof(struct status_region),
				   STATUS_MAGIC, STATUS_VERSION, &region);
	if (err)
		return err;
	const struct status_region *s = region;
	const int32_t pid = atomic_load((_Atomic int32_t *)&s->pid);
	const bool running = pid && isolate_thread_alive(pid, pid);
	const uint32_t thr = atomic_load((_Atomic uint32_t *)&s->threshold_mbps);
	const uint32_t n = s->ncores < REG_MAX_CORES ? s->ncores : REG_MAX_CORES;
	if (json) {
		fprintf(out, "{\"running\": %s, \"pid\": %d, \"meter\": \"%.31s\", \"period_us\": %.1f, "
			     "\"threshold_mbps\": %lld, \"bwlock_held\": %u, \"gang_priority\": %u, "
			     "\"reaped\": %llu, \"cores\": [",
			running ? "true" : "false", pid, s->meter, (double)s->period_ns / 1e3,
			thr == RTACCEL_BWLOCK_UNLIMITED ? -1ll : (long long)thr,
			atomic_load((_Atomic uint32_t *)&s->bwlock_held),
			atomic_load((_Atomic uint32_t *)&s->gang_priority),
			(unsigned long long)atomic_load((_Atomic uint64_t *)&s->reaped));
	} else {
		fprintf(out, "regulator '%s': %s (pid %d), %.31s meter, period %.0f us\n", name,
			running ? "running" : "stopped", pid, s->meter, (double)s->period_ns / 1e3);
		if (thr == RTACCEL_BWLOCK_UNLIMITED)
			fprintf(out, "threshold: unlimited (no holder, no gang)\n");
		else
			fprintf(out, "threshold: %u MB/s per best-effort core\n", thr);
		fprintf(out, "%5s %10s %10s %10s %12s %12s %12s %8s\n", "core", "periods",
			"throttled", "thr. ms", "budget", "used", "onset us", "charged");
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct status_core *c = &s->cores[i];
		const uint64_t budget = atomic_load((_Atomic uint64_t *)&c->budget);
		const unsigned long long periods = atomic_load((_Atomic uint64_t *)&c->periods),
			throttled = atomic_load((_Atomic uint64_t *)&c->throttled_periods),
			used = atomic_load((_Atomic uint64_t *)&c->used),
			charged = atomic_load((_Atomic uint64_t *)&c->charged);
		const double tms = (double)atomic_load((_Atomic uint64_t *)&c->throttled_ns) / 1e6,
			     onset = (double)atomic_load((_Atomic uint64_t *)&c->onset_ns) / 1e3;
		if (json) {
			fprintf(out, "%s{\"core\": %d, \"periods\": %llu, \"throttled_periods\": %llu, "
				     "\"throttled_ms\": %.3f, \"budget\": %lld, \"used\": %llu, "
				     "\"onset_us\": %.2f, \"charged\": %llu}",
				i ? ", " : "", c->core, periods, throttled, tms,
				budget == UINT64_MAX ? -1ll : (long long)budget, used, onset, charged);
		} else {
			char b[24];
			if (budget == UINT64_MAX)
				snprintf(b, sizeof(b), "unlimited");
			else
				snprintf(b, sizeof(b), "%llu", (unsigned long long)budget);
			fprintf(out, "%5d %10llu %10llu %10.1f %12s %12llu %12.1f %8llu\n", c->core,
				periods, throttled, tms, b, used, onset, charged);
		}
	}
	if (json)
		fprintf(out, "]}\n");
	munmap(region, sizeof(*s));
	return 0;
}
