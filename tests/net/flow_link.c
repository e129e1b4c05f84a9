/* The net layer's public API from the outside, on one transport: transfers
 * arrive intact; ACK timeouts retry, then give up; stale data is dropped or
 * flagged; consumers at several rates share slots without copies; AND and
 * OR activation; a peer killed in the middle of a transfer; peers refused
 * by the allow-list; a forked child's copies of a link and a listener; a
 * listener whose process has no descriptor left; on shm, a peer that
 * corrupts the rings.
 *
 * usage: net_flow_link tcp|shm|rdma
 * rdma uses the RDMA device that serves RTACCEL_RDMA_ADDR (127.0.0.1 if
 * unset), and skips when there is none. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/un.h>

#include "net/flow.h"
#include "net/transport.h"
#include "rtaccel/net.h"
#include "net_test.h"

#define SEC 1000000000ull
#define MS 1000000ull

static const char *transport;
static bool shm, rdma;

static int serial;

/* rtaccel_net_listen on WANT, for this uid or 127.0.0.1. */
static int listen_on(const char *want, rtaccel_net_listener_t **l)
{
	char uid[32];
	snprintf(uid, sizeof(uid), "uid:%u", (unsigned)getuid());
	const char *allow[] = {shm ? uid : rdma ? rdma_addr() : "127.0.0.1"};
	return rtaccel_net_listen(want, allow, 1, "server", NULL, l);
}

/* A listener on a fresh address of the transport. */
static rtaccel_net_listener_t *listen_here(char *address, size_t n)
{
	char want[64];
	if (shm)
		snprintf(want, sizeof(want), "shm:link-%d-%d", (int)getpid(), serial++);
	else if (rdma)
		snprintf(want, sizeof(want), "rdma:%s:0", rdma_addr());
	else
		snprintf(want, sizeof(want), "tcp:127.0.0.1:0");
	rtaccel_net_listener_t *l;
	CHECK_EQ(listen_on(want, &l), 0);
	CHECK_EQ(rtaccel_net_listener_address(l, address, n), 0);
	return l;
}

struct pair {
	rtaccel_net_link_t *a, *b; /* a connected to b */
};

struct accepting {
	rtaccel_net_listener_t *l;
	rtaccel_net_link_t *link;
	int err;
};

static void *accept_one(void *arg)
{
	struct accepting *acc = arg;
	acc->err = rtaccel_net_accept(acc->l, 5 * SEC, &acc->link, NULL, 0);
	return NULL;
}

static struct pair connect_pair(void)
{
	char address[128];
	struct accepting acc = {.l = listen_here(address, sizeof(address))};
	pthread_t t;
	pthread_create(&t, NULL, accept_one, &acc);
	struct pair p;
	CHECK_EQ(rtaccel_net_connect(address, "client", NULL, 5 * SEC, &p.a), 0);
	pthread_join(t, NULL);
	CHECK_EQ(acc.err, 0);
	p.b = acc.link;
	CHECK(strcmp(rtaccel_net_peer(p.a), "server") == 0);
	CHECK(strcmp(rtaccel_net_peer(p.b), "client") == 0);
	rtaccel_net_listener_close(acc.l);
	return p;
}

static rtaccel_net_channel_t *channel(rtaccel_net_link_t *link, uint32_t id,
				      struct rtaccel_net_channel_attr a)
{
	a.id = id;
	if (!a.max_size)
		a.max_size = 4u << 20;
	rtaccel_net_channel_t *ch;
	CHECK_EQ(rtaccel_net_channel_open(link, &a, &ch), 0);
	return ch;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 12));
}

static bool same(const uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(seed * 31 + i * 7 + (i >> 12)))
			return false;
	return true;
}

static void transfers_arrive_intact(void)
{
	struct pair p = connect_pair();
	rtaccel_net_channel_t *tx = channel(p.a, 7, (struct rtaccel_net_channel_attr){.priority = 5});
	rtaccel_net_channel_t *rx = channel(p.b, 7, (struct rtaccel_net_channel_attr){0});
	static uint8_t buf[3u << 20];
	const size_t sizes[] = {0, 1, 65535, 65536, 65537, 3u << 20};
	/* from a registered region: on rdma without a copy, so the buffer is
	 * overwritten as soon as send returns, to catch a device still reading */
	CHECK_EQ(rtaccel_net_register(p.a, buf, sizeof(buf)), 0);
	uint64_t seen = 0;
	for (int i = 0; i < 6; i++) {
		fill(buf, sizes[i], (uint32_t)i);
		CHECK_EQ(rtaccel_net_send(tx, buf, sizes[i], 0, 5 * SEC), 0);
		memset(buf, 0xee, sizes[i]);
		struct rtaccel_net_msg m;
		CHECK_EQ(rtaccel_net_take(rx, &seen, 5 * SEC, &m), 0);
		CHECK_EQ(m.len, sizes[i]);
		CHECK_EQ(m.seq, i + 1);
		CHECK(same(m.data, m.len, (uint32_t)i));
		CHECK(!m.stale);
		rtaccel_net_release(&m);
	}
	if (rdma)
		CHECK(net_flow_zero_copy_sends(p.a) >= 48); /* every chunk of 3 MiB at least */
	else
		CHECK_EQ(net_flow_zero_copy_sends(p.a), 0);
	CHECK_EQ(rtaccel_net_register(p.a, NULL, 1), -EINVAL);
	struct rtaccel_net_msg m;
	CHECK_EQ(rtaccel_net_take(rx, &seen, 0, &m), -ETIMEDOUT);
	CHECK_EQ(rtaccel_net_take(rx, &seen, 20 * MS, &m), -ETIMEDOUT);
	/* too large for the receiver's slot: rejected there, and counted */
	rtaccel_net_channel_t *small_rx = channel(p.b, 8, (struct rtaccel_net_channel_attr){.max_size = 100});
	rtaccel_net_channel_t *small_tx = channel(p.a, 8, (struct rtaccel_net_channel_attr){0});
	CHECK_EQ(rtaccel_net_send(small_tx, buf, 101, 0, SEC), 0);
	CHECK_EQ(rtaccel_net_send(small_tx, buf, 100, 0, SEC), 0);
	uint64_t seen8 = 0;
	CHECK_EQ(rtaccel_net_take(small_rx, &seen8, SEC, &m), 0);
	CHECK_EQ(m.seq, 2);
	rtaccel_net_release(&m);
	struct rtaccel_net_stats st;
	rtaccel_net_channel_stats(small_rx, &st);
	CHECK_EQ(st.rejected, 1);
	CHECK_EQ(rtaccel_net_send(tx, buf, (256u << 20) + 1, 0, SEC), -EMSGSIZE);
	struct rtaccel_net_channel_attr dup = {.id = 7};
	CHECK_EQ(rtaccel_net_channel_open(p.a, &dup, &tx), -EEXIST);
	/* what a caller can get wrong is refused, not taken */
	struct rtaccel_net_channel_attr bad = {.id = 99, .max_size = (256ull << 20) + 1};
	CHECK_EQ(rtaccel_net_channel_open(p.a, &bad, &tx), -EINVAL);
	bad = (struct rtaccel_net_channel_attr){.id = 99, .stale = 7};
	CHECK_EQ(rtaccel_net_channel_open(p.a, &bad, &tx), -EINVAL);
	bad = (struct rtaccel_net_channel_attr){.id = 99, .slots = 100000};
	CHECK_EQ(rtaccel_net_channel_open(p.a, &bad, &tx), -EINVAL);
	CHECK_EQ(rtaccel_net_channel_open(p.a, NULL, &tx), -EINVAL);
	CHECK_EQ(rtaccel_net_send(small_tx, NULL, 5, 0, SEC), -EINVAL);
	struct rtaccel_net_input none = {.ch = rx};
	CHECK_EQ(rtaccel_net_wait(&none, 0, RTACCEL_NET_ANY, 0), -EINVAL);
	CHECK_EQ(rtaccel_net_wait(&none, 1, 5, 0), -EINVAL);
	rtaccel_net_close(p.a);
	/* the peer's goodbye fails the other end, and take says so */
	CHECK_EQ(rtaccel_net_take(rx, &seen, 5 * SEC, &m), -ECONNRESET);
	CHECK(strstr(rtaccel_net_error(p.b), "closed") != NULL);
	rtaccel_net_close(p.b);
	printf("%s: transfers of 0 B to 3 MiB intact, from a registered region; too large rejected "
	       "and counted\n", transport);
}

/* A receiver that does not acknowledge: the sender retries, then gives up;
 * one that acknowledges: the sender returns when it has. */
static void acks_time_out_and_retry(void)
{
	struct pair p = connect_pair();
	struct rtaccel_net_channel_attr a = {.priority = 9, .ack_timeout_ns = 30 * MS, .retries = 2};
	rtaccel_net_channel_t *tx = channel(p.a, 1, a);
	rtaccel_net_channel_t *deaf = channel(p.a, 2, a); /* nobody opened 2 on the other end */
	rtaccel_net_channel_t *rx = channel(p.b, 1, (struct rtaccel_net_channel_attr){0});
	char data[1000] = "payload";
	CHECK_EQ(rtaccel_net_send(tx, data, sizeof(data), 0, 5 * SEC), 0);
	uint64_t seen = 0;
	struct rtaccel_net_msg m;
	CHECK_EQ(rtaccel_net_take(rx, &seen, SEC, &m), 0);
	rtaccel_net_release(&m);
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	CHECK_EQ(rtaccel_net_send(deaf, data, sizeof(data), 0, 5 * SEC), -ETIMEDOUT);
	uint64_t took = now_ns(CLOCK_MONOTONIC) - t0;
	CHECK(took >= 90 * MS); /* three tries of 30 ms */
	struct rtaccel_net_stats st;
	rtaccel_net_channel_stats(deaf, &st);
	CHECK_EQ(st.retries, 2);
	CHECK_EQ(st.ack_timeouts, 1);
	CHECK_EQ(st.sent, 0);
	rtaccel_net_channel_stats(tx, &st);
	CHECK_EQ(st.sent, 1);
	CHECK_EQ(st.ack_timeouts, 0);
	/* the overall timeout ends the retries early */
	t0 = now_ns(CLOCK_MONOTONIC);
	CHECK_EQ(rtaccel_net_send(deaf, data, sizeof(data), 0, 40 * MS), -ETIMEDOUT);
	CHECK(now_ns(CLOCK_MONOTONIC) - t0 < 85 * MS + 500 * MS);
	rtaccel_net_close(p.a);
	rtaccel_net_close(p.b);
	printf("%s: ACKed send returns; unACKed one retried 2 times in %.0f ms, then -ETIMEDOUT\n",
	       transport, (double)took / 1e6);
}

static void stale_data_is_dropped_or_flagged(void)
{
	struct pair p = connect_pair();
	rtaccel_net_channel_t *drop = channel(p.a, 1, (struct rtaccel_net_channel_attr){
		.freshness_ns = 50 * MS, .stale = RTACCEL_NET_STALE_DROP});
	rtaccel_net_channel_t *flag = channel(p.a, 2, (struct rtaccel_net_channel_attr){
		.freshness_ns = 50 * MS, .stale = RTACCEL_NET_STALE_FLAG});
	rtaccel_net_channel_t *rx1 = channel(p.b, 1, (struct rtaccel_net_channel_attr){0});
	rtaccel_net_channel_t *rx2 = channel(p.b, 2, (struct rtaccel_net_channel_attr){0});
	rtaccel_net_channel_t *rx3 = channel(p.b, 3, (struct rtaccel_net_channel_attr){
		.freshness_ns = 50 * MS});
	rtaccel_net_channel_t *plain = channel(p.a, 3, (struct rtaccel_net_channel_attr){0});
	uint64_t old = now_ns(CLOCK_REALTIME) - 200 * MS;
	CHECK_EQ(rtaccel_net_send(drop, "x", 1, old, SEC), -ESTALE);
	CHECK_EQ(rtaccel_net_send(drop, "y", 1, 0, SEC), 0);
	CHECK_EQ(rtaccel_net_send(flag, "x", 1, old, SEC), 0);
	CHECK_EQ(rtaccel_net_send(plain, "x", 1, old, SEC), 0); /* the receiver's own bound */
	uint64_t s1 = 0, s2 = 0, s3 = 0;
	struct rtaccel_net_msg m;
	CHECK_EQ(rtaccel_net_take(rx1, &s1, SEC, &m), 0);
	CHECK(!m.stale && ((const char *)m.data)[0] == 'y');
	rtaccel_net_release(&m);
	CHECK_EQ(rtaccel_net_take(rx2, &s2, SEC, &m), 0);
	CHECK(m.stale);
	CHECK_EQ(m.stamp_ns, old);
	rtaccel_net_release(&m);
	CHECK_EQ(rtaccel_net_take(rx3, &s3, SEC, &m), 0);
	CHECK(m.stale);
	rtaccel_net_release(&m);
	struct rtaccel_net_stats st;
	rtaccel_net_channel_stats(drop, &st);
	CHECK_EQ(st.stale_dropped, 1);
	rtaccel_net_channel_stats(flag, &st);
	CHECK_EQ(st.stale_flagged, 1);
	rtaccel_net_channel_stats(rx3, &st);
	CHECK_EQ(st.stale_received, 1);
	rtaccel_net_close(p.a);
	rtaccel_net_close(p.b);
	printf("%s: stale data dropped (-ESTALE), flagged by the sender, flagged on arrival\n",
	       transport);
}

/* Two consumers of one channel, one at every transfer, one at a quarter of
 * the rate: both read the same slot in place; the slow one skips. */
static void consumers_at_several_rates_share_slots(void)
{
	struct pair p = connect_pair();
	rtaccel_net_channel_t *tx = channel(p.a, 1, (struct rtaccel_net_channel_attr){0});
	rtaccel_net_channel_t *rx = channel(p.b, 1, (struct rtaccel_net_channel_attr){.slots = 4});
	uint64_t fast = 0, slow = 0;
	int fast_n = 0, slow_n = 0, shared = 0;
	for (uint32_t i = 1; i <= 40; i++) {
		CHECK_EQ(rtaccel_net_send(tx, &i, sizeof(i), 0, SEC), 0);
		struct rtaccel_net_msg f;
		CHECK_EQ(rtaccel_net_take(rx, &fast, SEC, &f), 0);
		CHECK_EQ(*(const uint32_t *)f.data, i);
		fast_n++;
		if (i % 4 == 0) {
			struct rtaccel_net_msg s;
			CHECK_EQ(rtaccel_net_take(rx, &slow, 0, &s), 0);
			CHECK_EQ(*(const uint32_t *)s.data, i); /* the newest, not the next */
			shared += s.data == f.data;
			slow_n++;
			rtaccel_net_release(&s);
		}
		rtaccel_net_release(&f);
	}
	CHECK_EQ(fast_n, 40);
	CHECK_EQ(slow_n, 10);
	CHECK_EQ(shared, 10);
	/* a reader that holds a slot keeps it: the others rotate */
	struct rtaccel_net_msg held;
	CHECK_EQ(rtaccel_net_take(rx, &(uint64_t){0}, 0, &held), 0);
	for (uint32_t i = 100; i < 120; i++)
		CHECK_EQ(rtaccel_net_send(tx, &i, sizeof(i), 0, SEC), 0);
	sleep_ns(50 * MS);
	CHECK_EQ(*(const uint32_t *)held.data, 40);
	rtaccel_net_release(&held);
	struct rtaccel_net_stats st;
	rtaccel_net_channel_stats(rx, &st);
	CHECK_EQ(st.overruns, 0);
	rtaccel_net_close(p.a);
	rtaccel_net_close(p.b);
	printf("%s: consumers at 1/1 and 1/4 rate read the same slots in place\n", transport);
}

static void and_or_activation(void)
{
	struct pair p = connect_pair();
	rtaccel_net_channel_t *tx[3], *rx[3];
	for (uint32_t i = 0; i < 3; i++) {
		tx[i] = channel(p.a, i + 1, (struct rtaccel_net_channel_attr){0});
		rx[i] = channel(p.b, i + 1, (struct rtaccel_net_channel_attr){0});
	}
	struct rtaccel_net_input in[3] = {{.ch = rx[0]}, {.ch = rx[1]}, {.ch = rx[2]}};
	CHECK_EQ(rtaccel_net_wait(in, 3, RTACCEL_NET_ANY, 20 * MS), -ETIMEDOUT);
	CHECK_EQ(rtaccel_net_send(tx[1], "b", 1, 0, SEC), 0);
	CHECK_EQ(rtaccel_net_wait(in, 3, RTACCEL_NET_ANY, SEC), 0);
	CHECK(!in[0].ready && in[1].ready && !in[2].ready);
	rtaccel_net_release(&in[1].msg);
	/* ALL: not with two of three */
	CHECK_EQ(rtaccel_net_send(tx[0], "a", 1, 0, SEC), 0);
	CHECK_EQ(rtaccel_net_send(tx[1], "b", 1, 0, SEC), 0);
	sleep_ns(20 * MS);
	CHECK_EQ(rtaccel_net_wait(in, 3, RTACCEL_NET_ALL, 20 * MS), -ETIMEDOUT);
	CHECK_EQ(rtaccel_net_send(tx[2], "c", 1, 0, SEC), 0);
	CHECK_EQ(rtaccel_net_wait(in, 3, RTACCEL_NET_ALL, SEC), 0);
	for (int i = 0; i < 3; i++) {
		CHECK(in[i].ready);
		CHECK_EQ(((const char *)in[i].msg.data)[0], 'a' + i);
		rtaccel_net_release(&in[i].msg);
	}
	CHECK_EQ(rtaccel_net_wait(in, 3, RTACCEL_NET_ANY, 0), -ETIMEDOUT);
	rtaccel_net_close(p.a);
	rtaccel_net_close(p.b);
	printf("%s: OR wakes on one input, AND waits for all three\n", transport);
}

struct quiet_reader {
	rtaccel_net_channel_t *ch;
	_Atomic pid_t tid;
	long woken; /* times it went to sleep and was woken in its take */
	int err;
};

/* The calling thread's voluntary context switches so far: one each time it
 * sleeps. */
static long voluntary_switches(void)
{
	struct rusage u;
	getrusage(RUSAGE_THREAD, &u);
	return u.ru_nvcsw;
}

static void *read_quiet(void *arg)
{
	struct quiet_reader *q = arg;
	const long before = voluntary_switches();
	atomic_store(&q->tid, self_tid());
	struct rtaccel_net_msg msg;
	q->err = rtaccel_net_take(q->ch, &(uint64_t){0}, 30 * SEC, &msg);
	q->woken = voluntary_switches() - before;
	if (!q->err)
		rtaccel_net_release(&msg);
	return NULL;
}

/* A reader of one channel sleeps through the traffic of the others: the
 * gateway serves each remote client with a thread of its own, and woken by
 * every request of every client, they were a herd that grew with them. */
static void a_reader_sleeps_through_other_channels(void)
{
	enum { ARRIVALS = 200 };
	struct pair p = connect_pair();
	rtaccel_net_channel_t *tx_busy = channel(p.a, 1, (struct rtaccel_net_channel_attr){0});
	rtaccel_net_channel_t *tx_quiet = channel(p.a, 2, (struct rtaccel_net_channel_attr){0});
	rtaccel_net_channel_t *rx_busy = channel(p.b, 1, (struct rtaccel_net_channel_attr){0});
	struct quiet_reader q = {.ch = channel(p.b, 2, (struct rtaccel_net_channel_attr){0})};
	pthread_t t;
	CHECK_EQ(pthread_create(&t, NULL, read_quiet, &q), 0);
	while (!atomic_load(&q.tid))
		sleep_ns(MS);
	until_asleep(atomic_load(&q.tid));
	/* one at a time, each taken before the next is sent: every arrival
	 * finds the quiet reader asleep */
	uint64_t seen = 0;
	for (uint32_t i = 0; i < ARRIVALS; i++) {
		CHECK_EQ(rtaccel_net_send(tx_busy, &i, sizeof(i), 0, SEC), 0);
		struct rtaccel_net_msg msg;
		CHECK_EQ(rtaccel_net_take(rx_busy, &seen, 5 * SEC, &msg), 0);
		CHECK_EQ(*(const uint32_t *)msg.data, i);
		rtaccel_net_release(&msg);
	}
	CHECK_EQ(rtaccel_net_send(tx_quiet, "q", 1, 0, SEC), 0);
	pthread_join(t, NULL);
	CHECK_EQ(q.err, 0);
	/* its own arrival, and a few the kernel may add (page faults, a
	 * preemption); one per arrival on the other channel before */
	if (q.woken > ARRIVALS / 10) {
		fprintf(stderr, "%s: the quiet reader woke %ld times for %d arrivals elsewhere\n", transport,
			q.woken, ARRIVALS);
		exit(T_FAIL);
	}
	rtaccel_net_close(p.a);
	rtaccel_net_close(p.b);
	printf("%s: a reader slept through %d arrivals on another channel (woke %ld times)\n", transport,
	       ARRIVALS, q.woken);
}

static void *kill_later(void *arg)
{
	sleep_ns(100 * MS);
	kill(*(pid_t *)arg, SIGKILL);
	return NULL;
}

/* The peers of the tests below are fresh processes (fork, then exec of this
 * program): an RDMA device context a child inherits is not usable in it. */
static pid_t spawn_peer(const char *role, const char *address, const char *arg)
{
	pid_t child = test_fork();
	if (child == 0) {
		execl("/proc/self/exe", "net_flow_link", "--peer", transport, role, address, arg,
		      (char *)NULL);
		_exit(127);
	}
	return child;
}

/* A tcp peer that writes part of a frame, then stops for good, as a hung
 * node does (SIGSTOP: only SIGKILL ends it): PART "header" stops 20 bytes
 * into a frame's header, "payload" 1000 bytes into a 64 KiB payload on
 * channel 1. It says it is ready only once those bytes are written, so the
 * receiver is mid-frame whatever the scheduling. Uses the transport under
 * the flow-control layer, which never leaves a frame unfinished. */
static int partial_frame_peer(const char *part, const char *address, int ready)
{
	struct net_limits limits;
	net_limits_defaults(&limits);
	struct net_link t;
	if (net_connect(address, "child", &limits, 5 * SEC, &t))
		return T_FAIL;
	struct net_frame f = {.type = NET_FRAME_DATA, .flags = NET_FLAG_LAST, .channel = 1,
			      .transfer = 1, .total = 65536, .length = 65536};
	uint8_t frame[NET_FRAME_HEADER + 1000] = {0};
	net_frame_encode(&f, frame);
	size_t n = strcmp(part, "header") == 0 ? 20 : sizeof(frame);
	struct iovec part_of_frame = {frame, n};
	if (t.transport->ops->write(&t, &part_of_frame, 1, net_deadline_after(SEC)) ||
	    write(ready, "r", 1) != 1)
		return T_FAIL;
	raise(SIGSTOP);
	return T_FAIL; /* never continued */
}

/* A peer that forks once its link is up. Its child must find the link
 * failed, and close it without touching the parent's: the parent then sends
 * "after". The child lives on, ended by the test (or at the latest with the
 * test process), to show that its copy of the link's descriptors does not
 * keep the link open after the parent has ended. READY gets 'r', then the
 * child's pid; 'x' if the child's checks failed. */
static int forking_peer(rtaccel_net_link_t *link, rtaccel_net_channel_t *ch, int ready)
{
	const pid_t test = getppid();
	int closed[2];
	if (pipe(closed))
		return T_FAIL;
	const pid_t child = fork();
	if (child < 0)
		return T_FAIL;
	if (child == 0) {
		const bool refused = rtaccel_net_send(ch, "child", 5, 0, SEC) == -ENOTCONN &&
				     strstr(rtaccel_net_error(link), "forked") != NULL;
		rtaccel_net_close(link);
		if (write(closed[1], refused ? "c" : "x", 1) != 1)
			_exit(T_FAIL);
		for (int i = 0; i < 3000 && kill(test, 0) == 0; i++)
			sleep_ns(10 * MS);
		_exit(T_PASS);
	}
	char c = 'x';
	if (read(closed[0], &c, 1) != 1 || c != 'c' || rtaccel_net_send(ch, "after", 5, 0, 5 * SEC)) {
		fprintf(stderr, "forker: %s\n", c != 'c' ? "the child could use the link" : "the child ended the link");
		kill(child, SIGKILL);
		const ssize_t said = write(ready, "x", 1); /* the test fails on it, or on the pipe's end */
		(void)said;
		return T_FAIL;
	}
	if (write(ready, "r", 1) != 1 || write(ready, &child, sizeof(child)) != sizeof(child)) {
		kill(child, SIGKILL);
		return T_FAIL;
	}
	pause(); /* killed by the test, without a goodbye on the link */
	return T_FAIL;
}

/* net_flow_link --peer TRANSPORT ROLE ADDRESS ARG */
static int peer_main(char **argv)
{
	const char *role = argv[3], *address = argv[4];
	rtaccel_net_link_t *link;
	if (strcmp(role, "stranger") == 0) {
		if (strcmp(argv[2], "shm") == 0 && getuid() == 0 && setuid(65534) < 0)
			return T_FAIL;
		int err = rtaccel_net_connect(address, "stranger", NULL, 2 * SEC, &link);
		return err ? T_PASS : T_FAIL; /* refused before the handshake */
	}
	int ready = atoi(argv[5]);
	if (strncmp(role, "partial-", 8) == 0)
		return partial_frame_peer(role + 8, address, ready);
	if (rtaccel_net_connect(address, "child", NULL, 5 * SEC, &link))
		return T_FAIL;
	rtaccel_net_channel_t *ch;
	struct rtaccel_net_channel_attr a = {.id = 1, .max_size = 64u << 20};
	if (rtaccel_net_channel_open(link, &a, &ch))
		return T_FAIL;
	if (strcmp(role, "forker") == 0)
		return forking_peer(link, ch, ready);
	if (write(ready, "r", 1) != 1)
		return T_FAIL;
	if (strcmp(role, "sender") == 0) {
		uint8_t *big = calloc(1, 64u << 20);
		for (;;)
			rtaccel_net_send(ch, big, 64u << 20, 0, 30 * SEC);
	}
	pause();
	return T_PASS;
}

/* A peer process in ROLE ("sender": sending 64 MiB transfers for ever;
 * "receiver"), its link accepted on L and channel 1 open on both ends, once
 * it says it is ready. READY is the pipe it says so on. */
struct peer {
	pid_t pid;
	rtaccel_net_link_t *link;
	rtaccel_net_channel_t *ch;
	int ready[2];
};

static void start_peer(rtaccel_net_listener_t *l, const char *address, const char *role, struct peer *p)
{
	CHECK_EQ(pipe(p->ready), 0);
	char fd[16];
	snprintf(fd, sizeof(fd), "%d", p->ready[1]);
	p->pid = spawn_peer(role, address, fd);
	CHECK_EQ(rtaccel_net_accept(l, 5 * SEC, &p->link, NULL, 0), 0);
	struct rtaccel_net_channel_attr a = {.id = 1, .max_size = 64u << 20};
	CHECK_EQ(rtaccel_net_channel_open(p->link, &a, &p->ch), 0);
	char c = 0;
	CHECK_EQ(read(p->ready[0], &c, 1), 1);
	CHECK_EQ(c, 'r');
}

static void end_peer(struct peer *p)
{
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	rtaccel_net_close(p->link);
	close(p->ready[0]);
	close(p->ready[1]);
}

/* A sender process killed in the middle of a large transfer: the receiver's
 * take fails instead of waiting; a receiver process killed: the sender's
 * send fails instead of hanging. */
static void a_peer_killed_mid_transfer(void)
{
	char address[128];
	rtaccel_net_listener_t *l = listen_here(address, sizeof(address));
	for (int killed_sender = 1; killed_sender >= 0; killed_sender--) {
		struct peer p;
		start_peer(l, address, killed_sender ? "sender" : "receiver", &p);
		pid_t child = p.pid;
		rtaccel_net_link_t *link = p.link;
		rtaccel_net_channel_t *ch = p.ch;
		int err;
		if (killed_sender) {
			sleep_ns(100 * MS);
			kill(child, SIGKILL);
			struct rtaccel_net_msg m;
			uint64_t seen = 0;
			err = rtaccel_net_take(ch, &seen, 5 * SEC, &m);
			while (err == 0) { /* transfers that had arrived whole */
				rtaccel_net_release(&m);
				err = rtaccel_net_take(ch, &seen, 5 * SEC, &m);
			}
		} else {
			uint8_t *big = calloc(1, 64u << 20);
			pthread_t killer;
			pthread_create(&killer, NULL, kill_later, &child);
			err = 0;
			for (int i = 0; i < 100 && !err; i++)
				err = rtaccel_net_send(ch, big, 64u << 20, 0, 5 * SEC);
			pthread_join(killer, NULL);
			free(big);
		}
		/* a dead peer shows as a reset (a hang-up, a disconnect) or, on
		 * RDMA when its goodbye is lost, as sends nobody acknowledges:
		 * either way reported, never a hang */
		CHECK(err == -ECONNRESET || err == -EPIPE ||
		      (rdma && (err == -ETIMEDOUT || err == -ECONNABORTED)));
		CHECK(rtaccel_net_error(link)[0] != 0);
		printf("%s: %s killed mid-transfer: %s (%s)\n", transport,
		       killed_sender ? "sender" : "receiver", strerror(-err), rtaccel_net_error(link));
		end_peer(&p);
	}
	rtaccel_net_listener_close(l);
}

/* A process that forks while it has a link: the child's copy neither works,
 * nor ends the parent's link when the child closes it, nor keeps the link
 * open for the peer once the parent has ended (but over rdma, see net.h). */
static void a_forked_childs_copy_of_a_link_lets_go_of_it(void)
{
	char address[128];
	rtaccel_net_listener_t *l = listen_here(address, sizeof(address));
	struct peer p;
	start_peer(l, address, "forker", &p);
	pid_t child = 0;
	CHECK_EQ(read(p.ready[0], &child, sizeof(child)), (ssize_t)sizeof(child));
	struct rtaccel_net_msg m;
	uint64_t seen = 0;
	CHECK_EQ(rtaccel_net_take(p.ch, &seen, 5 * SEC, &m), 0);
	CHECK(m.len == 5 && memcmp(m.data, "after", 5) == 0);
	rtaccel_net_release(&m);
	kill(p.pid, SIGKILL);
	waitpid(p.pid, NULL, 0);
	int err = 0;
	if (!rdma) {
		err = rtaccel_net_take(p.ch, &seen, 5 * SEC, &m);
		CHECK(err == -ECONNRESET || err == -EPIPE);
	}
	const bool child_lived = kill(child, 0) == 0;
	kill(child, SIGKILL);
	CHECK(child_lived);
	printf("%s: a forked child's copy of a link: refused, closed without ending the parent's%s%s\n",
	       transport, rdma ? "" : "; the parent's end seen while the child lived: ",
	       rdma ? "" : strerror(-err));
	end_peer(&p);
	rtaccel_net_listener_close(l);
}

/* A process that forks while it listens: the child's copy of the listener
 * accepts nothing and closes without closing the parent's, and the address
 * is free once the parent has closed its listener, while the child lives
 * (but over rdma, see net.h). */
static void a_forked_childs_copy_of_a_listener_lets_go_of_it(void)
{
	char address[128];
	rtaccel_net_listener_t *l = listen_here(address, sizeof(address));
	int checked[2];
	CHECK_EQ(pipe(checked), 0);
	const pid_t child = test_fork();
	if (child == 0) {
		rtaccel_net_link_t *link;
		const bool refused = rtaccel_net_accept(l, SEC, &link, NULL, 0) == -ENOTCONN;
		rtaccel_net_listener_close(l);
		if (write(checked[1], refused ? "c" : "x", 1) != 1)
			_exit(T_FAIL);
		pause(); /* killed by the test, or with it */
		_exit(T_FAIL);
	}
	char c = 0;
	const bool said = read(checked[0], &c, 1) == 1;
	close(checked[0]);
	close(checked[1]);
	if (!said || c != 'c')
		kill(child, SIGKILL);
	CHECK(said);
	CHECK_EQ(c, 'c');

	struct accepting acc = {.l = l};
	pthread_t t;
	pthread_create(&t, NULL, accept_one, &acc);
	rtaccel_net_link_t *link = NULL;
	const int connected = rtaccel_net_connect(address, "client", NULL, 5 * SEC, &link);
	pthread_join(t, NULL);
	rtaccel_net_listener_close(l);
	int again = 0;
	if (!rdma) {
		rtaccel_net_listener_t *second = NULL;
		again = listen_on(address, &second);
		rtaccel_net_listener_close(second);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	CHECK_EQ(connected, 0);
	CHECK_EQ(acc.err, 0);
	CHECK_EQ(again, 0);
	rtaccel_net_close(link);
	rtaccel_net_close(acc.link);
	printf("%s: a forked child's copy of a listener: refused, closed without closing the parent's%s\n",
	       transport, rdma ? "" : "; its address free again once the parent closed it");
}

/* A connection to a tcp or shm listener at ADDRESS that says nothing: it
 * waits in the listener's backlog until accepted. */
static int raw_connect(const char *address)
{
	int fd;
	if (shm) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		const int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "rtaccel-net.%s", address + 4);
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		CHECK(fd >= 0);
		CHECK_EQ(connect(fd, (struct sockaddr *)&sa,
				 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)), 0);
	} else {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		sa.sin_port = htons((uint16_t)atoi(strrchr(address, ':') + 1));
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		CHECK(fd >= 0);
		CHECK_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	return fd;
}

/* A listener's process out of descriptors: accept refuses the waiting peer
 * at once (-EMFILE) and lets its connection go. It stayed in the backlog
 * before, so that every later accept failed at once, a caller's accept loop
 * spun, and the peer waited out its timeout. Once descriptors are free,
 * accept takes peers again. (Not over rdma: its connections come through
 * the connection manager's events.) */
static void a_listener_out_of_descriptors_refuses_a_peer_at_once(void)
{
	if (rdma) {
		printf("%s: out of descriptors: not checked (the connection manager accepts)\n", transport);
		return;
	}
	char address[128];
	rtaccel_net_listener_t *l = listen_here(address, sizeof(address));
	const int waiting = raw_connect(address);
	struct rlimit was;
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &was), 0);
	struct rlimit low = was;
	if (low.rlim_cur > 512)
		low.rlim_cur = 512;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
	int fillers[512];
	int n = 0;
	while (n < 512 && (fillers[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		n++;
	const bool exhausted = n < 512 && errno == EMFILE;

	rtaccel_net_link_t *link;
	const int first = rtaccel_net_accept(l, 5 * SEC, &link, NULL, 0);
	const uint64_t start = now_ns(CLOCK_MONOTONIC);
	const int second = rtaccel_net_accept(l, 200 * MS, &link, NULL, 0);
	const uint64_t waited = now_ns(CLOCK_MONOTONIC) - start;
	for (int i = 0; i < n; i++)
		close(fillers[i]);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &was), 0);
	struct pollfd p = {waiting, POLLIN, 0};
	const bool let_go = poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP));
	close(waiting);
	CHECK(exhausted);
	CHECK_EQ(first, -EMFILE);
	CHECK(let_go); /* its end of file, or reset, is there */
	CHECK_EQ(second, -ETIMEDOUT);
	CHECK(waited >= 150 * MS);

	struct peer peer;
	start_peer(l, address, "receiver", &peer);
	end_peer(&peer);
	rtaccel_net_listener_close(l);
	printf("%s: out of descriptors: a peer refused at once, the next accept waited, then accepted again\n",
	       transport);
}

/* A tcp sender that stops in the middle of a frame (a cable cut, a hung
 * node) leaves the receiver a link that is broken, not idle: take fails with
 * -ECONNABORTED, never the -ETIMEDOUT of "nothing yet" that a reader would
 * keep polling; in a header as in a payload. The peer writes the part of a
 * frame itself and stops (partial_frame_peer). (shm and rdma move whole
 * frames: a stopped peer there is a silent one.) */
static void a_peer_stopped_mid_frame(void)
{
	if (shm || rdma)
		return;
	char address[128];
	rtaccel_net_listener_t *l = listen_here(address, sizeof(address));
	static const char *const parts[] = {"partial-header", "partial-payload"};
	for (int i = 0; i < 2; i++) {
		struct peer p;
		start_peer(l, address, parts[i], &p);
		struct rtaccel_net_msg m;
		uint64_t seen = 0;
		/* the stall allowance is one second: five is a wide margin */
		int err = rtaccel_net_take(p.ch, &seen, 5 * SEC, &m);
		CHECK_EQ(err, -ECONNABORTED);
		CHECK_EQ(rtaccel_net_take(p.ch, &seen, 0, &m), -ECONNABORTED);
		CHECK(strstr(rtaccel_net_error(p.link), "in the middle of a frame") != NULL);
		printf("%s: sender stopped in a frame's %s: %s (%s)\n", transport, parts[i] + 8,
		       strerror(-err), rtaccel_net_error(p.link));
		end_peer(&p);
	}
	rtaccel_net_listener_close(l);
}

/* A peer not on the list is refused and named: by address on tcp (the
 * listener allows only 127.0.0.2), by uid on shm (the child drops to
 * nobody). */
static void strangers_are_refused_and_named(void)
{
	char want[64], address[128];
	const char *allow[1];
	if (shm) {
		snprintf(want, sizeof(want), "shm:refuse-%d", (int)getpid());
		allow[0] = "uid:4242";
	} else if (rdma) {
		snprintf(want, sizeof(want), "rdma:%s:0", rdma_addr());
		allow[0] = "192.0.2.1";
	} else {
		snprintf(want, sizeof(want), "tcp:127.0.0.1:0");
		allow[0] = "127.0.0.2";
	}
	rtaccel_net_listener_t *l;
	CHECK_EQ(rtaccel_net_listen(want, allow, 1, "server", NULL, &l), 0);
	CHECK_EQ(rtaccel_net_listener_address(l, address, sizeof(address)), 0);
	pid_t child = spawn_peer("stranger", address, "-");
	rtaccel_net_link_t *link;
	char refused[160] = "";
	CHECK_EQ(rtaccel_net_accept(l, 5 * SEC, &link, refused, sizeof(refused)), -EACCES);
	int status;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == T_PASS);
	CHECK(strstr(refused, shm ? "shm:uid:" : rdma ? "rdma:" : "tcp:127.0.0.1") != NULL);
	CHECK(strstr(refused, "not on the allow-list") != NULL);
	printf("%s: refused %s\n", transport, refused);
	CHECK_EQ(rtaccel_net_accept(l, 20 * MS, &link, refused, sizeof(refused)), -ETIMEDOUT);
	rtaccel_net_listener_close(l);
	/* bad addresses and options */
	CHECK_EQ(rtaccel_net_listen("shm:", allow, 1, "s", NULL, &l), -EINVAL);
	CHECK_EQ(rtaccel_net_listen("shm:a/b", allow, 1, "s", NULL, &l), -EINVAL);
	CHECK_EQ(rtaccel_net_listen("tcp:127.0.0.1", allow, 1, "s", NULL, &l), -EINVAL);
	CHECK_EQ(rtaccel_net_listen("udp:x:1", allow, 1, "s", NULL, &l), -EINVAL);
	struct rtaccel_net_options o;
	rtaccel_net_options_default(&o);
	o.chunk = 10;
	CHECK_EQ(rtaccel_net_connect("tcp:127.0.0.1:1", "c", &o, SEC, &link), -EINVAL);
	rtaccel_net_options_default(&o);
	o.rx_priority = 100;
	CHECK_EQ(rtaccel_net_connect("tcp:127.0.0.1:1", "c", &o, SEC, &link), -EINVAL);
	CHECK_EQ(rtaccel_net_connect(NULL, "c", NULL, SEC, &link), -EINVAL);
	CHECK_EQ(rtaccel_net_listen("tcp:127.0.0.1:0", NULL, 1, "s", NULL, &l), -EINVAL);
	CHECK_EQ(rtaccel_net_listen("tcp:127.0.0.1:0", allow, RTACCEL_NET_ALLOW_MAX + 1, "s", NULL, &l), -EINVAL);
	CHECK_EQ(rtaccel_net_connect("shm:nobody-listens-here", "c", NULL, SEC, &link), -ECONNREFUSED);
}

/* SCHED_FIFO if a thread of this process other than the caller runs at it
 * (its priority in *PRIORITY), else -1: where every other thread is at
 * normal priority, the one that is not is the receive thread raised. */
static int fifo_thread(int *priority)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", getpid());
	DIR *d = opendir(path);
	CHECK(d != NULL);
	int found = -1;
	for (struct dirent *e; (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		struct sched_param sp;
		if (tid > 0 && tid != self_tid() && sched_getscheduler(tid) == SCHED_FIFO &&
		    sched_getparam(tid, &sp) == 0) {
			*priority = sp.sched_priority;
			found = SCHED_FIFO;
		}
	}
	closedir(d);
	return found;
}

/* The receive thread's priority can be set after the link is up, as the
 * accelerator client does for a registration that spins, and reads back. */
static int the_receive_thread_priority_changes_on_a_live_link(void)
{
	struct pair p = connect_pair();
	CHECK_EQ(rtaccel_net_rx_priority(p.b), 0);
	CHECK_EQ(rtaccel_net_set_rx_priority(p.b, 100), -EINVAL);
	CHECK_EQ(rtaccel_net_set_rx_priority(p.b, -1), -EINVAL);
	int status = T_PASS;
	if (!can_use_fifo()) {
		CHECK_EQ(rtaccel_net_set_rx_priority(p.b, 30), -EPERM);
		CHECK_EQ(rtaccel_net_rx_priority(p.b), 0);
		status = test_skip_part("fifo", "the receive thread at SCHED_FIFO not checked");
	} else {
		int priority = 0;
		CHECK_EQ(fifo_thread(&priority), -1); /* nobody real-time yet */
		CHECK_EQ(rtaccel_net_set_rx_priority(p.b, 30), 0);
		CHECK_EQ(rtaccel_net_rx_priority(p.b), 30);
		CHECK_EQ(fifo_thread(&priority), SCHED_FIFO);
		CHECK_EQ(priority, 30);
		CHECK_EQ(rtaccel_net_set_rx_priority(p.b, 0), 0);
		CHECK_EQ(rtaccel_net_rx_priority(p.b), 0);
		CHECK_EQ(fifo_thread(&priority), -1);
	}
	/* the link works on */
	rtaccel_net_channel_t *tx = channel(p.a, 3, (struct rtaccel_net_channel_attr){0});
	rtaccel_net_channel_t *rx = channel(p.b, 3, (struct rtaccel_net_channel_attr){0});
	uint32_t v = 7;
	CHECK_EQ(rtaccel_net_send(tx, &v, sizeof(v), 0, SEC), 0);
	struct rtaccel_net_msg msg;
	CHECK_EQ(rtaccel_net_take(rx, &(uint64_t){0}, 5 * SEC, &msg), 0);
	CHECK_EQ(*(const uint32_t *)msg.data, 7u);
	rtaccel_net_release(&msg);
	rtaccel_net_close(p.a);
	rtaccel_net_close(p.b);
	printf("%s: the receive thread's priority set on a live link\n", transport);
	return status;
}

struct late_sender {
	rtaccel_net_channel_t *ch;
	uint32_t value;
};

static void *send_later(void *arg)
{
	struct late_sender *l = arg;
	sleep_ns(20 * MS);
	CHECK_EQ(rtaccel_net_send(l->ch, &l->value, sizeof(l->value), 0, SEC), 0);
	return NULL;
}

/* RTACCEL_NET_SPIN waits without sleeping: no voluntary context switch,
 * whether the transfer comes or the timeout does. */
static void a_spinning_wait_never_sleeps(void)
{
	struct pair p = connect_pair();
	rtaccel_net_channel_t *tx = channel(p.a, 4, (struct rtaccel_net_channel_attr){0});
	struct rtaccel_net_input in = {.ch = channel(p.b, 4, (struct rtaccel_net_channel_attr){0})};
	CHECK_EQ(rtaccel_net_wait(&in, 1, 4, 0), -EINVAL);
	long before = voluntary_switches();
	const uint64_t start = now_ns(CLOCK_MONOTONIC);
	CHECK_EQ(rtaccel_net_wait(&in, 1, RTACCEL_NET_ALL | RTACCEL_NET_SPIN, 20 * MS), -ETIMEDOUT);
	CHECK(now_ns(CLOCK_MONOTONIC) - start >= 20 * MS);
	CHECK_EQ(voluntary_switches() - before, 0);
	for (uint32_t i = 1; i <= 5; i++) {
		struct late_sender l = {.ch = tx, .value = i};
		pthread_t t;
		CHECK_EQ(pthread_create(&t, NULL, send_later, &l), 0);
		before = voluntary_switches();
		CHECK_EQ(rtaccel_net_wait(&in, 1, RTACCEL_NET_ANY | RTACCEL_NET_SPIN, 5 * SEC), 0);
		const long switches = voluntary_switches() - before;
		CHECK(in.ready);
		CHECK_EQ(*(const uint32_t *)in.msg.data, i);
		rtaccel_net_release(&in.msg);
		CHECK_EQ(switches, 0);
		pthread_join(t, NULL);
	}
	rtaccel_net_close(p.a);
	rtaccel_net_close(p.b);
	printf("%s: a spinning wait took 5 transfers and a timeout without sleeping\n", transport);
}

int main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "--peer") == 0) {
		transport = argv[2];
		return peer_main(argv);
	}
	transport = transport_of(argc, argv);
	shm = strcmp(transport, "shm") == 0;
	rdma = strcmp(transport, "rdma") == 0;
	signal(SIGPIPE, SIG_IGN);
	watchdog(120);
	transfers_arrive_intact();
	acks_time_out_and_retry();
	stale_data_is_dropped_or_flagged();
	consumers_at_several_rates_share_slots();
	and_or_activation();
	a_reader_sleeps_through_other_channels();
	a_peer_killed_mid_transfer();
	a_peer_stopped_mid_frame();
	strangers_are_refused_and_named();
	a_forked_childs_copy_of_a_link_lets_go_of_it();
	a_forked_childs_copy_of_a_listener_lets_go_of_it();
	a_listener_out_of_descriptors_refuses_a_peer_at_once();
	a_spinning_wait_never_sleeps();
	return the_receive_thread_priority_changes_on_a_live_link();
}
