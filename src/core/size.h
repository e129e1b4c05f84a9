/* Numbers on command lines (core, internal; C and C++): whole numbers,
 * decimals, byte counts "64", "48K", "32M", "1G" (powers of 1024) and core
 * lists "1,3-5". Each is 0 with the value in *out when TEXT is one, whole,
 * within [min, max]; else -1. */
#ifndef RTACCEL_CORE_SIZE_H
#define RTACCEL_CORE_SIZE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* 0 and the size in *out when TEXT is one within [min, max], else -1. */
static inline int rtaccel_parse_size(const char *text, uint64_t min, uint64_t max, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno || end == text || text[0] == '-')
		return -1;
	int shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return -1;
	v <<= shift;
	if (v < min || v > max)
		return -1;
	*out = (size_t)v;
	return 0;
}

static inline int rtaccel_parse_long(const char *text, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static inline int rtaccel_parse_double(const char *text, double min, double max, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (errno || end == text || *end || !(v >= min && v <= max))
		return -1;
	*out = v;
	return 0;
}

/* A list of cores, "1,3-5": 0 with them in cores[0..*n) in the order
 * given, at most max of them, each below limit; else -1 (an empty list
 * included). */
static inline int rtaccel_parse_cores(const char *text, int *cores, int max, long limit, int *n)
{
	*n = 0;
	const char *p = text;
	while (*p) {
		char *end;
		errno = 0;
		long a = strtol(p, &end, 10), b = a;
		if (*p < '0' || *p > '9' || errno || end == p)
			return -1;
		if (*end == '-') {
			p = end + 1;
			b = strtol(p, &end, 10);
			if (*p < '0' || *p > '9' || errno || end == p || b < a)
				return -1;
		}
		for (long c = a; c <= b; c++) {
			if (*n == max || c >= limit)
				return -1;
			cores[(*n)++] = (int)c;
		}
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return *n ? 0 : -1;
}

#endif
