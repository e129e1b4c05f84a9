/* rtaccel-isolate: the memory-bandwidth regulator and its bandwidth lock.
 *
 *   rtaccel-isolate regulate [OPTIONS]     run the regulator until SIGINT/SIGTERM
 *                                          (its options: isolate/regulate_options.h)
 *   rtaccel-isolate status [--bwlock NAME] [--json]
 *   rtaccel-isolate run-be [--cgroup PATH | --no-cgroup] [--end-with-parent [--output-cap SIZE]]
 *                          -- PROGRAM [ARGS]
 *   rtaccel-isolate hold --threshold MBPS [--bwlock NAME] [--ceiling P] -- PROGRAM [ARGS]
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
#include "isolate/regulate_options.h"
#include "isolate/regulator.h"
#include "supervise.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The usage: regulate's options are its table's (isolate/regulate_options.h). */
static void print_usage(FILE *out)
{
	fputs("usage: rtaccel-isolate regulate [OPTIONS]\n"
	      "       rtaccel-isolate status [--bwlock NAME] [--json]\n"
	      "       rtaccel-isolate run-be [--cgroup PATH | --no-cgroup] [--end-with-parent [--output-cap SIZE]]\n"
	      "                              -- PROGRAM [ARGS]\n"
	      "       rtaccel-isolate hold --threshold MBPS [--bwlock NAME] [--ceiling P] -- PROGRAM [ARGS]\n"
	      "\n"
	      "regulate's OPTIONS:\n", out);
	regulate_usage(out);
	fputs("\n"
	      "run-be's:\n"
	      "  --end-with-parent    PROGRAM and all it started end when this process's parent ends\n"
	      "  --output-cap SIZE    of PROGRAM's output past SIZE, only the last 64 KiB is kept\n", out);
}

/* Whether ERR (negative) is the kernel refusing a user what is root's. */
static bool denied(int err)
{
	return err == -EACCES || err == -EPERM;
}

static int bad(const char *what, const char *arg)
{
	fprintf(stderr, "rtaccel-isolate: %s: '%s'\n", what, arg);
	print_usage(stderr);
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

/* regulate's command line into O, getopt_long's array made from the table:
 * an option's val is its row past 256. -1: go on; else the exit status. */
static int parse_regulate(int argc, char **argv, struct regulate_options *o)
{
	size_t n;
	const struct regulate_option_spec *specs = regulate_option_specs(&n);
	struct option longopts[REGULATE_OPTIONS_MAX + 2];
	for (size_t i = 0; i < n; i++)
		longopts[i] = (struct option){specs[i].name, specs[i].value ? required_argument : no_argument,
					      NULL, (int)(256 + i)};
	longopts[n] = (struct option){"help", no_argument, NULL, 'h'};
	longopts[n + 1] = (struct option){NULL, 0, NULL, 0};
	int opt;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			print_usage(stdout);
			return 0;
		}
		if (opt < 256 || (size_t)(opt - 256) >= n) {
			print_usage(stderr);
			return RTACCEL_EXIT_BAD_INPUT;
		}
		const struct regulate_option_spec *spec = &specs[opt - 256];
		if (!spec->set(o, optarg)) {
			char what[160];
			snprintf(what, sizeof(what), "bad --%s (%s)", spec->name, spec->takes);
			return bad(what, optarg);
		}
	}
	if (optind != argc)
		return bad("unexpected argument", argv[optind]);
	if (!o->cores_given)
		default_cores(&o->cfg);
	if (o->cfg.ncores == 0) {
		fprintf(stderr, "rtaccel-isolate: no core besides core 0 to regulate\n");
		return RTACCEL_EXIT_RUNTIME;
	}
	return -1;
}

/* The best-effort cgroup made, where one is given. 0, else the exit status. */
static int make_best_effort_cgroup(struct regulate_options *o)
{
	if (!o->cgroup)
		return 0;
	int err = rtaccel_cgroup_make(o->cgroup, o->cfg.cgroup, sizeof(o->cfg.cgroup));
	if (err) {
		fprintf(stderr, "rtaccel-isolate: best-effort cgroup %s: %s%s\n", o->cgroup, strerror(-err),
			denied(err) ? " (the cgroup hierarchy is root's; --no-cgroup meters whole cores)" : "");
		return RTACCEL_EXIT_RUNTIME;
	}
	/* It is frozen to throttle it, and with --own-cgroup what runs in it
	 * is ended. */
	if (rtaccel_cgroup_holds_self(o->cfg.cgroup) == 1) {
		fprintf(stderr,
			"rtaccel-isolate: best-effort cgroup %s holds rtaccel-isolate itself%s: freezing it "
			"would stop the regulator; give a cgroup of the best-effort work alone\n",
			o->cgroup, o->own_cgroup ? " (and what --own-cgroup would end with it)" : "");
		return RTACCEL_EXIT_BAD_INPUT;
	}
	return 0;
}

/* The process made ready to regulate: its memory locked, its signals set. */
static void prepare_process(const struct regulate_options *o)
{
	/* A page fault in a core's thread would be latency on the core it
	 * regulates. (Not under AddressSanitizer, whose shadow memory is
	 * terabytes of reserve.) */
#if !defined(__SANITIZE_ADDRESS__)
	int err;
	if ((err = rtaccel_lock_memory()) && !o->cfg.quiet)
		rtaccel_say_refused("rtaccel-isolate", "locking memory", err,
				    "memory not locked (CAP_IPC_LOCK or an unlimited RLIMIT_MEMLOCK locks it)");
#endif
	/* SA_RESTART as signal() sets it */
	if (o->stopped_by_parent)
		rtaccel_stop_through_parent(on_signal, SA_RESTART);
	else
		rtaccel_stop_on_signals(on_signal, SA_RESTART);
	/* A reader of its output that went (`| tee log`, with the terminal) is
	 * no reason to end otherwise than asked: killed by SIGPIPE on a write
	 * before its end, it would leave its cgroup behind. */
	signal(SIGPIPE, SIG_IGN);
}

/* "ready" to --ready-fd, and the start-up line. */
static void say_regulating(const struct regulate_options *o, const struct regulator *reg)
{
	if (o->ready_fd >= 0) {
		ssize_t n;
		do
			n = write(o->ready_fd, "ready\n", 6);
		while (n < 0 && errno == EINTR);
		close(o->ready_fd);
	}
	if (o->cfg.quiet)
		return;
	const struct regulator_config *cfg = &o->cfg;
	fprintf(stderr, "rtaccel-isolate: regulating core(s)");
	for (int i = 0; i < cfg->ncores; i++)
		fprintf(stderr, "%s%d", i ? "," : " ", cfg->cores[i]);
	fprintf(stderr, " every %.0f us with the %s meter%s%s; bandwidth lock '%s'%s%s\n",
		(double)cfg->period_ns / 1e3, regulator_meter_name(reg),
		cfg->cgroup[0] ? ", best-effort cgroup " : "", cfg->cgroup, cfg->bwlock,
		cfg->gang[0] ? ", gang lock " : "", cfg->gang);
}

/* The summary and the trace, where asked for: 0, else 1. */
static int write_reports(const struct regulate_options *o, const struct regulator *reg)
{
	int rc = 0, err;
	if (o->summary) {
		FILE *f = strcmp(o->summary, "-") ? fopen(o->summary, "w") : stdout;
		if (!f) {
			fprintf(stderr, "rtaccel-isolate: %s: %s\n", o->summary, strerror(errno));
			rc = 1;
		} else {
			regulator_write_summary(reg, f);
			if (f != stdout)
				fclose(f);
		}
	}
	if (o->trace && (err = regulator_write_trace(reg, o->trace))) {
		fprintf(stderr, "rtaccel-isolate: %s: %s\n", o->trace, strerror(-err));
		rc = 1;
	}
	return rc;
}

/* Empty where its owner stopped the best-effort work first. Where the owner
 * is gone (killed: this regulator got SIGTERM as its child), what still runs
 * there is ended with the cgroup: best-effort work outlives no run. */
static void remove_own_cgroup(const struct regulate_options *o)
{
	if (!o->own_cgroup || !o->cfg.cgroup[0])
		return;
	int ended = 0;
	int err = rtaccel_cgroup_remove(o->cfg.cgroup, 2 * 1000000000ull, &ended);
	if (ended)
		fprintf(stderr, "rtaccel-isolate: ended %d process(es) still in best-effort cgroup %s\n", ended,
			o->cfg.cgroup);
	if (err)
		fprintf(stderr, "rtaccel-isolate: cannot remove best-effort cgroup %s: %s\n", o->cfg.cgroup,
			strerror(-err));
}

static int cmd_regulate(int argc, char **argv)
{
	struct regulate_options o;
	regulate_options_defaults(&o);
	int rc = parse_regulate(argc, argv, &o);
	if (rc >= 0)
		return rc;
	if ((rc = make_best_effort_cgroup(&o)))
		return rc;
	prepare_process(&o);
	struct regulator *reg;
	char why[256];
	int err = regulator_start(&o.cfg, &reg, why, sizeof(why));
	if (err) {
		fprintf(stderr, "rtaccel-isolate: %s\n", why);
		if (o.own_cgroup && o.cfg.cgroup[0])
			rmdir(o.cfg.cgroup);
		return err == -EINVAL ? RTACCEL_EXIT_BAD_INPUT : RTACCEL_EXIT_RUNTIME;
	}
	say_regulating(&o, reg);
	const uint64_t end = rtaccel_monotonic_ns() + o.duration_ms * 1000000ull;
	while (!stop && (!o.duration_ms || rtaccel_monotonic_ns() < end))
		rtaccel_sleep_ns(20 * 1000 * 1000);
	regulator_stop(reg);
	rc = write_reports(&o, reg);
	regulator_free(reg);
	remove_own_cgroup(&o);
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
		if (opt == 'b') {
			name = optarg;
		} else if (opt == 'j') {
			json = true;
		} else {
			print_usage(stderr);
			return RTACCEL_EXIT_BAD_INPUT;
		}
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
	const char *cgroup = ISOLATE_DEFAULT_CGROUP;
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
		print_usage(argc < 2 ? stderr : stdout);
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
