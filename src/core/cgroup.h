/* cgroups (core, internal; C and C++): the cgroup v2 best-effort group the
 * regulator meters and freezes, the removal of a run's group with whatever
 * still runs in it, and the memory a process's memory cgroups leave it.
 * Each call is 0 or -errno unless it says otherwise. */
#ifndef RTACCEL_CORE_CGROUP_H
#define RTACCEL_CORE_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the comma-separated mount OPTIONS (a cgroup v1 mount's name its
 * controllers: "rw,memory") name OPTION. */
bool rtaccel_mount_has_option(const char *options, const char *option);
/* The cgroup2 mount point (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a
 * hybrid system). 0 or -ENOENT. */
int rtaccel_cgroup2_root(char *path, size_t len);
/* PATH: absolute, or relative to the cgroup2 root; made if missing. Writes
 * the absolute path to OUT. */
int rtaccel_cgroup_make(const char *path, char *out, size_t len);
/* Moves process PID (0: the caller) into the cgroup at absolute PATH. */
int rtaccel_cgroup_add(const char *path, pid_t pid);
/* Writes VALUE to the file NAME of the cgroup at PATH. */
int rtaccel_cgroup_write(const char *path, const char *name, const char *value);
/* Sends SIG to every process in the cgroup at PATH (not its children's
 * groups); how many it sent to, or -errno. */
int rtaccel_cgroup_signal(const char *path, int sig);
/* Removes the cgroup at PATH (a leaf). Processes still in it get SIGTERM,
 * and SIGKILL once GRACE_NS has passed; it waits up to a second more for
 * them to go. *KILLED (may be NULL): how many processes it had to signal. */
int rtaccel_cgroup_remove(const char *path, uint64_t grace_ns, int *killed);
/* 1 where the cgroup at absolute PATH holds the caller: it is the caller's
 * cgroup or one above it (the root holds every process); 0 where not;
 * -errno. */
int rtaccel_cgroup_holds_self(const char *path);
/* The memory this process may still take without swapping or being killed
 * for it, in bytes: what the kernel has available (/proc/meminfo's
 * MemAvailable), and no more than the memory cgroups it sits in leave under
 * their limits (cgroup v2's memory.max, v1's memory.limit_in_bytes, and
 * those of the groups above; a container's limit), their file cache counted
 * as free. 0 where unknown. */
uint64_t rtaccel_memory_available(void);
/* What the memory cgroups of a process leave it, from its CGROUPS and
 * MOUNTS files (/proc/self/cgroup, /proc/self/mountinfo); UINT64_MAX where
 * none has a limit. rtaccel_memory_available's part, apart for its tests. */
uint64_t rtaccel_cgroup_memory_left(const char *cgroups, const char *mounts);

#ifdef __cplusplus
}
#endif

#endif
