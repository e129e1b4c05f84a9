/* A long traced run: enough short CUDA calls to fill the tracer's timeline,
 * then one call that lasts 20 ms. Run under `RTACCEL_SHIM=trace`;
 * late_events.sh checks that the long call is on the timeline all the same.
 * Runs against the stand-in runtime (cudart_standin.c). */
#include <stdint.h>
#include <stdio.h>

#include "cudart_abi.h"

int main(void)
{
	cudaStream_t s;
	if (cudaStreamCreateWithFlags(&s, 1) != 0)
		return 1;
	/* each call is two timeline events (the call, the runtime's lock held
	 * inside it): 100,000 calls fill the 131,072 slots */
	for (int i = 0; i < 100000; i++)
		if (cudaStreamSynchronize(s) != 0)
			return 1;
	uint64_t ns = 20000000;
	void *args[1] = {&ns};
	dim3 one = {1, 1, 1};
	if (__cudaLaunchKernel((const void *)main, one, one, args, 0, s) != 0 || cudaStreamSynchronize(s) != 0)
		return 1;
	cudaStreamDestroy(s);
	printf("late_events: 100001 synchronisations, the last one 20 ms\n");
	return 0;
}
