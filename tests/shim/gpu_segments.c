/* The shim's CUDA stream tracking and GPU-segment hooks, checked through the
 * CUDA runtime's API against the stand-in runtime (cudart_standin.c), so that
 * it runs without a GPU. Run under the shim (LD_PRELOAD); exits 77 without it.
 *
 * What the shim decides depends only on the order of the calls, never on how
 * long the device takes, except where a destroyed stream's work must really
 * finish (waited for with a deadline of seconds). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtaccel/shim.h"

#include "cudart_abi.h"

#define PER_THREAD ((cudaStream_t)2)
#define BAD_STREAM ((cudaStream_t)0xbad0)
#define MS 1000000ull

static int (*gpu_busy)(void);
static atomic_int begins, ends, inside, violations;

static void on_begin(void *arg)
{
	(void)arg;
	if (atomic_fetch_add(&inside, 1) != 0)
		atomic_fetch_add(&violations, 1);
	atomic_fetch_add(&begins, 1);
}

static void on_end(void *arg)
{
	(void)arg;
	if (atomic_fetch_sub(&inside, 1) != 1)
		atomic_fetch_add(&violations, 1);
	atomic_fetch_add(&ends, 1);
}

static int failures;
#define CHECK(cond)                                                                     \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                     \
		}                                                                       \
	} while (0)

static cudaError_t launch(cudaStream_t s, uint64_t ns)
{
	void *args[1] = {&ns};
	dim3 one = {1, 1, 1};
	return __cudaLaunchKernel((const void *)launch, one, one, args, 0, s);
}

static cudaStream_t new_stream(void)
{
	cudaStream_t s = NULL;
	CHECK(cudaStreamCreateWithFlags(&s, 1) == 0);
	return s;
}

static void one_stream(void)
{
	cudaStream_t a = new_stream();
	int b0 = begins, e0 = ends;
	CHECK(!gpu_busy());
	CHECK(launch(a, 20 * MS) == 0);
	CHECK(gpu_busy() && begins == b0 + 1);
	CHECK(launch(a, 1 * MS) == 0); /* no second segment */
	CHECK(begins == b0 + 1);
	CHECK(cudaStreamSynchronize(a) == 0);
	CHECK(!gpu_busy() && ends == e0 + 1);
}

/* BWLOCK++'s rule: a segment lasts while any stream has work. */
static void per_stream_rule(void)
{
	cudaStream_t a = new_stream(), b = new_stream();
	int b0 = begins;
	CHECK(launch(a, 10 * MS) == 0 && launch(b, 20 * MS) == 0);
	CHECK(cudaStreamSynchronize(a) == 0);
	CHECK(gpu_busy());
	CHECK(cudaStreamSynchronize(b) == 0);
	CHECK(!gpu_busy() && begins == b0 + 1);
}

/* An event covers its stream's work up to the record, not after it. */
static void events(void)
{
	cudaStream_t a = new_stream(), b = new_stream();
	cudaEvent_t e, f;
	CHECK(cudaEventCreate(&e) == 0 && cudaEventCreate(&f) == 0);
	CHECK(launch(a, 5 * MS) == 0 && cudaEventRecord(e, a) == 0 && launch(a, 5 * MS) == 0);
	CHECK(cudaEventSynchronize(e) == 0);
	CHECK(gpu_busy()); /* the second kernel */
	CHECK(cudaEventRecord(e, a) == 0 && cudaEventSynchronize(e) == 0);
	CHECK(!gpu_busy());
	/* b waits for a's event: b has work outstanding until b is synchronised. */
	CHECK(launch(a, 5 * MS) == 0 && cudaEventRecord(f, a) == 0);
	CHECK(cudaStreamWaitEvent(b, f, 0) == 0);
	CHECK(cudaStreamSynchronize(a) == 0);
	CHECK(gpu_busy());
	CHECK(cudaStreamSynchronize(b) == 0);
	CHECK(!gpu_busy());
}

static void device_sync_and_copies(void)
{
	cudaStream_t a = new_stream(), b = new_stream();
	char src[64] = "rtaccel", dst[64] = {0};
	CHECK(launch(a, 5 * MS) == 0 && cudaMemcpyAsync(dst, src, sizeof(src), 1, b) == 0);
	CHECK(cudaDeviceSynchronize() == 0);
	CHECK(!gpu_busy() && strcmp(dst, "rtaccel") == 0);
	/* A copy to the host returns done; a copy to the device may not be. */
	CHECK(cudaMemcpy(dst, src, sizeof(src), 2 /* device to host */) == 0);
	CHECK(!gpu_busy());
	CHECK(cudaMemcpy(dst, src, sizeof(src), 1 /* host to device */) == 0);
	CHECK(gpu_busy());
	CHECK(cudaDeviceSynchronize() == 0);
	CHECK(!gpu_busy());
}

static void failed_calls_leave_nothing_outstanding(void)
{
	CHECK(launch(BAD_STREAM, 5 * MS) != 0);
	CHECK(!gpu_busy());
}

/* Work queued on a stream that is then destroyed finishes on its own; the
 * segment ends once it has, noticed at a later CUDA call. */
static void destroyed_stream(void)
{
	cudaStream_t a = new_stream();
	cudaEvent_t probe;
	CHECK(cudaEventCreate(&probe) == 0);
	CHECK(launch(a, 20 * MS) == 0);
	CHECK(cudaStreamDestroy(a) == 0);
	CHECK(gpu_busy());
	for (int i = 0; i < 500 && gpu_busy(); i++) {
		usleep(10000);
		cudaEventQuery(probe);
	}
	CHECK(!gpu_busy());
}

/* Launches into a capturing stream build a graph; launching it is GPU work. */
static void graph_capture(void)
{
	cudaStream_t a = new_stream();
	cudaGraph_t g = NULL;
	int b0 = begins;
	CHECK(cudaStreamBeginCapture(a, 0) == 0);
	CHECK(launch(a, 2 * MS) == 0 && launch(a, 3 * MS) == 0);
	CHECK(!gpu_busy() && begins == b0);
	CHECK(cudaStreamEndCapture(a, &g) == 0 && (uintptr_t)g == 5 * MS);
	CHECK(cudaGraphLaunch(g, a) == 0);
	CHECK(gpu_busy());
	CHECK(cudaStreamSynchronize(a) == 0);
	CHECK(!gpu_busy());
}

/* Many threads launching, copying and synchronising their own streams and
 * per-thread default streams at once: the hooks alternate, and once every
 * stream is synchronised nothing is outstanding. */
static void *stress_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	cudaStream_t mine = new_stream();
	char buf[256], src[256] = {1};
	for (int i = 0; i < 300; i++) {
		cudaStream_t s = rand_r(&seed) % 2 ? mine : PER_THREAD;
		switch (rand_r(&seed) % 4) {
		case 0: launch(s, (uint64_t)(rand_r(&seed) % 50) * 1000); break;
		case 1: cudaMemcpyAsync(buf, src, sizeof(buf), 1, s); break;
		case 2: cudaStreamSynchronize(s); break;
		case 3: cudaStreamSynchronize(mine), cudaStreamSynchronize(PER_THREAD); break;
		}
	}
	cudaStreamSynchronize(mine);
	cudaStreamSynchronize(PER_THREAD);
	return NULL;
}

static void many_threads(void)
{
	pthread_t t[8];
	for (uintptr_t i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, stress_thread, (void *)(i + 1));
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	CHECK(!gpu_busy());
	CHECK(begins == ends && atomic_load(&violations) == 0);
}

int main(void)
{
	int (*set_hooks)(const struct rtaccel_gpu_hooks *) =
		(int (*)(const struct rtaccel_gpu_hooks *))dlsym(RTLD_DEFAULT, "rtaccel_shim_set_gpu_hooks");
	gpu_busy = (int (*)(void))dlsym(RTLD_DEFAULT, "rtaccel_shim_gpu_busy");
	if (!set_hooks || !gpu_busy) {
		printf("SKIP: not running under librtaccel_shim.so (LD_PRELOAD)\n");
		return 77;
	}
	struct rtaccel_gpu_hooks hooks = {on_begin, on_end, NULL};
	set_hooks(&hooks);
	one_stream();
	per_stream_rule();
	events();
	device_sync_and_copies();
	failed_calls_leave_nothing_outstanding();
	destroyed_stream();
	graph_capture();
	many_threads();
	CHECK(begins == ends && atomic_load(&violations) == 0);
	printf("%d GPU segments, %d failures\n", begins, failures);
	return failures ? 1 : 0;
}
