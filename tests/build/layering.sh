#!/bin/sh
# The compiler keeps the layers apart (cmake/rtaccel_layer.cmake, from
# src/LAYERS): a file compiled as part of the exec layer may include core's
# private headers but not the net layer's, and one compiled as part of core
# may include core's public header but not exec's; and core includes no
# other layer's header at all.
# usage: layering.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
fail() { echo "FAIL: $*"; exit 1; }

# probe_fails TARGET HEADER WHAT: TARGET must not build, for HEADER.
probe_fails() {
	if out=$(cmake --build "$build" --target "$1" 2>&1); then
		fail "$3 could include $2"
	fi
	echo "$out" | grep -q "$2" ||
		fail "the probe failed, but not for the header it reached across for: $out"
	echo "$3 cannot include $2: $(echo "$out" | grep -m1 "$2")"
}

out=$(cmake --build "$build" --target layering_probe_ok 2>&1) ||
	fail "the probe that includes core/clock.h does not build: $out"
probe_fails layering_probe_across net/transport.h "the exec layer"

out=$(cmake --build "$build" --target layering_probe_public_ok 2>&1) ||
	fail "the probe that includes rtaccel/status.hpp in core does not build: $out"
probe_fails layering_probe_public_across rtaccel/exec.hpp "the core layer"

# core depends on nothing: of rtaccel's headers it includes only its own
# error type, and no other layer's private header.
bad=$(grep -rn '#include "' "$src/src/core" | grep -v '#include "core/' | grep -v '#include "rtaccel/status.hpp"')
[ -z "$bad" ] || fail "core includes another layer: $bad"
echo "core includes no other layer"
