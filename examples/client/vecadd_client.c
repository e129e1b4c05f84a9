/*
 * Example rtaccel client in plain C: registers one callback of a one-callback
 * chain with rtaccel-server, then adds two vectors on the accelerator and
 * checks the result.
 *
 *   rtaccel-server --socket /tmp/rtaccel.sock &
 *   vecadd_client /tmp/rtaccel.sock [n]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtaccel/accel.h"

int main(int argc, char **argv)
{
	const char *socket_path = argc > 1 ? argv[1] : NULL;
	const unsigned n = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 1024;
	if (n == 0 || n > 1u << 20) {
		fprintf(stderr, "usage: vecadd_client [SOCKET] [n, 1..1048576]\n");
		return 2;
	}

	struct rtaccel_client *client;
	int err = rtaccel_client_connect(socket_path, &client);
	if (err < 0) {
		fprintf(stderr, "cannot connect to rtaccel-server: %s\n", strerror(-err));
		return 1;
	}

	/* The chain as the workload describes it: one 10 ms timer callback with
	 * 100 us of CPU work and one 200 us vecadd segment. */
	static struct rtaccel_registration_desc desc;
	struct rtaccel_chain_desc *chain = &desc.chain;
	snprintf(chain->name, sizeof(chain->name), "example");
	chain->priority = 10;
	chain->critical = 1;
	chain->period_ns = 10000000;
	chain->deadline_ns = 10000000;
	chain->ncallbacks = 1;
	struct rtaccel_callback_desc *cb = &chain->callbacks[0];
	snprintf(cb->name, sizeof(cb->name), "adder");
	snprintf(cb->executor, sizeof(cb->executor), "example-executor");
	cb->executor_core = 0;
	cb->executor_priority = 10;
	cb->cpu_ns = 100000;
	cb->wait = RTACCEL_WAIT_SUSPEND;
	cb->nsegments = 1;
	snprintf(cb->segments[0].accelerator, sizeof(cb->segments[0].accelerator), "acc0");
	snprintf(cb->segments[0].service, sizeof(cb->segments[0].service), "vecadd");
	cb->segments[0].wcet_ns = 200000;
	desc.callback = 0;
	desc.nservices = 1;
	snprintf(desc.services[0].name, sizeof(desc.services[0].name), "vecadd");
	desc.services[0].request_max = (uint32_t)(sizeof(struct rtaccel_vector_request) + 2 * n * sizeof(float));
	desc.services[0].response_max = (uint32_t)(n * sizeof(float));

	struct rtaccel_registration *reg;
	char why[256];
	err = rtaccel_client_register(client, &desc, &reg, why, sizeof(why));
	if (err < 0) {
		fprintf(stderr, "registration refused (%s): %s\n", strerror(-err), why);
		rtaccel_client_close(client);
		return 1;
	}
	struct rtaccel_registration_info info;
	rtaccel_registration_query(reg, &info);
	printf("registered: device %u, bucket %u, priority %d\n", info.device, info.bucket, info.priority);

	/* Zero copy: write the input where the server reads it. */
	int vecadd = rtaccel_service_index(reg, "vecadd");
	struct rtaccel_vector_request *req = rtaccel_request_buffer(reg, vecadd, NULL);
	req->n = n;
	float *a = (float *)(req + 1), *b = a + n;
	for (unsigned i = 0; i < n; i++) {
		a[i] = (float)i;
		b[i] = 2.0f * (float)i;
	}
	size_t len;
	err = rtaccel_call(reg, vecadd, sizeof(*req) + 2 * n * sizeof(float), 1000000000, &len);
	if (err < 0) {
		fprintf(stderr, "vecadd failed: %s\n", strerror(-err));
		rtaccel_client_close(client);
		return 1;
	}
	const float *c = rtaccel_response_buffer(reg, vecadd, NULL);
	unsigned wrong = 0;
	for (unsigned i = 0; i < n; i++)
		wrong += c[i] != 3.0f * (float)i;
	printf("vecadd of %u elements: %s (%zu bytes back)\n", n, wrong ? "WRONG" : "correct", len);
	rtaccel_client_close(client);
	return wrong ? 1 : 0;
}
