/* `rtaccel-isolate regulate`'s options (internal): one table, from which
 * rtaccel-isolate's getopt_long array, usage text and parsing are made. The
 * Python package reads it too (rtaccel._core's regulate_options), so that
 * tests/python/test_regulate_options.py holds to it the usage, the command
 * line `rtaccel run` hands the regulator (exec/run.h regulator_args),
 * docs/isolate.md's paragraph of the options and the campaign's regulator.
 * The run's own options are one table the same way (exec/run_options.h).
 *
 * How to add an option: a row in options[] (regulate_options.c) with its
 * name, the value it takes (NULL for a flag), its help, what a bad value is
 * told it must be, and the function that sets the value into
 * struct regulate_options (the regulator's config, or the command's own
 * state), returning false for a value it does not take; a word for it in
 * docs/isolate.md's paragraph of regulate's options, and for one that takes
 * a value, a value it takes and one it refuses in the test's SAMPLES. */
#ifndef RTACCEL_ISOLATE_REGULATE_OPTIONS_H
#define RTACCEL_ISOLATE_REGULATE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "isolate/regulator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The best-effort cgroup of regulate and run-be where none is given. */
#define ISOLATE_DEFAULT_CGROUP "rtaccel-be"

/* What `rtaccel-isolate regulate` is told. */
struct regulate_options {
	struct regulator_config cfg;
	const char *cgroup;	/* the best-effort cgroup as given; NULL: none (--no-cgroup) */
	const char *summary;	/* where the summary goes ("-": stdout); NULL: nowhere */
	const char *trace;	/* where the Perfetto trace goes; NULL: nowhere */
	uint64_t duration_ms;	/* 0: until SIGINT or SIGTERM */
	int ready_fd;		/* told "ready" once regulating; -1: none */
	bool cores_given;	/* else every core this process may run on but core 0 */
	bool own_cgroup;
	bool stopped_by_parent;
};

struct regulate_option_spec {
	const char *name;	/* --NAME */
	const char *value;	/* what it takes, as the usage names it ("LIST"); NULL: a flag */
	const char *help;	/* its usage text, lines joined by '\n' */
	const char *takes;	/* what a bad value is told it must be; NULL for a flag */
	/* Sets VALUE (NULL for a flag) into O; false: not a value it takes. */
	bool (*set)(struct regulate_options *o, const char *value);
};

/* The most rows the table has (getopt_long's array is made in place). */
#define REGULATE_OPTIONS_MAX 40

/* What regulate does where no option is given. */
void regulate_options_defaults(struct regulate_options *o);
/* Every option, in the order the usage lists them; *N of them. */
const struct regulate_option_spec *regulate_option_specs(size_t *n);
/* The option --NAME; NULL: none. */
const struct regulate_option_spec *regulate_find_option(const char *name);
/* The usage's lines of the options, made from the table. */
void regulate_usage(FILE *out);

#ifdef __cplusplus
}
#endif

#endif
