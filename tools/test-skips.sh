#!/usr/bin/env bash
# Prints why each test of the last ctest run in BUILD_DIR was skipped, one
# line a test, from the reasons the tests print (tests/harness/skip.h: "SKIP:
# needs WHAT: WHY"; GoogleTest's skips: "needs WHAT: WHY"). ctest itself
# names a skipped test but shows none of its output.
#   tools/test-skips.sh BUILD_DIR
set -euo pipefail
log=${1:?usage: tools/test-skips.sh BUILD_DIR}/Testing/Temporary/LastTest.log
[ -f "$log" ] || { echo "test-skips.sh: no ctest log at $log" >&2; exit 2; }
awk '
  / Test: / && $1 ~ /^[0-9]+\/[0-9]+$/ { name = $3; next }
  /^SKIP: needs / || /^needs [a-z0-9]+: / {
    sub(/^SKIP: /, "")
    if (!(name in said)) { said[name] = 1; n++; lines = lines "  " name ": " $0 "\n" }
  }
  END {
    if (n) printf "ctest: %d skipped, and why:\n%s", n, lines
    else print "ctest: nothing skipped"
  }' "$log"
