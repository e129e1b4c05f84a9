/* Preemption across gangs and processes: a low gang of two threads (another
 * process) is in a job, spinning; a mid gang's job stops both of them; a
 * high gang's job stops the mid one; the lock then goes back down in order,
 * and each thread resumes where it stopped. A gang that arrives below the
 * running one waits blocked, using no CPU. Progress is read from stamps that
 * every spinning thread writes to shared memory. */
#include "rtaccel/isolate.h"
#include "test_util.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

struct shared {
	_Atomic uint64_t stamp[4]; /* 0, 1: low threads; 2: mid; 3: the waiter */
	_Atomic int low_in_job;
	_Atomic int stop_low;
	_Atomic int stop_mid;
};

static struct shared *sh;
static rtaccel_gang_lock_t *lock;

static void *low_thread(void *arg)
{
	int i = (int)(intptr_t)arg;
	CHECK_EQ(rtaccel_gang_join(lock, "low", 10, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	atomic_fetch_add(&sh->low_in_job, 1);
	while (!atomic_load(&sh->stop_low))
		atomic_store(&sh->stamp[i], now_ns(CLOCK_MONOTONIC));
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	struct rtaccel_gang_thread_stats ts;
	CHECK_EQ(rtaccel_gang_self_stats(&ts), 0);
	CHECK_EQ(ts.parks, 1); /* by mid; high found it parked already */
	CHECK_EQ(rtaccel_gang_leave(), 0);
	return NULL;
}

/* True if stamp i moves within 200 ms. */
static int advances(int i)
{
	uint64_t before = atomic_load(&sh->stamp[i]);
	for (int n = 0; n < 200; n++) {
		sleep_ns(1000 * 1000);
		if (atomic_load(&sh->stamp[i]) != before)
			return 1;
	}
	return 0;
}

/* True if stamp i stays still for 50 ms. */
static int still(int i)
{
	uint64_t before = atomic_load(&sh->stamp[i]);
	sleep_ns(50 * 1000 * 1000);
	return atomic_load(&sh->stamp[i]) == before;
}

static void *mid_thread(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_gang_join(lock, "mid", 20, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	const uint64_t granted = now_ns(CLOCK_MONOTONIC);
	/* Both low threads had stopped before the mid gang was let in. */
	CHECK(atomic_load(&sh->stamp[0]) < granted && atomic_load(&sh->stamp[1]) < granted);
	while (!atomic_load(&sh->stop_mid))
		atomic_store(&sh->stamp[2], now_ns(CLOCK_MONOTONIC));
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	return NULL;
}

static void *waiter_thread(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_gang_join(lock, "lowest", 5, 0), 0);
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	atomic_store(&sh->stamp[3], now_ns(CLOCK_MONOTONIC));
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	uint64_t cpu = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000ull +
		       (uint64_t)(c1.tv_nsec - c0.tv_nsec);
	/* It waited through the whole test (hundreds of ms) blocked. */
	if (cpu > 20 * 1000 * 1000) {
		fprintf(stderr, "the waiting gang used %llu us of CPU\n",
			(unsigned long long)(cpu / 1000));
		exit(T_FAIL);
	}
	CHECK_EQ(rtaccel_gang_leave(), 0);
	return NULL;
}

int main(void)
{
	watchdog(60);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	CHECK_EQ(rtaccel_gang_lock_create_private(&lock), 0);

	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		pthread_t t[2];
		for (intptr_t i = 0; i < 2; i++)
			CHECK_EQ(pthread_create(&t[i], NULL, low_thread, (void *)i), 0);
		for (int i = 0; i < 2; i++)
			CHECK_EQ(pthread_join(t[i], NULL), 0);
		_exit(0);
	}
	while (atomic_load(&sh->low_in_job) < 2)
		sleep_ns(1000 * 1000);
	CHECK(advances(0) && advances(1));

	pthread_t mid, waiter;
	CHECK_EQ(pthread_create(&mid, NULL, mid_thread, NULL), 0);
	CHECK(advances(2));
	CHECK(still(0) && still(1));
	struct rtaccel_gang_status st;
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.running_priority, 20);
	CHECK_EQ(st.parked, 2);

	/* A lower gang arriving now waits. */
	CHECK_EQ(pthread_create(&waiter, NULL, waiter_thread, NULL), 0);

	/* The high gang: this thread. */
	CHECK_EQ(rtaccel_gang_join(lock, "high", 30, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	const uint64_t high_granted = now_ns(CLOCK_MONOTONIC);
	CHECK(atomic_load(&sh->stamp[2]) < high_granted);
	CHECK(still(0) && still(1) && still(2));
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.running_priority, 30);
	CHECK_EQ(st.parked, 3);
	CHECK_EQ(st.waiting, 1);
	CHECK_EQ(rtaccel_gang_job_end(), 0);

	/* Down one level: mid resumes, low stays stopped. */
	CHECK(advances(2));
	CHECK(still(0) && still(1));
	atomic_store(&sh->stop_mid, 1);
	CHECK_EQ(pthread_join(mid, NULL), 0);

	/* Then low; the waiter (priority 5) only after low's job. */
	CHECK(advances(0) && advances(1));
	CHECK_EQ(atomic_load(&sh->stamp[3]), 0);
	atomic_store(&sh->stop_low, 1);
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(pthread_join(waiter, NULL), 0);
	CHECK(atomic_load(&sh->stamp[3]) > 0);

	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.preemptions, 2);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	printf("preemption order low < mid < high, resumption high > mid > low: ok\n");
	return T_PASS;
}
