#include "core/busy.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "core/clock.h"

namespace rtaccel::core {
namespace {

std::atomic<double> g_iterations_per_us{0.0};
std::once_flag g_calibrated;

// One unit of busy work. The asm barrier keeps the compiler from folding the
// loop; each iteration is a dependent chain of a few cycles.
inline void spin_iterations(uint64_t iterations) {
  uint64_t x = 0;
  for (uint64_t i = 0; i < iterations; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ __volatile__("" : "+r"(x));
  }
}

}  // namespace

void calibrate_busy_loop() {
  std::call_once(g_calibrated, [] {
    constexpr uint64_t kTrial = 200000;
    double best = 0;
    for (int trial = 0; trial < 7; trial++) {
      const uint64_t start = monotonic_ns();
      spin_iterations(kTrial);
      const uint64_t took = std::max<uint64_t>(monotonic_ns() - start, 1);
      best = std::max(best, double(kTrial) * 1000.0 / double(took));
    }
    g_iterations_per_us.store(best);
  });
}

void busy_for_ns(uint64_t ns) {
  calibrate_busy_loop();
  spin_iterations(uint64_t(double(ns) / 1000.0 * g_iterations_per_us.load(std::memory_order_relaxed)));
}

}  // namespace rtaccel::core
