// rtaccel/status.hpp - the one error type of rtaccel's C++ APIs.
//
// A Status is ok, or an error with a message meant for the user and an errno
// value (0 when none applies; EINVAL marks input the user can fix). An
// Expected<T> holds a T or the Status that says why there is none. Nothing
// throws: real-time paths return these. The C APIs keep returning 0 or a
// negative errno value.
#ifndef RTACCEL_STATUS_HPP_
#define RTACCEL_STATUS_HPP_

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rtaccel {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status error(std::string message, int err = 0) { return Status(std::move(message), err); }
  // Input the user can fix (a file, an argument): EINVAL.
  static Status invalid(std::string message) { return Status(std::move(message), EINVAL); }
  // "what: strerror(err)".
  static Status os_error(const std::string& what, int err) {
    return Status(what + ": " + std::strerror(err), err);
  }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }
  int err() const { return err_; }
  bool invalid_input() const { return failed_ && err_ == EINVAL; }
  // The message's lines: a Status that gathers several problems (the
  // workload loader's) gives one a line.
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (size_t at = 0; failed_ && at <= message_.size();) {
      const size_t end = std::min(message_.find('\n', at), message_.size());
      out.push_back(message_.substr(at, end - at));
      at = end + 1;
    }
    return out;
  }
  // The same error with context in front: "context: message".
  Status context(const std::string& what) const {
    return failed_ ? Status(what + ": " + message_, err_) : *this;
  }

 private:
  Status(std::string message, int err) : failed_(true), err_(err), message_(std::move(message)) {}
  bool failed_ = false;
  int err_ = 0;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : status_(std::move(status)) {}  // NOLINT: an error
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T take() { return std::move(*value_); }
  const Status& status() const { return status_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace rtaccel

#endif  // RTACCEL_STATUS_HPP_
