/* rtaccel-isolate: the memory-bandwidth regulator and its bandwidth lock.
 *
 *   rtaccel-isolate regulate [options]     run the regulator until SIGINT/SIGTERM
 *   rtaccel-isolate status [--bwlock NAME] [--json]
 *   rtaccel-isolate run-be [--cgroup PATH | --no-cgroup] [--end-with-parent [--output-cap SIZE]]
 *                          -- PROGRAM [ARGS]
 *   rtaccel-isolate hold --threshold MBPS [--bwlock NAME] -- PROGRAM [ARGS]
 *
 * Exit statuses as core/exit.h: 2 on bad arguments, 3 when the regulator
 * cannot run here (one line says why); run-be and hold exit as PROGRAM. */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cgroup.h"
#include "core/clock.h"
#include "core/exit.h"
#include "core/realtime.h"
#include "core/signals.h"
#include "core/size.h"
#include "isolate/regulator.h"
#include "supervise.h"

#define DEFAULT_CGROUP "rtaccel-be"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char usage[] =
	"usage: rtaccel-isolate regulate [--cores LIST] [--period-us N] [--meter M]\n"
	"                                [--cgroup PATH | --no-cgroup] [--bwlock NAME] [--gang NAME]\n"
	"                                [--threshold MBPS] [--be-peak-mbps N] [--tfs RHO]\n"
	"                                [--park-priority P] [--duration S] [--summary FILE]\n"
	"                                [--trace FILE] [--quiet] [--own-cgroup] [--ready-fd FD]\n"
	"                                [--stopped-by-parent]\n"
	"       rtaccel-isolate status [--bwlock NAME] [--json]\n"
	"       rtaccel-isolate run-be [--cgroup PATH | --no-cgroup] [--end-with-parent [--output-cap SIZE]]\n"
	"                              -- PROGRAM [ARGS]\n"
	"       rtaccel-isolate hold --threshold MBPS [--bwlock NAME] [--ceiling P] -- PROGRAM [ARGS]\n"
	"\n"
	"  --cores LIST       cores to regulate (1,3-5); default: all but core 0\n"
	"  --meter M          auto (LLC misses, else CPU time), llc, cpu-time, raw:TYPE:CONFIG\n"
	"  --cgroup PATH      best-effort cgroup (cgroup v2; relative to its mount);\n"
	"                     default " DEFAULT_CGROUP ", made if missing\n"
	"  --threshold MBPS   regulate at MBPS always, beside the locks\n"
	"  --be-peak-mbps N   cpu-time meter: MB/s a core of best-effort work moves (10000)\n"
	"  --tfs RHO          charge throttled tasks RHO x their throttled time (0: off)\n"
	"  --own-cgroup       the best-effort cgroup is this regulator's: removed when it stops,\n"
	"                     with whatever still runs in it\n"
	"  --end-with-parent  run-be: PROGRAM and all it started end when this process's parent ends\n"
	"  --output-cap SIZE  run-be: of PROGRAM's output past SIZE, only the last 64 KiB is kept\n"
	"  --ready-fd FD      write \"ready\" to FD once regulating, and close it\n"
	"  --stopped-by-parent  regulate: a SIGTERM from anyone but this process's parent goes to the\n"
	"                     parent, which stops the regulator in its turn (rtaccel run)\n";

/* Whether ERR (negative) is the kernel refusing a user what is root's. */
static bool denied(int err)
{
	return err == -EACCES || err == -EPERM;
}

static int bad(const char *what, const char *arg)
{
	fprintf(stderr, "rtaccel-isolate: %s: '%s'\n%s", what, arg, usage);
	return RTACCEL_EXIT_BAD_INPUT;
}

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static void default_cores(struct regulator_config *cfg)
{
	cpu_set_t set;
	sched_getaffinity(0, sizeof(set), &set);
	cfg->ncores = 0;
	for (int c = 1; c < CPU_SETSIZE && cfg->ncores < REGULATOR_MAX_CORES; c++)
		if (CPU_ISSET(c, &set))
			cfg->cores[cfg->ncores++] = c;
}

static int cmd_regulate(int argc, char **argv)
{
	struct regulator_config cfg;
	regulator_config_defaults(&cfg);
	snprintf(cfg.bwlock, sizeof(cfg.bwlock), "default");
	const char *cgroup = DEFAULT_CGROUP, *summary = NULL, *trace = NULL;
	uint64_t v, duration_ms = 0;
	bool cores_given = false, own_cgroup = false, stopped_by_parent = false;
	int ready_fd = -1;
	enum { O_CORES = 256, O_PERIOD, O_METER, O_CGROUP, O_NO_CGROUP, O_BWLOCK, O_GANG,
	       O_THRESHOLD, O_PEAK, O_TFS, O_PARK, O_DURATION, O_SUMMARY, O_TRACE, O_QUIET,
	       O_OWN_CGROUP, O_READY_FD, O_STOPPED_BY_PARENT };
	static const struct option opts[] = {
		{"cores", required_argument, 0, O_CORES},
		{"period-us", required_argument, 0, O_PERIOD},
		{"meter", required_argument, 0, O_METER},
		{"cgroup", required_argument, 0, O_CGROUP},
		{"no-cgroup", no_argument, 0, O_NO_CGROUP},
		{"bwlock", required_argument, 0, O_BWLOCK},
		{"gang", required_argument, 0, O_GANG},
		{"threshold", required_argument, 0, O_THRESHOLD},
		{"be-peak-mbps", required_argument, 0, O_PEAK},
		{"tfs", required_argument, 0, O_TFS},
		{"park-priority", required_argument, 0, O_PARK},
		{"duration", required_argument, 0, O_DURATION},
		{"summary", required_argument, 0, O_SUMMARY},
		{"trace", required_argument, 0, O_TRACE},
		{"quiet", no_argument, 0, O_QUIET},
		{"own-cgroup", no_argument, 0, O_OWN_CGROUP},
		{"stopped-by-parent", no_argument, 0, O_STOPPED_BY_PARENT},
		{"ready-fd", required_argument, 0, O_READY_FD},
		{0, 0, 0, 0}};
	int opt;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case O_CORES:
			if (rtaccel_parse_cores(optarg, cfg.cores, REGULATOR_MAX_CORES, CPU_SETSIZE, &cfg.ncores) < 0)
				return bad("bad core list", optarg);
			cores_given = true;
			break;
		case O_PERIOD:
			if (parse_u64(optarg, 100, 1000000, &v) < 0)
				return bad("the period is 100..1000000 us", optarg);
			cfg.period_ns = v * 1000;
			break;
		case O_METER:
			if (!strcmp(optarg, "auto")) {
				cfg.meter = REGULATOR_METER_AUTO;
			} else if (!strcmp(optarg, "llc")) {
				cfg.meter = REGULATOR_METER_LLC;
			} else if (!strcmp(optarg, "cpu-time")) {
				cfg.meter = REGULATOR_METER_CPU_TIME;
			} else if (!strncmp(optarg, "raw:", 4)) {
				unsigned type;
				long long config;
				char extra;
				if (sscanf(optarg + 4, "%u:%lli%c", &type, &config, &extra) != 2)
					return bad("raw meter is raw:TYPE:CONFIG", optarg);
				cfg.meter = REGULATOR_METER_RAW;
				cfg.raw_type = type;
				cfg.raw_config = (uint64_t)config;
			} else {
				return bad("unknown meter", optarg);
			}
			break;
		case O_CGROUP: cgroup = optarg; break;
		case O_NO_CGROUP: cgroup = NULL; break;
		case O_BWLOCK:
			if (strlen(optarg) >= sizeof(cfg.bwlock))
				return bad("name too long", optarg);
			snprintf(cfg.bwlock, sizeof(cfg.bwlock), "%s", optarg);
			break;
		case O_GANG:
			if (strlen(optarg) >= sizeof(cfg.gang))
				return bad("name too long", optarg);
			snprintf(cfg.gang, sizeof(cfg.gang), "%s", optarg);
			break;
		case O_THRESHOLD:
			if (parse_u64(optarg, 0, UINT32_MAX - 1, &v) < 0)
				return bad("bad threshold", optarg);
			cfg.threshold_mbps = (uint32_t)v;
			break;
		case O_PEAK:
			if (parse_u64(optarg, 1, UINT32_MAX - 1, &v) < 0)
				return bad("bad peak bandwidth", optarg);
			cfg.be_peak_mbps = (uint32_t)v;
			break;
		case O_TFS: {
			char *end;
			cfg.rho = strtod(optarg, &end);
			if (end == optarg || *end || !(cfg.rho >= 0 && cfg.rho <= 100))
				return bad("rho is 0..100", optarg);
			break;
		}
		case O_PARK:
			if (parse_u64(optarg, 1, 99, &v) < 0)
				return bad("the park priority is 1..99", optarg);
			cfg.park_priority = (int)v;
			break;
		case O_DURATION: {
			char *end;
			double s = strtod(optarg, &end);
			if (end == optarg || *end || !(s > 0 && s < 1e7))
				return bad("bad duration (seconds)", optarg);
			duration_ms = (uint64_t)(s * 1000);
			break;
		}
		case O_SUMMARY: summary = optarg; break;
		case O_TRACE: trace = optarg; break;
		case O_QUIET: cfg.quiet = true; break;
		case O_OWN_CGROUP: own_cgroup = true; break;
		case O_STOPPED_BY_PARENT: stopped_by_parent = true; break;
		case O_READY_FD:
			if (parse_u64(optarg, 0, 65535, &v) < 0)
				return bad("bad file descriptor", optarg);
			ready_fd = (int)v;
			break;
		default: fputs(usage, stderr); return RTACCEL_EXIT_BAD_INPUT;
		}
	}
	if (optind != argc)
		return bad("unexpected argument", argv[optind]);
	if (!cores_given)
		default_cores(&cfg);
	if (cfg.ncores == 0) {
		fprintf(stderr, "rtaccel-isolate: no core besides core 0 to regulate\n");
		return RTACCEL_EXIT_RUNTIME;
	}
	if (cgroup) {
		int err = rtaccel_cgroup_make(cgroup, cfg.cgroup, sizeof(cfg.cgroup));
		if (err) {
			fprintf(stderr, "rtaccel-isolate: best-effort cgroup %s: %s%s\n", cgroup,
				strerror(-err),
				denied(err) ? " (the cgroup hierarchy is root's; --no-cgroup meters whole cores)" : "");
			return RTACCEL_EXIT_RUNTIME;
		}
		/* It is frozen to throttle it, and with --own-cgroup what runs
		 * in it is ended. */
		if (rtaccel_cgroup_holds_self(cfg.cgroup) == 1) {
			fprintf(stderr,
				"rtaccel-isolate: best-effort cgroup %s holds rtaccel-isolate itself%s: freezing it "
				"would stop the regulator; give a cgroup of the best-effort work alone\n",
				cgroup, own_cgroup ? " (and what --own-cgroup would end with it)" : "");
			return RTACCEL_EXIT_BAD_INPUT;
		}
	}
	/* A page fault in a core's thread would be latency on the core it
	 * regulates. (Not under AddressSanitizer, whose shadow memory is
	 * terabytes of reserve.) */
	int err;
#if !defined(__SANITIZE_ADDRESS__)
	if ((err = rtaccel_lock_memory()) && !cfg.quiet)
		rtaccel_say_refused("rtaccel-isolate", "locking memory", err,
				    "memory not locked (CAP_IPC_LOCK or an unlimited RLIMIT_MEMLOCK locks it)");
#endif
	/* SA_RESTART as signal() sets it */
	if (stopped_by_parent)
		rtaccel_stop_through_parent(on_signal, SA_RESTART);
	else
		rtaccel_stop_on_signals(on_signal, SA_RESTART);
	/* A reader of its output that went (`| tee log`, with the terminal) is
	 * no reason to end otherwise than asked: killed by SIGPIPE on a write
	 * before its end, it would leave its cgroup behind. */
	signal(SIGPIPE, SIG_IGN);
	struct regulator *reg;
	char why[256];
	err = regulator_start(&cfg, &reg, why, sizeof(why));
	if (err) {
		fprintf(stderr, "rtaccel-isolate: %s\n", why);
		if (own_cgroup && cfg.cgroup[0])
			rmdir(cfg.cgroup);
		return err == -EINVAL ? RTACCEL_EXIT_BAD_INPUT : RTACCEL_EXIT_RUNTIME;
	}
	if (ready_fd >= 0) {
		ssize_t n;
		do
			n = write(ready_fd, "ready\n", 6);
		while (n < 0 && errno == EINTR);
		close(ready_fd);
	}
	if (!cfg.quiet) {
		fprintf(stderr, "rtaccel-isolate: regulating core(s)");
		for (int i = 0; i < cfg.ncores; i++)
			fprintf(stderr, "%s%d", i ? "," : " ", cfg.cores[i]);
		fprintf(stderr, " every %.0f us with the %s meter%s%s; bandwidth lock '%s'%s%s\n",
			(double)cfg.period_ns / 1e3, regulator_meter_name(reg),
			cfg.cgroup[0] ? ", best-effort cgroup " : "", cfg.cgroup, cfg.bwlock,
			cfg.gang[0] ? ", gang lock " : "", cfg.gang);
	}
	const uint64_t end = rtaccel_monotonic_ns() + duration_ms * 1000000ull;
	while (!stop && (!duration_ms || rtaccel_monotonic_ns() < end))
		rtaccel_sleep_ns(20 * 1000 * 1000);
	regulator_stop(reg);
	int rc = 0;
	if (summary) {
		FILE *f = strcmp(summary, "-") ? fopen(summary, "w") : stdout;
		if (!f) {
			fprintf(stderr, "rtaccel-isolate: %s: %s\n", summary, strerror(errno));
			rc = 1;
		} else {
			regulator_write_summary(reg, f);
			if (f != stdout)
				fclose(f);
		}
	}
	if (trace && (err = regulator_write_trace(reg, trace))) {
		fprintf(stderr, "rtaccel-isolate: %s: %s\n", trace, strerror(-err));
		rc = 1;
	}
	regulator_free(reg);
	/* Empty where its owner stopped the best-effort work first. Where the
	 * owner is gone (killed: this regulator got SIGTERM as its child), what
	 * still runs there is ended with the cgroup: best-effort work outlives
	 * no run. */
	if (own_cgroup && cfg.cgroup[0]) {
		int ended = 0;
		err = rtaccel_cgroup_remove(cfg.cgroup, 2 * 1000000000ull, &ended);
		if (ended)
			fprintf(stderr, "rtaccel-isolate: ended %d process(es) still in best-effort cgroup %s\n",
				ended, cfg.cgroup);
		if (err)
			fprintf(stderr, "rtaccel-isolate: cannot remove best-effort cgroup %s: %s\n",
				cfg.cgroup, strerror(-err));
	}
	return rc;
}

static int cmd_status(int argc, char **argv)
{
	const char *name = "default";
	bool json = false;
	static const struct option opts[] = {{"bwlock", required_argument, 0, 'b'},
					     {"json", no_argument, 0, 'j'},
					     {0, 0, 0, 0}};
	int opt;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 'b')
			name = optarg;
		else if (opt == 'j')
			json = true;
		else
			return fputs(usage, stderr), 2;
	}
	if (optind != argc)
		return bad("unexpected argument", argv[optind]);
	int err = regulator_print_status(name, json, stdout);
	if (err == -ENOENT) {
		fprintf(stderr, "rtaccel-isolate: no regulator has run for bandwidth lock '%s' "
				"(start one with `rtaccel isolate regulate`)\n", name);
		return RTACCEL_EXIT_BAD_INPUT; /* the name names nothing */
	}
	if (err) {
		fprintf(stderr, "rtaccel-isolate: status of '%s': %s\n", name, strerror(-err));
		return err == -EINVAL ? RTACCEL_EXIT_BAD_INPUT : RTACCEL_EXIT_RUNTIME;
	}
	/* The bandwidth lock's holders. */
	rtaccel_bwlock_t *bw;
	if (rtaccel_bwlock_open(name, &bw) == 0) {
		struct rtaccel_bwlock_holder_info info[32];
		int n = rtaccel_bwlock_holders(bw, info, 32);
		if (!json) {
			printf("bandwidth lock '%s': %d holder(s)\n", name, n);
			for (int i = 0; i < n && i < 32; i++)
				printf("  %-20s pid %-7d %6u MB/s %-5s %llu takes\n", info[i].label,
				       info[i].pid, info[i].threshold_mbps,
				       info[i].held ? "held" : "idle",
				       (unsigned long long)info[i].takes);
		}
		rtaccel_bwlock_close(bw);
	}
	return 0;
}

/* Finds "--" and the program after it. */
static int program_after_dashes(int argc, char **argv, int *at)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			if (i + 1 >= argc)
				return -1;
			*at = i + 1;
			return 0;
		}
	return -1;
}

static int cmd_run_be(int argc, char **argv)
{
	int at;
	if (program_after_dashes(argc, argv, &at) < 0) {
		fprintf(stderr, "rtaccel-isolate run-be: no program given (run-be [OPTIONS] -- PROGRAM [ARGS])\n");
		return RTACCEL_EXIT_BAD_INPUT;
	}
	const char *cgroup = DEFAULT_CGROUP;
	bool end_with_parent = false;
	size_t output_cap = 0;
	for (int i = 1; i < at - 1; i++) {
		if (!strcmp(argv[i], "--cgroup") && i + 1 < at - 1)
			cgroup = argv[++i];
		else if (!strcmp(argv[i], "--no-cgroup"))
			cgroup = NULL;
		else if (!strcmp(argv[i], "--end-with-parent"))
			end_with_parent = true;
		else if (!strcmp(argv[i], "--output-cap") && i + 1 < at - 1) {
			if (rtaccel_parse_size(argv[++i], 1, UINT64_MAX >> 1, &output_cap) < 0)
				return bad("the output cap is a size (64K, 16M)", argv[i]);
		} else
			return bad("unexpected argument", argv[i]);
	}
	if (output_cap && !end_with_parent)
		return bad("--output-cap comes with", "--end-with-parent");
	if (cgroup) {
		char path[256];
		int err = rtaccel_cgroup_make(cgroup, path, sizeof(path));
		if (!err)
			err = rtaccel_cgroup_add(path, 0);
		if (err) {
			fprintf(stderr, "rtaccel-isolate: best-effort cgroup %s: %s%s\n", cgroup, strerror(-err),
				denied(err) ? " (the cgroup hierarchy is root's)" : "");
			return RTACCEL_EXIT_RUNTIME;
		}
	}
	if (end_with_parent)
		return isolate_supervise(argv + at, output_cap);
	execvp(argv[at], argv + at);
	fprintf(stderr, "rtaccel-isolate: %s: %s\n", argv[at], strerror(errno));
	return 127;
}

/* The bandwidth lock hold holds while its program runs. */
static struct {
	rtaccel_bwlock_t *bw;
	rtaccel_bwlock_holder_t *holder;
} held;

static void release_held(void)
{
	rtaccel_bwlock_holder_destroy(held.holder);
	rtaccel_bwlock_close(held.bw);
}

/* Holds the bandwidth lock while PROGRAM runs: for programs that are one
 * critical section, and to try the regulator by hand. */
static int cmd_hold(int argc, char **argv)
{
	int at;
	if (program_after_dashes(argc, argv, &at) < 0) {
		fprintf(stderr, "rtaccel-isolate hold: no program given (hold --threshold MBPS [OPTIONS] -- PROGRAM [ARGS])\n");
		return RTACCEL_EXIT_BAD_INPUT;
	}
	const char *name = "default";
	uint64_t threshold = UINT64_MAX, ceiling = 0;
	for (int i = 1; i < at - 1; i++) {
		if (!strcmp(argv[i], "--bwlock") && i + 1 < at - 1)
			name = argv[++i];
		else if (!strcmp(argv[i], "--threshold") && i + 1 < at - 1) {
			if (parse_u64(argv[++i], 0, UINT32_MAX - 1, &threshold) < 0)
				return bad("bad threshold", argv[i]);
		} else if (!strcmp(argv[i], "--ceiling") && i + 1 < at - 1) {
			if (parse_u64(argv[++i], 1, 99, &ceiling) < 0)
				return bad("the ceiling is 1..99", argv[i]);
		} else
			return bad("unexpected argument", argv[i]);
	}
	if (threshold == UINT64_MAX) {
		fprintf(stderr, "rtaccel-isolate hold: give the threshold the lock holds others to (--threshold MBPS)\n");
		return RTACCEL_EXIT_BAD_INPUT;
	}
	rtaccel_bwlock_t *bw;
	rtaccel_bwlock_holder_t *h;
	int err = rtaccel_bwlock_open(name, &bw);
	if (!err)
		err = rtaccel_bwlock_holder_init(bw, "hold", (uint32_t)threshold, (int)ceiling, &h);
	if (err) {
		fprintf(stderr, "rtaccel-isolate: bandwidth lock '%s': %s\n", name, strerror(-err));
		return err == -EINVAL ? RTACCEL_EXIT_BAD_INPUT : RTACCEL_EXIT_RUNTIME;
	}
	rtaccel_bwlock_take(h);
	held.bw = bw;
	held.holder = h;
	return isolate_run(argv + at, release_held);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "regulate"))
		return cmd_regulate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return cmd_status(argc - 1, argv + 1);
	if (!strcmp(argv[1], "run-be"))
		return cmd_run_be(argc - 1, argv + 1);
	if (!strcmp(argv[1], "hold"))
		return cmd_hold(argc - 1, argv + 1);
	return bad("unknown command", argv[1]);
}
