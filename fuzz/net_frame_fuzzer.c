/* libFuzzer: the net frame decoder on any 64 bytes. A header it accepts must
 * encode back to the same bytes (the format has one spelling per frame), and
 * its fields must respect the limits. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < NET_FRAME_HEADER)
		return 0;
	const struct net_frame_limits limits = {.max_chunk = 1 << 16, .max_transfer = 1 << 24};
	struct net_frame f;
	const char *why = NULL;
	if (net_frame_decode(data, &limits, &f, &why) != 0) {
		if (!why || !*why)
			abort();
		return 0;
	}
	uint8_t again[NET_FRAME_HEADER];
	net_frame_encode(&f, again);
	if (memcmp(again, data, NET_FRAME_HEADER) != 0)
		abort();
	if (f.type == NET_FRAME_DATA &&
	    (f.length > limits.max_chunk || f.total > limits.max_transfer || f.offset + f.length > f.total))
		abort();
	return 0;
}
