// Core lists as the regulator and the server read them from their command
// lines: what a user writes, and what each refuses.
#include "core/size.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

// The cores of TEXT, or {-1} where it is refused.
std::vector<int> cores(const char* text, int max = 8, long limit = 64) {
  std::vector<int> out(size_t(max) + 1, -2);
  int n = -1;
  if (rtaccel_parse_cores(text, out.data(), max, limit, &n) < 0) return {-1};
  EXPECT_GE(n, 1);
  out.resize(size_t(n));
  return out;
}

TEST(CoreList, SinglesAndRangesInTheOrderGiven) {
  EXPECT_EQ(cores("1"), (std::vector<int>{1}));
  EXPECT_EQ(cores("0,1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(cores("3,1-2"), (std::vector<int>{3, 1, 2}));
  EXPECT_EQ(cores("1,3-5"), (std::vector<int>{1, 3, 4, 5}));
  EXPECT_EQ(cores("2-2"), (std::vector<int>{2}));
}

TEST(CoreList, MalformedOrTooManyIsRefused) {
  for (const char* bad : {"", ",", "1,,2", "1-", "-1", "3-1", "a", "1 2", " 1", "1;2", "+1", "1-+2", "1--2"})
    EXPECT_EQ(cores(bad), (std::vector<int>{-1})) << "'" << bad << "'";
  EXPECT_EQ(cores("0-8"), (std::vector<int>{-1}));          // nine, where eight fit
  EXPECT_EQ(cores("64", 8, 64), (std::vector<int>{-1}));    // past the limit
  EXPECT_EQ(cores("0-99999999999999999999"), (std::vector<int>{-1}));
}

}  // namespace
