/* The net layer's frame: see frame.h. */
#include "net/frame.h"

#include <errno.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

void net_frame_encode(const struct net_frame *f, uint8_t out[NET_FRAME_HEADER])
{
	memset(out, 0, NET_FRAME_HEADER);
	put32(out + 0, NET_FRAME_MAGIC);
	put16(out + 4, NET_FRAME_VERSION);
	out[6] = f->type;
	out[7] = f->flags;
	put32(out + 8, f->channel);
	out[12] = f->priority;
	put64(out + 16, f->transfer);
	put64(out + 24, f->offset);
	put64(out + 32, f->total);
	put32(out + 40, f->length);
	put64(out + 48, f->stamp_ns);
}

static int refuse(const char **why, const char *what)
{
	if (why)
		*why = what;
	return -EPROTO;
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

int net_frame_decode(const uint8_t in[NET_FRAME_HEADER], const struct net_frame_limits *limits,
		     struct net_frame *f, const char **why)
{
	if (get32(in) != NET_FRAME_MAGIC)
		return refuse(why, "not an rtaccel frame (bad magic)");
	if (get16(in + 4) != NET_FRAME_VERSION)
		return refuse(why, "frame of another protocol version");
	if (!all_zero(in + 13, 3) || !all_zero(in + 44, 4) || !all_zero(in + 56, 8))
		return refuse(why, "reserved bytes are not zero");
	memset(f, 0, sizeof(*f));
	f->type = in[6];
	f->flags = in[7];
	f->channel = get32(in + 8);
	f->priority = in[12];
	f->transfer = get64(in + 16);
	f->offset = get64(in + 24);
	f->total = get64(in + 32);
	f->length = get32(in + 40);
	f->stamp_ns = get64(in + 48);
	if (f->flags & ~NET_FLAGS_KNOWN)
		return refuse(why, "unknown flags");
	switch (f->type) {
	case NET_FRAME_HELLO:
		if (f->length == 0 || f->length > 255 || f->channel || f->transfer || f->offset ||
		    f->total != f->length)
			return refuse(why, "malformed hello");
		return 0;
	case NET_FRAME_BYE:
		if (f->length || f->channel || f->transfer || f->offset || f->total)
			return refuse(why, "malformed bye");
		return 0;
	case NET_FRAME_ACK:
		if (f->length || f->offset || f->total || f->transfer == 0)
			return refuse(why, "malformed ack");
		return 0;
	case NET_FRAME_DATA:
		break;
	default:
		return refuse(why, "unknown frame type");
	}
	if (f->transfer == 0)
		return refuse(why, "data frame of transfer 0");
	if (f->total > limits->max_transfer)
		return refuse(why, "transfer larger than the receiver accepts");
	if (f->length > limits->max_chunk)
		return refuse(why, "chunk larger than the receiver accepts");
	if (f->offset > f->total || f->length > f->total - f->offset)
		return refuse(why, "chunk outside its transfer");
	if (f->length == 0 && f->total != 0)
		return refuse(why, "empty chunk of a non-empty transfer");
	const int last = f->offset + f->length == f->total;
	if (!!(f->flags & NET_FLAG_LAST) != last)
		return refuse(why, "last-chunk flag disagrees with the offsets");
	return 0;
}
