// End-to-end tests of rtaccel-server against clients that break the protocol
// (RawClient): forged requests in shared memory, malformed registrations, a
// client of another protocol version. Each is refused and the server serves
// the others. See server_test.h.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "accel/protocol.h"
#include "core/fd.h"
#include "rtaccel/accel.h"

#include "server_test.h"

namespace rtaccel::accel::server_test {
namespace {

TEST(Server, RefusesForgedRequestsAndKeepsServingOthers) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  Client client(server);
  CallbackSpec vb{.name = "honest", .service = "vecadd"};
  rtaccel_registration* honest = client.reg(one_callback("honest", 5, kSecond, vb, 8 + 2 * 16 * 4, 16 * 4, false));
  ASSERT_TRUE(honest);
  rtaccel_registration_info hinfo;
  rtaccel_registration_query(honest, &hinfo);

  RawClient raw(server.socket());
  ASSERT_TRUE(raw.connected());
  RegisterReply reply{};
  auto rd = one_callback("raw", 5, kSecond, {.name = "raw-cb", .service = "vecadd"}, 8 + 2 * 16 * 4, 16 * 4, false);
  ASSERT_EQ(raw.register_desc(rd, &reply), 0) << reply.message;
  EXPECT_FALSE(raw.status_writable());  // the wake-up flags are sealed
  EXPECT_FALSE(raw.shrinkable());       // so is the region's size

  const ServiceArea area = raw.header()->services[0];
  RequestEntry good{};
  good.callback_id = reply.info.callback_id;
  good.service = 0;
  good.request_offset = area.request_offset;
  good.request_len = 8;  // n = 0 is a valid empty request
  good.response_offset = area.response_offset;
  good.response_cap = area.response_max;
  memset(reinterpret_cast<char*>(raw.header()) + area.request_offset, 0, 8);
  EXPECT_EQ(raw.wait_done(raw.submit(good), 5 * kSecond), 0);

  auto check_refused = [&](const RequestEntry& forged, const char* what) {
    EXPECT_EQ(raw.wait_done(raw.submit(forged), 5 * kSecond), -EINVAL) << what;
    // The honest client is still served, correctly.
    const int s = rtaccel_service_index(honest, "vecadd");
    auto* v = static_cast<rtaccel_vector_request*>(rtaccel_request_buffer(honest, s, nullptr));
    v->n = 16;
    float* x = reinterpret_cast<float*>(v + 1);
    for (int i = 0; i < 32; i++) x[i] = float(i);
    size_t len;
    ASSERT_EQ(rtaccel_call(honest, s, 8 + 32 * 4, 5 * kSecond, &len), 0) << what;
    EXPECT_EQ(static_cast<const float*>(rtaccel_response_buffer(honest, s, nullptr))[3], 3.0f + 19.0f);
  };
  RequestEntry f = good;
  f.callback_id = hinfo.callback_id;  // another client's id
  check_refused(f, "another client's id");
  f = good;
  f.callback_id = 999999;
  check_refused(f, "unknown id");
  f = good;
  f.service = 5;
  check_refused(f, "service index");
  f = good;
  f.request_offset = 0;  // the region's header
  check_refused(f, "request over the header");
  f = good;
  f.request_len = area.request_max + 64;
  check_refused(f, "request past its buffer");
  f = good;
  f.response_offset = area.request_offset;
  check_refused(f, "response over the request");
  f = good;
  f.response_cap = 0xffffffffu;
  check_refused(f, "response past the region");
  f = good;
  f.request_offset += 4;
  check_refused(f, "misaligned");
  // A producer index that jumps past the ring: the raw client's requests are
  // ignored from then on, the honest one is still served.
  __atomic_fetch_add(raw.head(), 1000u, __ATOMIC_SEQ_CST);
  raw.ring();
  usleep(20000);
  size_t len;
  const int s = rtaccel_service_index(honest, "vecadd");
  EXPECT_EQ(rtaccel_call(honest, s, 8 + 32 * 4, 5 * kSecond, &len), 0);
}

TEST(Server, MalformedRegistrationsGetAnErrorAndTheServerCarriesOn) {
  ServerProcess server(cpu_args());
  ASSERT_TRUE(server.ready());
  std::mt19937 rng(7);
  for (size_t len : {size_t(1), size_t(12), size_t(24), sizeof(RegisterRequest) - 1, sizeof(RegisterRequest),
                     sizeof(RegisterRequest) + 1, size_t(20000)}) {
    RawClient raw(server.socket());
    ASSERT_TRUE(raw.connected());
    std::vector<uint8_t> junk(len);
    for (auto& b : junk) b = uint8_t(rng());
    RegisterReply reply{};
    EXPECT_EQ(raw.exchange(junk.data(), junk.size(), &reply), -EINVAL) << len << " bytes";
    reply.message[sizeof(reply.message) - 1] = 0;
    EXPECT_GT(strlen(reply.message), 0u) << len;
  }
  // A well-formed header around a hostile description.
  RawClient raw(server.socket());
  auto d = busy_chain("x", 1);
  d.chain.ncallbacks = 1000;
  RegisterReply reply{};
  EXPECT_EQ(raw.register_desc(d, &reply), -EINVAL);
  EXPECT_NE(std::string(reply.message).find("callbacks"), std::string::npos) << reply.message;
  // And an unregister of an id that is not the client's is ignored.
  UnregisterRequest u{kMagic, kProtocolVersion, uint32_t(MessageType::kUnregister), 0, 12345};
  EXPECT_GT(raw.send_bytes(&u, sizeof(u)), 0);
  Client client(server);
  EXPECT_TRUE(client.reg(busy_chain("after", 1)));
}

// A client and a server of two rtaccel versions: the registration is
// refused naming both versions, not as a malformed reply.
TEST(Server, AServerOfAnotherProtocolVersionIsNamedAsSuch) {
  const std::string path = "/tmp/rtaccel-test-" + std::to_string(getpid()) + "-other-version.sock";
  unlink(path.c_str());
  core::UniqueFd listener(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(listener.get(), 1), 0);
  std::thread other([&] {
    core::UniqueFd peer(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    RegisterRequest m;
    if (recv(peer.get(), &m, sizeof(m), 0) <= 0) return;
    RegisterReply r{};
    r.magic = kMagic;
    r.version = kProtocolVersion - 1;
    send(peer.get(), &r, sizeof(r), MSG_NOSIGNAL);
  });
  rtaccel_client* c = nullptr;
  ASSERT_EQ(rtaccel_client_connect(path.c_str(), &c), 0);
  rtaccel_registration* r = nullptr;
  char why[256] = "";
  EXPECT_EQ(register_desc(c, busy_chain("versions", 1), &r, why, sizeof(why)), -EPROTONOSUPPORT) << why;
  EXPECT_NE(std::string(why).find("protocol version " + std::to_string(kProtocolVersion - 1) +
                                  " and this client " + std::to_string(kProtocolVersion)),
            std::string::npos)
      << why;
  other.join();
  rtaccel_client_close(c);
  unlink(path.c_str());
}

}  // namespace
}  // namespace rtaccel::accel::server_test
