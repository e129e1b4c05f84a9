// Well-formed UTF-8, as the interposer's reports and the workload loader
// take it: each kind of ill-formed sequence, at its first byte.
#include "core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace {

size_t sequence(const std::string& bytes) {
  return rtaccel_utf8_sequence(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
}

TEST(Utf8, WellFormedSequencesOfEachLength) {
  EXPECT_EQ(sequence("a"), 1u);
  EXPECT_EQ(sequence("\xc3\xa9"), 2u);          // é
  EXPECT_EQ(sequence("\xe2\x82\xac"), 3u);      // €
  EXPECT_EQ(sequence("\xf0\x9f\x9a\x97"), 4u);  // a car, past the BMP
  EXPECT_EQ(sequence("\xf4\x8f\xbf\xbf"), 4u);  // U+10FFFF, the last
  EXPECT_EQ(sequence("\xc3\xa9z"), 2u);         // the first sequence only
}

TEST(Utf8, IllFormedSequencesStartNone) {
  EXPECT_EQ(sequence(""), 0u);
  EXPECT_EQ(sequence("\xe9"), 0u);              // Latin-1 é, cut short
  EXPECT_EQ(sequence("\xe9t\xe9"), 0u);         // Latin-1: no continuation
  EXPECT_EQ(sequence("\x80"), 0u);              // a stray continuation byte
  EXPECT_EQ(sequence("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(sequence("\xe0\x80\xaf"), 0u);      // overlong, three bytes
  EXPECT_EQ(sequence("\xf0\x80\x80\xaf"), 0u);  // overlong, four bytes
  EXPECT_EQ(sequence("\xed\xa0\x80"), 0u);      // a surrogate
  EXPECT_EQ(sequence("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(sequence("\xff"), 0u);
  EXPECT_EQ(sequence(std::string("\xe2\x82", 2)), 0u);  // cut short
  EXPECT_EQ(sequence(std::string("\xe2\x00\xac", 3)), 0u);
}

}  // namespace
