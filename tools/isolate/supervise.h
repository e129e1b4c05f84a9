/* rtaccel-isolate run-be --end-with-parent: a program run under a
 * supervisor that ends it, and all it started, with itself; and hold's
 * program, run while the bandwidth lock is held for it. */
#ifndef RTACCEL_TOOLS_ISOLATE_SUPERVISE_H
#define RTACCEL_TOOLS_ISOLATE_SUPERVISE_H

#include <stdint.h>

/* Runs PROGRAM (argv, NULL-terminated) in a process group of its own and
 * ends that group and what left it (SIGTERM and SIGCONT, SIGKILL a second
 * later) when PROGRAM ends, when this process gets SIGTERM, SIGHUP, or a
 * terminal's SIGINT or SIGQUIT (it then ends by that signal), and when its
 * parent ends; a terminal's SIGTSTP stops PROGRAM with this process, and
 * SIGCONT continues both. Those this process was started ignoring (nohup's
 * SIGHUP) it ignores, all but SIGTERM. PROGRAM starts with them all and
 * SIGPIPE (which this process ignores) as this process was started with
 * them. With OUTPUT_CAP > 0, PROGRAM's stdout and stderr come through a
 * pipe, and of their bytes past the first OUTPUT_CAP only the last 64 KiB
 * reach this process's stdout, after a line that counts what was left out.
 * Returns PROGRAM's exit status; where a signal ended it, this process ends
 * by the same signal (by the terminal's, where the terminal ended it). */
int isolate_supervise(char **program, uint64_t output_cap);

/* Runs PROGRAM (argv, NULL-terminated) in this process's group, with this
 * process's descriptors and signals, and waits for it, as a shell runs a
 * command: a signal a process sends to this one to end or steer PROGRAM
 * (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2; but those this
 * process was started ignoring) goes on to it, one a terminal sent to its
 * foreground group reached PROGRAM already. Calls ENDED once PROGRAM has
 * ended (or could not start), then ends this process by the signal that
 * ended PROGRAM, or returns PROGRAM's exit status (127 where it was not
 * found). */
int isolate_run(char **program, void (*ended)(void));

#endif
