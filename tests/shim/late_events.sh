#!/bin/sh
# late_events.sh PROGRAM SHIM OUTDIR: runs tests/shim/late_events.c under the
# tracer and checks that its last, 20 ms call reached the timeline although
# the timeline was full by then.
set -eu
program=$1 shim=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
LD_PRELOAD=$shim RTACCEL_SHIM=trace RTACCEL_SHIM_OUT=$out "$program"
python3 - "$out" <<'PY'
import glob, json, sys
out = sys.argv[1]
report = json.load(open(glob.glob(f"{out}/rtaccel-shim.*[0-9].json")[0]))
trace = json.load(open(glob.glob(f"{out}/rtaccel-shim.*.trace.json")[0]))
assert report["dropped_timeline_events"] > 0, "the run did not fill the timeline"
assert report["late_long_events"] >= 1, report["late_long_events"]
syncs = [e for e in trace["traceEvents"]
         if e.get("name") == "cudaStreamSynchronize" and e.get("dur", 0) >= 15000]
assert syncs, "the 20 ms cudaStreamSynchronize is not on the timeline"
print(f"late_events: {report['dropped_timeline_events']} short events dropped, "
      f"{report['late_long_events']} long one(s) kept, the longest {max(e['dur'] for e in syncs):.0f} us")
PY
