/* Network namespaces joined by veth pairs (core, internal; C and C++):
 * rtaccel run's nodes, the net benchmarks' link and the remote-request
 * benchmark's two nodes are all made here, through iproute2's ip and tc,
 * which need root (CAP_NET_ADMIN). Each call runs the programs and waits;
 * a failure is -1 with the command and what it said in WHY. */
#ifndef RTACCEL_CORE_NETNS_H
#define RTACCEL_CORE_NETNS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where program NAME is: iproute2's live in sbin, which a user's PATH may
 * not name (BUF, or NAME itself when it is in none of them). */
const char *rtaccel_tool_path(const char *name, char *buf, size_t n);
/* Runs ARGV (a NULL-terminated list, found as above) and waits for it. */
int rtaccel_tool(const char *const *argv, char *why, size_t why_len);

/* ip netns add NS, with its loopback up. */
int rtaccel_netns_add(const char *ns, char *why, size_t why_len);
/* ip netns del NS; quiet: best effort. */
void rtaccel_netns_del(const char *ns);

/* One end of a veth pair. */
struct rtaccel_veth_end {
	const char *ns;	      /* the namespace it goes into */
	const char *dev;      /* its interface (at most 15 characters) */
	const char *address;  /* "10.0.0.1/24" */
	const char *rate;     /* tc tbf on its egress at this rate ("100mbit"); NULL: none */
	uint64_t burst_bytes; /* tbf: the bucket */
	unsigned latency_ms;  /* tbf: how long a packet may wait in it */
};

/* A veth pair between END[0] and END[1]: each end moved into its
 * namespace, addressed, up, and rate-limited where it says. */
int rtaccel_veth_join(const struct rtaccel_veth_end end[2], char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif /* RTACCEL_CORE_NETNS_H */
