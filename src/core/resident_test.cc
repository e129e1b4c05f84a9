// Room made resident up front.
#include "core/resident.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>

#include "core/procfs.h"

namespace rtaccel::core {
namespace {

// How many of the pages under [p, p + bytes) are resident.
size_t resident_pages(const void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  std::vector<unsigned char> in((end - begin + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(Resident, ReservedRoomIsResidentAndGrowingIntoItTakesNoMore) {
  // 16 MB: past malloc's mapping threshold, so the room is fresh pages of
  // its own, none resident until touched.
  constexpr size_t kSamples = 1 << 20;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = kSamples * 2 * sizeof(uint64_t) / page;

  // Reserved alone, the room is not resident; unless this process locked
  // its memory to come (mlockall MCL_FUTURE: under the interposer), which
  // makes every page resident as it is mapped.
  unsigned long long locked_kb = 0;
  rtaccel_proc_field("/proc/self/status", "VmLck: %llu kB", &locked_kb);
  std::vector<std::pair<uint64_t, uint64_t>> reserved;
  reserved.reserve(kSamples);
  if (locked_kb == 0) {
    EXPECT_LT(resident_pages(reserved.data(), kSamples * sizeof(reserved[0])), pages / 2);
  }

  std::vector<std::pair<uint64_t, uint64_t>> v;
  v.emplace_back(1, 2);
  reserve_resident(v, kSamples);
  ASSERT_GE(v.capacity(), kSamples);
  EXPECT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], std::make_pair(uint64_t{1}, uint64_t{2}));
  EXPECT_GE(resident_pages(v.data(), kSamples * sizeof(v[0])), pages);

  const auto* room = v.data();
  for (uint64_t i = 1; i < kSamples; ++i) v.emplace_back(i, i);
  EXPECT_EQ(v.data(), room);  // grown in place: no allocation, no copy

  std::vector<int> none;
  reserve_resident(none, 0);  // nothing to take, nothing touched
  EXPECT_EQ(none.capacity(), 0u);
}

}  // namespace
}  // namespace rtaccel::core
