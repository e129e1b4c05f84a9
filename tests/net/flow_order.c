/* The flow-control layer's order on the wire, checked frame by frame: a
 * receiver that reads the transport directly logs every frame, and pauses
 * so that the sender's side fills up and the test can line up waiting
 * transfers in a known order before letting them go.
 *
 *   - a higher-priority transfer goes out after at most the one chunk of a
 *     lower-priority transfer that was on the wire when it arrived;
 *   - transfers of equal priority go whole, in the order they arrived;
 *   - without chunking (one chunk per transfer) the same high-priority
 *     transfer waits for all of the lower one: the case flow control fixes.
 *
 * usage: net_flow_order tcp|shm|rdma (RTACCEL_RDMA_ADDR, as net_flow_link) */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "net/flow.h"
#include "net/transport.h"
#include "net_test.h"

#define SEC 1000000000ull
#define LOG_MAX 8192

static const char *transport;

static char address[128];

struct logged {
	uint32_t channel;
	uint64_t transfer, offset;
	uint32_t length;
};

static struct {
	struct net_listener listener;
	struct logged log[LOG_MAX];
	int n;
	int pause_after; /* frames read before waiting on resume */
	sem_t resume;
	uint64_t expect_bytes; /* stop after this much payload */
	uint8_t *sink;
} rx;

static void *receiver(void *arg)
{
	(void)arg;
	struct net_link link;
	char refused[128];
	CHECK_EQ(net_accept(&rx.listener, 10 * SEC, &link, refused, sizeof(refused)), 0);
	uint64_t got = 0;
	while (got < rx.expect_bytes) {
		if (rx.n == rx.pause_after)
			sem_wait(&rx.resume);
		struct net_frame f;
		CHECK_EQ(net_link_recv(&link, &f, rx.sink, 16u << 20, 20 * SEC), 0);
		CHECK(rx.n < LOG_MAX);
		rx.log[rx.n++] = (struct logged){f.channel, f.transfer, f.offset, f.length};
		got += f.length;
	}
	net_link_close(&link);
	return NULL;
}

static void start_receiver(pthread_t *t, int pause_after, uint64_t expect_bytes,
			   uint32_t max_chunk)
{
	struct net_limits limits;
	net_limits_defaults(&limits);
	limits.frame.max_chunk = max_chunk;
	limits.window = 1u << 16; /* shm: a ring of 64 KiB */
	static char uid[32]; /* the listener keeps the pointer */
	snprintf(uid, sizeof(uid), "uid:%u", (unsigned)getuid());
	const bool rdma = strcmp(transport, "rdma") == 0;
	struct net_allow allow = {.peers = {strcmp(transport, "shm") == 0 ? uid
					    : rdma			 ? rdma_addr()
									 : "127.0.0.1"},
				  .count = 1};
	char want[80];
	if (strcmp(transport, "shm") == 0)
		snprintf(want, sizeof(want), "shm:order-%d", (int)getpid());
	else
		snprintf(want, sizeof(want), "%s:%s:0", transport, rdma ? rdma_addr() : "127.0.0.1");
	CHECK_EQ(net_listen(want, &allow, "logger", &limits, &rx.listener), 0);
	CHECK_EQ(net_listener_address(&rx.listener, want, address, sizeof(address)), 0);
	rx.n = 0;
	rx.pause_after = pause_after;
	rx.expect_bytes = expect_bytes;
	sem_init(&rx.resume, 0, 0);
	CHECK_EQ(pthread_create(t, NULL, receiver, NULL), 0);
}

struct sender {
	rtaccel_net_channel_t *ch;
	size_t len;
	int count;
	pthread_t thread;
	volatile int done;
};

static uint8_t *payload;

static void *send_loop(void *arg)
{
	struct sender *s = arg;
	for (int i = 0; i < s->count; i++)
		CHECK_EQ(rtaccel_net_send(s->ch, payload, s->len, 0, 30 * SEC), 0);
	s->done = 1;
	return NULL;
}

static void start_sender(struct sender *s, rtaccel_net_link_t *link, uint32_t id, uint8_t prio,
			 size_t len, int count)
{
	struct rtaccel_net_channel_attr a = {.id = id, .priority = prio};
	CHECK_EQ(rtaccel_net_channel_open(link, &a, &s->ch), 0);
	s->len = len;
	s->count = count;
	s->done = 0;
	CHECK_EQ(pthread_create(&s->thread, NULL, send_loop, s), 0);
}

/* Until N senders wait for the token. */
static void until_waiting(rtaccel_net_link_t *link, int n)
{
	for (int i = 0; net_flow_waiting(link) != n; i++) {
		CHECK(i < 10000);
		sleep_ns(1000000);
	}
}

/* Until the sender of CH stops making progress: it is stuck writing. */
static uint64_t until_stuck(rtaccel_net_channel_t *ch)
{
	struct rtaccel_net_stats a, b;
	rtaccel_net_channel_stats(ch, &a);
	for (int i = 0;; i++) {
		CHECK(i < 200);
		sleep_ns(50000000);
		rtaccel_net_channel_stats(ch, &b);
		if (b.chunks_sent == a.chunks_sent && i > 0)
			return b.chunks_sent;
		a = b;
	}
}

static rtaccel_net_link_t *connect_with_chunk(uint32_t chunk)
{
	struct rtaccel_net_options o;
	rtaccel_net_options_default(&o);
	o.chunk = chunk;
	o.window = 1u << 16;
	rtaccel_net_link_t *link;
	CHECK_EQ(rtaccel_net_connect(address, "sender", &o, 5 * SEC, &link), 0);
	return link;
}

static int first_frame_of(uint32_t channel)
{
	for (int i = 0; i < rx.n; i++)
		if (rx.log[i].channel == channel)
			return i;
	return -1;
}

static uint64_t bytes_before(int index, uint32_t channel)
{
	uint64_t b = 0;
	for (int i = 0; i < index; i++)
		if (rx.log[i].channel == channel)
			b += rx.log[i].length;
	return b;
}

/* Larger than any transport can take in without the receiver reading
 * (rdma: 16 receive slots of 128 KiB; tcp: the socket buffers, which do
 * not grow while the receiver reads nothing), so that the low sender is
 * stuck mid-transfer, not done. */
#define LOW_SIZE (8u << 20)
#define HIGH_SIZE (256u << 10)

/* Returns the bytes of the low-priority transfer that went out between the
 * high-priority one arriving and its first frame. */
static uint64_t high_behind_low(uint32_t chunk)
{
	pthread_t t;
	start_receiver(&t, chunk < LOW_SIZE ? 4 : 0, LOW_SIZE + HIGH_SIZE, 16u << 20);
	rtaccel_net_link_t *link = connect_with_chunk(chunk);
	struct sender low, high;
	start_sender(&low, link, 1, 10, LOW_SIZE, 1);
	until_stuck(low.ch);
	/* stuck, not finished: the transport could not take it all in */
	CHECK(!low.done);
	start_sender(&high, link, 2, 200, HIGH_SIZE, 1);
	until_waiting(link, 1);
	/* the high transfer waits now: the low one has finished STUCK chunks
	 * and is writing, or about to check, the next (a slow host may have
	 * let it go on since until_stuck) */
	struct rtaccel_net_stats st;
	rtaccel_net_channel_stats(low.ch, &st);
	const uint64_t stuck = st.chunks_sent;
	sem_post(&rx.resume);
	pthread_join(high.thread, NULL);
	pthread_join(low.thread, NULL);
	pthread_join(t, NULL);
	int h = first_frame_of(2);
	CHECK(h > 0);
	/* the frames of the high transfer are contiguous */
	for (int i = h; i < h + (int)(HIGH_SIZE / (chunk < HIGH_SIZE ? chunk : HIGH_SIZE)); i++)
		CHECK_EQ(rx.log[i].channel, 2);
	uint64_t before_arrival = stuck * chunk;
	uint64_t late = bytes_before(h, 1) - (before_arrival < LOW_SIZE ? before_arrival : LOW_SIZE);
	rtaccel_net_channel_stats(low.ch, &st);
	printf("%s chunk %u KiB: the high transfer arrived after %llu chunks of the low one, "
	       "went out after %llu more bytes of it (%llu preemptions)\n",
	       transport, chunk >> 10, (unsigned long long)stuck, (unsigned long long)late,
	       (unsigned long long)st.preempted);
	rtaccel_net_close(link);
	net_listener_close(&rx.listener);
	return late;
}

static void higher_priority_waits_at_most_one_chunk(void)
{
	const uint32_t chunk = 64u << 10;
	uint64_t late = high_behind_low(chunk);
	CHECK(late <= chunk);
	/* one chunk per transfer: it waits for what is left of the whole */
	uint64_t unchunked = high_behind_low(LOW_SIZE);
	CHECK(unchunked > 8 * chunk);
}

static void equals_go_whole_in_arrival_order(void)
{
	const uint32_t chunk = 64u << 10;
	const size_t each = 4 * chunk;
	pthread_t t;
	start_receiver(&t, 4, 4 * each + LOW_SIZE + each, chunk);
	rtaccel_net_link_t *link = connect_with_chunk(chunk);
	struct sender first, eq[4], high;
	start_sender(&first, link, 10, 50, LOW_SIZE, 1);
	until_stuck(first.ch);
	for (int i = 0; i < 4; i++) {
		start_sender(&eq[i], link, 11 + (uint32_t)i, 50, each, 1);
		until_waiting(link, i + 1);
	}
	start_sender(&high, link, 20, 90, each, 1); /* last in, first out */
	until_waiting(link, 5);
	sem_post(&rx.resume);
	pthread_join(high.thread, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(eq[i].thread, NULL);
	pthread_join(first.thread, NULL);
	pthread_join(t, NULL);
	/* the expected channel order after the high one: the first transfer
	 * ends, then the four in the order they came, each whole */
	int h = first_frame_of(20);
	for (int i = h; i < h + 4; i++)
		CHECK_EQ(rx.log[i].channel, 20);
	int i = h + 4;
	while (i < rx.n && rx.log[i].channel == 10)
		i++;
	CHECK_EQ(bytes_before(rx.n, 10), LOW_SIZE);
	for (int k = 0; k < 4; k++)
		for (int c = 0; c < 4; c++, i++) {
			CHECK(i < rx.n);
			CHECK_EQ(rx.log[i].channel, 11 + k);
			CHECK_EQ(rx.log[i].offset, (uint64_t)c * chunk);
		}
	CHECK_EQ(i, rx.n);
	printf("%s: 4 transfers of equal priority went whole, in arrival order, after the "
	       "transfer ahead of them; the higher one went first\n",
	       transport);
	rtaccel_net_close(link);
	net_listener_close(&rx.listener);
}

int main(int argc, char **argv)
{
	transport = transport_of(argc, argv);
	watchdog(120);
	payload = calloc(1, LOW_SIZE);
	rx.sink = malloc(16u << 20);
	CHECK(payload && rx.sink);
	higher_priority_waits_at_most_one_chunk();
	equals_go_whole_in_arrival_order();
	return T_PASS;
}
