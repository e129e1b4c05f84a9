/* Shared-memory regions of the isolate layer: see shm.h. */
#include "isolate/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/clock.h"

bool isolate_valid_name(const char *name, size_t max)
{
	size_t n = name ? strnlen(name, max) : 0;
	if (n == 0 || n >= max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

static int map_fd(int fd, bool fresh, size_t size, uint32_t magic, uint32_t version,
		  void **region)
{
	if (fresh && ftruncate(fd, (off_t)size) < 0)
		return -errno;
	/* The pages taken now: on a full /dev/shm (a container's 64 MiB, that
	 * other programs filled) the first touch of one not had would be
	 * SIGBUS. -ENOSPC instead. */
	if (fresh) {
		const int err = posix_fallocate(fd, 0, (off_t)size);
		if (err)
			return -err;
	}
	/* A creator in another process may not have sized it yet. */
	for (int i = 0; !fresh; i++) {
		struct stat st;
		if (fstat(fd, &st) < 0)
			return -errno;
		if ((size_t)st.st_size == size)
			break;
		if (st.st_size != 0 || i == 1000)
			return -EPROTO;
		rtaccel_sleep_ns(1000 * 1000);
	}
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	struct isolate_shm_header *h = p;
	_Atomic uint32_t *magic_word = (_Atomic uint32_t *)&h->magic;
	if (fresh) {
		h->version = version;
		h->size = size;
		atomic_store_explicit(magic_word, magic, memory_order_release);
	} else {
		for (int i = 0; atomic_load_explicit(magic_word, memory_order_acquire) != magic; i++) {
			if (i == 1000) {
				munmap(p, size);
				return -EPROTO;
			}
			rtaccel_sleep_ns(1000 * 1000);
		}
		if (h->version != version || h->size != size) {
			munmap(p, size);
			return -EPROTO;
		}
	}
	*region = p;
	return 0;
}

static int object_path(const char *prefix, const char *name, char *buf, size_t len)
{
	if (!isolate_valid_name(name, 200))
		return -EINVAL;
	snprintf(buf, len, "/%s.%s", prefix, name);
	return 0;
}

int isolate_shm_open(const char *prefix, const char *name, size_t size, uint32_t magic,
		     uint32_t version, void **region)
{
	char path[256];
	int err = object_path(prefix, name, path, sizeof(path));
	if (err)
		return err;
	bool fresh = true;
	int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
	if (fd < 0 && errno == EEXIST) {
		fresh = false;
		fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
	}
	if (fd < 0)
		return -errno;
	err = map_fd(fd, fresh, size, magic, version, region);
	close(fd);
	if (err && fresh)
		shm_unlink(path);
	return err;
}

int isolate_shm_create_private(const char *tag, size_t size, uint32_t magic, uint32_t version,
			       void **region)
{
	int fd = memfd_create(tag, MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int err = map_fd(fd, true, size, magic, version, region);
	close(fd);
	return err;
}

int isolate_shm_unlink(const char *prefix, const char *name)
{
	char path[256];
	int err = object_path(prefix, name, path, sizeof(path));
	if (err)
		return err;
	return shm_unlink(path) < 0 ? -errno : 0;
}

bool isolate_thread_alive(pid_t pid, pid_t tid)
{
	if (syscall(SYS_tgkill, pid, tid, 0) < 0)
		return errno != ESRCH;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = 0;
	const char *paren = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}
