"""The test guard beside Fast DDS's shared memory, with real rclpy nodes:
the files of a node that a test's crash kills (SIGKILL) are found, every
one of them, and those of a node outside the test that lives on beside it
are its own, kept. (tests/harness/guard_selftest.c checks the same rules
on files made to order.)"""

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

import needs
from harness import GUARD

try:
    import rclpy  # noqa: F401
    import std_msgs  # noqa: F401
except ImportError as err:
    pytestmark = needs.mark("setup", True, f"rclpy from ROS 2's wheels: {err}")

# A node that talks to itself until it hears itself, says which objects of
# /dev/shm it made (those it maps or holds open, and its ports' mutexes,
# which no process holds between the openings of a port), says "ready PID",
# and lives until its input ends.
NODE = r'''
import os
import sys
import time

import rclpy
from rclpy.node import Node
from std_msgs.msg import String

rclpy.init()
node = Node("guard_dds")
heard = []
publisher = node.create_publisher(String, "guard_dds", 10)
node.create_subscription(String, "guard_dds", lambda message: heard.append(message.data), 10)
deadline = time.monotonic() + 20
while not heard:
    if time.monotonic() > deadline:
        sys.exit("the node never heard itself")
    publisher.publish(String(data="hello"))
    rclpy.spin_once(node, timeout_sec=0.05)


def entry(path):
    if path.startswith("/dev/shm/") and not path.endswith(" (deleted)"):
        return path[len("/dev/shm/"):]
    return None


used = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split(maxsplit=5)
        if len(fields) == 6:
            used.add(entry(fields[5].strip()))
for fd in os.listdir("/proc/self/fd"):
    try:
        used.add(entry(os.readlink(f"/proc/self/fd/{fd}")))
    except OSError:
        pass
# lttng-ust's wait files are this user's, made before (harness.py)
made = {name for name in used if name and not name.startswith("lttng-ust-")}
made |= {f"sem.{name}_mutex" for name in made if os.path.exists(f"/dev/shm/sem.{name}_mutex")}
for name in sorted(made):
    print("file", name)
print("ready", os.getpid(), flush=True)
sys.stdin.read()
node.destroy_node()
rclpy.shutdown()
'''


def node_env(domain):
    """Discovery kept to this host, in a domain of the test's own, over Fast
    DDS's shared memory (its default transports, UDP beside)."""
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env.pop("FASTDDS_BUILTIN_TRANSPORTS", None)
    return env


def machine_wide(name, domain):
    """Whether NAME is of a port numbered for the whole machine (from 7000,
    the first one free, whatever the domain) rather than one of DOMAIN's
    (7400 + 250 x DOMAIN on): a Fast DDS node that starts anywhere takes the
    first such port whose listener is dead, removing its files."""
    port = re.search(r"fastdds_port(\d+)", name)
    return bool(port) and not 7400 + 250 * domain <= int(port[1]) < 7650 + 250 * domain


def read_until_ready(proc, seconds=60):
    """What PROC says up to its line "ready PID": the objects it made, its
    pid, and everything it said."""
    said, end = b"", time.monotonic() + seconds
    while b"\nready " not in b"\n" + said or not said.endswith(b"\n"):
        left = end - time.monotonic()
        assert left > 0, f"no node was ready in {seconds} s:\n{said.decode(errors='replace')}"
        if select.select([proc.stdout], [], [], left)[0]:
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"it ended first (exit {proc.wait()}):\n{said.decode(errors='replace')}"
            said += chunk
    text = said.decode()
    files = [line.split(" ", 1)[1] for line in text.splitlines() if line.startswith("file ")]
    pid = int(next(line for line in text.splitlines() if line.startswith("ready ")).split()[1])
    # the shared-memory transport is what is under test: a segment, locked
    assert any(f.startswith("fastdds_") and f + "_el" in files for f in files), text
    return files, pid, text


@pytest.mark.slow
def test_a_killed_rclpy_nodes_segments_are_found_and_a_live_ones_beside_it_kept(tmp_path):
    program = tmp_path / "dds_node.py"
    program.write_text(NODE)
    domain = 215 + os.getpid() % 9  # 215..232: Fast DDS's ports fit below 65536
    started, made, passed = [], [], False
    try:
        guard = subprocess.Popen([str(GUARD), "--resources", "--timeout", "60",
                                  sys.executable, str(program)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=node_env(domain))
        started.append(guard)
        doomed_files, doomed, said = read_until_ready(guard)
        made += doomed_files
        # Outside the guard's tree, made while its test runs, in another
        # domain: it never talks to the doomed node, so that nothing of that
        # one is its to remove when it notices it dead.
        live = subprocess.Popen([sys.executable, str(program)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=node_env(domain + 9))
        started.append(live)
        live_files, live_pid, _ = read_until_ready(live)
        made += live_files
        os.kill(doomed, signal.SIGKILL)
        out = said + guard.communicate(timeout=60)[0].decode()
        print(out)  # shown if it fails
        assert guard.returncode == 128 + signal.SIGKILL, out
        assert any(not machine_wide(name, domain) and "_port" in name for name in doomed_files)
        for name in doomed_files:
            named = f" left shm {name} behind: removed" in out
            if machine_wide(name, domain):
                # another node that started meanwhile may have found it dead
                # and taken its name, as Fast DDS does
                assert named or not os.path.exists(f"/dev/shm/{name}") or (
                    f"shm {name} was made by process " in out
                    or f"shm {name} is in use by process " in out), out
            else:
                assert named, out
                assert not os.path.exists(f"/dev/shm/{name}"), name
        for name in live_files:
            assert f" left shm {name} " not in out, out
            assert os.path.exists(f"/dev/shm/{name}"), name
            # Told by who made it (fanotify, as root) or by who uses it. (A
            # port of the machine's may have been there, another's, before
            # the test began: not new, not said.)
            assert machine_wide(name, domain + 9) or (
                f"shm {name} was made by process {live_pid} " in out
                or f"shm {name} is in use by process {live_pid} " in out), out
        # The live one ends as it should, and Fast DDS removes its files (the
        # harness's check after the test would name any it left).
        live.stdin.close()
        assert live.wait(timeout=30) == 0
        passed = True
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # What a failure left of the nodes' goes; after a pass none is left,
        # and a name freed may be another node's by now.
        for name in made if not passed else []:
            try:
                os.unlink(f"/dev/shm/{name}")
            except FileNotFoundError:
                pass
