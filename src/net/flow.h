/* What the net layer's tests see of a link beyond rtaccel/net.h (internal). */
#ifndef RTACCEL_NET_FLOW_H
#define RTACCEL_NET_FLOW_H

#include <stdint.h>

#include "rtaccel/net.h"

/* Senders waiting for the link's token now. */
int net_flow_waiting(const rtaccel_net_link_t *link);
/* Frames whose payload went from a registered region without a copy. */
uint64_t net_flow_zero_copy_sends(const rtaccel_net_link_t *link);

#endif
