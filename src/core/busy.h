// Calibrated busy work (core, internal): CPU time that a higher-priority
// thread preempts and that resumes where it stopped, the way a kernel does
// on a device. The cpu backend's `busy` service and the executors' CPU work
// both spend time through it.
#ifndef RTACCEL_CORE_BUSY_H_
#define RTACCEL_CORE_BUSY_H_

#include <cstdint>

namespace rtaccel::core {

// Measures how many iterations of the busy loop this core runs per
// microsecond (the fastest of several trials, so that a disturbed trial only
// makes later work longer, never shorter). Thread-safe; runs once per process
// (a forked child keeps its parent's calibration).
void calibrate_busy_loop();

// Runs the busy loop for `ns` of execution.
void busy_for_ns(uint64_t ns);

}  // namespace rtaccel::core

#endif  // RTACCEL_CORE_BUSY_H_
