/* Mutual exclusion under load: hundreds of threads, every kind of call
 * (blocking, try, timed with short deadlines), with and without boosting, and
 * between processes through shared memory. A writer bumps a plain counter
 * inside the lock, so a lost update proves two writers overlapped. */
#include "rtaccel/lock.h"
#include "test_util.h"

#include <sys/mman.h>
#include <sys/wait.h>

struct shared {
	rtaccel_rwlock_t lock;
	int readers_inside;
	int writers_inside;
	uint64_t plain_counter; /* only touched under the write lock */
	uint64_t writes;        /* atomic: successful write sections */
	uint64_t reads;
	int violations;
	int stop;
};

static struct shared *S;

static void read_section(void)
{
	__atomic_fetch_add(&S->readers_inside, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&S->writers_inside, __ATOMIC_SEQ_CST) != 0)
		__atomic_fetch_add(&S->violations, 1, __ATOMIC_SEQ_CST);
	for (volatile int i = 0; i < 50; i++)
		;
	__atomic_fetch_sub(&S->readers_inside, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&S->reads, 1, __ATOMIC_RELAXED);
}

static void write_section(void)
{
	if (__atomic_fetch_add(&S->writers_inside, 1, __ATOMIC_SEQ_CST) != 0 ||
	    __atomic_load_n(&S->readers_inside, __ATOMIC_SEQ_CST) != 0)
		__atomic_fetch_add(&S->violations, 1, __ATOMIC_SEQ_CST);
	uint64_t v = S->plain_counter;
	for (volatile int i = 0; i < 50; i++)
		;
	S->plain_counter = v + 1;
	__atomic_fetch_sub(&S->writers_inside, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&S->writes, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
	while (!__atomic_load_n(&S->stop, __ATOMIC_RELAXED)) {
		seed = seed * 1103515245u + 12345u;
		unsigned op = (seed >> 16) % 8;
		struct timespec dl = deadline_in(CLOCK_MONOTONIC, (seed >> 8) % 200000);
		int r;
		switch (op) {
		case 0: case 1: case 2:
			CHECK_EQ(rtaccel_rwlock_rdlock(&S->lock), 0);
			read_section();
			CHECK_EQ(rtaccel_rwlock_unlock(&S->lock), 0);
			break;
		case 3:
			if (rtaccel_rwlock_tryrdlock(&S->lock) == 0) {
				read_section();
				CHECK_EQ(rtaccel_rwlock_rdunlock(&S->lock), 0);
			}
			break;
		case 4:
			r = rtaccel_rwlock_clockrdlock(&S->lock, CLOCK_MONOTONIC, &dl);
			CHECK(r == 0 || r == -ETIMEDOUT);
			if (r == 0) {
				read_section();
				CHECK_EQ(rtaccel_rwlock_unlock(&S->lock), 0);
			}
			break;
		case 5:
			CHECK_EQ(rtaccel_rwlock_wrlock(&S->lock), 0);
			write_section();
			CHECK_EQ(rtaccel_rwlock_unlock(&S->lock), 0);
			break;
		case 6:
			if (rtaccel_rwlock_trywrlock(&S->lock) == 0) {
				write_section();
				CHECK_EQ(rtaccel_rwlock_wrunlock(&S->lock), 0);
			}
			break;
		default:
			r = rtaccel_rwlock_clockwrlock(&S->lock, CLOCK_MONOTONIC, &dl);
			CHECK(r == 0 || r == -ETIMEDOUT);
			if (r == 0) {
				write_section();
				CHECK_EQ(rtaccel_rwlock_unlock(&S->lock), 0);
			}
			break;
		}
	}
	return NULL;
}

/* The workers run DURATION_NS, and on until both reads and writes have
 * happened (a loaded host may not have run them all yet). */
static void stop_after(uint64_t duration_ns)
{
	sleep_ns(duration_ns);
	while (!__atomic_load_n(&S->reads, __ATOMIC_RELAXED) ||
	       !__atomic_load_n(&S->writes, __ATOMIC_RELAXED))
		sleep_ns(10 * 1000000ull);
	__atomic_store_n(&S->stop, 1, __ATOMIC_RELAXED);
}

static void run_threads(int n, uint64_t duration_ns, int salt)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	CHECK(t != NULL);
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1 + salt)), 0);
	stop_after(duration_ns);
	for (int i = 0; i < n; i++)
		CHECK_EQ(pthread_join(t[i], NULL), 0);
	free(t);
}

static void check_and_reset(const char *what)
{
	CHECK_EQ(S->violations, 0);
	CHECK_EQ(S->plain_counter, S->writes);
	CHECK(S->writes > 0 && S->reads > 0);
	CHECK_EQ(rtaccel_rwlock_destroy(&S->lock), 0);
	printf("%-28s %8llu reads %8llu writes, no overlap\n", what,
	       (unsigned long long)S->reads, (unsigned long long)S->writes);
	memset(S, 0, sizeof(*S));
}

int main(void)
{
	watchdog(100);
	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(S != MAP_FAILED);

	struct rtaccel_lock_attr plain = {0, 0}, boost = {RTACCEL_LOCK_BOOST, 0};
	CHECK_EQ(rtaccel_rwlock_init(&S->lock, &plain), 0);
	run_threads(16, 700 * 1000000ull, 0);
	check_and_reset("16 threads");

	CHECK_EQ(rtaccel_rwlock_init(&S->lock, &plain), 0);
	run_threads(256, 700 * 1000000ull, 100);
	check_and_reset("256 threads");

	/* Boosting on: SCHED_OTHER threads get raised and restored all the time.
	 * Without the privilege the raises fail and the lock still works. */
	CHECK_EQ(rtaccel_rwlock_init(&S->lock, &boost), 0);
	run_threads(24, 700 * 1000000ull, 500);
	check_and_reset("24 threads, boosting");

	struct rtaccel_lock_attr shared = {RTACCEL_LOCK_PSHARED | RTACCEL_LOCK_BOOST, 0};
	CHECK_EQ(rtaccel_rwlock_init(&S->lock, &shared), 0);
	pid_t kids[4];
	for (int k = 0; k < 4; k++) {
		kids[k] = test_fork();
		CHECK(kids[k] >= 0);
		if (kids[k] == 0) {
			pthread_t t[4];
			for (int i = 0; i < 4; i++)
				CHECK_EQ(pthread_create(&t[i], NULL, worker,
							(void *)(uintptr_t)(1000 + k * 10 + i)), 0);
			for (int i = 0; i < 4; i++)
				CHECK_EQ(pthread_join(t[i], NULL), 0);
			_exit(0);
		}
	}
	stop_after(700 * 1000000ull);
	for (int k = 0; k < 4; k++) {
		int status;
		CHECK_EQ(waitpid(kids[k], &status, 0), kids[k]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	check_and_reset("4 processes x 4 threads");
	return T_PASS;
}
