/* The TCP transport from two processes: the handshake and frames intact and
 * in order; the allow-list; deadlines instead of hangs; a peer killed in the
 * middle of a frame; bytes that are not frames; bad addresses. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "net/transport.h"
#include "test_util.h"

static struct net_limits limits;

static struct net_listener listen_on(const char *who)
{
	struct net_allow allow = {.peers = {who}, .count = 1};
	struct net_listener l;
	CHECK_EQ(net_listen("tcp:127.0.0.1:0", &allow, "server", &limits, &l), 0);
	return l;
}

static void address_of(const struct net_listener *l, char *out, size_t n)
{
	CHECK_EQ(net_listener_address(l, "tcp:127.0.0.1:0", out, n), 0);
}

/* A raw TCP connection, for peers that do not speak the protocol. */
static int raw_connect(const char *address)
{
	int port = atoi(strrchr(address, ':') + 1);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		_exit(T_FAIL);
	return fd;
}

static void send_hello(int fd)
{
	struct net_frame hello = {.type = NET_FRAME_HELLO, .length = 4, .total = 4};
	uint8_t h[NET_FRAME_HEADER];
	net_frame_encode(&hello, h);
	if (write(fd, h, sizeof(h)) != sizeof(h) || write(fd, "evil", 4) != 4)
		_exit(T_FAIL);
}

/* A peer that does not speak the protocol: it connects, says hello if
 * asked, writes BYTES, then waits to be killed or, with DIE, kills itself. */
static pid_t raw_peer(const char *address, bool hello, const void *bytes, size_t len, bool die)
{
	pid_t child = test_fork();
	if (child != 0)
		return child;
	int fd = raw_connect(address);
	if (hello)
		send_hello(fd);
	if (write(fd, bytes, len) != (ssize_t)len)
		_exit(T_FAIL);
	if (die)
		raise(SIGKILL);
	pause();
	_exit(T_PASS);
}

static void stop(pid_t child)
{
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

#define CHUNK 65536
#define CHUNKS 16

static void frames_arrive_intact_and_in_order(void)
{
	struct net_listener l = listen_on("127.0.0.1");
	char address[64];
	address_of(&l, address, sizeof(address));
	pid_t child = test_fork();
	if (child == 0) {
		struct net_link link;
		if (net_connect(address, "client", &limits, 2000000000ull, &link))
			_exit(T_FAIL);
		static uint8_t data[CHUNK];
		for (int i = 0; i < CHUNKS; i++) {
			memset(data, i, sizeof(data));
			struct net_frame f = {.type = NET_FRAME_DATA, .channel = 5, .priority = 3,
					      .transfer = 1, .offset = (uint64_t)i * CHUNK,
					      .total = CHUNKS * CHUNK, .length = CHUNK,
					      .flags = i == CHUNKS - 1 ? NET_FLAG_LAST : 0};
			struct iovec iov = {data, sizeof(data)};
			if (net_link_send(&link, &f, &iov, 1, 2000000000ull))
				_exit(T_FAIL);
		}
		net_link_close(&link);
		_exit(T_PASS);
	}
	struct net_link link;
	char refused[128] = "";
	CHECK_EQ(net_accept(&l, 5000000000ull, &link, refused, sizeof(refused)), 0);
	CHECK(strcmp(link.peer_name, "client") == 0);
	CHECK(strcmp(link.peer_addr, "tcp:127.0.0.1") == 0);
	static uint8_t buf[CHUNK];
	for (int i = 0; i < CHUNKS; i++) {
		struct net_frame f;
		CHECK_EQ(net_link_recv(&link, &f, buf, sizeof(buf), 5000000000ull), 0);
		CHECK_EQ(f.offset, (uint64_t)i * CHUNK);
		CHECK_EQ(f.channel, 5);
		CHECK_EQ(buf[0], i);
		CHECK_EQ(buf[CHUNK - 1], i);
	}
	struct net_frame f;
	CHECK_EQ(net_link_recv(&link, &f, buf, sizeof(buf), 5000000000ull), -ECONNRESET);
	CHECK(strcmp(link.why, "the peer closed the link") == 0);
	int status;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	net_link_close(&link);
	net_listener_close(&l);
}

static void strangers_are_refused_and_named(void)
{
	struct net_listener l = listen_on("10.255.0.1");
	char address[64];
	address_of(&l, address, sizeof(address));
	pid_t child = test_fork();
	if (child == 0) {
		struct net_link link;
		int err = net_connect(address, "stranger", &limits, 2000000000ull, &link);
		_exit(err == -ECONNRESET || err == -EPIPE ? T_PASS : T_FAIL);
	}
	struct net_link link;
	char refused[128] = "";
	CHECK_EQ(net_accept(&l, 5000000000ull, &link, refused, sizeof(refused)), -EACCES);
	CHECK(strcmp(refused, "tcp:127.0.0.1 (not on the allow-list)") == 0);
	int status;
	waitpid(child, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	net_listener_close(&l);
}

static void deadlines_not_hangs(void)
{
	struct net_listener l = listen_on("127.0.0.1");
	char address[64];
	address_of(&l, address, sizeof(address));
	struct net_link link;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	CHECK_EQ(net_accept(&l, 50000000ull, &link, NULL, 0), -ETIMEDOUT);
	uint64_t waited = now_ns(CLOCK_MONOTONIC) - t0;
	CHECK(waited >= 50000000ull && waited < 2000000000ull);

	/* A peer that connects and says nothing: the handshake's deadline. */
	pid_t child = raw_peer(address, false, "", 0, false);
	limits.handshake_ns = 100000000ull;
	l.limits = limits;
	char refused[128] = "";
	CHECK_EQ(net_accept(&l, 5000000000ull, &link, refused, sizeof(refused)), -ETIMEDOUT);
	CHECK(strstr(refused, "handshake") != NULL);
	stop(child);
	net_limits_defaults(&limits);
	l.limits = limits;

	/* Nothing to receive. */
	child = test_fork();
	if (child == 0) {
		struct net_link c;
		if (net_connect(address, "quiet", &limits, 2000000000ull, &c))
			_exit(T_FAIL);
		pause();
		_exit(T_PASS);
	}
	CHECK_EQ(net_accept(&l, 5000000000ull, &link, NULL, 0), 0);
	struct net_frame f;
	uint8_t buf[16];
	t0 = now_ns(CLOCK_MONOTONIC);
	CHECK_EQ(net_link_recv(&link, &f, buf, sizeof(buf), 50000000ull), -ETIMEDOUT);
	waited = now_ns(CLOCK_MONOTONIC) - t0;
	CHECK(waited >= 50000000ull && waited < 2000000000ull);

	/* The peer dies while the link is idle. */
	stop(child);
	CHECK_EQ(net_link_recv(&link, &f, buf, sizeof(buf), 5000000000ull), -ECONNRESET);
	net_link_close(&link);
	net_listener_close(&l);
}

static void half_a_frame_then_death(void)
{
	struct net_listener l = listen_on("127.0.0.1");
	char address[64];
	address_of(&l, address, sizeof(address));
	struct net_frame half = {.type = NET_FRAME_DATA, .transfer = 1, .total = 1000,
				 .length = 1000, .flags = NET_FLAG_LAST};
	uint8_t bytes[NET_FRAME_HEADER + 10] = {0};
	net_frame_encode(&half, bytes);
	pid_t child = raw_peer(address, true, bytes, sizeof(bytes), true);
	struct net_link link;
	CHECK_EQ(net_accept(&l, 5000000000ull, &link, NULL, 0), 0);
	CHECK(strcmp(link.peer_name, "evil") == 0);
	struct net_frame f;
	static uint8_t buf[2000];
	CHECK_EQ(net_link_recv(&link, &f, buf, sizeof(buf), 5000000000ull), -ECONNRESET);
	waitpid(child, NULL, 0);
	net_link_close(&link);
	net_listener_close(&l);
}

static void bytes_that_are_not_frames(void)
{
	struct net_listener l = listen_on("127.0.0.1");
	char address[64];
	address_of(&l, address, sizeof(address));

	/* Garbage instead of a hello. */
	char junk[NET_FRAME_HEADER];
	memset(junk, 'x', sizeof(junk));
	pid_t child = raw_peer(address, false, junk, sizeof(junk), false);
	struct net_link link;
	char refused[128] = "";
	CHECK_EQ(net_accept(&l, 5000000000ull, &link, refused, sizeof(refused)), -EPROTO);
	CHECK(strstr(refused, "bad magic") != NULL);
	stop(child);

	/* A valid hello, then a frame larger than the receiver's buffer. */
	struct net_frame big = {.type = NET_FRAME_DATA, .transfer = 1, .total = 100, .length = 100,
				.flags = NET_FLAG_LAST};
	uint8_t h[NET_FRAME_HEADER];
	net_frame_encode(&big, h);
	child = raw_peer(address, true, h, sizeof(h), false);
	CHECK_EQ(net_accept(&l, 5000000000ull, &link, NULL, 0), 0);
	struct net_frame f;
	uint8_t buf[16];
	CHECK_EQ(net_link_recv(&link, &f, buf, sizeof(buf), 5000000000ull), -EMSGSIZE);
	net_link_close(&link);
	stop(child);

	/* One that lies about its chunk. */
	struct net_frame liar = {.type = NET_FRAME_DATA, .transfer = 1, .offset = 90, .total = 100,
				 .length = 20, .flags = NET_FLAG_LAST};
	net_frame_encode(&liar, h);
	child = raw_peer(address, true, h, sizeof(h), false);
	CHECK_EQ(net_accept(&l, 5000000000ull, &link, NULL, 0), 0);
	CHECK_EQ(net_link_recv(&link, &f, buf, sizeof(buf), 5000000000ull), -EPROTO);
	CHECK(strcmp(link.why, "chunk outside its transfer") == 0);
	net_link_close(&link);
	stop(child);
	net_listener_close(&l);
}

static void bad_addresses(void)
{
	struct net_allow none = {.count = 0};
	struct net_listener l;
	struct net_link link;
	static const char *const bad[] = {"tcp:nohost", "udp:127.0.0.1:5", "tcp:[::1:80",
					  "tcp:127.0.0.1:", "tcp::80", "tcp:127.0.0.1:8x", NULL};
	for (int i = 0; bad[i]; i++) {
		CHECK_EQ(net_listen(bad[i], &none, "x", &limits, &l), -EINVAL);
		CHECK_EQ(net_connect(bad[i], "x", &limits, 1000000ull, &link), -EINVAL);
	}
	/* Nobody listens: refused at once, not after the deadline. */
	l = listen_on("127.0.0.1");
	char address[64];
	address_of(&l, address, sizeof(address));
	net_listener_close(&l);
	CHECK_EQ(net_connect(address, "x", &limits, 2000000000ull, &link), -ECONNREFUSED);
}

int main(void)
{
	watchdog(60);
	signal(SIGPIPE, SIG_IGN);
	net_limits_defaults(&limits);
	frames_arrive_intact_and_in_order();
	strangers_are_refused_and_named();
	deadlines_not_hangs();
	half_a_frame_then_death();
	bytes_that_are_not_frames();
	bad_addresses();
	return T_PASS;
}
