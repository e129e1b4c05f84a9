/* The memory-bandwidth regulator (internal; hosted by rtaccel-isolate and
 * the benchmarks): MemGuard's per-core budget, meter and throttle, driven by
 * the bandwidth lock and the running gang, with throttle-fair charging of
 * best-effort tasks. docs/isolate.md describes it.
 *
 * Per regulated core, one thread pinned there at SCHED_FIFO (control
 * priority) runs the periods: at each boundary it reads the meter, decides
 * the budget from the threshold in force and re-arms the meter's overflow
 * notification (perf_event_open, a signal to that thread); on overflow it
 * drops to the park priority and spins until the period ends, which keeps
 * every task below that priority (all best-effort work) off the core. */
#ifndef RTACCEL_ISOLATE_REGULATOR_H
#define RTACCEL_ISOLATE_REGULATOR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rtaccel/isolate.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REGULATOR_MAX_CORES 64

enum regulator_meter {
	REGULATOR_METER_AUTO,	    /* LLC misses if the machine counts them, else CPU time */
	REGULATOR_METER_LLC,	    /* hardware cache misses, 64 bytes each */
	REGULATOR_METER_RAW,	    /* perf type and config of the user's choice, 64 bytes each */
	REGULATOR_METER_CPU_TIME, /* ns of best-effort execution (needs the cgroup) */
};

struct regulator_config {
	int cores[REGULATOR_MAX_CORES];
	int ncores;
	uint64_t period_ns;
	enum regulator_meter meter;
	uint32_t raw_type;
	uint64_t raw_config;
	char cgroup[256];	      /* the best-effort cgroup; "" meters whole cores */
	char bwlock[64];	      /* bandwidth lock name; "" none */
	char gang[64];		      /* gang lock name; "" none */
	uint32_t threshold_mbps;      /* always in force (RTACCEL_BWLOCK_UNLIMITED: none) */
	uint32_t be_peak_mbps;	      /* CPU-time meter: what a core of best-effort work moves */
	double rho;		      /* throttle-fair charge factor; 0: off */
	int control_priority;	      /* SCHED_FIFO of the period threads */
	int park_priority;	      /* SCHED_FIFO while parking a core */
	uint64_t max_records;	      /* periods kept per core for the summary and trace */
	bool quiet;
};

void regulator_config_defaults(struct regulator_config *cfg);

/* One period of one core. */
struct regulator_period {
	uint64_t start_ns;
	uint64_t budget;	/* events or ns; UINT64_MAX: unlimited */
	uint64_t used;
	uint32_t throttled_ns;
	uint32_t onset_ns;	/* overflow to parked; 0 when not throttled */
	uint32_t late_ns;	/* how late the period began */
	uint32_t threshold_mbps;
	int32_t tid;		/* the task that spent the budget */
	uint32_t reserved;
};

struct regulator;

/* Starts the regulator threads. On failure returns -errno and writes one
 * line saying why to ERR. */
int regulator_start(const struct regulator_config *cfg, struct regulator **reg, char *err,
		    size_t len);
/* Stops and joins the threads, restores every task it charged. */
void regulator_stop(struct regulator *reg);
void regulator_free(struct regulator *reg);

const char *regulator_meter_name(const struct regulator *reg);
/* The periods of core index I (in cfg.cores order) recorded so far. */
const struct regulator_period *regulator_periods(const struct regulator *reg, int i,
						 uint64_t *count);
/* After stop: regulator thread CPU time minus parked time, per core. */
uint64_t regulator_overhead_ns(const struct regulator *reg, int i);
uint64_t regulator_wall_ns(const struct regulator *reg);

/* Summary (JSON object) and Perfetto trace of what was recorded. */
void regulator_write_summary(const struct regulator *reg, FILE *out);
int regulator_write_trace(const struct regulator *reg, const char *path);

/* The live status region /dev/shm/rtaccel-regulator.NAME (NAME: the
 * bandwidth lock's name, or "default"), printed by `rtaccel isolate status`. */
int regulator_print_status(const char *name, bool json, FILE *out);

/* The bandwidth lock's threshold in force, cheap when no one holds it. */
uint32_t isolate_bwlock_threshold(const rtaccel_bwlock_t *lock);
/* rtaccel_bwlock_reap for held slots only (the per-period check). */
int isolate_bwlock_reap_held(rtaccel_bwlock_t *lock);

#ifdef __cplusplus
}
#endif

#endif
