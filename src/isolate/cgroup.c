/* The best-effort cgroup: see cgroup.h. */
#include "isolate/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int isolate_cgroup2_root(char *path, size_t len)
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

int isolate_cgroup_make(const char *path, char *out, size_t len)
{
	if (!path || !*path)
		return -EINVAL;
	if (path[0] == '/') {
		snprintf(out, len, "%s", path);
	} else {
		char root[256];
		int err = isolate_cgroup2_root(root, sizeof(root));
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

int isolate_cgroup_write(const char *path, const char *name, const char *value)
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

int isolate_cgroup_add(const char *path, pid_t pid)
{
	char value[32];
	snprintf(value, sizeof(value), "%d", pid ? pid : getpid());
	return isolate_cgroup_write(path, "cgroup.procs", value);
}
