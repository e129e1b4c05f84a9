/* The RDMA transport where rtaccel was built without rdma-core: listen and
 * connect say so, as -ENOSYS, and nothing else changes. No link or listener
 * ever exists, so the other operations are never called. */
#include "net/rdma.h"
#include "net/transport.h"

#include <errno.h>

static int none_listen(struct net_listener *l, const char *address)
{
	(void)l, (void)address;
	return -ENOSYS;
}

static int none_connect(struct net_link *link, const char *address, uint64_t deadline)
{
	(void)link, (void)address, (void)deadline;
	return -ENOSYS;
}

static const struct net_transport_ops none_ops = {
	.listen = none_listen,
	.connect = none_connect,
};

const struct net_transport net_rdma_transport = {.info = NET_RDMA_INFO, .ops = &none_ops};
