// Loads the cuda backend, librtaccel_cuda.so, when a server or a
// direct-invocation handle asks for it. Keeping CUDA in a module of its own
// means rtaccel's programs start, and its sanitizer builds link, without the
// CUDA runtime and cuBLAS, which only the cuda backend needs.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>

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

std::string executable_dir() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return {};
  path[n] = '\0';
  std::string s(path);
  return s.substr(0, s.rfind('/'));
}

// $RTACCEL_CUDA_MODULE, else beside the running program (rtaccel's tools live
// beside the module), else where the build put it. Loaded once and never
// unloaded: backends' code lives in it.
const Module& module() {
  static Module m;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string candidates[3];
    if (const char* env = getenv("RTACCEL_CUDA_MODULE"); env && *env) candidates[0] = env;
    candidates[1] = executable_dir() + "/" + kModule;
#ifdef RTACCEL_MODULE_DIR
    candidates[2] = std::string(RTACCEL_MODULE_DIR) + "/" + kModule;
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

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options, std::string* why) {
  const Module& m = module();
  if (!m.open) {
    *why = m.error;
    return nullptr;
  }
  char reason[512] = {};
  Backend* backend = m.open(&options, reason, sizeof(reason));
  if (!backend) *why = reason;
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
