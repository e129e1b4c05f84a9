/* The net layer's transports (internal): a link carries frames (frame.h)
 * between two processes, in order, with every failure returned as a value.
 * The flow-control layer above schedules which frame goes next; a transport
 * only moves them. TCP is here; shared memory and RDMA verbs follow the same
 * contract:
 *
 *   - connect and accept exchange HELLO frames (each end's name), under a
 *     deadline;
 *   - a listener accepts only peers on its allow-list and says whom it
 *     refused;
 *   - send and recv take a deadline and return -ETIMEDOUT, never hang; a
 *     peer that closed or died gives -ECONNRESET (or -EPIPE), a peer that
 *     sent bytes that are not a valid frame -EPROTO with the reason.
 */
#ifndef RTACCEL_NET_TRANSPORT_H
#define RTACCEL_NET_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net/frame.h"

#define NET_NAME_MAX 256
#define NET_ALLOW_MAX 32

struct net_limits {
	struct net_frame_limits frame;
	uint64_t handshake_ns; /* connect/accept: HELLO both ways */
};

void net_limits_defaults(struct net_limits *limits);

/* The peers a listener accepts: TCP by IP address ("10.0.0.2", "::1"),
 * shared memory by user id ("uid:1000"). An empty list accepts no one. */
struct net_allow {
	const char *peers[NET_ALLOW_MAX];
	int count;
};

struct net_link {
	int fd;
	struct net_limits limits;
	char peer_name[NET_NAME_MAX]; /* from the peer's HELLO */
	char peer_addr[96];	      /* as the transport sees it */
	char why[128];		      /* the last -EPROTO's reason */
};

struct net_listener {
	int fd;
	struct net_limits limits;
	struct net_allow allow;
	char name[NET_NAME_MAX];
};

/* "tcp:HOST:PORT" (HOST a name, IPv4 or [IPv6]; PORT 0 picks one). */
int net_tcp_listen(const char *address, const struct net_allow *allow, const char *name,
		   const struct net_limits *limits, struct net_listener *out);
/* The port a listener got (for "tcp:HOST:0"). */
int net_tcp_port(const struct net_listener *l);
/* -EACCES: a peer not on the list connected and was closed; REFUSED names
 * it. -ETIMEDOUT: no peer before the deadline. */
int net_tcp_accept(struct net_listener *l, uint64_t timeout_ns, struct net_link *out, char *refused,
		   size_t refused_len);
int net_tcp_connect(const char *address, const char *name, const struct net_limits *limits,
		    uint64_t timeout_ns, struct net_link *out);

/* One frame: header F and its payload (F->length bytes in IOV). */
int net_link_send(struct net_link *link, const struct net_frame *f, const struct iovec *iov,
		  int iovcnt, uint64_t timeout_ns);
/* The next frame's header into F and its payload into BUF (CAP bytes; a
 * larger payload is -EMSGSIZE and the link is no longer usable). */
int net_link_recv(struct net_link *link, struct net_frame *f, void *buf, size_t cap,
		  uint64_t timeout_ns);
void net_link_close(struct net_link *link);
void net_listener_close(struct net_listener *l);

#endif
