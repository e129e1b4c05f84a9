#include <gtest/gtest.h>
#include "rtaccel/workload.hpp"
TEST(Loader, Placeholder) {}
