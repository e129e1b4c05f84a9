/* See netns.h. */
#include "core/netns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *rtaccel_tool_path(const char *name, char *buf, size_t n)
{
	static const char *const dirs[] = {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(buf, n, "%s%s", dirs[i], name);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return name;
}

/* ARGV as one line, for messages. */
static void command_line(const char *const *argv, char *out, size_t n)
{
	size_t used = 0;
	out[0] = 0;
	for (int i = 0; argv[i] && used < n; i++)
		used += (size_t)snprintf(out + used, n - used, "%s%s", i ? " " : "", argv[i]);
}

int rtaccel_tool(const char *const *argv, char *why, size_t why_len)
{
	int err_pipe[2];
	if (pipe2(err_pipe, O_CLOEXEC) < 0) {
		snprintf(why, why_len, "pipe: %s", strerror(errno));
		return -1;
	}
	char path[256];
	const char *program = rtaccel_tool_path(argv[0], path, sizeof(path));
	const pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, why_len, "fork: %s", strerror(errno));
		close(err_pipe[0]);
		close(err_pipe[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(err_pipe[1], STDERR_FILENO);
		const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		execv(program, (char *const *)argv);
		dprintf(STDERR_FILENO, "%s not found (install iproute2)", argv[0]);
		_exit(127);
	}
	close(err_pipe[1]);
	/* Read to the end, keeping the first of it: a child that says more
	 * than fits must not block on a full pipe while we wait for it. */
	char said[512], rest[512];
	size_t len = 0;
	for (ssize_t n;;) {
		char *to = len + 1 < sizeof(said) ? said + len : rest;
		size_t room = len + 1 < sizeof(said) ? sizeof(said) - 1 - len : sizeof(rest);
		if ((n = read(err_pipe[0], to, room)) == 0 || (n < 0 && errno != EINTR))
			break;
		if (n > 0 && to == said + len)
			len += (size_t)n;
	}
	said[len] = 0;
	close(err_pipe[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	while (len && (said[len - 1] == '\n' || said[len - 1] == ' '))
		said[--len] = 0;
	char line[256];
	command_line(argv, line, sizeof(line));
	snprintf(why, why_len, "'%s' failed%s%s", line, len ? ": " : "", said);
	return -1;
}

int rtaccel_netns_add(const char *ns, char *why, size_t why_len)
{
	const char *add[] = {"ip", "netns", "add", ns, NULL};
	const char *lo[] = {"ip", "-n", ns, "link", "set", "lo", "up", NULL};
	return rtaccel_tool(add, why, why_len) || rtaccel_tool(lo, why, why_len) ? -1 : 0;
}

void rtaccel_netns_del(const char *ns)
{
	char why[64];
	const char *del[] = {"ip", "netns", "del", ns, NULL};
	(void)rtaccel_tool(del, why, sizeof(why));
}

/* END into its namespace, addressed, up and rate-limited. */
static int set_up_end(const struct rtaccel_veth_end *end, char *why, size_t why_len)
{
	const char *move[] = {"ip", "link", "set", end->dev, "netns", end->ns, NULL};
	const char *addr[] = {"ip", "-n", end->ns, "addr", "add", end->address, "dev", end->dev, NULL};
	const char *up[] = {"ip", "-n", end->ns, "link", "set", end->dev, "up", NULL};
	if (rtaccel_tool(move, why, why_len) || rtaccel_tool(addr, why, why_len) ||
	    rtaccel_tool(up, why, why_len))
		return -1;
	if (!end->rate)
		return 0;
	char burst[32], latency[32];
	snprintf(burst, sizeof(burst), "%llu", (unsigned long long)end->burst_bytes);
	snprintf(latency, sizeof(latency), "%ums", end->latency_ms);
	const char *tbf[] = {"tc", "-n", end->ns, "qdisc", "add", "dev", end->dev, "root", "tbf",
			     "rate", end->rate, "burst", burst, "latency", latency, NULL};
	return rtaccel_tool(tbf, why, why_len);
}

int rtaccel_veth_join(const struct rtaccel_veth_end end[2], char *why, size_t why_len)
{
	const char *pair[] = {"ip", "link", "add", end[0].dev, "type", "veth",
			      "peer", "name", end[1].dev, NULL};
	if (rtaccel_tool(pair, why, why_len))
		return -1;
	return set_up_end(&end[0], why, why_len) || set_up_end(&end[1], why, why_len) ? -1 : 0;
}
