/* Inside the memory-bandwidth regulator (isolate, internal): what its period
 * loop (regulator.c) and its reports (regulator_report.c) share, and the
 * live status region other processes read (rtaccel isolate status). */
#ifndef RTACCEL_ISOLATE_REGULATOR_INTERNAL_H
#define RTACCEL_ISOLATE_REGULATOR_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "isolate/regulator.h"
#include "isolate/shm.h"
#include "rtaccel/isolate.h"

#define STATUS_MAGIC 0x67657262u /* "breg" */
#define STATUS_VERSION 1u
#define MAX_DEBTORS 32

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
	struct status_core cores[REGULATOR_MAX_CORES];
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
	struct regulator_period *periods;
	uint64_t nperiods;
	uint64_t parked_ns, cpu_ns;
	struct debtor debtors[MAX_DEBTORS];
	int ndebtors;
	char error[200];
	int ready; /* futex: 1 started, -1 failed */
};

struct regulator {
	struct regulator_config cfg;
	enum regulator_meter meter;
	int cgroup_fd;
	int signo;
	rtaccel_bwlock_t *bwlock;
	rtaccel_gang_lock_t *gang;
	struct status_region *status;
	char status_name[64];
	_Atomic int stop;
	uint32_t go; /* futex: set once every core is set up and the start is known */
	uint64_t started_ns, stopped_ns;
	struct core_ctx cores[REGULATOR_MAX_CORES];
};

#endif
