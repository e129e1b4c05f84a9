#!/usr/bin/env bash
# Runs chosen tests, or one command, many times, and tallies the failures
# with their output: how a test is shown not to flake before it is trusted.
#
#   tools/repeat.sh [OPTIONS] TEST...       ctest names (regular expressions,
#                                           as ctest -R takes them) and pytest
#                                           files or node ids (tests/python/...)
#   tools/repeat.sh [OPTIONS] -- COMMAND... any command, e.g. make test
#
#   --times N        rounds (10)
#   --load           one busy loop per core at nice 19 beside the tests, the
#                    load that a shared CI machine or a compile brings
#   --jobs J         ctest runs J tests at a time (1)
#   --label L        also every ctest test with label L (ctest -L)
#   --fail-after MS  make every test fail MS ms in (RTACCEL_TEST_FAIL_AFTER_MS):
#                    each round must then fail, and leave nothing behind
#   --build DIR      the build folder (build)
#   --logs DIR       where each round's output goes (DIR/round-K.log;
#                    default build/repeat/TIME)
#
# Exit 0 when every round passed (with --fail-after: when every round failed
# and nothing was left behind), 1 otherwise, 2 on bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2; }

times=10 load=0 jobs=1 fail_after="" build=build logs="" labels=() ctest_tests=() py_tests=() command=()
while (($#)); do
  case "$1" in
    --times) times=${2:-}; shift 2 ;;
    --load) load=1; shift ;;
    --jobs) jobs=${2:-}; shift 2 ;;
    --label) labels+=("${2:-}"); shift 2 ;;
    --fail-after) fail_after=${2:-}; shift 2 ;;
    --build) build=${2:-}; shift 2 ;;
    --logs) logs=${2:-}; shift 2 ;;
    --) shift; command=("$@"); break ;;
    -h|--help) usage ;;
    -*) echo "repeat.sh: unknown option $1" >&2; usage ;;
    *.py|*.py::*) py_tests+=("${1#tests/python/}"); shift ;;
    *) ctest_tests+=("$1"); shift ;;
  esac
done
[[ $times =~ ^[1-9][0-9]*$ ]] || { echo "repeat.sh: --times takes a positive number" >&2; exit 2; }
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "repeat.sh: --jobs takes a positive number" >&2; exit 2; }
[[ -z $fail_after || $fail_after =~ ^[1-9][0-9]*$ ]] || { echo "repeat.sh: --fail-after takes milliseconds" >&2; exit 2; }
if ((${#command[@]} == 0 && ${#ctest_tests[@]} + ${#py_tests[@]} + ${#labels[@]} == 0)); then
  echo "repeat.sh: name tests, a --label, or a command after --" >&2
  usage
fi
if ((${#command[@]} == 0)); then
  if ((${#ctest_tests[@]} + ${#labels[@]})) && [ ! -f "$build/CTestTestfile.cmake" ]; then
    echo "repeat.sh: $build has no tests: build first (make build)" >&2; exit 2
  fi
  python=$root/.venv/bin/python
  if ((${#py_tests[@]})) && [ ! -x "$python" ]; then
    echo "repeat.sh: $python missing: run make build first" >&2; exit 2
  fi
fi
logs=${logs:-$build/repeat/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)

hogs=()
stop_load() {
  ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null
  wait "${hogs[@]}" 2>/dev/null
  hogs=()
}
trap stop_load EXIT
trap 'stop_load; exit 130' INT TERM
if ((load)); then
  for _ in $(seq "$(nproc)"); do
    nice -n 19 bash -c 'while :; do :; done' &
    hogs+=($!)
  done
fi

[ -n "$fail_after" ] && export RTACCEL_TEST_FAIL_AFTER_MS=$fail_after

# One round: the command, or the ctest tests then the pytest tests; its
# output in $1; the names of what failed on stdout.
round() {
  local log=$1 rc=0
  if ((${#command[@]})); then
    "${command[@]}" >"$log" 2>&1 || echo "${command[*]} (exit $?)"
    return
  fi
  if ((${#ctest_tests[@]} + ${#labels[@]})); then
    local args=(--test-dir "$build" --output-on-failure -j "$jobs")
    if ((${#ctest_tests[@]})); then
      local IFS='|'
      args+=(-R "${ctest_tests[*]}")
      unset IFS
    fi
    for l in "${labels[@]}"; do args+=(-L "$l"); done
    ctest "${args[@]}" >>"$log" 2>&1 || rc=$?
    # ctest lists what failed as "<number> - <name> (<why>)"
    sed -n '/The following tests FAILED/,$s/^[[:space:]]*[0-9]* - \(.*\)$/\1/p' "$log"
    grep -q "No tests were found" "$log" && echo "ctest: no test matched"
    ((rc)) && ! grep -q "The following tests FAILED" "$log" && echo "ctest (exit $rc)"
  fi
  if ((${#py_tests[@]})); then
    rc=0
    (cd tests/python && "$python" -m pytest -q -rs -p no:cacheprovider "${py_tests[@]}") >>"$log" 2>&1 || rc=$?
    sed -n 's/^\(FAILED\|ERROR\) \([^ ]*\).*/\2 (pytest \1)/p' "$log"
    ((rc)) && ! grep -qE '^(FAILED|ERROR) ' "$log" && echo "pytest (exit $rc)"
  fi
}

echo "# repeat.sh: $times rounds$( ((load)) && echo ", $(nproc) busy loops at nice 19")$([ -n "$fail_after" ] && echo ", every test failing after $fail_after ms"); logs in $logs"
# What a round left on the machine once it ended: processes of the build's
# programs, and (with the guard built) named objects made since SNAPSHOT,
# which the guard names and removes.
left_behind() {
  local snapshot=$1 log=$2
  local procs
  procs=$(pgrep -a -f "^($root/$build|$root/python/rtaccel/lib|$build)/" 2>/dev/null)
  if [ -n "$procs" ]; then
    echo "processes left running: $procs" >>"$log"
    echo "processes left running"
    pkill -9 -f "^($root/$build|$root/python/rtaccel/lib|$build)/" 2>/dev/null
  fi
  if [ -s "$snapshot" ] && [ -x "$guard" ] && ! "$guard" --check "$snapshot" >>"$log" 2>&1; then
    echo "objects left behind"
  fi
}

guard=$root/$build/rtaccel-test-guard
[[ $build = /* ]] && guard=$build/rtaccel-test-guard
declare -A failed_count=()
failed_rounds=()
passed=0 failed=0 start=$SECONDS
for ((k = 1; k <= times; k++)); do
  t0=$SECONDS
  log=$logs/round-$k.log
  : >"$log"
  snapshot=$logs/round-$k.snapshot
  [ -x "$guard" ] && "$guard" --snapshot "$snapshot"
  mapfile -t failures < <(round "$log")
  mapfile -t leftovers < <(left_behind "$snapshot" "$log")
  grep -q "timed out after" "$log" && leftovers+=("a test timed out")
  if [ -n "$fail_after" ]; then
    # every round must fail, at once, and leave nothing behind
    ((${#failures[@]})) || leftovers+=("nothing failed although every test was to fail")
    failures=()
  fi
  failures+=("${leftovers[@]}")
  if ((${#failures[@]} == 0)); then
    passed=$((passed + 1))
    echo "# round $k/$times: $([ -n "$fail_after" ] && echo "failed as asked, nothing left behind" || echo passed) ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1))
    failed_rounds+=("$k")
    echo "# round $k/$times: FAILED ($((SECONDS - t0)) s): ${failures[*]}"
    for f in "${failures[@]}"; do failed_count[$f]=$(( ${failed_count[$f]:-0} + 1 )); done
  fi
done

echo "# tally: $times rounds in $((SECONDS - start)) s$( ((load)) && echo " under load")"
for f in "${!failed_count[@]}"; do
  echo "#   $f failed ${failed_count[$f]} of $times (output: grep -l in $logs)"
done
for k in "${failed_rounds[@]}"; do
  echo "## round $k ($logs/round-$k.log), its last 60 lines:"
  tail -n 60 "$logs/round-$k.log"
done
echo "repeat: $passed passed, $failed failed"
((failed == 0))
