#!/usr/bin/env bash
# Runs the POSIX conformance program without the interposer and under one
# of its modes, and fails if any result differs, except the departures that
# docs/locks.md names for that mode.
#   conformance.sh PROGRAM SHIM_SO MODE OUT_DIR
set -euo pipefail
program=$1 shim=$2 mode=$3 out=$4
mkdir -p "$out"
plain=$out/conformance-plain.txt
under=$out/conformance-${mode//,/_}.txt

# Exit 77: a part could not run here (no SCHED_FIFO); the rest is compared,
# then the test ends as that skip.
rc=0
"$program" >"$plain" || rc=$?
rc_under=0
LD_PRELOAD=$shim RTACCEL_SHIM=$mode RTACCEL_SHIM_OUT=$out "$program" >"$under" || rc_under=$?
for r in $rc $rc_under; do
  case $r in 0|77) ;; *) grep -h '^FAIL' "$plain" "$under" || true
                         echo "posix_conformance exited $rc (glibc), $rc_under (RTACCEL_SHIM=$mode)"; exit 1 ;; esac
done

# Departures on purpose (docs/locks.md, "What the interposer changes"):
# phase-fair rwlocks order a reader behind a writer that waits for the lock,
# unless the reader runs at a real-time priority above every waiting writer's
# (as POSIX requires of SCHED_FIFO and SCHED_RR readers).
# pi: a mutex the interposer made PI, unlocked by a thread that does not
# hold it while another waits for it, cannot be released (the kernel hands a
# PI futex on at its owner's unlock only): EPERM, glibc's PI answer, where
# the plain mutex releases it.
departures='^$'
case ",$mode," in
  *,phase-fair,*|*,boost,*)
    departures+='|^rw\.[a-z_]+\.fifo_reader_(equal|sched_other)\.tryrdlock ' ;;
esac
case ",$mode," in
  *,pi,*)
    departures+='|^mutex\.(static|null_attr|default|normal|normal_pshared)\.unowned_contended\.unlock ' ;;
esac

if ! diff <(grep -Ev "$departures" "$plain") <(grep -Ev "$departures" "$under") >"$out/conformance-${mode//,/_}.diff"; then
  echo "under RTACCEL_SHIM=$mode, results differ from glibc's (< glibc, > interposed):"
  cat "$out/conformance-${mode//,/_}.diff"
  exit 1
fi
# The program destroys rwlocks that exited threads still hold: glibc allows
# it and so does the shim, but its trace reports the misuse.
case ",$mode," in
  *,trace,*)
    case ",$mode," in *,phase-fair,*|*,boost,*)
      grep -lq '"destroyed_while_held": true' "$out"/rtaccel-shim.*[0-9].json || {
        echo "under RTACCEL_SHIM=$mode, the trace does not report rwlocks destroyed while held"; exit 1; } ;;
    esac ;;
esac
echo "RTACCEL_SHIM=$mode: $(grep -c . "$under") results, identical to glibc's$( [ "$departures" = '^$' ] || echo ' (but the named departures)')"
if [ "$rc" = 77 ] || [ "$rc_under" = 77 ]; then
  grep -h '^SKIP' "$plain" | sort -u
  exit 77
fi
