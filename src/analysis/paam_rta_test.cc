#include <gtest/gtest.h>
#include "rtaccel/workload.hpp"
TEST(Rta, Placeholder) {}
