/* `rtaccel-isolate regulate`'s options, one table (isolate/regulate_options.h). */
#include "isolate/regulate_options.h"

#include <sched.h>
#include <string.h>

#include "core/size.h"

/* A whole number of [MIN, MAX]. */
static bool set_whole(const char *text, long min, long max, long *out)
{
	return rtaccel_parse_long(text, min, max, out) == 0;
}

/* A lock's name, as long as its field holds (the lock checks the rest). */
static bool set_name(const char *text, char *name, size_t size)
{
	if (strlen(text) >= size)
		return false;
	snprintf(name, size, "%s", text);
	return true;
}

/* auto, llc, cpu-time or raw:TYPE:CONFIG */
static bool set_meter(struct regulate_options *o, const char *v)
{
	if (!strcmp(v, "auto")) {
		o->cfg.meter = REGULATOR_METER_AUTO;
	} else if (!strcmp(v, "llc")) {
		o->cfg.meter = REGULATOR_METER_LLC;
	} else if (!strcmp(v, "cpu-time")) {
		o->cfg.meter = REGULATOR_METER_CPU_TIME;
	} else if (!strncmp(v, "raw:", 4)) {
		unsigned type;
		long long config;
		char extra;
		if (sscanf(v + 4, "%u:%lli%c", &type, &config, &extra) != 2)
			return false;
		o->cfg.meter = REGULATOR_METER_RAW;
		o->cfg.raw_type = type;
		o->cfg.raw_config = (uint64_t)config;
	} else {
		return false;
	}
	return true;
}

static bool set_cores(struct regulate_options *o, const char *v)
{
	o->cores_given = true;
	return rtaccel_parse_cores(v, o->cfg.cores, REGULATOR_MAX_CORES, CPU_SETSIZE, &o->cfg.ncores) == 0;
}

static bool set_period(struct regulate_options *o, const char *v)
{
	long us;
	if (!set_whole(v, 100, 1000000, &us))
		return false;
	o->cfg.period_ns = (uint64_t)us * 1000;
	return true;
}

static bool set_cgroup(struct regulate_options *o, const char *v)
{
	o->cgroup = v;
	return *v != '\0';
}

static bool set_no_cgroup(struct regulate_options *o, const char *v)
{
	(void)v;
	o->cgroup = NULL;
	return true;
}

static bool set_bwlock(struct regulate_options *o, const char *v)
{
	return set_name(v, o->cfg.bwlock, sizeof(o->cfg.bwlock));
}

static bool set_gang(struct regulate_options *o, const char *v)
{
	return set_name(v, o->cfg.gang, sizeof(o->cfg.gang));
}

static bool set_threshold(struct regulate_options *o, const char *v)
{
	long mbps;
	if (!set_whole(v, 0, UINT32_MAX - 1, &mbps))
		return false;
	o->cfg.threshold_mbps = (uint32_t)mbps;
	return true;
}

static bool set_be_peak(struct regulate_options *o, const char *v)
{
	long mbps;
	if (!set_whole(v, 1, UINT32_MAX - 1, &mbps))
		return false;
	o->cfg.be_peak_mbps = (uint32_t)mbps;
	return true;
}

static bool set_tfs(struct regulate_options *o, const char *v)
{
	return rtaccel_parse_double(v, 0, 100, &o->cfg.rho) == 0;
}

static bool set_park_priority(struct regulate_options *o, const char *v)
{
	long p;
	if (!set_whole(v, 1, 99, &p))
		return false;
	o->cfg.park_priority = (int)p;
	return true;
}

static bool set_duration(struct regulate_options *o, const char *v)
{
	double s;
	if (rtaccel_parse_double(v, 0.001, 1e7, &s))
		return false;
	o->duration_ms = (uint64_t)(s * 1000);
	return true;
}

static bool set_summary(struct regulate_options *o, const char *v)
{
	o->summary = v;
	return *v != '\0';
}

static bool set_trace(struct regulate_options *o, const char *v)
{
	o->trace = v;
	return *v != '\0';
}

static bool set_quiet(struct regulate_options *o, const char *v)
{
	(void)v;
	o->cfg.quiet = true;
	return true;
}

static bool set_own_cgroup(struct regulate_options *o, const char *v)
{
	(void)v;
	o->own_cgroup = true;
	return true;
}

static bool set_ready_fd(struct regulate_options *o, const char *v)
{
	long fd;
	if (!set_whole(v, 0, 65535, &fd))
		return false;
	o->ready_fd = (int)fd;
	return true;
}

static bool set_stopped_by_parent(struct regulate_options *o, const char *v)
{
	(void)v;
	o->stopped_by_parent = true;
	return true;
}

static const struct regulate_option_spec options[] = {
	{"cores", "LIST", "cores to regulate (1,3-5); default: all but core 0", "a core list, as 1,3-5",
	 set_cores},
	{"period-us", "N", "the regulation period in microseconds, 100..1000000 (default 1000)",
	 "microseconds, 100..1000000", set_period},
	{"meter", "M", "auto (LLC misses, else CPU time; the default), llc, cpu-time, raw:TYPE:CONFIG",
	 "auto, llc, cpu-time or raw:TYPE:CONFIG", set_meter},
	{"cgroup", "PATH",
	 "best-effort cgroup (cgroup v2; relative to its mount);\n"
	 "default " ISOLATE_DEFAULT_CGROUP ", made if missing",
	 "a cgroup's path", set_cgroup},
	{"no-cgroup", NULL, "no best-effort cgroup: meter whole cores", NULL, set_no_cgroup},
	{"bwlock", "NAME", "the bandwidth lock whose holders' thresholds it regulates at (default 'default')",
	 "a name of at most 63 characters", set_bwlock},
	{"gang", "NAME", "the gang lock whose running gang's threshold counts as one more holder's",
	 "a name of at most 63 characters", set_gang},
	{"threshold", "MBPS", "regulate at MBPS always, beside the locks", "MB/s, 0..4294967294",
	 set_threshold},
	{"be-peak-mbps", "N", "cpu-time meter: MB/s a core of best-effort work moves (10000)",
	 "MB/s, 1..4294967294", set_be_peak},
	{"tfs", "RHO", "charge throttled tasks RHO x their throttled time (0: off)", "0..100", set_tfs},
	{"park-priority", "P", "the SCHED_FIFO priority a core is parked at, 1..99 (default 1)", "1..99",
	 set_park_priority},
	{"duration", "S", "stop after S seconds (default: at SIGINT or SIGTERM)", "seconds, 0.001..10000000",
	 set_duration},
	{"summary", "FILE", "write the summary (JSON) to FILE when it stops; -: stdout", "a file",
	 set_summary},
	{"trace", "FILE", "write the periods as a Perfetto trace to FILE when it stops", "a file",
	 set_trace},
	{"quiet", NULL, "no start-up line", NULL, set_quiet},
	{"own-cgroup", NULL,
	 "the best-effort cgroup is this regulator's: removed when it stops,\n"
	 "with whatever still runs in it",
	 NULL, set_own_cgroup},
	{"ready-fd", "FD", "write \"ready\" to FD once regulating, and close it", "a descriptor, 0..65535",
	 set_ready_fd},
	{"stopped-by-parent", NULL,
	 "a SIGTERM from anyone but this process's parent goes to the\n"
	 "parent, which stops the regulator in its turn (rtaccel run)",
	 NULL, set_stopped_by_parent},
};

_Static_assert(sizeof(options) / sizeof(options[0]) <= REGULATE_OPTIONS_MAX, "REGULATE_OPTIONS_MAX holds them");

void regulate_options_defaults(struct regulate_options *o)
{
	memset(o, 0, sizeof(*o));
	regulator_config_defaults(&o->cfg);
	snprintf(o->cfg.bwlock, sizeof(o->cfg.bwlock), "default");
	o->cgroup = ISOLATE_DEFAULT_CGROUP;
	o->ready_fd = -1;
}

const struct regulate_option_spec *regulate_option_specs(size_t *n)
{
	*n = sizeof(options) / sizeof(options[0]);
	return options;
}

const struct regulate_option_spec *regulate_find_option(const char *name)
{
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++)
		if (!strcmp(options[i].name, name))
			return &options[i];
	return NULL;
}

void regulate_usage(FILE *out)
{
	enum { COLUMN = 23 };
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		const struct regulate_option_spec *o = &options[i];
		int at = fprintf(out, "  --%s%s%s", o->name, o->value ? " " : "", o->value ? o->value : "");
		for (const char *help = o->help; *help;) {
			const char *end = strchr(help, '\n');
			const int n = end ? (int)(end - help) : (int)strlen(help);
			fprintf(out, "%*s%.*s\n", at < COLUMN ? COLUMN - at : 1, "", n, help);
			at = 0;
			help += n + (end ? 1 : 0);
		}
	}
}
