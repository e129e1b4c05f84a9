// Loads the cuda backend, librtaccel_cuda.so, when a server or a
// direct-invocation handle asks for it. Keeping CUDA in a module of its own
// means rtaccel's programs start, and its sanitizer builds link, without the
// CUDA runtime and cuBLAS, which only the cuda backend needs.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "accel/backend.h"

namespace rtaccel::accel {
namespace {

using OpenFn = Backend* (*)(const BackendOptions*, char*, size_t);
using ProbeFn = int (*)(char*, size_t);

constexpr const char* kModule = "librtaccel_cuda.so";

struct Module {
  OpenFn open = nullptr;
  ProbeFn probe = nullptr;
  std::string error;
};

#ifndef RTACCEL_NO_CUDA_MODULE
std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string executable_dir() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return {};
  path[n] = '\0';
  return folder_of(path);
}

// The folder of the object this code is linked into: librtaccel.so's when a
// client uses direct invocation, else the program's.
std::string own_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&folder_of), &info) == 0 || !info.dli_fname) return {};
  return folder_of(info.dli_fname);
}
#endif

// $RTACCEL_CUDA_MODULE; else beside the running program (rtaccel's tools and
// the module share a folder in the build and in a wheel); else where an
// installation keeps it, relative to the program (bin/ -> lib/rtaccel/) or to
// librtaccel.so (lib/ -> lib/rtaccel/). Loaded once and never unloaded:
// backends' code lives in it.
const Module& module() {
  static Module m;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = getenv("RTACCEL_CUDA_MODULE"); env && *env) candidates.push_back(env);
#ifndef RTACCEL_NO_CUDA_MODULE
    const std::string exe = executable_dir(), own = own_dir();
    candidates.push_back(exe + "/" + kModule);
    candidates.push_back(exe + "/" RTACCEL_MODULE_RELDIR "/" + kModule);
    candidates.push_back(own + "/rtaccel/" + kModule);
#endif
    void* handle = nullptr;
    for (const std::string& path : candidates) {
      if (path.empty()) continue;
      if (access(path.c_str(), F_OK) != 0) continue;
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
      if (handle) break;
      m.error = std::string("cannot load the cuda backend: ") + dlerror();
      return;
    }
    if (!handle) {
      m.error = "the cuda backend is not part of this build (no nvcc when rtaccel was built, or a sanitizer build)";
      return;
    }
    m.open = reinterpret_cast<OpenFn>(dlsym(handle, "rtaccel_cuda_open"));
    m.probe = reinterpret_cast<ProbeFn>(dlsym(handle, "rtaccel_cuda_probe"));
    if (!m.open || !m.probe) {
      m.open = nullptr;
      m.error = std::string(kModule) + " lacks its entry points (a module of another rtaccel version?)";
    }
  });
  return m;
}

}  // namespace

Expected<std::unique_ptr<Backend>> make_cuda_backend(const BackendOptions& options) {
  const Module& m = module();
  if (!m.open) return Status::error(m.error, ENODEV);
  char reason[512] = {};
  Backend* backend = m.open(&options, reason, sizeof(reason));
  if (!backend) return Status::error(reason, ENODEV);
  return std::unique_ptr<Backend>(backend);
}

BackendProbe probe_cuda() {
  const Module& m = module();
  if (!m.open) return {"cuda", false, false, m.error};
  char detail[1024] = {};
  const int count = m.probe(detail, sizeof(detail));
  return {"cuda", true, count > 0, detail};
}

}  // namespace rtaccel::accel
