#include "accel/policy.h"

#include <gtest/gtest.h>

namespace rtaccel::accel {
namespace {

TEST(Policy, DefaultAllowsRootAndTheServersUserOnly) {
  Policy p = Policy::defaults(1000);
  EXPECT_TRUE(p.allows(0, 99).ok());
  EXPECT_TRUE(p.allows(1000, 1).ok());
  const Status refused = p.allows(1001, 1);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.err(), EPERM);
  EXPECT_NE(refused.message().find("uid 1001 may not register"), std::string::npos) << refused.message();
}

TEST(Policy, FirstMatchingRuleDecides) {
  auto p = Policy::parse("allow:\n  - {uid: 1000, priorities: [1, 50]}\n  - {user: '*', priorities: [0, 10]}\n",
                         "p.yaml");
  ASSERT_TRUE(p) << p.status().message();
  EXPECT_TRUE(p->allows(1000, 50).ok());
  const Status refused = p->allows(1000, 51);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("1..50 only, not 51"), std::string::npos) << refused.message();
  EXPECT_TRUE(p->allows(1234, 10).ok());
  EXPECT_FALSE(p->allows(1234, 11).ok());
  auto root = Policy::parse("allow:\n  - {user: root, priorities: [0, 5]}\n", "p.yaml");
  ASSERT_TRUE(root) << root.status().message();
  EXPECT_FALSE(root->allows(0, 6).ok());
}

TEST(Policy, PeersAreRemoteClientsByAddress) {
  auto p = Policy::parse("allow:\n  - {peer: 10.0.0.2, priorities: [1, 50]}\n  - {user: '*', priorities: [0, 99]}\n"
                         "  - {peer: '::1', priorities: [0, 5]}\n",
                         "p.yaml");
  ASSERT_TRUE(p) << p.status().message();
  EXPECT_TRUE(p->allows_peer("10.0.0.2", 50).ok());
  const Status high = p->allows_peer("10.0.0.2", 51);
  EXPECT_EQ(high.err(), EPERM);
  EXPECT_NE(high.message().find("peer 10.0.0.2 may register chain priorities 1..50 only, not 51"), std::string::npos)
      << high.message();
  const Status stranger = p->allows_peer("10.0.0.3", 1);
  EXPECT_EQ(stranger.err(), EPERM);
  EXPECT_NE(stranger.message().find("peer 10.0.0.3 may not register"), std::string::npos) << stranger.message();
  // peer rules say nothing of local users, and user rules nothing of peers
  EXPECT_TRUE(p->allows(1234, 99).ok());
  EXPECT_EQ(p->peers(), (std::vector<std::string>{"10.0.0.2", "::1"}));
  EXPECT_TRUE(Policy::defaults(1000).peers().empty());
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
      {"allow:\n  - {priorities: [0, 1]}\n", "needs user, uid or peer"},
      {"allow:\n  - {peer: camera-host, priorities: [0, 1]}\n", "p.yaml:2: peer 'camera-host' is not an IP address"},
      {"allow:\n  - {peer: 10.0.0.2, uid: 3, priorities: [0, 1]}\n", "one of user, uid or peer"},
      {"allow:\n  - {uid: -3, priorities: [0, 1]}\n", "negative"},
      {"allow: [\n", "p.yaml:"},
  };
  for (const Case& c : cases) {
    auto p = Policy::parse(c.text, "p.yaml");
    EXPECT_FALSE(p) << c.text;
    EXPECT_TRUE(p.status().invalid_input()) << c.text;
    EXPECT_NE(p.status().message().find(c.expect), std::string::npos) << c.text << " -> " << p.status().message();
  }
}

TEST(Policy, AFileThatCannotBeAPolicyIsSaidAndNotReadForEver) {
  for (const auto& [path, expect] : {std::pair{"/nonexistent/p.yaml", "/nonexistent/p.yaml: cannot open the file: "
                                                                       "No such file or directory"},
                                     std::pair{"/", "/: a folder, not a policy file"},
                                     std::pair{"/dev/zero", "/dev/zero: larger than 16 MB, which no policy is (a "
                                                            "device or a pipe?)"}}) {
    auto p = Policy::load(path);
    ASSERT_FALSE(p) << path;
    EXPECT_TRUE(p.status().invalid_input());
    EXPECT_EQ(p.status().message(), expect);
  }
}

}  // namespace
}  // namespace rtaccel::accel
