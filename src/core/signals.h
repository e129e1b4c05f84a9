/* The signals a program stops on (core, internal; C and C++). */
#ifndef RTACCEL_CORE_SIGNALS_H
#define RTACCEL_CORE_SIGNALS_H

#include <signal.h>
#include <string.h>

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

#endif /* RTACCEL_CORE_SIGNALS_H */
