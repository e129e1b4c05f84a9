/* `rtaccel shim --bwlock`: the bandwidth lock is held exactly while the
 * process has GPU work outstanding, across streams and threads, checked
 * against the stand-in CUDA runtime. Run under the shim with
 * RTACCEL_SHIM_BWLOCK=NAME:MBPS; exits 77 without it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtaccel/isolate.h"

#include "cudart_abi.h"

static rtaccel_bwlock_t *lock;
static unsigned threshold;
static int failures;

static void expect(bool held, const char *where)
{
	struct rtaccel_bwlock_status st;
	rtaccel_bwlock_get_status(lock, &st);
	bool ok = held ? st.held == 1 && st.threshold_mbps == threshold
		       : st.held == 0 && st.threshold_mbps == RTACCEL_BWLOCK_UNLIMITED;
	if (!ok) {
		printf("FAIL %s: held %u, threshold %u\n", where, st.held, st.threshold_mbps);
		failures++;
	}
}

static void launch(cudaStream_t s)
{
	dim3 one = {1, 1, 1};
	__cudaLaunchKernel((const void *)launch, one, one, NULL, 0, s);
}

static void *other_thread(void *arg)
{
	cudaStream_t s = arg;
	launch(s);
	return NULL;
}

int main(void)
{
	const char *spec = getenv("RTACCEL_SHIM_BWLOCK");
	char name[128];
	const char *colon = spec ? strrchr(spec, ':') : NULL;
	if (!colon || (size_t)(colon - spec) >= sizeof(name)) {
		printf("SKIP: run under rtaccel shim --bwlock\n");
		return 77;
	}
	memcpy(name, spec, (size_t)(colon - spec));
	name[colon - spec] = 0;
	threshold = (unsigned)strtoul(colon + 1, NULL, 10);
	if (rtaccel_bwlock_open(name, &lock) < 0)
		return 1;

	struct rtaccel_bwlock_status st;
	rtaccel_bwlock_get_status(lock, &st);
	const uint64_t takes0 = st.takes; /* the lock may outlive earlier runs */
	cudaStream_t a, b;
	cudaStreamCreateWithFlags(&a, 1);
	cudaStreamCreateWithFlags(&b, 1);
	expect(false, "before any work");
	launch(a);
	expect(true, "a kernel outstanding");
	launch(b);
	cudaStreamSynchronize(a);
	expect(true, "stream b still outstanding");
	cudaStreamSynchronize(b);
	expect(false, "both streams synchronised");

	/* Another thread's launch opens a segment this thread closes. */
	pthread_t t;
	pthread_create(&t, NULL, other_thread, a);
	pthread_join(t, NULL);
	expect(true, "a kernel from another thread");
	cudaDeviceSynchronize();
	expect(false, "device synchronised");

	for (int i = 0; i < 100; i++) {
		launch(i % 2 ? a : b);
		cudaStreamSynchronize(i % 2 ? a : b);
	}
	expect(false, "after 100 segments");
	rtaccel_bwlock_get_status(lock, &st);
	const uint64_t takes = st.takes - takes0;
	printf("%llu takes, %d failures\n", (unsigned long long)takes, failures);
	cudaStreamDestroy(a);
	cudaStreamDestroy(b);
	rtaccel_bwlock_unlink(name);
	return failures || takes != 102 ? 1 : 0;
}
