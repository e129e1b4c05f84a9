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
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$src"
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

"$rtaccel" bench request-overhead --no-fifo --requests 200 --json | "$work/venv/bin/python" -c \
  'import json, sys; d = json.load(sys.stdin); assert d, d; print("rtaccel bench request-overhead: ok")'
"$rtaccel" shim --trace --out shim-out -- /bin/true
ls shim-out/rtaccel-shim.*.trace.json >/dev/null || { echo "rtaccel shim --trace wrote no trace"; exit 1; }
echo "wheel: rtaccel $version installed by pip and used outside the checkout"
