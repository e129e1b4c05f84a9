#include <gtest/gtest.h>
#include "rtaccel/workload.hpp"
TEST(Chainset, Placeholder) {}
