#!/usr/bin/env bash
# Installs what rtaccel needs on Debian 12: the Debian packages, then a Python
# virtualenv with the PyPI packages, where `rtaccel` runs this checkout's
# package (python/rtaccel, beside the extension and programs `make build`
# puts there). Idempotent and quick when everything is already there.
# (A user's installation is a wheel: pip install .)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  cmake ninja-build g++ clang libclang-rt-14-dev   # build, sanitizers, libFuzzer
  libyaml-cpp-dev pybind11-dev nlohmann-json3-dev  # libraries
  libgtest-dev libgmock-dev libbenchmark-dev       # tests and benchmarks
  python3 python3-dev python3-venv
  xz-utils                                         # multi-threaded program for the shim tests
  pkgconf                                          # the install test builds a client with it
  ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd  # opencl backend, PoCL as its device in tests
  libibverbs-dev librdmacm-dev ibverbs-providers    # the net layer's RDMA transport
  iproute2                                         # namespaces and tc for the net benchmarks
  cyclonedds-dev cyclonedds-tools                  # the net benchmarks against Cyclone DDS
)
PIP_PACKAGES=(numpy matplotlib pytest pytest-timeout hypothesis pyyaml jsonschema lizard wheel onnxruntime onnx  # onnx*: the DNN experiment
  ros-kilted-rclpy ros-kilted-std-msgs ros-kilted-rmw-fastrtps-cpp)  # ROS 2 from its wheels: rtaccel.ros
VENV=${VENV:-.venv}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  case "$pkg" in \#*) continue ;; esac
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "# installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Debian's interpreter, matching python3-dev's headers for the extension.
if [ ! -x "$VENV/bin/python" ]; then
  echo "# creating the virtualenv $VENV"
  /usr/bin/python3 -m venv "$VENV"
fi
stamp="$VENV/.rtaccel-deps-$(echo "${PIP_PACKAGES[*]}" "$PWD" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "# installing PyPI packages into $VENV: ${PIP_PACKAGES[*]}"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
  # The checkout's package on the path, and the command that pyproject.toml's
  # [project.scripts] gives an installed one.
  "$VENV/bin/python" -m pip uninstall -y -q rtaccel 2>/dev/null || true  # an older editable install
  purelib=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD/python" > "$purelib/rtaccel-checkout.pth"
  printf '#!%s\nimport sys\nfrom rtaccel.cli import main\nsys.exit(main())\n' \
    "$(realpath "$VENV")/bin/python" > "$VENV/bin/rtaccel"
  chmod +x "$VENV/bin/rtaccel"
  rm -f "$VENV"/.rtaccel-deps-*
  touch "$stamp"
fi
