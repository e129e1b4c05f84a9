/* The shared-memory transport (see transport.h): two processes of one machine
 * share a sealed memfd holding one byte ring per direction. The connector
 * makes it and hands it over a Unix socket in the abstract namespace, with
 * four eventfds: each side's reader and writer sleep on their own, and the
 * other side writes to it only when the sleeper said it sleeps. The socket
 * stays open for its one other use: when the peer dies the kernel closes it,
 * and a sleeper sees the hang-up.
 *
 * The peer can write anything into the shared pages, so the ring indices are
 * checked on every read, and the memfd is sealed against shrinking, which
 * would otherwise turn our next access into SIGBUS. */
#include "net/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/accept.h"
#include "core/clock.h"

#define SHM_MAGIC 0x4d48534eu /* "NSHM" */
#define SHM_VERSION 1
#define SHM_HEAD 4096	      /* the control page before the rings' bytes */
#define SHM_RING_MIN 4096u
#define SHM_RING_MAX (1u << 30)
#define SHM_RING_DEFAULT (4u << 20)

/* One direction. Indices count bytes since the link began; the ring's
 * position is the index modulo its size. */
struct shm_ring {
	_Alignas(64) _Atomic uint64_t head;  /* written by the producer */
	_Atomic uint32_t reader_sleeps;
	_Alignas(64) _Atomic uint64_t tail;  /* written by the consumer */
	_Atomic uint32_t writer_sleeps;
};

struct shm_control {
	uint32_t magic, version, ring_size, pad;
	struct shm_ring ring[2]; /* 0: connector to acceptor, 1: the other way */
};

/* The eventfds: who sleeps on each. */
enum { EFD_C_READER, EFD_C_WRITER, EFD_A_READER, EFD_A_WRITER, EFD_COUNT };

struct net_shm {
	void *map;
	size_t map_len;
	uint32_t size;
	struct shm_ring *tx, *rx;
	uint8_t *tx_data, *rx_data;
	int my_reader, my_writer;     /* eventfds I sleep on */
	int peer_reader, peer_writer; /* eventfds the peer sleeps on */
	int efd[EFD_COUNT];
	int sock; /* the Unix socket: its hang-up is the peer's death */
	atomic_bool down;
};

struct shm_listener {
	int fd;
};

struct shm_setup {
	uint32_t magic, version, ring_size, pad;
};

static int socket_address(const char *address, struct sockaddr_un *sa, socklen_t *len)
{
	if (!address || strncmp(address, "shm:", 4) != 0)
		return -EINVAL;
	const char *name = address + 4;
	size_t n = strlen(name);
	if (n == 0 || n > 64)
		return -EINVAL;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return -EINVAL;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int w = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "rtaccel-net.%s", name);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)w);
	return 0;
}

static void shm_free(struct net_shm *s)
{
	if (!s)
		return;
	if (s->map && s->map != MAP_FAILED)
		munmap(s->map, s->map_len);
	for (int i = 0; i < EFD_COUNT; i++)
		if (s->efd[i] >= 0)
			close(s->efd[i]);
	if (s->sock >= 0)
		close(s->sock);
	free(s);
}

static struct net_shm *shm_new(void)
{
	struct net_shm *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	for (int i = 0; i < EFD_COUNT; i++)
		s->efd[i] = -1;
	s->sock = -1;
	return s;
}

/* Maps the memfd and takes this side's view of it. */
static int shm_attach(struct net_shm *s, int memfd, uint32_t ring_size, bool connector)
{
	s->size = ring_size;
	s->map_len = SHM_HEAD + 2 * (size_t)ring_size;
	s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (s->map == MAP_FAILED)
		return -errno;
	struct shm_control *c = s->map;
	uint8_t *bytes = (uint8_t *)s->map + SHM_HEAD;
	int out = connector ? 0 : 1;
	s->tx = &c->ring[out];
	s->rx = &c->ring[1 - out];
	s->tx_data = bytes + (size_t)out * ring_size;
	s->rx_data = bytes + (size_t)(1 - out) * ring_size;
	s->my_reader = s->efd[connector ? EFD_C_READER : EFD_A_READER];
	s->my_writer = s->efd[connector ? EFD_C_WRITER : EFD_A_WRITER];
	s->peer_reader = s->efd[connector ? EFD_A_READER : EFD_C_READER];
	s->peer_writer = s->efd[connector ? EFD_A_WRITER : EFD_C_WRITER];
	return 0;
}

static void poke(int efd)
{
	uint64_t one = 1;
	ssize_t r = write(efd, &one, sizeof(one));
	(void)r; /* a full counter still wakes the sleeper */
}

static void drain(int efd)
{
	uint64_t v;
	ssize_t r = read(efd, &v, sizeof(v));
	(void)r;
}

/* Sleeps on EFD after saying so in *SLEEPS, unless READY() turns true in
 * between; -ECONNRESET when the peer's socket hung up or the link was shut
 * down. */
static int sleep_until(struct net_link *link, int efd, _Atomic uint32_t *sleeps,
		       bool (*ready)(const struct net_shm *), uint64_t deadline)
{
	struct net_shm *s = link->priv;
	atomic_store(sleeps, 1);
	if (ready(s)) {
		atomic_store(sleeps, 0);
		return 0;
	}
	int err = net_wait_fds(efd, POLLIN, s->sock, POLLIN | POLLRDHUP, deadline);
	atomic_store(sleeps, 0);
	drain(efd);
	if (atomic_load(&s->down))
		return -ECONNRESET;
	if (err)
		return err;
	if (ready(s))
		return 0;
	struct pollfd p = {.fd = s->sock, .events = POLLIN | POLLRDHUP};
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLIN))) {
		snprintf(link->why, sizeof(link->why), "the peer is gone");
		return -ECONNRESET;
	}
	return 0;
}

static bool has_space(const struct net_shm *s)
{
	return atomic_load(&s->tx->head) - atomic_load(&s->tx->tail) < s->size;
}

static bool has_data(const struct net_shm *s)
{
	return atomic_load(&s->rx->head) != atomic_load(&s->rx->tail);
}

static int shm_write(struct net_link *link, struct iovec *iov, int iovcnt, uint64_t deadline)
{
	struct net_shm *s = link->priv;
	const uint64_t mask = s->size - 1;
	for (int i = 0; i < iovcnt; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len;
		while (len > 0) {
			if (atomic_load_explicit(&s->down, memory_order_relaxed))
				return -ECONNRESET;
			uint64_t head = atomic_load_explicit(&s->tx->head, memory_order_relaxed);
			uint64_t tail = atomic_load_explicit(&s->tx->tail, memory_order_acquire);
			uint64_t used = head - tail;
			if (used > s->size) {
				snprintf(link->why, sizeof(link->why), "the peer corrupted the ring");
				return -EPROTO;
			}
			if (used == s->size) {
				int err = sleep_until(link, s->my_writer, &s->tx->writer_sleeps,
						      has_space, deadline);
				if (err)
					return err;
				continue;
			}
			size_t n = s->size - used;
			if (n > len)
				n = len;
			size_t at = head & mask, first = n < s->size - at ? n : s->size - at;
			memcpy(s->tx_data + at, p, first);
			memcpy(s->tx_data, p + first, n - first);
			atomic_store_explicit(&s->tx->head, head + n, memory_order_seq_cst);
			if (atomic_load(&s->tx->reader_sleeps))
				poke(s->peer_reader);
			p += n;
			len -= n;
		}
	}
	return 0;
}

static int shm_read(struct net_link *link, void *buf, size_t len, uint64_t deadline)
{
	struct net_shm *s = link->priv;
	const uint64_t mask = s->size - 1;
	uint8_t *p = buf;
	const size_t want = len;
	while (len > 0) {
		if (atomic_load_explicit(&s->down, memory_order_relaxed))
			return -ECONNRESET;
		uint64_t tail = atomic_load_explicit(&s->rx->tail, memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&s->rx->head, memory_order_acquire);
		uint64_t avail = head - tail;
		if (avail > s->size) {
			snprintf(link->why, sizeof(link->why), "the peer corrupted the ring");
			return -EPROTO;
		}
		if (avail == 0) {
			bool started = len < want;
			int err = sleep_until(link, s->my_reader, &s->rx->reader_sleeps, has_data,
					      net_read_deadline(deadline, started));
			if (err)
				return net_read_failed(err, started);
			continue;
		}
		size_t n = avail < len ? avail : len;
		size_t at = tail & mask, first = n < s->size - at ? n : s->size - at;
		if (p) {
			memcpy(p, s->rx_data + at, first);
			memcpy(p + first, s->rx_data, n - first);
			p += n;
		}
		atomic_store_explicit(&s->rx->tail, tail + n, memory_order_seq_cst);
		if (atomic_load(&s->rx->writer_sleeps))
			poke(s->peer_writer);
		len -= n;
	}
	return 0;
}

static int shm_listen(struct net_listener *l, const char *address)
{
	struct sockaddr_un sa;
	socklen_t len;
	if (socket_address(address, &sa, &len) < 0)
		return -EINVAL;
	struct shm_listener *sl = malloc(sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 64) < 0) {
		int err = -errno;
		if (fd >= 0)
			close(fd);
		free(sl);
		return err;
	}
	sl->fd = fd;
	l->priv = sl;
	return 0;
}

static void shm_close_listener(struct net_listener *l)
{
	struct shm_listener *sl = l->priv;
	if (sl)
		close(sl->fd);
	free(sl);
}

/* The connector's setup message and its memfd and eventfds. */
static int receive_setup(int fd, struct net_shm *s, int *memfd, uint32_t *ring_size,
			 uint64_t deadline, char *why, size_t why_len)
{
	struct shm_setup setup;
	union {
		char buf[CMSG_SPACE(sizeof(int) * (EFD_COUNT + 1))];
		struct cmsghdr align;
	} control;
	for (;;) {
		struct iovec iov = {&setup, sizeof(setup)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
				   .msg_controllen = sizeof(control.buf)};
		ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			int err = net_wait_fds(fd, POLLIN, -1, 0, deadline);
			if (err)
				return err;
			continue;
		}
		if (n < 0)
			return -errno;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		int fds[EFD_COUNT + 1], nfds = 0;
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			nfds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)(nfds < EFD_COUNT + 1 ? nfds : EFD_COUNT + 1));
		}
		if (n != sizeof(setup) || nfds != EFD_COUNT + 1 || (m.msg_flags & MSG_CTRUNC) ||
		    setup.magic != SHM_MAGIC || setup.version != SHM_VERSION) {
			for (int i = 0; i < nfds && i < EFD_COUNT + 1; i++)
				close(fds[i]);
			snprintf(why, why_len, "not an rtaccel shm setup message");
			return -EPROTO;
		}
		*memfd = fds[0];
		for (int i = 0; i < EFD_COUNT; i++)
			s->efd[i] = fds[i + 1];
		*ring_size = setup.ring_size;
		return 0;
	}
}

/* The memfd must be what the setup said, and sealed so that it stays so. */
static int check_memfd(int memfd, uint32_t ring_size, char *why, size_t why_len)
{
	struct stat st;
	int seals = fcntl(memfd, F_GET_SEALS);
	if (ring_size < SHM_RING_MIN || ring_size > SHM_RING_MAX || (ring_size & (ring_size - 1))) {
		snprintf(why, why_len, "ring size %u is not a power of 2 in [4 KiB, 1 GiB]", ring_size);
		return -EPROTO;
	}
	if (fstat(memfd, &st) < 0 || st.st_size != (off_t)(SHM_HEAD + 2 * (size_t)ring_size)) {
		snprintf(why, why_len, "the shared memory is not as large as the rings");
		return -EPROTO;
	}
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || !(seals & F_SEAL_SEAL)) {
		snprintf(why, why_len, "the shared memory is not sealed against shrinking");
		return -EPROTO;
	}
	return 0;
}

static int shm_accept(struct net_listener *l, uint64_t deadline, struct net_link *out, char *who,
		      size_t who_len)
{
	const int lfd = ((const struct shm_listener *)l->priv)->fd;
	int fd;
	for (;;) {
		fd = rtaccel_accept(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK, NULL, NULL);
		if (fd >= 0)
			break;
		if (fd == -EINTR || fd == -ECONNABORTED)
			continue;
		if (fd != -EAGAIN)
			return fd;
		int err = net_wait_fds(lfd, POLLIN, -1, 0, deadline);
		if (err)
			return err;
	}
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	char peer[32];
	snprintf(peer, sizeof(peer), "uid:%u", (unsigned)cred.uid);
	snprintf(who, who_len, "shm:uid:%u pid %d", (unsigned)cred.uid, (int)cred.pid);
	if (!net_allowed(&l->allow, peer)) {
		close(fd);
		return -EACCES;
	}
	struct net_shm *s = shm_new();
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->sock = fd;
	int memfd = -1;
	uint32_t ring_size = 0;
	int err = receive_setup(fd, s, &memfd, &ring_size, deadline, out->why, sizeof(out->why));
	if (!err)
		err = check_memfd(memfd, ring_size, out->why, sizeof(out->why));
	if (!err)
		err = shm_attach(s, memfd, ring_size, false);
	if (memfd >= 0)
		close(memfd);
	if (err) {
		shm_free(s);
		return err;
	}
	out->priv = s;
	snprintf(out->peer_addr, sizeof(out->peer_addr), "shm:%s", peer);
	return 0;
}

/* The memfd with its control page set up, sealed against resizing. */
static int make_memfd(uint32_t ring_size)
{
	int memfd = memfd_create("rtaccel-net", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0)
		return -errno;
	if (ftruncate(memfd, (off_t)(SHM_HEAD + 2 * (size_t)ring_size)) < 0 ||
	    fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int err = -errno;
		close(memfd);
		return err;
	}
	return memfd;
}

/* The ring a link's window asks for: a power of 2 at least as large. */
static uint32_t ring_for_window(const struct net_limits *limits)
{
	if (!limits->window)
		return SHM_RING_DEFAULT;
	uint32_t ring = SHM_RING_MIN;
	while (ring < limits->window && ring < SHM_RING_MAX)
		ring <<= 1;
	return ring;
}

static int shm_connect(struct net_link *link, const char *address, uint64_t deadline)
{
	struct sockaddr_un sa;
	socklen_t salen;
	const uint32_t ring = ring_for_window(&link->limits);
	if (socket_address(address, &sa, &salen) < 0)
		return -EINVAL;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int err;
	while (connect(fd, (struct sockaddr *)&sa, salen) < 0) {
		if (errno == EINTR)
			continue;
		err = -errno;
		if (err != -EAGAIN || net_time_left(deadline) == 0) { /* EAGAIN: backlog full */
			close(fd);
			return err == -EAGAIN ? -ETIMEDOUT : err;
		}
		rtaccel_sleep_ns(1000 * 1000);
	}
	struct net_shm *s = shm_new();
	int memfd = -1;
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->sock = fd;
	for (int i = 0; i < EFD_COUNT; i++)
		if ((s->efd[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
			err = -errno;
			goto fail;
		}
	if ((memfd = make_memfd(ring)) < 0) {
		err = memfd;
		goto fail;
	}
	if ((err = shm_attach(s, memfd, ring, true)))
		goto fail;
	struct shm_control *c = s->map;
	c->magic = SHM_MAGIC;
	c->version = SHM_VERSION;
	c->ring_size = ring;
	struct shm_setup setup = {SHM_MAGIC, SHM_VERSION, ring, 0};
	union {
		char buf[CMSG_SPACE(sizeof(int) * (EFD_COUNT + 1))];
		struct cmsghdr align;
	} control;
	memset(&control, 0, sizeof(control));
	struct iovec iov = {&setup, sizeof(setup)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			   .msg_controllen = sizeof(control.buf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (EFD_COUNT + 1));
	int fds[EFD_COUNT + 1] = {memfd};
	for (int i = 0; i < EFD_COUNT; i++)
		fds[i + 1] = s->efd[i];
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	while (sendmsg(fd, &m, MSG_NOSIGNAL) < 0) {
		if (errno == EINTR)
			continue;
		err = errno == EPIPE ? -ECONNRESET : -errno;
		if (errno != EAGAIN || (err = net_wait_fds(fd, POLLOUT, -1, 0, deadline)))
			goto fail;
	}
	close(memfd);
	link->priv = s;
	return 0;
fail:
	if (memfd >= 0)
		close(memfd);
	shm_free(s);
	return err;
}

static void shm_shutdown(struct net_link *link)
{
	struct net_shm *s = link->priv;
	atomic_store(&s->down, true);
	poke(s->my_reader);
	poke(s->my_writer);
}

static void shm_close(struct net_link *link) { shm_free(link->priv); }

static const struct net_transport_ops shm_ops = {
	.listen = shm_listen,
	.accept = shm_accept,
	.connect = shm_connect,
	.write = shm_write,
	.read = shm_read,
	.shutdown = shm_shutdown,
	.close = shm_close,
	.forget = shm_close, /* unmaps and closes, writes nothing into the rings */
	.close_listener = shm_close_listener,
	.forget_listener = shm_close_listener, /* a close; the name is abstract */
};

/* The rate a shm link declares is the payload's; its window is the ring,
 * 4 MiB unless told (memory drains it in well under a millisecond). */
const struct net_transport net_shm_transport = {
	.info = {.name = "shm", .one_machine = 1, .wire_payload = 1, .wire_frame = 1,
		 .window_bytes = SHM_RING_DEFAULT},
	.ops = &shm_ops,
};
