/* accept(2) for a listener polled level-triggered (core, internal; C and
 * C++), where running out of descriptors would otherwise spin.
 *
 * A process at its descriptor limit (EMFILE) or a system at its own
 * (ENFILE) cannot accept: the connection stays waiting, so the listener is
 * reported readable again at once, for ever, and a loop around poll and
 * accept spins on its core and logs a line a turn, while the client waits.
 * rtaccel_accept then takes the waiting connection on a descriptor held in
 * reserve, lets the caller tell the peer why (SHED, may be NULL), closes
 * it, and returns the error: the peer learns at once and the listener goes
 * quiet. */
#ifndef RTACCEL_CORE_ACCEPT_H
#define RTACCEL_CORE_ACCEPT_H

#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Opens the process's reserve descriptor once: call it when a listener
 * opens, while descriptors are still to be had. 0 or -errno. */
int rtaccel_accept_reserve(void);

/* accept4(LFD, ADDR, LEN, FLAGS) for a non-blocking LFD: the new
 * descriptor, or -errno. On -EMFILE or -ENFILE the waiting connection was
 * refused as above (SHED got its descriptor, blocking and close-on-exec,
 * and the error first); -EAGAIN where none waited, out of descriptors or
 * not. */
int rtaccel_accept(int lfd, struct sockaddr *addr, socklen_t *len, int flags,
		   void (*shed)(int fd, int err, void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif
