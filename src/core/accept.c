#include "core/accept.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

/* One slot for the whole process: shedding is rare, and one at a time. */
static pthread_mutex_t reserve_mu = PTHREAD_MUTEX_INITIALIZER;
static int reserve_fd = -1;

static int open_reserve(void)
{
	if (reserve_fd < 0)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return reserve_fd < 0 ? -errno : 0;
}

int rtaccel_accept_reserve(void)
{
	pthread_mutex_lock(&reserve_mu);
	const int err = open_reserve();
	pthread_mutex_unlock(&reserve_mu);
	return err;
}

int rtaccel_accept(int lfd, struct sockaddr *addr, socklen_t *len, int flags,
		   void (*shed)(int fd, int err, void *arg), void *arg)
{
	const int fd = accept4(lfd, addr, len, flags);
	if (fd >= 0)
		return fd;
	const int err = errno;
	if (err != EMFILE && err != ENFILE)
		return -err;
	/* The kernel looks for a free descriptor before it looks at the
	 * backlog: out of descriptors, accept4 fails so whether a peer waits
	 * or not. The reserve's slot tells which. */
	int result = -err;
	pthread_mutex_lock(&reserve_mu);
	/* (Made again here where another thread took the slot last time.) */
	if (open_reserve() == 0) {
		close(reserve_fd);
		reserve_fd = -1;
		const int refused = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (refused >= 0) {
			if (shed)
				shed(refused, err, arg);
			close(refused);
		} else if (errno == EAGAIN) {
			result = -EAGAIN; /* none waited */
		}
		open_reserve();
	}
	pthread_mutex_unlock(&reserve_mu);
	return result;
}
