/* The machine's caches (core, internal; C and C++), for work that must fit
 * in the last-level cache or spill out of it. Header-only, for programs that
 * link nothing of rtaccel. */
#ifndef RTACCEL_CORE_CACHE_H
#define RTACCEL_CORE_CACHE_H

#include <stddef.h>
#include <stdio.h>

/* The largest cache of CPU 0, as the kernel describes it in sysfs; 0 where
 * it does not. Not sysconf(_SC_LEVEL3_CACHE_SIZE): glibc reads it
 * from CPUID, which a hypervisor may fill as it likes (320 MiB on a VM whose
 * kernel says 32). */
static inline size_t rtaccel_llc_bytes(void)
{
	size_t best = 0;
	for (int index = 0; index < 8; index++) {
		char path[128];
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
		FILE *f = fopen(path, "re");
		if (!f)
			break;
		unsigned long v = 0;
		char unit = 0;
		if (fscanf(f, "%lu%c", &v, &unit) >= 1) {
			size_t bytes = v;
			if (unit == 'K')
				bytes <<= 10;
			if (unit == 'M')
				bytes <<= 20;
			if (bytes > best)
				best = bytes;
		}
		fclose(f);
	}
	return best;
}

#endif /* RTACCEL_CORE_CACHE_H */
