// Room made resident up front.
#include "core/resident.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <new>
#include <utility>

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

// Storage in pages mapped for it alone, none resident until touched:
// malloc may hand out memory that an earlier test touched.
template <class T>
struct FreshPages {
  using value_type = T;
  FreshPages() = default;
  template <class U>
  explicit FreshPages(const FreshPages<U>&) {}
  T* allocate(size_t n) {
    void* p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { munmap(p, n * sizeof(T)); }
  bool operator==(const FreshPages&) const { return true; }
};

TEST(Resident, ReservedRoomIsResidentAndGrowingIntoItTakesNoMore) {
  using Sample = std::pair<uint64_t, uint64_t>;
  constexpr size_t kSamples = 1 << 20;  // 16 MB
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = kSamples * sizeof(Sample) / page;
  // Where this process locks its memory to come (mlockall MCL_FUTURE),
  // every page is resident as it is mapped.
  unsigned long long locked_kb = 0;
  rtaccel_proc_field("/proc/self/status", "VmLck: %llu kB", &locked_kb);

  std::vector<Sample, FreshPages<Sample>> reserved;
  reserved.reserve(kSamples);  // reserved alone: not resident
  if (locked_kb == 0) {
    EXPECT_LT(resident_pages(reserved.data(), kSamples * sizeof(Sample)), pages / 2);
  }

  std::vector<Sample, FreshPages<Sample>> v;
  v.emplace_back(1, 2);
  reserve_resident(v, kSamples);
  ASSERT_GE(v.capacity(), kSamples);
  EXPECT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], Sample(1, 2));
  EXPECT_GE(resident_pages(v.data(), kSamples * sizeof(Sample)), pages);

  const auto* room = v.data();
  for (uint64_t i = 1; i < kSamples; ++i) v.emplace_back(i, i);
  EXPECT_EQ(v.data(), room);  // grown in place: no allocation, no copy

  std::vector<int> none;
  reserve_resident(none, 0);  // nothing to take, nothing touched
  EXPECT_EQ(none.capacity(), 0u);
}

}  // namespace
}  // namespace rtaccel::core
