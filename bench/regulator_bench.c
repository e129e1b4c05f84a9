/* The memory-bandwidth regulator and the bandwidth lock, measured on this
 * machine. Core 0 is the real-time core, core 1 the best-effort core that
 * the regulator throttles; best-effort programs run in a cgroup of their own
 * (made under the cgroup2 mount and removed at the end).
 *
 *   rtaccel-regulator-bench regulator [--duration S] [--threshold MBPS]
 *       a memory hog on core 1 under a fixed threshold: throttle onset after
 *       the budget is spent (p50/p99), the budget the hog got against its
 *       budget, how late periods begin, the regulator's own CPU time; then
 *       what freezing the best-effort cgroup (cgroup.freeze) takes, the
 *       throttle the regulator does not use
 *   rtaccel-regulator-bench tfs [--duration S]
 *       BWLOCK++'s Fig. 5/6: a memory-bound and a CPU-bound best-effort task
 *       on the throttled core; the share of periods each gets and the time
 *       the core is throttled, under plain CFS and under TFS with rho 1, 3
 *   rtaccel-regulator-bench bwlock [--duration S] [--thresholds LIST]
 *       BWLOCK++'s Fig. 7/8 for a CPU task: a memory-bound critical task on
 *       core 0 that holds the bandwidth lock during its jobs, with a memory
 *       hog on core 1: solo, co-run unregulated, co-run at each threshold
 *   rtaccel-regulator-bench lock
 *       bandwidth lock take + release, uncontended, in ns
 *
 * Each prints one JSON object. Exit 0; 77 when the machine cannot run it
 * (fewer than 2 cores, no SCHED_FIFO, no cgroup2), with the reason. */
#include "rtaccel/isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cache.h"
#include "core/cgroup.h"
#include "core/clock.h"
#include "core/percentile.h"
#include "core/realtime.h"
#include "isolate/regulator.h"

#define LINE 64
#define RT_CORE 0
#define BE_CORE 1

static char be_cgroup[256], cpu_cgroup[256];
static char lock_name[64];

static void pin(int core)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(core, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static int fifo(int priority)
{
	struct sched_param sp = {.sched_priority = priority};
	return sched_setscheduler(0, SCHED_FIFO, &sp);
}

static int skip(const char *why)
{
	printf("{\"skipped\": \"%s\"}\n", why);
	fprintf(stderr, "rtaccel-regulator-bench: %s\n", why);
	return 77;
}

/* ---- best-effort programs ------------------------------------------------ */

static size_t llc_bytes(void)
{
	size_t v = rtaccel_llc_bytes();
	return v ? v : (size_t)32 << 20;
}

/* Reads SIZE bytes, a line at a time, forever. */
static void __attribute__((noreturn)) stream(size_t size)
{
	volatile unsigned char *buf = malloc(size);
	if (!buf)
		_exit(1);
	memset((void *)buf, 1, size);
	uint64_t sum = 0;
	for (;;) {
		for (size_t i = 0; i < size; i += LINE)
			sum += buf[i];
		if (sum == 42)
			buf[0] = 0;
	}
}

/* The hogs alive now, for stopped() to end before it removes their cgroups. */
#define MAX_HOGS 4
static volatile pid_t hogs[MAX_HOGS];

/* A child in CGROUP on CORE streaming SIZE bytes. */
static pid_t spawn(const char *cgroup, int core, size_t size)
{
	pid_t pid = fork();
	for (int i = 0; pid > 0 && i < MAX_HOGS; i++)
		if (!hogs[i]) {
			hogs[i] = pid;
			break;
		}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		struct sched_param sp = {0};
		sched_setscheduler(0, SCHED_OTHER, &sp);
		if (rtaccel_cgroup_add(cgroup, 0) < 0)
			_exit(1);
		pin(core);
		stream(size);
	}
	return pid;
}

static void reap(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < MAX_HOGS; i++)
		if (hogs[i] == pid)
			hogs[i] = 0;
}

static uint64_t run_ns(pid_t pid)
{
	char path[64], buf[96];
	snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return strtoull(buf, NULL, 10);
}

static int setup_cgroups(void)
{
	char root[200];
	if (rtaccel_cgroup2_root(root, sizeof(root)) < 0)
		return -1;
	snprintf(be_cgroup, sizeof(be_cgroup), "%s/rtaccel-bench-be.%d", root, getpid());
	snprintf(cpu_cgroup, sizeof(cpu_cgroup), "%s/rtaccel-bench-cpu.%d", root, getpid());
	char out[256];
	if (rtaccel_cgroup_make(be_cgroup, out, sizeof(out)) < 0 ||
	    rtaccel_cgroup_make(cpu_cgroup, out, sizeof(out)) < 0)
		return -1;
	snprintf(lock_name, sizeof(lock_name), "bench.%d", getpid());
	return 0;
}

static char regulator_shm[128], bwlock_shm[128];

static void cleanup(void)
{
	rmdir(be_cgroup);
	rmdir(cpu_cgroup);
	rtaccel_bwlock_unlink(lock_name);
	unlink(regulator_shm);
}

/* SIGTERM or SIGINT (the rtaccel command that started this one died, or a
 * user's Ctrl-C): the hogs, the cgroups and the shared memory go, as at the
 * end of a run. Async-signal-safe: kill, waitpid, rmdir and unlink only. */
static void stopped(int sig)
{
	for (int i = 0; i < MAX_HOGS; i++)
		if (hogs[i] > 0) {
			kill(hogs[i], SIGKILL);
			waitpid(hogs[i], NULL, 0);
		}
	rmdir(be_cgroup);
	rmdir(cpu_cgroup);
	unlink(bwlock_shm);
	unlink(regulator_shm);
	_exit(128 + sig);
}

static void config(struct regulator_config *cfg, uint32_t threshold, double rho)
{
	regulator_config_defaults(cfg);
	cfg->cores[0] = BE_CORE;
	cfg->ncores = 1;
	cfg->meter = REGULATOR_METER_AUTO;
	snprintf(cfg->cgroup, sizeof(cfg->cgroup), "%s", be_cgroup);
	snprintf(cfg->bwlock, sizeof(cfg->bwlock), "%s", lock_name);
	cfg->threshold_mbps = threshold;
	cfg->rho = rho;
	cfg->quiet = true;
}

static struct regulator *start(const struct regulator_config *cfg)
{
	struct regulator *reg;
	char why[256];
	if (regulator_start(cfg, &reg, why, sizeof(why)) < 0) {
		fprintf(stderr, "rtaccel-regulator-bench: %s\n", why);
		return NULL;
	}
	return reg;
}


/* ---- regulator ------------------------------------------------------------- */

/* Freezing the cgroup instead of parking the core: from the write of
 * cgroup.freeze until cgroup.events says frozen, with the hog running. */
static void freeze_cost(uint64_t *p50, uint64_t *p99, int rounds)
{
	char events[300];
	snprintf(events, sizeof(events), "%s/cgroup.events", be_cgroup);
	double *t = calloc((size_t)rounds, sizeof(*t));
	int n = 0;
	for (int i = 0; t && i < rounds; i++) {
		uint64_t t0 = rtaccel_monotonic_ns();
		if (rtaccel_cgroup_write(be_cgroup, "cgroup.freeze", "1") < 0)
			break;
		for (;;) {
			char buf[256];
			int fd = open(events, O_RDONLY | O_CLOEXEC);
			ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
			if (fd >= 0)
				close(fd);
			if (k <= 0)
				break;
			buf[k] = 0;
			if (strstr(buf, "frozen 1"))
				break;
			if (rtaccel_monotonic_ns() - t0 > 100000000ull)
				break;
		}
		t[n++] = (double)(rtaccel_monotonic_ns() - t0);
		rtaccel_cgroup_write(be_cgroup, "cgroup.freeze", "0");
		rtaccel_sleep_ns(2 * 1000 * 1000);
	}
	*p50 = (uint64_t)rtaccel_percentile_double(t, (size_t)n, 0.5);
	*p99 = (uint64_t)rtaccel_percentile_double(t, (size_t)n, 0.99);
	free(t);
}

static int bench_regulator(double duration, uint32_t threshold)
{
	pid_t hog = spawn(be_cgroup, BE_CORE, 2 * llc_bytes());
	struct regulator_config cfg;
	config(&cfg, threshold, 0);
	pin(RT_CORE);
	struct regulator *reg = start(&cfg);
	if (!reg) {
		reap(hog);
		return 1;
	}
	rtaccel_sleep_ns((uint64_t)(duration * 1e9));
	regulator_stop(reg);
	uint64_t f50 = 0, f99 = 0;
	freeze_cost(&f50, &f99, 200);
	reap(hog);
	printf("{\"threshold_mbps\": %u, \"freeze_p50_us\": %.1f, \"freeze_p99_us\": %.1f, "
	       "\"regulator\": ",
	       threshold, (double)f50 / 1e3, (double)f99 / 1e3);
	regulator_write_summary(reg, stdout);
	printf("}\n");
	regulator_free(reg);
	return 0;
}

/* ---- TFS ------------------------------------------------------------------- */

static int bench_tfs(double duration, uint32_t threshold)
{
	static const double rhos[] = {0, 1, 3};
	printf("{\"threshold_mbps\": %u, \"runs\": [", threshold);
	for (size_t r = 0; r < sizeof(rhos) / sizeof(rhos[0]); r++) {
		/* The memory-bound task in the metered cgroup; the CPU-bound one
		 * beside it, as a task whose misses stay in L1 is to an LLC
		 * meter: it spends no budget but is parked with the core. */
		pid_t mem = spawn(be_cgroup, BE_CORE, 2 * llc_bytes());
		pid_t cpu = spawn(cpu_cgroup, BE_CORE, 16 * 1024);
		struct regulator_config cfg;
		config(&cfg, threshold, rhos[r]);
		pin(RT_CORE);
		fifo(50);
		struct regulator *reg = start(&cfg);
		if (!reg) {
			reap(mem);
			reap(cpu);
			return 1;
		}
		/* Who had each period: sampled at its end from the other core. */
		const uint64_t period = cfg.period_ns;
		uint64_t next = rtaccel_monotonic_ns() + period, end = next + (uint64_t)(duration * 1e9);
		uint64_t mem_prev = run_ns(mem), cpu_prev = run_ns(cpu);
		uint64_t mem_periods = 0, cpu_periods = 0, mem_total = 0, cpu_total = 0;
		while (next < end) {
			rtaccel_sleep_until(CLOCK_MONOTONIC, next);
			uint64_t m = run_ns(mem), c = run_ns(cpu);
			uint64_t dm = m - mem_prev, dc = c - cpu_prev;
			mem_prev = m;
			cpu_prev = c;
			mem_total += dm;
			cpu_total += dc;
			if (dm || dc) {
				if (dm > dc)
					mem_periods++;
				else
					cpu_periods++;
			}
			next += period;
		}
		regulator_stop(reg);
		struct sched_param sp = {0};
		sched_setscheduler(0, SCHED_OTHER, &sp);
		reap(mem);
		reap(cpu);
		uint64_t n;
		const struct regulator_period *p = regulator_periods(reg, 0, &n);
		uint64_t throttled = 0;
		for (uint64_t k = 0; k < n; k++)
			throttled += p[k].throttled_ns;
		const double periods = (double)(mem_periods + cpu_periods);
		printf("%s{\"rho\": %.0f, \"scheduler\": \"%s\", \"mem_share\": %.3f, "
		       "\"cpu_share\": %.3f, \"mem_cpu_ms\": %.1f, \"cpu_cpu_ms\": %.1f, "
		       "\"throttled_ms\": %.1f}",
		       r ? ", " : "", rhos[r], rhos[r] > 0 ? "TFS" : "CFS",
		       periods > 0 ? (double)mem_periods / periods : 0,
		       periods > 0 ? (double)cpu_periods / periods : 0, (double)mem_total / 1e6,
		       (double)cpu_total / 1e6, (double)throttled / 1e6);
		fflush(stdout);
		regulator_free(reg);
	}
	printf("]}\n");
	return 0;
}

/* ---- bandwidth lock around a critical task ---------------------------------- */

struct job_times {
	double *ns;
	size_t n;
};

/* Jobs of the critical task: read half the LLC every 20 ms at SCHED_FIFO
 * 80 on core 0, holding the bandwidth lock when HOLDER is given. Alone, most
 * of it stays in the LLC; a hog streaming over twice the LLC on the other
 * core evicts it and competes for DRAM. */
static void critical_jobs(double duration, rtaccel_bwlock_holder_t *holder, struct job_times *out)
{
	const size_t size = llc_bytes() / 2;
	volatile unsigned char *buf = malloc(size);
	if (!buf)
		return;
	memset((void *)buf, 1, size);
	pin(RT_CORE);
	fifo(80);
	const uint64_t period = 20 * 1000 * 1000;
	uint64_t next = rtaccel_monotonic_ns() + period, end = next + (uint64_t)(duration * 1e9);
	uint64_t sum = 0;
	while (next < end && out->n < 100000) {
		rtaccel_sleep_until(CLOCK_MONOTONIC, next);
		if (holder)
			rtaccel_bwlock_take(holder);
		/* The regulator sees the lock at its next boundary: give it one. */
		if (holder)
			rtaccel_sleep_ns(1000 * 1000);
		uint64_t t0 = rtaccel_monotonic_ns();
		for (size_t i = 0; i < size; i += LINE)
			sum += buf[i];
		out->ns[out->n++] = (double)(rtaccel_monotonic_ns() - t0);
		if (holder)
			rtaccel_bwlock_release(holder);
		next += period;
	}
	struct sched_param sp = {0};
	sched_setscheduler(0, SCHED_OTHER, &sp);
	if (sum == 42)
		buf[0] = 0;
	free((void *)buf);
}

static void print_jobs(const char *name, long threshold, struct job_times *t, bool first)
{
	printf("%s{\"config\": \"%s\", \"threshold_mbps\": %ld, \"jobs\": %zu, \"p50_ms\": %.3f, "
	       "\"p99_ms\": %.3f}",
	       first ? "" : ", ", name, threshold, t->n, rtaccel_percentile_double(t->ns, t->n, 0.5) / 1e6,
	       rtaccel_percentile_double(t->ns, t->n, 0.99) / 1e6);
	fflush(stdout);
}

static int bench_bwlock(double duration, const uint32_t *thresholds, int nthresholds)
{
	struct job_times t = {calloc(100000, sizeof(double)), 0};
	if (!t.ns)
		return 1;
	printf("{\"runs\": [");
	critical_jobs(duration, NULL, &t);
	print_jobs("solo", -1, &t, true);

	pid_t hog = spawn(be_cgroup, BE_CORE, 2 * llc_bytes());
	t.n = 0;
	critical_jobs(duration, NULL, &t);
	print_jobs("co-run", -1, &t, false);

	rtaccel_bwlock_t *bw;
	rtaccel_bwlock_holder_t *h;
	for (int i = 0; i < nthresholds; i++) {
		struct regulator_config cfg;
		config(&cfg, RTACCEL_BWLOCK_UNLIMITED, 0);
		pin(RT_CORE);
		struct regulator *reg = start(&cfg);
		if (!reg || rtaccel_bwlock_open(lock_name, &bw) < 0 ||
		    rtaccel_bwlock_holder_init(bw, "critical", thresholds[i], 0, &h) < 0) {
			reap(hog);
			return 1;
		}
		t.n = 0;
		critical_jobs(duration, h, &t);
		regulator_stop(reg);
		print_jobs("bwlock", thresholds[i], &t, false);
		rtaccel_bwlock_holder_destroy(h);
		rtaccel_bwlock_close(bw);
		regulator_free(reg);
	}
	reap(hog);
	printf("]}\n");
	free(t.ns);
	return 0;
}

/* ---- the lock's cost ------------------------------------------------------------ */

static int bench_lock(void)
{
	rtaccel_bwlock_t *bw;
	rtaccel_bwlock_holder_t *h;
	if (rtaccel_bwlock_open(lock_name, &bw) < 0 ||
	    rtaccel_bwlock_holder_init(bw, "bench", 100, 0, &h) < 0)
		return 1;
	const int n = 10 * 1000 * 1000;
	double best = 1e9;
	for (int round = 0; round < 5; round++) {
		uint64_t t0 = rtaccel_monotonic_ns();
		for (int i = 0; i < n; i++) {
			rtaccel_bwlock_take(h);
			rtaccel_bwlock_release(h);
		}
		double ns = (double)(rtaccel_monotonic_ns() - t0) / n;
		if (ns < best)
			best = ns;
	}
	printf("{\"take_release_ns\": %.1f}\n", best);
	rtaccel_bwlock_holder_destroy(h);
	rtaccel_bwlock_close(bw);
	return 0;
}

static int parse_thresholds(const char *s, uint32_t *out, int max)
{
	int n = 0;
	while (*s && n < max) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || v >= UINT32_MAX)
			return -1;
		out[n++] = (uint32_t)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return n;
}

int main(int argc, char **argv)
{
	static const char usage[] =
		"usage: rtaccel-regulator-bench regulator|tfs|bwlock|lock [--duration S] "
		"[--threshold MBPS] [--thresholds LIST]\n";
	if (argc < 2)
		return fputs(usage, stderr), 2;
	double duration = 5;
	uint32_t threshold = 3000, thresholds[16] = {4000, 2000, 1000, 500};
	int nthresholds = 4;
	for (int i = 2; i < argc; i++) {
		char *end;
		if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
			duration = strtod(argv[++i], &end);
			if (*end || !(duration > 0 && duration < 3600))
				return fputs(usage, stderr), 2;
		} else if (!strcmp(argv[i], "--threshold") && i + 1 < argc) {
			unsigned long v = strtoul(argv[++i], &end, 10);
			if (*end || v >= UINT32_MAX)
				return fputs(usage, stderr), 2;
			threshold = (uint32_t)v;
		} else if (!strcmp(argv[i], "--thresholds") && i + 1 < argc) {
			nthresholds = parse_thresholds(argv[++i], thresholds, 16);
			if (nthresholds < 1)
				return fputs(usage, stderr), 2;
		} else {
			return fputs(usage, stderr), 2;
		}
	}
	const char *what = argv[1];
	if (strcmp(what, "lock") && strcmp(what, "regulator") && strcmp(what, "tfs") &&
	    strcmp(what, "bwlock"))
		return fputs(usage, stderr), 2;
	snprintf(lock_name, sizeof(lock_name), "bench.%d", getpid());
	snprintf(bwlock_shm, sizeof(bwlock_shm), "/dev/shm/rtaccel-bwlock.%s", lock_name);
	snprintf(regulator_shm, sizeof(regulator_shm), "/dev/shm/rtaccel-regulator.%s", lock_name);
	struct sigaction sa = {.sa_handler = stopped};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (!strcmp(what, "lock")) {
		int rc = bench_lock();
		rtaccel_bwlock_unlink(lock_name);
		return rc;
	}
	if (rtaccel_cores_usable() < 2)
		return skip("needs 2 cores it may use (its affinity or cpuset)");
	if (fifo(1) < 0)
		return skip("needs SCHED_FIFO (CAP_SYS_NICE and real-time runtime in its cgroup)");
	struct sched_param sp = {0};
	sched_setscheduler(0, SCHED_OTHER, &sp);
	if (setup_cgroups() < 0)
		return skip("needs a writable cgroup2 hierarchy");
	int rc;
	if (!strcmp(what, "regulator"))
		rc = bench_regulator(duration, threshold);
	else if (!strcmp(what, "tfs"))
		rc = bench_tfs(duration, threshold);
	else
		rc = bench_bwlock(duration, thresholds, nthresholds);
	cleanup();
	return rc;
}
