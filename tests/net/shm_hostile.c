/* Hostile peers of the shared-memory transport: the listener refuses, with
 * the reason, a setup that is not rtaccel's, shared memory that is not
 * sealed against shrinking (which would let the peer turn our next access
 * into SIGBUS), and rings whose indices the peer has corrupted. */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "net/transport.h"
#include "test_util.h"

#define SEC 1000000000ull
#define RING 65536u
#define HEAD 4096u /* the control page; ring 0's head index sits at offset 64 */

static char address[64];

static int raw_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "rtaccel-net.%s", address + 4);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	CHECK(fd >= 0);
	CHECK_EQ(connect(fd, (struct sockaddr *)&sa,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)), 0);
	return fd;
}

/* Sends a setup message: MAGIC, the ring size and MEMFD with four eventfds
 * (NFDS of them in all). */
static void send_setup(int fd, uint32_t magic, uint32_t ring, int memfd, int nfds)
{
	uint32_t setup[4] = {magic, 1, ring, 0};
	int fds[5] = {memfd};
	for (int i = 1; i < 5; i++)
		fds[i] = eventfd(0, 0);
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} control = {0};
	struct iovec iov = {setup, sizeof(setup)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			   .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
	CHECK(sendmsg(fd, &m, 0) == sizeof(setup));
}

static int memfd(bool seal, size_t size)
{
	int fd = memfd_create("hostile", MFD_ALLOW_SEALING);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)size), 0);
	if (seal)
		CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	return fd;
}

static void refused_with(struct net_listener *l, const char *reason)
{
	struct net_link link;
	char refused[200] = "";
	int err = net_accept(l, 5 * SEC, &link, refused, sizeof(refused));
	CHECK_EQ(err, -EPROTO);
	printf("refused %s\n", refused);
	CHECK(strstr(refused, reason) != NULL);
}

int main(void)
{
	watchdog(60);
	struct net_limits limits;
	net_limits_defaults(&limits);
	limits.handshake_ns = SEC;
	static char uid[32];
	snprintf(uid, sizeof(uid), "uid:%u", (unsigned)getuid());
	struct net_allow allow = {.peers = {uid}, .count = 1};
	snprintf(address, sizeof(address), "shm:hostile-%d", (int)getpid());
	struct net_listener l;
	CHECK_EQ(net_listen(address, &allow, "server", &limits, &l), 0);
	const size_t size = HEAD + 2 * RING;

	int fd = raw_connect();
	send_setup(fd, 0x12345678, RING, memfd(true, size), 5);
	refused_with(&l, "not an rtaccel shm setup message");
	close(fd);

	fd = raw_connect();
	send_setup(fd, 0x4d48534e, RING, memfd(true, size), 3);
	refused_with(&l, "not an rtaccel shm setup message");
	close(fd);

	fd = raw_connect();
	send_setup(fd, 0x4d48534e, RING, memfd(false, size), 5);
	refused_with(&l, "not sealed");
	close(fd);

	fd = raw_connect();
	send_setup(fd, 0x4d48534e, RING, memfd(true, size / 2), 5);
	refused_with(&l, "not as large as the rings");
	close(fd);

	fd = raw_connect();
	send_setup(fd, 0x4d48534e, RING + 1, memfd(true, size), 5);
	refused_with(&l, "not a power of 2");
	close(fd);

	/* a proper setup, then ring indices no writer could have left */
	int mfd = memfd(true, size);
	uint8_t *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(map != MAP_FAILED);
	*(uint64_t *)(map + 64) = 1ull << 40;
	fd = raw_connect();
	send_setup(fd, 0x4d48534e, RING, mfd, 5);
	refused_with(&l, "corrupted the ring");
	close(fd);

	/* a peer that connects and says nothing: the handshake's deadline */
	fd = raw_connect();
	struct net_link link;
	char refused[200] = "";
	CHECK_EQ(net_accept(&l, 5 * SEC, &link, refused, sizeof(refused)), -ETIMEDOUT);
	printf("refused %s\n", refused);
	close(fd);
	net_listener_close(&l);
	return T_PASS;
}
