#!/usr/bin/env bash
# Builds and installs rtaccel as a user does (pip install . into a fresh
# virtualenv), then uses it from outside the checkout: the version, the
# analysis, the server (started by `rtaccel server`, checked by a client),
# a short benchmark and the interposer, all found without the source tree.
#   check_wheel.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$(realpath "$1")
work=$(realpath -m "$2")
rm -rf "$work/venv" "$work/run"
mkdir -p "$work/run"
/usr/bin/python3 -m venv "$work/venv"
# pip builds the wheel first, which compiles rtaccel with CMake through
# scikit-build-core: minutes, and nothing to see without -v. Its log is kept
# and shown where it fails.
echo "check_wheel: pip install $src: builds the wheel (CMake through scikit-build-core, minutes) into $work/venv"
if ! "$work/venv/bin/python" -m pip install -v --disable-pip-version-check "$src" >"$work/pip.log" 2>&1; then
  tail -n 100 "$work/pip.log"; echo "pip install failed (the whole log: $work/pip.log)"; exit 1
fi
rtaccel=$work/venv/bin/rtaccel
cd "$work/run"  # nothing of the checkout is on the way from here

version=$(sed -n 's/^project(rtaccel VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ "$("$rtaccel" --version)" = "rtaccel $version" ] || { echo "rtaccel --version: $("$rtaccel" --version)"; exit 1; }

pkg=$("$work/venv/bin/python" -c 'import rtaccel, pathlib; print(pathlib.Path(rtaccel.__file__).parent)')
case "$pkg" in "$src/python"*) echo "rtaccel was imported from the checkout ($pkg)"; exit 1 ;; esac
for f in "$pkg"/lib/rtaccel-server "$pkg"/lib/rtaccel-exec "$pkg"/lib/librtaccel_shim.so "$pkg"/examples/quickstart.yaml; do
  [ -e "$f" ] || { echo "not in the wheel: ${f#$pkg/}"; exit 1; }
done

"$rtaccel" analyze "$pkg/examples/quickstart.yaml" | grep -q '^hot ' || { echo "rtaccel analyze failed"; exit 1; }
# The shipped examples, found from here by their names as a user finds them.
"$rtaccel" examples | grep -q '^quickstart ' || { echo "rtaccel examples does not list quickstart"; exit 1; }
for given in quickstart.yaml examples/quickstart.yaml; do
  "$rtaccel" analyze "$given" 2>/dev/null | grep -q '^hot ' || { echo "rtaccel analyze $given failed here"; exit 1; }
done
"$rtaccel" examples --copy mine >/dev/null && cmp -s mine/quickstart.yaml "$pkg/examples/quickstart.yaml" \
  || { echo "rtaccel examples --copy did not copy the examples"; exit 1; }
out=$("$rtaccel" analyze /nonexistent.yaml 2>&1) && { echo "a missing workload was accepted"; exit 1; }
case "$out" in *"cannot open the file"*) ;; *) echo "rtaccel analyze /nonexistent.yaml: $out"; exit 1 ;; esac

# rtaccel server is the daemon: readiness handshake, then a client's request.
mkfifo ready
"$rtaccel" server --socket "$work/run/server.sock" --no-fifo --device 0 --ready-fd 9 9>ready 2>server.log &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
timeout 10 head -n1 ready | grep -q '^ready$' || { echo "rtaccel server did not get ready:"; cat server.log; exit 1; }
"$work/venv/bin/python" - "$work/run/server.sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
print("a client connected to rtaccel server")
PY
kill "$server"; wait "$server" 2>/dev/null || true; trap - EXIT

# A short benchmark: real requests, whose figures a broken server gets wrong.
"$rtaccel" bench request-overhead --no-fifo --requests 200 --json | "$work/venv/bin/python" -c '
import json, sys
d = json.load(sys.stdin)
assert d["requests"] == 200, d
assert 0 < d["p50_us"] <= d["p99_us"] <= d["max_us"], d
assert d["phases"]["kernel"]["p50_us"] >= 80, d  # the 100 us kernel ran
print("rtaccel bench request-overhead: ok, p50", d["p50_us"], "us")'

# The interposer from the wheel, under a program whose library takes locks
# in two threads: the report names the program and liblzma's locks.
head -c 4000000 /dev/urandom > blob
"$rtaccel" shim --trace --out shim-out -- xz -T2 -k -1 blob
"$work/venv/bin/python" - shim-out <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
reports = [p for p in out.glob("rtaccel-shim.*.json") if not p.name.endswith(".trace.json")]
assert len(reports) == 1, reports
report = json.loads(reports[0].read_text())
assert report["command"][0] == "xz", report["command"]
lzma = [l for l in report["locks"] if "liblzma" in l["created_at"]]
assert lzma and sum(l["acquisitions"] for l in lzma) > 0, report["locks"]
trace = json.loads(reports[0].with_suffix(".trace.json").read_text())["traceEvents"]
assert any(e.get("ph") == "M" and e.get("pid") == report["pid"] for e in trace), trace[:3]
print(f"rtaccel shim --trace: ok, {len(lzma)} liblzma locks seen")
PY
echo "wheel: rtaccel $version installed by pip and used outside the checkout"
