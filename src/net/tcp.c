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
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/accept.h"
#include "core/clock.h"

/* A link's or a listener's socket. */
struct tcp_socket {
	int fd;
};

static int fd_of(const struct net_link *link)
{
	return ((const struct tcp_socket *)link->priv)->fd;
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
	return net_wait_fds(fd, events, -1, 0, deadline);
}

/* Takes FD into LINK's or a listener's PRIV; closes it if it cannot. */
static int adopt(void **priv, int fd)
{
	struct tcp_socket *s = malloc(sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->fd = fd;
	*priv = s;
	return 0;
}

static void release(void **priv)
{
	struct tcp_socket *s = *priv;
	if (s)
		close(s->fd);
	free(s);
	*priv = NULL;
}

static int tcp_write(struct net_link *link, struct iovec *iov, int iovcnt, uint64_t deadline)
{
	while (iovcnt > 0) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
		ssize_t n = sendmsg(fd_of(link), &m, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return errno == EPIPE ? -ECONNRESET : -errno;
			int err = wait_fd(fd_of(link), POLLOUT, deadline);
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

static int tcp_read(struct net_link *link, void *buf, size_t len, uint64_t deadline)
{
	char sink[4096];
	char *p = buf;
	const size_t want = len;
	while (len > 0) {
		ssize_t n = p ? recv(fd_of(link), p, len, 0)
			      : recv(fd_of(link), sink, len < sizeof(sink) ? len : sizeof(sink), 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			bool started = len < want;
			int err = wait_fd(fd_of(link), POLLIN, net_read_deadline(deadline, started));
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

static int tcp_listen(struct net_listener *l, const char *address)
{
	struct addrinfo *ai;
	int err = net_resolve(address, "tcp:", true, &ai);
	if (err)
		return err;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (fd >= 0)
		set_window(fd, &l->limits);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return err;
	}
	freeaddrinfo(ai);
	return adopt(&l->priv, fd);
}

static int tcp_port(const struct net_listener *l)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(((const struct tcp_socket *)l->priv)->fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static int tcp_accept(struct net_listener *l, uint64_t deadline, struct net_link *out, char *who,
		      size_t who_len)
{
	const int lfd = ((const struct tcp_socket *)l->priv)->fd;
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = rtaccel_accept(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK,
					NULL, NULL);
		if (fd < 0) {
			if (fd == -EINTR || fd == -ECONNABORTED)
				continue;
			if (fd != -EAGAIN)
				return fd;
			int err = wait_fd(lfd, POLLIN, deadline);
			if (err)
				return err;
			continue;
		}
		char addr[64];
		net_numeric_address((const struct sockaddr *)&ss, addr, sizeof(addr));
		snprintf(who, who_len, "tcp:%s", addr);
		if (!net_allowed(&l->allow, addr)) {
			close(fd);
			return -EACCES;
		}
		set_nodelay(fd);
		snprintf(out->peer_addr, sizeof(out->peer_addr), "tcp:%s", addr);
		return adopt(&out->priv, fd);
	}
}

static int tcp_connect(struct net_link *link, const char *address, uint64_t deadline)
{
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
	set_window(fd, &link->limits);
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
	return adopt(&link->priv, fd);
fail:
	close(fd);
	freeaddrinfo(ai);
	return err;
}

static void tcp_shutdown(struct net_link *link) { shutdown(fd_of(link), SHUT_RDWR); }
static void tcp_close(struct net_link *link) { release(&link->priv); }
static void tcp_close_listener(struct net_listener *l) { release(&l->priv); }

static const struct net_transport_ops tcp_ops = {
	.listen = tcp_listen,
	.accept = tcp_accept,
	.connect = tcp_connect,
	.write = tcp_write,
	.read = tcp_read,
	.shutdown = tcp_shutdown,
	.close = tcp_close,
	.forget = tcp_close, /* a close of the child's descriptor, no shutdown */
	.close_listener = tcp_close_listener,
	.forget_listener = tcp_close_listener,
	.port = tcp_port,
};

/* 1448 bytes of payload in each 1514-byte Ethernet frame at an MTU of 1500
 * (IPv4, TCP with timestamps). The window is the socket buffers (two chunks
 * unless told); a write that finds room in them may still queue one packet
 * of up to 64 KiB (GSO) beyond. */
const struct net_transport net_tcp_transport = {
	.info = {.name = "tcp", .wire_payload = 1448, .wire_frame = 1514, .window_chunks = 2,
		 .beyond_window = 64u << 10},
	.ops = &tcp_ops,
};
