/* How a test says that it, or a part of it, could not run here: a skip
 * (exit 77, which ctest reports as "Skipped") with its reason on stdout, in
 * one form that the suite's summary (tools/test-skips.sh) prints.
 *
 * A skip names what the machine lacks, one of:
 *   root     uid 0 (namespaces, cgroups, another uid)
 *   fifo     SCHED_FIFO (root, CAP_SYS_NICE or RLIMIT_RTPRIO, and an RT budget)
 *   cores2   two usable cores
 *   netns    network namespaces, veth and tc
 *   cgroup2  a writable cgroup v2 hierarchy
 *   cpuset   a cpuset cgroup to make (v1's hierarchy, or v2's controller)
 *   memcg    a memory cgroup to make (v1's hierarchy, or v2's controller)
 *   qemu     QEMU and a guest kernel (the RDMA tests)
 *   seccomp  seccomp filters (the no-system-call tests)
 *   cuda     a CUDA device
 *   opencl   an OpenCL device (PoCL's will do)
 *   rdma     an RDMA device (Soft-RoCE in the QEMU guest, tools/testbed)
 * RTACCEL_TEST_REQUIRE lists, comma separated (or "all"), what the machine
 * running the suite is known to have: CI's does (.ci/run). There a skip for
 * one of them is a failure, so that a green run never hides a test that did
 * not run. The Python tests follow the same rule (conftest.py's needs()). */
#ifndef RTACCEL_TESTS_SKIP_H
#define RTACCEL_TESTS_SKIP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_SKIP 77

/* Whether RTACCEL_TEST_REQUIRE says this machine has NEED. */
static inline int test_required(const char *need)
{
	const char *list = getenv("RTACCEL_TEST_REQUIRE");
	if (!list)
		return 0;
	const size_t len = strlen(need);
	for (const char *p = list; *p;) {
		const size_t n = strcspn(p, ",");
		if ((n == 3 && !strncmp(p, "all", 3)) || (n == len && !strncmp(p, need, len)))
			return 1;
		p += n + (p[n] == ',');
	}
	return 0;
}

/* Says that a part of the test did not run, for want of NEED, and returns
 * the exit status the whole test must end with when every part that ran
 * passed: T_SKIP, or 1 where NEED is required. */
static inline int test_skip_part(const char *need, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline int test_skip_part(const char *need, const char *fmt, ...)
{
	const int required = test_required(need);
	va_list ap;
	va_start(ap, fmt);
	fputs(required ? "FAIL: required " : "SKIP: needs ", stdout);
	fputs(need, stdout);
	fputs(": ", stdout);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	if (required)
		fputs(" (RTACCEL_TEST_REQUIRE says this machine has it)", stdout);
	fputc('\n', stdout);
	fflush(stdout);
	return required ? 1 : T_SKIP;
}

/* Ends the test: skipped for want of NEED, or failed where NEED is required. */
#define test_skip(need, ...) exit(test_skip_part(need, __VA_ARGS__))

#endif /* RTACCEL_TESTS_SKIP_H */
