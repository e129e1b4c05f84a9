// Small owners of operating-system handles and futex calls shared by the
// server and the client (internal).
#ifndef RTACCEL_ACCEL_OS_H_
#define RTACCEL_ACCEL_OS_H_

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <utility>

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

// Futex words live in memory shared between processes: no FUTEX_PRIVATE_FLAG.
inline int futex_wait_shared(uint32_t* word, uint32_t expected, const timespec* relative) {
  long r = syscall(SYS_futex, word, FUTEX_WAIT, expected, relative, nullptr, 0);
  return r < 0 ? -errno : 0;
}
inline void futex_wake_shared(uint32_t* word, int count) {
  syscall(SYS_futex, word, FUTEX_WAKE, count, nullptr, nullptr, 0);
}

inline uint32_t load_acquire(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void store_release(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_OS_H_
