/* The transports as the layers above see them (rtaccel/net.h): found by
 * name or by an address's scheme, in registration order, each with the
 * figures the analysis takes; and an address of no transport is refused by
 * every generic entry point. */
#include "net/transport.h"
#include "rtaccel/net.h"
#include "test_util.h"

static void found_by_name_and_by_address(void)
{
	const struct rtaccel_net_transport *tcp = rtaccel_net_transport_find("tcp");
	CHECK(tcp != NULL);
	CHECK(rtaccel_net_transport_find("tcp:10.0.0.2:7400") == tcp);
	CHECK(rtaccel_net_transport_find("shm:camera") == rtaccel_net_transport_find("shm"));
	CHECK(rtaccel_net_transport_find("tcpx:1.2.3.4:5") == NULL);
	CHECK(rtaccel_net_transport_find("tc") == NULL);
	CHECK(rtaccel_net_transport_find("udp:1.2.3.4:5") == NULL);
	CHECK(rtaccel_net_transport_find("") == NULL);
	CHECK(rtaccel_net_transport_find(NULL) == NULL);
}

static void listed_in_order(void)
{
	static const char *const names[] = {"tcp", "rdma", "shm"};
	int n = 0;
	for (const struct rtaccel_net_transport *t; (t = rtaccel_net_transport_at(n)); n++) {
		CHECK(n < 3);
		CHECK(strcmp(t->name, names[n]) == 0);
		CHECK(t->wire_payload > 0 && t->wire_payload <= t->wire_frame);
	}
	CHECK_EQ(n, 3);
	CHECK(rtaccel_net_transport_at(-1) == NULL);
}

static void figures(void)
{
	const struct rtaccel_net_transport *tcp = rtaccel_net_transport_find("tcp"),
					   *rdma = rtaccel_net_transport_find("rdma"),
					   *shm = rtaccel_net_transport_find("shm");
	CHECK_EQ(rtaccel_net_default_window(tcp, 65536), 2u * 65536);
	CHECK_EQ(rtaccel_net_default_window(rdma, 65536), 2u * 65536);
	CHECK_EQ(rtaccel_net_default_window(shm, 65536), 4u << 20);
	CHECK(!tcp->one_machine && !rdma->one_machine && shm->one_machine);
	CHECK(rdma->rdma_device && !tcp->rdma_device && !shm->rdma_device);
	CHECK_EQ(tcp->beyond_window, 64u << 10);
}

static void no_transport_no_link(void)
{
	struct net_limits limits;
	net_limits_defaults(&limits);
	struct net_allow none = {.count = 0};
	struct net_listener l;
	struct net_link link;
	CHECK_EQ(net_listen("udp:127.0.0.1:0", &none, "x", &limits, &l), -EINVAL);
	CHECK(l.transport == NULL);
	net_listener_close(&l); /* a listener that never opened closes as a no-op */
	CHECK_EQ(net_connect("carrier-pigeon", "x", &limits, 1000000ull, &link), -EINVAL);
	CHECK(link.transport == NULL);
	net_link_close(&link);
	CHECK_EQ(net_link_send(&link, &(struct net_frame){.type = NET_FRAME_BYE}, NULL, 0, 0), -EBADF);
}

int main(void)
{
	watchdog(10);
	found_by_name_and_by_address();
	listed_in_order();
	figures();
	no_transport_no_link();
	return T_PASS;
}
