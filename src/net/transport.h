/* The net layer's transports (internal): a link carries frames (frame.h)
 * between two processes, in order, with every failure returned as a value.
 * The flow-control layer above (flow.c) schedules which frame goes next; a
 * transport only moves them. Each transport is a table of operations
 * (struct net_transport_ops) registered by its address scheme:
 *
 *   - tcp:HOST:PORT   a TCP connection (tcp.c);
 *   - shm:NAME        two byte rings in a memfd shared by two processes of
 *                     one machine, set up over a Unix socket (shm.c);
 *   - rdma:HOST:PORT  an RC queue pair through rdma-core (rdma.c).
 *
 * and link.c keeps the one contract for all of them:
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "net/frame.h"
#include "rtaccel/net.h"

#define NET_NAME_MAX 256
#define NET_IOV_MAX 15 /* payload pieces of one frame */
#define NET_ALLOW_MAX 32

struct net_limits {
	struct net_frame_limits frame;
	uint64_t handshake_ns; /* connect/accept: HELLO both ways */
	uint32_t window;       /* bytes the transport may hold ahead of the
				* receiver; 0: its own most (tcp: the
				* kernel's buffers, rdma: every send slot,
				* shm: its default ring) */
};

void net_limits_defaults(struct net_limits *limits);

/* The peers a listener accepts: TCP and RDMA by IP address ("10.0.0.2",
 * "::1"), shared memory by user id ("uid:1000"). An empty list accepts no
 * one. The listener keeps the pointers: the strings must outlive it. */
struct net_allow {
	const char *peers[NET_ALLOW_MAX];
	int count;
};

struct net_link {
	const struct net_transport *transport; /* NULL: not open */
	void *priv;			       /* the transport's own state */
	struct net_limits limits;
	char peer_name[NET_NAME_MAX]; /* from the peer's HELLO */
	char peer_addr[96];	      /* as the transport sees it */
	char why[128];		      /* the last -EPROTO's reason */
};

struct net_listener {
	const struct net_transport *transport; /* NULL: not open */
	void *priv;
	struct net_limits limits;
	struct net_allow allow;
	char name[NET_NAME_MAX];
};

/* What a transport does, for the generic code in link.c, which runs the
 * HELLO exchange, the allow-list's messages, the deadlines and the frames
 * once for all of them. A transport moves bytes; it never sees a frame but
 * as bytes, and never calls back into link.c but for the helpers below.
 *
 * listen	opens ADDRESS for L (limits, allow-list and name already set).
 * accept	the next peer's connection into OUT (limits set), checked
 *		against the allow-list: -EACCES for a stranger. WHO names the
 *		peer, as refusals say it, as soon as it is known; a setup that
 *		fails on what the peer sent is -EPROTO with OUT->why.
 * connect	a connection to ADDRESS into LINK (limits set).
 * write	every byte of IOV (the array may be changed), or an error.
 * read		exactly LEN bytes into BUF (NULL: skip them), or an error;
 *		net_read_deadline and net_read_failed say how a read that has
 *		started ends.
 * shutdown	wakes a blocked read or write with -ECONNRESET, and fails
 *		every later one so.
 * close	frees the link's state (after shutdown or not).
 * forget	in a process forked from the link's: closes this process's
 *		copies of the link's descriptors and frees its state, and
 *		does nothing the process it was forked from would notice
 *		(no shutdown, no write, nothing undone in the kernel). NULL:
 *		the transport cannot, and the copies stay as they are.
 * close_listener frees the listener's state.
 * forget_listener as forget, for a listener.
 * port		the port a listener got (port 0 picks one); NULL: addresses
 *		have no port.
 * register_region, drain, zero_copy_sends: sends without a copy from a
 *		registered region (see net_link_register); NULL: every send
 *		copies, and there is nothing to register or drain.
 */
struct net_transport_ops {
	int (*listen)(struct net_listener *l, const char *address);
	int (*accept)(struct net_listener *l, uint64_t deadline, struct net_link *out, char *who,
		      size_t who_len);
	int (*connect)(struct net_link *link, const char *address, uint64_t deadline);
	int (*write)(struct net_link *link, struct iovec *iov, int iovcnt, uint64_t deadline);
	int (*read)(struct net_link *link, void *buf, size_t len, uint64_t deadline);
	void (*shutdown)(struct net_link *link);
	void (*close)(struct net_link *link);
	void (*forget)(struct net_link *link);
	void (*close_listener)(struct net_listener *l);
	void (*forget_listener)(struct net_listener *l);
	int (*port)(const struct net_listener *l);
	int (*register_region)(struct net_link *link, const void *buf, size_t len);
	int (*drain)(struct net_link *link, uint64_t deadline);
	uint64_t (*zero_copy_sends)(const struct net_link *link);
};

/* A transport: what the layers above know of it (rtaccel/net.h), and its
 * operations. One per file (tcp.c, shm.c, rdma.c), registered by its
 * scheme in transports.c. */
struct net_transport {
	struct rtaccel_net_transport info; /* first: the public view points here */
	const struct net_transport_ops *ops;
};

extern const struct net_transport net_tcp_transport;
extern const struct net_transport net_rdma_transport;
extern const struct net_transport net_shm_transport;

/* The transport of ADDRESS ("tcp:..."), or NULL. */
const struct net_transport *net_transport_of(const char *address);

/* Any transport, by the address's scheme (tcp:, shm:, rdma:). Listen,
 * accept and connect end with each side's HELLO: -EACCES from accept is a
 * peer not on the list, which REFUSED names (and why: not on the list, its
 * setup, its handshake); -ETIMEDOUT no peer before the deadline. */
int net_listen(const char *address, const struct net_allow *allow, const char *name,
	       const struct net_limits *limits, struct net_listener *out);
int net_accept(struct net_listener *l, uint64_t timeout_ns, struct net_link *out, char *refused,
	       size_t refused_len);
int net_connect(const char *address, const char *name, const struct net_limits *limits,
		uint64_t timeout_ns, struct net_link *out);
/* The address a peer connects to (a tcp: or rdma: listener on port 0 gets
 * its port filled in). */
int net_listener_address(const struct net_listener *l, const char *address, char *out, size_t n);

/* One frame: header F and its payload (F->length bytes in IOV). */
int net_link_send(struct net_link *link, const struct net_frame *f, const struct iovec *iov,
		  int iovcnt, uint64_t timeout_ns);
/* The next frame's header into F and its payload into BUF (CAP bytes; a
 * larger payload is -EMSGSIZE and the link is no longer usable). */
int net_link_recv(struct net_link *link, struct net_frame *f, void *buf, size_t cap,
		  uint64_t timeout_ns);
/* The same in two steps, so that a payload can go straight to where it
 * belongs: the header (a BYE is -ECONNRESET), then exactly f->length bytes
 * into DST, or past them with DST NULL. */
int net_link_recv_header(struct net_link *link, struct net_frame *f, uint64_t timeout_ns);
int net_link_recv_payload(struct net_link *link, void *dst, size_t len, uint64_t timeout_ns);
/* A region frames' payloads may be sent from without a copy (rdma; a
 * no-op elsewhere), and the wait until the device has read every such
 * payload posted so far, so that the caller may reuse its buffer. */
int net_link_register(struct net_link *link, const void *buf, size_t len);
int net_link_drain(struct net_link *link, uint64_t timeout_ns);
/* Sends that went without a copy, for the tests. */
uint64_t net_link_zero_copy_sends(const struct net_link *link);

/* Wakes a thread blocked in a receive on LINK with -ECONNRESET and makes
 * every later call fail the same way; close still has to follow. */
void net_link_shutdown(struct net_link *link);
void net_link_close(struct net_link *link);
/* In a child forked from the link's process: lets go of the child's copy of
 * LINK (ops->forget), sending nothing; the link goes on in the parent. */
void net_link_forget(struct net_link *link);
void net_listener_close(struct net_listener *l);
void net_listener_forget(struct net_listener *l);

/* For the transports: deadlines in CLOCK_MONOTONIC ns.
 *
 * A read that has taken part of its LEN bytes is in the middle of a frame:
 * from then on, the rest gets NET_STALL_NS after each piece whatever the
 * caller's deadline (net_read_deadline), and running out of time is
 * -ECONNABORTED (net_read_failed): the stream is no longer at a frame
 * boundary, so the link is broken, not idle (-ETIMEDOUT). */
#define NET_STALL_NS (1000ull * 1000 * 1000)
uint64_t net_read_deadline(uint64_t deadline, bool started);
int net_read_failed(int err, bool started);
/* What tcp and rdma share: an address resolved for getaddrinfo (-EINVAL
 * when it is not SCHEME "HOST:PORT", -EHOSTUNREACH when HOST resolves to
 * nothing), a peer's numeric address as allow-lists name it (IPv4-mapped
 * IPv6 as plain IPv4), and whether PEER is on the list. */
struct addrinfo;
struct sockaddr;
int net_resolve(const char *address, const char *scheme, bool passive, struct addrinfo **out);
void net_numeric_address(const struct sockaddr *sa, char *out, size_t n);
bool net_allowed(const struct net_allow *allow, const char *peer);
/* "SCHEME" "HOST:PORT" (HOST may be [v6]; PORT digits) into HOST and PORT. */
int net_split_address(const char *address, const char *scheme, char *host, size_t hlen, char *port,
		      size_t plen);
uint64_t net_deadline_after(uint64_t timeout_ns);
uint64_t net_time_left(uint64_t deadline);
/* Waits for EVENTS on FD (and on FD2 unless it is -1) until DEADLINE;
 * 0 when one is ready. */
int net_wait_fds(int fd, short events, int fd2, short events2, uint64_t deadline);

#endif
