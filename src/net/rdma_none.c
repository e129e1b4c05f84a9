/* The RDMA transport where rtaccel was built without rdma-core: every entry
 * says so, as -ENOSYS, and nothing else changes. */
#include "net/transport.h"

#include <errno.h>

int net_rdma_listen(const char *address, const struct net_allow *allow, const char *name,
		    const struct net_limits *limits, struct net_listener *out)
{
	(void)address, (void)allow, (void)name, (void)limits;
	out->fd = -1;
	out->kind = 0;
	return -ENOSYS;
}

int net_rdma_accept(struct net_listener *l, uint64_t timeout_ns, struct net_link *out,
		    char *refused, size_t refused_len)
{
	(void)l, (void)timeout_ns, (void)out, (void)refused, (void)refused_len;
	return -ENOSYS;
}

int net_rdma_connect(const char *address, const char *name, const struct net_limits *limits,
		     uint64_t timeout_ns, struct net_link *out)
{
	(void)address, (void)name, (void)limits, (void)timeout_ns;
	out->fd = -1;
	out->kind = 0;
	return -ENOSYS;
}

int net_rdma_port(const struct net_listener *l) { (void)l; return -ENOSYS; }
int net_rdma_write(struct net_link *link, struct iovec *iov, int iovcnt, uint64_t deadline)
{
	(void)link, (void)iov, (void)iovcnt, (void)deadline;
	return -ENOSYS;
}
int net_rdma_read(struct net_link *link, void *buf, size_t len, uint64_t deadline)
{
	(void)link, (void)buf, (void)len, (void)deadline;
	return -ENOSYS;
}
void net_rdma_shutdown(struct net_link *link) { (void)link; }
int net_rdma_register(struct net_link *link, const void *buf, size_t len)
{
	(void)link, (void)buf, (void)len;
	return -ENOSYS;
}
int net_rdma_drain(struct net_link *link, uint64_t deadline)
{
	(void)link, (void)deadline;
	return -ENOSYS;
}
uint64_t net_rdma_zero_copy_sends(const struct net_link *link) { (void)link; return 0; }
void net_rdma_close(struct net_link *link) { (void)link; }
void net_rdma_listener_close(struct net_listener *l) { (void)l; }
