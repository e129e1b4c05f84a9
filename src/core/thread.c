#include "core/thread.h"

#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* initial-exec: no allocation and no lock on first use, which the shim needs
 * (it runs inside malloc's and the loader's callers). */
static __thread __attribute__((tls_model("initial-exec"))) uint32_t self_tid;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void forget_tid_in_child(void) { self_tid = 0; }
static void register_atfork(void) { pthread_atfork(NULL, NULL, forget_tid_in_child); }

uint32_t rtaccel_self_tid(void)
{
	if (__builtin_expect(self_tid == 0, 0)) {
		pthread_once(&atfork_once, register_atfork);
		self_tid = (uint32_t)syscall(SYS_gettid);
	}
	return self_tid;
}

int rtaccel_thread_create(pthread_t *thread, size_t stack, void *(*fn)(void *), void *arg)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	if (stack < (size_t)PTHREAD_STACK_MIN)
		stack = (size_t)PTHREAD_STACK_MIN;
	stack = (stack + page - 1) & ~(page - 1);
	pthread_attr_t attr;
	int err = pthread_attr_init(&attr);
	if (err)
		return err;
	err = pthread_attr_setstacksize(&attr, stack);
	if (!err)
		err = pthread_create(thread, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return err;
}

/* What rtaccel_stack_mark wrote: [stack_low, marked_high) of the pattern,
 * and the stack's size. Per thread, initial-exec as self_tid is. */
static __thread __attribute__((tls_model("initial-exec"))) unsigned char *stack_low, *marked_high;
static __thread __attribute__((tls_model("initial-exec"))) size_t stack_size;

enum { STACK_PATTERN = 0xa5, STACK_KEEP = 512 /* below the caller's frame: memset's own */ };

void rtaccel_stack_mark(void)
{
	pthread_attr_t attr;
	void *low;
	size_t size;
	/* The main thread's stack grows on demand up to RLIMIT_STACK: marked, all
	 * of it would be made resident. */
	if ((pid_t)rtaccel_self_tid() == getpid() || pthread_getattr_np(pthread_self(), &attr) != 0)
		return;
	const int err = pthread_attr_getstack(&attr, &low, &size);
	pthread_attr_destroy(&attr);
	unsigned char *const here = __builtin_frame_address(0);
	if (err || here < (unsigned char *)low + STACK_KEEP || here > (unsigned char *)low + size)
		return;
	stack_low = low;
	stack_size = size;
	marked_high = here - STACK_KEEP;
	memset(stack_low, STACK_PATTERN, (size_t)(marked_high - stack_low));
}

size_t rtaccel_stack_used(size_t *size)
{
	if (size)
		*size = stack_size;
	if (!stack_low)
		return 0;
	const unsigned char *p = stack_low;
	while (p < marked_high && *p == STACK_PATTERN)
		++p;
	return stack_size - (size_t)(p - stack_low);
}
