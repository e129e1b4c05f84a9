/* See net_common.h. */
#include "net_common.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/netns.h"
#include "core/size.h"

int bench_parse_sizes(const char *program, const char *list, uint64_t *out)
{
	int n = 0;
	char *copy = strdup(list), *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t v;
		if (n == BENCH_MAX_SIZES || rtaccel_parse_size(tok, 1, 64ull << 20, &v) < 0) {
			fprintf(stderr, "%s: bad size '%s' (at most %d sizes, each 1..64M, K/M suffixes)\n",
				program, tok, BENCH_MAX_SIZES);
			exit(2);
		}
		out[n++] = v;
	}
	free(copy);
	if (!n) {
		fprintf(stderr, "%s: no sizes in '%s'\n", program, list);
		exit(2);
	}
	return n;
}

char bench_ns_a[64], bench_ns_b[64];
static int home_ns = -1;
static bool made_link;

static void link_down(void)
{
	if (made_link) {
		rtaccel_netns_del(bench_ns_a);
		rtaccel_netns_del(bench_ns_b);
	}
	made_link = false;
}

const char *bench_link_up(const char *rate)
{
	static char why[768];
	int pid = (int)getpid();
	snprintf(bench_ns_a, sizeof(bench_ns_a), "rtaccel-bench-a-%d", pid);
	snprintf(bench_ns_b, sizeof(bench_ns_b), "rtaccel-bench-b-%d", pid);
	atexit(link_down);
	made_link = true;
	char dev_a[16], dev_b[16];
	snprintf(dev_a, sizeof(dev_a), "rtbA%d", pid);
	snprintf(dev_b, sizeof(dev_b), "rtbB%d", pid);
	/* the sending end only: the receiver's acknowledgements go unshaped */
	const struct rtaccel_veth_end ends[2] = {
		{bench_ns_a, dev_a, BENCH_NS_A_ADDR "/24", rate, 64 << 10, 20},
		{bench_ns_b, dev_b, BENCH_NS_B_ADDR "/24", NULL, 0, 0},
	};
	if (rtaccel_netns_add(bench_ns_a, why, sizeof(why)) ||
	    rtaccel_netns_add(bench_ns_b, why, sizeof(why)) ||
	    rtaccel_veth_join(ends, why, sizeof(why)))
		return why;
	home_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	return NULL;
}

void bench_ns_given(void)
{
	const char *a = getenv("RTACCEL_BENCH_NS_A"), *b = getenv("RTACCEL_BENCH_NS_B");
	if (!a || !b || !*a || !*b)
		return;
	snprintf(bench_ns_a, sizeof(bench_ns_a), "%s", a);
	snprintf(bench_ns_b, sizeof(bench_ns_b), "%s", b);
	home_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
}

bool bench_ns_active(void) { return home_ns >= 0; }

static void setns_or_die(int fd, const char *name)
{
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "rtaccel bench: cannot enter network namespace %s: %s\n", name,
			strerror(errno));
		exit(1);
	}
}

void bench_enter_ns(const char *name)
{
	if (home_ns < 0)
		return;
	char path[128];
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	setns_or_die(fd, name);
	close(fd);
}

void bench_leave_ns(void)
{
	if (home_ns >= 0)
		setns_or_die(home_ns, "of this process");
}
