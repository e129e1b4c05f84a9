/* Figures the kernel gives in /proc (core, internal; C and C++). Header-only,
 * for programs that link nothing of rtaccel. */
#ifndef RTACCEL_CORE_PROCFS_H
#define RTACCEL_CORE_PROCFS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The value of the first line of PATH that FORMAT reads (as
 * "MemAvailable: %llu kB"), in *VALUE; false where the file or the line is
 * not there. */
static inline bool rtaccel_proc_field(const char *path, const char *format, unsigned long long *value)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, format, value) == 1;
	fclose(f);
	return found;
}

/* What the kernel can give without swapping (/proc/meminfo's MemAvailable),
 * in bytes; 0 where unknown. */
static inline uint64_t rtaccel_memory_available(void)
{
	unsigned long long kb = 0;
	return rtaccel_proc_field("/proc/meminfo", "MemAvailable: %llu kB", &kb) ? (uint64_t)kb << 10 : 0;
}

#endif
