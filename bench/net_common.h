/* What the net benchmarks share (bench/, internal): lists of sizes, and the
 * link between two network namespaces, a veth pair whose sending end is
 * rate-limited with tc tbf, so that flows share one bottleneck queue as
 * applications share a NIC. Loopback has no such queue: there the CPU is
 * the link, and the CPU scheduler already orders flows of different
 * priorities. */
#ifndef RTACCEL_BENCH_NET_COMMON_H
#define RTACCEL_BENCH_NET_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_MAX_SIZES 16

/* "64K,1M,32M" into OUT (at most BENCH_MAX_SIZES, each 1..64M); the count.
 * A bad list exits 2 with a message naming PROGRAM. */
int bench_parse_sizes(const char *program, const char *list, uint64_t *out);

#define BENCH_NS_A_ADDR "10.203.0.1" /* the sending end */
#define BENCH_NS_B_ADDR "10.203.0.2" /* the receiving end */

extern char bench_ns_a[64], bench_ns_b[64];

/* Makes the namespaces and the link at RATE (as tc writes it); NULL, or
 * why not. They go when the program exits. */
const char *bench_link_up(const char *rate);
/* Namespaces someone else made (the RDMA test bed's guest): the receiving
 * end in RTACCEL_BENCH_NS_B, the sending end in RTACCEL_BENCH_NS_A. */
void bench_ns_given(void);
bool bench_ns_active(void);
/* Sockets the calling thread makes between enter and leave belong to
 * namespace NAME; without namespaces, both do nothing. */
void bench_enter_ns(const char *name);
void bench_leave_ns(void);

#endif
