/* What rtaccel's programs exit with (core, C and C++; python/rtaccel/errors.py
 * holds the same for the rtaccel command). One meaning each, everywhere:
 *
 *   0    success;
 *   1    the property the command checks does not hold: a critical chain is
 *        not schedulable, a bound was exceeded in a run;
 *   2    bad input: an argument, a workload, a file the command reads;
 *   3    a runtime failure: the machine or a program failed (a server that
 *        cannot start, a device that is gone, a peer that died);
 *   77   a benchmark cannot run on this machine, and said why (no SCHED_FIFO,
 *        no device);
 *   130  interrupted (Ctrl-C), with what was measured so far written. */
#ifndef RTACCEL_CORE_EXIT_H
#define RTACCEL_CORE_EXIT_H

enum {
	RTACCEL_EXIT_OK = 0,
	RTACCEL_EXIT_FAILS = 1,
	RTACCEL_EXIT_BAD_INPUT = 2,
	RTACCEL_EXIT_RUNTIME = 3,
	RTACCEL_EXIT_CANNOT_RUN_HERE = 77,
	RTACCEL_EXIT_INTERRUPTED = 130,
};

#endif /* RTACCEL_CORE_EXIT_H */
