#!/usr/bin/env bash
# Runs the net layer's RDMA tests and benchmarks in a QEMU guest whose kernel
# has Soft-RoCE (rdma_rxe) between network namespaces, which this machine's
# kernel lacks. Nothing is installed on the host but Debian packages: the
# guest kernel comes from trixie-backports through a private apt state and is
# unpacked under the output folder; the guest is a busybox initramfs with the
# built test programs, their libraries and the kernel modules they need.
#
#   tools/testbed/rdma.sh [--bench] [--build DIR] [--out DIR]
#
#   --bench   also run rtaccel-net-bench overhead and priority over rdma
#             between two namespaces (emulated: times show function, not speed)
#   --build   the CMake build with net_flow_link and net_flow_order (build)
#   --out     kernel, initramfs and logs (build/testbed)
#
# Exit: 0 every test passed; 1 one failed; 77 skipped, with the reason (no
# QEMU and no way to install it, no guest kernel to be had, not root), or 1
# where RTACCEL_TEST_REQUIRE names qemu (tests/harness/skip.h).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=build OUT=build/testbed BENCH=0
while (($#)); do
  case "$1" in
    --bench) BENCH=1 ;;
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    *) echo "usage: $0 [--bench] [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
BUILD=$(realpath "$BUILD")
LIBDIR=$(realpath python/rtaccel/lib)
say() { echo "# rdma test bed: $*"; }
skip() {
  if [[ ",${RTACCEL_TEST_REQUIRE:-}," =~ ,(qemu|all), ]]; then
    say "FAIL: required qemu: $* (RTACCEL_TEST_REQUIRE says this machine has it)"; exit 1
  fi
  say "SKIP: needs qemu: $*"; exit 77
}

# ---- the host's packages ----
PKGS=(qemu-system-x86 busybox-static rdma-core ibverbs-providers iproute2 kmod cpio zstd)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  [ "$(id -u)" -eq 0 ] || skip "needs ${missing[*]} (install them, or run as root)"
  say "installing ${missing[*]}"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${missing[@]}"; } > "$OUT/apt-host.log" 2>&1 || skip "apt-get install failed (see $OUT/apt-host.log)"
fi
for prog in net_flow_link net_flow_order; do
  [ -x "$BUILD/$prog" ] || skip "$BUILD/$prog is missing: build rtaccel with tests first (make build)"
done
# Not `ldd | grep -q`: grep leaving early can kill ldd with SIGPIPE, which
# pipefail reports as a failure of the pipe.
case "$(ldd "$BUILD/net_flow_link")" in
  *librdmacm*) ;;
  *) skip "rtaccel was built without rdma-core (libibverbs-dev, librdmacm-dev)" ;;
esac

# ---- the guest kernel: the newest real-time 7.x kernel of trixie-backports ----
# (Debian 12's 6.1 runs rxe only in the initial namespace.)
K=$OUT/kernel
KREL=$(ls "$K/usr/lib/modules" 2>/dev/null | head -1)
if [ -z "$KREL" ]; then
  A=$OUT/apt
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/debs" "$K"
  echo 'deb http://deb.debian.org/debian trixie-backports main' > "$A/sources.list"
  AO=(-o "Dir::Etc::sourcelist=$A/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$A/lists"
      -o "Dir::Cache=$A/cache" -o Dir::State::status=/dev/null -o Debug::NoLocking=1)
  say "fetching a guest kernel from trixie-backports"
  apt-get "${AO[@]}" update -q > "$OUT/apt-kernel.log" 2>&1 || skip "cannot reach trixie-backports (see $OUT/apt-kernel.log)"
  mods=$(apt-cache "${AO[@]}" search --names-only '^linux-modules-[0-9.]+[^ ]*-rt-amd64$' | awk '{print $1}' | sort -V | tail -1)
  KREL=${mods#linux-modules-}
  [ -n "$KREL" ] || skip "no real-time kernel in trixie-backports"
  (cd "$A/debs" && apt-get "${AO[@]}" download -q "linux-binary-$KREL" "$mods") >> "$OUT/apt-kernel.log" 2>&1 ||
    skip "cannot download linux-binary-$KREL (see $OUT/apt-kernel.log)"
  for d in "$A"/debs/linux-binary-"$KREL"_*.deb "$A"/debs/linux-modules-"$KREL"_*.deb; do dpkg-deb -x "$d" "$K"; done
fi
MODDIR=$K/usr/lib/modules/$KREL
VMLINUZ=$MODDIR/vmlinuz
[ -f "$VMLINUZ" ] || VMLINUZ=$(ls "$K"/boot/vmlinuz-* 2>/dev/null | head -1)
[ -f "$VMLINUZ" ] || skip "the kernel package has no vmlinuz"
say "kernel $KREL"

# ---- the initramfs ----
R=$OUT/root
rm -rf "$R"
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,run,tmp,lib/modules,t}
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"; done
PROGS=(/usr/sbin/ip /usr/sbin/tc /usr/bin/rdma "$BUILD/net_flow_link" "$BUILD/net_flow_order"
       "$LIBDIR/rtaccel-net-bench" "$LIBDIR/rtaccel-exec")
for b in "${PROGS[@]}"; do
  [ -e "$b" ] || continue
  case "$b" in /usr/*) rm -f "$R/bin/$(basename "$b")"; cp "$b" "$R$b" ;; *) cp "$b" "$R/t/" ;; esac
done
PROV=/usr/lib/x86_64-linux-gnu/libibverbs
mkdir -p "$R$PROV" "$R/etc/libibverbs.d"
cp "$PROV"/librxe-rdmav*.so "$R$PROV/"
cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
for f in "${PROGS[@]}" "$PROV"/librxe-rdmav*.so; do [ -e "$f" ] && ldd "$f" | grep -oE '/[^ ]+'; done |
  { cat; echo /lib/x86_64-linux-gnu/libgcc_s.so.1; } | sort -u | while read -r l; do
    mkdir -p "$R$(dirname "$l")"; cp -L "$l" "$R$l"; done
cp tools/testbed/two_nodes_rdma.yaml "$R/t/"
echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"
echo 'root:x:0:' > "$R/etc/group"
# modules with their dependencies, in load order (the guest has no modprobe)
deps() {
  local f d
  f=$(find "$MODDIR" -name "$1.ko*" | head -1)
  [ -n "$f" ] || return 0
  for d in $(modinfo -F depends "$f" | tr ',' ' '); do deps "$d"; done
  echo "$f"
}
for m in crc32_generic veth sch_tbf rdma_rxe ib_uverbs rdma_ucm; do deps "$m"; done | awk '!seen[$0]++' |
  while read -r f; do
    b=$(basename "$f")
    case "$f" in
      *.xz) xz -dc "$f" > "$R/lib/modules/${b%.xz}"; b=${b%.xz} ;;
      *.zst) zstd -qdc "$f" > "$R/lib/modules/${b%.zst}"; b=${b%.zst} ;;
      *) cp "$f" "$R/lib/modules/" ;;
    esac
    echo "$b"
  done > "$R/modules.order"
echo "BENCH=$BENCH" > "$R/etc/testbed.conf"
cp tools/testbed/guest-init.sh "$R/init"
chmod 755 "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT/initrd.gz"

# ---- the guest ----
ACCEL=(-accel tcg,thread=multi -cpu max)
SER=$OUT/serial.log
say "booting (software emulation; the guest prints its results on the serial port)"
for attempt in 1 2; do
  rm -f "$SER"
  start=$(date +%s)
  timeout 1500 qemu-system-x86_64 "${ACCEL[@]}" -smp 2 -m 2G -display none -no-reboot \
    -serial "file:$SER" -kernel "$VMLINUZ" -initrd "$OUT/initrd.gz" \
    -append "console=ttyS0 panic=-1 oops=panic loglevel=3" > "$OUT/qemu.log" 2>&1
  rc=$?
  say "guest ran $(( $(date +%s) - start )) s (qemu exit $rc)"
  # A guest kernel that died while booting, before the init ran, ran none
  # of rtaccel: booted once more. Under software emulation the backports
  # kernel oopsed once in three boots on an int3 in its boot-time code
  # patching.
  if [ "$attempt" = 1 ] && ! grep -aq '^@@KERNEL' "$SER" && grep -aq 'Kernel panic' "$SER"; then
    cp "$SER" "$OUT/serial-first-boot.log"
    say "the guest kernel died booting (see $OUT/serial-first-boot.log): booting it again"
    continue
  fi
  break
done
grep -a '^@@' "$SER" | tr -d '\r' | sed 's/^@@/  /'
grep -aq '^@@DONE' "$SER" || { say "the guest did not finish (see $SER)"; exit 1; }
if grep -aq '^@@RESULT .*=fail' "$SER"; then
  say "FAILED (details in $SER)"
  exit 1
fi
grep -aq '^@@RESULT .*=ok' "$SER" || { say "no test ran (see $SER)"; exit 1; }
say "passed"
