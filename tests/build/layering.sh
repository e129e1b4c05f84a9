#!/bin/sh
# The compiler keeps the layers apart (cmake/rtaccel_layer.cmake, from
# src/LAYERS): a file compiled as part of the exec layer may include core's
# private headers but not the net layer's, and one compiled as part of core
# may include core's public header but not exec's. Every other pair is
# checked against the list by tests/build/layers.py.
# usage: layering.sh SOURCE_DIR BUILD_DIR
set -u
build=$2
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
