/* rtaccel-lockdemo: the locking delays of the ECRTS'24 paper, reproduced with
 * plain pthread calls so that `rtaccel shim` can fix them without a rebuild.
 *
 *   reader-starvation  writers keep a writer-preferring glibc rwlock busy; a
 *                      reader measures how long it waits
 *   writer-starvation  overlapping readers keep the default (reader-preferring)
 *                      rwlock busy; a writer measures how long it waits
 *   mutex-inversion    partitioned cores: a SCHED_FIFO 90 thread on core 0
 *                      waits for a mutex whose SCHED_FIFO 10 holder on core 1
 *                      is preempted by a SCHED_FIFO 50 hog
 *   rwlock-inversion   the same with a read-held rwlock and a writer
 *
 * Prints one JSON line: scenario, mode (RTACCEL_SHIM), samples and the waits
 * in microseconds. Exit 0, 2 on bad arguments, 77 when the machine cannot run
 * the scenario (fewer than 2 cores, no SCHED_FIFO rights). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/percentile.h"
#include "core/realtime.h"
#include "core/size.h"

#define MAX_SAMPLES 4096

static void spin_ns(uint64_t ns)
{
	uint64_t end = rtaccel_monotonic_ns() + ns;
	while (rtaccel_monotonic_ns() < end)
		;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int pin_and_prioritise(int core, int fifo_priority)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(core, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
		return -1;
	if (fifo_priority <= 0)
		return 0;
	struct sched_param sp = {.sched_priority = fifo_priority};
	return pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0 ? 0 : -1;
}

static uint64_t samples[MAX_SAMPLES];
static int nsamples;
static int stop; /* set by the stopper thread, read by the hogs */

static void add_sample(uint64_t wait_ns)
{
	if (nsamples < MAX_SAMPLES)
		samples[nsamples++] = wait_ns;
}

/* --- starvation ------------------------------------------------------------- */

static pthread_rwlock_t rw;
static uint64_t cs_ns = 200 * 1000;

static void *writer_loop(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		pthread_rwlock_wrlock(&rw);
		spin_ns(cs_ns);
		pthread_rwlock_unlock(&rw);
	}
	return NULL;
}

static void *reader_loop(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		pthread_rwlock_rdlock(&rw);
		spin_ns(cs_ns);
		pthread_rwlock_unlock(&rw);
	}
	return NULL;
}

static void *stopper(void *arg)
{
	sleep_ns(*(uint64_t *)arg);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* The victim asks every 5 ms; the hogs stop at the end of the run, so a victim
 * that never got in records the rest of the run as its wait. */
static int starvation(int writer_preferring, uint64_t duration_ns)
{
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	if (writer_preferring)
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&rw, &a);
	pthread_t hogs[3], stop_thread;
	pthread_create(&stop_thread, NULL, stopper, &duration_ns);
	for (int i = 0; i < 3; i++)
		pthread_create(&hogs[i], NULL, writer_preferring ? writer_loop : reader_loop, NULL);
	uint64_t end = rtaccel_monotonic_ns() + duration_ns;
	while (rtaccel_monotonic_ns() < end) {
		sleep_ns(5 * 1000000ull);
		uint64_t t0 = rtaccel_monotonic_ns();
		if (t0 >= end)
			break;
		/* Stop the hogs at the end even if the victim is still waiting. */
		if (writer_preferring)
			pthread_rwlock_rdlock(&rw);
		else
			pthread_rwlock_wrlock(&rw);
		add_sample(rtaccel_monotonic_ns() - t0);
		pthread_rwlock_unlock(&rw);
		if (rtaccel_monotonic_ns() >= end)
			break;
	}
	pthread_join(stop_thread, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(hogs[i], NULL);
	pthread_rwlock_destroy(&rw);
	return 0;
}

/* --- inversion on partitioned cores ---------------------------------------------- */

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t inv_rw = PTHREAD_RWLOCK_INITIALIZER;
static int use_rwlock;
static sem_t hog_go, high_go, low_go, round_done;
static int rounds = 3;
static uint64_t hog_ns = 100 * 1000000ull;

static void *low_thread(void *arg)
{
	(void)arg;
	pin_and_prioritise(1, 10);
	for (int r = 0; r < rounds; r++) {
		sem_wait(&low_go);
		if (use_rwlock)
			pthread_rwlock_rdlock(&inv_rw);
		else
			pthread_mutex_lock(&mutex);
		sem_post(&high_go);
		sem_post(&hog_go); /* the hog preempts us right here, holding the lock */
		spin_ns(1000000);
		if (use_rwlock)
			pthread_rwlock_unlock(&inv_rw);
		else
			pthread_mutex_unlock(&mutex);
	}
	return NULL;
}

static void *hog_thread(void *arg)
{
	(void)arg;
	pin_and_prioritise(1, 50);
	for (int r = 0; r < rounds; r++) {
		sem_wait(&hog_go);
		spin_ns(hog_ns);
	}
	return NULL;
}

static void *high_thread(void *arg)
{
	(void)arg;
	pin_and_prioritise(0, 90);
	for (int r = 0; r < rounds; r++) {
		sem_wait(&high_go);
		sleep_ns(2000000); /* let the hog start on core 1 */
		uint64_t t0 = rtaccel_monotonic_ns();
		if (use_rwlock)
			pthread_rwlock_wrlock(&inv_rw);
		else
			pthread_mutex_lock(&mutex);
		add_sample(rtaccel_monotonic_ns() - t0);
		if (use_rwlock)
			pthread_rwlock_unlock(&inv_rw);
		else
			pthread_mutex_unlock(&mutex);
		sem_post(&round_done);
	}
	return NULL;
}

static int inversion(int rwlock)
{
	if (rtaccel_cores_usable() < 2) {
		fprintf(stderr, "rtaccel-lockdemo: SKIP: needs 2 cores it may use (its affinity or cpuset)\n");
		return 77;
	}
	struct sched_param sp = {.sched_priority = 1};
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
		fprintf(stderr, "rtaccel-lockdemo: SKIP: needs SCHED_FIFO rights (root or CAP_SYS_NICE)\n");
		return 77;
	}
	sp.sched_priority = 0;
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	use_rwlock = rwlock;
	sem_init(&hog_go, 0, 0);
	sem_init(&high_go, 0, 0);
	sem_init(&low_go, 0, 0);
	sem_init(&round_done, 0, 0);
	pthread_t t[3];
	pthread_create(&t[0], NULL, low_thread, NULL);
	pthread_create(&t[1], NULL, hog_thread, NULL);
	pthread_create(&t[2], NULL, high_thread, NULL);
	for (int r = 0; r < rounds; r++) {
		sem_post(&low_go);
		sem_wait(&round_done);
		sleep_ns(hog_ns + 20000000ull); /* the hog finishes before the next round */
	}
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: rtaccel-lockdemo SCENARIO [--duration-ms N] [--hog-ms N] [--rounds N]\n"
		"  SCENARIO: reader-starvation | writer-starvation | mutex-inversion | rwlock-inversion\n"
		"  --duration-ms N  length of a starvation run (default 1000)\n"
		"  --hog-ms N       how long the medium-priority hog runs per round (default 100)\n"
		"  --rounds N       inversion rounds (default 3)\n");
	return 2;
}

static int parse_positive(const char *s, long max, long *out)
{
	return rtaccel_parse_long(s, 1, max, out);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	const char *scenario = argv[1];
	long duration_ms = 1000;
	/* Options come in pairs: a name, then its number. */
	for (int i = 2; i < argc; i += 2) {
		long v;
		if (i + 1 >= argc || parse_positive(argv[i + 1], 60000, &v) < 0) {
			fprintf(stderr, "rtaccel-lockdemo: %s needs a positive number of at most 60000\n",
				argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "--duration-ms"))
			duration_ms = v;
		else if (!strcmp(argv[i], "--hog-ms"))
			hog_ns = (uint64_t)v * 1000000ull;
		else if (!strcmp(argv[i], "--rounds") && v <= 100)
			rounds = (int)v;
		else
			return usage();
	}
	rtaccel_lock_memory(); /* where it cannot starve later thread stacks */
	int r;
	uint64_t duration_ns = (uint64_t)duration_ms * 1000000ull;
	if (!strcmp(scenario, "reader-starvation"))
		r = starvation(1, duration_ns);
	else if (!strcmp(scenario, "writer-starvation"))
		r = starvation(0, duration_ns);
	else if (!strcmp(scenario, "mutex-inversion"))
		r = inversion(0);
	else if (!strcmp(scenario, "rwlock-inversion"))
		r = inversion(1);
	else
		return usage();
	if (r != 0)
		return r;
	rtaccel_sort_u64(samples, (size_t)nsamples);
	uint64_t sum = 0;
	for (int i = 0; i < nsamples; i++)
		sum += samples[i];
	const char *mode = getenv("RTACCEL_SHIM");
	printf("{\"scenario\": \"%s\", \"mode\": \"%s\", \"samples\": %d, \"max_wait_us\": %.1f, "
	       "\"p50_wait_us\": %.1f, \"mean_wait_us\": %.1f}\n",
	       scenario, mode && *mode ? mode : "default", nsamples,
	       nsamples ? (double)samples[nsamples - 1] / 1000.0 : 0.0,
	       (double)rtaccel_percentile_sorted_u64(samples, (size_t)nsamples, 0.5) / 1000.0,
	       nsamples ? (double)sum / nsamples / 1000.0 : 0.0);
	return 0;
}
