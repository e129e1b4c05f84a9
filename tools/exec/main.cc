// rtaccel-exec: runs a workload under one policy and writes its measurements
// (the engine behind `rtaccel run`).
#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/daemon.h"
#include "core/exit.h"
#include "core/signals.h"
#include "core/size.h"
#include "exec/run_options.h"
#include "rtaccel/exec.hpp"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<uint32_t> g_pause_requests{0};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

// Usage and options: one table (exec/run_options.h), which `rtaccel run`
// reads too.
int bad(const rtaccel::exec::RunOptionSpec& spec, const char* value) {
  fprintf(stderr, "rtaccel-exec: bad --%s (%s) '%s'\n%s", spec.name, spec.takes, value,
          rtaccel::exec::run_usage().c_str());
  return RTACCEL_EXIT_BAD_INPUT;
}

// The executors are forks of this process, so the interposer must be in it:
// unless it already is, in these modes, this program starts again under it.
// Returns 0 when it is in place, else an exit status.
int under_shim(const rtaccel::exec::RunOptions& o, char** argv) {
  const char* modes = getenv("RTACCEL_SHIM");
  if (modes && o.shim_modes == modes) return 0;  // started again; the runner checks it took
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const char* lib_env = getenv("RTACCEL_SHIM_LIB");
  const std::string lib = lib_env && *lib_env ? lib_env : (self.parent_path() / "librtaccel_shim.so").string();
  if (ec || access(lib.c_str(), R_OK) != 0) {
    fprintf(stderr, "rtaccel-exec: --shim: cannot find the interposer %s (RTACCEL_SHIM_LIB names another)\n",
            lib.c_str());
    return RTACCEL_EXIT_RUNTIME;
  }
  // Each program writes its report there when it exits, this one too, even
  // when the run fails before it has made its result folder.
  const auto out = std::filesystem::absolute(o.out_dir, ec) / "shim";
  if (std::filesystem::create_directories(out, ec); ec) {
    fprintf(stderr, "rtaccel-exec: --shim: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return RTACCEL_EXIT_RUNTIME;
  }
  // The dynamic linker splits LD_PRELOAD at spaces as well as colons: a
  // library in a folder whose path has a space goes in by its name, that
  // folder first in LD_LIBRARY_PATH, split at colons and semicolons alone
  // (as rtaccel.locks does for `rtaccel shim`).
  std::string entry = lib;
  if (lib.find(':') != std::string::npos ||
      (lib.find(' ') != std::string::npos && lib.find(';') != std::string::npos)) {
    fprintf(stderr, "rtaccel-exec: --shim: %s: the interposer's path has a character the dynamic linker splits "
                    "LD_PRELOAD at (':', or ' ' with ';'): install rtaccel where its path has none\n", lib.c_str());
    return RTACCEL_EXIT_RUNTIME;
  }
  if (lib.find(' ') != std::string::npos) {
    const std::filesystem::path path(lib);
    const char* folders = getenv("LD_LIBRARY_PATH");
    const std::string searched = path.parent_path().string() + (folders && *folders ? ":" + std::string(folders) : "");
    setenv("LD_LIBRARY_PATH", searched.c_str(), 1);
    entry = path.filename().string();
  }
  const char* preload = getenv("LD_PRELOAD");
  const std::string preloads = entry + (preload && *preload ? ":" + std::string(preload) : "");
  setenv("LD_PRELOAD", preloads.c_str(), 1);
  setenv("RTACCEL_SHIM", o.shim_modes.c_str(), 1);
  setenv("RTACCEL_SHIM_OUT", out.c_str(), 1);
  execv(self.c_str(), argv);
  fprintf(stderr, "rtaccel-exec: --shim: cannot start again under the interposer: %s\n", strerror(errno));
  return RTACCEL_EXIT_RUNTIME;
}

}  // namespace

int main(int argc, char** argv) {
  // Before the run takes Ctrl-C and the rest for its own: what its
  // best-effort programs are to start with.
  rtaccel::core::note_signals_at_start();
  rtaccel::exec::RunOptions o;
  // getopt_long's tables from the options': a long option's val is its
  // index in the table past 256, or its short letter.
  const auto specs = rtaccel::exec::run_option_specs();
  std::vector<option> longopts;
  std::string shortopts;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& spec = specs[i];
    const int val = spec.short_name ? spec.short_name : static_cast<int>(256 + i);
    longopts.push_back({spec.name, spec.value ? required_argument : no_argument, nullptr, val});
    if (spec.short_name) shortopts += std::string(1, spec.short_name) + (spec.value ? ":" : "");
  }
  longopts.push_back({"help", no_argument, nullptr, 'h'});
  longopts.push_back({nullptr, 0, nullptr, 0});
  shortopts += "h";
  const std::string usage = rtaccel::exec::run_usage();
  int opt;
  while ((opt = getopt_long(argc, argv, shortopts.c_str(), longopts.data(), nullptr)) != -1) {
    if (opt == 'h') {
      fputs(usage.c_str(), stdout);
      return 0;
    }
    const rtaccel::exec::RunOptionSpec* spec = nullptr;
    for (size_t i = 0; i < specs.size() && !spec; ++i)
      if (opt == (specs[i].short_name ? specs[i].short_name : static_cast<int>(256 + i))) spec = &specs[i];
    if (!spec) {
      fputs(usage.c_str(), stderr);
      return RTACCEL_EXIT_BAD_INPUT;
    }
    if (!spec->set(&o, optarg)) return bad(*spec, optarg ? optarg : "");
  }
  if (optind != argc - 1) {
    fputs(usage.c_str(), stderr);
    return RTACCEL_EXIT_BAD_INPUT;
  }
  o.workload = argv[optind];
  if (!o.shim_modes.empty()) {
    if (const int status = under_shim(o, argv); status) return status;
  }
  // Ctrl-C, SIGTERM and a hang-up (the terminal or the ssh session that
  // started a long run gone) end the run early; the results are still
  // written. Not where they were ignored when the run began: `nohup` is
  // asked to outlive the terminal, and a shell's background job without
  // job control ignores Ctrl-C.
  rtaccel_stop_on_signals([](int) { g_stop.store(true, std::memory_order_relaxed); }, 0);
  // A reader of this output that went (`rtaccel run ... 2>&1 | tee log`,
  // tee gone with the terminal) is no reason to lose the run: a write to it
  // fails, and the results still go to their files.
  signal(SIGPIPE, SIG_IGN);
  // A terminal's Ctrl-Z (SIGTSTP, to the whole foreground process group)
  // would stop the executors mid-run, and every instance across the pause
  // would miss its deadline for no fault of the analysis'. The run's
  // processes ignore it; the runner says so. A background run's progress
  // line goes on under `stty tostop` too (SIGTTOU).
  struct sigaction sa{};
  sa.sa_handler = [](int) { g_pause_requests.fetch_add(1, std::memory_order_relaxed); };
  sigaction(SIGTSTP, &sa, nullptr);
  signal(SIGTTOU, SIG_IGN);
  o.stop = &g_stop;
  o.pause_requests = &g_pause_requests;
  const auto end = rtaccel::exec::run_workload(o);
  if (!end) {
    fprintf(stderr, "rtaccel-exec: %s\n", end.status().message().c_str());
    // The server's admission control found a deadline miss (EDEADLK): the
    // property the run rests on does not hold, as for rtaccel analyze.
    if (end.status().err() == EDEADLK) return RTACCEL_EXIT_FAILS;
    return end.status().invalid_input() ? RTACCEL_EXIT_BAD_INPUT : RTACCEL_EXIT_RUNTIME;
  }
  return *end == rtaccel::exec::RunEnd::kInterrupted ? RTACCEL_EXIT_INTERRUPTED : RTACCEL_EXIT_OK;
}
