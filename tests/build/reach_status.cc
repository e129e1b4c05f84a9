// Compiled with the core layer's include paths: rtaccel/status.hpp is core's
// own public header.
#include "rtaccel/status.hpp"

int layering_probe_errno() { return rtaccel::Status::invalid("probe").err(); }
