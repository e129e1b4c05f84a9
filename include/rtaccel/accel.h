/*
 * rtaccel/accel.h - client side of the rtaccel accelerator server (PAAM).
 *
 * A process connects to `rtaccel-server` over a Unix socket and registers
 * each callback that calls accelerator services, with the description of its
 * chain (priority, period, deadline, its callbacks' CPU and accelerator
 * WCETs). The server runs admission control with the PAAM response-time
 * analysis and, if the chain set stays schedulable, answers with a
 * shared-memory region for the callback: one request and one response buffer
 * per service, sized at registration, and a ring of request entries.
 *
 * Requests are zero-copy: write the input into rtaccel_request_buffer(),
 * submit, wait, read the output from rtaccel_response_buffer(). The submit and
 * completion paths allocate nothing and make no system call while the server's
 * worker is awake (it polls briefly after each request); a sleeping worker is
 * woken with one futex wake, a suspended client with one futex wait.
 *
 * Direct invocation (the baseline without a server) runs the same services in
 * the calling process: rtaccel_direct_open().
 *
 * Conventions (liburing's): functions return 0 or a negative errno value and
 * never touch errno; times are nanoseconds in uint64_t; names are NUL-terminated
 * and fit their arrays. A registration is used by one thread at a time; a
 * client (connection) may be shared by threads for register/unregister.
 *
 * fork(): a client and its registrations belong to the process that connected.
 * In a child forked from it, register, submit, wait and poll return
 * -ENOTCONN; unregister and close free the child's copies and leave the
 * parent's registrations as they are. A child that needs the server connects
 * anew. The server releases a client's registrations when the process that
 * connected ends, whatever its children do (a remote client's over rdma:
 * once its children too have exec'd or exited; see rtaccel/net.h).
 *
 * Request formats of the built-in services (little-endian, float = IEEE 754
 * binary32; the response is written at the response buffer's start):
 *   busy       {uint64_t ns}                                   -> nothing
 *   vecadd     {uint32_t n, pad; float a[n], b[n]}             -> float c[n]
 *   matmul     {uint32_t n, pad; float a[n*n], b[n*n]}         -> float c[n*n] (row-major)
 *   reduction  {uint32_t n, pad; float x[n]}                   -> double sum
 *   histogram  {uint32_t n, bins; float lo, hi; float x[n]}    -> uint32_t count[bins]
 * (the structs below spell the headers). The histogram's lo and hi are finite,
 * lo < hi; values outside [lo, hi), NaN among them, are not counted.
 */
#ifndef RTACCEL_ACCEL_H
#define RTACCEL_ACCEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Each public header stands alone: whichever comes first defines this. */
#ifndef RTACCEL_API
#define RTACCEL_API __attribute__((visibility("default")))
#endif

#define RTACCEL_NAME_MAX 48         /* chain, callback, executor names, with NUL */
#define RTACCEL_SERVICE_NAME_MAX 32 /* service and accelerator names, with NUL */
#define RTACCEL_MAX_SEGMENTS 8      /* accelerator segments per callback */
#define RTACCEL_MAX_CALLBACKS 16    /* callbacks per chain */
#define RTACCEL_MAX_SERVICES 8      /* services per registration */
#define RTACCEL_MAX_TRIGGERS 8      /* topics that trigger one callback */
#define RTACCEL_TOPIC_MAX 128       /* topic names, with NUL */
#define RTACCEL_MAX_BUFFER (64u << 20) /* largest request or response buffer */

/* Environment variable naming the server's socket; default below. */
#define RTACCEL_SOCKET_ENV "RTACCEL_SOCKET"
#define RTACCEL_SOCKET_DEFAULT "/run/rtaccel/server.sock"

/* How a chain's first callback is released (rtaccel_chain_desc.release). The
 * chains of one rtaccel_client_declare call that say RTACCEL_RELEASE_TOGETHER
 * start their timers at one instant (rtaccel run's runner starts every timer
 * of a run at its start): admission counts on it where their periods divide
 * one another (docs/analysis.md, item 5). Any other chain, or one only
 * registered, is taken to start at any time. */
enum rtaccel_release {
	RTACCEL_RELEASE_UNALIGNED = 0, /* started by the client, at any phase */
	RTACCEL_RELEASE_TOGETHER = 1,  /* at one instant with the declaration's others */
};

enum rtaccel_wait_mode {
	RTACCEL_WAIT_SUSPEND = 0, /* sleep on a futex until the server wakes the caller */
	RTACCEL_WAIT_SPIN = 1,    /* busy-wait on the completion flag (lowest latency) */
};

/* --- registration --------------------------------------------------------- */

struct rtaccel_segment_desc {
	char accelerator[RTACCEL_SERVICE_NAME_MAX]; /* informational: the workload's name */
	char service[RTACCEL_SERVICE_NAME_MAX];
	uint64_t wcet_ns; /* A_{i,j} */
};

struct rtaccel_callback_desc {
	char name[RTACCEL_NAME_MAX];
	char executor[RTACCEL_NAME_MAX];
	int32_t executor_core;     /* CPU the executor is pinned to */
	int32_t executor_priority; /* its SCHED_FIFO priority, 1..99 */
	uint64_t cpu_ns;           /* E_i */
	uint32_t wait;             /* enum rtaccel_wait_mode */
	uint32_t nsegments;
	struct rtaccel_segment_desc segments[RTACCEL_MAX_SEGMENTS];
	/* The topic it publishes ("" none) and the topics that trigger it, one
	 * message from each per firing. With them admission sees which firings
	 * belong to one chain alone and where a chain waits at a fusion (two or
	 * more triggers) for the chains that publish its other inputs. Without
	 * (0 triggers) a callback is taken to follow its predecessor, with no
	 * wait. The first callback of a chain starts at the chain's period. */
	char publishes[RTACCEL_TOPIC_MAX];
	uint32_t ntriggers;
	uint32_t reserved;
	char triggers[RTACCEL_MAX_TRIGGERS][RTACCEL_TOPIC_MAX];
};

/* A chain as the analysis sees it. Every process that registers a callback of
 * the chain sends the same description; the server refuses one that differs. */
struct rtaccel_chain_desc {
	char name[RTACCEL_NAME_MAX];
	int32_t priority;     /* higher is more critical */
	uint32_t critical;    /* 1: its deadline is guaranteed by admission control */
	uint64_t period_ns;   /* T_c, the first callback's timer */
	uint64_t deadline_ns; /* D_c <= T_c */
	uint32_t ncallbacks;  /* path order */
	uint32_t release;     /* enum rtaccel_release */
	struct rtaccel_callback_desc callbacks[RTACCEL_MAX_CALLBACKS];
};

struct rtaccel_service_need {
	char name[RTACCEL_SERVICE_NAME_MAX];
	uint32_t request_max;  /* bytes, at most RTACCEL_MAX_BUFFER */
	uint32_t response_max; /* bytes, at most RTACCEL_MAX_BUFFER */
};

struct rtaccel_registration_desc {
	struct rtaccel_chain_desc chain;
	uint32_t callback; /* index in chain.callbacks of the callback registering */
	uint32_t nservices;
	struct rtaccel_service_need services[RTACCEL_MAX_SERVICES];
};

/* What the server decided. bucket is the current one: admitting other chains can
 * change how priorities are down-sampled onto buckets. */
struct rtaccel_registration_info {
	uint64_t callback_id; /* the server's handle of this registration */
	uint32_t device;      /* device index the callback was assigned to (WFD) */
	uint32_t bucket;      /* device priority level serving it, 0 = lowest */
	int32_t priority;     /* request priority: its most critical chain's */
	uint32_t wait;        /* enum rtaccel_wait_mode */
};

struct rtaccel_client;       /* a connection to one server */
struct rtaccel_registration; /* one registered callback */

/* Connects to the server at socket_path (NULL: $RTACCEL_SOCKET, else
 * RTACCEL_SOCKET_DEFAULT). Allocates; blocks on connect. */
RTACCEL_API int rtaccel_client_connect(const char *socket_path, struct rtaccel_client **out);
/* Unregisters what is left and closes the connection. NULL is ignored. */
RTACCEL_API void rtaccel_client_close(struct rtaccel_client *client);

/* Registers one callback. On refusal returns a negative errno (-EPERM: the
 * policy does not allow the priority for this user; -EDEADLK: admission
 * control found a deadline miss; -EINVAL: malformed description; -EEXIST:
 * callback already registered; -EPROTONOSUPPORT: a server of another rtaccel
 * version) and, when why is not NULL, the server's reason,
 * e.g. "chain 'hot': bound 120.5 ms exceeds deadline 100 ms". Blocks for one
 * round trip; allocates. */
RTACCEL_API int rtaccel_client_register(struct rtaccel_client *client,
					const struct rtaccel_registration_desc *desc,
					struct rtaccel_registration **out, char *why, size_t why_len);

/* Registers several callbacks in decreasing order of accelerator utilisation
 * (sum of segment WCETs over period), so that the server's worst-fit device
 * assignment becomes worst-fit decreasing. out[i] answers descs[i]. Stops at
 * the first refusal (earlier ones stay registered) and returns its error. */
RTACCEL_API int rtaccel_client_register_all(struct rtaccel_client *client,
					    const struct rtaccel_registration_desc *descs, size_t n,
					    struct rtaccel_registration **out, char *why,
					    size_t why_len);

/* Declares chains to admission control without registering a callback: the
 * chains of a system whose processes register one by one, or that call no
 * accelerator at all but share executors and fusions with chains that do.
 * The n chains are admitted together (one analysis of them all with what is
 * admitted, so a fusion's inputs may come in any order) or not at all; a
 * chain admitted before takes another reference, and a later registration
 * of one of their callbacks finds its chain admitted (its description must
 * be the same, topics included). They stay admitted until the client is
 * closed. Refusals as rtaccel_client_register's; -EOPNOTSUPP for a client
 * connected to a remote gateway (declare on the server's node). Set-up
 * time: one round trip per chain. */
RTACCEL_API int rtaccel_client_declare(struct rtaccel_client *client,
				       const struct rtaccel_chain_desc *chains, size_t n, char *why,
				       size_t why_len);

/* Ends a registration; waits for none of its requests. NULL is ignored. */
RTACCEL_API void rtaccel_client_unregister(struct rtaccel_registration *reg);

RTACCEL_API void rtaccel_registration_query(const struct rtaccel_registration *reg,
					   struct rtaccel_registration_info *info);

/* Index of a service among the registration's, or -ENOENT. */
RTACCEL_API int rtaccel_service_index(const struct rtaccel_registration *reg, const char *name);
/* The service's buffers in the shared region (valid until unregister); *cap
 * receives the size registered. */
RTACCEL_API void *rtaccel_request_buffer(struct rtaccel_registration *reg, int service,
					 size_t *cap);
RTACCEL_API void *rtaccel_response_buffer(struct rtaccel_registration *reg, int service,
					  size_t *cap);

/* An asynchronous request in flight. */
struct rtaccel_ticket {
	uint32_t entry;
	uint32_t state; /* the entry's state word when submitted */
};

/* Submits request_len bytes from the service's request buffer. The buffer must
 * not change until the request completes. -EBUSY: as many requests in flight
 * as the ring has entries. No allocation, no system call unless the serving
 * worker sleeps (then one futex wake). */
RTACCEL_API int rtaccel_submit(struct rtaccel_registration *reg, int service, size_t request_len,
			       struct rtaccel_ticket *ticket);

/* Waits for a submitted request, in the registration's wait mode, at most
 * timeout_ns (0: no limit). Returns the service's status (0 or a negative errno,
 * e.g. -EINVAL for a request the server refused), -ETIMEDOUT (the request stays
 * in flight; wait again), or -EPIPE when the server died. *response_len, if not
 * NULL, receives the bytes written to the response buffer. */
RTACCEL_API int rtaccel_wait(struct rtaccel_registration *reg, struct rtaccel_ticket *ticket,
			     uint64_t timeout_ns, size_t *response_len);

/* Non-blocking: -EAGAIN while the request runs, else as rtaccel_wait. */
RTACCEL_API int rtaccel_poll(struct rtaccel_registration *reg, struct rtaccel_ticket *ticket,
			     size_t *response_len);

/* Submit then wait (a synchronous request). */
RTACCEL_API int rtaccel_call(struct rtaccel_registration *reg, int service, size_t request_len,
			     uint64_t timeout_ns, size_t *response_len);

/* Timestamps (CLOCK_MONOTONIC ns) of the last completed request on the ticket's
 * entry: submitted by the client, started and ended by the server's worker. */
struct rtaccel_request_times {
	uint64_t submit_ns;
	uint64_t start_ns;
	uint64_t end_ns;
};
RTACCEL_API int rtaccel_request_timestamps(const struct rtaccel_registration *reg,
				      const struct rtaccel_ticket *ticket,
				      struct rtaccel_request_times *times);

/* The hops of the last request through a server on another node (a client
 * connected to "tcp:..."), beside rtaccel_request_timestamps' times:
 * stamped on the server's node (gateway_*) and on the client's (arrival_ns,
 * and submit_ns there), so comparable across the two only where they share
 * a clock, as network namespaces of one machine do. */
struct rtaccel_remote_times {
	uint64_t gateway_arrival_ns; /* the gateway's link had the request whole */
	uint64_t gateway_taken_ns;   /* the gateway's thread for the registration took it */
	uint64_t gateway_reply_ns;   /* the gateway sent the response */
	uint64_t arrival_ns;	     /* the client's link had the response whole */
};
/* 0 once the ticket's request completed; -EINVAL for a registration with a
 * server on this node, -ESTALE for an older ticket, -EAGAIN while it runs. */
RTACCEL_API int rtaccel_request_remote_times(const struct rtaccel_registration *reg,
					const struct rtaccel_ticket *ticket,
					struct rtaccel_remote_times *times);

/* --- direct invocation (baseline) --------------------------------------- */

/* Whether `backend` ("cpu", "opencl", "cuda") finds a device on this machine:
 * 1 if it does, 0 if not, -ENOENT for an unknown name. `detail` (may be NULL)
 * gets one NUL-terminated line: the devices, or why there is none (the CUDA
 * runtime's reason, say). What rtaccel-server --list-backends prints. */
RTACCEL_API int rtaccel_backend_probe(const char *backend, char *detail, size_t detail_len);

/* The calling process drives the device itself: backend "cpu" runs each call
 * on `device` (a core) under SCHED_RR at `priority` (0: SCHED_OTHER), equal
 * for all processes so that they time-share it; "opencl" and "cuda" open the
 * process's own context on device `device` (cuda: one stream per calling
 * thread, at the lowest stream priority). Allocates. */
struct rtaccel_direct;
RTACCEL_API int rtaccel_direct_open(const char *backend, int device, int priority,
				    struct rtaccel_direct **out);
RTACCEL_API void rtaccel_direct_close(struct rtaccel_direct *direct);
/* Runs a service to completion in the calling thread. The cpu backend moves
 * the thread to the device core for the call and back (two system calls). */
RTACCEL_API int rtaccel_direct_call(struct rtaccel_direct *direct, const char *service,
				    const void *request, size_t request_len, void *response,
				    size_t response_cap, size_t *response_len);
/* Makes [base, base + len) memory the device reads and writes the way it does
 * the server's shared regions, until rtaccel_direct_detach(): on cuda
 * page-locked, so that its copies are DMA at the bus's rate (from pageable
 * memory they go through a staging buffer, several times slower); on cpu and
 * opencl there is nothing to do. Direct calls on it then cost what the
 * server's requests cost. -EINVAL for an empty or null range, -EEXIST for one
 * already attached, -EIO where the device refuses (cuda's reason on stderr). */
RTACCEL_API int rtaccel_direct_attach(struct rtaccel_direct *direct, void *base, size_t len);
RTACCEL_API void rtaccel_direct_detach(struct rtaccel_direct *direct, void *base);

/* --- request headers of the built-in services -------------------------- */

struct rtaccel_busy_request {
	uint64_t ns;
};
struct rtaccel_vector_request { /* vecadd, matmul, reduction */
	uint32_t n;
	uint32_t reserved;
	/* float data follows */
};
struct rtaccel_histogram_request {
	uint32_t n;
	uint32_t bins;
	float lo;
	float hi;
	/* float x[n] follows */
};

#ifdef __cplusplus
}
#endif

#endif
