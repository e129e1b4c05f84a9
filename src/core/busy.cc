#include "core/busy.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>

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

double measure_busy_loop_rate(uint64_t iterations, int trials, clockid_t clock) {
  double best = 0;
  for (int trial = 0; trial < trials; trial++) {
    const uint64_t start = rtaccel_clock_ns(clock);
    spin_iterations(iterations);
    const uint64_t took = std::max<uint64_t>(rtaccel_clock_ns(clock) - start, 1);
    best = std::max(best, double(iterations) * 1000.0 / double(took));
  }
  return best;
}

void calibrate_busy_loop() {
  std::call_once(g_calibrated, [] { g_iterations_per_us.store(measure_busy_loop_rate(200000, 7)); });
}

double busy_loop_rate() {
  calibrate_busy_loop();
  return g_iterations_per_us.load(std::memory_order_relaxed);
}

void busy_for_ns(uint64_t ns) {
  calibrate_busy_loop();
  spin_iterations(uint64_t(double(ns) / 1000.0 * g_iterations_per_us.load(std::memory_order_relaxed)));
}

MemoryWalk::MemoryWalk(MemoryWalk&& other) noexcept { *this = std::move(other); }

MemoryWalk& MemoryWalk::operator=(MemoryWalk&& other) noexcept {
  if (this != &other) {
    std::swap(base_, other.base_);
    std::swap(lines_, other.lines_);
    std::swap(random_, other.random_);
    std::swap(at_, other.at_);
  }
  return *this;
}

MemoryWalk::~MemoryWalk() {
  if (base_) munmap(base_, lines_ * kLine);
}

bool MemoryWalk::init(uint64_t bytes, bool random) {
  const size_t lines = std::max<size_t>(1, (bytes + kLine - 1) / kLine);
  void* p = mmap(nullptr, lines * kLine, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  if (base_) munmap(base_, lines_ * kLine);
  base_ = static_cast<unsigned char*>(p);
  lines_ = lines;
  random_ = random;
  at_ = 0;
  memset(base_, 0, lines * kLine);  // every page present before the run
  if (random) {
    // Sattolo's shuffle: a random permutation that is one cycle, so the
    // chain visits every line before it repeats. Line i holds the index of
    // the line after it. A fixed seed: runs walk the same chain.
    uint64_t state = 0x9e3779b97f4a7c15ull;
    auto next_random = [&state] {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      return state;
    };
    for (size_t i = 0; i < lines; ++i) line_next(i) = i;
    for (size_t i = lines - 1; i > 0; --i) {
      const size_t j = next_random() % i;
      std::swap(line_next(i), line_next(j));
    }
  }
  return true;
}

void MemoryWalk::walk(uint64_t lines) {
  size_t at = at_;
  if (random_) {
    for (uint64_t i = 0; i < lines; ++i) at = line_next(at);
  } else {
    for (uint64_t i = 0; i < lines; ++i) {
      auto* word = reinterpret_cast<uint64_t*>(base_ + at * kLine) + 1;
      *word += 1;
      __asm__ __volatile__("" : : "r"(word) : "memory");
      if (++at == lines_) at = 0;
    }
  }
  at_ = at;
}

void MemoryWalk::flush() {
  for (size_t i = 0; i < lines_; ++i) __builtin_ia32_clflush(base_ + i * kLine);
  __builtin_ia32_mfence();
}

double calibrate_walk(uint64_t bytes, bool random) {
  MemoryWalk walk;
  if (!walk.init(bytes, random)) return 0;
  // Each trial starts from a cold cache (the set flushed to DRAM), as a
  // callback does after the other callbacks of its core have walked their
  // own sets, and walks the set once: at least 2^16 and at most 2^18
  // lines. The median trial, not the fastest as for the busy loop: memory
  // on a shared host is fast or slow by the second, and the fastest trial
  // would size the work to a moment the run rarely sees again.
  const uint64_t trial = std::min<uint64_t>(std::max<uint64_t>(walk.lines(), 1 << 16), 1 << 18);
  double ns_per_line[7];
  for (double& t : ns_per_line) {
    walk.flush();
    const uint64_t start = monotonic_ns();
    walk.walk(trial);
    t = double(std::max<uint64_t>(monotonic_ns() - start, 1)) / double(trial);
  }
  std::sort(std::begin(ns_per_line), std::end(ns_per_line));
  return ns_per_line[3];
}

}  // namespace rtaccel::core
