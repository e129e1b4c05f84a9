// Cost of a lock/unlock pair: glibc's mutex (default and priority inheritance)
// and rwlock against rtaccel's phase-fair rwlock (with and without boosting)
// and FIFO mutex; uncontended (1 thread) and contended (2 threads, one lock).
// The ECRTS'24 paper's Fig. 12 and 13 measure the same operations.
//
// Run through bench/lock_bench.py, which also runs the glibc cases under
// `rtaccel shim --trace` to price the tracer, and prints the ratios.
#include <benchmark/benchmark.h>
#include <pthread.h>

#include "rtaccel/lock.h"

namespace {

pthread_mutex_t glibc_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t glibc_pi_mutex;
pthread_rwlock_t glibc_rwlock = PTHREAD_RWLOCK_INITIALIZER;
rtaccel_rwlock_t pf_lock;
rtaccel_rwlock_t pf_boost_lock;
rtaccel_mutex_t fifo_mutex;

struct Setup {
	Setup()
	{
		rtaccel_pi_mutex_init(&glibc_pi_mutex, PTHREAD_MUTEX_NORMAL, false);
		rtaccel_rwlock_init(&pf_lock, nullptr);
		rtaccel_lock_attr boost = {RTACCEL_LOCK_BOOST, 0};
		rtaccel_rwlock_init(&pf_boost_lock, &boost);
		rtaccel_mutex_init(&fifo_mutex, nullptr);
	}
} setup;

void GlibcMutex(benchmark::State &state)
{
	for (auto _ : state) {
		pthread_mutex_lock(&glibc_mutex);
		pthread_mutex_unlock(&glibc_mutex);
	}
}

void GlibcPiMutex(benchmark::State &state)
{
	for (auto _ : state) {
		pthread_mutex_lock(&glibc_pi_mutex);
		pthread_mutex_unlock(&glibc_pi_mutex);
	}
}

void GlibcRwlockRead(benchmark::State &state)
{
	for (auto _ : state) {
		pthread_rwlock_rdlock(&glibc_rwlock);
		pthread_rwlock_unlock(&glibc_rwlock);
	}
}

void GlibcRwlockWrite(benchmark::State &state)
{
	for (auto _ : state) {
		pthread_rwlock_wrlock(&glibc_rwlock);
		pthread_rwlock_unlock(&glibc_rwlock);
	}
}

void PhaseFairRead(benchmark::State &state)
{
	rtaccel_rwlock_t *l = state.range(0) ? &pf_boost_lock : &pf_lock;
	for (auto _ : state) {
		rtaccel_rwlock_rdlock(l);
		rtaccel_rwlock_rdunlock(l);
	}
}

void PhaseFairWrite(benchmark::State &state)
{
	rtaccel_rwlock_t *l = state.range(0) ? &pf_boost_lock : &pf_lock;
	for (auto _ : state) {
		rtaccel_rwlock_wrlock(l);
		rtaccel_rwlock_wrunlock(l);
	}
}

void FifoMutex(benchmark::State &state)
{
	for (auto _ : state) {
		rtaccel_mutex_lock(&fifo_mutex);
		rtaccel_mutex_unlock(&fifo_mutex);
	}
}

}  // namespace

BENCHMARK(GlibcMutex)->Threads(1)->Threads(2);
BENCHMARK(GlibcPiMutex)->Threads(1)->Threads(2);
BENCHMARK(GlibcRwlockRead)->Threads(1)->Threads(2);
BENCHMARK(GlibcRwlockWrite)->Threads(1)->Threads(2);
BENCHMARK(PhaseFairRead)->ArgName("boost")->Arg(0)->Arg(1)->Threads(1)->Threads(2);
BENCHMARK(PhaseFairWrite)->ArgName("boost")->Arg(0)->Arg(1)->Threads(1)->Threads(2);
BENCHMARK(FifoMutex)->Threads(1)->Threads(2);

BENCHMARK_MAIN();
