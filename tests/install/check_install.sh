#!/usr/bin/env bash
# Installs the build into a fresh prefix and uses it as a user would:
# the example client built from plain C with pkg-config and with CMake's
# find_package, run against the installed rtaccel-server; no path of the
# source tree in the installed programs and libraries.
#   check_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(realpath "$1") build=$(realpath "$2")
work=$(mktemp -d /tmp/rtaccel-install-XXXXXX)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n1)
libdir=${libdir%/}
for f in "$prefix/include/rtaccel/accel.h" "$prefix/include/rtaccel/lock.h" "$prefix/bin/rtaccel-server" \
         "$libdir/librtaccel.so.0" "$libdir/librtaccel_lock.so.0" "$libdir/rtaccel/librtaccel_shim.so.0" \
         "$libdir/librtaccel_isolate.so.0" "$prefix/include/rtaccel/isolate.h" \
         "$libdir/librtaccel_net.so.0" "$prefix/include/rtaccel/net.h" \
         "$libdir/pkgconfig/rtaccel.pc" "$libdir/cmake/rtaccel/rtaccelConfig.cmake"; do
  [ -e "$f" ] || { echo "not installed: ${f#$prefix/}"; exit 1; }
done
for lib in librtaccel.so.0 librtaccel_lock.so.0 librtaccel_isolate.so.0 librtaccel_net.so.0; do
  soname=$(readelf -d "$libdir/$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
  [ "$soname" = "$lib" ] || { echo "$lib: soname '$soname'"; exit 1; }
done
# Only the C API leaves the libraries, versioned.
if nm -D --defined-only "$libdir/librtaccel.so.0" | awk '{print $3}' | grep -v '^RTACCEL_0$' | grep -vq '^rtaccel_.*@@RTACCEL_0$'; then
  echo "librtaccel.so exports more than its C API:"; nm -D --defined-only "$libdir/librtaccel.so.0"; exit 1
fi
# No source path is compiled into what is installed (debug information aside).
for f in "$prefix"/bin/* "$libdir"/*.so.0 "$libdir"/rtaccel/*.so*; do
  if readelf -p .rodata "$f" 2>/dev/null | grep -q "$src"; then
    echo "${f#$prefix/} holds the source path $src"; exit 1
  fi
done

# Plain C with pkg-config, as a user builds a client: the flags it gives
# are all it takes to build and to run (the libraries are not in the
# dynamic linker's search path, and no LD_LIBRARY_PATH says where).
unset LD_LIBRARY_PATH
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c11 -Wall -Wextra -Werror -o "$work/vecadd_pkgconfig" "$src/examples/client/vecadd_client.c" \
   $(pkg-config --cflags --libs rtaccel)
# The gang lock from plain C: a job under a private lock.
cat > "$work/gang.c" <<'EOF_C'
#include <rtaccel/isolate.h>
int main(void)
{
	rtaccel_gang_lock_t *lock;
	if (rtaccel_gang_lock_create_private(&lock) || rtaccel_gang_join(lock, "g", 10, 0))
		return 1;
	return rtaccel_gang_job_begin() || rtaccel_gang_job_end() || rtaccel_gang_leave();
}
EOF_C
cc -std=c11 -Wall -Wextra -Werror -o "$work/gang" "$work/gang.c" $(pkg-config --cflags --libs rtaccel-isolate)
"$work/gang"
# The net layer from plain C: a link over shared memory to itself, one
# transfer through it.
cat > "$work/net.c" <<'EOF_C'
#include <rtaccel/net.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#define SEC 1000000000ull
int main(void)
{
	char address[64], uid[32];
	snprintf(address, sizeof(address), "shm:install-check-%d", (int)getpid());
	snprintf(uid, sizeof(uid), "uid:%u", (unsigned)getuid());
	const char *allow[] = {uid};
	struct rtaccel_net_channel_attr attr = {.id = 1, .priority = 5, .max_size = 64};
	rtaccel_net_listener_t *l;
	rtaccel_net_link_t *link;
	rtaccel_net_channel_t *ch;
	if (rtaccel_net_listen(address, allow, 1, "b", NULL, &l))
		return 1;
	pid_t child = fork();
	if (child == 0)
		_exit(rtaccel_net_connect(address, "a", NULL, SEC, &link) ||
		      rtaccel_net_channel_open(link, &attr, &ch) ||
		      rtaccel_net_send(ch, "hello", 6, 0, SEC));
	struct rtaccel_net_msg m;
	uint64_t seen = 0;
	int status;
	if (rtaccel_net_accept(l, SEC, &link, NULL, 0) || rtaccel_net_channel_open(link, &attr, &ch) ||
	    rtaccel_net_take(ch, &seen, SEC, &m) || strcmp(m.data, "hello") ||
	    waitpid(child, &status, 0) != child || status != 0)
		return 1;
	rtaccel_net_release(&m);
	rtaccel_net_close(link);
	rtaccel_net_listener_close(l);
	return 0;
}
EOF_C
cc -std=c11 -Wall -Wextra -Werror -o "$work/net" "$work/net.c" $(pkg-config --cflags --libs rtaccel-net)
"$work/net"
# The executor for rcl nodes, where rtaccel was built with ROS 2: the C
# example node built with pkg-config alone (ROS 2's message packages are
# the user's: std_msgs from the same environment) and run, discovery kept
# to the host, in a domain of its own.
ros_example=
if [ -e "$libdir/librtaccel_ros.so.0" ]; then
  [ -e "$prefix/include/rtaccel/ros.h" ] && [ -e "$libdir/pkgconfig/rtaccel-ros.pc" ] ||
    { echo "not installed: rtaccel/ros.h or rtaccel-ros.pc"; exit 1; }
  ros2prefix=$(pkg-config --variable=ros2prefix rtaccel-ros)
  cc -std=c11 -Wall -Wextra -Werror -o "$work/rcl_pipeline" "$src/examples/ros/rcl_pipeline.c" \
     $(pkg-config --cflags --libs rtaccel-ros) -lstd_msgs__rosidl_typesupport_c -lstd_msgs__rosidl_generator_c
  ros_env=(ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST FASTDDS_BUILTIN_TRANSPORTS=UDPv4 ROS_DOMAIN_ID=$((101 + $$ % 130)))
  env "${ros_env[@]}" "$work/rcl_pipeline" picas 3 ||
    { echo "the C node built with pkg-config rtaccel-ros failed"; exit 1; }
  ros_example="-DROS_EXAMPLE=$src/examples/ros/rcl_pipeline.c -DROS2_PREFIX=$ros2prefix"
fi
# CMake's find_package, the consumer run from where it is installed, which
# its build tree's rpath does not reach.
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DEXAMPLE_SOURCE="$src/examples/client/vecadd_client.c" -DCMAKE_INSTALL_PREFIX="$work/consumer-prefix" \
      $ros_example >/dev/null
cmake --build "$work/consumer" >/dev/null
cmake --install "$work/consumer" >/dev/null
"$work/consumer-prefix/bin/lock_user"

# The installed server, started with its readiness handshake.
sock=$work/server.sock
mkfifo "$work/ready"
"$prefix/bin/rtaccel-server" --socket "$sock" --no-fifo --device 0 --ready-fd 9 \
  9>"$work/ready" 2>"$work/server.log" &
server=$!
if ! timeout 10 head -n1 "$work/ready" | grep -q '^ready$'; then
  echo "the installed rtaccel-server did not get ready:"; cat "$work/server.log"; exit 1
fi
if [ -n "$ros_example" ]; then
  env "${ros_env[@]}" "$work/consumer-prefix/bin/rcl_pipeline" ros2 3 ||
    { echo "the C node built with find_package(rtaccel)'s rtaccel::ros failed"; exit 1; }
fi
for client in "$work/vecadd_pkgconfig" "$work/consumer-prefix/bin/vecadd_client"; do
  if ! out=$("$client" "$sock" 4096 2>&1); then
    echo "${client##*/} failed against the installed server: $out"; exit 1
  fi
  echo "${client##*/}: $out"
done
echo "install: headers, libraries (soname, C API only), rtaccelConfig.cmake and pkg-config work from $prefix${ros_example:+ (the rcl executor too)}"
