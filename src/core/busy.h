// Calibrated busy work (core, internal): CPU time that a higher-priority
// thread preempts and that resumes where it stopped, the way a kernel does
// on a device. The cpu backend's `busy` service and the executors' CPU work
// both spend time through it.
#ifndef RTACCEL_CORE_BUSY_H_
#define RTACCEL_CORE_BUSY_H_

#include <time.h>

#include <cstddef>
#include <cstdint>

namespace rtaccel::core {

// Measures how many iterations of the busy loop this core runs per
// microsecond (the fastest of several trials, so that a disturbed trial only
// makes later work longer, never shorter). Thread-safe; runs once per process
// (a forked child keeps its parent's calibration).
void calibrate_busy_loop();

// Runs the busy loop for `ns` of execution.
void busy_for_ns(uint64_t ns);

// The rate the busy loop was calibrated at, in iterations per microsecond.
double busy_loop_rate();

// The loop's rate now on this core: the fastest of `trials` runs of
// `iterations` (a disturbed trial only reads slower), timed on `clock`
// (a thread's CPU clock leaves out the time the thread was preempted).
double measure_busy_loop_rate(uint64_t iterations, int trials, clockid_t clock = CLOCK_MONOTONIC);

// A working set that CPU work walks, so that the work meets the cache and
// memory interference that a DNN layer or a point-cloud filter meets: a
// co-runner that floods the shared cache or DRAM makes the same walk take
// longer. Stream reads and writes one word per 64-byte line, line after
// line; random follows a chain of dependent loads through every line in a
// random order (one cycle). A walk goes on where the previous one stopped.
class MemoryWalk {
 public:
  static constexpr size_t kLine = 64;

  MemoryWalk() = default;
  MemoryWalk(const MemoryWalk&) = delete;
  MemoryWalk& operator=(const MemoryWalk&) = delete;
  MemoryWalk(MemoryWalk&& other) noexcept;
  MemoryWalk& operator=(MemoryWalk&& other) noexcept;
  ~MemoryWalk();

  // Maps and touches `bytes` (rounded up to whole lines, at least one) and,
  // for random, links the lines; false, with errno, when it cannot map them.
  bool init(uint64_t bytes, bool random);
  void walk(uint64_t lines);
  // Writes the set back to memory and out of every cache.
  void flush();
  size_t lines() const { return lines_; }
  size_t position() const { return at_; }

 private:
  // Random: the first word of a line is the index of the next one.
  size_t& line_next(size_t line) { return *reinterpret_cast<size_t*>(base_ + line * kLine); }

  unsigned char* base_ = nullptr;
  size_t lines_ = 0;
  bool random_ = false;
  size_t at_ = 0;  // stream: the next line; random: the line the chain is at
};

// Nanoseconds per line of walking a working set of `bytes` in that pattern
// on this core, alone, from a cold cache: the median of several trials. 0
// when the set cannot be mapped.
double calibrate_walk(uint64_t bytes, bool random);

}  // namespace rtaccel::core

#endif  // RTACCEL_CORE_BUSY_H_
