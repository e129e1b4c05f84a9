// Each accelerator segment's request sized to its WCET (exec/run.h), in a
// child process.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>
#include "core/busy.h"
#include "core/cgroup.h"
#include "core/clock.h"
#include "core/daemon.h"
#include "core/fd.h"
#include "core/futex.h"
#include "core/percentile.h"
#include "core/procfs.h"
#include "core/realtime.h"
#include "core/signals.h"
#include "exec/bridge.h"
#include "exec/executor.h"
#include "exec/leftovers.h"
#include "exec/monitor.h"
#include "exec/nodes.h"
#include "exec/plan.h"
#include "exec/resources.h"
#include "exec/segments.h"
#include "exec/shared.h"
#include "exec/timeline.h"
#include "rtaccel/accel.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/exec.hpp"
#include "rtaccel/isolate.h"

#include "exec/run.h"

namespace rtaccel::exec {

namespace {

// The sized kernels' way back from the sizing child: the sizes, not the
// requests (megabytes each, which every process forked from the runner
// would then hold). Both ends are this program.
//   u32 status (kSized, kFailed, kInvalid); then, sized, per callback:
//   u32 segments, and per segment: u64 service length, the service, u64 n,
//   u64 request length, u64 response_max; failed: u64 length and the
//   message.
enum : uint32_t { kSized = 0, kFailed = 1, kInvalid = 2 };

void put_u32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), sizeof(v)); }
void put_u64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), sizeof(v)); }
void put_bytes(std::string* out, const void* p, size_t n) {
  put_u64(out, n);
  out->append(static_cast<const char*>(p), n);
}

// Reads what put_* wrote; every read checks that the bytes are there.
class Reader {
 public:
  explicit Reader(const std::string& text) : pos_(text.data()), end_(text.data() + text.size()) {}
  bool u32(uint32_t* v) { return take(v, sizeof(*v)); }
  bool u64(uint64_t* v) { return take(v, sizeof(*v)); }
  bool bytes(size_t n, std::string* out) {
    if (static_cast<size_t>(end_ - pos_) < n) return false;
    out->assign(pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == end_; }

 private:
  bool take(void* v, size_t n) {
    if (static_cast<size_t>(end_ - pos_) < n) return false;
    memcpy(v, pos_, n);
    pos_ += n;
    return true;
  }
  const char* pos_;
  const char* end_;
};

// Times the kernels of every segment on its device and sizes them: the
// table, or the first error (INVALID: the workload's fault, a service
// rtaccel run cannot size).
std::string size_kernels(const workload::Workload& w, double work_fraction, SegmentTable* table, bool* invalid) {
  table->assign(w.callbacks.size(), {});
  std::vector<std::unique_ptr<KernelSizer>> sizers(w.accelerators.size());
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb) {
    for (const auto& seg : w.callbacks[cb].segments) {
      auto& sizer = sizers[seg.accelerator];
      if (!sizer) {
        sizer = std::make_unique<KernelSizer>();
        if (Status st = sizer->open(w.accelerators[seg.accelerator].backend, device_of(w, seg.accelerator)); !st)
          return st.message();
      }
      SegmentRequest req;
      const auto target = static_cast<uint64_t>(static_cast<double>(seg.wcet_ns) * work_fraction);
      if (Status st = sizer->size(seg.service, target, &req); !st) {
        *invalid = st.invalid_input();
        return "callback '" + w.callbacks[cb].name + "': " + st.message();
      }
      req.bytes = {};  // the executors build their own
      (*table)[cb].push_back(std::move(req));
    }
  }
  return "";
}

// What the sizing process sends back: kSized and the table, or kFailed or
// kInvalid and the error.
std::string encode_sizing(const SegmentTable& table, const std::string& error, bool invalid) {
  std::string reply;
  if (!error.empty()) {
    put_u32(&reply, invalid ? kInvalid : kFailed);
    put_bytes(&reply, error.data(), error.size());
    return reply;
  }
  put_u32(&reply, kSized);
  for (const auto& segments : table) {
    put_u32(&reply, static_cast<uint32_t>(segments.size()));
    for (const auto& r : segments) {
      put_bytes(&reply, r.service.data(), r.service.size());
      put_u64(&reply, r.n);
      put_u64(&reply, r.size);
      put_u64(&reply, r.response_max);
    }
  }
  return reply;
}

// The sizing process's reply; BROKEN where it is not one, or the process
// did not exit cleanly (STATUS).
Status decode_sizing(const std::string& text, int status, const workload::Workload& w, SegmentTable* out) {
  const Status broken =
      Status::error("sizing the kernels failed (the sizing process " + core::describe_wait_status(status) + ")");
  Reader in(text);
  uint32_t what = 0;
  if (!in.u32(&what)) return broken;
  if (what == kFailed || what == kInvalid) {
    uint64_t len = 0;
    std::string error;
    if (!in.u64(&len) || !in.bytes(len, &error)) return broken;
    return what == kInvalid ? Status::invalid(error) : Status::error(error);
  }
  if (what != kSized || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return broken;
  out->assign(w.callbacks.size(), {});
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb) {
    uint32_t segments = 0;
    if (!in.u32(&segments) || segments != w.callbacks[cb].segments.size()) return broken;
    for (uint32_t k = 0; k < segments; ++k) {
      SegmentRequest req;
      uint64_t service_len = 0, size = 0, response_max = 0;
      if (!in.u64(&service_len) || !in.bytes(service_len, &req.service) || !in.u64(&req.n) || !in.u64(&size) ||
          !in.u64(&response_max))
        return broken;
      req.size = size;
      req.response_max = response_max;
      (*out)[cb].push_back(std::move(req));
    }
  }
  return in.done() ? Status() : broken;
}

std::string read_to_end(int fd) {
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return text;
    }
  }
}

}  // namespace

// Sizes the kernels (size_kernels) in a child process that exits when
// done: a device runtime that was initialised in a process does not survive
// a fork of it (CUDA says so), and the runner forks the executors
// afterwards, which open the device themselves. The table comes back
// through a pipe.
Status size_kernels_in_child(const workload::Workload& w, double work_fraction, SegmentTable* out) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return Status::os_error("pipe", errno);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return Status::os_error("fork", err);
  }
  if (pid == 0) {
    close(fds[0]);
    die_with_parent(parent);
    // A device runtime's threads (PoCL's compute pool, the CUDA driver's)
    // take the cores of the thread that opens the device: here the server's
    // core, as in the server, so that the kernels are sized as they will
    // run there. (The cpu backend moves each call to its device core.)
    if (w.server && !w.accelerators.empty() && w.accelerators.front().backend != workload::Backend::kCpu) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(w.server->core, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    SegmentTable table;
    bool invalid = false;
    const std::string error = size_kernels(w, work_fraction, &table, &invalid);
    const std::string reply = encode_sizing(table, error, invalid);
    for (size_t done = 0; done < reply.size();) {
      const ssize_t n = write(fds[1], reply.data() + done, reply.size() - done);
      if (n <= 0 && errno != EINTR) _exit(1);
      if (n > 0) done += static_cast<size_t>(n);
    }
    _exit(0);  // no exit handlers: the device runtime's belong to this child only
  }
  close(fds[1]);
  const std::string text = read_to_end(fds[0]);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return decode_sizing(text, status, w, out);
}

}  // namespace rtaccel::exec
