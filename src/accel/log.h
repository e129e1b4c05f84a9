// rtaccel-server's log (accel, internal): one line on stderr per event,
// "rtaccel-server: PART: message" (PART empty: the server itself).
#ifndef RTACCEL_ACCEL_LOG_H_
#define RTACCEL_ACCEL_LOG_H_

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace rtaccel::accel {

inline void vlog(const char* part, const char* fmt, va_list ap) {
  char line[512];
  vsnprintf(line, sizeof(line), fmt, ap);
  fprintf(stderr, "rtaccel-server: %s%s%s\n", part, *part ? ": " : "", line);
}

// Clients or peers refused since descriptors ran out: said when the first
// is refused and when one is accepted again, with how many, not once each.
class Refusals {
 public:
  // True for the first refusal since the last acceptance.
  bool refused() { return count_++ == 0; }
  // How many were refused before this acceptance (0: nothing to say).
  unsigned long long accepted() { return std::exchange(count_, 0); }

 private:
  unsigned long long count_ = 0;
};

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_LOG_H_
