/* The memory-bandwidth regulator's reports (see regulator.h): the summary
 * of a run as JSON, its periods as a Perfetto timeline, and the live status
 * of a running regulator, read from its shared status region. The mechanism
 * itself is regulator.c. */
#include "isolate/regulator.h"
#include "isolate/regulator_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/percentile.h"

/* ---- summary and trace ---------------------------------------------------- */

void regulator_write_summary(const struct regulator *reg, FILE *out)
{
	const uint64_t wall = regulator_wall_ns(reg);
	fprintf(out, "{\"meter\": \"%s\", \"period_us\": %.1f, \"be_peak_mbps\": %u, "
		     "\"rho\": %.2f, \"wall_s\": %.3f, \"cores\": [",
		regulator_meter_name(reg), (double)reg->cfg.period_ns / 1e3, reg->cfg.be_peak_mbps,
		reg->cfg.rho, (double)wall / 1e9);
	for (int i = 0; i < reg->cfg.ncores; i++) {
		const struct core_ctx *c = &reg->cores[i];
		double *onset = calloc(c->nperiods + 1, sizeof(double));
		double *ratio = calloc(c->nperiods + 1, sizeof(double));
		double *late = calloc(c->nperiods + 1, sizeof(double));
		size_t no = 0, nr = 0, nl = 0, throttled = 0;
		double throttled_ns = 0;
		for (uint64_t k = 0; onset && ratio && late && k < c->nperiods; k++) {
			const struct regulator_period *p = &c->periods[k];
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
			throttled_ns / 1e6, rtaccel_percentile_double(onset, no, 0.5),
			rtaccel_percentile_double(onset, no, 0.99), rtaccel_percentile_double(ratio, nr, 0.5),
			rtaccel_percentile_double(ratio, nr, 0.99), rtaccel_percentile_double(late, nl, 0.5),
			rtaccel_percentile_double(late, nl, 0.99),
			wall ? (double)overhead / (double)wall : 0.0);
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
	/* otherData: where ts 0 is on CLOCK_MONOTONIC, so that a tool can put
	 * these events on another trace's timeline (rtaccel run does). */
	fprintf(f, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"clock\": \"CLOCK_MONOTONIC\", "
		   "\"origin_us\": %.3f}, \"traceEvents\": [\n"
		   "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, "
		   "\"args\": {\"name\": \"rtaccel regulator (%s meter)\"}}",
		t0, regulator_meter_name(reg));
	for (int i = 0; i < reg->cfg.ncores; i++) {
		const struct core_ctx *c = &reg->cores[i];
		fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
			   "\"args\": {\"name\": \"core %d\"}}", c->core, c->core);
		uint32_t last_threshold = 0;
		for (uint64_t k = 0; k < c->nperiods; k++) {
			const struct regulator_period *p = &c->periods[k];
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
	snprintf(path, sizeof(path), "/dev/shm/" RTACCEL_REGULATOR_STATUS_PREFIX ".%s", name);
	if (access(path, F_OK) < 0)
		return -ENOENT;
	void *region;
	int err = isolate_shm_open(RTACCEL_REGULATOR_STATUS_PREFIX, name, sizeof(struct status_region),
				   STATUS_MAGIC, STATUS_VERSION, &region);
	if (err)
		return err;
	const struct status_region *s = region;
	const int32_t pid = atomic_load((_Atomic int32_t *)&s->pid);
	const bool running = pid && isolate_thread_alive(pid, pid);
	const uint32_t thr = atomic_load((_Atomic uint32_t *)&s->threshold_mbps);
	const uint32_t n = s->ncores < REGULATOR_MAX_CORES ? s->ncores : REGULATOR_MAX_CORES;
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
