#include "accel/protocol.h"

#include <gtest/gtest.h>

#include <cstring>

#include "accel/test_descs.h"

namespace rtaccel::accel {
namespace {

using test::CallbackSpec;
using test::one_callback;
using test::wire_status;

RegisterRequest message(const rtaccel_registration_desc& desc) {
  RegisterRequest m{};
  m.magic = kMagic;
  m.version = kProtocolVersion;
  m.type = uint32_t(MessageType::kRegister);
  m.desc = desc;
  return m;
}

TEST(Registration, ValidIsAccepted) {
  RegisterRequest m = message(one_callback("c", 10, 10000000, {.name = "cb"}));
  std::string why;
  EXPECT_EQ(wire_status(check_registration(&m, sizeof(m)), &why), 0) << why;
}

TEST(Registration, MalformedIsRefusedWithAReason) {
  const RegisterRequest good = message(one_callback("c", 10, 10000000, {.name = "cb"}));
  struct Case {
    const char* what;
    void (*mutate)(RegisterRequest&);
    const char* expect;
  } cases[] = {
      {"magic", [](RegisterRequest& m) { m.magic = 0; }, "magic"},
      {"version", [](RegisterRequest& m) { m.version = 99; }, "version"},
      {"chain name", [](RegisterRequest& m) { memset(m.desc.chain.name, 'x', sizeof(m.desc.chain.name)); }, "chain name"},
      {"deadline", [](RegisterRequest& m) { m.desc.chain.deadline_ns = m.desc.chain.period_ns + 1; }, "deadline"},
      {"period", [](RegisterRequest& m) { m.desc.chain.period_ns = 0; }, "period"},
      {"callbacks", [](RegisterRequest& m) { m.desc.chain.ncallbacks = RTACCEL_MAX_CALLBACKS + 1; }, "callbacks"},
      {"callback index", [](RegisterRequest& m) { m.desc.callback = 1; }, "callback index"},
      {"segments", [](RegisterRequest& m) { m.desc.chain.callbacks[0].nsegments = 99; }, "segments"},
      {"wait", [](RegisterRequest& m) { m.desc.chain.callbacks[0].wait = 7; }, "wait mode"},
      {"priority", [](RegisterRequest& m) { m.desc.chain.callbacks[0].executor_priority = 0; }, "priority"},
      {"wcet", [](RegisterRequest& m) { m.desc.chain.callbacks[0].segments[0].wcet_ns = 0; }, "wcet"},
      {"services", [](RegisterRequest& m) { m.desc.nservices = 0; }, "services"},
      {"buffer", [](RegisterRequest& m) { m.desc.services[0].request_max = RTACCEL_MAX_BUFFER + 1; }, "64 MiB"},
      {"service twice", [](RegisterRequest& m) { m.desc.nservices = 2; m.desc.services[1] = m.desc.services[0]; }, "twice"},
      {"region", [](RegisterRequest& m) {
         m.desc.nservices = 8;
         for (int i = 0; i < 8; i++) {
           snprintf(m.desc.services[i].name, 32, "s%d", i);
           m.desc.services[i].request_max = RTACCEL_MAX_BUFFER;
           m.desc.services[i].response_max = RTACCEL_MAX_BUFFER;
         }
       }, "256 MiB"},
  };
  for (const Case& c : cases) {
    RegisterRequest m = good;
    c.mutate(m);
    std::string why;
    EXPECT_EQ(wire_status(check_registration(&m, sizeof(m)), &why), -EINVAL) << c.what;
    EXPECT_NE(why.find(c.expect), std::string::npos) << c.what << ": " << why;
  }
  std::string why;
  EXPECT_EQ(wire_status(check_registration(&good, sizeof(good) - 1), &why), -EINVAL);
  EXPECT_NE(why.find("bytes"), std::string::npos);
}

DeclareRequest declaration(const rtaccel_chain_desc& chain, uint32_t flags = kDeclareLast) {
  DeclareRequest m{};
  m.magic = kMagic;
  m.version = kProtocolVersion;
  m.type = uint32_t(MessageType::kDeclare);
  m.flags = flags;
  m.chain = chain;
  return m;
}

TEST(Registration, TopicsAreCheckedAsTheRestIs) {
  const test::FusionPair p = test::fusion_pair(100000000, 20000000);
  RegisterRequest good = message(test::registration_of(p.front, 1));
  std::string why;
  ASSERT_EQ(wire_status(check_registration(&good, sizeof(good)), &why), 0) << why;
  // A topic as long as a ROS 2 name gets.
  RegisterRequest long_topic = good;
  const std::string ros = "/sensing/lidar/front/pointcloud_raw_ex/with/a/namespace/of/its/own/and/more/" + std::string(40, 'x');
  ASSERT_LT(ros.size(), size_t(RTACCEL_TOPIC_MAX));
  snprintf(long_topic.desc.chain.callbacks[0].publishes, RTACCEL_TOPIC_MAX, "%s", ros.c_str());
  snprintf(long_topic.desc.chain.callbacks[1].triggers[0], RTACCEL_TOPIC_MAX, "%s", ros.c_str());
  EXPECT_EQ(wire_status(check_registration(&long_topic, sizeof(long_topic)), &why), 0) << why;
  struct Case {
    const char* what;
    void (*mutate)(rtaccel_chain_desc&);
    const char* expect;
  } cases[] = {
      {"count", [](rtaccel_chain_desc& c) { c.callbacks[1].ntriggers = RTACCEL_MAX_TRIGGERS + 1; }, "more than 8 trigger"},
      {"empty", [](rtaccel_chain_desc& c) { c.callbacks[1].triggers[1][0] = '\0'; }, "trigger topic 1: name empty"},
      {"unterminated", [](rtaccel_chain_desc& c) { memset(c.callbacks[1].triggers[0], 'x', RTACCEL_TOPIC_MAX); },
       "trigger topic 0: name empty or not terminated"},
      {"twice", [](rtaccel_chain_desc& c) { strcpy(c.callbacks[1].triggers[1], "Front"); }, "'Front' named twice"},
      {"published", [](rtaccel_chain_desc& c) { memset(c.callbacks[0].publishes, 'x', RTACCEL_TOPIC_MAX); },
       "published topic not terminated"},
      {"off the path", [](rtaccel_chain_desc& c) { strcpy(c.callbacks[0].publishes, "Elsewhere"); },
       "callback 'fusion': no trigger topic of it is published by 'front_driver', before it on the chain"},
  };
  for (const Case& c : cases) {
    RegisterRequest m = good;
    c.mutate(m.desc.chain);
    EXPECT_EQ(wire_status(check_registration(&m, sizeof(m)), &why), -EINVAL) << c.what;
    EXPECT_NE(why.find(c.expect), std::string::npos) << c.what << ": " << why;
    DeclareRequest d = declaration(m.desc.chain);
    EXPECT_EQ(wire_status(check_declaration(&d, sizeof(d)), &why), -EINVAL) << c.what;
    EXPECT_NE(why.find(c.expect), std::string::npos) << c.what << ": " << why;
  }
}

TEST(Declaration, AChainIsCheckedAsARegistrationsIs) {
  const test::FusionPair p = test::fusion_pair(100000000, 20000000);
  std::string why;
  for (uint32_t flags : {0u, kDeclareLast}) {
    DeclareRequest m = declaration(p.rear, flags);
    EXPECT_EQ(wire_status(check_declaration(&m, sizeof(m)), &why), 0) << why;
  }
  DeclareRequest m = declaration(p.rear, 2);
  EXPECT_EQ(wire_status(check_declaration(&m, sizeof(m)), &why), -EINVAL);
  EXPECT_NE(why.find("unknown flags"), std::string::npos) << why;
  m = declaration(p.rear);
  m.chain.deadline_ns = 0;
  EXPECT_EQ(wire_status(check_declaration(&m, sizeof(m)), &why), -EINVAL);
  EXPECT_NE(why.find("chain 'rear': deadline"), std::string::npos) << why;
  m = declaration(p.rear);
  m.type = uint32_t(MessageType::kRegister);
  EXPECT_EQ(wire_status(check_declaration(&m, sizeof(m)), &why), -EINVAL);
  EXPECT_NE(why.find("not a declaration"), std::string::npos) << why;
  EXPECT_EQ(wire_status(check_declaration(&m, sizeof(m) - 8), &why), -EINVAL);
  EXPECT_NE(why.find("declaration message of"), std::string::npos) << why;
}

class Decode : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = one_callback("c", 10, 10000000, {.name = "cb", .service = "vecadd"}, 1000, 500);
    ASSERT_TRUE(compute_layout(d, &layout).ok());
    memset(&entry, 0, sizeof(entry));
    entry.state = kSubmitted | 4;
    entry.callback_id = 7;
    entry.service = 0;
    entry.request_offset = layout.services[0].request_offset;
    entry.request_len = 1000;
    entry.response_offset = layout.services[0].response_offset;
    entry.response_cap = 500;
  }
  RequestError decode() {
    DecodedRequest out;
    return decode_request(entry, layout, 7, &out);
  }
  Layout layout;
  RequestEntry entry;
};

TEST_F(Decode, AcceptsARequestInsideItsBuffers) { EXPECT_EQ(decode(), RequestError::kNone); }

TEST_F(Decode, RefusesForgedAndOutOfBoundsRequests) {
  RequestEntry good = entry;
  entry.callback_id = 8;  // another client's id
  EXPECT_EQ(decode(), RequestError::kForgedCallback);
  entry = good;
  entry.state = kRunning;
  EXPECT_EQ(decode(), RequestError::kNotSubmitted);
  entry = good;
  entry.service = 1;
  EXPECT_EQ(decode(), RequestError::kUnknownService);
  entry = good;
  entry.request_len = 1001;
  EXPECT_EQ(decode(), RequestError::kRequestOutside);
  entry = good;
  entry.request_offset = 0;  // the header: inside the region, outside the buffer
  entry.request_len = 64;
  EXPECT_EQ(decode(), RequestError::kRequestOutside);
  entry = good;
  entry.request_offset = 0xffffffc0u;
  entry.request_len = 0xffffffffu;  // would wrap in 32 bits
  EXPECT_EQ(decode(), RequestError::kRequestOutside);
  entry = good;
  entry.response_cap = 501;
  EXPECT_EQ(decode(), RequestError::kResponseOutside);
  entry = good;
  entry.response_offset = layout.services[0].request_offset;  // the request buffer
  EXPECT_EQ(decode(), RequestError::kResponseOutside);
  entry = good;
  entry.request_offset += 4;
  entry.request_len = 8;
  EXPECT_EQ(decode(), RequestError::kMisaligned);
}

TEST(Layout, BuffersAreAlignedAndDisjoint) {
  auto d = one_callback("c", 10, 10000000, {.name = "cb"}, 100, 3);
  d.nservices = 2;
  snprintf(d.services[1].name, 32, "vecadd");
  d.services[1].request_max = 4097;
  d.services[1].response_max = 1;
  Layout l;
  ASSERT_TRUE(compute_layout(d, &l).ok());
  EXPECT_EQ(l.size % 4096, 0u);
  uint32_t end = l.entries_offset + kRingEntries * sizeof(RequestEntry);
  for (uint32_t i = 0; i < 2; i++) {
    const ServiceArea& a = l.services[i];
    EXPECT_EQ(a.request_offset % 64, 0u);
    EXPECT_EQ(a.response_offset % 64, 0u);
    EXPECT_GE(a.request_offset, end);
    EXPECT_GE(a.response_offset, a.request_offset + a.request_max);
    end = a.response_offset + a.response_max;
  }
  EXPECT_LE(end, l.size);
}

}  // namespace
}  // namespace rtaccel::accel
