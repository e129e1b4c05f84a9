/*
 * rtaccel/service.h - the ABI of accelerator services ("kernels") and of
 * plugins that add services to rtaccel-server's cpu backend.
 *
 * A plugin is a shared object exporting
 *
 *   const struct rtaccel_service *rtaccel_plugin_services(uint32_t *count);
 *
 * which returns a static table of `*count` services. The server loads it with
 * `rtaccel-server --plugin FILE.so`; clients name the services at
 * registration like the built-in ones. examples/plugin/ has one.
 *
 * A service runs in the server's worker thread on the device core. Its request
 * lives in a client's shared memory and the client may change it while the
 * service runs (by mistake or on purpose): read every header field once, check
 * it against request_len and response_cap before use, and never trust it again
 * (the built-in services show how). Return 0 or a negative errno; -EINVAL for
 * a malformed request. A service must not block, allocate per call, or keep
 * pointers to the buffers after it returns.
 */
#ifndef RTACCEL_SERVICE_H
#define RTACCEL_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RTACCEL_SERVICE_ABI 1

struct rtaccel_service_call {
	const void *request; /* request_len bytes, 64-byte aligned */
	size_t request_len;
	void *response; /* response_cap bytes, 64-byte aligned */
	size_t response_cap;
	size_t response_len; /* set by the service: bytes written */
};

struct rtaccel_service {
	uint32_t abi; /* RTACCEL_SERVICE_ABI */
	const char *name;
	int (*run)(struct rtaccel_service_call *call);
};

typedef const struct rtaccel_service *(*rtaccel_plugin_services_fn)(uint32_t *count);
#define RTACCEL_PLUGIN_SYMBOL "rtaccel_plugin_services"

#ifdef __cplusplus
}
#endif

#endif
