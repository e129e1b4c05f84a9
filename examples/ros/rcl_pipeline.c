/*
 * A C node on rcl under rtaccel's executor: a sensor's timer publishes,
 * a filter takes it and publishes on, a controller takes that; the three
 * are one chain, measured from the timer's due time to the controller's end.
 *
 *   rcl_pipeline [ros2|picas] [SECONDS]
 *
 * Prints the chain's latencies, and the analysis' bound under picas. What
 * makes it rtaccel's is the executor: the node itself is plain rcl.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <rtaccel/ros.h>

#include <rcl/error_handling.h>
#include <rcl/rcl.h>
#include <std_msgs/msg/int64.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MS 1000000LL

struct stage {
	rcl_publisher_t *out; /* NULL: the chain's end */
	long work_us;
};

static void burn_us(long us)
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do
		clock_gettime(CLOCK_MONOTONIC, &now);
	while ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000 < us);
}

static void run_stage(struct rtaccel_ros_call *call)
{
	struct stage *stage = call->arg;
	burn_us(stage->work_us);
	if (stage->out) {
		std_msgs__msg__Int64 msg = {.data = call->release_ns};
		if (rcl_publish(stage->out, &msg, NULL) != RCL_RET_OK) {
			fprintf(stderr, "rcl_pipeline: publish: %s\n", rcl_get_error_string().str);
			rcl_reset_error();
		}
	}
}

static int fail(const char *what)
{
	fprintf(stderr, "rcl_pipeline: %s: %s\n", what, rcl_get_error_string().str);
	return 1;
}

int main(int argc, char **argv)
{
	uint32_t policy = argc > 1 && !strcmp(argv[1], "ros2") ? RTACCEL_ROS_ROS2 : RTACCEL_ROS_PICAS;
	int seconds = argc > 2 ? atoi(argv[2]) : 2;
	if (argc > 1 && strcmp(argv[1], "ros2") && strcmp(argv[1], "picas")) {
		fprintf(stderr, "usage: rcl_pipeline [ros2|picas] [SECONDS]\n");
		return 2;
	}

	rcl_context_t context = rcl_get_zero_initialized_context();
	rcl_init_options_t options = rcl_get_zero_initialized_init_options();
	rcl_allocator_t allocator = rcl_get_default_allocator();
	if (rcl_init_options_init(&options, allocator) || rcl_init(argc, (const char **)argv, &options, &context))
		return fail("rcl_init");
	rcl_node_t node = rcl_get_zero_initialized_node();
	rcl_node_options_t node_options = rcl_node_get_default_options();
	if (rcl_node_init(&node, "rcl_pipeline", "", &context, &node_options))
		return fail("rcl_node_init");
	const rosidl_message_type_support_t *type = ROSIDL_GET_MSG_TYPE_SUPPORT(std_msgs, msg, Int64);
	rcl_publisher_t raw = rcl_get_zero_initialized_publisher(), filtered = rcl_get_zero_initialized_publisher();
	rcl_subscription_t raw_in = rcl_get_zero_initialized_subscription();
	rcl_subscription_t filtered_in = rcl_get_zero_initialized_subscription();
	rcl_publisher_options_t pub_options = rcl_publisher_get_default_options();
	rcl_subscription_options_t sub_options = rcl_subscription_get_default_options();
	if (rcl_publisher_init(&raw, &node, type, "raw", &pub_options) ||
	    rcl_publisher_init(&filtered, &node, type, "filtered", &pub_options) ||
	    rcl_subscription_init(&raw_in, &node, type, "raw", &sub_options) ||
	    rcl_subscription_init(&filtered_in, &node, type, "filtered", &sub_options))
		return fail("publishers and subscriptions");
	rcl_clock_t clock;
	rcl_timer_t timer = rcl_get_zero_initialized_timer();
	if (rcl_clock_init(RCL_STEADY_TIME, &clock, &allocator) ||
	    rcl_timer_init2(&timer, &clock, &context, 100 * MS, NULL, allocator, true))
		return fail("the timer");

	/* pinned, at SCHED_FIFO 10 where the process may have it (refused: said,
	 * and the chain has no bound) */
	struct rtaccel_ros_executor_attr attr = {.policy = policy, .core = 0, .fifo_priority = 10, .node = &node};
	struct rtaccel_ros_executor *ex;
	int err = rtaccel_ros_executor_create(&context, &attr, &ex);
	if (err) {
		fprintf(stderr, "rcl_pipeline: executor: %s\n", strerror(-err));
		return 1;
	}
	struct stage sense = {&raw, 1000}, filter = {&filtered, 2000}, act = {NULL, 3000};
	struct rtaccel_ros_callback_attr a_sense, a_filter, a_act;
	rtaccel_ros_callback_attr_init(&a_sense);
	rtaccel_ros_callback_attr_init(&a_filter);
	rtaccel_ros_callback_attr_init(&a_act);
	a_sense.name = "sense", a_sense.cpu_wcet_ns = 2 * MS;
	a_filter.name = "filter", a_filter.cpu_wcet_ns = 3 * MS;
	a_act.name = "act", a_act.cpu_wcet_ns = 4 * MS;
	std_msgs__msg__Int64 m_raw, m_filtered;
	struct rtaccel_ros_handle *steps[3];
	struct rtaccel_ros_chain_attr chain = {.priority = 10, .deadline_ns = 100 * MS};
	if ((err = rtaccel_ros_add_timer(ex, &timer, run_stage, &sense, &a_sense, &steps[0])) ||
	    (err = rtaccel_ros_add_subscription(ex, &raw_in, &m_raw, run_stage, &filter, &a_filter, &steps[1])) ||
	    (err = rtaccel_ros_add_subscription(ex, &filtered_in, &m_filtered, run_stage, &act, &a_act,
						&steps[2])) ||
	    (err = rtaccel_ros_add_chain(ex, "control", steps, 3, &chain))) {
		fprintf(stderr, "rcl_pipeline: %s (%s)\n", rtaccel_ros_error(ex), strerror(-err));
		return 1;
	}

	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		err = rtaccel_ros_spin_once(ex, 200 * MS);
		if (err && err != -ETIMEDOUT) {
			fprintf(stderr, "rcl_pipeline: spin: %s (%s)\n", rtaccel_ros_error(ex), strerror(-err));
			return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec < seconds);

	struct rtaccel_ros_chain_stats stats;
	rtaccel_ros_chain_query(ex, 0, &stats);
	printf("chain %s: %llu instances, p50 %.2f ms, p99 %.2f ms, max %.2f ms, %llu over its deadline; ", stats.name,
	       (unsigned long long)stats.count, (double)stats.p50_ns / 1e6, (double)stats.p99_ns / 1e6, (double)stats.max_ns / 1e6,
	       (unsigned long long)stats.deadline_misses);
	if (stats.bounded)
		printf("bound %.2f ms\n", (double)stats.bound_ns / 1e6);
	else
		printf("no bound: %s\n", stats.why_unbounded);

	rtaccel_ros_executor_destroy(ex);
	if (rcl_timer_fini(&timer) || rcl_clock_fini(&clock) || rcl_subscription_fini(&filtered_in, &node) ||
	    rcl_subscription_fini(&raw_in, &node) || rcl_publisher_fini(&filtered, &node) ||
	    rcl_publisher_fini(&raw, &node) || rcl_node_fini(&node) || rcl_shutdown(&context) ||
	    rcl_context_fini(&context) || rcl_init_options_fini(&options))
		return fail("finishing");
	return stats.count > 0 ? 0 : 1;
}
