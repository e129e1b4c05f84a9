// The built-in services' request codec (rtaccel/requests.h): what encodes
// decodes to the same request, and what does not fit its buffers is refused.
#include "rtaccel/requests.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <limits>
#include <vector>

namespace {

std::vector<unsigned char> encoded(int service, uint64_t n, uint32_t bins = 64) {
  uint64_t inputs = 0, response = 0;
  EXPECT_EQ(rtaccel_request_sizes(service, n, bins, &inputs, &response), 0);
  std::vector<unsigned char> bytes(rtaccel_request_header_size(service) + inputs * sizeof(float));
  EXPECT_EQ(rtaccel_request_encode(service, n, bins, 0.0f, 1.0f, bytes.data(), bytes.size()), long(bytes.size()));
  return bytes;
}

TEST(Requests, NamesAreTheServices) {
  EXPECT_EQ(rtaccel_builtin_of("busy"), RTACCEL_BUSY);
  EXPECT_EQ(rtaccel_builtin_of("histogram"), RTACCEL_HISTOGRAM);
  EXPECT_EQ(rtaccel_builtin_of("scale"), -1);
  EXPECT_EQ(rtaccel_builtin_of(nullptr), -1);
}

TEST(Requests, WhatEncodesDecodesToTheSameRequest) {
  for (int service = 0; service < RTACCEL_BUILTINS; ++service) {
    const uint64_t n = service == RTACCEL_MATMUL ? 16 : service == RTACCEL_BUSY ? 5000 : 1000;
    auto bytes = encoded(service, n);
    uint64_t inputs = 0, response = 0;
    ASSERT_EQ(rtaccel_request_sizes(service, n, 64, &inputs, &response), 0);
    rtaccel_request_view v;
    ASSERT_EQ(rtaccel_request_decode(service, bytes.data(), bytes.size(), response, &v), 0) << service;
    EXPECT_EQ(v.service, service);
    EXPECT_EQ(v.n, n);
    EXPECT_EQ(v.response_len, response);
    EXPECT_EQ(v.input_bytes, inputs * sizeof(float));
    if (inputs) {
      EXPECT_EQ(reinterpret_cast<const unsigned char*>(v.a), bytes.data() + rtaccel_request_header_size(service));
    }
    if (service == RTACCEL_VECADD) {
      EXPECT_EQ(v.b, v.a + n);
    }
    if (service == RTACCEL_HISTOGRAM) {
      EXPECT_EQ(v.bins, 64u);
    }
  }
}

TEST(Requests, WhatDoesNotFitItsBuffersIsRefused) {
  auto bytes = encoded(RTACCEL_VECADD, 100);
  rtaccel_request_view v;
  // The inputs cut short, the result without room, the header cut short.
  EXPECT_EQ(rtaccel_request_decode(RTACCEL_VECADD, bytes.data(), bytes.size() - 1, 400, &v), -EINVAL);
  EXPECT_EQ(rtaccel_request_decode(RTACCEL_VECADD, bytes.data(), bytes.size(), 399, &v), -EINVAL);
  EXPECT_EQ(rtaccel_request_decode(RTACCEL_VECADD, bytes.data(), 7, 400, &v), -EINVAL);
  // A count whose inputs would wrap a 64-bit size: the header says 2^32-1.
  const rtaccel_vector_request huge{UINT32_MAX, 0};
  EXPECT_EQ(rtaccel_request_decode(RTACCEL_VECADD, &huge, sizeof(huge), SIZE_MAX, &v), -EINVAL);
  // Past the services' limits.
  const rtaccel_vector_request big_matrix{RTACCEL_MATMUL_MAX_N + 1, 0};
  EXPECT_EQ(rtaccel_request_decode(RTACCEL_MATMUL, &big_matrix, sizeof(big_matrix), SIZE_MAX, &v), -EINVAL);
  const rtaccel_busy_request hours{RTACCEL_BUSY_MAX_NS + 1};
  EXPECT_EQ(rtaccel_request_decode(RTACCEL_BUSY, &hours, sizeof(hours), 0, &v), -EINVAL);
  // A histogram without bins, with an empty range, or with an end that is
  // not finite (the width of its bins would be infinite): refused by the
  // decoder and by the encoder alike.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const rtaccel_histogram_request h :
       {rtaccel_histogram_request{0, 0, 0.0f, 1.0f}, rtaccel_histogram_request{0, 8, 1.0f, 1.0f},
        rtaccel_histogram_request{0, 8, -inf, 1.0f}, rtaccel_histogram_request{0, 8, 0.0f, inf},
        rtaccel_histogram_request{0, 8, -inf, inf}, rtaccel_histogram_request{0, 8, nan, 1.0f},
        rtaccel_histogram_request{0, 8, 0.0f, nan}}) {
    EXPECT_EQ(rtaccel_request_decode(RTACCEL_HISTOGRAM, &h, sizeof(h), 4096, &v), -EINVAL) << h.lo << " " << h.hi;
    unsigned char header[sizeof(h)];
    EXPECT_EQ(rtaccel_request_encode(RTACCEL_HISTOGRAM, 0, h.bins, h.lo, h.hi, header, sizeof(header)), -EINVAL);
  }
  // The widest finite range is one.
  const float max = std::numeric_limits<float>::max();
  const rtaccel_histogram_request widest{0, 8, -max, max};
  EXPECT_EQ(rtaccel_request_decode(RTACCEL_HISTOGRAM, &widest, sizeof(widest), 4096, &v), 0);
  // An unknown service, and encoding into too small a buffer.
  EXPECT_EQ(rtaccel_request_decode(RTACCEL_BUILTINS, bytes.data(), bytes.size(), 400, &v), -EINVAL);
  unsigned char small[8];
  EXPECT_EQ(rtaccel_request_encode(RTACCEL_VECADD, 100, 0, 0.0f, 1.0f, small, sizeof(small)), -EINVAL);
}

}  // namespace
