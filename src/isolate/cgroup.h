/* The best-effort cgroup (internal): where the regulator finds the tasks it
 * meters by CPU time, and what a frozen cgroup costs to stop. cgroup v2. */
#ifndef RTACCEL_ISOLATE_CGROUP_H
#define RTACCEL_ISOLATE_CGROUP_H

#include <stddef.h>
#include <sys/types.h>

/* The cgroup2 mount point (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a
 * hybrid system). 0 or -ENOENT. */
int isolate_cgroup2_root(char *path, size_t len);
/* PATH: absolute, or relative to the cgroup2 root; made if missing. Writes
 * the absolute path to OUT. 0 or -errno. */
int isolate_cgroup_make(const char *path, char *out, size_t len);
/* Moves process PID (0: the caller) into the cgroup at absolute PATH. */
int isolate_cgroup_add(const char *path, pid_t pid);
/* Writes VALUE to the file NAME of the cgroup at PATH. */
int isolate_cgroup_write(const char *path, const char *name, const char *value);

#endif
