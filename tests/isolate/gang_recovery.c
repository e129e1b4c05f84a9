/* A member killed inside a job does not stall the others: a gang waiting
 * behind it, and a gang parked under it, get the lock soon after the kill,
 * and the removal is reported. Blocked threads look for dead members every
 * 20 ms (docs/isolate.md, where the measured times are). A member is
 * killed only once the lock shows the other gang blocked behind it or parked
 * under it, so the recovery is what lets it go on. The test allows two
 * seconds, a hundred times the poll, so that a loaded host cannot fail it;
 * without recovery the lock would never come. */
#define RECOVERED_WITHIN_NS (2000ull * 1000 * 1000)
#include "rtaccel/isolate.h"
#include "test_util.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/wait.h>

struct shared {
	_Atomic int in_job;
};

static struct shared *sh;
static rtaccel_gang_lock_t *lock;

/* A child process that joins GANG at PRIO, enters a job and spins there. */
static pid_t spawn_holder(const char *gang, int prio)
{
	atomic_store(&sh->in_job, 0);
	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK_EQ(rtaccel_gang_join(lock, gang, prio, 0), 0);
		CHECK_EQ(rtaccel_gang_job_begin(), 0);
		atomic_store(&sh->in_job, 1);
		for (;;)
			;
	}
	while (!atomic_load(&sh->in_job))
		sleep_ns(1000 * 1000);
	return pid;
}

static uint64_t kill_at;

/* Kills PID once the lock shows a thread blocked behind it (WAITING) or
 * parked under it: the dead member is found by the recovery, never by a
 * job_begin that came late. */
struct kill_plan {
	pid_t pid;
	bool parked; /* wait for a parked thread, else for a waiting one */
};

static void *killer(void *arg)
{
	const struct kill_plan *plan = arg;
	bool seen = false;
	for (int i = 0; i < 30000 && !seen; i++) {
		struct rtaccel_gang_status st;
		CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
		seen = atomic_load(&sh->in_job) && (plan->parked ? st.parked : st.waiting) >= 1;
		if (!seen)
			sleep_ns(1000 * 1000);
	}
	CHECK(seen);
	kill_at = now_ns(CLOCK_MONOTONIC);
	kill(plan->pid, SIGKILL);
	return NULL;
}

static uint64_t begin_after_kill_of(pid_t pid)
{
	pthread_t t;
	struct kill_plan plan = {pid, false};
	CHECK_EQ(pthread_create(&t, NULL, killer, &plan), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	uint64_t granted = now_ns(CLOCK_MONOTONIC);
	CHECK_EQ(pthread_join(t, NULL), 0);
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFSIGNALED(status));
	CHECK(granted > kill_at);
	return granted - kill_at;
}

int main(void)
{
	watchdog(60);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED);
	CHECK_EQ(rtaccel_gang_lock_create_private(&lock), 0);
	CHECK_EQ(rtaccel_gang_join(lock, "survivor", 10, 0), 0);

	/* 1. Waiting behind a higher gang whose only thread dies. */
	pid_t holder = spawn_holder("doomed", 40);
	uint64_t waited = begin_after_kill_of(holder);
	printf("waiting gang got the lock %.1f ms after its holder was killed\n", (double)waited / 1e6);
	CHECK(waited < RECOVERED_WITHIN_NS);
	CHECK_EQ(rtaccel_gang_job_end(), 0);

	/* 2. Parked under a higher gang that dies: this thread is in a job
	 * when the higher one arrives, so it parks in the signal handler and
	 * must resume on its own once the dead member is found. */
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	atomic_store(&sh->in_job, 0);
	kill_at = 0;
	holder = test_fork();
	CHECK(holder >= 0);
	if (holder == 0) {
		CHECK_EQ(rtaccel_gang_join(lock, "doomed-too", 40, 0), 0);
		CHECK_EQ(rtaccel_gang_job_begin(), 0);
		atomic_store(&sh->in_job, 1);
		for (;;)
			;
	}
	pthread_t t;
	struct kill_plan plan = {holder, true};
	CHECK_EQ(pthread_create(&t, NULL, killer, &plan), 0);
	struct rtaccel_gang_thread_stats ts;
	do
		CHECK_EQ(rtaccel_gang_self_stats(&ts), 0);
	while (ts.parks == 0); /* parked inside this loop, then back */
	CHECK_EQ(pthread_join(t, NULL), 0);
	int status;
	CHECK_EQ(waitpid(holder, &status, 0), holder);
	CHECK(ts.last_park_end_ns > kill_at);
	waited = ts.last_park_end_ns - kill_at;
	printf("parked gang resumed %.1f ms after the gang over it was killed\n", (double)waited / 1e6);
	CHECK(waited < RECOVERED_WITHIN_NS);
	CHECK_EQ(rtaccel_gang_job_end(), 0);

	struct rtaccel_gang_status st;
	CHECK_EQ(rtaccel_gang_lock_status(lock, &st), 0);
	CHECK_EQ(st.recoveries, 2);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	printf("killed members recovered: ok\n");
	return T_PASS;
}
