// Compiled with the exec layer's include paths: the net layer's private
// header is not exec's to use, so this must not build (tests/build/layering.sh).
#include "net/transport.h"

int layering_probe_window(const net_limits& limits) { return static_cast<int>(limits.window); }
