#include "rtaccel/workload.hpp"

#include <algorithm>

namespace rtaccel::workload {

std::string_view to_string(Backend backend) {
  switch (backend) {
    case Backend::kCpu:
      return "cpu";
    case Backend::kOpenCl:
      return "opencl";
    case Backend::kCuda:
      return "cuda";
  }
  return "?";
}

std::string_view to_string(WaitMode mode) {
  return mode == WaitMode::kSpin ? "spin" : "suspend";
}

int Workload::callback_priority(size_t callback) const {
  bool found = false;
  int priority = 0;
  for (const Chain& chain : chains) {
    if (std::find(chain.path.begin(), chain.path.end(), callback) == chain.path.end()) continue;
    priority = found ? std::max(priority, chain.priority) : chain.priority;
    found = true;
  }
  return priority;
}

std::string Diagnostic::to_string() const {
  std::string out = file;
  if (where.line > 0) {
    out += ':' + std::to_string(where.line) + ':' + std::to_string(where.column);
  }
  out += ": ";
  out += message;
  return out;
}

}  // namespace rtaccel::workload
