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
