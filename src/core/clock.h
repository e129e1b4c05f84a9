/* Clocks, deadlines and sleeps (core, internal; C and C++). Every layer reads
 * time through these, so that one clock (CLOCK_MONOTONIC unless a caller
 * names another) and one nanosecond unit run through rtaccel. */
#ifndef RTACCEL_CORE_CLOCK_H
#define RTACCEL_CORE_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

#define RTACCEL_NS_PER_S 1000000000ull

static inline uint64_t rtaccel_ns_of(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * RTACCEL_NS_PER_S + (uint64_t)ts->tv_nsec;
}

static inline struct timespec rtaccel_timespec_of(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / RTACCEL_NS_PER_S), (long)(ns % RTACCEL_NS_PER_S)};
	return ts;
}

static inline uint64_t rtaccel_clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return rtaccel_ns_of(&ts);
}

static inline uint64_t rtaccel_monotonic_ns(void) { return rtaccel_clock_ns(CLOCK_MONOTONIC); }

/* The absolute time ns from now on clock, as a deadline for timed waits. */
static inline struct timespec rtaccel_deadline_in(clockid_t clock, uint64_t ns)
{
	return rtaccel_timespec_of(rtaccel_clock_ns(clock) + ns);
}

/* Sleeps until the absolute time abs_ns on clock, through signals. */
static inline void rtaccel_sleep_until(clockid_t clock, uint64_t abs_ns)
{
	struct timespec ts = rtaccel_timespec_of(abs_ns);
	while (clock_nanosleep(clock, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Sleeps ns, through signals (the time left is kept, not restarted). */
static inline void rtaccel_sleep_ns(uint64_t ns)
{
	rtaccel_sleep_until(CLOCK_MONOTONIC, rtaccel_monotonic_ns() + ns);
}

#ifdef __cplusplus
namespace rtaccel::core {
inline uint64_t monotonic_ns() { return rtaccel_monotonic_ns(); }
// The calling thread's CPU time: what a callback's work is measured by.
inline uint64_t thread_cpu_ns() { return rtaccel_clock_ns(CLOCK_THREAD_CPUTIME_ID); }
inline timespec deadline_in(uint64_t ns) { return rtaccel_deadline_in(CLOCK_MONOTONIC, ns); }
inline void sleep_ns(uint64_t ns) { rtaccel_sleep_ns(ns); }
}  // namespace rtaccel::core
#endif

#endif /* RTACCEL_CORE_CLOCK_H */
