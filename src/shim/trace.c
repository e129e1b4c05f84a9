/* The shim's tracer (--trace).
 *
 * Per lock (keyed by address): kind, where it was created (the call site of
 * pthread_*_init, or of the first use for statically initialised locks),
 * acquisitions, contended acquisitions, and wait- and hold-time totals, maxima
 * and log2 histograms. Per thread, an "episode" runs from taking a first lock
 * to holding none again; its sequence of operations, keyed by where it began,
 * is the lock pattern of the function that ran it (the view of Fig. 10 in the
 * ECRTS'24 paper). Every contended wait also goes to a Chrome/Perfetto
 * trace-event timeline, and so do CUDA calls (cuda.c), every lock taken
 * inside one, and the process's GPU segments: the timeline shows which
 * pthread locks each CUDA call takes (the paper's Fig. 10). Per CUDA API the
 * report counts calls, their time and the lock operations inside them.
 *
 * Everything lives in fixed mmap'd tables updated with atomics; nothing here
 * allocates or locks on the lock paths. At exit the report is written as
 * OUT/rtaccel-shim.PID.json and OUT/rtaccel-shim.PID.trace.json. */
#include "shim_internal.h"

#include "core/thread.h"
#include "core/utf8.h"
#include "rtaccel/shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LOCKS 16384
#define HIST_BUCKETS 40 /* log2 of nanoseconds: up to ~18 minutes */
#define MAX_EVENTS (1 << 17)
/* Once the timeline is full, events this long still go in, to a reserve of
 * their own: in a long run the waits and calls worth looking at come late. */
#define LONG_EVENT_NS 1000000
#define MAX_LONG_EVENTS 4096
#define MAX_PATTERNS 2048
#define PATTERN_OPS 16
#define PATTERN_FRAMES 24
#define HELD_DEPTH 32

struct lock_stat {
	uintptr_t key; /* lock address; DEAD bit set once destroyed */
	uint32_t id;
	uint8_t kind;
	uint8_t from_init;
	uint8_t destroyed_held; /* destroyed while held or waited for */
	const void *created_pc;
	uint64_t acquisitions, contended, wait_total, wait_max, hold_total, hold_max;
	uint32_t wait_hist[HIST_BUCKETS], hold_hist[HIST_BUCKETS];
};
#define DEAD ((uintptr_t)1)

enum event_type { EV_WAIT, EV_HOLD, EV_CUDA, EV_SEGMENT };

struct trace_event {
	uint64_t start_ns, dur_ns;
	uint64_t arg; /* EV_CUDA: the stream */
	uint32_t tid, id; /* id: lock (EV_WAIT, EV_HOLD), API (EV_CUDA), segment number */
	int32_t error;    /* EV_CUDA: the cudaError_t returned */
	uint8_t type, op;
};

#define API_LOCKS 8
struct api_stat {
	uint64_t calls, errors, total_ns, max_ns, lock_ops;
	uint32_t locks[API_LOCKS]; /* 1 + lock id, 0: free */
};

struct pattern_op {
	uint32_t lock_id;
	uint8_t op;
};

struct pattern {
	uint64_t hash; /* 0: free */
	uint64_t count;
	uint32_t nops;
	int nframes;
	int ready;
	struct pattern_op ops[PATTERN_OPS];
	void *frames[PATTERN_FRAMES];
};

struct trace_tables {
	struct lock_stat locks[MAX_LOCKS];
	struct trace_event events[MAX_EVENTS];
	struct trace_event long_events[MAX_LONG_EVENTS];
	struct pattern patterns[MAX_PATTERNS];
	struct api_stat apis[SHIM_CUDA_API_MAX];
	uint32_t next_id;
	uint64_t event_count;
	uint64_t long_event_count; /* taken from long_events */
	uint64_t wait_count;
	uint64_t untracked_ops;
	uint64_t start_ns;
};
static struct trace_tables *T;

struct held {
	const void *lock;
	struct lock_stat *stat;
	uint64_t since_ns;
	uint8_t op;
	bool in_cuda;
};

struct thread_trace {
	int depth;
	struct held held[HELD_DEPTH];
	uint32_t nops;
	bool truncated;
	const void *episode_pc;
	struct pattern_op ops[PATTERN_OPS];
};
static __thread SHIM_TLS struct thread_trace tt;

static const char *const op_names[OP_COUNT] = {
	"mutex_lock", "mutex_trylock", "mutex_timedlock", "mutex_unlock",
	"rwlock_rdlock", "rwlock_tryrdlock", "rwlock_timedrdlock", "rwlock_wrlock",
	"rwlock_trywrlock", "rwlock_timedwrlock", "rwlock_unlock", "cond_wait",
};

void trace_init(void)
{
	void *p = mmap(NULL, sizeof(*T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	T = p;
	T->start_ns = rtaccel_monotonic_ns();
	/* backtrace() loads the unwinder on first use; do that now, not inside a
	 * lock operation. */
	void *frames[4];
	shim_busy++;
	backtrace(frames, 4);
	shim_busy--;
}

void trace_after_fork_child(void)
{
	if (!T)
		return;
	memset(T, 0, sizeof(*T));
	T->start_ns = rtaccel_monotonic_ns();
	memset(&tt, 0, sizeof(tt));
}

static inline uint32_t hash_ptr(uintptr_t p)
{
	uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ull;
	return (uint32_t)(h >> 40);
}

static struct lock_stat *lookup(const void *lock, enum trace_kind kind, const void *pc, bool init)
{
	uintptr_t key = (uintptr_t)lock;
	uint32_t i = hash_ptr(key) % MAX_LOCKS;
	for (int probes = 0; probes < MAX_LOCKS; probes++, i = (i + 1) % MAX_LOCKS) {
		struct lock_stat *s = &T->locks[i];
		uintptr_t k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		if (k == key) {
			if (init) {
				s->created_pc = pc;
				s->from_init = 1;
			}
			return s;
		}
		if (k != 0)
			continue;
		uintptr_t expected = 0;
		if (!__atomic_compare_exchange_n(&s->key, &expected, key, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			if (expected == key)
				return s;
			continue;
		}
		s->id = __atomic_fetch_add(&T->next_id, 1, __ATOMIC_RELAXED);
		s->kind = (uint8_t)kind;
		s->created_pc = pc;
		s->from_init = init;
		return s;
	}
	__atomic_fetch_add(&T->untracked_ops, 1, __ATOMIC_RELAXED);
	return NULL;
}

static inline int bucket(uint64_t ns)
{
	int b = ns ? 63 - __builtin_clzll(ns) : 0;
	return b < HIST_BUCKETS ? b : HIST_BUCKETS - 1;
}

static inline void atomic_max(uint64_t *p, uint64_t v)
{
	uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
	while (v > cur && !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

void trace_created(const void *lock, enum trace_kind kind, const void *pc)
{
	if (T)
		lookup(lock, kind, pc, true);
}

void trace_destroyed(const void *lock)
{
	if (!T)
		return;
	uintptr_t key = (uintptr_t)lock;
	uint32_t i = hash_ptr(key) % MAX_LOCKS;
	for (int probes = 0; probes < MAX_LOCKS; probes++, i = (i + 1) % MAX_LOCKS) {
		uintptr_t k = __atomic_load_n(&T->locks[i].key, __ATOMIC_ACQUIRE);
		if (k == 0)
			return;
		if (k == key) {
			/* Keep the statistics; a new lock at this address gets a new entry. */
			__atomic_store_n(&T->locks[i].key, key | DEAD, __ATOMIC_RELEASE);
			return;
		}
	}
}

void trace_destroyed_held(const void *lock)
{
	if (!T)
		return;
	struct lock_stat *s = lookup(lock, KIND_RWLOCK, NULL, false);
	if (s)
		__atomic_store_n(&s->destroyed_held, 1, __ATOMIC_RELAXED);
}

/* A slot of the timeline for an event of DUR_NS, or NULL when it is full
 * and the event is short. */
static struct trace_event *new_event(enum event_type type, uint64_t dur_ns)
{
	uint64_t e = __atomic_fetch_add(&T->event_count, 1, __ATOMIC_RELAXED);
	struct trace_event *ev = NULL;
	if (e < MAX_EVENTS) {
		ev = &T->events[e];
	} else if (dur_ns >= LONG_EVENT_NS) {
		uint64_t l = __atomic_fetch_add(&T->long_event_count, 1, __ATOMIC_RELAXED);
		if (l < MAX_LONG_EVENTS)
			ev = &T->long_events[l];
	}
	if (ev) {
		ev->type = (uint8_t)type;
		ev->tid = rtaccel_self_tid();
	}
	return ev;
}

static uint64_t long_events_kept(void)
{
	return T->long_event_count < MAX_LONG_EVENTS ? T->long_event_count : MAX_LONG_EVENTS;
}

/* The lock ids a CUDA API was seen taking (the first API_LOCKS). */
static void note_api_lock(struct api_stat *a, uint32_t lock_id)
{
	for (int k = 0; k < API_LOCKS; k++) {
		uint32_t v = __atomic_load_n(&a->locks[k], __ATOMIC_RELAXED);
		if (v == lock_id + 1)
			return;
		if (v == 0 && (__atomic_compare_exchange_n(&a->locks[k], &v, lock_id + 1, false,
							    __ATOMIC_RELAXED, __ATOMIC_RELAXED) ||
			       v == lock_id + 1))
			return;
	}
}

static void record_op(uint32_t lock_id, enum trace_op op, const void *pc)
{
	if (tt.nops == 0)
		tt.episode_pc = pc;
	if (tt.nops < PATTERN_OPS) {
		tt.ops[tt.nops].lock_id = lock_id;
		tt.ops[tt.nops].op = (uint8_t)op;
		tt.nops++;
	} else {
		tt.truncated = true;
	}
}

static void end_episode(void)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)tt.episode_pc;
	for (uint32_t i = 0; i < tt.nops; i++) {
		h = (h ^ tt.ops[i].lock_id) * 1099511628211ull;
		h = (h ^ tt.ops[i].op) * 1099511628211ull;
	}
	h |= 1;
	uint32_t i = (uint32_t)(h % MAX_PATTERNS);
	for (int probes = 0; probes < 64; probes++, i = (i + 1) % MAX_PATTERNS) {
		struct pattern *p = &T->patterns[i];
		uint64_t k = __atomic_load_n(&p->hash, __ATOMIC_ACQUIRE);
		if (k == h) {
			__atomic_fetch_add(&p->count, 1, __ATOMIC_RELAXED);
			break;
		}
		if (k != 0)
			continue;
		uint64_t expected = 0;
		if (!__atomic_compare_exchange_n(&p->hash, &expected, h, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			if (expected == h) {
				__atomic_fetch_add(&p->count, 1, __ATOMIC_RELAXED);
				break;
			}
			continue;
		}
		p->nops = tt.nops;
		memcpy(p->ops, tt.ops, sizeof(tt.ops[0]) * tt.nops);
		shim_busy++;
		p->nframes = backtrace(p->frames, PATTERN_FRAMES);
		shim_busy--;
		__atomic_fetch_add(&p->count, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
		break;
	}
	tt.nops = 0;
	tt.truncated = false;
}

void trace_acquired(const void *lock, enum trace_kind kind, enum trace_op op, const void *pc,
		    uint64_t t0, uint64_t wait_ns)
{
	if (!T)
		return;
	struct lock_stat *s = lookup(lock, kind, pc, false);
	uint64_t now = rtaccel_monotonic_ns();
	if (s) {
		__atomic_fetch_add(&s->acquisitions, 1, __ATOMIC_RELAXED);
		if (wait_ns) {
			__atomic_fetch_add(&s->contended, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&s->wait_total, wait_ns, __ATOMIC_RELAXED);
			__atomic_fetch_add(&s->wait_hist[bucket(wait_ns)], 1, __ATOMIC_RELAXED);
			atomic_max(&s->wait_max, wait_ns);
			__atomic_fetch_add(&T->wait_count, 1, __ATOMIC_RELAXED);
			struct trace_event *ev = new_event(EV_WAIT, wait_ns);
			if (ev) {
				ev->start_ns = t0;
				ev->dur_ns = wait_ns;
				ev->id = s->id;
				ev->op = (uint8_t)op;
			}
		}
		record_op(s->id, op, pc);
		if (shim_in_cuda) {
			shim_cuda_lock_ops++;
			note_api_lock(&T->apis[shim_in_cuda - 1], s->id);
		}
	}
	if (tt.depth < HELD_DEPTH) {
		tt.held[tt.depth].lock = lock;
		tt.held[tt.depth].stat = s;
		tt.held[tt.depth].since_ns = now;
		tt.held[tt.depth].op = (uint8_t)op;
		tt.held[tt.depth].in_cuda = shim_in_cuda != 0;
	}
	tt.depth++;
}

void trace_released(const void *lock, enum trace_kind kind, enum trace_op op, const void *pc)
{
	if (!T)
		return;
	int top = tt.depth < HELD_DEPTH ? tt.depth : HELD_DEPTH;
	for (int i = top - 1; i >= 0; i--) {
		if (tt.held[i].lock != lock)
			continue;
		struct lock_stat *s = tt.held[i].stat;
		if (s) {
			uint64_t hold = rtaccel_monotonic_ns() - tt.held[i].since_ns;
			__atomic_fetch_add(&s->hold_total, hold, __ATOMIC_RELAXED);
			__atomic_fetch_add(&s->hold_hist[bucket(hold)], 1, __ATOMIC_RELAXED);
			atomic_max(&s->hold_max, hold);
			record_op(s->id, op, pc);
			struct trace_event *ev = tt.held[i].in_cuda ? new_event(EV_HOLD, hold) : NULL;
			if (ev) {
				ev->start_ns = tt.held[i].since_ns;
				ev->dur_ns = hold;
				ev->id = s->id;
				ev->op = tt.held[i].op;
			}
		}
		memmove(&tt.held[i], &tt.held[i + 1], sizeof(tt.held[0]) * (size_t)(top - 1 - i));
		tt.depth--;
		if (tt.depth == 0 && tt.nops)
			end_episode();
		return;
	}
	/* Released a lock taken before tracing began, or by another thread
	 * (allowed for rwlocks held for reading in some programs). */
	(void)kind;
	if (tt.depth > HELD_DEPTH)
		tt.depth--;
}

void trace_cuda_call(int api, uint64_t t0, uint64_t dur_ns, uint32_t lock_ops, uintptr_t stream,
		     int error)
{
	if (!T || api < 0 || api >= SHIM_CUDA_API_MAX)
		return;
	struct api_stat *a = &T->apis[api];
	__atomic_fetch_add(&a->calls, 1, __ATOMIC_RELAXED);
	if (error)
		__atomic_fetch_add(&a->errors, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&a->total_ns, dur_ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&a->lock_ops, lock_ops, __ATOMIC_RELAXED);
	atomic_max(&a->max_ns, dur_ns);
	struct trace_event *ev = new_event(EV_CUDA, dur_ns);
	if (ev) {
		ev->start_ns = t0;
		ev->dur_ns = dur_ns;
		ev->id = (uint32_t)api;
		ev->arg = stream;
		ev->error = error;
	}
}

void trace_gpu_segment(uint64_t number, uint64_t start_ns, uint64_t dur_ns)
{
	struct trace_event *ev = T ? new_event(EV_SEGMENT, dur_ns) : NULL;
	if (ev) {
		ev->start_ns = start_ns;
		ev->dur_ns = dur_ns;
		ev->id = (uint32_t)number;
	}
}

/* --- report ------------------------------------------------------------------- */

struct writer {
	int fd;
	size_t n;
	char buf[1 << 16];
};
static struct writer W;

static void w_flush(void)
{
	size_t off = 0;
	while (off < W.n) {
		ssize_t r = write(W.fd, W.buf + off, W.n - off);
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	W.n = 0;
}

__attribute__((format(printf, 1, 2))) static void w_printf(const char *fmt, ...)
{
	if (sizeof(W.buf) - W.n < 4096)
		w_flush();
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(W.buf + W.n, sizeof(W.buf) - W.n, fmt, ap);
	va_end(ap);
	if (r > 0)
		W.n += (size_t)r < sizeof(W.buf) - W.n ? (size_t)r : sizeof(W.buf) - W.n - 1;
}

/* JSON string of text, escaped. A byte that is not part of well-formed
 * UTF-8 (a command line's Latin-1) becomes U+FFFD: JSON readers refuse
 * the whole report for one. */
static void w_string(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t left = strlen(s);
	w_printf("\"");
	while (left) {
		const unsigned char c = *p;
		const size_t n = rtaccel_utf8_sequence(p, left);
		if (c == '"' || c == '\\')
			w_printf("\\%c", c);
		else if (c < 0x20)
			w_printf("\\u%04x", c);
		else if (n == 0)
			w_printf("\\ufffd");
		else
			w_printf("%.*s", (int)n, (const char *)p);
		p += n ? n : 1;
		left -= n ? n : 1;
	}
	w_printf("\"");
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* "libfoo.so.1!symbol+0x12" or "libfoo.so.1+0x3456". */
static void describe_pc(const void *pc, char *out, size_t size)
{
	Dl_info info;
	if (!pc || !dladdr(pc, &info) || !info.dli_fname) {
		snprintf(out, size, "%p", pc);
		return;
	}
	if (info.dli_sname && info.dli_saddr)
		snprintf(out, size, "%s!%s+0x%lx", base_name(info.dli_fname), info.dli_sname,
			 (unsigned long)((const char *)pc - (const char *)info.dli_saddr));
	else
		snprintf(out, size, "%s+0x%lx", base_name(info.dli_fname),
			 (unsigned long)((const char *)pc - (const char *)info.dli_fbase));
}

static void describe_function(const void *pc, char *out, size_t size)
{
	Dl_info info;
	if (pc && dladdr(pc, &info) && info.dli_fname && info.dli_sname)
		snprintf(out, size, "%s!%s", base_name(info.dli_fname), info.dli_sname);
	else
		describe_pc(pc, out, size);
}

static const void *object_of(const void *pc)
{
	Dl_info info;
	return pc && dladdr(pc, &info) ? info.dli_fbase : NULL;
}

static void write_histogram(const uint32_t *h)
{
	int last = HIST_BUCKETS - 1;
	while (last > 0 && h[last] == 0)
		last--;
	w_printf("[");
	for (int i = 0; i <= last; i++)
		w_printf("%s%u", i ? "," : "", h[i]);
	w_printf("]");
}

static void write_command(void)
{
	char cmd[2048];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	cmd[n] = '\0';
	w_printf("\"command\": [");
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(cmd + i) + 1) {
		w_printf("%s", i ? ", " : "");
		w_string(cmd + i);
	}
	w_printf("],\n");
}

/* OUT/rtaccel-shim.PID.SUFFIX, OUT made if it is missing (its parent must
 * exist); a report that cannot be written is said on stderr, not lost
 * silently. */
static bool open_output(const char *suffix)
{
	char path[768];
	snprintf(path, sizeof(path), "%s/" RTACCEL_SHIM_REPORT_PREFIX ".%d%s", shim_cfg.out_dir, (int)getpid(),
		 suffix);
	mkdir(shim_cfg.out_dir, 0755);
	W.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	W.n = 0;
	if (W.fd < 0)
		fprintf(stderr, "rtaccel shim: cannot write %s: %s\n", path, strerror(errno));
	return W.fd >= 0;
}

static void write_pattern(const struct pattern *p, const void *shim_base)
{
	/* Skip the shim's own frames; the first frame left is the call site in
	 * the library that locks; its outermost consecutive frame is the entry
	 * into that library, and the frame beyond is its caller. */
	int i = 0;
	while (i < p->nframes && object_of(p->frames[i]) == shim_base)
		i++;
	const void *lib = i < p->nframes ? object_of(p->frames[i]) : NULL;
	int entry = i;
	while (entry + 1 < p->nframes && object_of(p->frames[entry + 1]) == lib)
		entry++;
	/* The shim's CUDA wrappers sit between a program and libcudart: the
	 * caller is the first frame beyond them. */
	int caller = entry + 1;
	while (caller < p->nframes && object_of(p->frames[caller]) == shim_base)
		caller++;
	char entry_name[512] = "?", caller_name[512] = "?";
	if (entry < p->nframes)
		describe_function(p->frames[entry], entry_name, sizeof(entry_name));
	if (caller < p->nframes)
		describe_function(p->frames[caller], caller_name, sizeof(caller_name));
	w_printf("    {\"function\": ");
	w_string(entry_name);
	w_printf(", \"caller\": ");
	w_string(caller_name);
	w_printf(", \"count\": %llu, \"ops\": [", (unsigned long long)p->count);
	for (uint32_t k = 0; k < p->nops; k++)
		w_printf("%s{\"op\": \"%s\", \"lock\": %u}", k ? ", " : "", op_names[p->ops[k].op],
			 p->ops[k].lock_id);
	w_printf("]}");
}

static void write_event(const struct trace_event *e)
{
	const int pid = (int)getpid();
	const double ts = (double)e->start_ns / 1000.0, dur = (double)e->dur_ns / 1000.0;
	switch (e->type) {
	case EV_WAIT:
		w_printf(",\n{\"name\": \"wait lock %u\", \"cat\": \"%s\", \"ph\": \"X\", "
			 "\"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %u, "
			 "\"args\": {\"lock\": %u}}",
			 e->id, op_names[e->op], ts, dur, pid, e->tid, e->id);
		break;
	case EV_HOLD:
		w_printf(",\n{\"name\": \"%s %u\", \"cat\": \"lock\", \"ph\": \"X\", "
			 "\"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %u, "
			 "\"args\": {\"lock\": %u}}",
			 op_names[e->op], e->id, ts, dur, pid, e->tid, e->id);
		break;
	case EV_CUDA:
		w_printf(",\n{\"name\": \"%s\", \"cat\": \"cuda\", \"ph\": \"X\", "
			 "\"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %u, "
			 "\"args\": {\"stream\": \"0x%llx\", \"error\": %d}}",
			 shim_cuda_api_names[e->id], ts, dur, pid, e->tid, (unsigned long long)e->arg,
			 (int)e->error);
		break;
	case EV_SEGMENT:
		/* An async track of its own: segments span threads. */
		w_printf(",\n{\"name\": \"GPU segment\", \"cat\": \"gpu\", \"ph\": \"b\", "
			 "\"id\": %u, \"ts\": %.3f, \"pid\": %d, \"tid\": %u}"
			 ",\n{\"name\": \"GPU segment\", \"cat\": \"gpu\", \"ph\": \"e\", "
			 "\"id\": %u, \"ts\": %.3f, \"pid\": %d, \"tid\": %u}",
			 e->id, ts, pid, e->tid, e->id, ts + dur, pid, e->tid);
		break;
	}
}

static void write_static_runtime(const char *path, void *arg)
{
	bool *first = arg;
	w_printf("%s", *first ? "" : ", ");
	w_string(path);
	*first = false;
}

/* Per CUDA API: calls, time in them, lock operations inside them and which
 * locks; the process's GPU segments; objects with a runtime of their own. */
static void write_cuda(void)
{
	w_printf("\"cuda\": {\"calls\": [");
	bool first = true;
	for (int api = 0; api < SHIM_CUDA_API_MAX; api++) {
		const struct api_stat *a = &T->apis[api];
		if (!a->calls)
			continue;
		w_printf("%s\n  {\"api\": \"%s\", \"calls\": %llu, \"errors\": %llu, "
			 "\"total_ns\": %llu, \"max_ns\": %llu, \"lock_ops\": %llu, \"locks\": [",
			 first ? "" : ",", shim_cuda_api_names[api], (unsigned long long)a->calls,
			 (unsigned long long)a->errors, (unsigned long long)a->total_ns,
			 (unsigned long long)a->max_ns, (unsigned long long)a->lock_ops);
		for (int k = 0, n = 0; k < API_LOCKS; k++)
			if (a->locks[k])
				w_printf("%s%u", n++ ? ", " : "", a->locks[k] - 1);
		w_printf("]}");
		first = false;
	}
	uint64_t count, total, max;
	bool open;
	shim_cuda_segments(&count, &total, &max, &open);
	w_printf("],\n  \"segments\": {\"count\": %llu, \"total_ns\": %llu, \"max_ns\": %llu, "
		 "\"open_at_exit\": %s},\n  \"static_runtime\": [",
		 (unsigned long long)count, (unsigned long long)total, (unsigned long long)max,
		 open ? "true" : "false");
	first = true;
	shim_cuda_scan_static(write_static_runtime, &first);
	w_printf("]},\n");
}

void trace_write_report(void)
{
	if (!T)
		return;
	shim_busy++;
	uint64_t end_ns = rtaccel_monotonic_ns();
	Dl_info self_info;
	const void *shim_base = dladdr((void *)trace_write_report, &self_info) ? self_info.dli_fbase
									       : NULL;
	if (open_output(".json")) {
		w_printf("{\n\"format\": \"rtaccel-lockstat\",\n\"version\": 1,\n\"pid\": %d,\n",
			 (int)getpid());
		write_command();
		w_printf("\"modes\": {\"pi\": %s, \"phase_fair\": %s, \"boost\": %s},\n",
			 shim_cfg.pi ? "true" : "false", shim_cfg.phase_fair ? "true" : "false",
			 shim_cfg.boost ? "true" : "false");
		w_printf("\"start_ns\": %llu,\n\"end_ns\": %llu,\n",
			 (unsigned long long)T->start_ns, (unsigned long long)end_ns);
		uint64_t events = T->event_count;
		uint64_t in_timeline = (events < MAX_EVENTS ? events : MAX_EVENTS) + long_events_kept();
		w_printf("\"wait_events\": %llu,\n\"timeline_events\": %llu,\n"
			 "\"dropped_timeline_events\": %llu,\n\"late_long_events\": %llu,\n",
			 (unsigned long long)T->wait_count, (unsigned long long)events,
			 (unsigned long long)(events - in_timeline),
			 (unsigned long long)long_events_kept());
		write_cuda();
		w_printf("\"untracked_ops\": %llu,\n\"locks\": [\n",
			 (unsigned long long)T->untracked_ops);
		bool first = true;
		for (int i = 0; i < MAX_LOCKS; i++) {
			struct lock_stat *s = &T->locks[i];
			if (!s->key || !s->acquisitions)
				continue;
			char where[512];
			describe_pc(s->created_pc, where, sizeof(where));
			w_printf("%s  {\"id\": %u, \"address\": \"0x%lx\", \"kind\": \"%s\", "
				 "\"created_by\": \"%s\", \"created_at\": ",
				 first ? "" : ",\n", s->id, (unsigned long)(s->key & ~DEAD),
				 s->kind == KIND_MUTEX ? "mutex" : "rwlock",
				 s->from_init ? "init" : "first_use");
			w_string(where);
			w_printf(", \"destroyed\": %s, \"destroyed_while_held\": %s, "
				 "\"acquisitions\": %llu, \"contended\": %llu, "
				 "\"wait_ns_total\": %llu, \"wait_ns_max\": %llu, "
				 "\"hold_ns_total\": %llu, \"hold_ns_max\": %llu, "
				 "\"wait_hist_log2_ns\": ",
				 (s->key & DEAD) ? "true" : "false", s->destroyed_held ? "true" : "false",
				 (unsigned long long)s->acquisitions, (unsigned long long)s->contended,
				 (unsigned long long)s->wait_total, (unsigned long long)s->wait_max,
				 (unsigned long long)s->hold_total, (unsigned long long)s->hold_max);
			write_histogram(s->wait_hist);
			w_printf(", \"hold_hist_log2_ns\": ");
			write_histogram(s->hold_hist);
			w_printf("}");
			first = false;
		}
		w_printf("\n],\n\"patterns\": [\n");
		first = true;
		for (int i = 0; i < MAX_PATTERNS; i++) {
			struct pattern *p = &T->patterns[i];
			if (!p->hash || !__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE))
				continue;
			w_printf("%s", first ? "" : ",\n");
			write_pattern(p, shim_base);
			first = false;
		}
		w_printf("\n]\n}\n");
		w_flush();
		close(W.fd);
	}
	if (open_output(".trace.json")) {
		/* ts are CLOCK_MONOTONIC microseconds: a tool that merges this
		 * timeline with others (rtaccel run) puts them on its clock. */
		w_printf("{\"displayTimeUnit\": \"ns\", \"otherData\": {\"origin_us\": 0}, "
			 "\"traceEvents\": [\n");
		uint64_t n = T->event_count < MAX_EVENTS ? T->event_count : MAX_EVENTS;
		w_printf("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": {\"name\": "
			 "\"rtaccel shim\"}}", (int)getpid());
		for (uint64_t i = 0; i < n; i++)
			write_event(&T->events[i]);
		for (uint64_t i = 0; i < long_events_kept(); i++)
			write_event(&T->long_events[i]);
		w_printf("\n]}\n");
		w_flush();
		close(W.fd);
	}
	shim_busy--;
}
