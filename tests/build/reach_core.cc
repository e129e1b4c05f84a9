// Compiled with the exec layer's include paths: core's private headers are
// every layer's to use.
#include "core/clock.h"

uint64_t layering_probe_now() { return rtaccel_monotonic_ns(); }
