#!/bin/sh
# The build keeps the layers apart (cmake/rtaccel_layer.cmake): a file
# compiled as part of the exec layer may include core's private headers but
# not the net layer's, and core includes no other layer's header at all.
# usage: layering.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
fail() { echo "FAIL: $*"; exit 1; }

out=$(cmake --build "$build" --target layering_probe_ok 2>&1) ||
	fail "the probe that includes core/clock.h does not build: $out"

if out=$(cmake --build "$build" --target layering_probe_across 2>&1); then
	fail "the exec layer could include the net layer's net/transport.h"
fi
echo "$out" | grep -q 'net/transport.h' ||
	fail "the probe failed, but not for the header it reached across for: $out"
echo "exec cannot include net/transport.h: $(echo "$out" | grep -m1 'net/transport.h')"

# core depends on nothing: of rtaccel's headers it includes only its own
# error type, and no other layer's private header.
bad=$(grep -rn '#include "' "$src/src/core" | grep -v '#include "core/' | grep -v '#include "rtaccel/status.hpp"')
[ -z "$bad" ] || fail "core includes another layer: $bad"
echo "core includes no other layer"
