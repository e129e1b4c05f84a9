/* One gang at a time, under stress: gangs of three priorities (one of them a
 * virtual gang of two gangs) in two processes start and end jobs at random
 * for a few seconds. Every step of a job checks, from counters in shared
 * memory, that no thread of another priority is executing a step. A step is
 * a preempt_disable section, so a thread parks between steps, never inside
 * one: a step that overlaps another priority's step is a violation. */
#include "rtaccel/isolate.h"
#include "test_util.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define SECONDS 3
#define PRIOS 3

struct shared {
	_Atomic int executing[PRIOS];
	_Atomic long violations;
	_Atomic long overlaps_virtual; /* steps of the two gangs of priority 20 at once */
	_Atomic long jobs[PRIOS];
	_Atomic int stop;
};

static struct shared *sh;
static rtaccel_gang_lock_t *lock;

struct role {
	const char *gang;
	int prio_index; /* 0: 10, 1: 20, 2: 30 */
	unsigned seed;
};

static const int prio_of[PRIOS] = {10, 20, 30};

static void *member(void *arg)
{
	struct role *r = arg;
	CHECK_EQ(rtaccel_gang_join(lock, r->gang, prio_of[r->prio_index], 0), 0);
	unsigned seed = r->seed;
	while (!atomic_load(&sh->stop)) {
		sleep_ns((uint64_t)(rand_r(&seed) % 2000) * 1000);
		CHECK_EQ(rtaccel_gang_job_begin(), 0);
		int steps = 20 + rand_r(&seed) % 200;
		for (int s = 0; s < steps; s++) {
			rtaccel_gang_preempt_disable();
			int mine = atomic_fetch_add(&sh->executing[r->prio_index], 1);
			for (int p = 0; p < PRIOS; p++)
				if (p != r->prio_index && atomic_load(&sh->executing[p]))
					atomic_fetch_add(&sh->violations, 1);
			if (r->prio_index == 1 && mine > 0)
				atomic_fetch_add(&sh->overlaps_virtual, 1);
			for (volatile int spin = 0; spin < 2000; spin++)
				;
			atomic_fetch_sub(&sh->executing[r->prio_index], 1);
			rtaccel_gang_preempt_enable();
		}
		atomic_fetch_add(&sh->jobs[r->prio_index], 1);
		CHECK_EQ(rtaccel_gang_job_end(), 0);
	}
	CHECK_EQ(rtaccel_gang_leave(), 0);
	return NULL;
}

static void run_members(struct role *roles, int n)
{
	pthread_t t[4];
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, member, &roles[i]), 0);
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
}

int main(void)
{
	watchdog(60);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	CHECK_EQ(rtaccel_gang_lock_create_private(&lock), 0);

	struct role a[] = {{"low", 0, 1}, {"low", 0, 2}, {"mid", 1, 3}, {"high", 2, 4}};
	struct role b[] = {{"high", 2, 5}, {"mid-b", 1, 6}, {"low", 0, 7}};
	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		run_members(b, 3);
		_exit(0);
	}
	uint64_t until = now_ns(CLOCK_MONOTONIC) + SECONDS * 1000000000ull;
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, member, &a[i]), 0);
	while (now_ns(CLOCK_MONOTONIC) < until)
		sleep_ns(10 * 1000 * 1000);
	atomic_store(&sh->stop, 1);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	struct rtaccel_gang_status st;
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	printf("jobs: low %ld, mid %ld, high %ld; preemptions %llu; steps of the virtual gang "
	       "together %ld; violations %ld\n",
	       atomic_load(&sh->jobs[0]), atomic_load(&sh->jobs[1]), atomic_load(&sh->jobs[2]),
	       (unsigned long long)st.preemptions, atomic_load(&sh->overlaps_virtual),
	       atomic_load(&sh->violations));
	CHECK_EQ(atomic_load(&sh->violations), 0);
	for (int p = 0; p < PRIOS; p++)
		CHECK(atomic_load(&sh->jobs[p]) > 10);
	CHECK(st.preemptions > 0);
	CHECK_EQ(st.members, 0);
	CHECK_EQ(st.running_priority, 0);
	rtaccel_gang_lock_close(lock);
	return T_PASS;
}
