// libFuzzer target for the workload loader: any byte string must either load
// or be refused with diagnostics that carry a message; never crash or hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  rtaccel::workload::LoadOptions options;
  options.machine_cores = 8;
  auto result = rtaccel::workload::load_string(text, "fuzz.yaml", options);
  if (result.ok() == !result.errors.empty()) std::abort();
  for (const auto& e : result.errors) {
    if (e.message.empty()) std::abort();
  }
  // A workload that loads must also analyse without trouble.
  if (result.ok()) (void)rtaccel::analysis::analyze(*result.workload);
  return 0;
}
