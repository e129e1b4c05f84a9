/*
 * rtaccel/ros.h - rtaccel's executor for rcl, ROS 2's C client library.
 *
 * An rcl node's timers, subscriptions, services and clients are added to an
 * executor, each with its callback and, where it is part of one, its chain:
 * a timer or a subscription, then the subscriptions that each take what the
 * one before published. The executor runs them under one of three
 * policies, on the real handles:
 *
 *   RTACCEL_ROS_ROS2   rclcpp's SingleThreadedExecutor's order: a wait, then
 *                      every handle found ready then, timers first, then
 *                      subscriptions, services and clients, each kind in the
 *                      order added; only then a wait again (the polling
 *                      points of Casini et al., ECRTS 2019).
 *   RTACCEL_ROS_PICAS  a wait (without sleeping if anything is ready) before
 *                      every callback, and the ready callback of highest
 *                      priority runs first; among equals, ros2's order.
 *   RTACCEL_ROS_PAAM   picas, and each callback that declares accelerator
 *                      segments is registered with rtaccel-server as its
 *                      chain's callback: admission control and the analysis
 *                      see the ROS 2 chain, and the callback reaches the
 *                      server through its registration (call->accel).
 *
 * Words as in rtaccel's workload files and in rtaccel.ros (Python): a
 * priority is an integer, higher is more urgent. A callback's priority is
 * the one given to it (rtaccel_ros_callback_attr.priority), else its
 * group's, else that of the most critical chain holding it; a callback with
 * none runs after every callback that has one.
 *
 * Threads: an executor has one group, or more (rtaccel_ros_group_add); each
 * group is a thread of its own (the model of the callback-isolated
 * executor), pinned to its core and at its SCHED_FIFO priority where the
 * process may have them; refused, the thread runs at the best priority
 * allowed and rtaccel_ros_group_realtime() says so. rtaccel_ros_spin() runs
 * the first group in the calling thread and the others in threads it
 * starts, and returns once every group has stopped. It also starts a
 * watch, a thread at the caller's priority that wakes every tenth of
 * overrun_ns: it says which callback overran, and checks the graph's
 * types when the graph changes (allocating there, never in a group's
 * thread).
 *
 * Chains are measured without a change to the messages: a message's source
 * timestamp (rmw_message_info_t) falls within the execution of the callback
 * of the chain's previous step that published it, which says the chain's
 * instance. An instance starts at its timer's expected call time (or its
 * first message's publication) and ends when its last callback returns.
 *
 * Real-time paths: once spinning, dispatch allocates nothing and makes no
 * system call of its own (the rmw's wait and take make theirs); the
 * executor's memory is sized when handles are added.
 *
 * Conventions (rtaccel/accel.h's): functions return 0 or a negative errno
 * value and never touch errno; times are nanoseconds. Handles are added,
 * and chains declared, before the first spin (-EBUSY after). The rcl
 * entities stay the caller's: the executor neither initialises nor
 * finalises them, and they outlive it. Every function but
 * rtaccel_ros_stop() is called from one thread at a time.
 */
#ifndef RTACCEL_ROS_H
#define RTACCEL_ROS_H

#include <stddef.h>
#include <stdint.h>

#include <rcl/client.h>
#include <rcl/context.h>
#include <rcl/service.h>
#include <rcl/subscription.h>
#include <rcl/timer.h>

#include "rtaccel/accel.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef RTACCEL_API
#define RTACCEL_API __attribute__((visibility("default")))
#endif

enum rtaccel_ros_policy {
	RTACCEL_ROS_ROS2 = 0,
	RTACCEL_ROS_PICAS = 1,
	RTACCEL_ROS_PAAM = 2,
};

/* No priority given: the group's, else the chains'. */
#define RTACCEL_ROS_UNRANKED INT32_MIN

struct rtaccel_ros_executor;
struct rtaccel_ros_group;  /* a thread of the executor */
struct rtaccel_ros_handle; /* an added timer, subscription, service or client */

struct rtaccel_ros_executor_attr {
	uint32_t policy;        /* enum rtaccel_ros_policy */
	int32_t core;           /* the first group's core; -1: not pinned */
	int32_t fifo_priority;  /* its SCHED_FIFO priority 1..99; 0: none asked */
	uint32_t samples;       /* latencies kept per chain; 0: 4096 */
	const char *name;       /* on the timeline and in the server; NULL: "ros" */
	const char *socket_path; /* paam: the server's; NULL: $RTACCEL_SOCKET or default */
	/* A callback that runs longer than this is said on stderr, naming it
	 * and its chains, once a run (rtaccel_ros_spin's watch); 0: 1 s. */
	uint64_t overrun_ns;
	/* The node the subscriptions are of: with it, the watch also says of
	 * a publisher on a subscription's topic whose type is not the
	 * subscription's (it is never received). NULL: types not checked. */
	const rcl_node_t *node;
};

struct rtaccel_ros_group_attr {
	const char *name;       /* NULL: "group<N>" */
	int32_t core;           /* -1: not pinned */
	int32_t fifo_priority;  /* 1..99; 0: none asked */
	int32_t priority;       /* of its callbacks; RTACCEL_ROS_UNRANKED: the chains' */
};

/* What a callback is given. */
struct rtaccel_ros_call {
	void *arg;          /* the arg it was added with */
	void *msg;          /* subscription: the message taken; service: the request;
			     * client: the response; timer: NULL */
	void *response;     /* service: to fill, sent when the callback returns */
	/* paam: the callback's registration with rtaccel-server (its chain's),
	 * for rtaccel_call() and friends; otherwise NULL */
	struct rtaccel_registration *accel;
	struct rtaccel_ros_handle *handle;
	int64_t release_ns; /* timer: its expected call time; otherwise the
			     * message's publication (CLOCK_REALTIME ns) */
};

typedef void (*rtaccel_ros_callback_fn)(struct rtaccel_ros_call *call);

struct rtaccel_ros_callback_attr {
	const char *name;         /* NULL: made from its topic, service or period */
	int32_t priority;         /* RTACCEL_ROS_UNRANKED: its group's, else its chains' */
	struct rtaccel_ros_group *group; /* NULL: the executor's first */
	/* For the analysis (the bound beside its chains' latencies) and for
	 * the server (paam): its CPU WCET and accelerator segments. */
	uint64_t cpu_wcet_ns;
	uint32_t nsegments;
	struct rtaccel_segment_desc segments[RTACCEL_MAX_SEGMENTS];
	/* paam: the services it calls and their buffers' sizes */
	uint32_t nservices;
	struct rtaccel_service_need services[RTACCEL_MAX_SERVICES];
};

/* The attributes of a callback with nothing declared: no name, no priority,
 * the first group, no WCET, no segments. */
RTACCEL_API void rtaccel_ros_callback_attr_init(struct rtaccel_ros_callback_attr *attr);

/* Makes an executor for the rcl entities of CONTEXT (an initialised
 * rcl_context_t the caller keeps). ATTR NULL: ros2, unpinned, no FIFO.
 * -EINVAL: a bad policy, core or priority (a core outside the process's
 * affinity is -EINVAL too); -ENOMEM. Allocates. */
RTACCEL_API int rtaccel_ros_executor_create(rcl_context_t *context,
					    const struct rtaccel_ros_executor_attr *attr,
					    struct rtaccel_ros_executor **out);
/* Stops it if spinning in another thread (returning once that spin has),
 * unregisters from the server and frees it. NULL is ignored. */
RTACCEL_API void rtaccel_ros_executor_destroy(struct rtaccel_ros_executor *ex);

/* A group of its own thread. -EINVAL: bad core or priority; -EBUSY:
 * spinning. */
RTACCEL_API int rtaccel_ros_group_add(struct rtaccel_ros_executor *ex,
				      const struct rtaccel_ros_group_attr *attr,
				      struct rtaccel_ros_group **out);

/* Adds a handle. MSG (subscription), REQUEST and RESPONSE (service),
 * RESPONSE (client) are the caller's storage of the entity's type, taken
 * into and sent from. FN NULL is allowed for a timer only: its rcl
 * callback alone runs. ATTR NULL: nothing declared. OUT may be NULL.
 * -EINVAL: a NULL or invalid entity (finalised, or its node's), storage
 * missing, a group of another executor; -EEXIST: the entity is added
 * already; -EBUSY: spinning; -ENOMEM. */
RTACCEL_API int rtaccel_ros_add_timer(struct rtaccel_ros_executor *ex, rcl_timer_t *timer,
				      rtaccel_ros_callback_fn fn, void *arg,
				      const struct rtaccel_ros_callback_attr *attr,
				      struct rtaccel_ros_handle **out);
RTACCEL_API int rtaccel_ros_add_subscription(struct rtaccel_ros_executor *ex,
					     rcl_subscription_t *subscription, void *msg,
					     rtaccel_ros_callback_fn fn, void *arg,
					     const struct rtaccel_ros_callback_attr *attr,
					     struct rtaccel_ros_handle **out);
RTACCEL_API int rtaccel_ros_add_service(struct rtaccel_ros_executor *ex, rcl_service_t *service,
					void *request, void *response, rtaccel_ros_callback_fn fn,
					void *arg, const struct rtaccel_ros_callback_attr *attr,
					struct rtaccel_ros_handle **out);
RTACCEL_API int rtaccel_ros_add_client(struct rtaccel_ros_executor *ex, rcl_client_t *client,
				       void *response, rtaccel_ros_callback_fn fn, void *arg,
				       const struct rtaccel_ros_callback_attr *attr,
				       struct rtaccel_ros_handle **out);

struct rtaccel_ros_chain_attr {
	int32_t priority;     /* distinct among the executor's chains */
	uint64_t deadline_ns; /* 0: none (no misses counted, no bound asked) */
	/* A chain that starts with a subscription: the least time between its
	 * messages (a sensor's period), for the analysis and the server; 0
	 * with a timer first, whose period is taken. */
	uint64_t period_ns;
	uint32_t critical;    /* paam: 1 (admission guarantees its deadline) */
};

/* Declares a chain: STEPS[0] a timer or a subscription, the others
 * subscriptions, each taking what the one before publishes. -EINVAL: no
 * name or steps, a step of another executor, a service or client, a
 * handle twice; -EEXIST: the name or the priority is another chain's;
 * -E2BIG: over RTACCEL_MAX_CALLBACKS steps; -EBUSY: spinning. */
RTACCEL_API int rtaccel_ros_add_chain(struct rtaccel_ros_executor *ex, const char *name,
				      struct rtaccel_ros_handle *const *steps, size_t nsteps,
				      const struct rtaccel_ros_chain_attr *attr);

/* Runs the executor: every group until rtaccel_ros_stop() or the context's
 * shutdown, then returns 0. The first call prepares it (paam: registers
 * with the server; an error here, -ECONNREFUSED, -EDEADLK..., is returned
 * with the server's reason in rtaccel_ros_error()). -EALREADY: spinning. */
RTACCEL_API int rtaccel_ros_spin(struct rtaccel_ros_executor *ex);
/* Runs at most one callback of an executor of one group, waiting up to
 * TIMEOUT_NS (negative: forever) for one to be ready. 0: one ran;
 * -ETIMEDOUT: none was ready; -ECANCELED: stopped or shut down;
 * -EINVAL: the executor has more than one group (rtaccel_ros_spin);
 * -EALREADY: spinning in another thread. Its first call prepares the
 * executor as rtaccel_ros_spin()'s does, with the same errors (-EDEADLK:
 * admission refused a chain). No watch: overruns are not said. */
RTACCEL_API int rtaccel_ros_spin_once(struct rtaccel_ros_executor *ex, int64_t timeout_ns);
/* Makes every spin return after the callbacks under way. From any thread,
 * not from a signal handler (rcl_shutdown() of the context stops it too). */
RTACCEL_API int rtaccel_ros_stop(struct rtaccel_ros_executor *ex);
/* rtaccel_ros_stop(), then waits up to TIMEOUT_NS for the spin to return.
 * -ETIMEDOUT: a callback has not returned; rtaccel_ros_error() names it
 * and how long it has run (a thread cannot be ended safely: the program
 * decides, e.g. to exit). */
RTACCEL_API int rtaccel_ros_stop_wait(struct rtaccel_ros_executor *ex, int64_t timeout_ns);

/* Why the last call failed, where more can be said than its errno (the
 * server's refusal, an rcl error); "" otherwise. The executor's. */
RTACCEL_API const char *rtaccel_ros_error(const struct rtaccel_ros_executor *ex);

/* -- what was measured ------------------------------------------------------ */

struct rtaccel_ros_chain_stats {
	char name[RTACCEL_NAME_MAX];
	int32_t priority;
	uint64_t deadline_ns;
	uint64_t count;         /* instances measured (the last samples kept) */
	uint64_t deadline_misses;
	uint64_t unattributed;  /* messages of no instance of this executor's */
	uint64_t p50_ns, p99_ns, max_ns; /* over the samples kept; 0 with none */
	/* The analysis' bound on its latency (picas): bounded 1 where its
	 * premises hold: every callback declares a WCET, every chain a period,
	 * every group is pinned and got its SCHED_FIFO priority, and no group's
	 * load is one the kernel's real-time throttling stops (its callbacks'
	 * WCETs over their periods above kernel.sched_rt_runtime_us of each
	 * sched_rt_period_us). Else 0, and why_unbounded says which does not
	 * hold; bound_ns is still the analysis' figure where it could make one. */
	uint32_t bounded;
	uint64_t bound_ns;
	char why_unbounded[512];
};

/* The I-th chain's figures (in the order declared); -ENOENT past the last.
 * Sorts a copy of the samples: not for a real-time thread. */
RTACCEL_API int rtaccel_ros_chain_query(struct rtaccel_ros_executor *ex, size_t i,
					struct rtaccel_ros_chain_stats *out);

struct rtaccel_ros_dispatch_stats {
	uint64_t callbacks;        /* callbacks run */
	/* The executor's own cost per callback: from the wait's return (or the
	 * previous callback's end) to the callback's start, less the rmw's take */
	uint64_t p50_ns, p99_ns, max_ns;
	/* the rmw's waits that found something ready (one that slept first
	 * counts its sleep), and its takes */
	uint64_t wait_p50_ns, wait_p99_ns;
	uint64_t take_p50_ns, take_p99_ns; /* the rmw's take */
};
RTACCEL_API int rtaccel_ros_dispatch_query(struct rtaccel_ros_executor *ex,
					   struct rtaccel_ros_dispatch_stats *out);

/* What a handle has done, and the problems found on a subscription: a
 * publisher whose QoS it cannot match (the rmw's report) or of another
 * type (the watch's, with attr.node): its chain never runs. Each is said
 * once on stderr as found, and counted here. */
struct rtaccel_ros_handle_stats {
	char name[RTACCEL_NAME_MAX];
	uint64_t runs;
	uint64_t incompatible_type;  /* publishers found of another type */
	uint64_t overruns;           /* runs longer than overrun_ns */
	uint64_t incompatible_qos;   /* publishers found with incompatible QoS */
	int32_t last_qos_policy;     /* rmw_qos_policy_kind_t of the last */
	int32_t priority;            /* the priority it runs at */
};
RTACCEL_API int rtaccel_ros_handle_query(const struct rtaccel_ros_handle *handle,
					 struct rtaccel_ros_handle_stats *out);

/* The executor's first group: the one of attr.core and attr.fifo_priority,
 * spun in the thread that calls rtaccel_ros_spin(). NULL for NULL. */
RTACCEL_API struct rtaccel_ros_group *rtaccel_ros_executor_group(struct rtaccel_ros_executor *ex);

/* Whether the group's thread got its SCHED_FIFO priority: 1, 0 (none
 * asked, or refused: said once on stderr), -EAGAIN before it spun. */
RTACCEL_API int rtaccel_ros_group_realtime(const struct rtaccel_ros_group *group);

/* The callbacks run (the last kept of them), as Chrome/Perfetto trace
 * events, written to PATH: one complete slice each on its thread, its
 * chains in args. Returns the events written, or a negative errno. */
RTACCEL_API int rtaccel_ros_write_trace(struct rtaccel_ros_executor *ex, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* RTACCEL_ROS_H */
