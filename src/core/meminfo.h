/* The machine's memory (core, internal; C and C++), for what must fit in it
 * before it is touched. Header-only, for programs that link nothing of
 * rtaccel. */
#ifndef RTACCEL_CORE_MEMINFO_H
#define RTACCEL_CORE_MEMINFO_H

#include <stdint.h>
#include <stdio.h>

/* What the kernel can give without swapping (/proc/meminfo's MemAvailable),
 * in bytes; 0 where unknown. */
static inline uint64_t rtaccel_memory_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return 0;
	char line[128];
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}

#endif
