#!/bin/sh
# /init of the RDMA test bed's guest (busybox): loads the rxe modules, runs
# the net layer's tests over Soft-RoCE and a two-node rtaccel run over an
# rdma link, optionally the benchmarks between two namespaces, prints "@@"
# lines on the serial console and powers off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
. /etc/testbed.conf
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/shm /run/netns
mount -t tmpfs tmpfs /run
mkdir -p /run/netns
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
ip() { /usr/sbin/ip "$@"; } # not busybox's
RES() { echo "@@RESULT $*"; }
echo "@@KERNEL $(uname -r)"
for m in $(cat /modules.order); do insmod "/lib/modules/$m" || echo "insmod $m failed"; done
ip link set lo up
ulimit -l unlimited

# The tests: one rxe device on one end of a veth pair, in this namespace.
ip link add rtl0 type veth peer name rtl1
ip addr add 10.88.0.1/24 dev rtl0
ip link set rtl0 up; ip link set rtl1 up
if rdma link add rxe0 type rxe netdev rtl0; then RES rxe_device=ok; else RES rxe_device=fail; fi
sleep 1
export RTACCEL_RDMA_ADDR=10.88.0.1
for t in net_flow_link net_flow_order; do
  echo "@@SECTION $t"
  /t/$t rdma > /tmp/$t.log 2>&1
  rc=$?
  cat /tmp/$t.log
  sed 's/^/@@OUT /' /tmp/$t.log
  if [ $rc -eq 0 ]; then RES $t=ok; else RES $t=fail rc=$rc; fi
done

# rtaccel run on two nodes over an rdma link: each node a namespace with a
# Soft-RoCE device on its end of a veth pair shaped to the link's rate.
echo "@@SECTION multinode"
/t/rtaccel-exec /t/two_nodes_rdma.yaml --policy picas --duration 4 --out /tmp/mn --quiet > /tmp/mn.log 2>&1
rc=$?
sed 's/^/@@OUT /' /tmp/mn.log
grep -E '"(count|p50_us|max_us|wcrt_us|delivered|lost)"' /tmp/mn/summary.json 2>/dev/null | sed 's/^/@@OUT /'
if [ $rc -eq 0 ] && grep -q '"delivered": [1-9]' /tmp/mn/summary.json && grep -q '"lost": 0' /tmp/mn/summary.json; then
  RES multinode_rdma=ok
else
  RES multinode_rdma=fail rc=$rc
fi

if [ "$BENCH" = 1 ]; then
  # The benchmarks: rxe between two namespaces, as between two machines.
  ip netns add nsA; ip netns add nsB
  ip link add vethA type veth peer name vethB
  ip link set vethA netns nsA; ip link set vethB netns nsB
  ip -n nsA addr add 10.77.0.1/24 dev vethA; ip -n nsB addr add 10.77.0.2/24 dev vethB
  for n in nsA nsB; do ip -n $n link set lo up; done
  ip -n nsA link set vethA up; ip -n nsB link set vethB up
  ip netns exec nsA rdma link add rxeA type rxe netdev vethA
  ip netns exec nsB rdma link add rxeB type rxe netdev vethB
  sleep 1
  export RTACCEL_BENCH_NS_A=nsA RTACCEL_BENCH_NS_B=nsB RTACCEL_RDMA_ADDR=10.77.0.2 RTACCEL_RDMA_PEER=10.77.0.1
  for what in "overhead --sizes 64K,1M,4M --samples 50" "priority --sizes 1M,4M"; do
    name=${what%% *}
    timeout 600 /t/rtaccel-net-bench $what --transport rdma > /tmp/$name.json 2> /tmp/$name.err
    rc=$?
    sed 's/^/@@BENCH /' /tmp/$name.json /tmp/$name.err
    if [ $rc -eq 0 ]; then RES bench_$name=ok; else RES bench_$name=fail rc=$rc; fi
  done
fi
echo "@@DONE"
sync
poweroff -f
