/* Real-time privileges, asked for once and degraded gracefully. */
#include "core/realtime.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/procfs.h"

bool rtaccel_fifo_allowed(int priority)
{
	int policy;
	struct sched_param old, want = {.sched_priority = priority};
	if (pthread_getschedparam(pthread_self(), &policy, &old) != 0)
		return false;
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &want) != 0)
		return false;
	pthread_setschedparam(pthread_self(), policy, &old);
	return true;
}

int rtaccel_core_allowed(int core)
{
	if (core < 0 || core >= CPU_SETSIZE)
		return -EINVAL;
	cpu_set_t old, want;
	if (sched_getaffinity(0, sizeof(old), &old) != 0)
		return -errno;
	CPU_ZERO(&want);
	CPU_SET(core, &want);
	if (sched_setaffinity(0, sizeof(want), &want) != 0)
		return -errno;
	sched_setaffinity(0, sizeof(old), &old);
	return 0;
}

int rtaccel_cores_usable(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	return CPU_COUNT(&set);
}

static bool read_long(const char *path, long *value)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool read = fscanf(f, "%ld", value) == 1;
	fclose(f);
	return read;
}

int rtaccel_rt_throttling(long *runtime_us, long *period_us)
{
	if (!read_long("/proc/sys/kernel/sched_rt_runtime_us", runtime_us) ||
	    !read_long("/proc/sys/kernel/sched_rt_period_us", period_us))
		return 0;
	return *runtime_us >= 0 && *period_us > 0 && *runtime_us < *period_us;
}

int rtaccel_rt_throttles(const uint64_t *cpu_ns, const uint64_t *period_ns, size_t n, char *why, size_t len)
{
	long runtime_us, period_us;
	if (!rtaccel_rt_throttling(&runtime_us, &period_us))
		return 0;
	uint64_t window_ns = (uint64_t)period_us * 1000, demand_ns = 0;
	for (size_t i = 0; i < n; ++i) {
		/* a period of 0 is a callback always due: it asks for everything */
		uint64_t times = period_ns[i] ? (window_ns + period_ns[i] - 1) / period_ns[i] + 1 : UINT64_MAX;
		uint64_t asked;
		if (__builtin_mul_overflow(times, cpu_ns[i], &asked) ||
		    __builtin_add_overflow(demand_ns, asked, &demand_ns))
			demand_ns = UINT64_MAX;
	}
	if (demand_ns <= (uint64_t)runtime_us * 1000)
		return 0;
	snprintf(why, len,
		 "its callbacks may ask its thread for %.0f ms in a throttling period of %.0f ms, over the "
		 "%.0f ms the kernel's real-time throttling lets SCHED_FIFO threads run in one "
		 "(kernel.sched_rt_runtime_us %ld of sched_rt_period_us %ld): the thread can stand still "
		 "%.0f ms a period (lighter chains, or sysctl kernel.sched_rt_runtime_us=-1)",
		 (double)demand_ns / 1e6, (double)period_us / 1000, (double)runtime_us / 1000, runtime_us,
		 period_us, (double)(period_us - runtime_us) / 1000);
	return 1;
}

int rtaccel_fifo_or_best(int priority)
{
	struct sched_param want = {.sched_priority = priority};
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &want) == 0)
		return 1;
	/* nice applies to the calling thread on Linux (its tid) */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -20);
	return 0;
}

/* Whether mlockall(MCL_FUTURE) cannot starve later allocations: an
 * unlimited RLIMIT_MEMLOCK, or CAP_IPC_LOCK in the effective set. */
static bool can_lock_all(void)
{
	struct rlimit lim;
	if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur == RLIM_INFINITY)
		return true;
	unsigned long long eff = 0;
	return rtaccel_proc_field("/proc/self/status", "CapEff: %llx", &eff) && (eff >> 14 & 1); /* CAP_IPC_LOCK */
}

int rtaccel_lock_memory(void)
{
	if (!can_lock_all())
		return -EPERM;
	return mlockall(MCL_CURRENT | MCL_FUTURE) == 0 ? 0 : -errno;
}

void rtaccel_say_refused(const char *program, const char *what, int err, const char *instead)
{
	fprintf(stderr, "%s: %s refused (%s): %s\n", program, what, strerror(err < 0 ? -err : err), instead);
}
