# rtaccel: `make run` runs the main job, `make test` runs everything CI checks,
# `make check` the fast part of it while you work.
# Both install what they need first (tools/setup.sh, idempotent).
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c

VENV ?= .venv
PYTHON := $(abspath $(VENV))/bin/python
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 30
CMAKE_COMMON := -G Ninja -DRTACCEL_WERROR=ON -DPython_EXECUTABLE=$(PYTHON) -DPYBIND11_FINDPYTHON=ON

.PHONY: all setup build build-asan build-fuzz run check test test-unit test-asan test-fuzz test-python test-wheel \
	test-rdma gpu-bundle test-gpu-bundle clean

all: build

setup:
	@tools/setup.sh

build: setup
	cmake -S . -B build $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRTACCEL_PYTHON=ON >/dev/null
	cmake --build build -j $(JOBS)

# Unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
build-asan: setup
	cmake -S . -B build-asan $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug -DRTACCEL_SANITIZE=ON \
	  -DRTACCEL_PYTHON=OFF >/dev/null
	cmake --build build-asan -j $(JOBS)

build-fuzz: setup
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRTACCEL_FUZZ=ON -DRTACCEL_WERROR=ON >/dev/null
	cmake --build build-fuzz -j $(JOBS)

# Exit 1 is the demo's finding that paam's bound was exceeded (a noisy
# machine can do that), not a failure to run it.
run: build
	$(VENV)/bin/rtaccel demo || [ $$? -eq 1 ]

# Every skip is listed with its reason (tools/test-skips.sh): ctest shows
# a skipped test's name, not why.
test-unit: build
	ctest --test-dir build --output-on-failure -j $(JOBS)
	tools/test-skips.sh build

# The edit-build-test loop: the unit and integration tests that are not
# slow (ctest labels; pytest's slow marker); how long it takes is in
# docs/testing.md's table. `make test` stays the complete check CI runs.
check: build
	ctest --test-dir build --output-on-failure -j $(JOBS) -L 'unit|integration' -LE slow
	tools/test-skips.sh build
	cd tests/python && $(PYTHON) -m pytest -q -rs -m 'not slow'

# intercept_tls_get_addr=0: the sanitizer runtime of GCC 12 (Debian 12) can
# take a dynamic TLS block (PoCL's, in the OpenCL tests) for one of a glibc
# older than 2.25, by where malloc placed it, and its leak check then dies
# in its tracer ("Tracer caught signal 11") after the test passed.
test-asan: build-asan
	ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS)
	tools/test-skips.sh build-asan

# Replays the regression corpora, then fuzzes the workload loader, the
# server's decoders (registration, request entries, policy, remote requests) and the net
# layer's frame decoder for FUZZ_SECONDS each. A crash leaves its input in build-fuzz/ and fails.
test-fuzz: build-fuzz
	rm -rf build-fuzz/corpus && mkdir -p build-fuzz/corpus
	cp fuzz/corpus/workload/* examples/*.yaml build-fuzz/corpus/
	build-fuzz/workload_fuzzer -runs=0 fuzz/corpus/workload 2>&1 | tail -n 2
	build-fuzz/workload_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
	  -print_final_stats=0 -artifact_prefix=build-fuzz/ build-fuzz/corpus 2>&1 | tail -n 3
	rm -rf build-fuzz/accel-corpus && mkdir -p build-fuzz/accel-corpus
	cp fuzz/corpus/accel/* build-fuzz/accel-corpus/
	build-fuzz/accel_fuzzer -runs=0 fuzz/corpus/accel 2>&1 | tail -n 2
	build-fuzz/accel_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=10 \
	  -print_final_stats=0 -artifact_prefix=build-fuzz/ build-fuzz/accel-corpus 2>&1 | tail -n 3
	rm -rf build-fuzz/net-corpus && mkdir -p build-fuzz/net-corpus
	cp fuzz/corpus/net/* build-fuzz/net-corpus/
	build-fuzz/net_frame_fuzzer -runs=0 fuzz/corpus/net 2>&1 | tail -n 2
	build-fuzz/net_frame_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=64 -timeout=10 \
	  -print_final_stats=0 -artifact_prefix=build-fuzz/ build-fuzz/net-corpus 2>&1 | tail -n 3

test-python: build
	cd tests/python && $(PYTHON) -m pytest -q -rs

# pip install . into a fresh virtualenv (a wheel built by CMake through
# scikit-build-core), then rtaccel used from outside the checkout.
test-wheel: setup
	tests/install/check_wheel.sh . build-wheel/check

# The net layer's RDMA tests in a QEMU guest with Soft-RoCE (this kernel has
# none between namespaces). Exit 77 (no QEMU, no guest kernel to be had)
# is a skip, said with its reason.
test-rdma: build
	tools/testbed/rdma.sh || [ $$? -eq 77 ]

# What the GPU campaign (tools/gpu/campaign.sh) runs from on a machine with a
# GPU: programs, the Python package built for Python 3.12 (PY312, else one
# found), the libraries the GPU image may lack; checked in a clean environment.
gpu-bundle: build
	tools/gpu/bundle.sh

# The bundle made and checked, and the campaign's steps that need no GPU run
# from it in a clean environment, as the GPU machine will run them (the CUDA
# steps record their skip). Exit 77 of bundle.sh (no Python 3.12) is a skip.
test-gpu-bundle: build
	tools/gpu/bundle.sh || [ $$? -eq 77 ]
	if [ -d build-gpu/bundle ]; then \
	  env -i PATH="$$(dirname $$(tools/gpu/bundle.sh --python-path)):/usr/bin:/bin" \
	    LD_LIBRARY_PATH=/usr/local/cuda/lib64 CAMPAIGN_STEPS="request_overhead_cpu bwlock_solo" \
	    tools/gpu/campaign.sh 2 build-gpu/campaign-check && \
	  grep -q '| request_overhead_cpu | ok |' build-gpu/campaign-check/summary-part2.md; fi

test: test-unit test-asan test-fuzz test-python test-wheel test-gpu-bundle test-rdma

clean:
	rm -rf build build-asan build-fuzz build-wheel python/rtaccel/_core*.so python/rtaccel/lib
