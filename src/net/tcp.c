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

static int wait_fd(int fd, short events, uint64_t deadline)
{
	return net_wait_fds(fd, events, -1, 0, deadline);
}

int net_tcp_write(struct net_link *link, struct iovec *iov, int iovcnt, uint64_t deadline)
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

int net_tcp_read(struct net_link *link, void *buf, size_t len, uint64_t deadline)
{
	char sink[4096];
	char *p = buf;
	const size_t want = len;
	while (len > 0) {
		ssize_t n = p ? recv(link->fd, p, len, 0)
			      : recv(link->fd, sink, len < sizeof(sink) ? len : sizeof(sink), 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			bool started = len < want;
			int err = wait_fd(link->fd, POLLIN, net_read_deadline(deadline, started));
			if (err)
				return net_read_failed(err, started);
			continue;
		}
		if (p)
			p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void set_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Small socket buffers keep what waits below the flow-control layer small.
 * Set before connect and listen, so that the window scale fits them. The
 * kernel doubles what SO_SNDBUF asks for (socket(7)), and everything the
 * socket has sent but not had acknowledged counts against it, packets in a
 * qdisc's queue included: half the window is asked for, so that a
 * higher-priority transfer finds at most the window queued ahead of it. */
static void set_window(int fd, const struct net_limits *limits)
{
	int w = (int)limits->window;
	if (!w)
		return;
	int half = w / 2;
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &half, sizeof(half));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &w, sizeof(w));
}

int net_tcp_listen(const char *address, const struct net_allow *allow, const char *name,
		   const struct net_limits *limits, struct net_listener *out)
{
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	out->kind = NET_TCP;
	if (!allow || allow->count < 0 || allow->count > NET_ALLOW_MAX || !name)
		return -EINVAL;
	struct addrinfo *ai;
	int err = net_resolve(address, "tcp:", true, &ai);
	if (err)
		return err;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd >= 0)
		set_window(fd, limits);
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

int net_tcp_accept(struct net_listener *l, uint64_t timeout_ns, struct net_link *out, char *refused,
		   size_t refused_len)
{
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	const uint64_t deadline = net_deadline_after(timeout_ns);
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
		net_numeric_address((const struct sockaddr *)&ss, addr, sizeof(addr));
		if (!net_allowed(&l->allow, addr)) {
			close(fd);
			if (refused)
				snprintf(refused, refused_len, "tcp:%s (not on the allow-list)", addr);
			return -EACCES;
		}
		set_nodelay(fd);
		out->kind = NET_TCP;
		out->fd = fd;
		out->limits = l->limits;
		snprintf(out->peer_addr, sizeof(out->peer_addr), "tcp:%s", addr);
		int err = net_link_handshake(out, l->name);
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
	const uint64_t deadline = net_deadline_after(timeout_ns);
	struct addrinfo *ai;
	int err = net_resolve(address, "tcp:", false, &ai);
	if (err)
		return err;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		err = -errno;
		freeaddrinfo(ai);
		return err;
	}
	set_window(fd, limits);
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
	out->kind = NET_TCP;
	out->fd = fd;
	out->limits = *limits;
	snprintf(out->peer_addr, sizeof(out->peer_addr), "%s", address);
	if ((err = net_link_handshake(out, name))) {
		close(fd);
		out->fd = -1;
		out->kind = 0;
	}
	return err;
fail:
	close(fd);
	freeaddrinfo(ai);
	return err;
}
