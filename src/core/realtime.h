/* Real-time privileges, asked for once and degraded gracefully (core, C).
 *
 * Containers, sandboxes and users without CAP_SYS_NICE are refused
 * SCHED_FIFO; without CAP_IPC_LOCK, locking all future memory makes the
 * next thread stack fail to map (EAGAIN). rtaccel's programs ask through
 * these functions, so that a refusal costs one line on stderr and the run
 * goes on, marked as one the analysis' bounds do not cover. */
#ifndef RTACCEL_CORE_REALTIME_H
#define RTACCEL_CORE_REALTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether this process may take SCHED_FIFO PRIORITY (asked of the kernel,
 * the caller's policy put back at once). */
bool rtaccel_fifo_allowed(int priority);

/* Whether this process's threads may run on CORE (asked of the kernel: the
 * caller moved there, its affinity put back at once). 0 where they may;
 * -EINVAL for a core that is offline or outside the process's cpuset (a
 * container's --cpuset-cpus), or another error of sched_setaffinity. */
int rtaccel_core_allowed(int core);

/* How many cores this process's threads may run on: its affinity, which
 * `taskset` and a cpuset (a container's --cpuset-cpus) narrow; not the
 * machine's cores, which a program that needs two would count wrongly. */
int rtaccel_cores_usable(void);

/* The kernel's real-time throttling: SCHED_FIFO and SCHED_RR threads run at
 * most *RUNTIME_US of every *PERIOD_US on a core (kernel.sched_rt_runtime_us
 * and sched_rt_period_us: 950 ms a second by default), then stand still for
 * the rest of the period whatever their priority. 1 with both set where it
 * is on; 0 where it is off (a runtime of -1) or cannot be read. */
int rtaccel_rt_throttling(long *runtime_us, long *period_us);

/* Whether that throttling can stop a SCHED_FIFO thread that runs N
 * callbacks, the I-th for at most CPU_NS[I] once every PERIOD_NS[I] (an
 * executor's on one core): 1, with why in WHY (at most LEN bytes, "its
 * callbacks may ask ..."), where what they may ask of it within one
 * throttling period, (ceil(P / T) + 1) x C each, is over the runtime the
 * throttling leaves; 0 where it cannot. */
int rtaccel_rt_throttles(const uint64_t *cpu_ns, const uint64_t *period_ns, size_t n, char *why, size_t len);

/* Gives the calling thread SCHED_FIFO PRIORITY; refused, the best it is
 * allowed instead: SCHED_OTHER at nice -20, else as it was. Returns 1 for
 * SCHED_FIFO, 0 for the substitute. */
int rtaccel_fifo_or_best(int priority);

/* Locks the process's memory, now and to come (mlockall), where that cannot
 * make a later allocation fail: with CAP_IPC_LOCK or an unlimited
 * RLIMIT_MEMLOCK. Returns 0, or -EPERM (memory left unlocked) or the
 * error of mlockall. */
int rtaccel_lock_memory(void);

/* One line on stderr: "PROGRAM: WHAT refused (strerror(ERR)): INSTEAD". */
void rtaccel_say_refused(const char *program, const char *what, int err, const char *instead);

#ifdef __cplusplus
}
#endif

#endif /* RTACCEL_CORE_REALTIME_H */
