/* What the net layer's tests share: the transport named on the command line
 * and, for rdma, the device address (RTACCEL_RDMA_ADDR, 127.0.0.1 if unset)
 * and the skip where no device serves it. */
#ifndef RTACCEL_TESTS_NET_TEST_H
#define RTACCEL_TESTS_NET_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtaccel/net.h"
#include "test_util.h"

static inline const char *rdma_addr(void)
{
	const char *a = getenv("RTACCEL_RDMA_ADDR");
	return a && *a ? a : "127.0.0.1";
}

/* The transport in ARGV[1] (tcp, shm or rdma), or exit 2 with the usage;
 * exit 77 (skip) for rdma without a device. */
static inline const char *transport_of(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "shm") && strcmp(argv[1], "rdma"))) {
		fprintf(stderr, "usage: %s tcp|shm|rdma\n", argv[0]);
		exit(2);
	}
	if (strcmp(argv[1], "rdma") == 0) {
		char want[80];
		snprintf(want, sizeof(want), "rdma:%s:0", rdma_addr());
		const char *allow[] = {rdma_addr()};
		rtaccel_net_listener_t *l;
		int err = rtaccel_net_listen(want, allow, 1, "probe", NULL, &l);
		if (err)
			test_skip("rdma", "no RDMA device serves %s (%s)", want, strerror(-err));
		rtaccel_net_listener_close(l);
	}
	return argv[1];
}

#endif
