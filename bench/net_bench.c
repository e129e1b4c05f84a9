/* The net layer measured on this machine, each run against its baseline in
 * the same run. Both ends are threads of this process, joined over the
 * transport as two processes would be.
 *
 *   rtaccel-net-bench overhead [--transport tcp|shm|rdma] [--sizes LIST] [--rate R]
 *                              [--samples N] [--chunk BYTES]
 *       one transfer at a time, 64 KiB to 32 MiB: the raw transport (the
 *       transfer as one frame, read by the receiving thread) against the
 *       flow-control layer (64 KiB chunks through the token, the receive
 *       thread, a slot and the consumer's wake-up), alternating; one-way
 *       latency from the send call to the consumer holding the data; the
 *       raw link has the flow-control link's window, and a third link the
 *       kernel's own socket buffers (what the window costs). tcp runs on
 *       loopback, or with --rate over the priority run's veth link
 *   rtaccel-net-bench priority [--transport tcp|shm|rdma] [--sizes LIST] [--rate R]
 *       a high-priority flow under three lower-priority flows that send
 *       back to back, all of one size (1 to 32 MiB): raw, each flow on a
 *       connection of its own as applications without rtaccel would have
 *       it; flow control, the four flows as channels of one link. Then
 *       four flows of equal priority taking turns: how often the arrivals
 *       keep the round-robin order they were sent in
 *   rtaccel-net-bench zerocopy [--sizes LIST] [--rate R] [--samples N] [--chunk BYTES]
 *       tcp, one transfer at a time in chunk-sized sends: plain sends
 *       against MSG_ZEROCOPY, in turn, on sockets held to the flow-control
 *       link's window; how often the kernel copied a zero-copy send anyway
 *
 * Each prints one JSON object. Exit 0; 77 when the transport cannot run
 * here, with the reason. */
#include "rtaccel/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/percentile.h"
#include "core/futex.h"
#include "core/size.h"
#include "net/transport.h"
#include "net_common.h"

#define SEC 1000000000ull
#define MS 1000000ull
#define MAX_SAMPLES 1000

static const char *transport = "tcp";

/* The RDMA device's address (RTACCEL_RDMA_ADDR), loopback otherwise. */
static const char *rdma_host(void)
{
	const char *a = getenv("RTACCEL_RDMA_ADDR");
	return a && *a ? a : "127.0.0.1";
}
static int serial;

/* Senders and consumers run on one CPU, receive threads on another, so
 * that both paths make the same wake-ups across CPUs in every run (left to
 * the scheduler, a run's placement decided who paid them). */
static int sender_cpu, receiver_cpu;

static void pin_self(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* SCHED_FIFO for the calling thread, where allowed: senders and receivers
 * of the priority run carry their flow's priority on the CPU as on the
 * wire, in the raw runs as in the flow-control runs. */
static bool have_fifo;
static int rx_priority;
static uint32_t flow_chunk = 64u << 10; /* the flow-control links' (--chunk) */

static void fifo_self(int priority)
{
	struct sched_param sp = {.sched_priority = priority};
	if (have_fifo)
		pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
}


static void die(const char *what, int err)
{
	fprintf(stderr, "rtaccel-net-bench: %s: %s\n", what, strerror(-err));
	exit(1);
}

static void fresh_address(char *out, size_t n)
{
	if (bench_ns_active() && strcmp(transport, "tcp") == 0)
		snprintf(out, n, "tcp:" BENCH_NS_B_ADDR ":0");
	else if (strcmp(transport, "shm") == 0)
		snprintf(out, n, "shm:bench-%d-%d", (int)getpid(), serial++);
	else if (strcmp(transport, "rdma") == 0)
		snprintf(out, n, "rdma:%s:0", rdma_host());
	else
		snprintf(out, n, "tcp:127.0.0.1:0");
}

static const char *allowed(void)
{
	static char uid[32];
	if (strcmp(transport, "shm") == 0) {
		snprintf(uid, sizeof(uid), "uid:%u", (unsigned)getuid());
		return uid;
	}
	if (strcmp(transport, "rdma") == 0) {
		const char *peer = getenv("RTACCEL_RDMA_PEER");
		return peer && *peer ? peer : rdma_host();
	}
	return bench_ns_active() ? BENCH_NS_A_ADDR : "127.0.0.1";
}

/* ---- raw transport links ---- */

struct raw_pair {
	struct net_link tx, rx;
};

/* A raw listener in the receiving namespace that accepts one peer, in a
 * thread, into OUT; connect to .address, then call raw_accept_finish. */
struct raw_accepting {
	struct net_listener l;
	struct net_link *out;
	int err;
	pthread_t t;
	char address[128];
};

static void *raw_accept_one(void *arg)
{
	struct raw_accepting *r = arg;
	pin_self(receiver_cpu);
	r->err = net_accept(&r->l, 10 * SEC, r->out, NULL, 0);
	return NULL;
}

static void raw_accept_start(struct raw_accepting *r, const struct net_limits *limits,
			     struct net_link *out)
{
	char want[128];
	fresh_address(want, sizeof(want));
	static char allow_buf[64];
	snprintf(allow_buf, sizeof(allow_buf), "%s", allowed());
	struct net_allow allow = {.peers = {allow_buf}, .count = 1};
	bench_enter_ns(bench_ns_b);
	int err = net_listen(want, &allow, "bench", limits, &r->l);
	bench_leave_ns();
	if (err)
		die("listen", err);
	net_listener_address(&r->l, want, r->address, sizeof(r->address));
	r->out = out;
	pthread_create(&r->t, NULL, raw_accept_one, r);
}

/* CONNECT_ERR: the connecting side's result. */
static void raw_accept_finish(struct raw_accepting *r, int connect_err)
{
	pthread_join(r->t, NULL);
	if (connect_err || r->err)
		die("connect", connect_err ? connect_err : r->err);
	net_listener_close(&r->l);
}

/* A raw link with the socket buffers (tcp) or ring (shm) the flow-control
 * link gets by default, or with the kernel's and the transport's own
 * (UNBOUNDED). */
static void raw_connect_pair(struct raw_pair *p, uint32_t max_chunk, bool unbounded)
{
	struct net_limits limits;
	net_limits_defaults(&limits);
	limits.frame.max_chunk = max_chunk;
	if (!unbounded)
		limits.window = 2 * flow_chunk; /* as the flow-control link has it */
	struct raw_accepting r;
	raw_accept_start(&r, &limits, &p->rx);
	bench_enter_ns(bench_ns_a);
	int err = net_connect(r.address, "bench", &limits, 10 * SEC, &p->tx);
	bench_leave_ns();
	raw_accept_finish(&r, err);
}

/* ---- flow-control links ---- */

struct flow_accept {
	rtaccel_net_listener_t *l;
	rtaccel_net_link_t *link;
	int err;
};

static void *flow_accept_one(void *arg)
{
	struct flow_accept *a = arg;
	pin_self(receiver_cpu); /* the link's receive thread inherits it */
	a->err = rtaccel_net_accept(a->l, 10 * SEC, &a->link, NULL, 0);
	return NULL;
}

static void flow_connect_pair(rtaccel_net_link_t **tx, rtaccel_net_link_t **rx)
{
	char want[128], address[128];
	fresh_address(want, sizeof(want));
	const char *allow[] = {allowed()};
	struct flow_accept a;
	struct rtaccel_net_options o;
	rtaccel_net_options_default(&o);
	o.rx_priority = rx_priority;
	o.chunk = flow_chunk;
	bench_enter_ns(bench_ns_b);
	int err = rtaccel_net_listen(want, allow, 1, "bench", &o, &a.l);
	bench_leave_ns();
	if (err)
		die("listen", err);
	rtaccel_net_listener_address(a.l, address, sizeof(address));
	pthread_t t;
	pthread_create(&t, NULL, flow_accept_one, &a);
	bench_enter_ns(bench_ns_a);
	err = rtaccel_net_connect(address, "bench", &o, 10 * SEC, tx);
	bench_leave_ns();
	pthread_join(t, NULL);
	if (err || a.err)
		die("connect", err ? err : a.err);
	*rx = a.link;
	rtaccel_net_listener_close(a.l);
}

static rtaccel_net_channel_t *open_channel(rtaccel_net_link_t *link, uint32_t id, uint8_t prio,
					   uint64_t max_size, uint32_t slots)
{
	struct rtaccel_net_channel_attr a = {.id = id, .priority = prio, .max_size = max_size,
					     .slots = slots};
	rtaccel_net_channel_t *ch;
	int err = rtaccel_net_channel_open(link, &a, &ch);
	if (err)
		die("channel", err);
	return ch;
}

/* ---- statistics ---- */

static double pct(uint64_t *v, int n, double p)
{
	rtaccel_sort_u64(v, (size_t)n);
	return (double)rtaccel_percentile_sorted_u64(v, (size_t)n, p / 100.0) / 1000.0;
}

static double max_us(const uint64_t *v, int n)
{
	uint64_t m = 0;
	for (int i = 0; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return (double)m / 1000.0;
}

/* The rate-limited link for tcp at *RATE, unless "none" or namespaces were
 * given; *RATE becomes "none" where there is none. False: it cannot be had
 * here, and that was said. */
static bool link_for(const char **rate)
{
	if (strcmp(transport, "tcp") != 0 || strcmp(*rate, "none") == 0 || bench_ns_active()) {
		*rate = "none";
		return true;
	}
	const char *why = bench_link_up(*rate);
	if (why)
		printf("rtaccel-net-bench: skipped: %s\n", why);
	return !why;
}

/* ---- overhead ---- */

/* The options of a run of one transfer at a time: --sizes (DEFAULTS
 * without), --rate, --samples and --chunk (into flow_chunk). Bad values
 * exit 2. */
struct transfer_options {
	uint64_t sizes[BENCH_MAX_SIZES];
	int nsizes;
	uint64_t biggest; /* of the sizes */
	const char *rate;
	int max_samples;
};

static void parse_transfer_options(int argc, char **argv, const char *defaults, struct transfer_options *o)
{
	o->nsizes = bench_parse_sizes("rtaccel-net-bench", defaults, o->sizes);
	o->rate = "none";
	o->max_samples = MAX_SAMPLES;
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
			o->nsizes = bench_parse_sizes("rtaccel-net-bench", argv[++i], o->sizes);
		else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc)
			o->rate = argv[++i];
		else if (strcmp(argv[i], "--samples") == 0 && i + 1 < argc)
			o->max_samples = atoi(argv[++i]);
		else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc) {
			size_t c;
			if (rtaccel_parse_size(argv[++i], 1024, 16u << 20, &c) < 0) {
				fprintf(stderr, "rtaccel-net-bench: --chunk takes 1K..16M\n");
				exit(2);
			}
			flow_chunk = (uint32_t)c;
		}
	if (o->max_samples < 20 || o->max_samples > MAX_SAMPLES) {
		fprintf(stderr, "rtaccel-net-bench: --samples takes 20..%d\n", MAX_SAMPLES);
		exit(2);
	}
	o->biggest = 0;
	for (int i = 0; i < o->nsizes; i++)
		o->biggest = o->sizes[i] > o->biggest ? o->sizes[i] : o->biggest;
}


struct raw_reader {
	int priority; /* SCHED_FIFO, in the priority run */
	struct net_link *link;
	uint8_t *buf;
	size_t cap;
	_Atomic uint32_t count; /* a futex word: the consumer sleeps on it */
	int err;
};

/* Reads whole transfers (any number of frames) into BUF; stamps each. */
static void *raw_read_loop(void *arg)
{
	struct raw_reader *r = arg;
	pin_self(receiver_cpu);
	if (r->priority)
		fifo_self(r->priority);
	for (;;) {
		struct net_frame f;
		int err = net_link_recv_header(r->link, &f, 30 * SEC);
		if (!err)
			err = net_link_recv_payload(r->link, f.offset + f.length <= r->cap ? r->buf + f.offset : NULL,
						    f.length, 30 * SEC);
		if (err) {
			r->err = err;
			return NULL;
		}
		if (f.flags & NET_FLAG_LAST) {
			atomic_fetch_add(&r->count, 1);
			futex_wake((uint32_t *)&r->count, 1, false);
		}
	}
}

static int raw_send(struct net_link *link, const uint8_t *data, uint64_t len, uint32_t chunk,
		    uint64_t transfer)
{
	uint64_t off = 0;
	do {
		uint32_t n = len - off < chunk ? (uint32_t)(len - off) : chunk;
		struct net_frame f = {.type = NET_FRAME_DATA, .channel = 1, .transfer = transfer,
				      .offset = off, .total = len, .length = n,
				      .flags = off + n == len ? NET_FLAG_LAST : 0};
		struct iovec iov = {(void *)(data + off), n};
		int err = net_link_send(link, &f, &iov, 1, 30 * SEC);
		if (err)
			return err;
		off += n;
	} while (off < len);
	return 0;
}

/* Sleeps until R has WANT transfers, as a consumer woken by its reader
 * thread: the same hand-over the flow-control layer makes. */
static void wait_count(struct raw_reader *r, uint64_t want)
{
	for (;;) {
		uint32_t c = atomic_load(&r->count);
		if (c >= (uint32_t)want)
			break;
		if (r->err)
			die("raw receive", r->err);
		struct timespec ts = rtaccel_deadline_in(CLOCK_MONOTONIC, 100 * MS);
		futex_wait((uint32_t *)&r->count, c, false, CLOCK_MONOTONIC, &ts);
	}
}

static int overhead(int argc, char **argv)
{
	struct transfer_options o;
	parse_transfer_options(argc, argv, "64K,128K,256K,512K,1M,2M,4M,8M,16M,32M", &o);
	if (!link_for(&o.rate))
		return 77;
	const uint64_t biggest = o.biggest;
	uint8_t *data = calloc(1, biggest);
	/* raw: the same window as the flow-control link; open: the kernel's
	 * socket buffers, what the window costs in throughput */
	struct raw_pair raw, open_raw;
	const uint32_t one_frame = (uint32_t)(biggest < (16u << 20) ? biggest : (16u << 20));
	raw_connect_pair(&raw, one_frame, false);
	raw_connect_pair(&open_raw, one_frame, true);
	struct raw_reader reader = {.link = &raw.rx, .buf = malloc(biggest), .cap = biggest};
	struct raw_reader open_reader = {.link = &open_raw.rx, .buf = malloc(biggest), .cap = biggest};
	pthread_t rt, ort;
	pthread_create(&rt, NULL, raw_read_loop, &reader);
	pthread_create(&ort, NULL, raw_read_loop, &open_reader);
	rtaccel_net_link_t *ftx, *frx;
	flow_connect_pair(&ftx, &frx);
	rtaccel_net_channel_t *tx = open_channel(ftx, 1, 10, 0, 0);
	rtaccel_net_channel_t *rx = open_channel(frx, 1, 0, biggest, 2);
	printf("{\"transport\": \"%s\", \"link_rate\": \"%s\", \"chunk\": %u, \"window\": %u, "
	       "\"sizes\": [", transport, o.rate, flow_chunk,
	       strcmp(transport, "shm") == 0 ? 4u << 20 : 2 * flow_chunk);
	uint64_t raw_n = 0, seen = 0;
	static uint64_t raw_lat[MAX_SAMPLES], flow_lat[MAX_SAMPLES], diff[MAX_SAMPLES],
		open_lat[MAX_SAMPLES];
	for (int s = 0; s < o.nsizes; s++) {
		const uint64_t size = o.sizes[s];
		int n = (int)((strcmp(o.rate, "none") ? 64ull << 20 : 1024ull << 20) / size);
		n = n < 20 ? 20 : n > o.max_samples ? o.max_samples : n;
		for (int i = 0; i < n + 2; i++) {
			/* raw: one frame of the whole transfer */
			uint64_t t0 = rtaccel_monotonic_ns();
			int err = raw_send(&raw.tx, data, size, 16u << 20, ++raw_n);
			if (err)
				die("raw send", err);
			wait_count(&reader, raw_n);
			uint64_t t1 = rtaccel_monotonic_ns(); /* when the consumer has it, as below */
			uint64_t t4 = rtaccel_monotonic_ns();
			if ((err = raw_send(&open_raw.tx, data, size, 16u << 20, raw_n)))
				die("raw send", err);
			wait_count(&open_reader, raw_n);
			uint64_t t5 = rtaccel_monotonic_ns();
			/* flow control */
			uint64_t t2 = rtaccel_monotonic_ns();
			if ((err = rtaccel_net_send(tx, data, size, 0, 30 * SEC)))
				die("send", err);
			struct rtaccel_net_msg m;
			if ((err = rtaccel_net_take(rx, &seen, 30 * SEC, &m)))
				die("take", err);
			uint64_t t3 = rtaccel_monotonic_ns();
			rtaccel_net_release(&m);
			if (i >= 2) { /* two to warm up */
				raw_lat[i - 2] = t1 - t0;
				flow_lat[i - 2] = t3 - t2;
				open_lat[i - 2] = t5 - t4;
				/* the pair's difference, offset to stay unsigned */
				diff[i - 2] = (t3 - t2) + (1ull << 40) - (t1 - t0);
			}
		}
		/* the median of the pairs' differences: a host stall hits one
		 * pair, not the whole column */
		double over = pct(diff, n, 50) - (double)(1ull << 40) / 1000.0;
		double raw50 = pct(raw_lat, n, 50), flow50 = pct(flow_lat, n, 50);
		printf("%s\n  {\"size\": %llu, \"samples\": %d, \"raw_p50_us\": %.1f, \"flow_p50_us\": %.1f, "
		       "\"overhead_us\": %.1f, \"overhead_pct\": %.2f, \"raw_p90_us\": %.1f, \"flow_p90_us\": %.1f, "
		       "\"raw_open_p50_us\": %.1f}",
		       s ? "," : "", (unsigned long long)size, n, raw50, flow50, over,
		       100.0 * over / raw50, pct(raw_lat, n, 90), pct(flow_lat, n, 90),
		       pct(open_lat, n, 50));
		fflush(stdout);
	}
	printf("\n]}\n");
	rtaccel_net_close(ftx);
	rtaccel_net_close(frx);
	net_link_shutdown(&raw.rx);
	net_link_shutdown(&open_raw.rx);
	pthread_join(rt, NULL);
	pthread_join(ort, NULL);
	net_link_close(&raw.tx);
	net_link_close(&raw.rx);
	net_link_close(&open_raw.tx);
	net_link_close(&open_raw.rx);
	return 0;
}

/* ---- zerocopy ---- */

/* MSG_ZEROCOPY against a plain send on the raw path: whether the kernel's
 * zero-copy transmission would pay for the flow-control layer's chunks
 * here. Two plain TCP connections held to the flow-control link's window
 * (the layer's socket options, set_window() in src/net/tcp.c), one with
 * SO_ZEROCOPY; each transfer goes as chunk-sized sends, and a thread reads
 * it whole and wakes the consumer, as the raw run's reader does. The
 * kernel says, for every zero-copy send, whether it copied after all
 * (SO_EE_CODE_ZEROCOPY_COPIED): it does so wherever the receiver is on
 * this host, loopback and a veth into another namespace alike. */

struct zc_reader {
	int fd;
	uint8_t *buf;
	size_t cap;
	/* the byte count at which the transfer in flight ends, set before
	 * its first byte is sent */
	_Atomic uint64_t end;
	_Atomic uint32_t count; /* transfers received; the consumer sleeps on it */
	int err;
};

static void *zc_read_loop(void *arg)
{
	struct zc_reader *r = arg;
	pin_self(receiver_cpu);
	uint64_t total = 0, ended = 0;
	for (;;) {
		ssize_t n = recv(r->fd, r->buf, r->cap, 0);
		if (n <= 0) {
			r->err = n == 0 ? -ECONNRESET : -errno;
			atomic_fetch_add(&r->count, 1);
			futex_wake((uint32_t *)&r->count, 1, false);
			return NULL;
		}
		total += (uint64_t)n;
		const uint64_t end = atomic_load(&r->end);
		if (total >= end && end > ended) {
			ended = end;
			atomic_fetch_add(&r->count, 1);
			futex_wake((uint32_t *)&r->count, 1, false);
		}
	}
}

static void zc_wait(struct zc_reader *r, uint32_t want)
{
	for (;;) {
		uint32_t c = atomic_load(&r->count);
		if (r->err)
			die("zerocopy receive", r->err);
		if (c >= want)
			return;
		struct timespec ts = rtaccel_deadline_in(CLOCK_MONOTONIC, 100 * MS);
		futex_wait((uint32_t *)&r->count, c, false, CLOCK_MONOTONIC, &ts);
	}
}

/* A TCP socket of namespace NS with the flow-control link's buffers, set
 * before listen or connect as the layer sets them (set_window() in
 * src/net/tcp.c). */
static int zc_socket(const char *ns)
{
	const int half = (int)flow_chunk, window = 2 * (int)flow_chunk;
	bench_enter_ns(ns);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bench_leave_ns();
	if (fd < 0)
		die("zerocopy socket", -errno);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &half, sizeof(half));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &window, sizeof(window));
	return fd;
}

/* A connection from the sending namespace to the receiving one (loopback
 * without namespaces): *TX and *RX. */
static void zc_connect(int *tx, int *rx)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	inet_pton(AF_INET, bench_ns_active() ? BENCH_NS_B_ADDR : "127.0.0.1", &a.sin_addr);
	int l = zc_socket(bench_ns_b);
	socklen_t len = sizeof(a);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		die("zerocopy listen", -errno);
	int c = zc_socket(bench_ns_a);
	if (connect(c, (struct sockaddr *)&a, sizeof(a)))
		die("zerocopy connect", -errno);
	int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (s < 0)
		die("zerocopy accept", -errno);
	close(l);
	const int one = 1;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*tx = c;
	*rx = s;
}

/* What the kernel has told of the zero-copy sends so far. */
struct zc_completions {
	uint32_t done;	 /* sends completed: ids 0..done-1 */
	uint64_t copied; /* of them, the ones it copied after all */
};

/* Reads FD's error queue until the sends up to id WANT-1 have completed. */
static void zc_reap(int fd, uint32_t want, struct zc_completions *z)
{
	int waits = 0;
	while (z->done < want) {
		char control[128];
		struct msghdr m = {.msg_control = control, .msg_controllen = sizeof(control)};
		if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno != EAGAIN)
				die("zerocopy completions", -errno);
			struct pollfd p = {.fd = fd, .events = 0}; /* POLLERR is always polled */
			if (poll(&p, 1, 1000) == 0 && ++waits == 10)
				die("zerocopy completions", -ETIMEDOUT);
			continue;
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
			      (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
				continue;
			const struct sock_extended_err *e = (const void *)CMSG_DATA(cm);
			if (e->ee_origin != SO_EE_ORIGIN_ZEROCOPY)
				continue;
			/* ids ee_info..ee_data, in order */
			const uint32_t n = e->ee_data - e->ee_info + 1;
			if (e->ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
				z->copied += n;
			z->done = e->ee_data + 1;
		}
	}
}

/* One transfer of LEN bytes to R in chunk-sized sends with FLAGS; *SENDS
 * counts them (the zero-copy ids). */
static void zc_send(int fd, struct zc_reader *r, const uint8_t *data, uint64_t len, int flags,
		    uint32_t *sends, struct zc_completions *z)
{
	atomic_fetch_add(&r->end, len);
	uint64_t off = 0;
	while (off < len) {
		const size_t n = len - off < flow_chunk ? (size_t)(len - off) : flow_chunk;
		ssize_t sent = send(fd, data + off, n, MSG_NOSIGNAL | flags);
		if (sent < 0) {
			if (errno == ENOBUFS && flags) { /* the completions hold the socket's option memory */
				zc_reap(fd, *sends, z);
				continue;
			}
			if (errno == EINTR)
				continue;
			die("zerocopy send", -errno);
		}
		if (flags)
			++*sends;
		off += (uint64_t)sent;
	}
}

/* How many bytes a connection takes in chunk-sized sends (zero-copy with
 * ZERO) before a send would block, its receiver reading nothing: what a
 * higher priority could find queued ahead of it. */
static uint64_t zc_accepted_unread(bool zero)
{
	int tx, rx;
	zc_connect(&tx, &rx);
	const int one = 1;
	if (zero && setsockopt(tx, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)))
		die("SO_ZEROCOPY", -errno);
	uint8_t *chunk = calloc(1, flow_chunk);
	uint64_t total = 0;
	for (;;) {
		ssize_t n = send(tx, chunk, flow_chunk, MSG_NOSIGNAL | MSG_DONTWAIT | (zero ? MSG_ZEROCOPY : 0));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == ENOBUFS))
			break;
		if (n < 0)
			die("zerocopy send", -errno);
		total += (uint64_t)n;
	}
	close(tx); /* the kernel keeps references of its own to pages it still holds */
	close(rx);
	free(chunk);
	return total;
}

static int zerocopy(int argc, char **argv)
{
	struct transfer_options o;
	parse_transfer_options(argc, argv, "64K,256K,1M,4M,32M", &o);
	if (strcmp(transport, "tcp") != 0) {
		fprintf(stderr, "rtaccel-net-bench: zerocopy is a tcp benchmark\n");
		exit(2);
	}
	if (!link_for(&o.rate))
		return 77;
	const uint64_t biggest = o.biggest;
	uint8_t *data = calloc(1, biggest);
	int plain_tx, plain_rx, zc_tx, zc_rx;
	zc_connect(&plain_tx, &plain_rx);
	zc_connect(&zc_tx, &zc_rx);
	const int one = 1;
	if (setsockopt(zc_tx, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one))) {
		printf("rtaccel-net-bench: skipped: SO_ZEROCOPY: %s\n", strerror(errno));
		return 77;
	}
	struct zc_reader plain = {.fd = plain_rx, .buf = malloc(flow_chunk), .cap = flow_chunk};
	struct zc_reader zc = {.fd = zc_rx, .buf = malloc(flow_chunk), .cap = flow_chunk};
	pthread_t pt, zt;
	pthread_create(&pt, NULL, zc_read_loop, &plain);
	pthread_create(&zt, NULL, zc_read_loop, &zc);
	const uint64_t plain_unread = zc_accepted_unread(false), zc_unread = zc_accepted_unread(true);
	printf("{\"transport\": \"tcp\", \"link_rate\": \"%s\", \"chunk\": %u, \"window\": %u, "
	       "\"send_unread_bytes\": %llu, \"zerocopy_unread_bytes\": %llu, \"sizes\": [",
	       o.rate, flow_chunk, 2 * flow_chunk, (unsigned long long)plain_unread, (unsigned long long)zc_unread);
	uint32_t rounds = 0, sends = 0;
	struct zc_completions z = {0};
	static uint64_t plain_lat[MAX_SAMPLES], zc_lat[MAX_SAMPLES], reap_lat[MAX_SAMPLES];
	for (int s = 0; s < o.nsizes; s++) {
		const uint64_t size = o.sizes[s];
		int n = (int)((strcmp(o.rate, "none") ? 64ull << 20 : 1024ull << 20) / size);
		n = n < 20 ? 20 : n > o.max_samples ? o.max_samples : n;
		const uint64_t copied_before = z.copied;
		const uint32_t sends_before = sends;
		for (int i = 0; i < n + 2; i++) {
			++rounds;
			/* in turn first, so that neither always finds the caches
			 * the other left */
			uint64_t plain_ns = 0, zc_ns = 0, reap_ns = 0;
			for (int k = 0; k < 2; k++) {
				const bool zero = (k == 0) == (i % 2 == 0);
				const uint64_t t0 = rtaccel_monotonic_ns();
				if (zero) {
					zc_send(zc_tx, &zc, data, size, MSG_ZEROCOPY, &sends, &z);
					zc_wait(&zc, rounds);
				} else {
					zc_send(plain_tx, &plain, data, size, 0, &sends, &z);
					zc_wait(&plain, rounds);
				}
				const uint64_t t1 = rtaccel_monotonic_ns();
				if (zero) {
					/* before the buffer may change, as a sender of real
					 * data must */
					zc_reap(zc_tx, sends, &z);
					reap_ns = rtaccel_monotonic_ns() - t1;
					zc_ns = t1 - t0;
				} else {
					plain_ns = t1 - t0;
				}
			}
			if (i >= 2) {
				plain_lat[i - 2] = plain_ns;
				zc_lat[i - 2] = zc_ns;
				reap_lat[i - 2] = reap_ns;
			}
		}
		const uint32_t size_sends = sends - sends_before;
		printf("%s\n  {\"size\": %llu, \"samples\": %d, \"send_p50_us\": %.1f, \"zerocopy_p50_us\": %.1f, "
		       "\"send_p90_us\": %.1f, \"zerocopy_p90_us\": %.1f, \"completions_p50_us\": %.1f, "
		       "\"zerocopy_sends\": %u, \"copied_pct\": %.1f}",
		       s ? "," : "", (unsigned long long)size, n, pct(plain_lat, n, 50), pct(zc_lat, n, 50),
		       pct(plain_lat, n, 90), pct(zc_lat, n, 90), pct(reap_lat, n, 50), size_sends,
		       size_sends ? 100.0 * (double)(z.copied - copied_before) / size_sends : 0.0);
		fflush(stdout);
	}
	printf("\n]}\n");
	shutdown(plain_rx, SHUT_RDWR);
	shutdown(zc_rx, SHUT_RDWR);
	pthread_join(pt, NULL);
	pthread_join(zt, NULL);
	close(plain_tx);
	close(plain_rx);
	close(zc_tx);
	close(zc_rx);
	return 0;
}

/* ---- priority ---- */

#define HIGH_SAMPLES 20
#define FLOWS 4 /* the high one and three below it */
#define HIGH_PRIORITY 30
#define BG_PRIORITY 10

static _Atomic bool background_on;

/* The lower-priority background flows, raw and through the flow-control
 * layer: two loops alike on purpose, each over the API it measures. */
struct bg_raw {
	int priority;
	struct net_link *link;
	const uint8_t *data;
	uint64_t size;
	pthread_t t;
};

static void *bg_raw_loop(void *arg)
{
	struct bg_raw *b = arg;
	fifo_self(b->priority);
	for (uint64_t k = 1; atomic_load(&background_on); k++)
		if (raw_send(b->link, b->data, b->size, 64u << 10, k))
			break;
	return NULL;
}

struct bg_flow {
	int priority;
	rtaccel_net_channel_t *ch;
	const uint8_t *data;
	uint64_t size;
	pthread_t t;
};

static void *bg_flow_loop(void *arg)
{
	struct bg_flow *b = arg;
	fifo_self(b->priority);
	while (atomic_load(&background_on))
		if (rtaccel_net_send(b->ch, b->data, b->size, 0, 30 * SEC))
			break;
	return NULL;
}

/* A pause of 0-3 ms between the high flow's transfers, so that they meet
 * the background flows at every phase. */
static void gap(unsigned *seed)
{
	rtaccel_sleep_ns((uint64_t)(rand_r(seed) % 3000) * 1000);
}

static void measure_raw(const uint8_t *data, uint64_t size, bool loaded, uint64_t *lat)
{
	struct raw_pair pairs[FLOWS];
	struct raw_reader readers[FLOWS];
	pthread_t rts[FLOWS];
	struct bg_raw bg[FLOWS];
	for (int f = 0; f < FLOWS; f++) {
		raw_connect_pair(&pairs[f], 64u << 10, true);
		readers[f] = (struct raw_reader){.link = &pairs[f].rx, .buf = malloc(size), .cap = size,
						 .priority = f ? BG_PRIORITY : HIGH_PRIORITY};
		pthread_create(&rts[f], NULL, raw_read_loop, &readers[f]);
	}
	atomic_store(&background_on, true);
	for (int f = 1; loaded && f < FLOWS; f++) {
		bg[f] = (struct bg_raw){.link = &pairs[f].tx, .data = data, .size = size,
					.priority = BG_PRIORITY + FLOWS - f};
		pthread_create(&bg[f].t, NULL, bg_raw_loop, &bg[f]);
	}
	unsigned seed = 1;
	for (int i = 0; i < HIGH_SAMPLES + 1; i++) {
		gap(&seed);
		uint64_t t0 = rtaccel_monotonic_ns();
		int err = raw_send(&pairs[0].tx, data, size, 64u << 10, (uint64_t)i + 1);
		if (err)
			die("raw send", err);
		wait_count(&readers[0], (uint64_t)i + 1);
		uint64_t t1 = rtaccel_monotonic_ns();
		if (i)
			lat[i - 1] = t1 - t0;
	}
	atomic_store(&background_on, false);
	for (int f = 1; loaded && f < FLOWS; f++)
		pthread_join(bg[f].t, NULL);
	for (int f = 0; f < FLOWS; f++) {
		net_link_shutdown(&pairs[f].rx);
		pthread_join(rts[f], NULL);
		net_link_close(&pairs[f].tx);
		net_link_close(&pairs[f].rx);
		free(readers[f].buf);
	}
}

static void measure_flow(const uint8_t *data, uint64_t size, bool loaded, uint64_t *lat)
{
	rtaccel_net_link_t *tx, *rx;
	flow_connect_pair(&tx, &rx);
	rtaccel_net_channel_t *txc[FLOWS], *rxc[FLOWS];
	for (int f = 0; f < FLOWS; f++) {
		txc[f] = open_channel(tx, (uint32_t)f + 1, (uint8_t)(f ? FLOWS - f : 100), 0, 0);
		rxc[f] = open_channel(rx, (uint32_t)f + 1, 0, size, 2);
	}
	struct bg_flow bg[FLOWS];
	atomic_store(&background_on, true);
	for (int f = 1; loaded && f < FLOWS; f++) {
		bg[f] = (struct bg_flow){.ch = txc[f], .data = data, .size = size,
					 .priority = BG_PRIORITY + FLOWS - f};
		pthread_create(&bg[f].t, NULL, bg_flow_loop, &bg[f]);
	}
	unsigned seed = 1;
	uint64_t seen = 0;
	for (int i = 0; i < HIGH_SAMPLES + 1; i++) {
		gap(&seed);
		uint64_t t0 = rtaccel_monotonic_ns();
		int err = rtaccel_net_send(txc[0], data, size, 0, 30 * SEC);
		if (err)
			die("send", err);
		struct rtaccel_net_msg m;
		if ((err = rtaccel_net_take(rxc[0], &seen, 30 * SEC, &m)))
			die("take", err);
		uint64_t t1 = rtaccel_monotonic_ns();
		rtaccel_net_release(&m);
		if (i)
			lat[i - 1] = t1 - t0;
	}
	atomic_store(&background_on, false);
	for (int f = 1; loaded && f < FLOWS; f++)
		pthread_join(bg[f].t, NULL);
	rtaccel_net_close(tx);
	rtaccel_net_close(rx);
}

/* Fig. 12: four flows of equal priority, each sending ROUNDS transfers in
 * turn; the share of arrivals that keep the turn order (the arrival four
 * places back came from the same flow). */
struct turn {
	int flow;
	rtaccel_net_channel_t *ch;
	struct net_link *link;
	const uint8_t *data;
	uint64_t size;
	pthread_t t;
};

static pthread_barrier_t turn_start;
#define ROUNDS 64

static _Atomic uint64_t issued;

/* Each transfer carries the order in which it was issued, across flows. */
static void *turn_flow(void *arg)
{
	struct turn *t = arg;
	uint8_t *data = malloc(t->size);
	memcpy(data, t->data, t->size);
	pthread_barrier_wait(&turn_start);
	for (int k = 0; k < ROUNDS; k++) {
		uint64_t order = atomic_fetch_add(&issued, 1);
		memcpy(data, &order, sizeof(order));
		int err = t->ch ? rtaccel_net_send(t->ch, data, t->size, 0, 30 * SEC)
				: raw_send(t->link, data, t->size, 64u << 10, (uint64_t)k + 1);
		if (err)
			die("send", err);
	}
	free(data);
	return NULL;
}

struct arrival_log {
	_Atomic int n;
	uint64_t order[FLOWS * ROUNDS]; /* issue order, in arrival order */
};

/* A frame off the wire; a transfer's first frame gives its issue order. */
static int read_frame(struct net_link *link, struct net_frame *f, uint64_t *order)
{
	static _Thread_local uint8_t buf[1u << 20];
	int err = net_link_recv_header(link, f, 30 * SEC);
	if (!err)
		err = net_link_recv_payload(link, f->length <= sizeof(buf) ? buf : NULL, f->length,
					    30 * SEC);
	if (!err && f->offset == 0 && f->length >= sizeof(*order))
		memcpy(order, buf, sizeof(*order));
	return err;
}

struct logged_reader {
	struct raw_reader r;
	struct arrival_log *log;
	int flow;
};

static void *logged_read_loop(void *arg)
{
	struct logged_reader *lr = arg;
	pin_self(receiver_cpu);
	for (int k = 0; k < ROUNDS; k++) {
		struct net_frame f;
		uint64_t order = 0;
		do {
			if (read_frame(lr->r.link, &f, &order))
				die("raw receive", -EPROTO);
		} while (!(f.flags & NET_FLAG_LAST));
		lr->log->order[atomic_fetch_add(&lr->log->n, 1)] = order;
	}
	return NULL;
}

/* The share of transfers that arrived after every transfer issued before
 * them. */
static double in_order_pct(const struct arrival_log *log)
{
	int kept = 0, n = atomic_load(&log->n);
	for (int i = 0; i < n; i++) {
		bool ok = true;
		for (int j = i + 1; j < n && ok; j++)
			ok = log->order[j] > log->order[i];
		kept += ok;
	}
	return n ? 100.0 * kept / n : 0;
}

/* Logs, as the wire delivers them, the last frames of FLOWS x ROUNDS
 * transfers arriving on one link, whatever their channel. */
static void *wire_log_loop(void *arg)
{
	struct logged_reader *lr = arg;
	pin_self(receiver_cpu);
	uint64_t order[FLOWS + 1] = {0};
	while (atomic_load(&lr->log->n) < FLOWS * ROUNDS) {
		struct net_frame f;
		uint64_t o = 0;
		if (read_frame(lr->r.link, &f, &o))
			die("receive", -EPROTO);
		uint32_t c = f.channel <= FLOWS ? f.channel : 0;
		if (f.offset == 0)
			order[c] = o;
		if (f.flags & NET_FLAG_LAST)
			lr->log->order[atomic_fetch_add(&lr->log->n, 1)] = order[c];
	}
	return NULL;
}

/* Fig. 12's order, read off the wire: raw, each flow on its own connection;
 * flow control, the flows as channels of one link. */
static double turns(const uint8_t *data, uint64_t size, bool flow)
{
	static struct arrival_log log;
	atomic_store(&log.n, 0);
	atomic_store(&issued, 0);
	struct turn t[FLOWS];
	pthread_barrier_init(&turn_start, NULL, FLOWS);
	if (flow) {
		struct raw_pair wire; /* its tx end is not used: the flow link sends */
		struct net_limits limits;
		net_limits_defaults(&limits);
		struct raw_accepting r;
		raw_accept_start(&r, &limits, &wire.rx);
		rtaccel_net_link_t *tx;
		bench_enter_ns(bench_ns_a);
		int err = rtaccel_net_connect(r.address, "bench", NULL, 10 * SEC, &tx);
		bench_leave_ns();
		raw_accept_finish(&r, err);
		struct logged_reader lr = {.r = {.link = &wire.rx}, .log = &log};
		pthread_t rt;
		pthread_create(&rt, NULL, wire_log_loop, &lr);
		for (int f = 0; f < FLOWS; f++) {
			t[f] = (struct turn){.flow = f, .ch = open_channel(tx, (uint32_t)f + 1, 5, 0, 0),
					     .data = data, .size = size};
			pthread_create(&t[f].t, NULL, turn_flow, &t[f]);
		}
		for (int f = 0; f < FLOWS; f++)
			pthread_join(t[f].t, NULL);
		pthread_join(rt, NULL);
		rtaccel_net_close(tx);
		net_link_close(&wire.rx);
	} else {
		struct raw_pair pairs[FLOWS];
		struct logged_reader readers[FLOWS];
		pthread_t rts[FLOWS];
		for (int f = 0; f < FLOWS; f++) {
			raw_connect_pair(&pairs[f], 64u << 10, true);
			readers[f] = (struct logged_reader){.r = {.link = &pairs[f].rx}, .log = &log, .flow = f};
			pthread_create(&rts[f], NULL, logged_read_loop, &readers[f]);
			t[f] = (struct turn){.flow = f, .link = &pairs[f].tx, .data = data, .size = size};
		}
		for (int f = 0; f < FLOWS; f++)
			pthread_create(&t[f].t, NULL, turn_flow, &t[f]);
		for (int f = 0; f < FLOWS; f++) {
			pthread_join(t[f].t, NULL);
			pthread_join(rts[f], NULL);
			net_link_close(&pairs[f].tx);
			net_link_close(&pairs[f].rx);
		}
	}
	pthread_barrier_destroy(&turn_start);
	return in_order_pct(&log);
}

static int priority(int argc, char **argv)
{
	uint64_t sizes[BENCH_MAX_SIZES];
	int nsizes = bench_parse_sizes("rtaccel-net-bench", "1M,2M,4M,8M,16M,32M", sizes);
	const char *rate = "1gbit";
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
			nsizes = bench_parse_sizes("rtaccel-net-bench", argv[++i], sizes);
		else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc)
			rate = argv[++i];
	if (!link_for(&rate))
		return 77;
	uint64_t biggest = 0;
	for (int i = 0; i < nsizes; i++)
		biggest = sizes[i] > biggest ? sizes[i] : biggest;
	uint8_t *data = calloc(1, biggest);
	static uint64_t lat[HIGH_SAMPLES];
	struct sched_param sp = {.sched_priority = HIGH_PRIORITY};
	have_fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
	rx_priority = have_fifo ? HIGH_PRIORITY : 0;
	/* one chunk alone: the most a high transfer waits for a lower one */
	uint64_t chunk_lat[HIGH_SAMPLES];
	measure_flow(data, 64u << 10, false, chunk_lat);
	double chunk_us = pct(chunk_lat, HIGH_SAMPLES, 50);
	printf("{\"transport\": \"%s\", \"chunk\": %u, \"chunk_us\": %.1f, \"samples\": %d, "
	       "\"sched_fifo\": %s, \"link_rate\": \"%s\", \"sizes\": [",
	       transport, 64u << 10, chunk_us, HIGH_SAMPLES, have_fifo ? "true" : "false", rate);
	for (int s = 0; s < nsizes; s++) {
		measure_flow(data, sizes[s], false, lat);
		double solo = pct(lat, HIGH_SAMPLES, 50);
		measure_raw(data, sizes[s], true, lat);
		double raw_max = max_us(lat, HIGH_SAMPLES), raw_min = pct(lat, HIGH_SAMPLES, 0),
		       raw50 = pct(lat, HIGH_SAMPLES, 50);
		measure_flow(data, sizes[s], true, lat);
		double flow_max = max_us(lat, HIGH_SAMPLES), flow_min = pct(lat, HIGH_SAMPLES, 0),
		       flow50 = pct(lat, HIGH_SAMPLES, 50);
		printf("%s\n  {\"size\": %llu, \"solo_us\": %.1f, \"chunk_us\": %.1f, "
		       "\"raw_min_us\": %.1f, \"raw_p50_us\": %.1f, \"raw_max_us\": %.1f, "
		       "\"flow_min_us\": %.1f, \"flow_p50_us\": %.1f, \"flow_max_us\": %.1f}",
		       s ? "," : "", (unsigned long long)sizes[s], solo, chunk_us, raw_min, raw50,
		       raw_max, flow_min, flow50, flow_max);
		fflush(stdout);
	}
	struct sched_param other = {0};
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &other); /* the flows are equals now */
	rx_priority = 0;
	double raw_turns = turns(data, 256u << 10, false), flow_turns = turns(data, 256u << 10, true);
	printf("\n], \"equal_priority\": {\"flows\": %d, \"transfers_each\": %d, \"size\": %u, "
	       "\"raw_in_order_pct\": %.1f, \"flow_in_order_pct\": %.1f}}\n",
	       FLOWS, ROUNDS, 256u << 10, raw_turns, flow_turns);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: rtaccel-net-bench overhead|priority|zerocopy [--transport tcp|shm|rdma] "
			"[--sizes LIST] [--rate RATE|none] [--samples N] [--chunk BYTES]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc) {
			transport = argv[++i];
			if (strcmp(transport, "tcp") && strcmp(transport, "shm") && strcmp(transport, "rdma"))
				return usage();
		} else if ((strcmp(argv[i], "--sizes") == 0 || strcmp(argv[i], "--rate") == 0 ||
			    strcmp(argv[i], "--samples") == 0 || strcmp(argv[i], "--chunk") == 0) &&
			   i + 1 < argc) {
			i++;
		} else {
			return usage();
		}
	}
	/* The first two CPUs it may use (its affinity, narrowed by taskset or
	 * a cpuset); one alone serves both. */
	cpu_set_t usable;
	if (sched_getaffinity(0, sizeof(usable), &usable) == 0) {
		bool first = true;
		for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
			if (!CPU_ISSET(cpu, &usable))
				continue;
			receiver_cpu = cpu;
			if (!first)
				break;
			sender_cpu = cpu;
			first = false;
		}
	}
	bench_ns_given();
	pin_self(sender_cpu);
	if (strcmp(transport, "rdma") == 0) {
		rtaccel_net_listener_t *l;
		char want[128];
		fresh_address(want, sizeof(want));
		const char *allow[] = {allowed()};
		bench_enter_ns(bench_ns_b);
		int err = rtaccel_net_listen(want, allow, 1, "probe", NULL, &l);
		bench_leave_ns();
		if (err) {
			printf("rtaccel-net-bench: skipped: no RDMA here (%s: %s)\n", want, strerror(-err));
			return 77;
		}
		rtaccel_net_listener_close(l);
	}
	if (strcmp(argv[1], "overhead") == 0)
		return overhead(argc - 2, argv + 2);
	if (strcmp(argv[1], "priority") == 0)
		return priority(argc - 2, argv + 2);
	if (strcmp(argv[1], "zerocopy") == 0)
		return zerocopy(argc - 2, argv + 2);
	return usage();
}
