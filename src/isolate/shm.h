/* Shared-memory regions of the isolate layer (internal): the gang lock, the
 * bandwidth lock and the regulator's status all begin with this header and
 * are opened the same way. */
#ifndef RTACCEL_ISOLATE_SHM_H
#define RTACCEL_ISOLATE_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct isolate_shm_header {
	uint32_t magic; /* written last by the creator */
	uint32_t version;
	uint64_t size;
};

/* Names: letters, digits, '_', '-', '.'; 1..max-1 characters. */
bool isolate_valid_name(const char *name, size_t max);

/* Maps /dev/shm/PREFIX.NAME, creating it (zeroed, header filled) if it does
 * not exist; waits for a creator in another process to finish. 0 or -errno
 * (-EINVAL: bad name, -EPROTO: another kind or version of object). */
int isolate_shm_open(const char *prefix, const char *name, size_t size, uint32_t magic,
		     uint32_t version, void **region);
/* The same in anonymous shared memory, for this process and its children. */
int isolate_shm_create_private(const char *tag, size_t size, uint32_t magic, uint32_t version,
			       void **region);
int isolate_shm_unlink(const char *prefix, const char *name);

/* False once the thread (or, with tid == pid, the process) has exited,
 * zombies included. Async-signal-safe. */
bool isolate_thread_alive(pid_t pid, pid_t tid);

#endif
