/* The signals a program stops on (core, internal; C and C++). */
#ifndef RTACCEL_CORE_SIGNALS_H
#define RTACCEL_CORE_SIGNALS_H

#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Stops on SIGTERM, and on the signals a terminal sends its foreground
 * process group, Ctrl-C (SIGINT) and a hang-up (SIGHUP), by HANDLER (with
 * sigaction's FLAGS: SA_RESTART or 0). But a terminal's signal that the
 * program's parent ignored stays ignored: that parent stops the program
 * itself, or asked it to outlive the terminal (nohup). rtaccel run stops
 * its server after the executors have left it, and its regulator after the
 * best-effort work, whatever the terminal did. */
static inline void rtaccel_stop_on_signals(void (*handler)(int), int flags)
{
	static const int terminal[] = {SIGINT, SIGHUP};
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = handler;
	sa.sa_flags = flags;
	sigaction(SIGTERM, &sa, NULL);
	for (size_t i = 0; i < sizeof(terminal) / sizeof(terminal[0]); i++) {
		struct sigaction was;
		if (sigaction(terminal[i], NULL, &was) == 0 && was.sa_handler == SIG_IGN)
			continue;
		sigaction(terminal[i], &sa, NULL);
	}
}

/* The parent a program of a run is stopped by, and what stops the program. */
static pid_t rtaccel_stopping_parent;
static void (*rtaccel_stop_handler)(int);

static inline void rtaccel_term_through_parent(int sig, siginfo_t *info, void *context)
{
	(void)context;
	const pid_t parent = rtaccel_stopping_parent;
	if (info->si_pid != parent && getppid() == parent && kill(parent, SIGTERM) == 0)
		return;
	rtaccel_stop_handler(sig);
}

/* As rtaccel_stop_on_signals, for a program that its parent stops in an
 * order of its own (rtaccel run's server, regulator and executors): a
 * SIGTERM from anyone else goes to the parent instead, which then stops
 * this program in its turn. `timeout` and service managers send SIGTERM to
 * every process of a run at once, and a user who kills one of them ends
 * the run as if its runner had been sent it. A SIGTERM from the parent, or
 * once the parent is gone (PR_SET_PDEATHSIG), stops the program. */
static inline void rtaccel_stop_through_parent(void (*handler)(int), int flags)
{
	rtaccel_stop_on_signals(handler, flags);
	rtaccel_stopping_parent = getppid();
	rtaccel_stop_handler = handler;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = rtaccel_term_through_parent;
	sa.sa_flags = flags | SA_SIGINFO;
	sigaction(SIGTERM, &sa, NULL);
}

#endif /* RTACCEL_CORE_SIGNALS_H */
