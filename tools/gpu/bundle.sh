#!/usr/bin/env bash
# Gathers what the GPU campaign (tools/gpu/campaign.sh) needs on a machine
# that has a GPU, a CUDA 13 runtime and a Python 3.12, and nothing of
# rtaccel's build dependencies: the programs, the Python package with its
# extension built for that Python, the test programs that need a GPU, and
# every shared library they load that such a machine may lack, found with
# ldd. glibc, libstdc++, libgcc_s and the CUDA libraries are the machine's own.
#
#   tools/gpu/bundle.sh [--build DIR] [--python PY312] [--out DIR]
#   tools/gpu/bundle.sh --check DIR       what `make gpu-bundle` runs last
#   tools/gpu/bundle.sh --python-path     the Python 3.12 it builds for
#
# --check loads everything in the bundle with a clean environment (env -i,
# LD_LIBRARY_PATH of the bundle alone) and fails on a library that is
# neither in the bundle nor one of the machine's own; then it runs the
# package's command line from there. Exit 77: no Python 3.12 here.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

BUILD=build
OUT=build-gpu/bundle
PY312=${PY312:-}
CHECK=
PRINT_PYTHON=

die() { echo "gpu-bundle: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--python) PY312=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--check) CHECK=$2; shift 2 ;;
	--python-path) PRINT_PYTHON=1; shift ;;
	*) die "unknown argument '$1' (see the head of $0)" ;;
	esac
done

# Libraries every machine with a CUDA driver and toolkit has: never carried.
# Carrying an older libstdc++ would break the newer programs there (PyTorch).
BASE='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libgcc_s\.so|libstdc\+\+\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnvidia-)'

elves() { find "$1" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print; }

check() {
	local dir=$1 bad=0
	dir=$(cd "$dir" && pwd)
	[ -f "$dir/rtaccel/cli.py" ] || die "$dir is not a bundle (no rtaccel/cli.py)"
	# the CUDA libraries are the GPU machine's own: here, the toolkit's
	local cuda_lib=/usr/local/cuda/lib64
	while read -r elf; do
		while read -r line; do
			case $line in
			*"not found"*) echo "gpu-bundle: ${elf#$dir/}: $line" >&2; bad=1 ;;
			*"=> /"*)
				local name=${line%% *} path=${line#*=> }
				path=${path%% (*}
				if [[ $path != "$dir"/* && $path != "$cuda_lib"/* ]] && ! [[ $name =~ $BASE ]]; then
					echo "gpu-bundle: ${elf#$dir/} loads $path from outside the bundle" >&2
					bad=1
				fi ;;
			esac
		done < <(env -i LD_LIBRARY_PATH="$dir/libs:$cuda_lib" ldd "$elf" 2>&1 | sed 's/^[[:space:]]*//')
	done < <(elves "$dir")
	[ $bad = 0 ] || die "the bundle would not load on a machine without this one's packages"
	local py
	py=$(find_python) || die "no Python 3.12 here to try the package with (set PY312)"
	local home
	home=$(mktemp -d)
	env -i HOME="$home" PATH=/usr/bin:/bin PYTHON="$py" LD_LIBRARY_PATH="$cuda_lib" \
		"$dir/bin/rtaccel" analyze "$dir/examples/paam_case_study_1_cuda.yaml" >/dev/null ||
		{ rm -rf "$home"; die "rtaccel analyze failed from the bundle with a clean environment"; }
	rm -rf "$home"
	echo "gpu-bundle: $dir: every program and library loads with the bundle's libraries alone;" \
	     "rtaccel runs from it with Python $("$py" -c 'import platform; print(platform.python_version())')"
}

find_python() {
	for p in "$PY312" "$(command -v python3.12 || true)" "$HOME/.pyenv/versions/"3.12*/bin/python3; do
		[ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null &&
			{ echo "$p"; return 0; }
	done
	return 1
}

if [ -n "$PRINT_PYTHON" ]; then
	find_python
	exit
fi
if [ -n "$CHECK" ]; then
	check "$CHECK"
	exit 0
fi

LIB=python/rtaccel/lib
[ -x "$LIB/rtaccel-server" ] && [ -x "$LIB/rtaccel-cuda-bench" ] && [ -f "$LIB/librtaccel_cuda.so" ] ||
	die "build with nvcc first (make build): $LIB has no cuda module or CUDA programs"
if ! PY312=$(find_python); then
	echo "gpu-bundle: skipped: a Python 3.12 is needed to build the extension for the GPU machine's Python (set PY312)" >&2
	exit 77
fi

# The extension for Python 3.12, beside the developer's own: only _core and
# what it links are built.
cmake -S . -B build-py312 -G Ninja -DCMAKE_BUILD_TYPE=Release -DRTACCEL_TESTS=OFF -DRTACCEL_PYTHON=ON \
	-DPython_EXECUTABLE="$PY312" -DPYBIND11_FINDPYTHON=ON >/dev/null
cmake --build build-py312 --target _core >/dev/null
ext=$(ls python/rtaccel/_core.cpython-312-*.so)

rm -rf "$OUT"
mkdir -p "$OUT"/rtaccel/lib "$OUT"/libs "$OUT"/bin "$OUT"/tests "$OUT"/bench "$OUT"/examples
# The package's Python files, its subpackages (commands/) included.
(cd python && find rtaccel -name '*.py' -not -path 'rtaccel/lib/*') | while read -r f; do
	mkdir -p "$OUT/$(dirname "$f")" && cp "python/$f" "$OUT/$f"
done
cp "$ext" "$OUT"/rtaccel/
# Not the ros layer's program: it loads ROS 2's wheels from the checkout's
# virtualenv, which the GPU machine has not (it reaches no registry, and the
# wheels weigh more than may be carried); the campaign runs no ROS 2.
find "$LIB" -mindepth 1 -maxdepth 1 ! -name 'rtaccel-ros-*' -exec cp -P {} "$OUT"/rtaccel/lib/ \;
cp examples/*.yaml "$OUT"/examples/
cp bench/cuda_graphs.py "$OUT"/bench/
# the tests that need a GPU: the cuda backend's, and the CUDA program whose locks are traced
cp "$BUILD"/accel_server_tests "$BUILD"/cuda_locks "$OUT"/tests/
strip --strip-debug "$OUT"/rtaccel/lib/* "$OUT"/rtaccel/*.so "$OUT"/tests/* 2>/dev/null || true

# Libraries the programs load that are not the machine's own.
while read -r elf; do
	LD_LIBRARY_PATH="$OUT/libs" ldd "$elf" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done < <(elves "$OUT") | sort -u | while read -r name path; do
	[[ $name =~ $BASE ]] || [[ $path == "$ROOT"/* ]] || cp -Ln "$path" "$OUT/libs/$name"
done

cat >"$OUT"/bin/rtaccel <<'EOF'
#!/bin/sh
# rtaccel from the bundle: its package, programs and libraries, the machine's Python.
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$here/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "${PYTHON:-python3}" -m rtaccel.cli "$@"
EOF
chmod +x "$OUT"/bin/rtaccel
"$PY312" -c 'import platform; print("python", platform.python_version())' >"$OUT"/python-version.txt
git rev-parse HEAD >"$OUT"/commit.txt 2>/dev/null || true

size=$(du -sm "$OUT" | cut -f1)
[ "$size" -lt 48 ] || die "$OUT is $size MiB: over what may be carried beside the checkout"
echo "gpu-bundle: $OUT ($size MiB)"
check "$OUT"
