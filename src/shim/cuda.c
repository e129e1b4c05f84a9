/* CUDA runtime interposition: the calls that start and finish GPU work.
 *
 * Every interposed call is forwarded to the real libcudart. Around it the
 * shim keeps, per stream, how much work was submitted and how much is known
 * to be complete (BWLOCK++'s per-stream rule, ECRTS'18 Sec. 5, made safe for
 * many threads), and from that whether the process has any outstanding GPU
 * work. The transitions none -> some and some -> none are the process's GPU
 * segments: the hooks rtaccel_shim_set_gpu_hooks() installs run there, which
 * is where a memory-bandwidth lock is taken and released. Under --trace each
 * call, each lock it takes and each segment go to the Perfetto timeline.
 *
 * Work is submitted by launches, asynchronous copies and memsets and graph
 * launches; it is known complete when cudaStreamSynchronize, cudaStreamQuery,
 * cudaEventSynchronize or cudaEventQuery (for the event's stream, up to its
 * record), cudaDeviceSynchronize (everything) or a synchronous device-to-host
 * cudaMemcpy (the stream it ran on) say so. A stream destroyed with work
 * outstanding gets a private event recorded on it, polled until it fires.
 * Launches into a stream that is being captured into a graph are not GPU work.
 *
 * The runtime's C ABI is declared here rather than taken from cuda_runtime.h:
 * the shim builds and preloads without the CUDA toolkit, and these signatures
 * have been stable across CUDA releases. A process whose CUDA runtime is
 * linked statically never calls these functions; the shim says so instead. */
#include "shim_internal.h"

#include "rtaccel/isolate.h"
#include "rtaccel/lock.h"
#include "rtaccel/shim.h"
#include "core/thread.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct {
	unsigned int x, y, z;
} dim3;
struct launch_config { /* cudaLaunchConfig_t */
	dim3 grid, block;
	size_t dynamic_smem;
	cudaStream_t stream;
	void *attrs;
	unsigned int nattrs;
};
enum { cudaSuccess = 0, cudaErrorNotReady = 600 };
enum { kHostToHost = 0, kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3, kDefault = 4 };
enum { kEventDisableTiming = 2 };

/* The per-thread default stream's handle, and the legacy one's. */
#define STREAM_LEGACY ((uintptr_t)1)
#define STREAM_PER_THREAD ((uintptr_t)2)

/* --- the real functions ------------------------------------------------------ */

#define CUDA_APIS(X)                                                                       \
	X(cudaLaunchKernel) X(cudaLaunchKernel_ptsz) X(__cudaLaunchKernel)                  \
	X(__cudaLaunchKernel_ptsz) X(cudaLaunchKernelExC) X(cudaLaunchKernelExC_ptsz)       \
	X(cudaMemcpy) X(cudaMemcpy_ptds) X(cudaMemcpyAsync) X(cudaMemcpyAsync_ptsz)          \
	X(cudaMemcpy2D) X(cudaMemcpy2D_ptds) X(cudaMemcpy2DAsync) X(cudaMemcpy2DAsync_ptsz)  \
	X(cudaMemcpyPeer) X(cudaMemcpyPeerAsync) X(cudaMemset) X(cudaMemset_ptds)            \
	X(cudaMemsetAsync) X(cudaMemsetAsync_ptsz) X(cudaMemset2D) X(cudaMemset2DAsync)      \
	X(cudaGraphLaunch) X(cudaGraphLaunch_ptsz) X(cudaStreamSynchronize)                  \
	X(cudaStreamSynchronize_ptsz) X(cudaStreamQuery) X(cudaStreamQuery_ptsz)             \
	X(cudaDeviceSynchronize) X(cudaThreadSynchronize) X(cudaEventSynchronize)            \
	X(cudaEventQuery) X(cudaEventRecord) X(cudaEventRecord_ptsz) X(cudaStreamWaitEvent)  \
	X(cudaStreamWaitEvent_ptsz) X(cudaStreamCreate) X(cudaStreamCreateWithFlags)         \
	X(cudaStreamCreateWithPriority) X(cudaStreamDestroy) X(cudaStreamBeginCapture)       \
	X(cudaStreamBeginCapture_ptsz) X(cudaStreamEndCapture) X(cudaStreamEndCapture_ptsz)  \
	X(cudaEventCreateWithFlags) X(cudaEventDestroy)

#define API_ENUM(name) API_##name,
enum cuda_api { CUDA_APIS(API_ENUM) API_COUNT };
#define API_NAME(name) #name,
const char *const shim_cuda_api_names[API_COUNT] = {CUDA_APIS(API_NAME)};

_Static_assert(API_COUNT <= SHIM_CUDA_API_MAX, "SHIM_CUDA_API_MAX");
static void *real_fns[API_COUNT];

struct find_runtime {
	char path[512];
};

static int find_runtime_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct find_runtime *f = data;
	const char *slash = strrchr(info->dlpi_name, '/');
	const char *base = slash ? slash + 1 : info->dlpi_name;
	if (strncmp(base, "libcudart.so", 12) != 0)
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", info->dlpi_name);
	return 1;
}

/* RTLD_NEXT finds the runtime when it is in the global scope; a runtime that
 * came in with an RTLD_LOCAL dlopen (Python extension modules) is found by
 * name among the loaded objects. */
static void *resolve(enum cuda_api api)
{
	void *fn = __atomic_load_n(&real_fns[api], __ATOMIC_ACQUIRE);
	if (fn)
		return fn;
	shim_busy++;
	fn = dlsym(RTLD_NEXT, shim_cuda_api_names[api]);
	if (!fn) {
		struct find_runtime f = {{0}};
		if (dl_iterate_phdr(find_runtime_cb, &f)) {
			void *h = dlopen(f.path, RTLD_LAZY | RTLD_NOLOAD);
			if (h)
				fn = dlsym(h, shim_cuda_api_names[api]);
		}
	}
	shim_busy--;
	if (!fn) {
		fprintf(stderr, "rtaccel shim: %s called, but no CUDA runtime defines it\n",
			shim_cuda_api_names[api]);
		abort();
	}
	__atomic_store_n(&real_fns[api], fn, __ATOMIC_RELEASE);
	return fn;
}

#define REAL_CUDA(name, type) ((type)resolve(API_##name))

/* --- streams and their outstanding work -------------------------------------- */

#define MAX_STREAMS 4096
#define MAX_EVENTS 4096
#define MAX_RETIRING 256
#define NO_ENTRY UINT32_MAX

/* state: submitted (high 32 bits) and completed (low 32 bits) sequence
 * numbers; the stream has outstanding work while they differ. One CAS moves
 * both, so each idle <-> active transition is seen by exactly one thread. */
struct stream_entry {
	uintptr_t key;
	uint64_t state;
	uint32_t capture_origin; /* NO_ENTRY unless captured into a graph */
};

struct event_entry {
	uintptr_t key;
	uint64_t mark; /* entry index (high 32) and the sequence it recorded (low 32) */
};

struct retiring {
	cudaEvent_t event; /* 0: free slot */
	uint32_t entry, seq;
};

static struct stream_entry streams[MAX_STREAMS];
static struct event_entry events[MAX_EVENTS];
static struct retiring retiring[MAX_RETIRING];
static uint32_t retiring_count;
static int retiring_spin;

static rtaccel_mutex_t segment_lock = RTACCEL_MUTEX_INITIALIZER;
static uint32_t active_streams;
static uint64_t segment_count, segment_start_ns, segment_ns_total, segment_ns_max;
static struct rtaccel_gpu_hooks hooks;

static __thread SHIM_TLS int cuda_depth;
__thread SHIM_TLS int shim_in_cuda;
__thread SHIM_TLS uint32_t shim_cuda_lock_ops;

static inline uint32_t hash_key(uintptr_t k)
{
	return (uint32_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 40);
}

/* The handle's key: the per-thread default stream is one per thread, and
 * both spellings of the legacy default stream are one stream. Real handles
 * are aligned pointers, so keys with low bits 10 cannot collide with them. */
static uintptr_t stream_key(cudaStream_t s, bool per_thread_default)
{
	uintptr_t k = (uintptr_t)s;
	if (k == 0)
		k = per_thread_default ? STREAM_PER_THREAD : STREAM_LEGACY;
	if (k == STREAM_PER_THREAD)
		return ((uintptr_t)rtaccel_self_tid() << 2) | 2;
	return k;
}

static uint32_t stream_entry(uintptr_t key)
{
	uint32_t i = hash_key(key) % MAX_STREAMS;
	for (int probes = 0; probes < MAX_STREAMS; probes++, i = (i + 1) % MAX_STREAMS) {
		uintptr_t k = __atomic_load_n(&streams[i].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return i;
		if (k != 0)
			continue;
		uintptr_t expected = 0;
		if (__atomic_compare_exchange_n(&streams[i].key, &expected, key, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			streams[i].capture_origin = NO_ENTRY;
			return i;
		}
		if (expected == key)
			return i;
	}
	/* Table full: every further stream shares the last slot, which only
	 * makes segments longer, never shorter. */
	return MAX_STREAMS - 1;
}

static void segment_begin(void)
{
	segment_start_ns = rtaccel_monotonic_ns();
	if (hooks.segment_begin)
		hooks.segment_begin(hooks.arg);
}

static void segment_end(void)
{
	uint64_t end = rtaccel_monotonic_ns(), dur = end - segment_start_ns;
	segment_count++;
	segment_ns_total += dur;
	if (dur > segment_ns_max)
		segment_ns_max = dur;
	if (hooks.segment_end)
		hooks.segment_end(hooks.arg);
	if (shim_cfg.trace)
		trace_gpu_segment(segment_count, segment_start_ns, dur);
}

/* Counted under a lock so that the hooks strictly alternate, begin first,
 * whichever threads make the transitions. Taken twice per segment only. */
static void became_active(void)
{
	rtaccel_mutex_lock(&segment_lock);
	if (active_streams++ == 0)
		segment_begin();
	rtaccel_mutex_unlock(&segment_lock);
}

static void became_idle(void)
{
	rtaccel_mutex_lock(&segment_lock);
	if (active_streams > 0 && --active_streams == 0)
		segment_end();
	rtaccel_mutex_unlock(&segment_lock);
}

static inline uint32_t submitted_of(uint64_t state) { return (uint32_t)(state >> 32); }
static inline uint32_t completed_of(uint64_t state) { return (uint32_t)state; }
static inline uint64_t make_state(uint32_t sub, uint32_t comp)
{
	return ((uint64_t)sub << 32) | comp;
}

/* Work was queued on stream entry i; returns its sequence number. */
static uint32_t submit(uint32_t i)
{
	if (__atomic_load_n(&streams[i].capture_origin, __ATOMIC_RELAXED) != NO_ENTRY)
		return 0; /* recorded into a graph, not run */
	uint64_t old = __atomic_load_n(&streams[i].state, __ATOMIC_RELAXED), next;
	do
		next = make_state(submitted_of(old) + 1, completed_of(old));
	while (!__atomic_compare_exchange_n(&streams[i].state, &old, next, true, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED));
	if (submitted_of(old) == completed_of(old))
		became_active();
	return submitted_of(next);
}

/* Everything queued on entry i up to sequence `seq` has finished. */
static void complete(uint32_t i, uint32_t seq)
{
	uint64_t old = __atomic_load_n(&streams[i].state, __ATOMIC_RELAXED), next;
	do {
		uint32_t sub = submitted_of(old), comp = completed_of(old);
		/* Already known, or a sequence from before a newer completion. */
		if (sub == comp || (uint32_t)(seq - comp) > (uint32_t)(sub - comp) || seq == comp)
			return;
		next = make_state(sub, seq);
	} while (!__atomic_compare_exchange_n(&streams[i].state, &old, next, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	if (submitted_of(next) == completed_of(next))
		became_idle();
}

static uint32_t submitted_now(uint32_t i)
{
	return submitted_of(__atomic_load_n(&streams[i].state, __ATOMIC_ACQUIRE));
}

/* A failed call queued nothing: take its submission back if no other came
 * after it (otherwise the next synchronisation settles it). */
static void unsubmit(uint32_t i, uint32_t seq)
{
	uint64_t old = __atomic_load_n(&streams[i].state, __ATOMIC_RELAXED), next;
	do {
		if (submitted_of(old) != seq || submitted_of(old) == completed_of(old))
			return;
		next = make_state(seq - 1, completed_of(old));
	} while (!__atomic_compare_exchange_n(&streams[i].state, &old, next, true, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	if (submitted_of(next) == completed_of(next))
		became_idle();
}

static void device_synchronized(const uint32_t *snapshot)
{
	for (uint32_t i = 0; i < MAX_STREAMS; i++)
		if (__atomic_load_n(&streams[i].key, __ATOMIC_RELAXED))
			complete(i, snapshot[i]);
}

/* --- events -------------------------------------------------------------------- */

static struct event_entry *event_slot(uintptr_t key, bool create)
{
	uint32_t i = hash_key(key) % MAX_EVENTS;
	for (int probes = 0; probes < MAX_EVENTS; probes++, i = (i + 1) % MAX_EVENTS) {
		uintptr_t k = __atomic_load_n(&events[i].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return &events[i];
		if (k != 0)
			continue;
		if (!create)
			return NULL;
		uintptr_t expected = 0;
		if (__atomic_compare_exchange_n(&events[i].key, &expected, key, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
		    expected == key)
			return &events[i];
	}
	return NULL;
}

static void event_recorded(cudaEvent_t e, uint32_t entry)
{
	struct event_entry *slot = event_slot((uintptr_t)e, true);
	if (slot)
		__atomic_store_n(&slot->mark, ((uint64_t)entry << 32) | submitted_now(entry),
				 __ATOMIC_RELEASE);
}

static void event_completed(cudaEvent_t e)
{
	struct event_entry *slot = event_slot((uintptr_t)e, false);
	if (!slot)
		return;
	uint64_t mark = __atomic_load_n(&slot->mark, __ATOMIC_ACQUIRE);
	if (mark)
		complete((uint32_t)(mark >> 32), (uint32_t)mark);
}

/* --- destroyed streams with work still queued ------------------------------ */

static void retiring_lock(void)
{
	while (__atomic_exchange_n(&retiring_spin, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}
static void retiring_unlock(void) { __atomic_store_n(&retiring_spin, 0, __ATOMIC_RELEASE); }

static void poll_retiring(void)
{
	if (!__atomic_load_n(&retiring_count, __ATOMIC_RELAXED))
		return;
	cudaError_t (*query)(cudaEvent_t) = REAL_CUDA(cudaEventQuery, cudaError_t(*)(cudaEvent_t));
	cudaError_t (*destroy)(cudaEvent_t) =
		REAL_CUDA(cudaEventDestroy, cudaError_t(*)(cudaEvent_t));
	retiring_lock();
	for (int k = 0; k < MAX_RETIRING; k++) {
		struct retiring *r = &retiring[k];
		if (!r->event || query(r->event) == cudaErrorNotReady)
			continue;
		complete(r->entry, r->seq);
		destroy(r->event);
		r->event = NULL;
		__atomic_fetch_sub(&retiring_count, 1, __ATOMIC_RELAXED);
	}
	retiring_unlock();
}

/* Before cudaStreamDestroy: work still queued finishes after the handle is
 * gone, so mark its end with an event of our own. */
static void retire_stream(cudaStream_t s, uint32_t entry)
{
	uint64_t state = __atomic_load_n(&streams[entry].state, __ATOMIC_ACQUIRE);
	if (submitted_of(state) == completed_of(state))
		return;
	cudaEvent_t e = NULL;
	if (REAL_CUDA(cudaEventCreateWithFlags, cudaError_t(*)(cudaEvent_t *, unsigned))(
		    &e, kEventDisableTiming) != cudaSuccess)
		return;
	if (REAL_CUDA(cudaEventRecord, cudaError_t(*)(cudaEvent_t, cudaStream_t))(e, s) !=
	    cudaSuccess) {
		REAL_CUDA(cudaEventDestroy, cudaError_t(*)(cudaEvent_t))(e);
		return;
	}
	retiring_lock();
	for (int k = 0; k < MAX_RETIRING; k++)
		if (!retiring[k].event) {
			retiring[k] = (struct retiring){e, entry, submitted_of(state)};
			__atomic_fetch_add(&retiring_count, 1, __ATOMIC_RELAXED);
			e = NULL;
			break;
		}
	retiring_unlock();
	if (e) /* no room: the next cudaDeviceSynchronize settles it */
		REAL_CUDA(cudaEventDestroy, cudaError_t(*)(cudaEvent_t))(e);
}

/* --- per-call bookkeeping ---------------------------------------------------- */

struct call {
	enum cuda_api api;
	uint64_t t0;
	uint32_t lock_ops;
	bool outer;
};

static inline void call_enter(struct call *c, enum cuda_api api)
{
	c->api = api;
	c->outer = cuda_depth++ == 0 && !shim_busy;
	if (c->outer) {
		shim_in_cuda = (int)api + 1;
		c->lock_ops = shim_cuda_lock_ops;
		c->t0 = shim_cfg.trace ? rtaccel_monotonic_ns() : 0;
	}
	poll_retiring();
}

static inline cudaError_t call_leave(struct call *c, uintptr_t stream, cudaError_t err)
{
	cuda_depth--;
	if (c->outer) {
		shim_in_cuda = 0;
		if (shim_cfg.trace)
			trace_cuda_call((int)c->api, c->t0, rtaccel_monotonic_ns() - c->t0,
					shim_cuda_lock_ops - c->lock_ops, stream, err);
	}
	return err;
}

/* An asynchronous submission on stream s (key k). */
#define SUBMIT(api_name, s, per_thread, signature, ...)                                   \
	do {                                                                               \
		struct call c;                                                             \
		call_enter(&c, API_##api_name);                                            \
		uint32_t entry = stream_entry(stream_key((s), (per_thread)));              \
		uint32_t seq = submit(entry);                                              \
		cudaError_t err = REAL_CUDA(api_name, signature)(__VA_ARGS__);             \
		if (err != cudaSuccess && seq)                                             \
			unsubmit(entry, seq);                                              \
		return call_leave(&c, (uintptr_t)(s), err);                                \
	} while (0)

typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
typedef cudaError_t (*launch_ex_fn)(const struct launch_config *, const void *, void **);
typedef cudaError_t (*memcpy_fn)(void *, const void *, size_t, int);
typedef cudaError_t (*memcpy_async_fn)(void *, const void *, size_t, int, cudaStream_t);
typedef cudaError_t (*memcpy2d_fn)(void *, size_t, const void *, size_t, size_t, size_t, int);
typedef cudaError_t (*memcpy2d_async_fn)(void *, size_t, const void *, size_t, size_t, size_t,
					 int, cudaStream_t);
typedef cudaError_t (*memcpy_peer_fn)(void *, int, const void *, int, size_t);
typedef cudaError_t (*memcpy_peer_async_fn)(void *, int, const void *, int, size_t, cudaStream_t);
typedef cudaError_t (*memset_fn)(void *, int, size_t);
typedef cudaError_t (*memset_async_fn)(void *, int, size_t, cudaStream_t);
typedef cudaError_t (*memset2d_fn)(void *, size_t, int, size_t, size_t);
typedef cudaError_t (*memset2d_async_fn)(void *, size_t, int, size_t, size_t, cudaStream_t);
typedef cudaError_t (*graph_launch_fn)(cudaGraphExec_t, cudaStream_t);
typedef cudaError_t (*stream_fn)(cudaStream_t);
typedef cudaError_t (*void_fn)(void);
typedef cudaError_t (*event_fn)(cudaEvent_t);
typedef cudaError_t (*record_fn)(cudaEvent_t, cudaStream_t);
typedef cudaError_t (*wait_event_fn)(cudaStream_t, cudaEvent_t, unsigned);
typedef cudaError_t (*create_fn)(cudaStream_t *);
typedef cudaError_t (*create_flags_fn)(cudaStream_t *, unsigned);
typedef cudaError_t (*create_priority_fn)(cudaStream_t *, unsigned, int);
typedef cudaError_t (*begin_capture_fn)(cudaStream_t, int);
typedef cudaError_t (*end_capture_fn)(cudaStream_t, cudaGraph_t *);

/* --- launches ------------------------------------------------------------------ */

SHIM_EXPORT cudaError_t cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t smem,
					 cudaStream_t s)
{
	SUBMIT(cudaLaunchKernel, s, false, launch_fn, f, g, b, args, smem, s);
}
SHIM_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **args,
					      size_t smem, cudaStream_t s)
{
	SUBMIT(cudaLaunchKernel_ptsz, s, true, launch_fn, f, g, b, args, smem, s);
}
/* What nvcc's <<<...>>> calls since CUDA 13. */
SHIM_EXPORT cudaError_t __cudaLaunchKernel(const void *k, dim3 g, dim3 b, void **args,
					   size_t smem, cudaStream_t s)
{
	SUBMIT(__cudaLaunchKernel, s, false, launch_fn, k, g, b, args, smem, s);
}
SHIM_EXPORT cudaError_t __cudaLaunchKernel_ptsz(const void *k, dim3 g, dim3 b, void **args,
						size_t smem, cudaStream_t s)
{
	SUBMIT(__cudaLaunchKernel_ptsz, s, true, launch_fn, k, g, b, args, smem, s);
}
SHIM_EXPORT cudaError_t cudaLaunchKernelExC(const struct launch_config *config, const void *f,
					    void **args)
{
	SUBMIT(cudaLaunchKernelExC, config ? config->stream : NULL, false, launch_ex_fn, config, f,
	       args);
}
SHIM_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const struct launch_config *config,
						 const void *f, void **args)
{
	SUBMIT(cudaLaunchKernelExC_ptsz, config ? config->stream : NULL, true, launch_ex_fn, config,
	       f, args);
}
SHIM_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s)
{
	SUBMIT(cudaGraphLaunch, s, false, graph_launch_fn, g, s);
}
SHIM_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t g, cudaStream_t s)
{
	SUBMIT(cudaGraphLaunch_ptsz, s, true, graph_launch_fn, g, s);
}

/* --- copies and memsets -------------------------------------------------------- */

SHIM_EXPORT cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, int kind, cudaStream_t s)
{
	SUBMIT(cudaMemcpyAsync, s, false, memcpy_async_fn, d, src, n, kind, s);
}
SHIM_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *d, const void *src, size_t n, int kind,
					     cudaStream_t s)
{
	SUBMIT(cudaMemcpyAsync_ptsz, s, true, memcpy_async_fn, d, src, n, kind, s);
}
SHIM_EXPORT cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *src, size_t sp, size_t w,
					  size_t h, int kind, cudaStream_t s)
{
	SUBMIT(cudaMemcpy2DAsync, s, false, memcpy2d_async_fn, d, dp, src, sp, w, h, kind, s);
}
SHIM_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void *d, size_t dp, const void *src, size_t sp,
					       size_t w, size_t h, int kind, cudaStream_t s)
{
	SUBMIT(cudaMemcpy2DAsync_ptsz, s, true, memcpy2d_async_fn, d, dp, src, sp, w, h, kind, s);
}
SHIM_EXPORT cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *src, int sd, size_t n,
					    cudaStream_t s)
{
	SUBMIT(cudaMemcpyPeerAsync, s, false, memcpy_peer_async_fn, d, dd, src, sd, n, s);
}
SHIM_EXPORT cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t s)
{
	SUBMIT(cudaMemsetAsync, s, false, memset_async_fn, d, v, n, s);
}
SHIM_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *d, int v, size_t n, cudaStream_t s)
{
	SUBMIT(cudaMemsetAsync_ptsz, s, true, memset_async_fn, d, v, n, s);
}
SHIM_EXPORT cudaError_t cudaMemset2DAsync(void *d, size_t p, int v, size_t w, size_t h,
					  cudaStream_t s)
{
	SUBMIT(cudaMemset2DAsync, s, false, memset2d_async_fn, d, p, v, w, h, s);
}
/* The "synchronous" memsets return before a device-memory memset is done. */
SHIM_EXPORT cudaError_t cudaMemset(void *d, int v, size_t n)
{
	SUBMIT(cudaMemset, NULL, false, memset_fn, d, v, n);
}
SHIM_EXPORT cudaError_t cudaMemset_ptds(void *d, int v, size_t n)
{
	SUBMIT(cudaMemset_ptds, NULL, true, memset_fn, d, v, n);
}
SHIM_EXPORT cudaError_t cudaMemset2D(void *d, size_t p, int v, size_t w, size_t h)
{
	SUBMIT(cudaMemset2D, NULL, false, memset2d_fn, d, p, v, w, h);
}

/* A synchronous copy runs on the default stream. It returns once done only
 * when it copies to the host; otherwise it is outstanding like any other. */
#define SYNC_COPY(api_name, per_thread, kind, signature, ...)                              \
	do {                                                                               \
		struct call c;                                                             \
		call_enter(&c, API_##api_name);                                            \
		uint32_t entry = stream_entry(stream_key(NULL, (per_thread)));             \
		uint32_t seq = submit(entry);                                              \
		cudaError_t err = REAL_CUDA(api_name, signature)(__VA_ARGS__);             \
		if (err != cudaSuccess && seq)                                             \
			unsubmit(entry, seq);                                              \
		else if (seq && ((kind) == kDeviceToHost || (kind) == kHostToHost))        \
			complete(entry, seq);                                              \
		return call_leave(&c, 0, err);                                             \
	} while (0)

SHIM_EXPORT cudaError_t cudaMemcpy(void *d, const void *s, size_t n, int kind)
{
	SYNC_COPY(cudaMemcpy, false, kind, memcpy_fn, d, s, n, kind);
}
SHIM_EXPORT cudaError_t cudaMemcpy_ptds(void *d, const void *s, size_t n, int kind)
{
	SYNC_COPY(cudaMemcpy_ptds, true, kind, memcpy_fn, d, s, n, kind);
}
SHIM_EXPORT cudaError_t cudaMemcpy2D(void *d, size_t dp, const void *s, size_t sp, size_t w,
				     size_t h, int kind)
{
	SYNC_COPY(cudaMemcpy2D, false, kind, memcpy2d_fn, d, dp, s, sp, w, h, kind);
}
SHIM_EXPORT cudaError_t cudaMemcpy2D_ptds(void *d, size_t dp, const void *s, size_t sp, size_t w,
					  size_t h, int kind)
{
	SYNC_COPY(cudaMemcpy2D_ptds, true, kind, memcpy2d_fn, d, dp, s, sp, w, h, kind);
}
/* Peer copies are synchronous with respect to the host only for pageable
 * memory, which peer copies never involve: outstanding until synchronised. */
SHIM_EXPORT cudaError_t cudaMemcpyPeer(void *d, int dd, const void *s, int sd, size_t n)
{
	SUBMIT(cudaMemcpyPeer, NULL, false, memcpy_peer_fn, d, dd, s, sd, n);
}

/* --- synchronisation ------------------------------------------------------------ */

/* Each family of CUDA entry points has one helper that does the bookkeeping
 * around the real call (event_sync, event_record, begin_capture, ...);
 * the helpers are alike in shape because every call is bracketed the same
 * way (call_enter, the stream's entry, the real function, call_leave), but
 * each calls a function of its own signature, so they stay apart. */

static cudaError_t stream_sync(enum cuda_api api, cudaStream_t s, bool per_thread)
{
	struct call c;
	call_enter(&c, api);
	uint32_t entry = stream_entry(stream_key(s, per_thread));
	uint32_t snapshot = submitted_now(entry);
	cudaError_t err = ((stream_fn)resolve(api))(s);
	if (err == cudaSuccess)
		complete(entry, snapshot);
	return call_leave(&c, (uintptr_t)s, err);
}

SHIM_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return stream_sync(API_cudaStreamSynchronize, s, false);
}
SHIM_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
	return stream_sync(API_cudaStreamSynchronize_ptsz, s, true);
}
SHIM_EXPORT cudaError_t cudaStreamQuery(cudaStream_t s)
{
	return stream_sync(API_cudaStreamQuery, s, false);
}
SHIM_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t s)
{
	return stream_sync(API_cudaStreamQuery_ptsz, s, true);
}

static cudaError_t device_sync(enum cuda_api api)
{
	struct call c;
	call_enter(&c, api);
	/* Only what was queued before the call is known finished after it. The
	 * snapshot is taken without a lock: work queued concurrently may or may
	 * not be in it, and is then settled by a later synchronisation. */
	uint32_t snapshot[MAX_STREAMS];
	for (uint32_t i = 0; i < MAX_STREAMS; i++)
		snapshot[i] = submitted_now(i);
	cudaError_t err = ((void_fn)resolve(api))();
	if (err == cudaSuccess)
		device_synchronized(snapshot);
	return call_leave(&c, 0, err);
}

SHIM_EXPORT cudaError_t cudaDeviceSynchronize(void) { return device_sync(API_cudaDeviceSynchronize); }
SHIM_EXPORT cudaError_t cudaThreadSynchronize(void) { return device_sync(API_cudaThreadSynchronize); }

static cudaError_t event_sync(enum cuda_api api, cudaEvent_t e)
{
	struct call c;
	call_enter(&c, api);
	cudaError_t err = ((event_fn)resolve(api))(e);
	if (err == cudaSuccess)
		event_completed(e);
	return call_leave(&c, 0, err);
}

SHIM_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e) { return event_sync(API_cudaEventSynchronize, e); }
SHIM_EXPORT cudaError_t cudaEventQuery(cudaEvent_t e) { return event_sync(API_cudaEventQuery, e); }

static cudaError_t event_record(enum cuda_api api, cudaEvent_t e, cudaStream_t s, bool per_thread)
{
	struct call c;
	call_enter(&c, api);
	uint32_t entry = stream_entry(stream_key(s, per_thread));
	cudaError_t err = ((record_fn)resolve(api))(e, s);
	if (err == cudaSuccess)
		event_recorded(e, entry);
	return call_leave(&c, (uintptr_t)s, err);
}

SHIM_EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	return event_record(API_cudaEventRecord, e, s, false);
}
SHIM_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s)
{
	return event_record(API_cudaEventRecord_ptsz, e, s, true);
}

/* s waits for e: its later work cannot finish before e's stream reaches the
 * record, so s has work outstanding until it is synchronised itself. A
 * stream that waits on an event of a capturing stream joins the capture. */
static cudaError_t stream_wait_event(enum cuda_api api, cudaStream_t s, cudaEvent_t e,
				     unsigned flags, bool per_thread)
{
	struct call c;
	call_enter(&c, api);
	uint32_t entry = stream_entry(stream_key(s, per_thread));
	struct event_entry *slot = event_slot((uintptr_t)e, false);
	uint32_t seq = 0;
	if (slot) {
		uint64_t mark = __atomic_load_n(&slot->mark, __ATOMIC_ACQUIRE);
		uint32_t source = (uint32_t)(mark >> 32);
		uint32_t origin = __atomic_load_n(&streams[source].capture_origin, __ATOMIC_RELAXED);
		if (origin != NO_ENTRY) {
			__atomic_store_n(&streams[entry].capture_origin, origin, __ATOMIC_RELAXED);
		} else {
			uint64_t state = __atomic_load_n(&streams[source].state, __ATOMIC_ACQUIRE);
			uint32_t recorded = (uint32_t)mark, comp = completed_of(state);
			if ((uint32_t)(recorded - comp) <= (uint32_t)(submitted_of(state) - comp) &&
			    recorded != comp)
				seq = submit(entry);
		}
	}
	cudaError_t err = ((wait_event_fn)resolve(api))(s, e, flags);
	if (err != cudaSuccess && seq)
		unsubmit(entry, seq);
	return call_leave(&c, (uintptr_t)s, err);
}

SHIM_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
	return stream_wait_event(API_cudaStreamWaitEvent, s, e, flags, false);
}
SHIM_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
	return stream_wait_event(API_cudaStreamWaitEvent_ptsz, s, e, flags, true);
}

/* --- streams' lives and graph capture ------------------------------------------- */

/* A new stream may reuse a destroyed one's handle: start it afresh. */
static void stream_created(cudaStream_t s)
{
	uint32_t entry = stream_entry((uintptr_t)s);
	__atomic_store_n(&streams[entry].capture_origin, NO_ENTRY, __ATOMIC_RELAXED);
	complete(entry, submitted_now(entry));
}

SHIM_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	struct call c;
	call_enter(&c, API_cudaStreamCreate);
	cudaError_t err = REAL_CUDA(cudaStreamCreate, create_fn)(s);
	if (err == cudaSuccess)
		stream_created(*s);
	return call_leave(&c, err == cudaSuccess ? (uintptr_t)*s : 0, err);
}
SHIM_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	struct call c;
	call_enter(&c, API_cudaStreamCreateWithFlags);
	cudaError_t err = REAL_CUDA(cudaStreamCreateWithFlags, create_flags_fn)(s, flags);
	if (err == cudaSuccess)
		stream_created(*s);
	return call_leave(&c, err == cudaSuccess ? (uintptr_t)*s : 0, err);
}
SHIM_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned flags, int priority)
{
	struct call c;
	call_enter(&c, API_cudaStreamCreateWithPriority);
	cudaError_t err =
		REAL_CUDA(cudaStreamCreateWithPriority, create_priority_fn)(s, flags, priority);
	if (err == cudaSuccess)
		stream_created(*s);
	return call_leave(&c, err == cudaSuccess ? (uintptr_t)*s : 0, err);
}
SHIM_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	struct call c;
	call_enter(&c, API_cudaStreamDestroy);
	uint32_t entry = stream_entry(stream_key(s, false));
	retire_stream(s, entry);
	cudaError_t err = REAL_CUDA(cudaStreamDestroy, stream_fn)(s);
	return call_leave(&c, (uintptr_t)s, err);
}

static cudaError_t begin_capture(enum cuda_api api, cudaStream_t s, int mode, bool per_thread)
{
	struct call c;
	call_enter(&c, api);
	uint32_t entry = stream_entry(stream_key(s, per_thread));
	cudaError_t err = ((begin_capture_fn)resolve(api))(s, mode);
	if (err == cudaSuccess)
		__atomic_store_n(&streams[entry].capture_origin, entry, __ATOMIC_RELAXED);
	return call_leave(&c, (uintptr_t)s, err);
}

static cudaError_t end_capture(enum cuda_api api, cudaStream_t s, cudaGraph_t *graph,
			       bool per_thread)
{
	struct call c;
	call_enter(&c, api);
	uint32_t entry = stream_entry(stream_key(s, per_thread));
	cudaError_t err = ((end_capture_fn)resolve(api))(s, graph);
	/* Capture ends, failed or not; every stream that joined it leaves it. */
	for (uint32_t i = 0; i < MAX_STREAMS; i++)
		if (__atomic_load_n(&streams[i].capture_origin, __ATOMIC_RELAXED) == entry)
			__atomic_store_n(&streams[i].capture_origin, NO_ENTRY, __ATOMIC_RELAXED);
	return call_leave(&c, (uintptr_t)s, err);
}

SHIM_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode)
{
	return begin_capture(API_cudaStreamBeginCapture, s, mode, false);
}
SHIM_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, int mode)
{
	return begin_capture(API_cudaStreamBeginCapture_ptsz, s, mode, true);
}
SHIM_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
	return end_capture(API_cudaStreamEndCapture, s, graph, false);
}
SHIM_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *graph)
{
	return end_capture(API_cudaStreamEndCapture_ptsz, s, graph, true);
}

/* --- hooks ------------------------------------------------------------------------ */

SHIM_EXPORT int rtaccel_shim_set_gpu_hooks(const struct rtaccel_gpu_hooks *h)
{
	rtaccel_mutex_lock(&segment_lock);
	/* A segment under way was begun without these hooks: they see the next. */
	if (h)
		hooks = *h;
	else
		memset(&hooks, 0, sizeof(hooks));
	rtaccel_mutex_unlock(&segment_lock);
	return 0;
}

SHIM_EXPORT int rtaccel_shim_gpu_busy(void)
{
	return __atomic_load_n(&active_streams, __ATOMIC_ACQUIRE) > 0;
}

void shim_cuda_segments(uint64_t *count, uint64_t *total_ns, uint64_t *max_ns, bool *open)
{
	rtaccel_mutex_lock(&segment_lock);
	*count = segment_count;
	*total_ns = segment_ns_total;
	*max_ns = segment_ns_max;
	*open = active_streams > 0;
	rtaccel_mutex_unlock(&segment_lock);
}

/* RTACCEL_SHIM_GPU_HOOKS=lib.so: a module defining
 * rtaccel_gpu_segment_begin(void) and rtaccel_gpu_segment_end(void). */
static void call_module(void (*fn)(void)) { fn(); }
static void module_begin(void *arg) { call_module(((void (**)(void))arg)[0]); }
static void module_end(void *arg) { call_module(((void (**)(void))arg)[1]); }

/* RTACCEL_SHIM_BWLOCK=NAME:MBPS: hold bandwidth lock NAME with threshold
 * MBPS during every GPU segment (BWLOCK++'s automatic instrumentation). The
 * segment hooks already alternate strictly under the segment lock, so one
 * holder serves every stream and thread of the process. */
static void bwlock_begin(void *arg) { rtaccel_bwlock_take(arg); }
static void bwlock_end(void *arg) { rtaccel_bwlock_release(arg); }

static bool bwlock_init(const char *spec)
{
	char name[128];
	unsigned long threshold;
	const char *colon = strrchr(spec, ':');
	char *end;
	if (!colon || (size_t)(colon - spec) >= sizeof(name) || !colon[1] ||
	    (threshold = strtoul(colon + 1, &end, 10), *end) || threshold >= UINT32_MAX) {
		fprintf(stderr, "rtaccel shim: RTACCEL_SHIM_BWLOCK=%s: expected NAME:MBPS\n", spec);
		return false;
	}
	memcpy(name, spec, (size_t)(colon - spec));
	name[colon - spec] = 0;
	char label[RTACCEL_GANG_NAME_MAX];
	snprintf(label, sizeof(label), "gpu.%d", (int)getpid());
	rtaccel_bwlock_t *lock;
	rtaccel_bwlock_holder_t *holder;
	shim_busy++;
	int err = rtaccel_bwlock_open(name, &lock);
	if (!err)
		err = rtaccel_bwlock_holder_init(lock, label, (uint32_t)threshold, 0, &holder);
	shim_busy--;
	if (err) {
		fprintf(stderr, "rtaccel shim: bandwidth lock '%s': %s\n", name, strerror(-err));
		return false;
	}
	struct rtaccel_gpu_hooks h = {bwlock_begin, bwlock_end, holder};
	rtaccel_shim_set_gpu_hooks(&h);
	return true;
}

void shim_cuda_init(void)
{
	const char *bwlock = getenv("RTACCEL_SHIM_BWLOCK");
	const char *module = getenv("RTACCEL_SHIM_GPU_HOOKS");
	if (bwlock && *bwlock) {
		if (module && *module)
			fprintf(stderr, "rtaccel shim: RTACCEL_SHIM_BWLOCK replaces the hooks of "
					"RTACCEL_SHIM_GPU_HOOKS=%s\n", module);
		bwlock_init(bwlock);
		return;
	}
	if (!module || !*module)
		return;
	static void (*fns[2])(void);
	shim_busy++;
	void *h = dlopen(module, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		fns[0] = (void (*)(void))dlsym(h, "rtaccel_gpu_segment_begin");
		fns[1] = (void (*)(void))dlsym(h, "rtaccel_gpu_segment_end");
	}
	shim_busy--;
	if (!fns[0] || !fns[1]) {
		fprintf(stderr, "rtaccel shim: %s: %s\n", module,
			h ? "defines no rtaccel_gpu_segment_begin and _end" : dlerror());
		return;
	}
	struct rtaccel_gpu_hooks m = {module_begin, module_end, fns};
	rtaccel_shim_set_gpu_hooks(&m);
}

void shim_cuda_after_fork_child(void)
{
	/* The child has no CUDA context of its parent's: nothing is outstanding. */
	memset(streams, 0, sizeof(streams));
	memset(events, 0, sizeof(events));
	memset(retiring, 0, sizeof(retiring));
	retiring_count = 0;
	active_streams = 0;
	rtaccel_mutex_init(&segment_lock, NULL);
}

/* --- a statically linked CUDA runtime ------------------------------------------- */

/* An object with device code (.nv_fatbin) registers it with the runtime
 * through __cudaRegisterFatBinary; when it does not import that symbol, the
 * runtime is linked into it and its CUDA calls never reach the shim. */
static bool has_static_runtime(const char *path)
{
	bool result = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
		close(fd);
		return false;
	}
	size_t size = (size_t)st.st_size;
	const unsigned char *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return false;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size ||
	    eh->e_shstrndx >= eh->e_shnum)
		goto out;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
	const Elf64_Shdr *names = &sh[eh->e_shstrndx];
	if (names->sh_offset + names->sh_size > size)
		goto out;
	bool fatbin = false, imports_register = false;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_name < names->sh_size &&
		    strncmp((const char *)m + names->sh_offset + sh[i].sh_name, ".nv_fatbin",
			    names->sh_size - sh[i].sh_name) == 0)
			fatbin = true;
		if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
			continue;
		const Elf64_Shdr *str = &sh[sh[i].sh_link];
		if (sh[i].sh_offset + sh[i].sh_size > size || str->sh_offset + str->sh_size > size)
			continue;
		const Elf64_Sym *sym = (const Elf64_Sym *)(m + sh[i].sh_offset);
		for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++)
			if (sym[k].st_shndx == SHN_UNDEF && sym[k].st_name < str->sh_size &&
			    strncmp((const char *)m + str->sh_offset + sym[k].st_name,
				    "__cudaRegisterFatBinary", str->sh_size - sym[k].st_name) == 0)
				imports_register = true;
	}
	result = fatbin && !imports_register;
out:
	munmap((void *)m, size);
	return result;
}

struct static_scan {
	void (*found)(const char *path, void *arg);
	void *arg;
};

static int static_scan_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct static_scan *scan = data;
	char exe[512];
	const char *path = info->dlpi_name;
	if (!path || !*path) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return 0;
		exe[n] = '\0';
		path = exe;
	}
	if (strstr(path, "linux-vdso") || strstr(path, "libcudart.so"))
		return 0;
	if (has_static_runtime(path))
		scan->found(path, scan->arg);
	return 0;
}

void shim_cuda_scan_static(void (*found)(const char *path, void *arg), void *arg)
{
	struct static_scan scan = {found, arg};
	shim_busy++;
	dl_iterate_phdr(static_scan_cb, &scan);
	shim_busy--;
}
