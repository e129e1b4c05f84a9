/* The test guard fails on purpose: a test that dies leaving a stopped child
 * that holds its output open, a daemon, shared memory, a socket file and,
 * as root, a network namespace, a veth pair and a cgroup; one that passes
 * but leaves the same behind; one that hangs. Each must be reported within
 * seconds and leave nothing.
 *
 * An object that a process outside the test makes while it runs is not the
 * test's: it is kept, and not blamed; one that the test's own processes
 * made is, though its maker was reaped before the guard could ask who it
 * was, or the test crashed.
 *
 * Who uses an object says whose it is now: shared memory that a process
 * outside the tests has open or mapped is that process's, and kept; what
 * only the tests' own processes use once the test ended, or no process
 * does, was left. Fast DDS's segments (rclpy's) are told as Fast DDS tells
 * them: one whose lock file no process holds is dead, though a peer still
 * maps it; a port's mutex is in use while its port is. A guard without
 * root (the selftest, as root, runs one as nobody) keeps a new file of
 * another user's: its tests could not have made it.
 *
 *   guard_selftest GUARD          the checks (ctest runs this)
 *   guard_selftest misbehave N    leave everything behind, then exit N
 *   guard_selftest hang           start a child, then wait for ever
 *   guard_selftest beside         say "ready", make shared memory in a
 *                                 grandchild on a line of input, say "done",
 *                                 exit 0 at the input's end
 *   guard_selftest crash          make shared memory, then die of SIGSEGV
 *   guard_selftest dds NAME [PEER]
 *                                 make NAME as Fast DDS makes a segment, map
 *                                 PEER as its peer would, say "ready", hold
 *                                 them until the input's end
 *   guard_selftest dds-crash      make a Fast DDS segment and a port, say
 *                                 "ready", die of SIGKILL on a line of input
 *   guard_selftest skip NEED      skip for want of NEED (tests/harness/skip.h) */
#include "../lock/test_util.h"

#include <fcntl.h>
#include <grp.h>
#include <semaphore.h>
#include <stdbool.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define NAME "rtaccel-guard-selftest"

static bool run(const char *cmd)
{
	return system(cmd) == 0;
}

/* Where cgroup v2 is mounted, or NULL. */
static const char *cgroup2(void)
{
	static const char *const roots[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"};
	for (int i = 0; i < 2; i++) {
		char p[128];
		snprintf(p, sizeof(p), "%s/cgroup.procs", roots[i]);
		if (access(p, F_OK) == 0 && access(roots[i], W_OK) == 0)
			return roots[i];
	}
	return NULL;
}

static int misbehave(int code)
{
	const int me = (int)getpid();
	/* a child that stops itself: it holds stdout open and only SIGKILL
	 * ends it */
	pid_t stopped = fork();
	if (stopped == 0) {
		raise(SIGSTOP);
		_exit(0);
	}
	/* a daemon: a new session, its parent gone */
	int pipefd[2];
	CHECK_EQ(pipe(pipefd), 0);
	pid_t mid = fork();
	if (mid == 0) {
		setsid();
		pid_t daemon = fork();
		if (daemon == 0) {
			for (;;)
				pause();
		}
		CHECK_EQ(write(pipefd[1], &daemon, sizeof(daemon)), (ssize_t)sizeof(daemon));
		_exit(0);
	}
	pid_t daemon;
	CHECK_EQ(read(pipefd[0], &daemon, sizeof(daemon)), (ssize_t)sizeof(daemon));
	waitpid(mid, NULL, 0);
	printf("process %d\nprocess %d\n", (int)stopped, (int)daemon);

	char path[256];
	snprintf(path, sizeof(path), "/dev/shm/" NAME ".%d", me);
	int fd = open(path, O_CREAT | O_RDWR, 0600);
	CHECK(fd >= 0);
	close(fd);
	printf("file %s\n", path);

	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/" NAME ".%d.sock", me);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK_EQ(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	printf("file %s\n", sa.sun_path);

	if (getuid() == 0) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "ip netns add rgs%d", me);
		if (run(cmd))
			printf("file /run/netns/rgs%d\n", me);
		snprintf(cmd, sizeof(cmd), "ip link add rgs%da type veth peer name rgs%db", me, me);
		if (run(cmd))
			printf("file /sys/class/net/rgs%da\nfile /sys/class/net/rgs%db\n", me, me);
		const char *root = cgroup2();
		if (root) {
			snprintf(path, sizeof(path), "%s/" NAME ".%d", root, me);
			if (mkdir(path, 0755) == 0)
				printf("file %s\n", path);
		}
	}
	fflush(stdout);
	return code;
}

static _Noreturn void hang(void)
{
	pid_t child = fork();
	if (child == 0) {
		for (;;)
			pause();
	}
	printf("process %d\n", (int)child);
	fflush(stdout);
	for (;;)
		pause();
}

/* Makes the empty shared memory object PATH. */
static void make_shm(const char *path)
{
	int fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
}

/* The test beside which the selftest makes an object of its own: the
 * test's is made by a grandchild that its parent reaps at once. */
static int beside(void)
{
	char path[256], line[16];
	snprintf(path, sizeof(path), "/dev/shm/" NAME ".grandchild.%d", (int)getpid());
	printf("ready\n");
	fflush(stdout);
	CHECK(fgets(line, sizeof(line), stdin) != NULL);
	pid_t child = fork();
	if (child == 0) {
		pid_t grandchild = fork();
		if (grandchild == 0) {
			make_shm(path);
			_exit(0);
		}
		waitpid(grandchild, NULL, 0);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	printf("file %s\ndone\n", path);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}

static int crash(void)
{
	/* no core file to write: the crash is the point, not its image */
	const struct rlimit none = {0, 0};
	setrlimit(RLIMIT_CORE, &none);
	char path[256];
	snprintf(path, sizeof(path), "/dev/shm/" NAME ".crashed.%d", (int)getpid());
	make_shm(path);
	printf("file %s\n", path);
	fflush(stdout);
	raise(SIGSEGV);
	return 0;
}

/* Maps the shared memory object PATH (made, 4096 bytes, if CREATE), as a
 * process that uses it does; the mapping. */
static void *map_shm(const char *path, bool create)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0644);
	CHECK(fd >= 0);
	CHECK(!create || ftruncate(fd, 4096) == 0);
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	close(fd);
	return m;
}

/* Makes NAME in /dev/shm as Fast DDS's shared-memory transport makes a
 * segment or a port (seen of its 3.2): NAME mapped; its lock file NAME_el
 * open and locked for as long as the owner lives; its mutex,
 * sem.NAME_mutex, a POSIX semaphore made and closed again, as a port's is
 * between the openings of the port. Says each "file PATH". */
static void make_fastdds(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	map_shm(path, true);
	printf("file %s\n", path);
	snprintf(path, sizeof(path), "/dev/shm/%s_el", name);
	int lock = open(path, O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC, 0666);
	CHECK(lock >= 0);
	CHECK_EQ(flock(lock, LOCK_EX | LOCK_NB), 0);
	printf("file %s\n", path);
	snprintf(path, sizeof(path), "/%s_mutex", name);
	sem_t *mutex = sem_open(path, O_CREAT | O_EXCL, 0644, 1);
	CHECK(mutex != SEM_FAILED);
	sem_close(mutex);
	printf("file /dev/shm/sem.%s_mutex\n", name);
}

/* A Fast DDS node, made to order: its segment NAME, and PEER (another's
 * segment, or NULL) mapped as a node maps those of the nodes it talks to;
 * held until the input ends. */
static int dds(const char *name, const char *peer)
{
	make_fastdds(name);
	if (peer) {
		char path[256];
		snprintf(path, sizeof(path), "/dev/shm/%s", peer);
		map_shm(path, false);
	}
	printf("ready\n");
	fflush(stdout);
	char line[16];
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}

/* A test whose Fast DDS node crashes: its segment, and a port without a
 * lock file (one whose listener closed it, kept by the peers that write to
 * it), which the selftest maps as a peer; on a line of input it dies of
 * SIGKILL. */
static int dds_crash(void)
{
	char name[128], path[256], line[16];
	snprintf(name, sizeof(name), "fastdds_" NAME "-crashed.%d", (int)getpid());
	make_fastdds(name);
	snprintf(path, sizeof(path), "/dev/shm/fastdds_" NAME "-port.%d", (int)getpid());
	map_shm(path, true);
	printf("file %s\n", path);
	printf("ready\n");
	fflush(stdout);
	CHECK(fgets(line, sizeof(line), stdin) != NULL);
	raise(SIGKILL);
	return 0;
}

/* Reads lines of IN into OUT (at *LEN, N in all) up to and with WANT; false
 * at the end of IN first. */
static bool read_until(FILE *in, const char *want, char *out, size_t n, size_t *len)
{
	char line[512];
	while (fgets(line, sizeof(line), in)) {
		*len += (size_t)snprintf(out + *len, n - *len, "%s", line);
		if (strcmp(line, want) == 0)
			return true;
	}
	return false;
}

/* Runs GUARD --resources SELF beside with its output in OUT, and makes
 * OUTSIDE once the test is running; returns the guard's exit status. The
 * guard is stopped while the test makes its object and reaps its maker, so
 * that it reads who made it only when the maker is gone. */
static int guarded_beside(const char *guard, const char *outside, char *out, size_t n)
{
	int to[2], from[2];
	CHECK_EQ(pipe2(to, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(from, O_CLOEXEC), 0);
	char self[64];
	snprintf(self, sizeof(self), "/proc/%d/exe", (int)getpid());
	pid_t g = fork();
	if (g == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		dup2(from[1], 2);
		execl(guard, guard, "--resources", self, "beside", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	FILE *in = fdopen(from[0], "r");
	CHECK(in != NULL);
	size_t len = 0;
	out[0] = 0;
	CHECK(read_until(in, "ready\n", out, n, &len));
	CHECK_EQ(kill(g, SIGSTOP), 0);
	make_shm(outside);
	CHECK_EQ(write(to[1], "go\n", 3), 3);
	CHECK(read_until(in, "done\n", out, n, &len));
	CHECK_EQ(kill(g, SIGCONT), 0);
	close(to[1]);
	read_until(in, "", out, n, &len);
	fclose(in);
	int status;
	CHECK_EQ(waitpid(g, &status, 0), g);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs GUARD ARGS... with its output in OUT (stdout and stderr), and
 * returns its exit status; *SECONDS is how long until its output closed. */
static int guarded(const char *guard, const char *args, char *out, size_t n, double *seconds)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", guard, args);
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t len = fread(out, 1, n - 1, p); /* to EOF: every writer gone */
	out[len] = 0;
	int status = pclose(p);
	*seconds = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Whether the guard said, in one line, that it found WHAT left behind. */
static bool guard_named(const char *out, const char *what)
{
	for (const char *line = strstr(out, "rtaccel-test-guard: "); line;
	     line = strstr(line + 1, "rtaccel-test-guard: ")) {
		const char *end = strchr(line, '\n');
		const char *hit = strstr(line, what), *left = strstr(line, " left ");
		if (hit && left && (!end || (hit < end && left < end)))
			return true;
	}
	return false;
}

/* Every "process PID" and "file PATH" line the misbehaving test printed is
 * gone, and the guard named each left behind (NAMED; a timed-out test's
 * process group is killed whole, unnamed). */
static void nothing_left(const char *out, bool named)
{
	int processes = 0, files = 0;
	for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		int pid;
		char path[256];
		if (sscanf(line, "process %d", &pid) == 1) {
			CHECK(kill(pid, 0) < 0 && errno == ESRCH);
			char what[64];
			snprintf(what, sizeof(what), "process %d ", pid);
			CHECK(!named || guard_named(out, what));
			processes++;
		} else if (sscanf(line, "file %255s", path) == 1) {
			CHECK(access(path, F_OK) < 0);
			CHECK(!named || guard_named(out, strrchr(path, '/') + 1));
			files++;
		}
	}
	CHECK(processes >= 1);
	printf("  %d processes and %d objects named and gone\n", processes, files);
}

/* What the cases below make, removed when the selftest ends, however a
 * failed check ends it: it leaves nothing of its own. */
#define MAX_MADE 16
static char made[MAX_MADE][256];
static int nmade;

static void remember(const char *path)
{
	CHECK(nmade < MAX_MADE);
	snprintf(made[nmade++], sizeof(made[0]), "%s", path);
}

/* Remembers every "file PATH" that OUT says was made. */
static void remember_said(const char *out)
{
	for (const char *line = out; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char path[256];
		if (sscanf(line, "file %255s", path) == 1)
			remember(path);
	}
}

static void forget_made(void)
{
	for (int i = 0; i < nmade; i++)
		unlink(made[i]);
	nmade = 0;
}

/* Starts ARGV, its input from *TO, its output and errors into *FROM; its
 * pid. It dies with the selftest (test_fork()). */
static pid_t start(char *const argv[], int *to, FILE **from)
{
	int in[2], out[2];
	CHECK_EQ(pipe2(in, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(out, O_CLOEXEC), 0);
	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(out[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*to = in[1];
	*from = fdopen(out[0], "r");
	CHECK(*from != NULL);
	return pid;
}

static int exit_status(pid_t pid)
{
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Whether the guard said that a test left the shared memory object NAME
 * behind: the whole name, not one that begins with it. */
static bool left_said(const char *out, const char *name)
{
	char want[320];
	snprintf(want, sizeof(want), " left shm %s behind", name);
	return strstr(out, want) != NULL;
}

/* Whether the guard said that process PID uses the shared memory object
 * NAME, and kept it. */
static bool kept_for(const char *out, const char *name, pid_t pid)
{
	char want[320];
	snprintf(want, sizeof(want), "shm %s is in use by process %d (", name, (int)pid);
	const char *hit = strstr(out, want);
	const char *end = hit ? strchr(hit, '\n') : NULL;
	return hit && end && end - hit > 6 && strncmp(end - 6, ": kept", 6) == 0;
}

/* The suite's check (--check), which has no test's tree to tell by: a
 * Fast DDS node outside the tests that makes its files and holds them
 * across the check keeps them, its port's mutex (which no process holds)
 * with them, and the guard says whose they are; a node that was killed is
 * named, every file of it, though the live node maps its segment still. */
static void check_beside_fastdds(const char *guard, char *out, size_t n)
{
	char self[64], snapshot[256], args[512], dead_name[128], live_name[128], said[4096] = "";
	double took;
	snprintf(self, sizeof(self), "/proc/%d/exe", (int)getpid());
	snprintf(snapshot, sizeof(snapshot), "/tmp/" NAME ".%d.snapshot", (int)getpid());
	remember(snapshot);
	snprintf(args, sizeof(args), "--snapshot %s", snapshot);
	CHECK_EQ(guarded(guard, args, out, n, &took), 0);

	snprintf(dead_name, sizeof(dead_name), "fastdds_" NAME "-dead.%d", (int)getpid());
	snprintf(live_name, sizeof(live_name), "fastdds_" NAME "-live.%d", (int)getpid());
	int to_dead, to_live;
	FILE *from_dead, *from_live;
	size_t len = 0;
	pid_t dead = start((char *[]){self, "dds", dead_name, NULL}, &to_dead, &from_dead);
	CHECK(read_until(from_dead, "ready\n", said, sizeof(said), &len));
	pid_t live = start((char *[]){self, "dds", live_name, dead_name, NULL}, &to_live, &from_live);
	CHECK(read_until(from_live, "ready\n", said, sizeof(said), &len));
	remember_said(said);
	CHECK_EQ(kill(dead, SIGKILL), 0);
	CHECK_EQ(exit_status(dead), 128 + SIGKILL);

	snprintf(args, sizeof(args), "--check %s", snapshot);
	int status = guarded(guard, args, out, n, &took);
	printf("the suite's check, beside a Fast DDS node that lives and one that was killed: "
	       "exit %d\n%s", status, out);
	CHECK_EQ(status, 1);
	static const char *const files[] = {"%s", "%s_el", "sem.%s_mutex"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char name[256], path[300];
		snprintf(name, sizeof(name), files[i], dead_name);
		snprintf(path, sizeof(path), "/dev/shm/%s", name);
		CHECK(left_said(out, name));
		CHECK(access(path, F_OK) < 0);
		snprintf(name, sizeof(name), files[i], live_name);
		snprintf(path, sizeof(path), "/dev/shm/%s", name);
		CHECK(!left_said(out, name));
		CHECK(kept_for(out, name, live));
		CHECK_EQ(access(path, F_OK), 0);
	}
	char through[256];
	snprintf(through, sizeof(through), " through %s, outside the tests: kept", live_name);
	CHECK(strstr(out, through) != NULL);

	close(to_live);
	CHECK_EQ(exit_status(live), 0);
	close(to_dead);
	fclose(from_dead);
	fclose(from_live);
	forget_made();
	printf("  the live node's kept, the killed one's named and gone\n");
}

/* Runs GUARD ARG FILE as the user UID, with no root left (as a user's
 * suite runs it), its output in OUT; its exit status. */
static int guarded_as(uid_t uid, const char *guard, const char *arg, const char *file, char *out,
		      size_t n)
{
	int fds[2];
	CHECK_EQ(pipe2(fds, O_CLOEXEC), 0);
	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		/* a change of user clears the parent-death signal: set again */
		if (setgroups(0, NULL) == 0 && setgid(uid) == 0 && setuid(uid) == 0 &&
		    prctl(PR_SET_PDEATHSIG, SIGKILL) == 0)
			execl(guard, guard, arg, file, (char *)NULL);
		fprintf(stderr, "guard_selftest: %s as uid %u: %s\n", guard, (unsigned)uid,
			strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	size_t len = 0;
	ssize_t r;
	while (len < n - 1 && (r = read(fds[0], out + len, n - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = 0;
	close(fds[0]);
	return exit_status(pid);
}

/* A copy of GUARD in /tmp, which every user may enter, its name into PATH:
 * the build tree may lie in a folder only its owner enters (mktemp -d's). */
static void guard_anyone_runs(const char *guard, char *path, size_t n)
{
	snprintf(path, n, "/tmp/" NAME ".%d.guard", (int)getpid());
	remember(path);
	int in = open(guard, O_RDONLY | O_CLOEXEC);
	int out = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0755);
	CHECK(in >= 0 && out >= 0);
	char buf[65536];
	ssize_t r;
	while ((r = read(in, buf, sizeof(buf))) > 0)
		CHECK_EQ(write(out, buf, (size_t)r), r);
	CHECK_EQ(r, 0);
	CHECK_EQ(fchmod(out, 0755), 0); /* past the umask */
	close(in);
	close(out);
}

/* The suite's check run by a user (not root): it cannot see another user's
 * processes, and the tests, which run as that user, cannot make a file of
 * another's. A new file of another user's (root's here), which no process
 * uses, is that user's: kept, and said; one of the guard's user's that no
 * process uses is named. */
static void check_as_user(const char *guard, char *out, size_t n)
{
	const uid_t user = 65534; /* nobody */
	char copy[256], snapshot[256], others[256], own[256], want[400];
	guard_anyone_runs(guard, copy, sizeof(copy));
	guard = copy;
	snprintf(snapshot, sizeof(snapshot), "/tmp/" NAME ".%d.user.snapshot", (int)getpid());
	remember(snapshot);
	CHECK_EQ(guarded_as(user, guard, "--snapshot", snapshot, out, n), 0);
	snprintf(others, sizeof(others), "/dev/shm/fastdds_" NAME "-root.%d", (int)getpid());
	snprintf(own, sizeof(own), "/dev/shm/fastdds_" NAME "-user.%d", (int)getpid());
	remember(others);
	remember(own);
	make_shm(others);
	int fd = open(own, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(fchown(fd, user, user), 0);
	close(fd);
	int status = guarded_as(user, guard, "--check", snapshot, out, n);
	printf("the suite's check as uid %u, beside a file of root's and one of its own: exit %d\n%s",
	       (unsigned)user, status, out);
	CHECK_EQ(status, 1);
	snprintf(want, sizeof(want), "shm %s belongs to uid 0, not to uid %u of the tests: kept",
		 strrchr(others, '/') + 1, (unsigned)user);
	CHECK(strstr(out, want) != NULL);
	CHECK(!left_said(out, strrchr(others, '/') + 1));
	CHECK_EQ(access(others, F_OK), 0);
	CHECK(left_said(out, strrchr(own, '/') + 1));
	CHECK(access(own, F_OK) < 0);
	forget_made();
	printf("  root's kept, the user's own named and gone\n");
}

/* A test whose Fast DDS node was killed (SIGKILL) while a peer outside the
 * test mapped its segment and its port: the segment, its lock file and its
 * mutex are named, though mapped; the port, which has no lock file of its
 * own (as when its listener closed it), is the peer's while the peer uses
 * it: kept. */
static void crashed_fastdds(const char *guard, char *out, size_t n)
{
	char self[64];
	snprintf(self, sizeof(self), "/proc/%d/exe", (int)getpid());
	int to;
	FILE *from;
	size_t len = 0;
	out[0] = 0;
	pid_t g = start((char *[]){(char *)guard, "--resources", self, "dds-crash", NULL}, &to, &from);
	CHECK(read_until(from, "ready\n", out, n, &len));
	remember_said(out);
	char made_by_test[4][256];
	int k = 0;
	for (const char *line = strstr(out, "file "); line && k < 4; line = strstr(line + 1, "\nfile "))
		CHECK(sscanf(line + (line[0] == '\n'), "file %255s", made_by_test[k++]) == 1);
	CHECK_EQ(k, 4);
	/* the peer's mappings: the segment, then the port */
	void *segment = map_shm(made_by_test[0], false), *port = map_shm(made_by_test[3], false);
	CHECK_EQ(write(to, "go\n", 3), 3);
	read_until(from, "", out, n, &len);
	fclose(from);
	close(to);
	int status = exit_status(g);
	printf("a test whose Fast DDS node was killed, its files mapped by a peer: exit %d\n%s",
	       status, out);
	CHECK_EQ(status, 128 + SIGKILL);
	for (int i = 0; i < 3; i++) {
		CHECK(left_said(out, strrchr(made_by_test[i], '/') + 1));
		CHECK(access(made_by_test[i], F_OK) < 0);
	}
	CHECK(!left_said(out, strrchr(made_by_test[3], '/') + 1));
	CHECK(kept_for(out, strrchr(made_by_test[3], '/') + 1, getpid()));
	munmap(segment, 4096);
	munmap(port, 4096);
	forget_made();
	printf("  the killed node's segment named and gone, the port its peer uses kept\n");
}

/* A test runner's session (--watch), whose tree's root is the runner's own
 * process: shared memory that only the runner maps once its test ended was
 * left behind by the test; what a process outside the runner maps as well
 * is that process's. */
static void watched_runner(const char *guard, char *out, size_t n)
{
	int go[2], done[2];
	CHECK_EQ(pipe2(go, O_CLOEXEC), 0);
	CHECK_EQ(pipe2(done, O_CLOEXEC), 0);
	pid_t runner = test_fork();
	CHECK(runner >= 0);
	if (runner == 0) {
		char c, path[256];
		if (read(go[0], &c, 1) != 1)
			_exit(T_FAIL);
		snprintf(path, sizeof(path), "/dev/shm/" NAME "-runner.%d", (int)getpid());
		map_shm(path, true);
		snprintf(path, sizeof(path), "/dev/shm/" NAME "-shared.%d", (int)getpid());
		map_shm(path, true);
		if (write(done[1], "x", 1) != 1)
			_exit(T_FAIL);
		for (;;)
			pause();
	}
	char root[16], own[256], shared[256], c;
	snprintf(root, sizeof(root), "%d", (int)runner);
	snprintf(own, sizeof(own), "/dev/shm/" NAME "-runner.%d", (int)runner);
	snprintf(shared, sizeof(shared), "/dev/shm/" NAME "-shared.%d", (int)runner);
	remember(own);
	remember(shared);
	int to;
	FILE *from;
	size_t len = 0;
	pid_t g = start((char *[]){(char *)guard, "--watch", root, NULL}, &to, &from);
	CHECK(read_until(from, ".\n", out, n, &len));
	CHECK_EQ(write(to, "mark\n", 5), 5);
	CHECK(read_until(from, ".\n", out, n, &len));
	/* the runner's test makes both; the selftest maps the second as well */
	CHECK_EQ(write(go[1], "x", 1), 1);
	CHECK_EQ(read(done[0], &c, 1), 1);
	void *m = map_shm(shared, false);
	CHECK_EQ(write(to, "check t\n", 8), 8);
	len = 0;
	out[0] = 0;
	CHECK(read_until(from, ".\n", out, n, &len));
	printf("a test runner's session: what only the runner maps once its test ended, and "
	       "what another maps too\n%s", out);
	char want[400];
	snprintf(want, sizeof(want), "left rtaccel-test-guard: t left shm %s behind: removed\n",
		 strrchr(own, '/') + 1);
	CHECK(strstr(out, want) != NULL);
	CHECK(access(own, F_OK) < 0);
	CHECK(!left_said(out, strrchr(shared, '/') + 1));
	CHECK(kept_for(out, strrchr(shared, '/') + 1, getpid()));
	close(to);
	fclose(from);
	CHECK_EQ(exit_status(g), 0);
	CHECK_EQ(kill(runner, SIGKILL), 0);
	CHECK_EQ(exit_status(runner), 128 + SIGKILL);
	munmap(m, 4096);
	forget_made();
	printf("  the runner's own named and gone, the shared one kept\n");
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "misbehave") == 0)
		return misbehave(atoi(argv[2]));
	if (argc == 2 && strcmp(argv[1], "hang") == 0)
		hang();
	if (argc == 2 && strcmp(argv[1], "beside") == 0)
		return beside();
	if (argc == 2 && strcmp(argv[1], "crash") == 0)
		return crash();
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "dds") == 0)
		return dds(argv[2], argc == 4 ? argv[3] : NULL);
	if (argc == 2 && strcmp(argv[1], "dds-crash") == 0)
		return dds_crash();
	if (argc == 3 && strcmp(argv[1], "skip") == 0)
		test_skip(argv[2], "this machine has no %s", argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s GUARD | misbehave N | hang | beside | crash | dds NAME [PEER] | "
			"dds-crash | skip NEED\n", argv[0]);
		return 2;
	}
	watchdog(120);
	atexit(forget_made);
	const char *guard = argv[1];
	static char out[16384];
	char args[512];
	double took;
	/* Without root the misbehaving child cannot make namespaces, links or
	 * cgroups: the rest is checked, and the test ends as a skip. */
	const int result = getuid() == 0 ? T_PASS
					 : test_skip_part("root", "network namespaces, veth and cgroups not checked");

	snprintf(args, sizeof(args), "--resources /proc/%d/exe misbehave 1", (int)getpid());
	int status = guarded(guard, args, out, sizeof(out), &took);
	printf("a failing test that leaves everything behind: exit %d after %.1f s\n%s", status,
	       took, out);
	CHECK_EQ(status, 1);
	CHECK(took < 20);
	nothing_left(out, true);

	snprintf(args, sizeof(args), "--resources /proc/%d/exe misbehave 0", (int)getpid());
	status = guarded(guard, args, out, sizeof(out), &took);
	printf("a passing test that leaves everything behind: exit %d after %.1f s\n", status, took);
	CHECK_EQ(status, 1);
	nothing_left(out, true);

	snprintf(args, sizeof(args), "--timeout 1 /proc/%d/exe hang", (int)getpid());
	status = guarded(guard, args, out, sizeof(out), &took);
	printf("a test that hangs, under --timeout 1: exit %d after %.1f s\n", status, took);
	CHECK_EQ(status, 124);
	CHECK(took < 20);
	CHECK(strstr(out, "timed out after 1 s") != NULL);
	nothing_left(out, false);

	/* As root the guard tells who made what (fanotify); without, it
	 * judges by names alone, and the outsider's object would be blamed. */
	if (getuid() == 0) {
		char outside[256], grandchild[256];
		snprintf(outside, sizeof(outside), "/dev/shm/" NAME ".outside.%d", (int)getpid());
		status = guarded_beside(guard, outside, out, sizeof(out));
		printf("a test beside which another process makes shared memory: exit %d\n%s",
		       status, out);
		/* read from what the guard said, not from /dev/shm: a suite
		 * beside this one whose guard judges by names alone may remove
		 * it meanwhile */
		unlink(outside);
		char kept[320];
		snprintf(kept, sizeof(kept), "shm %s was made by process %d", strrchr(outside, '/') + 1,
			 (int)getpid());
		CHECK(!guard_named(out, strrchr(outside, '/') + 1));
		CHECK(strstr(out, kept) != NULL);
		/* the test's own, made by a grandchild reaped at once */
		CHECK(sscanf(strstr(out, "file "), "file %255s", grandchild) == 1);
		CHECK_EQ(status, 1);
		CHECK(access(grandchild, F_OK) < 0);
		CHECK(guard_named(out, strrchr(grandchild, '/') + 1));
		printf("  the other's kept, the test's named and gone\n");
		check_as_user(guard, out, sizeof(out));
	}

	snprintf(args, sizeof(args), "--resources /proc/%d/exe crash", (int)getpid());
	status = guarded(guard, args, out, sizeof(out), &took);
	printf("a test that crashes after making shared memory: exit %d\n%s", status, out);
	CHECK_EQ(status, 128 + SIGSEGV);
	char crashed[256];
	CHECK(sscanf(strstr(out, "file "), "file %255s", crashed) == 1);
	CHECK(access(crashed, F_OK) < 0);
	CHECK(guard_named(out, strrchr(crashed, '/') + 1));

	crashed_fastdds(guard, out, sizeof(out));
	check_beside_fastdds(guard, out, sizeof(out));
	watched_runner(guard, out, sizeof(out));

	status = guarded(guard, "sh -c 'exit 77'", out, sizeof(out), &took);
	CHECK_EQ(status, 77);
	status = guarded(guard, "true", out, sizeof(out), &took);
	CHECK_EQ(status, 0);
	CHECK_EQ(out[0], 0);
	printf("a skip and a clean pass go through unchanged\n");

	/* A skip for want of what RTACCEL_TEST_REQUIRE says is here fails. */
	snprintf(args, sizeof(args), "/proc/%d/exe skip qemu", (int)getpid());
	static const struct {
		const char *require;
		int status;
		const char *says;
	} skips[] = {{NULL, 77, "SKIP: needs qemu: this machine has no qemu\n"},
		     {"root,cores2", 77, "SKIP: needs qemu: "},
		     {"root,qemu", 1, "FAIL: required qemu: this machine has no qemu (RTACCEL_TEST_REQUIRE"},
		     {"all", 1, "FAIL: required qemu: "}};
	for (size_t i = 0; i < sizeof(skips) / sizeof(skips[0]); i++) {
		if (skips[i].require)
			setenv("RTACCEL_TEST_REQUIRE", skips[i].require, 1);
		else
			unsetenv("RTACCEL_TEST_REQUIRE");
		status = guarded(guard, args, out, sizeof(out), &took);
		CHECK_EQ(status, skips[i].status);
		CHECK(strncmp(out, skips[i].says, strlen(skips[i].says)) == 0);
	}
	printf("a skip is a failure where RTACCEL_TEST_REQUIRE names what it lacks\n");
	return result;
}
