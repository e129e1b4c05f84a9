// Small owners of operating-system handles shared by the server and the
// client (internal); the futex calls are the lock layer's (lock/futex.h).
#ifndef RTACCEL_ACCEL_OS_H_
#define RTACCEL_ACCEL_OS_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <utility>

#include "lock/futex.h"

namespace rtaccel::accel {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* base, size_t size) : base_(base), size_(size) {}
  Mapping(Mapping&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Mapping& operator=(Mapping&& other) noexcept {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }
  ~Mapping() { reset(); }
  // Maps `size` bytes of `fd` shared; empty on failure (errno set).
  static Mapping map(int fd, size_t size, int prot) {
    void* p = mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? Mapping() : Mapping(p, size);
  }
  void reset() {
    if (base_) munmap(base_, size_);
    base_ = nullptr;
    size_ = 0;
  }
  uint8_t* bytes() const { return static_cast<uint8_t*>(base_); }
  template <typename T>
  T* at(size_t offset) const {
    return reinterpret_cast<T*>(bytes() + offset);
  }
  size_t size() const { return size_; }
  explicit operator bool() const { return base_ != nullptr; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
};

// Futex words live in memory shared between processes: pass shared = true.
// A CLOCK_MONOTONIC deadline `ns` from now, for futex_wait().
inline timespec deadline_after(uint64_t ns) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t at = uint64_t(now.tv_sec) * 1000000000ull + uint64_t(now.tv_nsec) + ns;
  return timespec{time_t(at / 1000000000ull), long(at % 1000000000ull)};
}

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_OS_H_
