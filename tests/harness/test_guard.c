/* rtaccel-test-guard: runs one test so that nothing of it outlives it.
 *
 *   rtaccel-test-guard [--timeout S] [--grace MS] [--resources] COMMAND [ARG...]
 *   rtaccel-test-guard --snapshot FILE     the machine's named objects, into FILE
 *   rtaccel-test-guard --check FILE        those made since FILE: named, removed
 *   rtaccel-test-guard --sweep PID [--grace MS] [--spare PID]...
 *                                          every descendant of PID ended
 *   rtaccel-test-guard --watch PID         one test's objects compared, on
 *                                          request, for a runner's session
 *
 * The test runs in a process group of its own, with the guard as its child
 * subreaper: what it starts and abandons is re-parented to the guard, not to
 * init. When the test's process exits, however it exits (a failed check, a
 * crash, its own watchdog), the guard gives what is left GRACE ms (500) to
 * end by itself, then kills every descendant, stopped ones too, reaps them
 * and names them; a test that passed but left a process behind fails. Past
 * TIMEOUT seconds (280) it kills the whole tree and fails with 124, so that
 * a hang is reported with the test's output before ctest's own timeout, which
 * kills the test alone and waits for whatever still holds its output open.
 *
 * With --resources (for tests that run alone, RUN_SERIAL), and in --check,
 * the machine's named objects are compared before and after: POSIX shared
 * memory (/dev/shm), socket files under /tmp, network namespaces
 * (/run/netns), network interfaces, cgroups (v2, and v1's memory
 * controller's). A new one that no live process uses was left behind: it
 * is named and removed, and the test fails. (Tests that run beside others are not compared: a neighbour's
 * objects would be taken for theirs.) As root the guard also watches who
 * makes them (fanotify): one made last by a process outside the test's
 * tree is said to be an outsider's and kept ("who made what" below). Shared
 * memory that a live process outside the tree uses is that process's, said
 * and kept as well, whoever made it; what only the tree's own processes
 * use once the test ended was left. Fast DDS's segments are told live or
 * dead as Fast DDS tells them, by their lock files ("who uses what").
 *
 * --sweep is the same end for a test runner that is itself the subreaper
 * (tests/python/harness.py): it kills the descendants of PID that are
 * still there after GRACE ms and names them, but for the helpers it keeps
 * (--spare) and theirs; the runner reaps them. --watch compares its tests'
 * objects, told by who made them (the runner's tree), as --resources does.
 *
 * RTACCEL_TEST_FAIL_AFTER_MS=N kills the test's own process N ms in, as a
 * crash would: how the clean-up of every kind of test is checked on purpose.
 *
 * Exit: the test's status (128+N when signal N ended it); 1 when it passed
 * but left something behind; 124 when it timed out; 2 on bad usage. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cgroup.h"

#define EXIT_LEFT_BEHIND 1
#define EXIT_TIMED_OUT 124
#define EXIT_USAGE 2

static const char *prog = "rtaccel-test-guard";

static uint64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* What the guard found left behind goes to stderr; what it only notes (an
 * object made outside the tests, a judgement by names alone) to stdout. In
 * --watch mode both go to its client on stdout, tagged "left" or "note". */
static bool tagged;

static void say(bool found, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(bool found, const char *fmt, ...)
{
	FILE *to = found && !tagged ? stderr : stdout;
	if (tagged)
		fputs(found ? "left " : "note ", to);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(to, fmt, ap);
	va_end(ap);
	/* said before the test is forked, or it would be said twice */
	fflush(to);
}

/* ---- processes ------------------------------------------------------------ */

struct proc {
	pid_t pid, ppid;
	char state;
	char comm[32];
};

/* PID's state, parent and name from /proc/PID/stat (a zombie's too); -1
 * once it is gone. */
static int read_proc(const char *pid, struct proc *p)
{
	char path[300], buf[512];
	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = 0;
	/* pid (comm) state ppid ...: comm may hold spaces and parentheses */
	char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren[1] == 0)
		return -1;
	*p = (struct proc){.pid = atoi(buf)};
	size_t clen = (size_t)(close_paren - open_paren - 1);
	if (clen >= sizeof(p->comm))
		clen = sizeof(p->comm) - 1;
	memcpy(p->comm, open_paren + 1, clen);
	return sscanf(close_paren + 2, "%c %d", &p->state, &p->ppid) == 2 ? 0 : -1;
}

/* /proc, to walk with next_process(); a guard that cannot read it cannot work. */
static DIR *open_proc(void)
{
	DIR *d = opendir("/proc");
	if (!d) {
		perror("rtaccel-test-guard: /proc");
		exit(EXIT_USAGE);
	}
	return d;
}

/* The next entry of /proc (D) that is a process, or NULL past the last. */
static struct dirent *next_process(DIR *d)
{
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
			return e;
	return NULL;
}

/* Every process on the machine (threads excluded), into *out; the count. */
static int list_processes(struct proc **out)
{
	int n = 0, cap = 256;
	struct proc *v = malloc(sizeof(*v) * (size_t)cap);
	if (!v) {
		perror("rtaccel-test-guard: /proc");
		exit(EXIT_USAGE);
	}
	DIR *d = open_proc();
	struct dirent *e;
	while ((e = next_process(d)) != NULL) {
		struct proc p;
		if (read_proc(e->d_name, &p) < 0)
			continue;
		if (n == cap) {
			cap *= 2;
			v = realloc(v, sizeof(*v) * (size_t)cap);
			if (!v)
				exit(EXIT_USAGE);
		}
		v[n++] = p;
	}
	closedir(d);
	*out = v;
	return n;
}

/* The live descendants of ROOT (zombies are dead: they only wait to be
 * reaped), into *out; the count. */
/* Processes the sweep leaves alone with their children (--spare): helpers
 * the test runner itself keeps for its whole session. */
#define MAX_SPARED 8
static pid_t spared[MAX_SPARED];
static int nspared;

static bool is_spared(pid_t pid)
{
	for (int i = 0; i < nspared; i++)
		if (spared[i] == pid)
			return true;
	return false;
}

static int descendants(pid_t root, struct proc **out)
{
	struct proc *all;
	int n = list_processes(&all);
	bool *mine = calloc((size_t)n + 1, sizeof(bool));
	/* parents may come after their children in /proc's order: repeat until
	 * nothing new joins */
	for (bool grew = true; grew;) {
		grew = false;
		for (int i = 0; i < n; i++) {
			if (mine[i])
				continue;
			if (is_spared(all[i].pid))
				continue;
			bool parent_mine = all[i].ppid == root;
			for (int j = 0; j < n && !parent_mine; j++)
				parent_mine = mine[j] && all[j].pid == all[i].ppid;
			if (parent_mine)
				mine[i] = grew = true;
		}
	}
	int k = 0;
	for (int i = 0; i < n; i++)
		if (mine[i] && all[i].state != 'Z' && all[i].pid != getpid())
			all[k++] = all[i];
	free(mine);
	*out = all;
	return k;
}

static void watch_drain(void);

static void reap_children(void)
{
	watch_drain();
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* Gives the descendants of ROOT GRACE_MS to end by themselves, then kills
 * the rest and, when ROOT is this process, reaps them. Names each one killed
 * on stderr; returns how many. */
static int sweep(pid_t root, unsigned grace_ms, const char *test)
{
	const bool reaper = root == getpid();
	const uint64_t give_up = monotonic_ms() + grace_ms;
	struct proc *left;
	int n;
	for (;;) {
		if (reaper)
			reap_children();
		n = descendants(root, &left);
		if (n == 0 || monotonic_ms() >= give_up)
			break;
		free(left);
		sleep_ms(20);
	}
	int killed = 0;
	for (int round = 0; n > 0 && round < 250; round++) {
		for (int i = 0; i < n; i++) {
			if (round == 0) {
				fprintf(stderr, "%s: %s left process %d (%s)%s behind: killed\n", prog,
					test, (int)left[i].pid, left[i].comm,
					left[i].state == 'T' || left[i].state == 't' ? ", stopped," : "");
				killed++;
			}
			kill(left[i].pid, SIGKILL);
		}
		free(left);
		sleep_ms(20);
		if (reaper)
			reap_children();
		n = descendants(root, &left);
	}
	if (n > 0)
		fprintf(stderr, "%s: %d processes of %s did not die\n", prog, n, test);
	free(left);
	return killed;
}

/* ---- named objects ---------------------------------------------------------- */

struct names {
	char **v;
	int n, cap;
};

/* Adds "KIND NAME" (KIND NULL: NAME is such an entry already). */
static void names_add(struct names *s, const char *kind, const char *name)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, sizeof(char *) * (size_t)s->cap);
		if (!s->v)
			exit(EXIT_USAGE);
	}
	if (asprintf(&s->v[s->n], "%s%s%s", kind ? kind : "", kind ? " " : "", name) < 0)
		exit(EXIT_USAGE);
	s->n++;
}

static void names_free(struct names *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	*s = (struct names){0};
}

/* qsort and bsearch want a real array even when it is empty */
static void names_sort(struct names *s, int (*cmp)(const void *, const void *))
{
	if (s->n > 1)
		qsort(s->v, (size_t)s->n, sizeof(char *), cmp);
}

static bool names_has(const struct names *s, char *const *name);

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_dir(struct names *s, const char *kind, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			names_add(s, kind, e->d_name);
	closedir(d);
}

/* Entries under DIR, DEPTH levels down, that are directories (WANT_DIRS)
 * or sockets; never following links. */
static void walk(struct names *s, const char *kind, const char *dir, int depth, bool want_dirs)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		struct stat st;
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (want_dirs)
				names_add(s, kind, path);
			if (depth > 1)
				walk(s, kind, path, depth - 1, want_dirs);
		} else if (!want_dirs && S_ISSOCK(st.st_mode)) {
			names_add(s, kind, path);
		}
	}
	closedir(d);
}

/* The groups of the hierarchies tests make groups in: cgroup v2
 * (/sys/fs/cgroup, or /sys/fs/cgroup/unified beside v1), and cgroup v1's
 * memory controller where v1 holds it (a memory limit for a test). */
static void walk_cgroups(struct names *s)
{
	FILE *f = fopen("/proc/self/mounts", "re");
	if (!f)
		return;
	char dev[256], dir[PATH_MAX], type[64], options[512];
	while (fscanf(f, "%255s %4095s %63s %511s %*[^\n]", dev, dir, type, options) == 4)
		if (strcmp(type, "cgroup2") == 0 || (strcmp(type, "cgroup") == 0 && rtaccel_mount_has_option(options, "memory")))
			walk(s, "cgroup", dir, 4, true);
	fclose(f);
}

static struct names snapshot(void)
{
	struct names s = {0};
	list_dir(&s, "shm", "/dev/shm");
	list_dir(&s, "netns", "/run/netns");
	list_dir(&s, "link", "/sys/class/net");
	walk(&s, "socket", "/tmp", 3, false);
	walk_cgroups(&s);
	names_sort(&s, cmp_str);
	return s;
}

/* Whether the symbolic link LINK points at WANT. */
static bool link_names(const char *link, const char *want)
{
	char target[PATH_MAX];
	ssize_t len = readlink(link, target, sizeof(target) - 1);
	if (len <= 0)
		return false;
	target[len] = 0;
	return strcmp(target, want) == 0;
}

/* Whether a live socket is bound to PATH (/proc/net/unix). */
static bool socket_bound(const char *path)
{
	FILE *f = fopen("/proc/net/unix", "re");
	if (!f)
		return false;
	char line[PATH_MAX + 128];
	bool bound = false;
	while (!bound && fgets(line, sizeof(line), f)) {
		char *slash = strchr(line, '/');
		if (slash) {
			slash[strcspn(slash, "\n")] = 0;
			bound = strcmp(slash, path) == 0;
		}
	}
	fclose(f);
	return bound;
}

/* Whether a process lives in the network namespace bound at PATH. */
static bool netns_in_use(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return false;
	char want[64];
	snprintf(want, sizeof(want), "net:[%lu]", (unsigned long)st.st_ino);
	DIR *d = opendir("/proc");
	bool used = false;
	struct dirent *e;
	while (d && !used && (e = next_process(d)) != NULL) {
		char p[300];
		snprintf(p, sizeof(p), "/proc/%s/ns/net", e->d_name);
		used = link_names(p, want);
	}
	if (d)
		closedir(d);
	return used;
}

static bool cgroup_in_use(const char *path)
{
	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/cgroup.procs", path);
	FILE *f = fopen(p, "re");
	if (!f)
		return false;
	int c = fgetc(f);
	fclose(f);
	return c != EOF;
}

static void run_quietly(char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			dup2(null, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* Whether there was an object for the removal that returned R to remove:
 * false if it was gone already; true if it is gone now (*ERR 0), or if its
 * removal failed (*ERR its errno). */
static bool removed(int r, int *err)
{
	*err = r < 0 && errno != ENOENT ? errno : 0;
	return r == 0 || *err != 0;
}

/* Removes the object named "KIND NAME" if nothing uses it (for shared
 * memory the caller asked, shm_user()); true if it was left behind, with
 * *ERR the errno of a removal that failed (0: it is gone now). An object
 * gone since it was listed was removed by whoever made it (a named
 * semaphore, for one, is made under a passing name first): not left. */
static bool remove_left(const char *entry, int *err)
{
	char kind[16];
	const char *name = strchr(entry, ' ') + 1;
	snprintf(kind, sizeof(kind), "%.*s", (int)(name - 1 - entry), entry);
	char path[PATH_MAX + 32];
	*err = 0;
	if (strcmp(kind, "shm") == 0) {
		snprintf(path, sizeof(path), "/dev/shm/%s", name);
		return removed(unlink(path), err);
	} else if (strcmp(kind, "socket") == 0) {
		if (socket_bound(name))
			return false;
		return removed(unlink(name), err);
	} else if (strcmp(kind, "netns") == 0) {
		snprintf(path, sizeof(path), "/run/netns/%s", name);
		if (netns_in_use(path))
			return false;
		umount2(path, MNT_DETACH);
		return removed(unlink(path), err);
	} else if (strcmp(kind, "link") == 0) {
		/* one end of a veth pair goes with the other, or with a namespace
		 * removed before it: gone, it was left behind all the same */
		snprintf(path, sizeof(path), "/sys/class/net/%s", name);
		if (access(path, F_OK) == 0) {
			char *argv[] = {"ip", "link", "del", (char *)name, NULL};
			run_quietly(argv);
		}
	} else if (strcmp(kind, "cgroup") == 0) {
		if (access(name, F_OK) < 0)
			return false;
		if (cgroup_in_use(name))
			return false;
		return removed(rmdir(name), err);
	}
	return true;
}

/* ---- who made what ------------------------------------------------------------ */

/* A name says that an object appeared, not who made it: a program outside
 * the tests (any that lttng-ust or Fast DDS is linked into: rclpy is) makes
 * shared memory of its own, and may make it while a test runs. fanotify
 * says which process created each entry of the directories snapshot()
 * lists, and the guard asks, while that process can still be read (a zombie
 * can: the queue is drained before anything is reaped), whether it descends
 * from the root of the tests' tree: the guard, the test's subreaper, or the
 * test runner that is one (--watch). An object whose last creation was made
 * outside the tree is not the tests': it is said and kept. A creator that is
 * gone already (reaped before the guard read its event), or that cannot be
 * read, counts as the tests', as every new object did before: a test's own
 * leftover must never go unnoticed, an outsider's short-lived helper may be
 * blamed. Where fanotify cannot tell (not root, an old kernel, a queue that
 * overflowed) objects are judged by their names alone, and the guard says
 * so once. Network interfaces are made through netlink, not in a
 * directory: they are always judged by name. */

#define WATCH_MAX_DIRS 1024
/* no pidfd record in an event: the kernel reports none (before 5.15) */
#define NO_PIDFD_RECORD (-100)

/* A directory whose new entries are attributed, named as snapshot() lists
 * them. */
struct watched {
	char *path;
	const char *kind;
	int depth;		/* the levels snapshot() lists, as walk()'s DEPTH */
	bool by_path;		/* entries named by their path (walk()), not their name */
	__kernel_fsid_t fsid;	/* with fh, how fanotify names the directory */
	struct file_handle *fh;
};

static struct {
	int fd;			/* the fanotify group; -1: names alone */
	bool pidfds;		/* events carry a pidfd of their creator */
	bool said;		/* that names alone judge, said once */
	pid_t root;
	struct watched dirs[WATCH_MAX_DIRS];
	int ndirs;
	/* entries last made outside the tree, and by whom, index for index */
	struct names outside, creators;
} watch = {.fd = -1};

static void watch_give_up(const char *why)
{
	if (watch.fd >= 0)
		close(watch.fd);
	watch.fd = -1;
	names_free(&watch.outside);
	names_free(&watch.creators);
	if (!watch.said)
		say(false, "%s: who made what cannot be told here (%s): new objects are judged "
			   "by their names alone\n", prog, why);
	watch.said = true;
}

static bool watching(const char *path)
{
	for (int i = 0; i < watch.ndirs; i++)
		if (strcmp(watch.dirs[i].path, path) == 0)
			return true;
	return false;
}

/* Watches the entries made in PATH and, as walk() lists DEPTH levels, in
 * its subdirectories; false if PATH cannot be watched (what is made there is
 * judged by name). */
static bool watch_dir(const char *path, const char *kind, int depth, bool by_path)
{
	if (watch.ndirs == WATCH_MAX_DIRS || watching(path))
		return false;
	struct statfs fs;
	struct file_handle *fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);
	int mount_id;
	if (!fh)
		return false;
	fh->handle_bytes = MAX_HANDLE_SZ;
	/* marked first: a subdirectory made while the others are read is
	 * seen being made */
	if (statfs(path, &fs) < 0 || name_to_handle_at(AT_FDCWD, path, fh, &mount_id, 0) < 0 ||
	    fanotify_mark(watch.fd, FAN_MARK_ADD | FAN_MARK_ONLYDIR | FAN_MARK_DONT_FOLLOW,
			  FAN_CREATE | FAN_MOVED_TO | FAN_ONDIR, AT_FDCWD, path) < 0) {
		free(fh);
		return false;
	}
	struct watched *w = &watch.dirs[watch.ndirs++];
	*w = (struct watched){.path = strdup(path), .kind = kind, .depth = depth, .by_path = by_path,
			      .fh = fh};
	memcpy(&w->fsid, &fs.f_fsid, sizeof(w->fsid));
	DIR *d = depth > 1 ? opendir(path) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		char sub[PATH_MAX];
		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) >= (int)sizeof(sub))
			continue;
		watch_dir(sub, kind, depth - 1, by_path);
	}
	if (d)
		closedir(d);
	return true;
}

/* Starts telling who makes the objects snapshot() lists: creations in the
 * tree of ROOT are the tests'. */
static void watch_start(pid_t root)
{
	const unsigned flags = FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_CLOEXEC | FAN_NONBLOCK;
	watch.root = root;
	watch.pidfds = true;
	watch.fd = fanotify_init(flags | FAN_REPORT_PIDFD, O_RDONLY | O_CLOEXEC);
	if (watch.fd < 0 && errno == EINVAL) {
		/* before 5.15: the pid alone, read at once */
		watch.pidfds = false;
		watch.fd = fanotify_init(flags, O_RDONLY | O_CLOEXEC);
	}
	if (watch.fd < 0) {
		watch_give_up(errno == EPERM ? "fanotify needs root" : strerror(errno));
		return;
	}
	if (!watch_dir("/dev/shm", "shm", 1, false)) {
		char why[128];
		snprintf(why, sizeof(why), "/dev/shm not watched: %s", strerror(errno));
		watch_give_up(why);
		return;
	}
	/* where these cannot be watched (no /run/netns yet, a file system
	 * without file handles) their objects are judged by name */
	watch_dir("/run/netns", "netns", 1, false);
	watch_dir("/tmp", "socket", 3, true);
	FILE *f = fopen("/proc/self/mounts", "re");
	char dev[256], dir[PATH_MAX], type[64], options[512];
	while (f && fscanf(f, "%255s %4095s %63s %511s %*[^\n]", dev, dir, type, options) == 4)
		if (strcmp(type, "cgroup2") == 0 || (strcmp(type, "cgroup") == 0 && rtaccel_mount_has_option(options, "memory")))
			watch_dir(dir, "cgroup", 4, true);
	if (f)
		fclose(f);
}

/* Whether PID descends from the root of the tests' tree, or is it: 1 yes,
 * 0 no, -1 cannot be told (it, or a parent read on the way, is gone). */
static int in_tree(pid_t pid, struct proc *creator)
{
	for (int hops = 0; pid > 0 && hops < 4096; hops++) {
		if (pid == watch.root)
			return 1;
		char name[16];
		struct proc p;
		snprintf(name, sizeof(name), "%d", (int)pid);
		if (read_proc(name, &p) < 0)
			return -1;
		if (hops == 0)
			*creator = p;
		pid = p.ppid;
	}
	return 0;
}

/* Whether the process PID that made an object is outside the tests' tree;
 * WHO names it. PIDFD, the event's, tells that PID was not reused before
 * it was read. */
static bool made_outside(pid_t pid, int pidfd, char *who, size_t n)
{
	if (pid <= 0 || (watch.pidfds && pidfd < 0))
		return false; /* gone before the event was read */
	struct proc creator = {0};
	int mine = -1;
	/* a parent that exits while its children are read moves them to
	 * another: read again */
	for (int tries = 0; mine < 0 && tries < 3; tries++)
		mine = in_tree(pid, &creator);
	if (mine != 0)
		return false;
	if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
		return false; /* reaped while it was read: another may have its pid */
	snprintf(who, n, "process %d (%s)", (int)pid, creator.comm);
	return true;
}

static int names_index(const struct names *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return i;
	return -1;
}

/* ENTRY was made last by WHO outside the tests (WHO NULL: by them). */
static void watch_record(const char *entry, const char *who)
{
	int i = names_index(&watch.outside, entry);
	if (i >= 0) {
		free(watch.outside.v[i]);
		free(watch.creators.v[i]);
		watch.outside.v[i] = watch.outside.v[--watch.outside.n];
		watch.creators.v[i] = watch.creators.v[--watch.creators.n];
	}
	if (who) {
		names_add(&watch.outside, NULL, entry);
		names_add(&watch.creators, NULL, who);
	}
}

static bool same_dir(const struct watched *w, const struct fanotify_event_info_fid *fid)
{
	const struct file_handle *fh = (const struct file_handle *)fid->handle;
	return memcmp(&w->fsid, &fid->fsid, sizeof(w->fsid)) == 0 &&
	       fh->handle_type == w->fh->handle_type && fh->handle_bytes == w->fh->handle_bytes &&
	       memcmp(fh->f_handle, w->fh->f_handle, fh->handle_bytes) == 0;
}

/* NAME was made in the directory FID names by process PID. */
static void watch_event(const struct fanotify_event_info_fid *fid, const char *name, pid_t pid,
			int pidfd)
{
	const struct watched *w = NULL;
	for (int i = 0; i < watch.ndirs && !w; i++)
		if (same_dir(&watch.dirs[i], fid))
			w = &watch.dirs[i];
	char path[PATH_MAX];
	if (!w || snprintf(path, sizeof(path), "%s/%s", w->path, name) >= (int)sizeof(path))
		return;
	if (w->by_path) {
		/* walk() lists directories under cgroups and sockets under
		 * /tmp; a new directory is watched for what is made in it */
		struct stat st;
		if (lstat(path, &st) < 0)
			return;
		if (S_ISDIR(st.st_mode) && w->depth > 1)
			watch_dir(path, w->kind, w->depth - 1, true);
		if (!(strcmp(w->kind, "cgroup") == 0 ? S_ISDIR(st.st_mode) : S_ISSOCK(st.st_mode)))
			return;
	}
	char entry[PATH_MAX + 16], who[64];
	snprintf(entry, sizeof(entry), "%s %s", w->kind, w->by_path ? path : name);
	watch_record(entry, made_outside(pid, pidfd, who, sizeof(who)) ? who : NULL);
}

/* Reads every creation queued, while its creator can still be read: called
 * before anything is reaped. */
static void watch_drain(void)
{
	bool overflowed = false;
	while (watch.fd >= 0) {
		char buf[16384] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
		ssize_t len = read(watch.fd, buf, sizeof(buf));
		if (len <= 0)
			break;
		struct fanotify_event_metadata *e = (struct fanotify_event_metadata *)buf;
		for (; FAN_EVENT_OK(e, len); e = FAN_EVENT_NEXT(e, len)) {
			const struct fanotify_event_info_fid *fid = NULL;
			const char *name = NULL;
			int pidfd = NO_PIDFD_RECORD;
			const char *end = (const char *)e + e->event_len;
			const struct fanotify_event_info_header *h;
			for (const char *p = (const char *)(e + 1); p + sizeof(*h) <= end; p += h->len) {
				h = (const struct fanotify_event_info_header *)p;
				if (h->len == 0)
					break;
				if (h->info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) {
					fid = (const struct fanotify_event_info_fid *)h;
					const struct file_handle *fh = (const struct file_handle *)fid->handle;
					name = (const char *)fh->f_handle + fh->handle_bytes;
				} else if (h->info_type == FAN_EVENT_INFO_TYPE_PIDFD) {
					pidfd = ((const struct fanotify_event_info_pidfd *)h)->pidfd;
				}
			}
			if (e->mask & FAN_Q_OVERFLOW)
				overflowed = true;
			else if (fid && name && !overflowed)
				watch_event(fid, name, e->pid, pidfd == NO_PIDFD_RECORD ? -1 : pidfd);
			if (pidfd >= 0)
				close(pidfd);
		}
	}
	/* a creation lost: an object the tests made may be taken for an
	 * outsider's */
	if (overflowed)
		watch_give_up("fanotify's queue overflowed");
}

/* Whether ENTRY was made last outside the tests; *WHO says by whom. */
static bool watch_outside(const char *entry, const char **who)
{
	int i = watch.fd >= 0 ? names_index(&watch.outside, entry) : -1;
	if (i >= 0)
		*who = watch.creators.v[i];
	return i >= 0;
}

/* ---- who uses what ------------------------------------------------------------ */

/* Who made an object says whose it was; who uses it says whose it is. A
 * new entry of /dev/shm that a live process outside the tests' tree has
 * open or mapped is that process's, whoever made it, and is kept: a ROS 2
 * node beside the suite maps the ports it shares with a test's node, and
 * removes them itself when it closes them last. It is said, as an
 * outsider's object is. One that no live process uses, or that only the
 * tests' own processes use once the test has ended (the test runner of
 * --watch, which is the tree's root, keeps what a test left in it), was
 * left behind, whoever named it. In --check every test has ended: there is
 * no tree, and every process that uses an object is outside the tests.
 * Without root the guard cannot read another user's processes, but nor can
 * the tests, which run as the guard's user, make a file that is another's:
 * a new one of another user's (a ROS 2 node of theirs) is theirs, kept.
 *
 * Fast DDS's shared-memory transport (rclpy's), as its 3.2 was seen to
 * behave and its source says, needs two rules more:
 * - its segments (fastdds_<id>) and ports (fastdds_port<N>) live while
 *   the process that owns one holds a lock file beside it open,
 *   <name>_el (flock, exclusive; <name>_sl, shared, for a port that
 *   several read); a killed owner's lock goes with it, its files stay. A
 *   peer that maps the segment of an owner it was talking to goes on
 *   mapping it until it notices, by that lock, seconds later, and removes
 *   it. So a segment or port one of whose lock files is there and held open
 *   by no process is dead, whoever maps it: how Fast DDS itself tells. (Its
 *   2.x names its files fastrtps_: the rule is the lock files', not the
 *   name's.) A node that starts takes over the first dead port numbered
 *   from 7000, whatever its domain: one may be gone before it is removed.
 * - a port's mutex, sem.<port>_mutex, is a POSIX semaphore that a process
 *   opens only while it opens the port: in use while its port is. */

/* One process's use of an entry of /dev/shm. */
struct use {
	char *name;
	pid_t pid;
};

/* What every process has open or mapped in /dev/shm, read once for each
 * comparison. */
static struct {
	struct use *v;
	int n, cap;
} uses;

static void uses_free(void)
{
	for (int i = 0; i < uses.n; i++)
		free(uses.v[i].name);
	free(uses.v);
	uses.v = NULL;
	uses.n = uses.cap = 0;
}

/* The entry of /dev/shm that PATH names, or NULL: another file, or one
 * removed since it was opened (a name made again is another file). */
static const char *shm_entry(const char *path)
{
	static const char deleted[] = " (deleted)";
	size_t len = strlen(path), dlen = sizeof(deleted) - 1;
	if (strncmp(path, "/dev/shm/", 9) != 0 || strchr(path + 9, '/'))
		return NULL;
	if (len > dlen && strcmp(path + len - dlen, deleted) == 0)
		return NULL;
	return path + 9;
}

static void uses_add(const char *name, pid_t pid)
{
	/* a mapping is listed once per range of it: one use is enough */
	for (int i = uses.n - 1; i >= 0 && uses.v[i].pid == pid; i--)
		if (strcmp(uses.v[i].name, name) == 0)
			return;
	if (uses.n == uses.cap) {
		uses.cap = uses.cap ? 2 * uses.cap : 64;
		uses.v = realloc(uses.v, sizeof(*uses.v) * (size_t)uses.cap);
		if (!uses.v)
			exit(EXIT_USAGE);
	}
	uses.v[uses.n] = (struct use){.name = strdup(name), .pid = pid};
	if (!uses.v[uses.n].name)
		exit(EXIT_USAGE);
	uses.n++;
}

/* Reads which process has what open (/proc/PID/fd) or mapped
 * (/proc/PID/maps) in /dev/shm. A process the guard may not read (another
 * user's, without root) is not seen: an object only it uses is blamed, as
 * by names alone. */
static void uses_read(void)
{
	uses_free();
	DIR *d = open_proc();
	struct dirent *e;
	while ((e = next_process(d)) != NULL) {
		const pid_t pid = (pid_t)atoi(e->d_name);
		char p[300], target[PATH_MAX];
		const char *name;
		snprintf(p, sizeof(p), "/proc/%s/fd", e->d_name);
		DIR *fds = opendir(p);
		struct dirent *f;
		while (fds && (f = readdir(fds)) != NULL) {
			char link[600];
			snprintf(link, sizeof(link), "%s/%s", p, f->d_name);
			ssize_t len = readlink(link, target, sizeof(target) - 1);
			if (len <= 0)
				continue;
			target[len] = 0;
			if ((name = shm_entry(target)) != NULL)
				uses_add(name, pid);
		}
		if (fds)
			closedir(fds);
		snprintf(p, sizeof(p), "/proc/%s/maps", e->d_name);
		FILE *maps = fopen(p, "re");
		char line[PATH_MAX + 128];
		while (maps && fgets(line, sizeof(line), maps)) {
			char *slash = strchr(line, '/');
			if (!slash)
				continue;
			slash[strcspn(slash, "\n")] = 0;
			if ((name = shm_entry(slash)) != NULL)
				uses_add(name, pid);
		}
		if (maps)
			fclose(maps);
	}
	closedir(d);
}

/* A live process that uses the entry NAME of /dev/shm, outside the tests'
 * tree if OUTSIDE; 0 if none does. */
static pid_t user_of(const char *name, bool outside)
{
	for (int i = 0; i < uses.n; i++) {
		struct proc p;
		if (strcmp(uses.v[i].name, name) != 0 || uses.v[i].pid == getpid())
			continue;
		/* -1: it ended while it was read, and uses nothing now */
		if (!outside || in_tree(uses.v[i].pid, &p) == 0)
			return uses.v[i].pid;
	}
	return 0;
}

static bool shm_exists(const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	return snprintf(path, sizeof(path), "/dev/shm/%s", name) < (int)sizeof(path) &&
	       lstat(path, &st) == 0;
}

/* Whether NAME is a Fast DDS segment or port whose owner is gone: a lock
 * file of it is there, and no process holds one open. */
static bool fastdds_dead(const char *name)
{
	static const char *const suffixes[] = {"_el", "_sl"};
	bool has_lock = false;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		char lock[PATH_MAX];
		if (snprintf(lock, sizeof(lock), "%s%s", name, suffixes[i]) >= (int)sizeof(lock) ||
		    !shm_exists(lock))
			continue;
		if (user_of(lock, false))
			return false;
		has_lock = true;
	}
	return has_lock;
}

/* The object that NAME is the mutex of, in Fast DDS's naming
 * (sem.<port>_mutex), into GUARDED; false if NAME is none, or its port is
 * gone. */
static bool mutex_of(const char *name, char *guarded, size_t n)
{
	static const char prefix[] = "sem.", suffix[] = "_mutex";
	const size_t len = strlen(name), plen = sizeof(prefix) - 1, slen = sizeof(suffix) - 1;
	if (len <= plen + slen || strncmp(name, prefix, plen) != 0 ||
	    strcmp(name + len - slen, suffix) != 0)
		return false;
	snprintf(guarded, n, "%.*s", (int)(len - plen - slen), name + plen);
	return shm_exists(guarded);
}

/* The live process outside the tests that uses the entry NAME of /dev/shm,
 * or 0: it was left behind. THROUGH (N bytes) names what the process uses
 * when that is not NAME itself but what NAME is the mutex of; "" if NAME. */
static pid_t shm_user(const char *name, char *through, size_t n)
{
	through[0] = 0;
	if (fastdds_dead(name))
		return 0;
	pid_t pid = user_of(name, true);
	char guarded[PATH_MAX];
	if (!pid && mutex_of(name, guarded, sizeof(guarded)) &&
	    (pid = shm_user(guarded, through, n)) != 0 && !through[0])
		snprintf(through, n, "%s", guarded);
	return pid;
}

/* Whether ENTRY, a file, belongs to another user than the one the guard
 * runs as (*OWNER): an unprivileged test, which runs as the guard's user,
 * cannot make a file that is another's. (Root's tests may.) */
static bool others_file(const char *entry, uid_t *owner)
{
	char path[PATH_MAX + 32];
	struct stat st;
	const char *name = strchr(entry, ' ') + 1;
	if (geteuid() == 0)
		return false;
	if (strncmp(entry, "shm ", 4) == 0)
		snprintf(path, sizeof(path), "/dev/shm/%s", name);
	else if (strncmp(entry, "socket ", 7) == 0)
		snprintf(path, sizeof(path), "%s", name);
	else
		return false;
	if (lstat(path, &st) < 0 || st.st_uid == geteuid())
		return false;
	*owner = st.st_uid;
	return true;
}

/* PID's name, for a message. */
static const char *comm_of(pid_t pid, struct proc *p)
{
	char name[16];
	snprintf(name, sizeof(name), "%d", (int)pid);
	return read_proc(name, p) == 0 ? p->comm : "?";
}

static bool names_has(const struct names *s, char *const *name)
{
	return s->n > 0 && bsearch(name, s->v, (size_t)s->n, sizeof(char *), cmp_str) != NULL;
}

static int longer_first(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? 1 : la > lb ? -1 : 0;
}

/* Whether the new object ENTRY is someone else's than TEST's, saying whose
 * if so: made last by a process outside the tests (watch_outside()), a
 * file of another user's where the tests cannot make one (others_file()),
 * or shared memory in use by a process outside them (shm_user()). */
static bool kept(const char *entry, const char *test)
{
	const char *who;
	char through[PATH_MAX];
	pid_t user;
	uid_t owner;
	struct proc p;
	if (watch_outside(entry, &who)) {
		say(false, "%s: %s was made by %s, not by %s: kept\n", prog, entry, who, test);
		return true;
	}
	if (others_file(entry, &owner)) {
		say(false, "%s: %s belongs to uid %u, not to uid %u of %s: kept\n", prog, entry,
		    (unsigned)owner, (unsigned)geteuid(), test);
		return true;
	}
	if (strncmp(entry, "shm ", 4) == 0 && (user = shm_user(entry + 4, through, sizeof(through)))) {
		say(false, "%s: %s is in use by process %d (%s)%s%s, outside %s: kept\n", prog, entry,
		    (int)user, comm_of(user, &p), through[0] ? " through " : "", through, test);
		return true;
	}
	return false;
}

/* Names and removes what is in AFTER but not in BEFORE and is not
 * someone else's (kept()); returns how many. */
static int left_behind(const struct names *before, const struct names *after, const char *test)
{
	struct names fresh = {0}, left = {0};
	for (int i = 0; i < after->n; i++)
		if (!names_has(before, &after->v[i]))
			names_add(&fresh, NULL, after->v[i]);
	/* every object judged before any is removed: a Fast DDS segment is
	 * told by its lock file, a mutex by its port */
	uses_read();
	for (int i = 0; i < fresh.n; i++)
		if (!kept(fresh.v[i], test))
			names_add(&left, NULL, fresh.v[i]);
	uses_free();
	/* the deepest cgroup first: a parent goes only once its children have */
	names_sort(&left, longer_first);
	int n = 0;
	for (int i = 0; i < left.n; i++) {
		int err;
		if (!remove_left(left.v[i], &err))
			continue;
		if (err)
			say(true, "%s: %s left %s behind, which could not be removed: %s\n", prog, test,
			    left.v[i], strerror(err));
		else
			say(true, "%s: %s left %s behind: removed\n", prog, test, left.v[i]);
		n++;
	}
	names_free(&fresh);
	names_free(&left);
	return n;
}

static int write_snapshot(const char *file)
{
	FILE *f = fopen(file, "we");
	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", prog, file, strerror(errno));
		return EXIT_USAGE;
	}
	struct names s = snapshot();
	for (int i = 0; i < s.n; i++)
		fprintf(f, "%s\n", s.v[i]);
	names_free(&s);
	return fclose(f) == 0 ? 0 : EXIT_USAGE;
}

static int check_snapshot(const char *file)
{
	FILE *f = fopen(file, "re");
	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", prog, file, strerror(errno));
		return EXIT_USAGE;
	}
	struct names before = {0};
	char line[PATH_MAX + 32];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		char *space = strchr(line, ' ');
		if (!space)
			continue;
		*space = 0;
		names_add(&before, line, space + 1);
	}
	fclose(f);
	names_sort(&before, cmp_str);
	struct names after = snapshot();
	int left = left_behind(&before, &after, "the tests");
	names_free(&before);
	names_free(&after);
	return left ? EXIT_LEFT_BEHIND : 0;
}

/* ---- a test runner's session ------------------------------------------------- */

/* --watch PID: the comparison of one test's named objects, for a test
 * runner that runs its tests in its own process (tests/python/harness.py),
 * told by who made what for its whole session: what the tree of PID makes
 * is its tests'. It asks on stdin, a line each, and every answer ends with
 * a line ".":
 *   mark          the machine's named objects now, before a test
 *   check TEST    those new since: the test's are named and removed, an
 *                 outsider's kept
 * The lines of an answer before its "." are said as "left MESSAGE" (the
 * test left it behind: it fails) or "note MESSAGE"; the first answer comes
 * unasked, once it watches. Its session ends with stdin. */
static void answer(const char *line, struct names *before)
{
	watch_drain();
	if (strcmp(line, "mark") == 0) {
		names_free(before);
		*before = snapshot();
		/* what was made until now is in BEFORE, whoever made it */
		names_free(&watch.outside);
		names_free(&watch.creators);
	} else if (strncmp(line, "check ", 6) == 0) {
		struct names after = snapshot();
		left_behind(before, &after, line + 6);
		names_free(&after);
	} else {
		say(false, "%s: --watch: unknown request \"%s\"\n", prog, line);
	}
	fputs(".\n", stdout);
	fflush(stdout);
}

static int watch_session(pid_t root)
{
	tagged = true;
	watch_start(root);
	struct names before = snapshot();
	fputs(".\n", stdout);
	fflush(stdout);
	char buf[4096];
	size_t have = 0;
	for (;;) {
		struct pollfd ready[2] = {{.fd = 0, .events = POLLIN}, {.fd = watch.fd, .events = POLLIN}};
		if (poll(ready, watch.fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		/* creations read as they come, while their makers live */
		watch_drain();
		if (!ready[0].revents)
			continue;
		ssize_t len = read(0, buf + have, sizeof(buf) - 1 - have);
		if (len <= 0)
			break;
		have += (size_t)len;
		char *nl;
		while ((nl = memchr(buf, '\n', have)) != NULL) {
			*nl = 0;
			answer(buf, &before);
			have -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, have);
		}
		if (have == sizeof(buf) - 1)
			have = 0; /* no request is that long */
	}
	names_free(&before);
	return 0;
}

/* ---- one test ----------------------------------------------------------------- */

/* The test as messages name it: the program's name and its arguments. */
static void test_name(char **argv, char *out, size_t n)
{
	const char *base = strrchr(argv[0], '/');
	int len = snprintf(out, n, "%s", base ? base + 1 : argv[0]);
	for (int i = 1; argv[i] && len > 0 && (size_t)len < n; i++)
		len += snprintf(out + len, n - (size_t)len, " %s", argv[i]);
}

static int run_test(char **argv, unsigned timeout_s, unsigned grace_ms, bool resources)
{
	char test[160];
	test_name(argv, test, sizeof(test));
	struct names before = {0};
	if (resources) {
		before = snapshot();
		watch_start(getpid());
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		perror("rtaccel-test-guard: PR_SET_CHILD_SUBREAPER");
		return EXIT_USAGE;
	}
	sigset_t wanted, old;
	sigemptyset(&wanted);
	sigaddset(&wanted, SIGCHLD);
	sigaddset(&wanted, SIGTERM);
	sigaddset(&wanted, SIGINT);
	sigaddset(&wanted, SIGHUP);
	sigprocmask(SIG_BLOCK, &wanted, &old);
	/* polled beside the creations watched, so that those are read while
	 * the test runs, their creators alive */
	int signals = signalfd(-1, &wanted, SFD_CLOEXEC | SFD_NONBLOCK);
	if (signals < 0) {
		perror("rtaccel-test-guard: signalfd");
		return EXIT_USAGE;
	}
	const pid_t guard = getpid();
	pid_t child = fork();
	if (child < 0) {
		perror("rtaccel-test-guard: fork");
		return EXIT_USAGE;
	}
	if (child == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		setpgid(0, 0);
		/* the guard killed (ctest's own timeout): the test goes with it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != guard)
			_exit(EXIT_USAGE);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: %s: %s\n", prog, argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(child, child);

	int status = 0, result = -1;
	const uint64_t deadline = monotonic_ms() + (uint64_t)timeout_s * 1000;
	/* RTACCEL_TEST_FAIL_AFTER_MS=N kills the test's own process N ms in, as
	 * a crash would, leaving its children and objects for the sweep: how
	 * the clean-up of any kind of test is checked on purpose
	 * (tools/repeat.sh --fail-after). */
	const char *fail_env = getenv("RTACCEL_TEST_FAIL_AFTER_MS");
	uint64_t fail_at = fail_env && atoi(fail_env) > 0 ? monotonic_ms() + (uint64_t)atoi(fail_env)
							   : UINT64_MAX;
	while (result < 0) {
		uint64_t now = monotonic_ms();
		if (now >= fail_at) {
			fprintf(stderr, "%s: %s: failing it on purpose after %s ms "
				"(RTACCEL_TEST_FAIL_AFTER_MS)\n", prog, test, fail_env);
			kill(child, SIGKILL);
			watch_drain();
			waitpid(child, NULL, 0);
			result = 1;
			break;
		}
		if (now >= deadline) {
			fprintf(stderr, "%s: %s timed out after %u s: killing it and its children\n",
				prog, test, timeout_s);
			kill(-child, SIGKILL);
			kill(child, SIGKILL);
			watch_drain();
			waitpid(child, NULL, 0);
			result = EXIT_TIMED_OUT;
			break;
		}
		uint64_t left = (fail_at < deadline ? fail_at : deadline) - now;
		struct pollfd ready[2] = {{.fd = signals, .events = POLLIN},
					  {.fd = watch.fd, .events = POLLIN}};
		poll(ready, watch.fd >= 0 ? 2 : 1, (int)left);
		watch_drain();
		const struct timespec none = {0, 0};
		int sig = sigtimedwait(&wanted, NULL, &none);
		if (sig == SIGCHLD || sig < 0) {
			/* the test, or orphans of it that ended */
			pid_t r;
			while ((r = waitpid(-1, &status, WNOHANG)) > 0)
				if (r == child)
					result = WIFEXITED(status) ? WEXITSTATUS(status)
								   : 128 + WTERMSIG(status);
		} else {
			/* ctest or a user stopping us: the test and its children go too */
			fprintf(stderr, "%s: %s: %s, ending the test\n", prog, test, strsignal(sig));
			kill(-child, SIGKILL);
			kill(child, SIGKILL);
			watch_drain();
			waitpid(child, NULL, 0);
			result = 128 + sig;
		}
	}
	int left = sweep(guard, grace_ms, test);
	close(signals);
	if (resources) {
		watch_drain();
		struct names after = snapshot();
		left += left_behind(&before, &after, test);
		names_free(&after);
	}
	names_free(&before);
	if (result == 0 && left)
		return EXIT_LEFT_BEHIND;
	return result;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: %s [--timeout S] [--grace MS] [--resources] COMMAND [ARG...]\n"
		"       %s --snapshot FILE | --check FILE | --watch PID\n"
		"       %s --sweep PID [--grace MS] [--spare PID]...\n",
		prog, prog, prog);
	exit(EXIT_USAGE);
}

static unsigned number(const char *s)
{
	char *end;
	unsigned long v = s ? strtoul(s, &end, 10) : 0;
	if (!s || !*s || *end || v > 86400000)
		usage();
	return (unsigned)v;
}

int main(int argc, char **argv)
{
	unsigned timeout_s = 280, grace_ms = 500;
	bool resources = false;
	int i = 1;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if (strcmp(argv[i], "--timeout") == 0) {
			timeout_s = number(argv[++i]);
		} else if (strcmp(argv[i], "--grace") == 0) {
			grace_ms = number(argv[++i]);
		} else if (strcmp(argv[i], "--resources") == 0) {
			resources = true;
		} else if (strcmp(argv[i], "--snapshot") == 0 && i + 1 < argc) {
			return write_snapshot(argv[i + 1]);
		} else if (strcmp(argv[i], "--check") == 0 && i + 1 < argc) {
			return check_snapshot(argv[i + 1]);
		} else if (strcmp(argv[i], "--watch") == 0 && i + 2 == argc) {
			return watch_session((pid_t)number(argv[i + 1]));
		} else if (strcmp(argv[i], "--sweep") == 0 && i + 1 < argc) {
			pid_t root = (pid_t)number(argv[++i]);
			for (; i + 2 < argc; i += 2) {
				if (strcmp(argv[i + 1], "--grace") == 0)
					grace_ms = number(argv[i + 2]);
				else if (strcmp(argv[i + 1], "--spare") == 0 && nspared < MAX_SPARED)
					spared[nspared++] = (pid_t)number(argv[i + 2]);
				else
					usage();
			}
			char what[32];
			snprintf(what, sizeof(what), "process %d", (int)root);
			return sweep(root, grace_ms, what) ? EXIT_LEFT_BEHIND : 0;
		} else {
			usage();
		}
	}
	if (i >= argc)
		usage();
	return run_test(argv + i, timeout_s, grace_ms, resources);
}
