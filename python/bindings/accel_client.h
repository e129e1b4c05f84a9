// rtaccel._core's client of rtaccel-server (accel_client.cc).
#pragma once

#include <pybind11/pybind11.h>

// AccelClient, AccelRegistration and AccelBuffer in module M.
void bind_accel_client(pybind11::module_& m);
