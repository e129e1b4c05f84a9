/* The calling thread's kernel id, read once per thread (core, internal; C).
 * The lock layer marks owners with it and the shim's tracer names threads
 * with it; after fork the child's threads read theirs anew. */
#ifndef RTACCEL_CORE_THREAD_H
#define RTACCEL_CORE_THREAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One system call in a thread's life (its first call), none after. */
uint32_t rtaccel_self_tid(void);

#ifdef __cplusplus
}
#endif

#endif /* RTACCEL_CORE_THREAD_H */
