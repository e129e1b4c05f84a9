// The lock layer for C++: a priority-inheritance mutex (rtaccel/lock.h) with
// clang's thread-safety annotations. Fields declared RTACCEL_GUARDED_BY(mu) may only be touched with
// mu held; clang's -Wthread-safety (the clang builds) checks it at compile
// time, other compilers ignore the annotations.
#ifndef RTACCEL_LOCK_HPP_
#define RTACCEL_LOCK_HPP_

#include <pthread.h>

#include "rtaccel/lock.h"

#if defined(__clang__)
#define RTACCEL_TS(x) __attribute__((x))
#else
#define RTACCEL_TS(x)
#endif
#define RTACCEL_CAPABILITY(name) RTACCEL_TS(capability(name))
#define RTACCEL_SCOPED_CAPABILITY RTACCEL_TS(scoped_lockable)
#define RTACCEL_GUARDED_BY(mu) RTACCEL_TS(guarded_by(mu))
#define RTACCEL_REQUIRES(mu) RTACCEL_TS(requires_capability(mu))
#define RTACCEL_ACQUIRE(...) RTACCEL_TS(acquire_capability(__VA_ARGS__))
#define RTACCEL_RELEASE(...) RTACCEL_TS(release_capability(__VA_ARGS__))

namespace rtaccel::lock {

class RTACCEL_CAPABILITY("mutex") PiMutex {
 public:
  PiMutex() = default;
  PiMutex(const PiMutex&) = delete;
  PiMutex& operator=(const PiMutex&) = delete;
  ~PiMutex() {
    if (initialised_) pthread_mutex_destroy(&mu_);
  }
  // 0 or a negative errno value (a kernel without PI futexes, say).
  int init() {
    const int r = rtaccel_pi_mutex_init(&mu_, PTHREAD_MUTEX_NORMAL, false);
    initialised_ = r == 0;
    return r;
  }
  void lock() RTACCEL_ACQUIRE() { pthread_mutex_lock(&mu_); }
  void unlock() RTACCEL_RELEASE() { pthread_mutex_unlock(&mu_); }

 private:
  pthread_mutex_t mu_;
  bool initialised_ = false;
};

class RTACCEL_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(PiMutex& mu) RTACCEL_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RTACCEL_RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  PiMutex& mu_;
};

}  // namespace rtaccel::lock

#endif  // RTACCEL_LOCK_HPP_
