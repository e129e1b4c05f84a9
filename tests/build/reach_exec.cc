// Compiled with the core layer's include paths: core uses no other layer, so
// exec's public header is not there for it and this must not build
// (tests/build/layering.sh).
#include "rtaccel/exec.hpp"

int layering_probe_policy() { return static_cast<int>(rtaccel::exec::Policy::kPaam); }
