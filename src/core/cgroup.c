/* cgroup v2 groups: see cgroup.h. */
#include "core/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/procfs.h"

int rtaccel_cgroup2_root(char *path, size_t len)
{
	FILE *f = setmntent("/proc/self/mounts", "r");
	if (!f)
		return -errno;
	int err = -ENOENT;
	struct mntent *m;
	while ((m = getmntent(f)))
		if (strcmp(m->mnt_type, "cgroup2") == 0) {
			snprintf(path, len, "%s", m->mnt_dir);
			err = 0;
			break;
		}
	endmntent(f);
	return err;
}

int rtaccel_cgroup_make(const char *path, char *out, size_t len)
{
	if (!path || !*path)
		return -EINVAL;
	if (path[0] == '/') {
		snprintf(out, len, "%s", path);
	} else {
		char root[256];
		int err = rtaccel_cgroup2_root(root, sizeof(root));
		if (err)
			return err;
		snprintf(out, len, "%s/%s", root, path);
	}
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return -errno;
	char probe[512];
	snprintf(probe, sizeof(probe), "%s/cgroup.procs", out);
	return access(probe, F_OK) == 0 ? 0 : -ENOTDIR;
}

int rtaccel_cgroup_write(const char *path, const char *name, const char *value)
{
	char file[512];
	snprintf(file, sizeof(file), "%s/%s", path, name);
	int fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, value, strlen(value));
	int err = n < 0 ? -errno : 0;
	close(fd);
	return err;
}

int rtaccel_cgroup_add(const char *path, pid_t pid)
{
	char value[32];
	snprintf(value, sizeof(value), "%d", pid ? pid : getpid());
	return rtaccel_cgroup_write(path, "cgroup.procs", value);
}

int rtaccel_cgroup_signal(const char *path, int sig)
{
	char file[512];
	snprintf(file, sizeof(file), "%s/cgroup.procs", path);
	FILE *f = fopen(file, "re");
	if (!f)
		return -errno;
	int sent = 0, pid;
	while (fscanf(f, "%d", &pid) == 1)
		if (pid > 0 && kill(pid, sig) == 0)
			sent++;
	fclose(f);
	return sent;
}

int rtaccel_cgroup_remove(const char *path, uint64_t grace_ns, int *killed)
{
	if (killed)
		*killed = 0;
	if (rmdir(path) == 0 || errno == ENOENT)
		return 0;
	if (errno != EBUSY)
		return -errno;
	/* Never the caller's own, nor one above it (the root: every process of
	 * the machine), whatever a caller was given for a cgroup of its own. */
	if (rtaccel_cgroup_holds_self(path) != 0)
		return -EBUSY;
	/* A frozen task takes no signal but SIGKILL: thawed, each may end as
	 * it chooses to on SIGTERM. */
	rtaccel_cgroup_write(path, "cgroup.freeze", "0");
	const int sent = rtaccel_cgroup_signal(path, SIGTERM);
	if (killed && sent > 0)
		*killed = sent;
	const uint64_t start = rtaccel_monotonic_ns();
	for (;;) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		const uint64_t waited = rtaccel_monotonic_ns() - start;
		if (waited >= grace_ns + 1000000000ull)
			return -EBUSY;
		/* Again each time: a task may have forked since the last list. */
		if (waited >= grace_ns)
			rtaccel_cgroup_signal(path, SIGKILL);
		rtaccel_sleep_ns(10 * 1000 * 1000);
	}
}

int rtaccel_cgroup_holds_self(const char *path)
{
	char root[256], line[512], own[768];
	int err = rtaccel_cgroup2_root(root, sizeof(root));
	if (err)
		return err;
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -errno;
	err = -ENOENT;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) { /* the cgroup v2 line */
			line[strcspn(line, "\n")] = '\0';
			snprintf(own, sizeof(own), "%s%s", root, line + 3);
			err = 0;
			break;
		}
	fclose(f);
	if (err)
		return err;
	char given[PATH_MAX], self[PATH_MAX];
	if (!realpath(path, given) || !realpath(own, self))
		return -errno;
	const size_t n = strlen(given);
	return strncmp(given, self, n) == 0 && (self[n] == '/' || self[n] == '\0');
}

bool rtaccel_mount_has_option(const char *options, const char *option)
{
	const size_t n = strlen(option);
	for (const char *p = options;; p++) {
		const size_t len = strcspn(p, ",");
		if (len == n && strncmp(p, option, n) == 0)
			return true;
		p += len;
		if (!*p)
			return false;
	}
}

/* Where a process's cgroup of one hierarchy is in the file system, from its
 * CGROUPS and MOUNTS files (/proc/PID/cgroup, /proc/PID/mountinfo): the
 * hierarchy's mount (cgroup2, or the cgroup v1 mount holding the memory
 * controller) joined with the process's path in it, less the part the mount
 * does not show (a container sees its own cgroup as the mount's root).
 * False where the hierarchy is not mounted. */
static bool memory_cgroup_dir(const char *cgroups, const char *mounts, bool v2, char *dir, size_t len,
			      size_t *mount_len)
{
	char own[PATH_MAX] = "";
	char line[PATH_MAX + 64];
	FILE *f = fopen(cgroups, "re");
	if (!f)
		return false;
	while (!own[0] && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *controllers = strchr(line, ':');
		char *path = controllers ? strchr(controllers + 1, ':') : NULL;
		if (!path)
			continue;
		*path++ = '\0';
		*controllers++ = '\0';
		bool ours = v2 && strcmp(line, "0") == 0 && !*controllers;
		char *next;
		for (char *c = strtok_r(controllers, ",", &next); !v2 && c && !ours; c = strtok_r(NULL, ",", &next))
			ours = strcmp(c, "memory") == 0;
		if (ours)
			snprintf(own, sizeof(own), "%s", path);
	}
	fclose(f);
	if (!own[0] || !(f = fopen(mounts, "re")))
		return false;
	/* id parent major:minor ROOT POINT options [optional...] - TYPE source SUPER */
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char root[PATH_MAX], point[PATH_MAX], type[32], super[512];
		const char *tail = strstr(line, " - ");
		if (!tail || sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2 ||
		    sscanf(tail, " - %31s %*s %511s", type, super) != 2)
			continue;
		if (v2 ? strcmp(type, "cgroup2") != 0 : strcmp(type, "cgroup") != 0 || !rtaccel_mount_has_option(super, "memory"))
			continue;
		const size_t n = strcmp(root, "/") == 0 ? 0 : strlen(root);
		if (strncmp(own, root, n) != 0 || (own[n] != '/' && own[n] != '\0'))
			continue;
		snprintf(dir, len, "%s%s", point, own + n);
		*mount_len = strlen(point);
		/* The root's path is "/": no trailing slash. */
		if (strlen(dir) > *mount_len && dir[strlen(dir) - 1] == '/')
			dir[strlen(dir) - 1] = '\0';
		found = true;
	}
	fclose(f);
	return found;
}

/* The number in the file NAME of the cgroup at DIR ("max": UINT64_MAX). */
static bool cgroup_number(const char *dir, const char *name, uint64_t *value)
{
	char file[PATH_MAX + 64], text[64];
	snprintf(file, sizeof(file), "%s/%s", dir, name);
	FILE *f = fopen(file, "re");
	if (!f)
		return false;
	const bool read = fgets(text, sizeof(text), f) != NULL;
	fclose(f);
	if (!read)
		return false;
	if (strncmp(text, "max", 3) == 0) {
		*value = UINT64_MAX;
		return true;
	}
	char *end;
	errno = 0;
	*value = strtoull(text, &end, 10);
	return errno == 0 && end != text;
}

/* The value of KEY in the memory.stat of the cgroup at DIR; 0 where absent. */
static uint64_t memory_stat(const char *dir, const char *key)
{
	char file[PATH_MAX + 64], name[64];
	snprintf(file, sizeof(file), "%s/memory.stat", dir);
	FILE *f = fopen(file, "re");
	if (!f)
		return 0;
	unsigned long long value, found = 0;
	while (fscanf(f, "%63s %llu", name, &value) == 2)
		if (strcmp(name, key) == 0) {
			found = value;
			break;
		}
	fclose(f);
	return found;
}

/* What the cgroup at DIR and those above it, up to its hierarchy's mount
 * at its first MOUNT_LEN bytes, leave under their memory limits; a group's
 * file cache counts as free, as the kernel reclaims it before it kills.
 * UINT64_MAX where none has a limit. */
static uint64_t memory_left_under(char *dir, size_t mount_len, bool v2)
{
	/* cgroup v1 marks "no limit" with the largest page count in bytes. */
	const uint64_t unlimited = v2 ? UINT64_MAX : 1ull << 62;
	uint64_t left = UINT64_MAX;
	for (;;) {
		uint64_t limit, used;
		if (cgroup_number(dir, v2 ? "memory.max" : "memory.limit_in_bytes", &limit) && limit < unlimited &&
		    cgroup_number(dir, v2 ? "memory.current" : "memory.usage_in_bytes", &used)) {
			const uint64_t cache = memory_stat(dir, v2 ? "active_file" : "total_active_file") +
					       memory_stat(dir, v2 ? "inactive_file" : "total_inactive_file");
			used = used > cache ? used - cache : 0;
			const uint64_t here = limit > used ? limit - used : 0;
			if (here < left)
				left = here;
		}
		char *slash = strrchr(dir, '/');
		if (strlen(dir) <= mount_len || !slash || (size_t)(slash - dir) < mount_len)
			break;
		*slash = '\0';
	}
	return left;
}

uint64_t rtaccel_cgroup_memory_left(const char *cgroups, const char *mounts)
{
	uint64_t left = UINT64_MAX;
	char dir[PATH_MAX];
	size_t mount_len;
	for (int v2 = 0; v2 <= 1; v2++)
		if (memory_cgroup_dir(cgroups, mounts, v2, dir, sizeof(dir), &mount_len)) {
			const uint64_t here = memory_left_under(dir, mount_len, v2);
			if (here < left)
				left = here;
		}
	return left;
}

uint64_t rtaccel_memory_available(void)
{
	unsigned long long kb = 0;
	uint64_t available = rtaccel_proc_field("/proc/meminfo", "MemAvailable: %llu kB", &kb)
				     ? (uint64_t)kb << 10
				     : UINT64_MAX;
	const uint64_t left = rtaccel_cgroup_memory_left("/proc/self/cgroup", "/proc/self/mountinfo");
	if (left < available)
		available = left;
	return available == UINT64_MAX ? 0 : available;
}
