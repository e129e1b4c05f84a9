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
  // A refusal is bad input with at least one "fuzz.yaml..." message a line.
  if (!result) {
    if (!result.status().invalid_input()) std::abort();
    const auto errors = result.status().lines();
    if (errors.empty()) std::abort();
    for (const auto& e : errors)
      if (e.rfind("fuzz.yaml", 0) != 0 || e.size() <= std::string("fuzz.yaml: ").size()) std::abort();
  }
  // A workload that loads must also analyze without trouble, as rtaccel
  // run does it: with the PAAM analysis, or under gangs.
  if (result) {
    (void)rtaccel::analysis::analyze(*result);
    (void)rtaccel::analysis::analyze_gangs(*result);
  }
  return 0;
}
