#include "core/thread.h"

#include <pthread.h>
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
