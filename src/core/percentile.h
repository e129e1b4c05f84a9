/* The one definition of a percentile in rtaccel's reports (core, C and C++;
 * Python has it through rtaccel._core.percentile): nearest rank, the
 * smallest value with at least Q x N of the N values at or below it, so
 * that Q 0 is the minimum, 1 the maximum, and a reported p99 is a value that
 * was measured. Header-only, for programs that link nothing of rtaccel. */
#ifndef RTACCEL_CORE_PERCENTILE_H
#define RTACCEL_CORE_PERCENTILE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The index of the Q-quantile (0..1) in N > 0 sorted values. */
static inline size_t rtaccel_percentile_index(size_t n, double q)
{
	double rank = ceil(q * (double)n);
	return rank < 1 ? 0 : rank >= (double)n ? n - 1 : (size_t)rank - 1;
}

/* The Q-quantile of N values sorted ascending; 0 when N is 0. */
static inline double rtaccel_percentile_sorted(const double *sorted, size_t n, double q)
{
	return n ? sorted[rtaccel_percentile_index(n, q)] : 0;
}

static inline uint64_t rtaccel_percentile_sorted_u64(const uint64_t *sorted, size_t n, double q)
{
	return n ? sorted[rtaccel_percentile_index(n, q)] : 0;
}

/* The ascending order of qsort for both. */
static inline int rtaccel_cmp_u64(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static inline int rtaccel_cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static inline void rtaccel_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), rtaccel_cmp_u64);
}

static inline void rtaccel_sort_double(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), rtaccel_cmp_double);
}

/* The Q-quantile of N values in any order, which it sorts. */
static inline double rtaccel_percentile_double(double *v, size_t n, double q)
{
	rtaccel_sort_double(v, n);
	return rtaccel_percentile_sorted(v, n, q);
}

#endif /* RTACCEL_CORE_PERCENTILE_H */
