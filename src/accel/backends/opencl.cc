// opencl backend: one context and one in-order queue per device, one bucket,
// no preemption (the single-context, TPU-like case of the PAAM paper: many
// clients share a device through one server context). Client regions are
// wrapped as CL_MEM_USE_HOST_PTR buffers, so kernels read and write the shared
// memory in place where the device shares host memory (PoCL on a CPU).
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>

#include "core/clock.h"
#include "core/fd.h"
#include "accel/backend.h"
#include "accel/protocol.h"
#include "rtaccel/accel.h"
#include "rtaccel/requests.h"

#ifdef RTACCEL_HAVE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <algorithm>
#include <mutex>
#include <vector>
#endif

namespace rtaccel::accel {

#ifdef RTACCEL_HAVE_OPENCL
namespace {

// Every kernel addresses one buffer, `mem`, by element offsets: request and
// response lie in the same client region.
const char* kSource = R"CLC(
/* wide: the reduction's and the histogram's arithmetic, double as on the
 * other backends where the device has it. */
#ifdef RTACCEL_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double wide;
#else
typedef float wide;
#endif
__kernel void busy(ulong iterations, __global uint *sink) {
  uint x = (uint)get_global_id(0) + 1u;
  for (ulong i = 0; i < iterations; i++) x = x * 1664525u + 1013904223u;
  if (x == 0x9e3779b9u) sink[0] = x; /* keeps the loop; practically never true */
}
__kernel void vecadd(__global float *mem, uint a, uint b, uint c) {
  size_t i = get_global_id(0);
  mem[c + i] = mem[a + i] + mem[b + i];
}
__kernel void matmul(__global float *mem, uint a, uint b, uint c, uint n) {
  size_t col = get_global_id(0), row = get_global_id(1);
  float acc = 0.0f;
  for (uint k = 0; k < n; k++) acc += mem[a + row * n + k] * mem[b + k * n + col];
  mem[c + row * n + col] = acc;
}
__kernel void reduction(__global const float *mem, uint x, uint n, __global wide *partial) {
  size_t g = get_global_id(0), stride = get_global_size(0);
  wide sum = 0;
  for (size_t i = g; i < n; i += stride) sum += mem[x + i];
  partial[g] = sum;
}
/* scale: bins / (hi - lo), from the host in double. x - lo, in float, would
 * overflow over a range wider than half of float's. */
__kernel void histogram(__global float *mem, uint x, uint n, float lo, float hi, wide scale, uint bins, uint c) {
  size_t i = get_global_id(0);
  float v = mem[x + i];
  if (!(v >= lo && v < hi)) return;
  wide at = ((wide)v - (wide)lo) * scale;
  uint bin = at < (wide)bins ? (uint)at : bins - 1; /* rounding at the upper edge */
  atomic_inc((__global uint *)mem + c + bin);
}
__kernel void zero(__global uint *mem, uint c) { mem[c + get_global_id(0)] = 0u; }
)CLC";

// A service's key is its number in rtaccel/requests.h.
enum Kernel {
  kBusy = RTACCEL_BUSY,
  kVecadd = RTACCEL_VECADD,
  kMatmul = RTACCEL_MATMUL,
  kReduction = RTACCEL_REDUCTION,
  kHistogram = RTACCEL_HISTOGRAM,
  kZero = RTACCEL_BUILTINS,  // clears the histogram's counts
  kKernels
};
const char* const kNames[kKernels] = {"busy", "vecadd", "matmul", "reduction", "histogram", "zero"};
constexpr size_t kPartials = 256;

std::string cl_error(const char* what, cl_int err) { return std::string(what) + ": OpenCL error " + std::to_string(err); }

std::vector<cl_device_id> all_devices() {
  std::vector<cl_device_id> out;
  cl_uint nplatforms = 0;
  if (clGetPlatformIDs(0, nullptr, &nplatforms) != CL_SUCCESS || nplatforms == 0) return out;
  std::vector<cl_platform_id> platforms(nplatforms);
  clGetPlatformIDs(nplatforms, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    cl_uint n = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
    std::vector<cl_device_id> devices(n);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, devices.data(), nullptr);
    out.insert(out.end(), devices.begin(), devices.end());
  }
  return out;
}

std::string device_name(cl_device_id d) {
  char name[256] = {};
  clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof(name) - 1, name, nullptr);
  return name;
}

// Double arithmetic is optional in OpenCL 1.2 (cl_khr_fp64): a device
// without it sums and bins in float, which its description says.
bool has_fp64(cl_device_id d) {
  cl_device_fp_config fp64 = 0;
  return clGetDeviceInfo(d, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof(fp64), &fp64, nullptr) == CL_SUCCESS && fp64 != 0;
}

constexpr char kNoFp64[] = " (no double precision: reduction and histogram compute in float)";

class OpenClBackend final : public Backend {
 public:
  ~OpenClBackend() override {
    for (cl_kernel k : kernels_)
      if (k) clReleaseKernel(k);
    if (scratch_) clReleaseMemObject(scratch_);
    if (program_) clReleaseProgram(program_);
    if (queue_) clReleaseCommandQueue(queue_);
    if (context_) clReleaseContext(context_);
  }

  Status open(const BackendOptions& options) {
    options_ = options;
    const auto devices = all_devices();
    if (devices.empty()) {
      return Status::error("no OpenCL platform or device (is an ICD such as pocl-opencl-icd installed?)");
    }
    if (options.device < 0 || size_t(options.device) >= devices.size()) {
      return Status::invalid("OpenCL device " + std::to_string(options.device) + " does not exist (found " +
             std::to_string(devices.size()) + ")");
    }
    device_ = devices[size_t(options.device)];
    name_ = device_name(device_);
    fp64_ = has_fp64(device_);
    cl_int err;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
    if (!context_) return fail("clCreateContext", err);
    queue_ = clCreateCommandQueue(context_, device_, 0, &err);
    if (!queue_) return fail("clCreateCommandQueue", err);
    program_ = clCreateProgramWithSource(context_, 1, &kSource, nullptr, &err);
    if (!program_) return fail("clCreateProgramWithSource", err);
    const char* build_options = fp64_ ? "-cl-std=CL1.2 -DRTACCEL_FP64=1" : "-cl-std=CL1.2";
    if ((err = clBuildProgram(program_, 1, &device_, build_options, nullptr, nullptr)) != CL_SUCCESS) {
      char log[2048] = {};
      clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, nullptr);
      return Status::error(cl_error("clBuildProgram", err) + ": " + log);
    }
    for (int k = 0; k < kKernels; k++) {
      kernels_[k] = clCreateKernel(program_, kNames[k], &err);
      if (!kernels_[k]) return fail("clCreateKernel", err);
    }
    scratch_ = clCreateBuffer(context_, CL_MEM_READ_WRITE, kPartials * sizeof(double), nullptr, &err);
    if (!scratch_) return fail("clCreateBuffer", err);
    return calibrate();
  }

  std::string describe() const override {
    return "opencl device " + std::to_string(options_.device) + ": " + name_ +
           (fp64_ ? "" : kNoFp64);
  }
  uint32_t levels() const override { return 1; }
  bool preemptive() const override { return false; }

  Status prepare_worker(uint32_t) override {
    if (options_.driver_core < 0) return Status();
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(options_.driver_core, &set);
    if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) {
      return Status::error(std::string("cannot pin the OpenCL worker: ") + strerror(err));
    }
    return Status();
  }

  int lookup(const char* service) const override {
    for (int k = 0; k < kZero; k++)
      if (strcmp(kNames[k], service) == 0) return k;
    return -1;
  }

  Status attach(void* base, size_t size, void** handle) override {
    cl_int err;
    cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, size, base, &err);
    if (!mem) return fail("clCreateBuffer over a client region", err);
    *handle = mem;
    return Status();
  }
  void detach(void* handle) override {
    if (handle) clReleaseMemObject(static_cast<cl_mem>(handle));
  }

  int run(int key, void* handle, const void* base, rtaccel_service_call* call) override {
    std::lock_guard<std::mutex> guard(mu_);  // kernels hold their arguments
    if (handle) return run_in_region(key, static_cast<cl_mem>(handle), base, call);
    return run_staged(key, call);
  }

 private:
  static Status fail(const char* what, cl_int err) { return Status::error(cl_error(what, err)); }

  // Iterations of the busy kernel per microsecond, from the difference of two
  // lengths so that the launch cost cancels out; the fastest of three runs of
  // each, after a first launch that pays for the lazy kernel compilation.
  // Both the wall time and the process's CPU time are taken, and the shorter
  // difference counts: a neighbour that takes the core inflates the first but
  // not the second, a driver thread that spins while it waits the second but
  // not the first. A too long difference would make every busy kernel short.
  Status calibrate() {
    const cl_ulong lengths[2] = {1u << 20, 1u << 23};
    double wall_us[2] = {1e18, 1e18}, cpu_us[2] = {1e18, 1e18};
    if (busy(1) != 0) {
      return Status::error("the busy kernel failed to run");
    }
    for (int round = 0; round < 3; round++)
      for (int i = 0; i < 2; i++) {
        const uint64_t wall = core::monotonic_ns();
        const uint64_t cpu = rtaccel_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        if (busy(lengths[i]) != 0) {
          return Status::error("the busy kernel failed to run");
        }
        cpu_us[i] = std::min(cpu_us[i], double(rtaccel_clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu) / 1000.0);
        wall_us[i] = std::min(wall_us[i], double(core::monotonic_ns() - wall) / 1000.0);
      }
    const double wall_diff = wall_us[1] - wall_us[0], cpu_diff = cpu_us[1] - cpu_us[0];
    const double diff = cpu_diff > 0 ? std::min(wall_diff, cpu_diff) : wall_diff;
    if (diff <= 0) {
      return Status::error("cannot calibrate the busy kernel: a longer loop ran no longer");
    }
    iterations_per_us_ = double(lengths[1] - lengths[0]) / diff;
    return Status();
  }

  int busy(cl_ulong iterations) {
    cl_kernel k = kernels_[kBusy];
    clSetKernelArg(k, 0, sizeof(iterations), &iterations);
    clSetKernelArg(k, 1, sizeof(cl_mem), &scratch_);
    return launch(k, 1, 1) ? 0 : -EIO;
  }

  bool launch(cl_kernel k, size_t x, size_t y) {
    const size_t global[2] = {x, y};
    if (x == 0 || y == 0) return true;
    return clEnqueueNDRangeKernel(queue_, k, y > 1 ? 2 : 1, nullptr, global, nullptr, 0, nullptr, nullptr) == CL_SUCCESS &&
           clFinish(queue_) == CL_SUCCESS;
  }

  // Makes host writes to [offset, offset+len) of a USE_HOST_PTR buffer visible
  // to the device, or device writes visible to the host: a map and unmap is
  // the portable way (free where the device shares host memory).
  bool sync(cl_mem mem, size_t offset, size_t len, cl_map_flags flags) {
    if (len == 0) return true;
    cl_int err;
    void* p = clEnqueueMapBuffer(queue_, mem, CL_TRUE, flags, offset, len, 0, nullptr, nullptr, &err);
    if (!p) return false;
    return clEnqueueUnmapMemObject(queue_, mem, p, 0, nullptr, nullptr) == CL_SUCCESS && clFinish(queue_) == CL_SUCCESS;
  }

  int run_in_region(int key, cl_mem mem, const void* base, rtaccel_service_call* call) {
    const size_t req = size_t(static_cast<const char*>(call->request) - static_cast<const char*>(base));
    const size_t resp = size_t(static_cast<char*>(call->response) - static_cast<const char*>(base));
    if (!sync(mem, req, call->request_len, CL_MAP_WRITE)) return -EIO;
    const int status = dispatch(key, mem, req, resp, call);
    if (status == 0 && !sync(mem, resp, call->response_len, CL_MAP_READ)) return -EIO;
    return status;
  }

  // Direct invocation: the caller's buffers are plain memory; stage them.
  int run_staged(int key, rtaccel_service_call* call) {
    const size_t resp = (call->request_len + 63) / 64 * 64;
    const size_t total = std::max<size_t>(resp + call->response_cap, 64);
    cl_int err;
    cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, total, nullptr, &err);
    if (!mem) return -ENOMEM;
    int status = -EIO;
    if (clEnqueueWriteBuffer(queue_, mem, CL_TRUE, 0, call->request_len, call->request, 0, nullptr, nullptr) == CL_SUCCESS) {
      status = dispatch(key, mem, 0, resp, call);
      if (status == 0 && call->response_len &&
          clEnqueueReadBuffer(queue_, mem, CL_TRUE, resp, call->response_len, call->response, 0, nullptr, nullptr) != CL_SUCCESS)
        status = -EIO;
    }
    clReleaseMemObject(mem);
    return status;
  }

  // Checks the request as every backend does (rtaccel/requests.h, the header
  // read once from host memory), then runs the kernel on the device buffer.
  int dispatch(int key, cl_mem mem, size_t req, size_t resp, rtaccel_service_call* call) {
    auto elem = [](size_t bytes) { return cl_uint(bytes / sizeof(float)); };
    call->response_len = 0;
    rtaccel_request_view v;
    if (rtaccel_request_decode(key, call->request, call->request_len, call->response_cap, &v) < 0) return -EINVAL;
    const size_t inputs = req + rtaccel_request_header_size(key);
    switch (key) {
      case kBusy:
        return busy(cl_ulong(double(v.n) / 1000.0 * iterations_per_us_));
      case kVecadd:
      case kMatmul: {
        const uint64_t count = key == kVecadd ? v.n : v.n * v.n;
        const cl_uint a = elem(inputs), b = a + cl_uint(count), c = elem(resp);
        cl_kernel k = kernels_[key];
        clSetKernelArg(k, 0, sizeof(cl_mem), &mem);
        clSetKernelArg(k, 1, sizeof(a), &a);
        clSetKernelArg(k, 2, sizeof(b), &b);
        clSetKernelArg(k, 3, sizeof(c), &c);
        if (key == kMatmul) {
          const cl_uint nn = cl_uint(v.n);
          clSetKernelArg(k, 4, sizeof(nn), &nn);
        }
        if (!launch(k, key == kVecadd ? count : v.n, key == kVecadd ? 1 : v.n)) return -EIO;
        call->response_len = v.response_len;
        return 0;
      }
      case kReduction: {
        const cl_uint x = elem(inputs), n = cl_uint(v.n);
        cl_kernel k = kernels_[kReduction];
        clSetKernelArg(k, 0, sizeof(cl_mem), &mem);
        clSetKernelArg(k, 1, sizeof(x), &x);
        clSetKernelArg(k, 2, sizeof(n), &n);
        clSetKernelArg(k, 3, sizeof(cl_mem), &scratch_);
        // The partial sums are the kernel's `wide`: double, or float.
        double sum = 0;
        auto add_partials = [&](auto zero) {
          decltype(zero) partial[kPartials];
          if (!launch(k, kPartials, 1) || clEnqueueReadBuffer(queue_, scratch_, CL_TRUE, 0, sizeof(partial), partial,
                                                               0, nullptr, nullptr) != CL_SUCCESS)
            return false;
          for (auto p : partial) sum += p;
          return true;
        };
        if (!(fp64_ ? add_partials(0.0) : add_partials(0.0f))) return -EIO;
        // The response goes through the device buffer like every other result.
        if (clEnqueueWriteBuffer(queue_, mem, CL_TRUE, resp, sizeof(sum), &sum, 0, nullptr, nullptr) != CL_SUCCESS)
          return -EIO;
        call->response_len = v.response_len;
        return 0;
      }
      case kHistogram: {
        const cl_uint x = elem(inputs), c = elem(resp), n = cl_uint(v.n), bins = v.bins;
        cl_kernel z = kernels_[kZero];
        clSetKernelArg(z, 0, sizeof(cl_mem), &mem);
        clSetKernelArg(z, 1, sizeof(c), &c);
        cl_kernel k = kernels_[kHistogram];
        clSetKernelArg(k, 0, sizeof(cl_mem), &mem);
        clSetKernelArg(k, 1, sizeof(x), &x);
        clSetKernelArg(k, 2, sizeof(n), &n);
        clSetKernelArg(k, 3, sizeof(float), &v.lo);
        clSetKernelArg(k, 4, sizeof(float), &v.hi);
        const double scale = double(v.bins) / (double(v.hi) - double(v.lo));
        const float scale_float = float(scale);
        if (fp64_)
          clSetKernelArg(k, 5, sizeof(scale), &scale);
        else
          clSetKernelArg(k, 5, sizeof(scale_float), &scale_float);
        clSetKernelArg(k, 6, sizeof(bins), &bins);
        clSetKernelArg(k, 7, sizeof(c), &c);
        if (!launch(z, bins, 1) || !launch(k, n, 1)) return -EIO;
        call->response_len = v.response_len;
        return 0;
      }
    }
    return -EINVAL;
  }

  BackendOptions options_;
  cl_device_id device_ = nullptr;
  std::string name_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
  cl_kernel kernels_[kKernels] = {};
  cl_mem scratch_ = nullptr;  // the busy kernel's sink; the reduction's partial sums
  bool fp64_ = false;
  double iterations_per_us_ = 1.0;
  std::mutex mu_;
};

}  // namespace

Expected<std::unique_ptr<Backend>> make_opencl_backend(const BackendOptions& options) {
  auto backend = std::make_unique<OpenClBackend>();
  if (Status st = backend->open(options); !st) return st;
  return std::unique_ptr<Backend>(std::move(backend));
}

std::vector<BackendProbe> probe_backends() {
  std::vector<BackendProbe> out;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  out.push_back({"cpu", true, cores > 0, std::to_string(cores) + " cores (a core is a device)"});
  BackendProbe cl{"opencl", true, false, ""};
  const auto devices = all_devices();
  cl.found = !devices.empty();
  for (size_t i = 0; i < devices.size(); i++)
    cl.detail += (i ? "; " : "") + std::to_string(i) + ": " + device_name(devices[i]) +
                 (has_fp64(devices[i]) ? "" : kNoFp64);
  if (devices.empty()) cl.detail = "no OpenCL platform or device";
  out.push_back(cl);
  out.push_back(probe_cuda());
  return out;
}

#else  // !RTACCEL_HAVE_OPENCL

Expected<std::unique_ptr<Backend>> make_opencl_backend(const BackendOptions&) {
  return Status::error("rtaccel was built without OpenCL (install ocl-icd-opencl-dev and rebuild)", ENODEV);
}

std::vector<BackendProbe> probe_backends() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return {{"cpu", true, cores > 0, std::to_string(cores) + " cores (a core is a device)"},
          {"opencl", false, false, "built without OpenCL"},
          probe_cuda()};
}

#endif

}  // namespace rtaccel::accel
