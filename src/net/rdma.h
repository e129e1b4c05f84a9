/* What the rtaccel net layer knows of the rdma transport whether or not it
 * was built with rdma-core (rdma.c, rdma_none.c): RoCE v2 at Soft-RoCE's
 * 1024-byte MTU carries 1024 bytes of payload in each 1082-byte frame
 * (Ethernet, IPv4, UDP, BTH, ICRC); the window is outstanding sends, two
 * chunks unless told. */
#ifndef RTACCEL_NET_RDMA_H
#define RTACCEL_NET_RDMA_H

#define NET_RDMA_INFO                                                                          \
	{                                                                                      \
		.name = "rdma", .rdma_device = 1, .wire_payload = 1024, .wire_frame = 1082,    \
		.window_chunks = 2                                                             \
	}

#endif
