/* How a preemptor knows that the lower threads have stopped. The park signal
 * stops a thread before its next instruction, so the preemptor waits for
 * one interrupt to the other cores (membarrier), not for every lower thread
 * to be scheduled and park:
 *   - a lower thread that does not run (here: preempted on the preemptor's
 *     core) is not woken to park while the higher job runs;
 *   - one in a preempt_disable section is waited for until it leaves it;
 *   - where membarrier fails, the preemptor waits for every lower thread to
 *     park, as it must.
 * The first and last need SCHED_FIFO and two cores; the last a seccomp
 * filter that makes membarrier fail in the preemptor's thread. */
#include "rtaccel/isolate.h"
#include "test_util.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/prctl.h>

struct shared {
	_Atomic uint64_t stamp;
	_Atomic uint64_t section_end;
	_Atomic uint64_t granted;
	_Atomic int ready;
	_Atomic int in_section;
	_Atomic int release;
	_Atomic int stop;
	_Atomic uint64_t parks;
};

static struct shared sh;
static rtaccel_gang_lock_t *lock;

static void reset(void) { memset(&sh, 0, sizeof(sh)); }

static int pin_to(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static int set_fifo(int prio)
{
	struct sched_param sp = {.sched_priority = prio};
	return pthread_setschedparam(pthread_self(), prio ? SCHED_FIFO : SCHED_OTHER, &sp);
}

/* A lower thread in its job: spins, stamping its progress, until told to
 * stop; then ends the job, says how often it parked, and leaves. */
static void spin_then_leave(void)
{
	while (!atomic_load(&sh.stop))
		atomic_store(&sh.stamp, now_ns(CLOCK_MONOTONIC));
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	struct rtaccel_gang_thread_stats ts;
	CHECK_EQ(rtaccel_gang_self_stats(&ts), 0);
	atomic_store(&sh.parks, ts.parks);
	CHECK_EQ(rtaccel_gang_leave(), 0);
}

/* ---- a thread in a preempt_disable section is waited for ---------------- */

static void *deferring_low(void *arg)
{
	(void)arg;
	CHECK_EQ(rtaccel_gang_join(lock, "low", 10, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	rtaccel_gang_preempt_disable();
	atomic_store(&sh.in_section, 1);
	while (!atomic_load(&sh.release))
		;
	atomic_store(&sh.section_end, now_ns(CLOCK_MONOTONIC));
	rtaccel_gang_preempt_enable();
	spin_then_leave();
	return NULL;
}

static void *high_job(void *arg)
{
	_Atomic pid_t *tid = arg;
	atomic_store(tid, self_tid());
	CHECK_EQ(rtaccel_gang_join(lock, "high", 20, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	atomic_store(&sh.granted, now_ns(CLOCK_MONOTONIC));
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	return NULL;
}

static void a_deferring_thread_is_waited_for(void)
{
	reset();
	pthread_t low, high;
	CHECK_EQ(pthread_create(&low, NULL, deferring_low, NULL), 0);
	while (!atomic_load(&sh.in_section))
		sleep_ns(1000 * 1000);
	_Atomic pid_t high_tid = 0;
	CHECK_EQ(pthread_create(&high, NULL, high_job, &high_tid), 0);
	while (!atomic_load(&high_tid))
		sleep_ns(1000 * 1000);
	until_asleep(atomic_load(&high_tid));
	sleep_ns(50 * 1000 * 1000);
	CHECK_EQ(atomic_load(&sh.granted), 0); /* still waiting for the section */
	atomic_store(&sh.release, 1);
	CHECK_EQ(pthread_join(high, NULL), 0);
	CHECK(atomic_load(&sh.granted) > atomic_load(&sh.section_end));
	atomic_store(&sh.stop, 1);
	CHECK_EQ(pthread_join(low, NULL), 0);
	CHECK_EQ(atomic_load(&sh.parks), 1); /* on leaving the section */
	printf("a lower thread in a preempt_disable section: waited for until it left: ok\n");
}

/* ---- a lower thread off the CPU is not scheduled to park ---------------- */

static void *spinning_low(void *arg)
{
	int cpu = (int)(intptr_t)arg;
	CHECK_EQ(pin_to(cpu), 0);
	CHECK_EQ(set_fifo(10), 0);
	CHECK_EQ(rtaccel_gang_join(lock, "low", 10, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	atomic_store(&sh.ready, 1);
	spin_then_leave();
	return NULL;
}

/* This thread, at SCHED_FIFO 20 on CPU, takes a job over a lower gang that
 * spins at SCHED_FIFO 10 on the same CPU: the lower thread cannot run until
 * the job ends. Returns how often it parked. */
static uint64_t preempt_on_one_cpu(int cpu)
{
	reset();
	pthread_t low;
	CHECK_EQ(pthread_create(&low, NULL, spinning_low, (void *)(intptr_t)cpu), 0);
	while (!atomic_load(&sh.ready))
		sleep_ns(1000 * 1000);
	CHECK_EQ(pin_to(cpu), 0);
	CHECK_EQ(set_fifo(20), 0);
	CHECK_EQ(rtaccel_gang_join(lock, "high", 20, 0), 0);
	CHECK_EQ(rtaccel_gang_job_begin(), 0);
	const uint64_t granted = now_ns(CLOCK_MONOTONIC);
	const uint64_t seen = atomic_load(&sh.stamp);
	CHECK(seen < granted);
	while (now_ns(CLOCK_MONOTONIC) < granted + 20 * 1000 * 1000)
		;
	CHECK_EQ(atomic_load(&sh.stamp), seen); /* stopped throughout */
	CHECK_EQ(rtaccel_gang_job_end(), 0);
	CHECK_EQ(rtaccel_gang_leave(), 0);
	CHECK_EQ(set_fifo(0), 0);
	cpu_set_t all;
	CPU_ZERO(&all);
	for (int i = 0; i < CPU_SETSIZE; i++)
		CPU_SET(i, &all);
	CHECK_EQ(pthread_setaffinity_np(pthread_self(), sizeof(all), &all), 0);
	atomic_store(&sh.stop, 1);
	CHECK_EQ(pthread_join(low, NULL), 0);
	return atomic_load(&sh.parks);
}

/* Makes membarrier fail with ENOSYS in the calling thread (and the threads
 * it creates from now on). */
static int refuse_membarrier(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int main(void)
{
	watchdog(60);
	CHECK_EQ(rtaccel_gang_lock_create_private(&lock), 0);
	a_deferring_thread_is_waited_for();

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return test_skip_part("cores2", "a preemption on one CPU needs another for the test");
	if (!can_use_fifo())
		return test_skip_part("fifo", "a preemption on one CPU not checked: %s",
				      "SCHED_FIFO not permitted");
	const int cpu = sched_getcpu() > 0 ? 0 : 1;
	CHECK_EQ(preempt_on_one_cpu(cpu), 0);
	printf("a lower thread off the CPU: stopped by its pending signal, not woken to park: ok\n");

	if (refuse_membarrier() != 0)
		return test_skip_part("seccomp", "the fallback without membarrier not checked: %s",
				      strerror(errno));
	CHECK_EQ(preempt_on_one_cpu(cpu), 1);
	printf("without membarrier: the lower thread was let run to park, as it must: ok\n");
	return T_PASS;
}
