#include "accel/policy.h"

#include <gtest/gtest.h>

namespace rtaccel::accel {
namespace {

TEST(Policy, DefaultAllowsRootAndTheServersUserOnly) {
  std::string why;
  Policy p = Policy::defaults(1000);
  EXPECT_TRUE(p.allows(0, 99, &why));
  EXPECT_TRUE(p.allows(1000, 1, &why));
  EXPECT_FALSE(p.allows(1001, 1, &why));
  EXPECT_NE(why.find("uid 1001 may not register"), std::string::npos) << why;
}

TEST(Policy, FirstMatchingRuleDecides) {
  std::string why;
  auto p = Policy::parse("allow:\n  - {uid: 1000, priorities: [1, 50]}\n  - {user: '*', priorities: [0, 10]}\n",
                         "p.yaml", &why);
  ASSERT_TRUE(p) << why;
  EXPECT_TRUE(p->allows(1000, 50, &why));
  EXPECT_FALSE(p->allows(1000, 51, &why));
  EXPECT_NE(why.find("1..50 only, not 51"), std::string::npos) << why;
  EXPECT_TRUE(p->allows(1234, 10, &why));
  EXPECT_FALSE(p->allows(1234, 11, &why));
  auto root = Policy::parse("allow:\n  - {user: root, priorities: [0, 5]}\n", "p.yaml", &why);
  ASSERT_TRUE(root) << why;
  EXPECT_FALSE(root->allows(0, 6, &why));
}

TEST(Policy, ErrorsNameFileAndLine) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"allow: 3\n", "p.yaml:1: expected a mapping"},
      {"allow:\n  - {user: nosuchuser-xyz, priorities: [0, 1]}\n", "p.yaml:2:"},
      {"allow:\n  - {uid: 1, priorities: [5, 1]}\n", "low > high"},
      {"allow:\n  - {uid: 1}\n", "p.yaml:2: priorities must be"},
      {"allow:\n  - {uid: 1, priorities: [0, 1], colour: red}\n", "unknown key 'colour'"},
      {"allow:\n  - {priorities: [0, 1]}\n", "needs user or uid"},
      {"allow:\n  - {uid: -3, priorities: [0, 1]}\n", "negative"},
      {"allow: [\n", "p.yaml:"},
  };
  for (const Case& c : cases) {
    std::string why;
    EXPECT_FALSE(Policy::parse(c.text, "p.yaml", &why)) << c.text;
    EXPECT_NE(why.find(c.expect), std::string::npos) << c.text << " -> " << why;
  }
}

}  // namespace
}  // namespace rtaccel::accel
