/* Numbers on command lines (core, internal; C and C++): whole numbers,
 * decimals, and byte counts "64", "48K", "32M", "1G" (powers of 1024). Each
 * is 0 with the value in *out when TEXT is one, whole, within [min, max];
 * else -1. */
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

#endif
