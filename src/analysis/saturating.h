// Saturating integer-nanosecond arithmetic of the analyses (internal): a sum
// or product that overflows is kUnbounded, larger than every horizon, so a
// recurrence that runs away stops instead of wrapping round.
#ifndef RTACCEL_ANALYSIS_SATURATING_H_
#define RTACCEL_ANALYSIS_SATURATING_H_

#include <cstdint>
#include <limits>

namespace rtaccel::analysis {

inline constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

inline uint64_t add(uint64_t a, uint64_t b) { return a > kUnbounded - b ? kUnbounded : a + b; }
inline uint64_t mul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kUnbounded / b ? kUnbounded : a * b;
}

}  // namespace rtaccel::analysis

#endif  // RTACCEL_ANALYSIS_SATURATING_H_
