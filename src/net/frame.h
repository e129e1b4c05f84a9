/* The net layer's frame (internal): what every transport carries, a fixed
 * 64-byte header and up to one chunk of payload. Little-endian on the wire.
 *
 *   0  magic "RNET"        4  version (u16), type (u8), flags (u8)
 *   8  channel (u32)      12  priority (u8), 3 bytes zero
 *  16  transfer (u64): the transfer's number on its channel, from 1
 *  24  offset (u64): where this frame's payload goes in the transfer
 *  32  total (u64): the transfer's length
 *  40  length (u32): payload bytes after the header
 *  44  zero (u32)
 *  48  stamp_ns (u64): when the transfer was produced (CLOCK_REALTIME)
 *  56  zero (u64)
 *
 * The decoder is the one place a peer's bytes are trusted or not: it checks
 * every field against the limits the receiver set, so that nothing after it
 * needs to. */
#ifndef RTACCEL_NET_FRAME_H
#define RTACCEL_NET_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define NET_FRAME_HEADER 64
#define NET_FRAME_MAGIC 0x54454e52u /* "RNET" read as a little-endian u32 */
#define NET_FRAME_VERSION 1

enum net_frame_type {
	NET_FRAME_HELLO = 1, /* first frame of a link: payload is the sender's name */
	NET_FRAME_DATA = 2,  /* a chunk of a transfer */
	NET_FRAME_ACK = 3,   /* a whole transfer arrived: channel, transfer */
	NET_FRAME_BYE = 4,   /* the peer closes the link */
};

#define NET_FLAG_LAST 0x01 /* the transfer's last chunk */
#define NET_FLAG_ACK 0x02  /* the sender wants an ACK for the transfer */
#define NET_FLAG_STALE 0x04 /* older than its channel's freshness bound when sent */
#define NET_FLAGS_KNOWN (NET_FLAG_LAST | NET_FLAG_ACK | NET_FLAG_STALE)

struct net_frame {
	uint8_t type;
	uint8_t flags;
	uint8_t priority;
	uint32_t channel;
	uint64_t transfer;
	uint64_t offset;
	uint64_t total;
	uint32_t length;
	uint64_t stamp_ns;
};

/* What a receiver accepts. */
struct net_frame_limits {
	uint32_t max_chunk;     /* payload per frame */
	uint64_t max_transfer;  /* bytes per transfer */
};

void net_frame_encode(const struct net_frame *f, uint8_t out[NET_FRAME_HEADER]);

/* 0, or -EPROTO with *why saying what was wrong (a static string). */
int net_frame_decode(const uint8_t in[NET_FRAME_HEADER], const struct net_frame_limits *limits,
		     struct net_frame *f, const char **why);

#endif
