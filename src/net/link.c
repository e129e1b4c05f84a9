/* Frames over any transport (see transport.h): the header and payload of a
 * frame go down as one write of the transport's byte stream, and come up as a
 * header the decoder checks and a payload read to wherever it belongs. */
#include "net/transport.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/accept.h"
#include "core/clock.h"

void net_limits_defaults(struct net_limits *limits)
{
	limits->frame.max_chunk = 1u << 20;
	limits->frame.max_transfer = 256ull << 20;
	limits->handshake_ns = 5ull * 1000 * 1000 * 1000;
	limits->window = 0;
}

uint64_t net_deadline_after(uint64_t timeout_ns)
{
	uint64_t now = rtaccel_monotonic_ns();
	return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

uint64_t net_read_deadline(uint64_t deadline, bool started)
{
	if (!started)
		return deadline;
	uint64_t stall = net_deadline_after(NET_STALL_NS);
	return stall > deadline ? stall : deadline;
}

int net_read_failed(int err, bool started)
{
	return err == -ETIMEDOUT && started ? -ECONNABORTED : err;
}

uint64_t net_time_left(uint64_t deadline)
{
	uint64_t now = rtaccel_monotonic_ns();
	return deadline > now ? deadline - now : 0;
}

int net_wait_fds(int fd, short events, int fd2, short events2, uint64_t deadline)
{
	for (;;) {
		uint64_t now = rtaccel_monotonic_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct timespec left = rtaccel_timespec_of(deadline - now);
		struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = fd2, .events = events2}};
		int n = ppoll(p, fd2 >= 0 ? 2 : 1, &left, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		return 0; /* ready, or an error the next call reports */
	}
}

static int stream_write(struct net_link *link, struct iovec *iov, int iovcnt, uint64_t deadline)
{
	return link->transport ? link->transport->ops->write(link, iov, iovcnt, deadline) : -EBADF;
}

static int stream_read(struct net_link *link, void *buf, size_t len, uint64_t deadline)
{
	return link->transport ? link->transport->ops->read(link, buf, len, deadline) : -EBADF;
}

int net_link_send(struct net_link *link, const struct net_frame *f, const struct iovec *iov,
		  int iovcnt, uint64_t timeout_ns)
{
	if (iovcnt < 0 || iovcnt > NET_IOV_MAX)
		return -EINVAL;
	size_t payload = 0;
	for (int i = 0; i < iovcnt; i++)
		payload += iov[i].iov_len;
	if (payload != f->length)
		return -EINVAL;
	uint8_t header[NET_FRAME_HEADER];
	net_frame_encode(f, header);
	struct iovec v[NET_IOV_MAX + 1];
	v[0] = (struct iovec){header, sizeof(header)};
	for (int i = 0; i < iovcnt; i++)
		v[i + 1] = iov[i];
	return stream_write(link, v, iovcnt + 1, net_deadline_after(timeout_ns));
}

int net_link_recv_header(struct net_link *link, struct net_frame *f, uint64_t timeout_ns)
{
	uint8_t header[NET_FRAME_HEADER];
	int err = stream_read(link, header, sizeof(header), net_deadline_after(timeout_ns));
	if (err)
		return err;
	const char *why = NULL;
	if (net_frame_decode(header, &link->limits.frame, f, &why) < 0) {
		snprintf(link->why, sizeof(link->why), "%s", why);
		return -EPROTO;
	}
	if (f->type == NET_FRAME_BYE) {
		snprintf(link->why, sizeof(link->why), "the peer closed the link");
		return -ECONNRESET;
	}
	return 0;
}

int net_link_recv_payload(struct net_link *link, void *dst, size_t len, uint64_t timeout_ns)
{
	return len ? stream_read(link, dst, len, net_deadline_after(timeout_ns)) : 0;
}

int net_link_recv(struct net_link *link, struct net_frame *f, void *buf, size_t cap,
		  uint64_t timeout_ns)
{
	const uint64_t deadline = net_deadline_after(timeout_ns);
	int err = net_link_recv_header(link, f, timeout_ns);
	if (err)
		return err;
	if (f->length > cap)
		return -EMSGSIZE;
	return net_link_recv_payload(link, buf, f->length, net_time_left(deadline));
}

/* HELLO both ways: each end learns the other's name. */
static int handshake(struct net_link *link, const char *name)
{
	const uint64_t deadline = net_deadline_after(link->limits.handshake_ns);
	size_t len = strnlen(name, NET_NAME_MAX - 1);
	struct net_frame hello = {.type = NET_FRAME_HELLO, .length = (uint32_t)len, .total = len};
	struct iovec iov = {(void *)name, len};
	int err = net_link_send(link, &hello, &iov, 1, net_time_left(deadline));
	if (err)
		return err;
	struct net_frame f;
	err = net_link_recv(link, &f, link->peer_name, sizeof(link->peer_name) - 1,
			    net_time_left(deadline));
	if (err)
		return err;
	if (f.type != NET_FRAME_HELLO) {
		snprintf(link->why, sizeof(link->why), "the peer's first frame is not a hello");
		return -EPROTO;
	}
	link->peer_name[f.length] = 0;
	return 0;
}

int net_split_address(const char *address, const char *scheme, char *host, size_t hlen, char *port,
		      size_t plen)
{
	size_t n = strlen(scheme);
	if (!address || strncmp(address, scheme, n) != 0)
		return -EINVAL;
	const char *rest = address + n, *colon = strrchr(rest, ':');
	if (!colon || colon == rest || !colon[1] || strlen(colon + 1) >= plen)
		return -EINVAL;
	const char *h = rest, *hend = colon;
	if (*h == '[') {
		if (hend[-1] != ']')
			return -EINVAL;
		h++;
		hend--;
	}
	if (hend <= h || (size_t)(hend - h) >= hlen)
		return -EINVAL;
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = 0;
	for (const char *p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

int net_resolve(const char *address, const char *scheme, bool passive, struct addrinfo **out)
{
	char host[256], port[16];
	if (net_split_address(address, scheme, host, sizeof(host), port, sizeof(port)) < 0)
		return -EINVAL;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = passive ? AI_PASSIVE : AI_ADDRCONFIG};
	int rc = getaddrinfo(host, port, &hints, out);
	if (rc == EAI_SYSTEM)
		return -errno;
	return rc ? -EHOSTUNREACH : 0;
}

void net_numeric_address(const struct sockaddr *sa, char *out, size_t n)
{
	char host[64] = "?";
	socklen_t len = sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	getnameinfo(sa, len, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
	const char *h = strncmp(host, "::ffff:", 7) == 0 && strchr(host + 7, '.') ? host + 7 : host;
	snprintf(out, n, "%s", h);
}

bool net_allowed(const struct net_allow *allow, const char *peer)
{
	for (int i = 0; i < allow->count; i++)
		if (allow->peers[i] && strcmp(allow->peers[i], peer) == 0)
			return true;
	return false;
}

int net_listen(const char *address, const struct net_allow *allow, const char *name,
	       const struct net_limits *limits, struct net_listener *out)
{
	memset(out, 0, sizeof(*out));
	const struct net_transport *t = net_transport_of(address);
	if (!t || !allow || allow->count < 0 || allow->count > NET_ALLOW_MAX || !name)
		return -EINVAL;
	out->limits = *limits;
	out->allow = *allow;
	snprintf(out->name, sizeof(out->name), "%s", name);
	/* the descriptor the transports' accepts refuse a peer on when the
	 * process has no other (core/accept.h) */
	int err = rtaccel_accept_reserve();
	if (!err)
		err = t->ops->listen(out, address);
	if (!err)
		out->transport = t;
	return err;
}

int net_accept(struct net_listener *l, uint64_t timeout_ns, struct net_link *out, char *refused,
	       size_t refused_len)
{
	memset(out, 0, sizeof(*out));
	if (!l->transport)
		return -EBADF;
	out->limits = l->limits;
	char who[96] = "";
	int err = l->transport->ops->accept(l, net_deadline_after(timeout_ns), out, who, sizeof(who));
	if (err) {
		if (refused && who[0])
			snprintf(refused, refused_len, "%s (%s%s)", who,
				 err == -EACCES ? "not on the allow-list" : "setup: ",
				 err == -EACCES ? "" : err == -EPROTO ? out->why : strerror(-err));
		return err;
	}
	out->transport = l->transport;
	err = handshake(out, l->name);
	if (err) {
		if (refused)
			snprintf(refused, refused_len, "%s (handshake: %s)", who,
				 err == -EPROTO ? out->why : strerror(-err));
		net_link_close(out);
	}
	return err;
}

int net_connect(const char *address, const char *name, const struct net_limits *limits,
		uint64_t timeout_ns, struct net_link *out)
{
	memset(out, 0, sizeof(*out));
	const struct net_transport *t = net_transport_of(address);
	if (!t || !name)
		return -EINVAL;
	out->limits = *limits;
	int err = t->ops->connect(out, address, net_deadline_after(timeout_ns));
	if (err)
		return err;
	out->transport = t;
	snprintf(out->peer_addr, sizeof(out->peer_addr), "%s", address);
	if ((err = handshake(out, name))) {
		t->ops->close(out); /* no goodbye: there was no hello */
		out->transport = NULL;
	}
	return err;
}

int net_listener_address(const struct net_listener *l, const char *address, char *out, size_t n)
{
	if (!l->transport)
		return -EBADF;
	int port = l->transport->ops->port ? l->transport->ops->port(l) : 0;
	if (port < 0)
		return port;
	if (!port) {
		snprintf(out, n, "%s", address);
		return 0;
	}
	const char *colon = strrchr(address, ':');
	if (!colon)
		return -EINVAL;
	snprintf(out, n, "%.*s:%d", (int)(colon - address), address, port);
	return 0;
}

int net_link_register(struct net_link *link, const void *buf, size_t len)
{
	if (!buf || !len)
		return -EINVAL;
	if (!link->transport)
		return -EBADF;
	const struct net_transport_ops *ops = link->transport->ops;
	return ops->register_region ? ops->register_region(link, buf, len) : 0;
}

int net_link_drain(struct net_link *link, uint64_t timeout_ns)
{
	if (!link->transport)
		return -EBADF;
	const struct net_transport_ops *ops = link->transport->ops;
	return ops->drain ? ops->drain(link, net_deadline_after(timeout_ns)) : 0;
}

uint64_t net_link_zero_copy_sends(const struct net_link *link)
{
	const struct net_transport_ops *ops = link->transport ? link->transport->ops : NULL;
	return ops && ops->zero_copy_sends ? ops->zero_copy_sends(link) : 0;
}

void net_link_shutdown(struct net_link *link)
{
	if (link->transport)
		link->transport->ops->shutdown(link);
}

void net_link_close(struct net_link *link)
{
	if (!link->transport)
		return;
	struct net_frame bye = {.type = NET_FRAME_BYE};
	net_link_send(link, &bye, NULL, 0, 0); /* best effort: the peer may be gone */
	link->transport->ops->close(link);
	link->transport = NULL;
	link->priv = NULL;
}

void net_link_forget(struct net_link *link)
{
	if (link->transport && link->transport->ops->forget)
		link->transport->ops->forget(link);
	link->transport = NULL;
	link->priv = NULL;
}

void net_listener_close(struct net_listener *l)
{
	if (l->transport)
		l->transport->ops->close_listener(l);
	l->transport = NULL;
	l->priv = NULL;
}

void net_listener_forget(struct net_listener *l)
{
	if (l->transport && l->transport->ops->forget_listener)
		l->transport->ops->forget_listener(l);
	l->transport = NULL;
	l->priv = NULL;
}
