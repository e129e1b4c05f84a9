/* cgroup v2 groups (core, internal; C and C++): the best-effort cgroup the
 * regulator meters and freezes, and the removal of a run's group with
 * whatever still runs in it. Each call is 0 or -errno. */
#ifndef RTACCEL_CORE_CGROUP_H
#define RTACCEL_CORE_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif
