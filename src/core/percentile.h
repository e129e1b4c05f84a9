/* The one definition of a percentile in rtaccel's reports (core, C and C++):
 * nearest rank, the smallest value with at least Q x N values at or below
 * it. Header-only, for programs that link nothing of rtaccel. */
#ifndef RTACCEL_CORE_PERCENTILE_H
#define RTACCEL_CORE_PERCENTILE_H

#include <math.h>
#include <stddef.h>

/* The Q-quantile (0..1) of N values sorted ascending; 0 when N is 0. */
static inline double rtaccel_percentile_sorted(const double *sorted, size_t n, double q)
{
	if (!n)
		return 0;
	size_t i = (size_t)ceil(q * (double)n);
	return sorted[i == 0 ? 0 : i > n ? n - 1 : i - 1];
}

#endif /* RTACCEL_CORE_PERCENTILE_H */
