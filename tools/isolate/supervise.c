/* The best-effort program's supervisor: see supervise.h.
 *
 * rtaccel run starts each best-effort command line so. SIGTERM on the
 * runner's death (PR_SET_PDEATHSIG) reaches one process only: were that the
 * shell, what it started would run on for ever. This process is the one,
 * and ends the whole group. It is also the subreaper of all the program
 * starts: what leaves the group (a daemon's setsid) comes here once its
 * parent has ended, and is ended too.
 *
 * The output cap: a chatty program (`yes`, a training loop that prints each
 * step) writes gigabytes a minute into the run's results folder, which
 * fills the disk the results need. */
#include "supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/exit.h"
#include "core/procfs.h"

#define TAIL_BYTES (64 * 1024)

static pid_t program_group;
static int program_status;
static bool program_reaped;
static volatile sig_atomic_t end_asked, pause_asked;

static void on_end(int sig) { end_asked = sig; }
static void on_pause(int sig) { pause_asked = sig; }
static void on_child(int sig) { (void)sig; }

/* What of the program's output reaches the log: the first CAP bytes as
 * they come, and a ring of the last TAIL_BYTES of the rest. */
static struct {
	uint64_t cap, passed, dropped;
	char tail[TAIL_BYTES];
	size_t tail_at; /* next byte to write in the ring */
} out;

static void write_all(const char *p, size_t n)
{
	while (n) {
		const ssize_t w = write(STDOUT_FILENO, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* the log is gone or full: the program still runs */
		p += w;
		n -= (size_t)w;
	}
}

static void keep(const char *p, size_t n)
{
	if (out.passed < out.cap) {
		const size_t now = n < out.cap - out.passed ? n : (size_t)(out.cap - out.passed);
		write_all(p, now);
		out.passed += now;
		p += now;
		n -= now;
	}
	out.dropped += n;
	if (n > TAIL_BYTES) {
		p += n - TAIL_BYTES;
		n = TAIL_BYTES;
	}
	while (n) {
		const size_t room = TAIL_BYTES - out.tail_at, now = n < room ? n : room;
		memcpy(out.tail + out.tail_at, p, now);
		out.tail_at = (out.tail_at + now) % TAIL_BYTES;
		p += now;
		n -= now;
	}
}

/* Reads what the pipe holds now; false once it is at its end. */
static bool drain(int fd)
{
	static char buf[64 * 1024];
	for (;;) {
		const ssize_t n = read(fd, buf, sizeof(buf));
		if (n > 0) {
			keep(buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 && errno == EAGAIN;
	}
}

/* The last bytes, after the count of those left out, at the log's end:
 * where a reader looks for a program's last words. */
static void write_tail(void)
{
	if (!out.dropped)
		return;
	const uint64_t in_tail = out.dropped < TAIL_BYTES ? out.dropped : TAIL_BYTES;
	char line[160];
	const int n = snprintf(line, sizeof(line),
			       "\n[rtaccel-isolate: %llu bytes of output left out here; the log keeps the first %llu and the last %llu]\n",
			       (unsigned long long)(out.dropped - in_tail), (unsigned long long)out.cap,
			       (unsigned long long)in_tail);
	write_all(line, (size_t)n);
	if (in_tail == TAIL_BYTES) /* the ring is full: its oldest byte is at tail_at */
		write_all(out.tail + out.tail_at, TAIL_BYTES - out.tail_at);
	write_all(out.tail, out.tail_at);
}

/* Reaps every child that has ended, the program's descendants included,
 * keeping the program's status. */
static void reap_ended(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		if (pid == program_group) {
			program_status = status;
			program_reaped = true;
		}
}

/* Calls VISIT(pid, ARG) for each live process the program left: the
 * children of this process but the program (what the program started and
 * left, whatever its process group or session, a daemon's setsid, comes
 * here when its parent ends, this process being the subreaper) and, with
 * GROUP_TOO, the members of the program's process group. How many VISIT
 * counted. */
static int each_left(bool group_too, bool (*visit)(pid_t pid, int arg), int arg)
{
	DIR *proc = opendir("/proc");
	if (!proc)
		return 0;
	const pid_t self = getpid();
	int counted = 0;
	struct dirent *e;
	while ((e = readdir(proc))) {
		char *end;
		const long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid == program_group)
			continue;
		struct rtaccel_proc_stat st;
		if (rtaccel_read_proc_stat(pid, &st) && st.state != 'Z' &&
		    (st.parent == self || (group_too && st.group == program_group)) && visit((pid_t)pid, arg))
			counted++;
	}
	closedir(proc);
	return counted;
}

static bool send_signal(pid_t pid, int sig) { return kill(pid, sig) == 0; }
static bool count_one(pid_t pid, int arg)
{
	(void)pid;
	(void)arg;
	return true;
}

/* Sends SIG to the children of this process but the program (the group is
 * signalled whole, by its id). */
static void signal_orphans(int sig) { each_left(false, send_signal, sig); }

/* Whether nothing of the program is left: its group gone and no child of
 * this process. Reaps what has ended on the way. */
static bool nothing_left(void)
{
	reap_ended();
	return kill(-program_group, 0) < 0 && errno == ESRCH && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

/* Ends the program's group and what it left: SIGTERM (and SIGCONT, for
 * what is stopped), then SIGKILL for what is there a second later, waiting
 * up to half a second more. What they write meanwhile is read, so that
 * none blocks on a full pipe. */
static void end_all(int pipe_fd)
{
	kill(-program_group, SIGTERM);
	signal_orphans(SIGTERM);
	kill(-program_group, SIGCONT);
	signal_orphans(SIGCONT);
	const uint64_t start = rtaccel_monotonic_ns();
	for (;;) {
		if (pipe_fd >= 0)
			drain(pipe_fd);
		if (nothing_left())
			return;
		const uint64_t waited = rtaccel_monotonic_ns() - start;
		if (waited >= 1500 * 1000000ull)
			return;
		/* Again each time: an orphan's children come here as it ends. */
		if (waited >= 1000000000ull) {
			kill(-program_group, SIGKILL);
			signal_orphans(SIGKILL);
		}
		rtaccel_sleep_ns(10 * 1000 * 1000);
	}
}

/* Ctrl-Z: PROGRAM and what it left stop, then this process, which the
 * shell sees as its stopped job; `fg` or `bg` continues this process, which
 * continues them. */
static void pause_with_program(void)
{
	pause_asked = 0;
	kill(-program_group, SIGSTOP);
	signal_orphans(SIGSTOP);
	raise(SIGSTOP);
	kill(-program_group, SIGCONT);
	signal_orphans(SIGCONT);
}

/* Ends this process by SIG, as its program ended (or as the terminal
 * ended it), without a core of its own. */
static void end_by(int sig)
{
	const struct rlimit no_core = {0, 0};
	setrlimit(RLIMIT_CORE, &no_core);
	signal(sig, SIG_DFL);
	sigset_t only;
	sigemptyset(&only);
	sigaddset(&only, sig);
	sigprocmask(SIG_UNBLOCK, &only, NULL);
	raise(sig);
}

int isolate_supervise(char **program, uint64_t output_cap)
{
	/* PROGRAM starts with the signals this process takes as this process
	 * started with them: ignored where they were (nohup; a script's
	 * background job's SIGINT), or at their default. A reader of this
	 * process's output that went (`| head`) is no reason to leave PROGRAM
	 * running: SIGPIPE is ignored here. */
	static const int taken[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGTSTP, SIGPIPE};
	/* Those that end or pause the wait, and SIGCHLD, are blocked but inside
	 * ppoll(), so that none is lost between a check and the wait. */
	sigset_t waiting, blocked;
	sigemptyset(&blocked);
	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
		if (taken[i] != SIGPIPE)
			sigaddset(&blocked, taken[i]);
	sigaddset(&blocked, SIGCHLD);
	sigprocmask(SIG_BLOCK, &blocked, &waiting);
	struct sigaction at_start[sizeof(taken) / sizeof(taken[0])];
	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
		sigaction(taken[i], NULL, &at_start[i]);
	signal(SIGPIPE, SIG_IGN);
	/* PROGRAM, in a group of its own, is in the background of a terminal
	 * this process is in the foreground of: the terminal's Ctrl-C, Ctrl-\
	 * and Ctrl-Z reach this process alone, which ends PROGRAM or pauses it
	 * with itself, as the shell's job. What was ignored stays ignored
	 * (nohup's SIGHUP) but SIGTERM, by which the parent ends this process
	 * (and PR_SET_PDEATHSIG, below). */
	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
		if (taken[i] == SIGPIPE || (taken[i] != SIGTERM && at_start[i].sa_handler == SIG_IGN))
			continue;
		struct sigaction sa = {.sa_handler = taken[i] == SIGTSTP ? on_pause : on_end};
		sigemptyset(&sa.sa_mask);
		sigaction(taken[i], &sa, NULL);
	}
	struct sigaction sa = {.sa_handler = on_child};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	const pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		end_asked = SIGTERM;
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	int pipe_fd[2] = {-1, -1};
	out.cap = output_cap;
	if (output_cap && pipe2(pipe_fd, O_CLOEXEC) < 0) {
		fprintf(stderr, "rtaccel-isolate: pipe: %s\n", strerror(errno));
		return RTACCEL_EXIT_RUNTIME;
	}
	const pid_t child = fork();
	if (child < 0) {
		fprintf(stderr, "rtaccel-isolate: fork: %s\n", strerror(errno));
		return RTACCEL_EXIT_RUNTIME;
	}
	if (child == 0) {
		setpgid(0, 0);
		if (pipe_fd[1] >= 0) {
			dup2(pipe_fd[1], STDOUT_FILENO);
			dup2(pipe_fd[1], STDERR_FILENO);
		}
		signal(SIGCHLD, SIG_DFL);
		for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
			sigaction(taken[i], &at_start[i], NULL);
		sigprocmask(SIG_SETMASK, &waiting, NULL);
		execvp(program[0], program);
		fprintf(stderr, "rtaccel-isolate: %s: %s\n", program[0], strerror(errno));
		_exit(127);
	}
	setpgid(child, child); /* also here: the group exists before it is signalled */
	program_group = child;
	int reading = -1;
	if (pipe_fd[0] >= 0) {
		close(pipe_fd[1]);
		reading = pipe_fd[0];
		fcntl(reading, F_SETFL, O_NONBLOCK);
	}
	while (!end_asked) {
		reap_ended();
		if (program_reaped)
			break;
		if (pause_asked) {
			pause_with_program();
			continue;
		}
		struct pollfd p = {.fd = reading, .events = POLLIN};
		if (ppoll(&p, 1, NULL, &waiting) > 0 && !drain(reading)) {
			close(reading); /* every writer closed it: only the exit is left */
			reading = -1;
		}
	}
	sigprocmask(SIG_SETMASK, &waiting, NULL);
	/* A program that ended by itself and left work running (a command put
	 * in the background, a daemon): that work ends with it, and the log
	 * says so, where a user who meant it to run on looks first. */
	const int left = program_reaped && !end_asked ? each_left(true, count_one, 0) : 0;
	end_all(reading);
	if (reading >= 0)
		drain(reading);
	write_tail();
	if (left) {
		const char *slash = strrchr(program[0], '/');
		fprintf(stderr, "rtaccel-isolate: %s ended, and the %d process(es) it left running were ended with it "
				"(keep best-effort work in the foreground of its command)\n",
			slash ? slash + 1 : program[0], left);
	}
	/* Ended from the terminal: this process ends by the terminal's signal,
	 * which tells a shell running it in a loop to stop there too. */
	const int ended_by = end_asked == SIGINT || end_asked == SIGQUIT ? end_asked
			     : program_reaped && WIFSIGNALED(program_status) ? WTERMSIG(program_status)
									   : 0;
	if (ended_by)
		end_by(ended_by);
	if (!program_reaped)
		return RTACCEL_EXIT_RUNTIME;
	return WIFEXITED(program_status) ? WEXITSTATUS(program_status) : RTACCEL_EXIT_RUNTIME;
}

int isolate_run(char **program, void (*ended)(void))
{
	/* Blocked from before the fork, so that none is lost: SIGCHLD and the
	 * signals passed on, those this process was not started ignoring. */
	static const int passed_on[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
	sigset_t waited, at_start;
	sigemptyset(&waited);
	sigaddset(&waited, SIGCHLD);
	for (size_t i = 0; i < sizeof(passed_on) / sizeof(passed_on[0]); i++) {
		struct sigaction was;
		if (sigaction(passed_on[i], NULL, &was) == 0 && was.sa_handler != SIG_IGN)
			sigaddset(&waited, passed_on[i]);
	}
	sigprocmask(SIG_BLOCK, &waited, &at_start);
	const pid_t child = fork();
	if (child < 0) {
		fprintf(stderr, "rtaccel-isolate: fork: %s\n", strerror(errno));
		sigprocmask(SIG_SETMASK, &at_start, NULL);
		ended();
		return RTACCEL_EXIT_RUNTIME;
	}
	if (child == 0) {
		sigprocmask(SIG_SETMASK, &at_start, NULL);
		execvp(program[0], program);
		fprintf(stderr, "rtaccel-isolate: %s: %s\n", program[0], strerror(errno));
		_exit(127);
	}
	int status = 0;
	for (;;) {
		siginfo_t info;
		const int sig = sigwaitinfo(&waited, &info);
		if (sig == SIGCHLD) {
			if (waitpid(child, &status, WNOHANG) == child)
				break;
		} else if (sig > 0 && info.si_code != SI_KERNEL) {
			/* Sent by a process (kill, a launcher, a service manager)
			 * to this one: it is the program's. What the kernel sent
			 * (a terminal's Ctrl-C, its hang-up) went to the whole
			 * foreground process group, the program's too, and is not
			 * sent a second time. */
			kill(child, sig);
		}
	}
	/* What came after PROGRAM ended had no one to go to: unblocked, it
	 * would end this process before ENDED and PROGRAM's status. */
	const struct timespec now = {0, 0};
	while (sigtimedwait(&waited, NULL, &now) > 0)
		;
	sigprocmask(SIG_SETMASK, &at_start, NULL);
	ended();
	if (WIFSIGNALED(status))
		end_by(WTERMSIG(status));
	return WIFEXITED(status) ? WEXITSTATUS(status) : RTACCEL_EXIT_RUNTIME;
}
