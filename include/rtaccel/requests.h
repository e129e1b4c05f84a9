/*
 * rtaccel/requests.h - requests of the built-in services (busy, vecadd,
 * matmul, reduction, histogram): how a client encodes one and how a backend
 * checks and reads one. Header-only C, so that clients in C, the backends in
 * C++ and the CUDA backend (nvcc) share one definition.
 *
 * A request is a header (rtaccel/accel.h: rtaccel_busy_request,
 * rtaccel_vector_request, rtaccel_histogram_request) followed by its float
 * inputs. Decoding checks every size against the buffers a backend was given,
 * so that a hostile client cannot make it read or write outside them.
 */
#ifndef RTACCEL_REQUESTS_H
#define RTACCEL_REQUESTS_H

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rtaccel/accel.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rtaccel_builtin {
	RTACCEL_BUSY,
	RTACCEL_VECADD,
	RTACCEL_MATMUL,
	RTACCEL_REDUCTION,
	RTACCEL_HISTOGRAM,
	RTACCEL_BUILTINS, /* how many there are */
};

#define RTACCEL_BUSY_MAX_NS (3600ull * 1000000000ull) /* one hour */
#define RTACCEL_MATMUL_MAX_N 8192u                    /* matrix side */

/* The built-in service of that name, or -1. */
static inline int rtaccel_builtin_of(const char *name)
{
	static const char *const names[RTACCEL_BUILTINS] = {"busy", "vecadd", "matmul", "reduction",
							    "histogram"};
	for (int i = 0; i < RTACCEL_BUILTINS; i++)
		if (name && strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

/* A request that passed rtaccel_request_decode(). */
struct rtaccel_request_view {
	int service;         /* enum rtaccel_builtin */
	uint64_t n;          /* busy: ns; matmul: matrix side; else elements */
	uint32_t bins;       /* histogram */
	float lo, hi;        /* histogram: the binned range [lo, hi), finite */
	const float *a, *b;  /* inputs: a for all but busy, b for vecadd and matmul */
	size_t input_bytes;  /* bytes of float inputs after the header */
	size_t response_len; /* bytes the result takes */
};

/* Header size of a request of the service (0 for an unknown one). */
static inline size_t rtaccel_request_header_size(int service)
{
	switch (service) {
	case RTACCEL_BUSY: return sizeof(struct rtaccel_busy_request);
	case RTACCEL_VECADD:
	case RTACCEL_MATMUL:
	case RTACCEL_REDUCTION: return sizeof(struct rtaccel_vector_request);
	case RTACCEL_HISTOGRAM: return sizeof(struct rtaccel_histogram_request);
	default: return 0;
	}
}

/* Floats of input and bytes of response of problem size n (bins: histogram).
 * -EINVAL past a service's limits. */
static inline int rtaccel_request_sizes(int service, uint64_t n, uint32_t bins, uint64_t *inputs,
					uint64_t *response)
{
	switch (service) {
	case RTACCEL_BUSY:
		if (n > RTACCEL_BUSY_MAX_NS)
			return -EINVAL;
		*inputs = 0, *response = 0;
		return 0;
	case RTACCEL_VECADD:
		if (n > UINT32_MAX)
			return -EINVAL;
		*inputs = 2 * n, *response = n * sizeof(float);
		return 0;
	case RTACCEL_MATMUL:
		if (n > RTACCEL_MATMUL_MAX_N)
			return -EINVAL;
		*inputs = 2 * n * n, *response = n * n * sizeof(float);
		return 0;
	case RTACCEL_REDUCTION:
		if (n > UINT32_MAX)
			return -EINVAL;
		*inputs = n, *response = sizeof(double);
		return 0;
	case RTACCEL_HISTOGRAM:
		if (n > UINT32_MAX || bins == 0)
			return -EINVAL;
		*inputs = n, *response = (uint64_t)bins * sizeof(uint32_t);
		return 0;
	default:
		return -EINVAL;
	}
}

/* A histogram's range: lo below hi, both finite. An infinite end would make
 * the bin of every finite value undefined (its width infinite). */
static inline int rtaccel_histogram_range_valid(float lo, float hi)
{
	return lo < hi && isfinite(lo) && isfinite(hi);
}

/* Checks a request of the service against its buffers: 0 with *out filled,
 * or -EINVAL (too short, past the limits, inputs or result not fitting, a
 * histogram's range not valid). */
static inline int rtaccel_request_decode(int service, const void *request, size_t request_len,
					 size_t response_cap, struct rtaccel_request_view *out)
{
	const size_t header = rtaccel_request_header_size(service);
	if (header == 0 || request_len < header || !request)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->service = service;
	if (service == RTACCEL_BUSY) {
		struct rtaccel_busy_request r;
		memcpy(&r, request, sizeof(r));
		out->n = r.ns;
	} else if (service == RTACCEL_HISTOGRAM) {
		struct rtaccel_histogram_request r;
		memcpy(&r, request, sizeof(r));
		if (!rtaccel_histogram_range_valid(r.lo, r.hi))
			return -EINVAL;
		out->n = r.n, out->bins = r.bins, out->lo = r.lo, out->hi = r.hi;
	} else {
		struct rtaccel_vector_request r;
		memcpy(&r, request, sizeof(r));
		out->n = r.n;
	}
	uint64_t inputs, response;
	if (rtaccel_request_sizes(service, out->n, out->bins, &inputs, &response) < 0)
		return -EINVAL;
	if (inputs * sizeof(float) > request_len - header || response > response_cap)
		return -EINVAL;
	out->input_bytes = (size_t)(inputs * sizeof(float));
	out->response_len = (size_t)response;
	if (inputs) {
		out->a = (const float *)((const char *)request + header);
		if (service == RTACCEL_VECADD || service == RTACCEL_MATMUL)
			out->b = out->a + inputs / 2;
	}
	return 0;
}

/* Writes the header of a request of problem size n (histogram: bins over
 * [lo, hi)) at buf, which holds cap bytes; the caller fills the inputs that
 * follow it. Returns the request's whole length, or -EINVAL. */
static inline long rtaccel_request_encode(int service, uint64_t n, uint32_t bins, float lo, float hi,
					  void *buf, size_t cap)
{
	uint64_t inputs, response;
	const size_t header = rtaccel_request_header_size(service);
	if (header == 0 || rtaccel_request_sizes(service, n, bins, &inputs, &response) < 0)
		return -EINVAL;
	if (service == RTACCEL_HISTOGRAM && !rtaccel_histogram_range_valid(lo, hi))
		return -EINVAL;
	const uint64_t len = header + inputs * sizeof(float);
	if (len > cap || !buf)
		return -EINVAL;
	if (service == RTACCEL_BUSY) {
		struct rtaccel_busy_request r = {n};
		memcpy(buf, &r, sizeof(r));
	} else if (service == RTACCEL_HISTOGRAM) {
		struct rtaccel_histogram_request r = {(uint32_t)n, bins, lo, hi};
		memcpy(buf, &r, sizeof(r));
	} else {
		struct rtaccel_vector_request r = {(uint32_t)n, 0};
		memcpy(buf, &r, sizeof(r));
	}
	return (long)len;
}

#ifdef __cplusplus
}
#endif

#endif /* RTACCEL_REQUESTS_H */
