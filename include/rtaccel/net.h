/* rtaccel net layer: deterministic communication between nodes.
 *
 * A link joins two processes over one transport:
 *
 *   tcp:HOST:PORT    TCP (HOST a name, an IPv4 address or [IPv6]);
 *   shm:NAME         shared memory between processes of one machine;
 *   rdma:HOST:PORT   RDMA RC verbs through rdma-core (Soft-RoCE or a NIC),
 *                    HOST an address of the RDMA device's network interface.
 *
 * Over a link go channels, numbered by the application, each with a
 * priority. A transfer is one message of up to a channel's maximum size; it
 * goes out in chunks, and at every chunk boundary the link's sender side
 * lets the highest-priority waiting transfer go first, FIFO among transfers
 * of equal priority. So a transfer waits for at most one chunk of a lower
 * priority, plus the higher-priority transfers that arrive meanwhile.
 *
 *   rtaccel_net_link_t *link;
 *   rtaccel_net_connect("tcp:10.0.0.2:7400", "camera", NULL, 2 * SEC, &link);
 *   struct rtaccel_net_channel_attr a = {.id = 1, .priority = 90,
 *                                        .max_size = 8 << 20};
 *   rtaccel_net_channel_t *ch;
 *   rtaccel_net_channel_open(link, &a, &ch);
 *   rtaccel_net_send(ch, image, size, 0, 100 * MSEC);
 *
 *   // the other node: accept, open channel 1 with the same id
 *   uint64_t seen = 0;
 *   struct rtaccel_net_msg m;
 *   rtaccel_net_take(ch, &seen, 100 * MSEC, &m);  // m.data is in place
 *   use(m.data, m.len);
 *   rtaccel_net_release(&m);
 *
 * The sending thread sends its own chunks, at its own priority; there is no
 * sender thread to inherit from. Each link has one receive thread that puts
 * each chunk straight into one of the channel's receive slots; consumers
 * read slots in place, as many of them and at what rates they like, until
 * they release them.
 *
 * Conventions (as the rest of rtaccel): functions return 0 or a negative
 * errno value; timeouts are relative nanoseconds; no call waits past its
 * timeout. A link that failed (peer gone, timeout in the middle of a frame,
 * a frame that is not valid) stays failed: every call on it returns the
 * error (-ECONNABORTED after a timeout mid-frame, so that it never reads as
 * "nothing yet"), and rtaccel_net_error() says why.
 *
 * fork(): links and listeners belong to the process that made them. A child
 * forked from that process closes its copies of their descriptors as it
 * starts, finds each link failed with -ENOTCONN and each listener's accept
 * refused so; it may close them, which frees its copies and leaves the
 * parent's as they were. So the peer sees a link end when the parent ends,
 * and a listener's address is free once the parent closed it, whatever the
 * child does. (Not over rdma: there the child's copies stay open until it
 * execs or exits, since letting go of them would end the parent's
 * connection.) A child that needs a link makes its own.
 *
 * Real-time notes: send and take allocate nothing. An uncontended send makes
 * only the transport's system calls (none on shm while the receiver is
 * awake); take makes none when a message is there.
 */
#ifndef RTACCEL_NET_H
#define RTACCEL_NET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Each public header stands alone: whichever comes first defines this. */
#ifndef RTACCEL_API
#define RTACCEL_API __attribute__((visibility("default")))
#endif

#define RTACCEL_NET_CHANNELS 64  /* channels of one link */
#define RTACCEL_NET_ALLOW_MAX 32 /* peers of one listener */
#define RTACCEL_NET_REGIONS 8	 /* registered send regions of one link */

typedef struct rtaccel_net_listener rtaccel_net_listener_t;
typedef struct rtaccel_net_link rtaccel_net_link_t;
typedef struct rtaccel_net_channel rtaccel_net_channel_t;

struct rtaccel_net_options {
	uint32_t chunk;		    /* payload bytes per frame: the preemption point */
	uint64_t max_transfer;	    /* the largest transfer a receiver accepts */
	uint64_t handshake_ns;	    /* the HELLO exchange of connect and accept */
	uint32_t window;	    /* bytes the transport may hold ahead of the
				       receiver (0: see below) */
	int rx_priority;	    /* SCHED_FIFO priority of the receive thread; 0: none */
};

/* chunk 64 KiB, max_transfer 256 MiB, handshake 5 s, window 0.
 *
 * The window bounds what a higher-priority transfer finds queued below the
 * flow-control layer: the kernel's socket buffers on tcp (SO_SNDBUF and
 * SO_RCVBUF), the ring on shm (rounded up to a power of 2), outstanding
 * sends on rdma. Larger windows stream faster and block longer. 0 means
 * two chunks on tcp and rdma, and a 4 MiB ring on shm (memory drains it in
 * well under a millisecond). */
RTACCEL_API void rtaccel_net_options_default(struct rtaccel_net_options *o);

/* What rtaccel knows of a transport besides how it moves bytes, for the
 * layers above the net layer: a workload's links name it, the runner forms
 * its addresses, the analysis bounds a transfer over it with its figures.
 * The wire carries WIRE_PAYLOAD bytes of payload in every WIRE_FRAME bytes
 * it sends (tcp: 1448 in a 1514-byte Ethernet frame). */
struct rtaccel_net_transport {
	const char *name;	/* "tcp": its addresses begin "tcp:" */
	int one_machine;	/* 1: NAME:KEY between processes of one machine,
				   peers named "uid:N"; 0: NAME:HOST:PORT between
				   hosts, peers named by IP address */
	int rdma_device;	/* 1: each end's interface needs an RDMA device */
	uint32_t wire_payload, wire_frame;
	uint32_t window_chunks; /* the default window: so many chunks, */
	uint32_t window_bytes;	/* or these bytes where window_chunks is 0 */
	uint32_t beyond_window; /* what one write may queue past the window */
};

/* The transport NAME names ("tcp", or an address "tcp:..."), or NULL. */
RTACCEL_API const struct rtaccel_net_transport *rtaccel_net_transport_find(const char *name);
/* The Ith transport (0, 1, ...), or NULL past the last. */
RTACCEL_API const struct rtaccel_net_transport *rtaccel_net_transport_at(int i);
/* The window a link over T gets when options leave it 0, for CHUNK. */
RTACCEL_API uint32_t rtaccel_net_default_window(const struct rtaccel_net_transport *t,
						uint32_t chunk);

/* Listens on ADDRESS (a tcp: or rdma: port 0 picks one; see
 * rtaccel_net_listener_address) for the peers in ALLOW: IP addresses for
 * tcp and rdma ("10.0.0.2"), user ids for shm ("uid:1000", checked with
 * SO_PEERCRED). NAME is what peers learn of this end. */
RTACCEL_API int rtaccel_net_listen(const char *address, const char *const *allow, int nallow,
				   const char *name, const struct rtaccel_net_options *o,
				   rtaccel_net_listener_t **out);
RTACCEL_API int rtaccel_net_listener_address(const rtaccel_net_listener_t *l, char *out,
					     size_t n);
/* The next peer. -EACCES: one not on the list tried, and REFUSED (if not
 * NULL) names it; call again for the next. -ETIMEDOUT: no one came. */
RTACCEL_API int rtaccel_net_accept(rtaccel_net_listener_t *l, uint64_t timeout_ns,
				   rtaccel_net_link_t **out, char *refused, size_t refused_len);
RTACCEL_API void rtaccel_net_listener_close(rtaccel_net_listener_t *l);

RTACCEL_API int rtaccel_net_connect(const char *address, const char *name,
				    const struct rtaccel_net_options *o, uint64_t timeout_ns,
				    rtaccel_net_link_t **out);
/* The peer's name (from its HELLO) and address. */
RTACCEL_API const char *rtaccel_net_peer(const rtaccel_net_link_t *link);
RTACCEL_API const char *rtaccel_net_peer_address(const rtaccel_net_link_t *link);
/* Why the link failed, or "" while it works. */
RTACCEL_API const char *rtaccel_net_error(const rtaccel_net_link_t *link);
/* Says goodbye to the peer, stops the receive thread, frees the link and
 * its channels. No other call on the link may be running or follow. */
RTACCEL_API void rtaccel_net_close(rtaccel_net_link_t *link);

/* The SCHED_FIFO priority of the link's receive thread now; 0: it is not
 * real-time. */
RTACCEL_API int rtaccel_net_rx_priority(const rtaccel_net_link_t *link);
/* Moves the receive thread to SCHED_FIFO PRIORITY (1..99), or to SCHED_OTHER
 * at 0, as rtaccel_net_options.rx_priority does at connect and accept: for
 * a link whose consumers' priorities are known only later. -EPERM without
 * the right to real-time scheduling (the thread stays as it was). */
RTACCEL_API int rtaccel_net_set_rx_priority(rtaccel_net_link_t *link, int priority);

enum rtaccel_net_stale {
	RTACCEL_NET_STALE_DROP = 0, /* send fails with -ESTALE, nothing goes out */
	RTACCEL_NET_STALE_FLAG = 1, /* it goes out, and the receiver sees msg.stale */
};

struct rtaccel_net_channel_attr {
	uint32_t id;		/* the same on both ends */
	uint8_t priority;	/* sending: 0..255, higher goes first */
	uint64_t max_size;	/* receiving: bytes of one transfer (a slot's size) */
	uint32_t slots;		/* receiving: slots (0: 4); see rtaccel_net_take */
	uint64_t freshness_ns;	/* data older than this is stale (0: no check) */
	int stale;		/* sending: enum rtaccel_net_stale */
	uint64_t ack_timeout_ns; /* sending: wait this long for the receiver's ACK
				    (0: send without ACK) ... */
	uint32_t retries;	/* ... and send again this many times before -ETIMEDOUT */
};

/* A channel on LINK, for sending, receiving or both; it lives as long as the
 * link. -EEXIST: ID is open already; -ENOSPC: RTACCEL_NET_CHANNELS are. */
RTACCEL_API int rtaccel_net_channel_open(rtaccel_net_link_t *link,
					 const struct rtaccel_net_channel_attr *attr,
					 rtaccel_net_channel_t **out);

/* Sends LEN bytes of DATA as one transfer; DATA is read in place while the
 * call runs. STAMP_NS: when the data was produced (CLOCK_REALTIME; 0: now),
 * checked against the channel's freshness bound when the transfer's turn
 * comes. Returns once the last chunk is out, or, with ACKs, once the
 * receiver has it. -ESTALE: dropped as stale; -ETIMEDOUT: not out, or not
 * acknowledged after the retries, within TIMEOUT_NS; -EMSGSIZE: larger than
 * the link's max_transfer; -ECONNRESET and others: the link failed. */
RTACCEL_API int rtaccel_net_send(rtaccel_net_channel_t *ch, const void *data, size_t len,
				 uint64_t stamp_ns, uint64_t timeout_ns);

/* Registers LEN bytes at BUF as a region sends may come from without a copy.
 * On rdma the chunks of a transfer that lies inside a registered region go
 * from there to the wire (the device reads them; send returns once it
 * has); elsewhere they are copied into the link's registered slots. On tcp
 * and shm it does nothing. Up to RTACCEL_NET_REGIONS per link, registered
 * as long as the link lives. -ENOSPC: too many; other errors are the
 * device's (-ENOMEM: the locked-memory limit, RLIMIT_MEMLOCK). */
RTACCEL_API int rtaccel_net_register(rtaccel_net_link_t *link, const void *buf, size_t len);

/* A received transfer, read in place. */
struct rtaccel_net_msg {
	const void *data;
	size_t len;
	uint64_t seq;	     /* the transfer's number on its channel, from 1 */
	uint64_t stamp_ns;   /* the producer's stamp (CLOCK_REALTIME) */
	uint64_t arrival_ns; /* when its last chunk arrived (CLOCK_MONOTONIC) */
	int stale;	     /* older than the freshness bound at sending or arrival */
	/* private */
	rtaccel_net_channel_t *ch;
	uint32_t slot;
};

/* Waits for a transfer newer than *SEEN (start at 0) and gives the newest;
 * *SEEN becomes its number. A consumer that keeps up sees every transfer; a
 * slower one (a lower rate, say) skips to the newest, without copies. The
 * message's slot is not reused until rtaccel_net_release. -ETIMEDOUT: none
 * newer in time (TIMEOUT_NS 0: do not wait); -ECONNRESET and others: the
 * link failed and nothing newer is left. */
RTACCEL_API int rtaccel_net_take(rtaccel_net_channel_t *ch, uint64_t *seen, uint64_t timeout_ns,
				 struct rtaccel_net_msg *msg);
RTACCEL_API void rtaccel_net_release(struct rtaccel_net_msg *msg);

/* Activation over several inputs (channels of any links): with
 * RTACCEL_NET_ALL, waits until every input has a transfer newer than its
 * .seen and takes them all; with RTACCEL_NET_ANY, until at least one has
 * and takes those (.ready says which). Time-driven activation is a periodic
 * thread calling it with timeout 0. Release each ready .msg.
 *
 * RTACCEL_NET_SPIN, or'd in, busy-waits instead of sleeping: no system call
 * and no wake-up between the arrival and the caller. Only for a caller that
 * the links' receive threads outrank (rtaccel_net_rx_priority above the
 * caller's SCHED_FIFO priority) or that has a core of its own: a spinning
 * caller that the receive thread cannot preempt delays the very arrival it
 * waits for. */
enum rtaccel_net_when { RTACCEL_NET_ANY = 0, RTACCEL_NET_ALL = 1, RTACCEL_NET_SPIN = 2 };

struct rtaccel_net_input {
	rtaccel_net_channel_t *ch;
	uint64_t seen;
	int ready;
	struct rtaccel_net_msg msg;
};

RTACCEL_API int rtaccel_net_wait(struct rtaccel_net_input *in, int n, int when,
				 uint64_t timeout_ns);

struct rtaccel_net_stats {
	uint64_t sent;		 /* transfers out (and acknowledged, with ACKs) */
	uint64_t bytes_sent;
	uint64_t chunks_sent;
	uint64_t preempted;	 /* chunk boundaries where a higher priority went first */
	uint64_t stale_dropped;	 /* at sending */
	uint64_t stale_flagged;	 /* at sending */
	uint64_t retries;	 /* transfers sent again after an ACK timeout */
	uint64_t ack_timeouts;	 /* sends that gave up */
	uint64_t received;	 /* whole transfers */
	uint64_t bytes_received;
	uint64_t stale_received; /* flagged by the sender or too old on arrival */
	uint64_t duplicates;	 /* a retry of a transfer already here */
	uint64_t overruns;	 /* no free slot: the transfer was dropped */
	uint64_t rejected;	 /* larger than max_size, or chunks out of order */
};

RTACCEL_API void rtaccel_net_channel_stats(const rtaccel_net_channel_t *ch,
					   struct rtaccel_net_stats *out);

#ifdef __cplusplus
}
#endif

#endif
