// Owners of operating-system handles (core, internal): a file descriptor and
// a shared mapping, each closed or unmapped exactly once.
#ifndef RTACCEL_CORE_FD_H_
#define RTACCEL_CORE_FD_H_

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace rtaccel::core {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
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
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
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

}  // namespace rtaccel::core

#endif  // RTACCEL_CORE_FD_H_
