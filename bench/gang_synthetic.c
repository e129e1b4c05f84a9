/* RT-Gang's synthetic experiment (the paper's Sec. V-B, Fig. 5) on this
 * machine: two periodic real-time tasks of two threads each (one thread per
 * core), both reading a working set of three quarters of the last-level cache
 * in the manner of IsolBench's BwRead, beside two best-effort programs
 * (rtaccel-membench: a read over twice the LLC, and a read that stays in L1).
 *
 *   tau1  period 20 ms, about 3.5 ms of work alone, SCHED_FIFO 60
 *   tau2  period 30 ms, about 6.5 ms of work alone, SCHED_FIFO 50
 *
 * Four phases, one after the other in one run: each task alone (the
 * reference), then both with the best-effort programs under plain SCHED_FIFO,
 * then the same under the gang lock (one task at a time on all cores). A
 * job's execution time is the CPU time of its longer thread, so that time
 * spent preempted or waiting does not count, and what is left of a slowdown
 * is interference. Each thread also records when it ran (a gap of over
 * 30 us between two of its 16 KiB steps means it did not), for the timeline
 * and for the time during which both tasks ran at once.
 *
 * split sets the share of the working set (and so of the work) of a task's
 * first thread. With 0.5, two 2-thread tasks on a 2-core machine hardly ever
 * run at once under SCHED_FIFO either, as each fills every core; parallel
 * jobs whose threads end at different times (the default, 2/3) are what the
 * gang lock changes.
 *
 *   rtaccel-gang-synthetic [--duration S] [--llc BYTES] [--split F]
 *                          [--membench PATH] [--trace DIR] [--json]
 *
 * --trace DIR writes the result as JSON there (gang_synthetic.json) and a
 * Chrome/Perfetto trace of each co-scheduled phase
 * (gang_synthetic_fifo.json, gang_synthetic_gang.json).
 */
#include "rtaccel/isolate.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cache.h"
#include "core/clock.h"
#include "core/exit.h"
#include "core/percentile.h"
#include "core/realtime.h"
#include "core/size.h"

#define CORES 2
#define LINE 64
#define STEP (16 * 1024)       /* bytes read between two looks at the clock */
#define GAP_NS (30 * 1000)     /* a longer pause between steps: not running */
#define MAX_SLICES (1 << 16)   /* per thread and phase */

struct task {
	const char *name;
	uint64_t period_ns;
	double target_ms; /* the longer thread's work, alone */
	int priority;
	unsigned char *set;
	size_t set_bytes;
	unsigned passes;
};

struct slice {
	uint64_t begin, end;
};

struct job {
	uint64_t release, end, cpu_ns;
};

struct thread {
	struct task *task;
	int core;
	size_t offset, bytes;
	int gang;
	uint64_t start, stop; /* the phase */
	struct job *jobs;
	size_t njobs, max_jobs;
	struct slice *slices;
	size_t nslices;
	uint64_t sink;
	int error;
};

static struct task tasks[2] = {
	{"tau1", 20000000, 3.5, 60, NULL, 0, 1},
	{"tau2", 30000000, 6.5, 50, NULL, 0, 1},
};
static rtaccel_gang_lock_t *lock;

static uint64_t thread_cpu_ns(void) { return rtaccel_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

/* Reads [p, p+bytes) once, a cache line at a time, closing the current slice
 * whenever the clock shows the thread was off its core. */
static void read_pass(struct thread *t, const unsigned char *p, size_t bytes, uint64_t *last)
{
	uint64_t sum = t->sink;
	for (size_t at = 0; at < bytes; at += STEP) {
		const size_t end = at + STEP < bytes ? at + STEP : bytes;
		for (size_t i = at; i < end; i += LINE)
			sum += p[i];
		const uint64_t now = rtaccel_monotonic_ns();
		if (now - *last > GAP_NS && t->nslices < MAX_SLICES) {
			t->slices[t->nslices].end = *last;
			t->slices[++t->nslices].begin = now;
		}
		*last = now;
	}
	t->sink = sum;
}

static void run_job(struct thread *t)
{
	uint64_t last = rtaccel_monotonic_ns();
	if (t->nslices < MAX_SLICES)
		t->slices[t->nslices].begin = last;
	for (unsigned pass = 0; pass < t->task->passes; pass++)
		read_pass(t, t->task->set + t->offset, t->bytes, &last);
	if (t->nslices < MAX_SLICES)
		t->slices[t->nslices++].end = last;
}

static int set_fifo(int core, int priority)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(core, &set);
	struct sched_param sp = {.sched_priority = priority};
	int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	return err ? err : pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
}

static void *rt_thread(void *arg)
{
	struct thread *t = arg;
	if ((t->error = set_fifo(t->core, t->task->priority)))
		return NULL;
	if (t->gang && (t->error = -rtaccel_gang_join(lock, t->task->name, t->task->priority, 0)))
		return NULL;
	for (uint64_t release = t->start; release < t->stop && t->njobs < t->max_jobs;
	     release += t->task->period_ns) {
		rtaccel_sleep_until(CLOCK_MONOTONIC, release);
		if (t->gang)
			rtaccel_gang_job_begin();
		const uint64_t cpu = thread_cpu_ns();
		run_job(t);
		struct job *j = &t->jobs[t->njobs++];
		j->cpu_ns = thread_cpu_ns() - cpu;
		if (t->gang)
			rtaccel_gang_job_end();
		j->release = release;
		j->end = rtaccel_monotonic_ns();
	}
	if (t->gang)
		rtaccel_gang_leave();
	return NULL;
}

/* --- the best-effort programs ------------------------------------------- */

struct best_effort {
	const char *name;
	pid_t pid;
	int out;
	double mbps;
};

static int spawn_membench(const char *path, struct best_effort *be, const char *mode,
			  const char *size, double seconds)
{
	int pipefd[2];
	if (pipe(pipefd))
		return -errno;
	char duration[32];
	snprintf(duration, sizeof(duration), "%.3f", seconds);
	const pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		close(pipefd[0]);
		close(pipefd[1]);
		if (size)
			execl(path, path, mode, "--size", size, "--duration", duration, "--json", (char *)NULL);
		else
			execl(path, path, mode, "--duration", duration, "--json", (char *)NULL);
		fprintf(stderr, "rtaccel-gang-synthetic: cannot run %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	be->pid = pid;
	be->out = pipefd[0];
	be->mbps = -1;
	return 0;
}

static void reap_membench(struct best_effort *be)
{
	char buf[512] = {0};
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(buf) - 1 && (n = read(be->out, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(be->out);
	int status;
	waitpid(be->pid, &status, 0);
	const char *key = strstr(buf, "\"mb_per_s\":");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && key)
		be->mbps = strtod(key + 11, NULL);
}

/* --- phases ----------------------------------------------------------------- */

struct phase {
	const char *name;
	int active[2];
	int gang;
	int best_effort;
	double seconds;
	struct thread threads[2][CORES];
	struct best_effort be[2];
};

static int run_phase(struct phase *ph, const char *membench, double split)
{
	if (ph->best_effort) {
		char size[32];
		snprintf(size, sizeof(size), "%zuK", tasks[0].set_bytes * 8 / 3 / 1024); /* 2 x LLC */
		ph->be[0].name = "bw_read";
		ph->be[1].name = "cache";
		int err = spawn_membench(membench, &ph->be[0], "read", size, ph->seconds + 0.2);
		if (!err)
			err = spawn_membench(membench, &ph->be[1], "cache", NULL, ph->seconds + 0.2);
		if (err)
			return err;
	}
	/* Releases start after the co-runners are up and the threads placed. */
	const uint64_t start = rtaccel_monotonic_ns() + 100000000ull;
	pthread_t ids[2][CORES];
	for (int k = 0; k < 2; k++) {
		if (!ph->active[k])
			continue;
		for (int c = 0; c < CORES; c++) {
			struct thread *t = &ph->threads[k][c];
			const size_t first = (size_t)((double)tasks[k].set_bytes * split) / LINE * LINE;
			t->task = &tasks[k];
			t->core = c;
			t->offset = c == 0 ? 0 : first;
			t->bytes = c == 0 ? first : tasks[k].set_bytes - first;
			t->gang = ph->gang;
			t->start = start;
			t->stop = start + (uint64_t)(ph->seconds * 1e9);
			t->max_jobs = (size_t)(ph->seconds * 1e9 / (double)tasks[k].period_ns) + 2;
			t->jobs = calloc(t->max_jobs, sizeof(*t->jobs));
			t->slices = calloc(MAX_SLICES + 1, sizeof(*t->slices));
			if (!t->jobs || !t->slices)
				return -ENOMEM;
			if (pthread_create(&ids[k][c], NULL, rt_thread, t))
				return -EAGAIN;
		}
	}
	int error = 0;
	for (int k = 0; k < 2; k++)
		for (int c = 0; c < CORES && ph->active[k]; c++) {
			pthread_join(ids[k][c], NULL);
			if (ph->threads[k][c].error)
				error = -abs(ph->threads[k][c].error);
		}
	if (ph->best_effort)
		for (int b = 0; b < 2; b++)
			reap_membench(&ph->be[b]);
	return error;
}

/* The longer thread's CPU time of one job alone, for the number of passes. */
static int calibrate(struct task *task, double split)
{
	struct phase ph = {.name = "calibrate", .seconds = 0.3};
	ph.active[task - tasks] = 1;
	task->passes = 1;
	int err = run_phase(&ph, NULL, split);
	struct thread *longer = &ph.threads[task - tasks][0];
	double best = 1e18;
	for (size_t j = 1; j < longer->njobs; j++) /* the first warms the cache */
		if ((double)longer->jobs[j].cpu_ns < best)
			best = (double)longer->jobs[j].cpu_ns;
	for (int c = 0; c < CORES; c++) {
		free(ph.threads[task - tasks][c].jobs);
		free(ph.threads[task - tasks][c].slices);
	}
	if (err)
		return err;
	if (best >= 1e18)
		return -ETIME;
	const double passes = task->target_ms * 1e6 / best;
	task->passes = passes < 1 ? 1 : (unsigned)(passes + 0.5);
	return 0;
}

/* --- results ----------------------------------------------------------------- */

static double pct(const uint64_t *sorted, size_t n, double q)
{
	return (double)rtaccel_percentile_sorted_u64(sorted, n, q);
}

struct task_result {
	size_t jobs, misses;
	double min_us, p50_us, p99_us, max_us, resp_p50_us, resp_p99_us, resp_max_us;
};

static struct task_result summarise(struct thread threads[CORES])
{
	struct task_result r = {0};
	size_t n = threads[0].njobs;
	for (int c = 1; c < CORES; c++)
		n = threads[c].njobs < n ? threads[c].njobs : n;
	uint64_t *exec = calloc(n + 1, sizeof(*exec)), *resp = calloc(n + 1, sizeof(*resp));
	if (!exec || !resp) {
		free(exec);
		free(resp);
		return r;
	}
	for (size_t j = 0; j < n; j++) {
		uint64_t cpu = 0, end = 0;
		for (int c = 0; c < CORES; c++) {
			const struct job *job = &threads[c].jobs[j];
			cpu = job->cpu_ns > cpu ? job->cpu_ns : cpu;
			end = job->end > end ? job->end : end;
		}
		exec[j] = cpu;
		resp[j] = end - threads[0].jobs[j].release;
		r.misses += resp[j] > threads[0].task->period_ns;
	}
	rtaccel_sort_u64(exec, n);
	rtaccel_sort_u64(resp, n);
	r.jobs = n;
	if (n) {
		r.min_us = (double)exec[0] / 1e3;
		r.p50_us = pct(exec, n, 0.5) / 1e3;
		r.p99_us = pct(exec, n, 0.99) / 1e3;
		r.max_us = (double)exec[n - 1] / 1e3;
		r.resp_p50_us = pct(resp, n, 0.5) / 1e3;
		r.resp_p99_us = pct(resp, n, 0.99) / 1e3;
		r.resp_max_us = (double)resp[n - 1] / 1e3;
	}
	free(exec);
	free(resp);
	return r;
}

/* Time during which a thread of tau1 and a thread of tau2 both ran: the sum
 * over pairs of threads on different cores of their slices' intersections
 * (threads on one core never run at once). */
static double overlap_ms(struct phase *ph)
{
	uint64_t both = 0;
	for (int a = 0; a < CORES; a++)
		for (int b = 0; b < CORES; b++) {
			if (a == b)
				continue;
			const struct thread *x = &ph->threads[0][a], *y = &ph->threads[1][b];
			size_t i = 0, j = 0;
			while (i < x->nslices && j < y->nslices) {
				const uint64_t lo = x->slices[i].begin > y->slices[j].begin ? x->slices[i].begin : y->slices[j].begin;
				const uint64_t hi = x->slices[i].end < y->slices[j].end ? x->slices[i].end : y->slices[j].end;
				if (hi > lo)
					both += hi - lo;
				if (x->slices[i].end < y->slices[j].end)
					i++;
				else
					j++;
			}
		}
	return (double)both / 1e6;
}

/* Chrome trace-event JSON: a process per task, a thread per core, a slice
 * per stretch of running, and each job's release-to-end as an async event. */
static int write_trace(const char *dir, struct phase *ph)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/gang_synthetic_%s.json", dir, ph->name);
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
	const char *sep = "";
	uint64_t origin = UINT64_MAX;
	for (int k = 0; k < 2; k++)
		for (int c = 0; c < CORES && ph->active[k]; c++)
			if (ph->threads[k][c].start < origin)
				origin = ph->threads[k][c].start;
	for (int k = 0; k < 2; k++) {
		if (!ph->active[k])
			continue;
		fprintf(f, "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"%s\"}}",
			sep, k + 1, tasks[k].name);
		sep = ",\n";
		for (int c = 0; c < CORES; c++) {
			const struct thread *t = &ph->threads[k][c];
			fprintf(f, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, "
				"\"args\": {\"name\": \"core %d\"}}", k + 1, c, c);
			for (size_t s = 0; s < t->nslices; s++)
				fprintf(f, ",\n{\"ph\": \"X\", \"cat\": \"run\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, "
					"\"ts\": %.3f, \"dur\": %.3f}", tasks[k].name, k + 1, c,
					(double)(t->slices[s].begin - origin) / 1e3,
					(double)(t->slices[s].end - t->slices[s].begin) / 1e3);
			for (size_t j = 0; j < t->njobs; j++)
				fprintf(f, ",\n{\"ph\": \"X\", \"cat\": \"job\", \"name\": \"job %zu\", \"pid\": %d, \"tid\": %d, "
					"\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"cpu_us\": %.1f}}", j, k + 1, 100 + c,
					(double)(t->jobs[j].release - origin) / 1e3,
					(double)(t->jobs[j].end - t->jobs[j].release) / 1e3, (double)t->jobs[j].cpu_ns / 1e3);
		}
	}
	fprintf(f, "\n]}\n");
	return fclose(f) ? -errno : 0;
}

/* --- main ------------------------------------------------------------------------ */

static const char usage[] =
	"usage: rtaccel-gang-synthetic [--duration S] [--llc BYTES[K|M]] [--split F]\n"
	"                              [--membench PATH] [--trace DIR] [--json]\n";

static void print_json(FILE *f, struct phase *phases, int n, size_t llc, double split)
{
	fprintf(f, "{\"llc_bytes\": %zu, \"working_set_bytes\": %zu, \"split\": %.3f, \"tasks\": [", llc,
	       tasks[0].set_bytes, split);
	for (int k = 0; k < 2; k++)
		fprintf(f, "%s{\"name\": \"%s\", \"period_ms\": %.0f, \"passes\": %u}", k ? ", " : "", tasks[k].name,
		       (double)tasks[k].period_ns / 1e6, tasks[k].passes);
	fprintf(f, "], \"phases\": {");
	for (int p = 0; p < n; p++) {
		struct phase *ph = &phases[p];
		fprintf(f, "%s\"%s\": {\"seconds\": %.1f, \"gang\": %s, \"tasks\": {", p ? ", " : "", ph->name,
		       ph->seconds, ph->gang ? "true" : "false");
		const char *sep = "";
		for (int k = 0; k < 2; k++) {
			if (!ph->active[k])
				continue;
			const struct task_result r = summarise(ph->threads[k]);
			fprintf(f, "%s\"%s\": {\"jobs\": %zu, \"deadline_misses\": %zu, \"exec_us\": {\"min\": %.1f, "
			       "\"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}, \"max_over_min\": %.3f, "
			       "\"p99_over_p50\": %.3f, \"response_us\": {\"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}}",
			       sep, tasks[k].name, r.jobs, r.misses, r.min_us, r.p50_us, r.p99_us, r.max_us,
			       r.min_us > 0 ? r.max_us / r.min_us : 0, r.p50_us > 0 ? r.p99_us / r.p50_us : 0,
			       r.resp_p50_us, r.resp_p99_us, r.resp_max_us);
			sep = ", ";
		}
		fprintf(f, "}");
		if (ph->best_effort)
			fprintf(f, ", \"overlap_ms\": %.1f, \"best_effort\": {\"%s\": {\"mbps\": %.1f}, \"%s\": {\"mbps\": %.1f}}", overlap_ms(ph), ph->be[0].name,
			       ph->be[0].mbps, ph->be[1].name, ph->be[1].mbps);
		fprintf(f, "}");
	}
	fprintf(f, "}}\n");
}

static void print_table(struct phase *phases, int n, size_t llc, double split)
{
	printf("# LLC %zu KiB, working set %zu KiB per task, first thread's share %.2f\n", llc >> 10,
	       tasks[0].set_bytes >> 10, split);
	printf("# job execution time (CPU time of the longer thread), us\n");
	printf("%-8s %-5s %6s %9s %9s %9s %9s %8s %8s %6s\n", "phase", "task", "jobs", "min", "p50", "p99",
	       "max", "max/min", "p99/p50", "miss");
	for (int p = 0; p < n; p++)
		for (int k = 0; k < 2; k++) {
			if (!phases[p].active[k])
				continue;
			const struct task_result r = summarise(phases[p].threads[k]);
			printf("%-8s %-5s %6zu %9.1f %9.1f %9.1f %9.1f %8.2f %8.2f %6zu\n", phases[p].name, tasks[k].name,
			       r.jobs, r.min_us, r.p50_us, r.p99_us, r.max_us, r.min_us > 0 ? r.max_us / r.min_us : 0,
			       r.p50_us > 0 ? r.p99_us / r.p50_us : 0, r.misses);
		}
	for (int p = 0; p < n; p++)
		if (phases[p].best_effort)
			printf("# %s: tau1 and tau2 ran at once for %.1f ms; best effort %s %.0f MB/s, %s %.0f MB/s\n",
			       phases[p].name, overlap_ms(&phases[p]), phases[p].be[0].name, phases[p].be[0].mbps,
			       phases[p].be[1].name, phases[p].be[1].mbps);
}

int main(int argc, char **argv)
{
	double seconds = 10, split = 2.0 / 3.0;
	size_t llc = 0;
	const char *trace_dir = NULL;
	char membench[4096] = "";
	int json = 0;
	static const struct option longopts[] = {
		{"duration", required_argument, NULL, 'd'}, {"llc", required_argument, NULL, 'l'},
		{"split", required_argument, NULL, 's'},    {"membench", required_argument, NULL, 'm'},
		{"trace", required_argument, NULL, 't'},    {"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
	};
	int opt;
	char *end;
	while ((opt = getopt_long(argc, argv, "d:l:s:m:t:jh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			seconds = strtod(optarg, &end);
			if (*end || !(seconds >= 0.5 && seconds <= 3600)) {
				fprintf(stderr, "rtaccel-gang-synthetic: --duration must be 0.5..3600 seconds, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'l':
			if (rtaccel_parse_size(optarg, 64 * 1024, 1ull << 32, &llc)) {
				fprintf(stderr, "rtaccel-gang-synthetic: bad --llc '%s' (64K..4G)\n", optarg);
				return 2;
			}
			break;
		case 's':
			split = strtod(optarg, &end);
			if (*end || !(split >= 0.5 && split <= 0.95)) {
				fprintf(stderr, "rtaccel-gang-synthetic: --split must be 0.5..0.95, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'm': snprintf(membench, sizeof(membench), "%s", optarg); break;
		case 't': trace_dir = optarg; break;
		case 'j': json = 1; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return 2;
	}
	if (!*membench) {
		/* Beside this program, as the build and the installed tree put it. */
		char self[4000];
		const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			return 1;
		self[n] = 0;
		*strrchr(self, '/') = 0;
		snprintf(membench, sizeof(membench), "%s/rtaccel-membench", self);
	}
	if (access(membench, X_OK)) {
		fprintf(stderr, "rtaccel-gang-synthetic: no best-effort benchmark at %s (--membench)\n", membench);
		return 1;
	}
	if (!rtaccel_fifo_allowed(tasks[0].priority)) {
		fprintf(stderr, "rtaccel-gang-synthetic: needs SCHED_FIFO (root or CAP_SYS_NICE): "
				"its tasks are real-time ones\n");
		return RTACCEL_EXIT_CANNOT_RUN_HERE;
	}
	for (int c = 0; c < CORES; c++) {
		if (rtaccel_core_allowed(c)) {
			fprintf(stderr, "rtaccel-gang-synthetic: needs cores 0 to %d, and this process may not use core %d "
					"(offline, or outside its cpuset: a container's --cpuset-cpus)\n", CORES - 1, c);
			return RTACCEL_EXIT_CANNOT_RUN_HERE;
		}
	}
	if (!llc && !(llc = rtaccel_llc_bytes())) {
		fprintf(stderr, "rtaccel-gang-synthetic: cannot read the LLC size from sysfs; give --llc\n");
		return 1;
	}
	for (int k = 0; k < 2; k++) {
		tasks[k].set_bytes = llc * 3 / 4 / LINE * LINE;
		tasks[k].set = mmap(NULL, tasks[k].set_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (tasks[k].set == MAP_FAILED)
			return 1;
		memset(tasks[k].set, k + 1, tasks[k].set_bytes);
	}
	int err = rtaccel_gang_lock_create_private(&lock);
	for (int k = 0; !err && k < 2; k++)
		err = calibrate(&tasks[k], split);
	static struct phase phases[4] = {
		{.name = "alone", .active = {1, 0}},
		{.name = "alone2", .active = {0, 1}},
		{.name = "fifo", .active = {1, 1}, .best_effort = 1},
		{.name = "gang", .active = {1, 1}, .best_effort = 1, .gang = 1},
	};
	phases[0].seconds = phases[1].seconds = seconds / 2;
	phases[2].seconds = phases[3].seconds = seconds;
	for (int p = 0; !err && p < 4; p++)
		err = run_phase(&phases[p], membench, split);
	if (err) {
		fprintf(stderr, "rtaccel-gang-synthetic: %s%s\n", strerror(-err),
			err == -EPERM ? " (SCHED_FIFO needs root or CAP_SYS_NICE)" : "");
		return 1;
	}
	/* Both reference phases print as one. */
	phases[0].active[1] = 1;
	memcpy(phases[0].threads[1], phases[1].threads[1], sizeof(phases[1].threads[1]));
	phases[1] = phases[2];
	phases[2] = phases[3];
	for (int p = 1; trace_dir && p < 3; p++)
		if ((err = write_trace(trace_dir, &phases[p]))) {
			fprintf(stderr, "rtaccel-gang-synthetic: cannot write a trace in %s: %s\n", trace_dir, strerror(-err));
			return 1;
		}
	if (trace_dir) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/gang_synthetic.json", trace_dir);
		FILE *f = fopen(path, "w");
		if (f)
			print_json(f, phases, 3, llc, split);
		if (!f || fclose(f)) {
			fprintf(stderr, "rtaccel-gang-synthetic: cannot write %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	if (json)
		print_json(stdout, phases, 3, llc, split);
	else
		print_table(phases, 3, llc, split);
	return 0;
}
