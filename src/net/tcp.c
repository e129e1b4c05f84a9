/* The TCP transport: see transport.h. Sockets are non-blocking and every wait
 * is a ppoll() against the caller's deadline, so no call blocks past it. */
#include "net/transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

void net_limits_defaults(struct net_limits *limits)
{
	limits->frame.max_chunk = 1u << 20;
	limits->frame.max_transfer = 256ull << 20;
	limits->handshake_ns = 5ull * 1000 * 1000 * 1000;
}

/* Waits for EVENTS on FD until DEADLINE (CLOCK_MONOTONIC ns). */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		uint64_t now = rtaccel_monotonic_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct timespec left = rtaccel_timespec_of(deadline - now);
		struct pollfd p = {.fd = fd, .events = events};
		int n = ppoll(&p, 1, &left, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		return 0; /* readable, writable, or an error the next call reports */
	}
}

static uint64_t deadline_after(uint64_t timeout_ns)
{
	uint64_t now = rtaccel_monotonic_ns();
	return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

static uint64_t time_left(uint64_t deadline)
{
	uint64_t now = rtaccel_monotonic_ns();
	return deadline > now ? deadline - now : 0;
}

/* Splits "tcp:HOST:PORT" (HOST may be [v6]). */
static int parse_address(const char *address, char *host, size_t hlen, char *port, size_t plen)
{
	if (!address || strncmp(address, "tcp:", 4) != 0)
		return -EINVAL;
	const char *rest = address + 4;
	const char *colon = strrchr(rest, ':');
	if (!colon || colon == rest || !colon[1] || strlen(colon + 1) >= plen)
		return -EINVAL;
	const char *h = rest, *hend = colon;
	if (*h == '[') {
		if (hend[-1] != ']')
			return -EINVAL;
		h++;
		hend--;
	}
	if ((size_t)(hend - h) >= hlen || hend == h)
		return -EINVAL;
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = 0;
	for (const char *p = colon + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

static int resolve(const char *address, bool passive, struct addrinfo **out)
{
	char host[256], port[16];
	if (parse_address(address, host, sizeof(host), port, sizeof(port)) < 0)
		return -EINVAL;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = passive ? AI_PASSIVE : AI_ADDRCONFIG};
	int rc = getaddrinfo(host, port, &hints, out);
	if (rc == EAI_SYSTEM)
		return -errno;
	return rc ? -EHOSTUNREACH : 0;
}

/* A numeric peer address; IPv4-mapped IPv6 addresses as plain IPv4. */
static void peer_address(const struct sockaddr_storage *ss, socklen_t len, char *out, size_t n)
{
	char host[64] = "?";
	getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
	const char *h = strncmp(host, "::ffff:", 7) == 0 && strchr(host + 7, '.') ? host + 7 : host;
	snprintf(out, n, "%s", h);
}

static int full_send(struct net_link *link, struct iovec *iov, int iovcnt, uint64_t deadline)
{
	while (iovcnt > 0) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
		ssize_t n = sendmsg(link->fd, &m, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return errno == EPIPE ? -ECONNRESET : -errno;
			int err = wait_fd(link->fd, POLLOUT, deadline);
			if (err)
				return err;
			continue;
		}
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int full_recv(struct net_link *link, void *buf, size_t len, uint64_t deadline)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = recv(link->fd, p, len, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			int err = wait_fd(link->fd, POLLIN, deadline);
			if (err)
				return err;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

#define IOV_MAX_FRAME 16

int net_link_send(struct net_link *link, const struct net_frame *f, const struct iovec *iov,
		  int iovcnt, uint64_t timeout_ns)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX_FRAME - 1)
		return -EINVAL;
	size_t payload = 0;
	for (int i = 0; i < iovcnt; i++)
		payload += iov[i].iov_len;
	if (payload != f->length)
		return -EINVAL;
	uint8_t header[NET_FRAME_HEADER];
	net_frame_encode(f, header);
	struct iovec v[IOV_MAX_FRAME];
	v[0] = (struct iovec){header, sizeof(header)};
	for (int i = 0; i < iovcnt; i++)
		v[i + 1] = iov[i];
	return full_send(link, v, iovcnt + 1, deadline_after(timeout_ns));
}

int net_link_recv(struct net_link *link, struct net_frame *f, void *buf, size_t cap,
		  uint64_t timeout_ns)
{
	const uint64_t deadline = deadline_after(timeout_ns);
	uint8_t header[NET_FRAME_HEADER];
	int err = full_recv(link, header, sizeof(header), deadline);
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
	if (f->length > cap)
		return -EMSGSIZE;
	return f->length ? full_recv(link, buf, f->length, deadline) : 0;
}

/* HELLO both ways: each end learns the other's name. */
static int handshake(struct net_link *link, const char *name)
{
	const uint64_t deadline = deadline_after(link->limits.handshake_ns);
	size_t len = strnlen(name, 255);
	struct net_frame hello = {.type = NET_FRAME_HELLO, .length = (uint32_t)len, .total = len};
	struct iovec iov = {(void *)name, len};
	int err = net_link_send(link, &hello, &iov, 1, time_left(deadline));
	if (err)
		return err;
	struct net_frame f;
	err = net_link_recv(link, &f, link->peer_name, sizeof(link->peer_name) - 1,
			    time_left(deadline));
	if (err)
		return err;
	if (f.type != NET_FRAME_HELLO) {
		snprintf(link->why, sizeof(link->why), "the peer's first frame is not a hello");
		return -EPROTO;
	}
	link->peer_name[f.length] = 0;
	return 0;
}

static void set_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int net_tcp_listen(const char *address, const struct net_allow *allow, const char *name,
		   const struct net_limits *limits, struct net_listener *out)
{
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	if (!allow || allow->count < 0 || allow->count > NET_ALLOW_MAX || !name)
		return -EINVAL;
	struct addrinfo *ai;
	int err = resolve(address, true, &ai);
	if (err)
		return err;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return err;
	}
	freeaddrinfo(ai);
	out->fd = fd;
	out->limits = *limits;
	out->allow = *allow;
	snprintf(out->name, sizeof(out->name), "%s", name);
	return 0;
}

int net_tcp_port(const struct net_listener *l)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static bool allowed(const struct net_allow *allow, const char *addr)
{
	for (int i = 0; i < allow->count; i++)
		if (allow->peers[i] && strcmp(allow->peers[i], addr) == 0)
			return true;
	return false;
}

int net_tcp_accept(struct net_listener *l, uint64_t timeout_ns, struct net_link *out, char *refused,
		   size_t refused_len)
{
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	const uint64_t deadline = deadline_after(timeout_ns);
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				return -errno;
			int err = wait_fd(l->fd, POLLIN, deadline);
			if (err)
				return err;
			continue;
		}
		char addr[64];
		peer_address(&ss, len, addr, sizeof(addr));
		if (!allowed(&l->allow, addr)) {
			close(fd);
			if (refused)
				snprintf(refused, refused_len, "tcp:%s (not on the allow-list)", addr);
			return -EACCES;
		}
		set_nodelay(fd);
		out->fd = fd;
		out->limits = l->limits;
		snprintf(out->peer_addr, sizeof(out->peer_addr), "tcp:%s", addr);
		int err = handshake(out, l->name);
		if (err) {
			if (refused)
				snprintf(refused, refused_len, "tcp:%s (handshake: %s)", addr,
					 err == -EPROTO ? out->why : strerror(-err));
			net_link_close(out);
			return err;
		}
		return 0;
	}
}

int net_tcp_connect(const char *address, const char *name, const struct net_limits *limits,
		    uint64_t timeout_ns, struct net_link *out)
{
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	if (!name)
		return -EINVAL;
	const uint64_t deadline = deadline_after(timeout_ns);
	struct addrinfo *ai;
	int err = resolve(address, false, &ai);
	if (err)
		return err;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		err = -errno;
		freeaddrinfo(ai);
		return err;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		err = -errno;
		goto fail;
	}
	if ((err = wait_fd(fd, POLLOUT, deadline)))
		goto fail;
	int so_error = 0;
	socklen_t slen = sizeof(so_error);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &slen) < 0 || so_error) {
		err = so_error ? -so_error : -errno;
		goto fail;
	}
	freeaddrinfo(ai);
	set_nodelay(fd);
	out->fd = fd;
	out->limits = *limits;
	snprintf(out->peer_addr, sizeof(out->peer_addr), "%s", address);
	if ((err = handshake(out, name))) {
		close(fd);
		out->fd = -1;
	}
	return err;
fail:
	close(fd);
	freeaddrinfo(ai);
	return err;
}

void net_link_close(struct net_link *link)
{
	if (link->fd < 0)
		return;
	struct net_frame bye = {.type = NET_FRAME_BYE};
	net_link_send(link, &bye, NULL, 0, 0); /* best effort: the peer may be gone */
	close(link->fd);
	link->fd = -1;
}

void net_listener_close(struct net_listener *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}
