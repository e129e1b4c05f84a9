/* The net frame codec: every field survives encode and decode, and the
 * decoder refuses each kind of malformed header with its reason. */
#include "net/frame.h"
#include "test_util.h"

static const struct net_frame_limits limits = {.max_chunk = 1 << 20, .max_transfer = 1ull << 32};

static struct net_frame data_frame(void)
{
	struct net_frame f = {.type = NET_FRAME_DATA, .flags = NET_FLAG_ACK, .priority = 7,
			      .channel = 0xdeadbeef, .transfer = 1ull << 40, .offset = 65536,
			      .total = 3 * 65536, .length = 65536, .stamp_ns = 0x0123456789abcdefull};
	return f;
}

static const char *decode_why(const uint8_t *h)
{
	struct net_frame f;
	const char *why = NULL;
	return net_frame_decode(h, &limits, &f, &why) == 0 ? NULL : why;
}

static void expect_refused(struct net_frame f, const char *reason)
{
	uint8_t h[NET_FRAME_HEADER];
	net_frame_encode(&f, h);
	const char *why = decode_why(h);
	if (!why || strcmp(why, reason) != 0) {
		fprintf(stderr, "expected '%s', got '%s'\n", reason, why ? why : "accepted");
		exit(T_FAIL);
	}
}

int main(void)
{
	uint8_t h[NET_FRAME_HEADER];
	struct net_frame f = data_frame(), g;
	net_frame_encode(&f, h);
	CHECK_EQ(memcmp(h, "RNET", 4), 0);
	CHECK_EQ(net_frame_decode(h, &limits, &g, NULL), 0);
	CHECK(f.type == g.type && f.flags == g.flags && f.priority == g.priority &&
	      f.channel == g.channel && f.transfer == g.transfer && f.offset == g.offset &&
	      f.total == g.total && f.length == g.length && f.stamp_ns == g.stamp_ns);

	struct net_frame last = data_frame();
	last.offset = 2 * 65536;
	last.flags |= NET_FLAG_LAST;
	net_frame_encode(&last, h);
	CHECK(decode_why(h) == NULL);

	struct net_frame empty = {.type = NET_FRAME_DATA, .flags = NET_FLAG_LAST, .transfer = 1};
	net_frame_encode(&empty, h);
	CHECK(decode_why(h) == NULL); /* an empty transfer is one empty last chunk */

	struct net_frame bad = data_frame();
	bad.flags |= 0x80;
	expect_refused(bad, "unknown flags");
	bad = data_frame();
	bad.type = 9;
	expect_refused(bad, "unknown frame type");
	bad = data_frame();
	bad.transfer = 0;
	expect_refused(bad, "data frame of transfer 0");
	bad = data_frame();
	bad.total = limits.max_transfer + 1;
	expect_refused(bad, "transfer larger than the receiver accepts");
	bad = data_frame();
	bad.length = limits.max_chunk + 1;
	bad.total = 4ull << 20;
	expect_refused(bad, "chunk larger than the receiver accepts");
	bad = data_frame();
	bad.offset = UINT64_MAX - 10; /* offset + length would wrap */
	expect_refused(bad, "chunk outside its transfer");
	bad = data_frame();
	bad.offset = 2 * 65536; /* the last chunk without the flag */
	expect_refused(bad, "last-chunk flag disagrees with the offsets");
	bad = data_frame();
	bad.length = 0;
	expect_refused(bad, "empty chunk of a non-empty transfer");
	bad = (struct net_frame){.type = NET_FRAME_ACK};
	expect_refused(bad, "malformed ack");
	bad = (struct net_frame){.type = NET_FRAME_BYE, .length = 1};
	expect_refused(bad, "malformed bye");
	bad = (struct net_frame){.type = NET_FRAME_HELLO, .length = 300, .total = 300};
	expect_refused(bad, "malformed hello");

	f = data_frame();
	net_frame_encode(&f, h);
	h[0] ^= 1;
	CHECK(strcmp(decode_why(h), "not an rtaccel frame (bad magic)") == 0);
	h[0] ^= 1;
	h[4] = 2;
	CHECK(strcmp(decode_why(h), "frame of another protocol version") == 0);
	h[4] = 1;
	h[60] = 1;
	CHECK(strcmp(decode_why(h), "reserved bytes are not zero") == 0);
	return T_PASS;
}
