/* A stand-in for the CUDA runtime, for testing the shim's CUDA interposition
 * on machines without a GPU. It is a test double only: it implements the
 * runtime calls the shim interposes with the same asynchronous semantics, on
 * a "device" that is one thread running a FIFO of operations:
 * - a kernel's args[0] points to the nanoseconds it runs (it sleeps);
 * - a graph launch runs for as many nanoseconds as the graph handle's value;
 * - copies and memsets are done by the device thread, in stream order;
 * - events complete when the device thread reaches their record;
 * - capture records launches into a graph instead of queueing them.
 * Like the real runtime, every call takes the runtime's own mutex, so that the
 * shim's trace shows locks taken inside CUDA calls. The stream handle
 * (cudaStream_t)0xbad0 is refused with an error. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int cudaError_t;
typedef struct stream *cudaStream_t;
typedef struct event *cudaEvent_t;
typedef void *cudaGraph_t;
typedef void *cudaGraphExec_t;
typedef struct {
	unsigned x, y, z;
} dim3;

#define API __attribute__((visibility("default")))
enum { kSuccess = 0, kInvalidValue = 1, kInvalidHandle = 400, kNotReady = 600 };
#define BAD_STREAM ((cudaStream_t)0xbad0)

struct stream {
	uint64_t submitted, completed; /* operations */
	bool capturing;
	uint64_t captured_ns;
};

struct event {
	uint64_t recorded, reached; /* generations */
};

enum op_kind { OP_SLEEP, OP_COPY, OP_SET, OP_RECORD };
struct op {
	enum op_kind kind;
	struct stream *stream;
	uint64_t ns;
	void *dst;
	const void *src;
	size_t n;
	int value;
	struct event *event;
	uint64_t generation;
	struct op *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static struct op *head, *tail;
static uint64_t queued, finished;
static pthread_once_t started = PTHREAD_ONCE_INIT;
static struct stream legacy;
static __thread struct stream per_thread;

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void *device(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!head)
			pthread_cond_wait(&work, &mu);
		struct op *o = head;
		pthread_mutex_unlock(&mu);
		switch (o->kind) {
		case OP_SLEEP: sleep_ns(o->ns); break;
		case OP_COPY: memcpy(o->dst, o->src, o->n); break;
		case OP_SET: memset(o->dst, o->value, o->n); break;
		case OP_RECORD: break;
		}
		pthread_mutex_lock(&mu);
		if (o->kind == OP_RECORD && o->event->reached < o->generation)
			o->event->reached = o->generation;
		o->stream->completed++;
		finished++;
		head = o->next;
		if (!head)
			tail = NULL;
		free(o);
		pthread_cond_broadcast(&done);
	}
	return NULL;
}

static void start_device(void)
{
	pthread_t t;
	pthread_create(&t, NULL, device, NULL);
	pthread_detach(t);
}

static struct stream *resolve_stream(cudaStream_t s, bool ptds)
{
	if ((uintptr_t)s == 2 || (!s && ptds))
		return &per_thread;
	if (!s || (uintptr_t)s == 1)
		return &legacy;
	return s;
}

/* Queues o on its stream; the caller holds mu. Returns the queue position. */
static uint64_t enqueue(struct op *o)
{
	o->next = NULL;
	if (tail)
		tail->next = o;
	else
		head = o;
	tail = o;
	o->stream->submitted++;
	pthread_cond_signal(&work);
	return ++queued;
}

static cudaError_t submit(cudaStream_t handle, bool ptds, struct op o, bool wait)
{
	if (handle == BAD_STREAM)
		return kInvalidHandle;
	pthread_once(&started, start_device);
	pthread_mutex_lock(&mu);
	struct stream *s = resolve_stream(handle, ptds);
	if (s->capturing && o.kind == OP_SLEEP) {
		s->captured_ns += o.ns;
		pthread_mutex_unlock(&mu);
		return kSuccess;
	}
	struct op *p = malloc(sizeof(*p));
	*p = o;
	p->stream = s;
	uint64_t position = enqueue(p);
	while (wait && finished < position)
		pthread_cond_wait(&done, &mu);
	pthread_mutex_unlock(&mu);
	return kSuccess;
}

static uint64_t kernel_ns(void **args) { return args && args[0] ? *(const uint64_t *)args[0] : 0; }

API cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return kSuccess;
}

API cudaError_t __cudaLaunchKernel(const void *k, dim3 g, dim3 b, void **args, size_t smem,
				   cudaStream_t s)
{
	(void)k, (void)g, (void)b, (void)smem;
	return submit(s, false, (struct op){.kind = OP_SLEEP, .ns = kernel_ns(args)}, false);
}
API cudaError_t __cudaLaunchKernel_ptsz(const void *k, dim3 g, dim3 b, void **args, size_t smem,
					cudaStream_t s)
{
	(void)k, (void)g, (void)b, (void)smem;
	return submit(s, true, (struct op){.kind = OP_SLEEP, .ns = kernel_ns(args)}, false);
}
API cudaError_t cudaLaunchKernel(const void *k, dim3 g, dim3 b, void **args, size_t smem,
				 cudaStream_t s)
{
	return __cudaLaunchKernel(k, g, b, args, smem, s);
}
API cudaError_t cudaGraphLaunch(cudaGraphExec_t g, cudaStream_t s)
{
	return submit(s, false, (struct op){.kind = OP_SLEEP, .ns = (uint64_t)(uintptr_t)g}, false);
}

API cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, int kind, cudaStream_t s)
{
	(void)kind;
	return submit(s, false, (struct op){.kind = OP_COPY, .dst = d, .src = src, .n = n}, false);
}
/* Synchronous to the host, as the real one is for device-to-host copies. */
API cudaError_t cudaMemcpy(void *d, const void *src, size_t n, int kind)
{
	(void)kind;
	return submit(NULL, false, (struct op){.kind = OP_COPY, .dst = d, .src = src, .n = n}, true);
}
API cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t s)
{
	return submit(s, false, (struct op){.kind = OP_SET, .dst = d, .value = v, .n = n}, false);
}

static cudaError_t wait_stream(struct stream *s, bool query)
{
	pthread_mutex_lock(&mu);
	uint64_t target = s->submitted;
	bool ready = s->completed >= target;
	while (!query && s->completed < target)
		pthread_cond_wait(&done, &mu);
	pthread_mutex_unlock(&mu);
	return query && !ready ? kNotReady : kSuccess;
}

API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return s == BAD_STREAM ? kInvalidHandle : wait_stream(resolve_stream(s, false), false);
}
API cudaError_t cudaStreamQuery(cudaStream_t s)
{
	return s == BAD_STREAM ? kInvalidHandle : wait_stream(resolve_stream(s, false), true);
}
API cudaError_t cudaDeviceSynchronize(void)
{
	pthread_mutex_lock(&mu);
	uint64_t target = queued;
	while (finished < target)
		pthread_cond_wait(&done, &mu);
	pthread_mutex_unlock(&mu);
	return kSuccess;
}

API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	(void)flags;
	*s = calloc(1, sizeof(**s));
	return *s ? kSuccess : kInvalidValue;
}
API cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
/* Streams are never freed: work queued on a destroyed stream still runs. */
API cudaError_t cudaStreamDestroy(cudaStream_t s) { return s == BAD_STREAM ? kInvalidHandle : kSuccess; }

API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
	(void)flags;
	*e = calloc(1, sizeof(**e));
	return *e ? kSuccess : kInvalidValue;
}
API cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
API cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	(void)e; /* a record may still be queued; kept */
	return kSuccess;
}
API cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	pthread_mutex_lock(&mu);
	uint64_t generation = ++e->recorded;
	pthread_mutex_unlock(&mu);
	return submit(s, false, (struct op){.kind = OP_RECORD, .event = e, .generation = generation},
		      false);
}
static cudaError_t wait_event(cudaEvent_t e, bool query)
{
	pthread_mutex_lock(&mu);
	bool ready = e->reached >= e->recorded;
	while (!query && e->reached < e->recorded)
		pthread_cond_wait(&done, &mu);
	pthread_mutex_unlock(&mu);
	return query && !ready ? kNotReady : kSuccess;
}
API cudaError_t cudaEventSynchronize(cudaEvent_t e) { return wait_event(e, false); }
API cudaError_t cudaEventQuery(cudaEvent_t e) { return wait_event(e, true); }
/* One FIFO: whatever the event follows is done before anything queued later. */
API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
	(void)e, (void)flags;
	return s == BAD_STREAM ? kInvalidHandle : kSuccess;
}

API cudaError_t cudaStreamBeginCapture(cudaStream_t s, int mode)
{
	(void)mode;
	pthread_mutex_lock(&mu);
	struct stream *st = resolve_stream(s, false);
	st->capturing = true;
	st->captured_ns = 0;
	pthread_mutex_unlock(&mu);
	return kSuccess;
}
/* The graph's handle is its length in nanoseconds (see cudaGraphLaunch). */
API cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
	pthread_mutex_lock(&mu);
	struct stream *st = resolve_stream(s, false);
	st->capturing = false;
	*graph = (cudaGraph_t)(uintptr_t)st->captured_ns;
	pthread_mutex_unlock(&mu);
	return kSuccess;
}
