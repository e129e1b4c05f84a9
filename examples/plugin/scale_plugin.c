/*
 * An rtaccel service plugin: `scale` multiplies a vector by a factor.
 *
 *   request  {uint32_t n; float factor; float x[n]}  -> float y[n]
 *
 * Build it as a shared object and load it into the server:
 *   cc -shared -fPIC -I include -o scale_plugin.so examples/plugin/scale_plugin.c
 *   rtaccel-server --plugin ./scale_plugin.so
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "rtaccel/service.h"

struct scale_request {
	uint32_t n;
	float factor;
};

static int run_scale(struct rtaccel_service_call *call)
{
	struct scale_request r;
	/* The client may change its request while we run: read the header once. */
	if (call->request_len < sizeof(r))
		return -EINVAL;
	memcpy(&r, call->request, sizeof(r));
	const uint64_t n = r.n;
	if (sizeof(r) + n * sizeof(float) > call->request_len || n * sizeof(float) > call->response_cap)
		return -EINVAL;
	const float *x = (const float *)((const char *)call->request + sizeof(r));
	float *y = call->response;
	for (uint64_t i = 0; i < n; i++)
		y[i] = r.factor * x[i];
	call->response_len = n * sizeof(float);
	return 0;
}

static const struct rtaccel_service services[] = {
	{RTACCEL_SERVICE_ABI, "scale", run_scale},
};

__attribute__((visibility("default"))) const struct rtaccel_service *
rtaccel_plugin_services(uint32_t *count)
{
	*count = sizeof(services) / sizeof(services[0]);
	return services;
}
