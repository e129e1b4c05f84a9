/* rtaccel/shim.h: what librtaccel_shim.so offers the process it is preloaded
 * into, beyond the pthread functions it replaces.
 *
 * GPU segments. The shim tracks, per CUDA stream, whether work submitted to
 * it may still be running. A process's GPU segment begins when it goes from
 * no outstanding GPU work to some, and ends when it has none again (a stream
 * counts as finished once the program synchronised with it: stream, event or
 * device synchronisation, or a synchronous copy to the host). These are the
 * points where a memory-bandwidth lock is taken and released (BWLOCK++).
 *
 * The functions exist only while the shim is preloaded; find them with
 * dlsym(RTLD_DEFAULT, "rtaccel_shim_set_gpu_hooks"). Alternatively,
 * RTACCEL_SHIM_GPU_HOOKS=module.so makes the shim load a module that defines
 *     void rtaccel_gpu_segment_begin(void);
 *     void rtaccel_gpu_segment_end(void);
 * and call them, without any change to the program. */
#ifndef RTACCEL_SHIM_H
#define RTACCEL_SHIM_H

#ifdef __cplusplus
extern "C" {
#endif

struct rtaccel_gpu_hooks {
	/* Called by the thread that made the transition, in strict alternation
	 * (begin first), one at a time. They must not call into CUDA. */
	void (*segment_begin)(void *arg);
	void (*segment_end)(void *arg);
	void *arg;
};

/* Installs hooks (NULL removes them); a segment under way ends without them.
 * Returns 0. */
int rtaccel_shim_set_gpu_hooks(const struct rtaccel_gpu_hooks *hooks);
/* 1 while the process has GPU work outstanding, else 0. */
int rtaccel_shim_gpu_busy(void);

/* What a traced process's report and timeline are called in OUT:
 * RTACCEL_SHIM_REPORT_PREFIX.PID.json and .PID.trace.json. */
#define RTACCEL_SHIM_REPORT_PREFIX "rtaccel-shim"

/* Under RTACCEL_SHIM=trace: writes the process's report and timeline now
 * (OUT/rtaccel-shim.PID.json and .trace.json) and stops tracing; returns 0,
 * or -1 when not tracing. The shim writes them at exit by itself; a process
 * that leaves with _exit(), as a forked worker does, calls this first. */
int rtaccel_shim_write_report(void);

#ifdef __cplusplus
}
#endif

#endif
