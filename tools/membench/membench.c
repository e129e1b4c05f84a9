/* rtaccel-membench: memory benchmarks for best-effort co-runners, in the
 * spirit of IsolBench's BwRead and BwWrite. Sequential reads or writes (one
 * access per 64-byte cache line) over a working set of a given size, as fast
 * as possible, until the duration ends or SIGTERM/SIGINT arrives; then one
 * line of results:
 *
 *   rtaccel-membench read --size 8M [--duration S] [--json]
 *   rtaccel-membench write --size 8M
 *   rtaccel-membench cache            (read over 16 KiB: stays in L1)
 *
 * Reports MB/s (cache lines touched x 64 bytes) and passes over the set. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/cgroup.h"
#include "core/clock.h"
#include "core/size.h"

#define LINE 64

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char usage[] =
	"usage: rtaccel-membench read|write|cache [--size BYTES[K|M|G]] [--duration S] [--json]\n"
	"  read   sequential reads over the working set (default 8M)\n"
	"  write  sequential writes over the working set (default 8M)\n"
	"  cache  reads over 16K, a set that stays in the core's L1 cache\n"
	"  until --duration seconds pass (default: until SIGTERM or SIGINT)\n";

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	const char *mode = argv[1];
	int write_mode = strcmp(mode, "write") == 0;
	size_t size = 8u << 20;
	if (strcmp(mode, "cache") == 0)
		size = 16u << 10;
	else if (!write_mode && strcmp(mode, "read") != 0) {
		fprintf(stderr, "rtaccel-membench: unknown benchmark '%s'\n%s", mode, usage);
		return 2;
	}
	double duration = 0;
	int json = 0;
	static const struct option longopts[] = {{"size", required_argument, NULL, 's'},
						  {"duration", required_argument, NULL, 'd'},
						  {"json", no_argument, NULL, 'j'},
						  {"help", no_argument, NULL, 'h'},
						  {NULL, 0, NULL, 0}};
	int opt;
	optind = 2;
	while ((opt = getopt_long(argc, argv, "s:d:jh", longopts, NULL)) != -1) {
		char *end;
		switch (opt) {
		case 's':
			if (rtaccel_parse_size(optarg, LINE, 1ull << 36, &size) < 0) {
				fprintf(stderr,
					"rtaccel-membench: bad --size '%s': a size from %d bytes (a cache line) to 64G, "
					"as 48K, 32M or 1G\n%s",
					optarg, LINE, usage);
				return 2;
			}
			break;
		case 'd':
			duration = strtod(optarg, &end);
			if (end == optarg || *end || !(duration > 0 && duration < 86400)) {
				fprintf(stderr, "rtaccel-membench: bad --duration '%s'\n%s", optarg, usage);
				return 2;
			}
			break;
		case 'j': json = 1; break;
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return 2;
	}
	/* The working set is touched in full before measuring: one larger than
	 * the memory available (free on the machine, within this process's
	 * memory cgroup's limit) would push it into swap or have the kernel
	 * kill a process, maybe not this one. */
	uint64_t available = rtaccel_memory_available();
	if (available && size > available) {
		fprintf(stderr,
			"rtaccel-membench: --size %zu MB is more than the %llu MB of memory available to it "
			"(free on the machine, within its memory cgroup's limit): a smaller working set "
			"measures the same bandwidth\n",
			size >> 20, (unsigned long long)(available >> 20));
		return 2;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	uint8_t *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		perror("rtaccel-membench: mmap");
		return 1;
	}
	memset(buf, 1, size); /* fault every page in before measuring */
	const uint64_t start = rtaccel_monotonic_ns();
	const uint64_t end_ns = duration > 0 ? start + (uint64_t)(duration * 1e9) : UINT64_MAX;
	uint64_t lines = 0, passes = 0, sum = 0;
	while (!stop && rtaccel_monotonic_ns() < end_ns) {
		if (write_mode) {
			for (size_t i = 0; i < size; i += LINE)
				buf[i] = (uint8_t)i;
		} else {
			for (size_t i = 0; i < size; i += LINE)
				sum += buf[i];
		}
		/* Keep the loads and stores. */
		__asm__ __volatile__("" : : "r"(buf), "r"(sum) : "memory");
		lines += size / LINE;
		passes++;
	}
	const double seconds = (double)(rtaccel_monotonic_ns() - start) / 1e9;
	const double mbps = seconds > 0 ? (double)lines * LINE / 1e6 / seconds : 0;
	if (json)
		printf("{\"benchmark\": \"%s\", \"size_bytes\": %zu, \"seconds\": %.3f, \"passes\": %llu, "
		       "\"mb_per_s\": %.1f}\n",
		       mode, size, seconds, (unsigned long long)passes, mbps);
	else
		printf("%s %zu bytes: %.1f MB/s (%llu passes in %.3f s)\n", mode, size, mbps,
		       (unsigned long long)passes, seconds);
	return 0;
}
