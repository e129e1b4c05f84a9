// rtaccel-server's log (accel, internal): one line on stderr per event,
// "rtaccel-server: PART: message" (PART empty: the server itself).
#ifndef RTACCEL_ACCEL_LOG_H_
#define RTACCEL_ACCEL_LOG_H_

#include <cstdarg>
#include <cstdio>

namespace rtaccel::accel {

inline void vlog(const char* part, const char* fmt, va_list ap) {
  char line[512];
  vsnprintf(line, sizeof(line), fmt, ap);
  fprintf(stderr, "rtaccel-server: %s%s%s\n", part, *part ? ": " : "", line);
}

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_LOG_H_
