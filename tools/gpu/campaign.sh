#!/usr/bin/env bash
# The GPU campaign: every CUDA path of rtaccel, run on a machine with a GPU
# from the bundle `make gpu-bundle` makes (build-gpu/bundle), in two parts of
# under 9 minutes each. Each step has its own time limit and records its own
# result or error (tools/gpu/record.py); none stops the campaign.
#
#   tools/gpu/campaign.sh PART OUT [BUNDLE]
#
# PART 1: the cuda backend's tests, the runtime's locks per call and under
#         contention, the interposer's cost per launch, priority inversion
#         plain, under --pi and --pi --boost, and traced, cross-priority
#         preemption (PAAM Table I)
# PART 2: request overhead cuda beside cpu, case study 1 under ros2, picas
#         and paam with the bound, CUDA graphs against eager launches
#         (PyTorch), BWLOCK++ on the GPU (copies and kernels beside memory
#         hogs, unregulated and under the bandwidth lock)
# PART 3: (when there is time) the inversion in depth: longer runs, traced
#         under --pi and --pi --boost, and untraced with more copiers
# PART 4: all five in one run: case study 1 on CUDA under paam, beside a
#         memory hog on each hog core, with the interposer tracing the run's
#         programs; with isolation (the regulator on the hogs' cores, the
#         bandwidth lock for chains 1 and 2), with isolation and gangs, and
#         without; each run's one timeline checked (tools/gpu/timeline.py)
# PART 5: GPU segments that move data: case study 1 on CUDA with chains 1
#         and 2's segments turned into vecadd (their inputs copied from host
#         memory to the GPU and the sum back), alone, beside the memory hogs
#         without isolation, and beside them with the regulator and the
#         bandwidth lock (and gangs); alone under ros2 and picas; then with
#         those chains' CPU work walking DRAM too, alone, beside the hogs and
#         isolated; the cuda backend's tests first
# PART 6: the long run: the walking workload of part 5 with isolation
#         beside the memory hogs for LONG_RUN_S seconds (360; the device
#         time a session has), its processes' memory and descriptors
#         sampled through it
#
# CAMPAIGN_STEPS="NAME ..." runs those steps of the part alone (a re-run).
# OUT gets partPART.tar.gz (every step's JSON and files), summary-partPART.md
# and results-partPART.json: few files, as a remote run can bring back.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PART=${1:?usage: campaign.sh PART OUT [BUNDLE]}
OUT=${2:?usage: campaign.sh PART OUT [BUNDLE]}
B=$(cd "${3:-build-gpu/bundle}" && pwd) || exit 2
BUDGET_S=${CAMPAIGN_BUDGET_S:-510}

W=$(mktemp -d /tmp/rtaccel-campaign.XXXXXX)/part$PART
# What the part made is in OUT's archive at the end; the work folder goes.
trap 'rm -rf "$(dirname "$W")"' EXIT
mkdir -p "$W" "$OUT"
export HOME=$W/home PYTHONUNBUFFERED=1
mkdir -p "$HOME"
export PATH="$B/bin:$PATH" PYTHONPATH="$B" LD_LIBRARY_PATH="$B/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LIB=$B/rtaccel/lib
START=$(date +%s)

# step NAME TIMEOUT CMD...: skipped once the part's budget is spent, or
# when CAMPAIGN_STEPS (names, space-separated) does not name it
step() {
	local name=$1 timeout=$2
	shift 2
	if [ -n "${CAMPAIGN_STEPS:-}" ] && [[ " $CAMPAIGN_STEPS realtime environment " != *" $name "* ]]; then
		return
	fi
	local left=$((BUDGET_S - ($(date +%s) - START)))
	if [ "$left" -lt 10 ]; then
		python3 "$ROOT/tools/gpu/record.py" step "$W" "$name" 1 -- \
			"echo 'not run: the part had used its ${BUDGET_S} s' >&2; exit 1"
		return
	fi
	[ "$timeout" -le "$left" ] || timeout=$left
	python3 "$ROOT/tools/gpu/record.py" step "$W" "$name" "$timeout" -- "$@"
}

env_step() {
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	nvcc --version | tail -1
	python3 -c 'import platform, torch; print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda)'
	uname -r; nproc; cat "$B/commit.txt"
	cat /proc/self/cgroup
}

# The hogs' cores: 2..13 (core 0 runs the GPU task), fewer on a small machine.
N=$(nproc)
HOG_FIRST=$((N > 2 ? 2 : 1))
HOG_LAST=$((N - 1 < 13 ? N - 1 : 13))

# A memory hog (sequential writes over 64 MiB) on each hog core for S
# seconds, each through WRAP (empty, or the regulator's run-be).
hogs() {
	local seconds=$1 wrap=${2:-}
	for c in $(seq "$HOG_FIRST" "$HOG_LAST"); do
		$wrap taskset -c "$c" "$LIB/rtaccel-membench" write --size 64M --duration "$seconds" >/dev/null 2>&1 &
	done
}

bwlock_corun() {
	hogs 20
	sleep 1
	"$LIB/rtaccel-cuda-bench" jobs --seconds 15 --mb 64 --period-ms 50 --core 0
	local rc=$?
	wait
	return $rc
}

bwlock_regulated() {
	"$LIB/rtaccel-isolate" regulate --cores "$HOG_FIRST-$HOG_LAST" --meter cpu-time --bwlock campaign \
		--duration 24 --summary "$W/regulator.json" &
	local reg=$!
	sleep 1
	hogs 20 "$LIB/rtaccel-isolate run-be --"
	sleep 1
	rtaccel shim --bwlock campaign -- "$LIB/rtaccel-cuda-bench" jobs --seconds 15 --mb 64 --period-ms 50 --core 0
	local rc=$?
	wait
	# the lock and the regulator's region are named objects: gone with the run
	rm -f /dev/shm/rtaccel-bwlock.campaign /dev/shm/rtaccel-regulator.campaign
	return $rc
}

case_study() {
	local rc=0
	for p in ros2 picas paam; do
		rtaccel run "$B/examples/paam_case_study_1_cuda.yaml" --policy $p --duration 30 \
			--out "$W/cuda-$p" --quiet || rc=1
	done
	rtaccel compare "$W/cuda-ros2" "$W/cuda-picas" "$W/cuda-paam" || rc=1
	rtaccel report "$W/cuda-ros2" "$W/cuda-picas" "$W/cuda-paam" --out "$W/report" >/dev/null || rc=1
	return $rc
}

# Case study 1 on CUDA with an isolation section for this machine's hog cores.
isolated_workload() {
	cat "$B/examples/paam_case_study_1_cuda.yaml"
	echo "isolation:"
	echo "  regulator: {cores: [$(seq -s, "$HOG_FIRST" "$HOG_LAST")], period_us: 1000, be_peak_mbps: 10000, cost_us: 50}"
	echo "  bandwidth_lock: {chains: [chain1, chain2], threshold_mbps: 0}"
}

# one_timeline NAME REQUIRE FLAGS...: a paam run of that workload under the
# interposer, a memory hog on each hog core, and its timeline checked for
# the event categories REQUIRE names.
one_timeline() {
	local name=$1 require=$2 rc=0
	shift 2
	local be=()
	for c in $(seq "$HOG_FIRST" "$HOG_LAST"); do
		be+=(--best-effort "taskset -c $c $LIB/rtaccel-membench write --size 64M --json")
	done
	rtaccel run "$W/case_study_1_cuda_isolated.yaml" --policy paam --duration 40 --shim trace "$@" \
		"${be[@]}" --out "$W/timeline-$name" --quiet || rc=1
	python3 "$ROOT/tools/gpu/timeline.py" "$W/timeline-$name" --require "$require" || rc=1
	return $rc
}

# Case study 1 on CUDA with chains 1 and 2's segments moving data: vecadd
# of two vectors in the callback's shared region, copied to the GPU and the
# sum back, sized by rtaccel run to 0.9 of the 1.5 ms declared (inputs near
# the 64 MiB buffer limit on an H100). With ISOLATED, the isolation section.
# With WALK, their CPU work walks a 64 MiB working set too (DRAM-bound),
# for half their WCET alone, as examples/autoware_memory.yaml declares its
# walks: at 0.9 (the default), the walks ran over their WCETs in half the
# instances even without the hogs (docs/benchmarks.md).
memory_workload() {
	local walk=''
	[ -n "${2:-}" ] && walk='/\{name: c[12]_t\d/ and s#cpu_us: (\d+), #"cpu_us: $1, work_us: " . int($1 / 2) . ", memory: {working_set_kb: 65536, pattern: stream}, "#e'
	sed -E '/\{name: c[12]_t[0-9]/s/service: busy, wcet_us: 10000/service: vecadd, wcet_us: 1500/' \
		"$B/examples/paam_case_study_1_cuda.yaml" | perl -pe "$walk" | sed 's/^name: .*/name: paam_case_study_1_cuda_memory/'
	if [ -n "${1:-}" ]; then
		echo "isolation:"
		echo "  regulator: {cores: [$(seq -s, "$HOG_FIRST" "$HOG_LAST")], period_us: 1000, be_peak_mbps: 10000, cost_us: 50}"
		echo "  bandwidth_lock: {chains: [chain1, chain2], threshold_mbps: 0}"
	fi
}

# memory_run NAME HOGS FLAGS...: a run of the memory workload for RUN_S
# seconds (40) under POLICY (paam), with a memory hog on each hog core when
# HOGS is 1.
memory_run() {
	local name=$1 with_hogs=$2 workload=${MEMORY_WORKLOAD:-$W/case_study_1_cuda_memory.yaml}
	shift 2
	local be=()
	if [ "$with_hogs" = 1 ]; then
		for c in $(seq "$HOG_FIRST" "$HOG_LAST"); do
			be+=(--best-effort "taskset -c $c $LIB/rtaccel-membench write --size 64M --json")
		done
	fi
	rtaccel run "$workload" --policy "${POLICY:-paam}" --duration "${RUN_S:-40}" "$@" "${be[@]}" \
		--out "$W/memory-$name" --quiet
}

# compare_runs FOLDER...: the runs of those folders that this call made
# (CAMPAIGN_STEPS can leave some out). Exit 1 of compare, a run over its
# bound, is a result the table shows (the runs without isolation are there
# to show it), not a failure of the step.
compare_runs() {
	local ran=()
	for d in "$@"; do
		[ -f "$d/summary.json" ] && ran+=("$d")
	done
	[ ${#ran[@]} -gt 0 ] || { echo "no run of these was made: $*" >&2; return 1; }
	rtaccel compare "${ran[@]}"
	local rc=$?
	[ "$rc" -eq 1 ] && rc=0
	return $rc
}

export -f env_step hogs compare_runs bwlock_corun bwlock_regulated case_study one_timeline memory_workload memory_run
export ROOT
export B W LIB HOG_FIRST HOG_LAST

echo "campaign part $PART: bundle $B, work folder $W"
# Real-time priorities for this shell and all it starts, where root can
# grant them (the GPU machine's cgroup has no real-time budget).
rtaccel realtime --pid $$ --json >"$W/realtime-grant.out" 2>&1
cat "$W/realtime-grant.out"
step realtime 20 "cat $W/realtime-grant.out; rtaccel realtime --json"
step environment 30 env_step
case $PART in
1)
	step cuda_tests 180 env RTACCEL_LIB_DIR="$LIB" RTACCEL_CUDA_MODULE="$LIB/librtaccel_cuda.so" "$B/tests/accel_server_tests" --gtest_filter='*Cuda*:Direct*' --gtest_brief=1
	step lock_usage 60 "rtaccel shim --trace --out $W/trace-1 -- $B/tests/cuda_locks 1 20 >/dev/null && rtaccel lockstat $W/trace-1 --json"
	step lock_contention 90 "rtaccel shim --trace --out $W/trace-64 -- $B/tests/cuda_locks 64 20 >/dev/null && rtaccel lockstat $W/trace-64 --json"
	step launch_plain 60 "$LIB/rtaccel-cuda-bench" launch --iterations 20000
	step launch_shim 60 rtaccel shim -- "$LIB/rtaccel-cuda-bench" launch --iterations 20000
	step launch_shim_trace 90 rtaccel shim --trace --out "$W/trace-launch" -- "$LIB/rtaccel-cuda-bench" launch --iterations 20000
	step launch_contention_64 90 "$LIB/rtaccel-cuda-bench" launch --threads 64 --iterations 2000
	# each twice: the worst launch is one event
	for run in 1 2; do
		step inversion_plain_$run 30 rtaccel shim -- "$LIB/rtaccel-cuda-inversion" --seconds 15
		step inversion_pi_$run 30 rtaccel shim --pi -- "$LIB/rtaccel-cuda-inversion" --seconds 15
		# the runtime's rwlocks too: phase-fair, their holders boosted
		step inversion_pi_boost_$run 30 rtaccel shim --pi --boost -- "$LIB/rtaccel-cuda-inversion" --seconds 15
	done
	# which lock the launching thread waited on, and for how long
	step inversion_traced 60 "rtaccel shim --trace --out $W/trace-inversion -- $LIB/rtaccel-cuda-inversion --seconds 30 && rtaccel lockstat $W/trace-inversion --json --top 8"
	step inversion_traced_pi 60 "rtaccel shim --trace --pi --out $W/trace-inversion-pi -- $LIB/rtaccel-cuda-inversion --seconds 30 && rtaccel lockstat $W/trace-inversion-pi --json --top 8"
	step preemption 150 rtaccel bench preemption --backend cuda --iterations 200 --json
	;;
2)
	step request_overhead_cuda 60 rtaccel bench request-overhead --backend cuda --requests 5000 --json
	step request_overhead_cpu 60 rtaccel bench request-overhead --backend cpu --requests 5000 --json
	step case_study_1_cuda 200 case_study
	step cuda_graphs 150 python3 "$B/bench/cuda_graphs.py" --inferences 500 --json
	step bwlock_solo 30 "$LIB/rtaccel-cuda-bench" jobs --seconds 15 --mb 64 --period-ms 50 --core 0
	step bwlock_corun 40 bwlock_corun
	step bwlock_regulated 45 bwlock_regulated
	;;
3)
	# the inversion in depth: the rare burst-long launches under --pi, traced
	for run in 1 2; do
		step inversion_traced_pi_long_$run 100 "rtaccel shim --trace --pi --out $W/trace-inversion-pi-long-$run -- $LIB/rtaccel-cuda-inversion --seconds 75 && rtaccel lockstat $W/trace-inversion-pi-long-$run --json --top 8"
	done
	for run in 1 2; do
		step inversion_traced_pi_boost_$run 60 "rtaccel shim --trace --pi --boost --out $W/trace-inversion-boost-$run -- $LIB/rtaccel-cuda-inversion --seconds 30 && rtaccel lockstat $W/trace-inversion-boost-$run --json --top 8"
	done
	# a minute each, untraced, with twice the copiers
	step inversion_long_plain 75 rtaccel shim -- "$LIB/rtaccel-cuda-inversion" --seconds 60 --copiers 8
	step inversion_long_pi 75 rtaccel shim --pi -- "$LIB/rtaccel-cuda-inversion" --seconds 60 --copiers 8
	step inversion_long_pi_boost 75 rtaccel shim --pi --boost -- "$LIB/rtaccel-cuda-inversion" --seconds 60 --copiers 8
	;;
4)
	isolated_workload >"$W/case_study_1_cuda_isolated.yaml"
	step analyze_isolated 30 rtaccel analyze "$W/case_study_1_cuda_isolated.yaml"
	step timeline_isolated 100 "one_timeline isolated cuda,gpu,callback,kernel,regulator"
	step timeline_isolated_gang 100 "one_timeline gang cuda,gpu,callback,kernel,regulator,gang --gang"
	step timeline_unisolated 100 "one_timeline unisolated cuda,gpu,callback,kernel --no-isolation"
	step compare_timelines 30 compare_runs "$W/timeline-unisolated" "$W/timeline-isolated" "$W/timeline-gang"
	;;
5)
	step cuda_tests 60 env RTACCEL_LIB_DIR="$LIB" RTACCEL_CUDA_MODULE="$LIB/librtaccel_cuda.so" "$B/tests/accel_server_tests" --gtest_filter='*Cuda*:Direct*' --gtest_brief=1
	# this machine's overheads and timer latency, which the runs' bounds take
	step calibrate 60 rtaccel calibrate
	memory_workload isolated >"$W/case_study_1_cuda_memory.yaml"
	step analyze_memory 30 rtaccel analyze "$W/case_study_1_cuda_memory.yaml"
	step memory_alone 80 "memory_run alone 0 --no-isolation"
	step memory_hogs 80 "memory_run hogs 1 --no-isolation"
	step memory_isolated 80 "memory_run isolated 1 --isolation"
	step memory_isolated_gang 80 "memory_run gang 1 --isolation --gang"
	step compare_memory 30 compare_runs "$W/memory-alone" "$W/memory-hogs" "$W/memory-isolated" "$W/memory-gang"
	# ros2 and picas: every executor drives the GPU itself, its inputs on
	# memory attached to the device
	step direct_ros2 80 "POLICY=ros2 memory_run ros2 0 --no-isolation"
	step direct_picas 80 "POLICY=picas memory_run picas 0 --no-isolation"
	step compare_direct 30 compare_runs "$W/memory-ros2" "$W/memory-picas" "$W/memory-alone"
	# the callbacks' own CPU work walking DRAM as well
	memory_workload isolated walk >"$W/case_study_1_cuda_walk.yaml"
	export MEMORY_WORKLOAD=$W/case_study_1_cuda_walk.yaml
	step walk_alone 80 "memory_run walk-alone 0 --no-isolation"
	step walk_hogs 80 "memory_run walk-hogs 1 --no-isolation"
	step walk_isolated 80 "memory_run walk-isolated 1 --isolation"
	step compare_walk 30 compare_runs "$W/memory-walk-alone" "$W/memory-walk-hogs" "$W/memory-walk-isolated"
	;;
6)
	step calibrate 60 rtaccel calibrate
	memory_workload isolated walk >"$W/case_study_1_cuda_walk.yaml"
	export MEMORY_WORKLOAD=$W/case_study_1_cuda_walk.yaml
	long=${LONG_RUN_S:-360}
	step walk_isolated_long $((long + 60)) "RUN_S=$long memory_run walk-isolated-long 1 --isolation"
	step compare_long 30 compare_runs "$W/memory-walk-isolated-long"
	;;
*) echo "campaign.sh: PART is 1 to 6" >&2; exit 2 ;;
esac

python3 "$ROOT/tools/gpu/record.py" summary "$W" "rtaccel GPU campaign, part $PART"
cp "$W/summary.md" "$OUT/summary-part$PART.md"
cp "$W/results.json" "$OUT/results-part$PART.json"
tar -C "$(dirname "$W")" -czf "$OUT/part$PART.tar.gz" "part$PART"
echo "campaign part $PART: $(( $(date +%s) - START )) s; $OUT/summary-part$PART.md"
