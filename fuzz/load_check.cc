// Loads workload files the way every rtaccel tool does and checks the outcome.
//   load_check --expect-valid FILE...   every file loads and analyses
//   load_check --corpus DIR             every file in DIR loads or is refused
//                                       with diagnostics; none crashes
//   load_check --admission FILE...      rtaccel-server's admission control,
//                                       told every chain as `rtaccel run`
//                                       declares them, bounds each chain as
//                                       `rtaccel analyze` does, and refuses
//                                       a file exactly where a critical chain
//                                       has no bound within its deadline
//                                       (files with one node)
// Exit 0 on success, 1 on failure.
#include <dirent.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "accel/admission.h"
#include "exec/segments.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace {

using rtaccel::Status;
namespace analysis = rtaccel::analysis;
namespace workload = rtaccel::workload;

// What rtaccel-server's admission control is started with for W: the
// runner's options for it (whole microseconds, as on its command line).
rtaccel::accel::AdmissionOptions server_options(const workload::Workload& w) {
  rtaccel::accel::AdmissionOptions o;
  const auto up_to_us = [](uint64_t ns) { return (ns + 999) / 1000 * 1000; };
  const auto& first = w.accelerators.front();
  o.epsilon_ns = up_to_us(w.server ? w.server->overhead_ns : 0);
  o.kappa_ns = up_to_us(first.preemption_cost_ns);
  o.jitter_ns = up_to_us(w.release_jitter_ns);
  o.server_core = w.server ? w.server->core : -1;
  o.device_levels.assign(w.accelerators.size(), uint32_t(first.priority_levels));
  o.backend = first.backend;
  if (o.backend == workload::Backend::kCpu)
    for (size_t d = 0; d < w.accelerators.size(); ++d) o.device_cores.push_back(rtaccel::exec::device_of(w, d));
  const auto& iso = w.isolation;
  if (iso.declared && iso.cost_ns) {
    o.regulator_cost_ns = up_to_us(iso.cost_ns);
    o.regulator_period_ns = iso.period_ns / 1000 * 1000;
    o.regulated_cores = iso.cores;
  }
  return o;
}

// Every chain of W in one declaration, as `rtaccel run` makes it.
Status declare(const workload::Workload& w, rtaccel::accel::Admission* admission) {
  std::vector<rtaccel_chain_desc> chains(w.chains.size());
  for (size_t c = 0; c < w.chains.size(); ++c)
    if (Status st = rtaccel::exec::chain_desc_for(w, c, &chains[c]); !st) return st;
  return admission->declare(chains);
}

std::string bound_text(const analysis::ChainResult* r) {
  if (!r) return "missing";
  return r->bounded ? std::to_string(double(r->wcrt_ns) / 1e6) + " ms" : "none";
}

int check_admission(const std::string& path) {
  workload::LoadOptions options;
  options.machine_cores = 8;
  auto w = workload::load_file(path, options);
  if (!w) {
    std::printf("FAIL %s: %s\n", path.c_str(), w.status().message().c_str());
    return 1;
  }
  if (w->accelerators.empty() || w->nodes.size() > 1) {
    std::printf("FAIL %s: no accelerator, or more than one node: the server is not told all\n", path.c_str());
    return 1;
  }
  const auto full = analysis::analyze(*w);
  std::string unschedulable;
  for (const auto& r : full)
    if (r.critical && !r.schedulable && unschedulable.empty()) unschedulable = r.chain;
  rtaccel::accel::Admission admission(server_options(*w));
  const Status declared = declare(*w, &admission);
  if (!declared) {
    if (unschedulable.empty()) {
      std::printf("FAIL %s: refused though every critical chain is schedulable: %s\n", path.c_str(),
                  declared.message().c_str());
      return 1;
    }
    std::printf("# %s: refused, as chain '%s' is unschedulable: %s\n", path.c_str(), unschedulable.c_str(),
                declared.message().c_str());
    return 0;
  }
  if (!unschedulable.empty()) {
    std::printf("FAIL %s: admitted though chain '%s' is unschedulable\n", path.c_str(), unschedulable.c_str());
    return 1;
  }
  int differ = 0;
  const auto server = analysis::analyze(admission.workload());
  for (const auto& r : full) {
    const analysis::ChainResult* s = nullptr;
    for (const auto& candidate : server)
      if (candidate.chain == r.chain) s = &candidate;
    if (s && s->bounded == r.bounded && s->wcrt_ns == r.wcrt_ns) continue;
    ++differ;
    std::printf("FAIL %s: chain '%s': the server's bound %s, analyze's %s\n", path.c_str(), r.chain.c_str(),
                bound_text(s).c_str(), bound_text(&r).c_str());
  }
  if (!differ) std::printf("# %s: admitted, %zu chains bounded alike\n", path.c_str(), full.size());
  return differ ? 1 : 0;
}

int check(const std::string& path, bool expect_valid) {
  rtaccel::workload::LoadOptions options;
  options.machine_cores = 8;
  auto result = rtaccel::workload::load_file(path, options);
  if (result) {
    auto chains = rtaccel::analysis::analyze(*result);
    std::printf("# %s: loads, %zu chains analyzed\n", path.c_str(), chains.size());
    return 0;
  }
  const auto errors = result.status().lines();
  for (const auto& e : errors) std::printf("# %s\n", e.c_str());
  if (errors.empty() || result.status().message().empty()) {
    std::printf("FAIL %s: refused without a diagnostic\n", path.c_str());
    return 1;
  }
  if (expect_valid) {
    std::printf("FAIL %s: expected to load\n", path.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s --expect-valid FILE... | --corpus DIR | --admission FILE...\n", argv[0]);
    return 2;
  }
  int failures = 0;
  int files = 0;
  if (std::strcmp(argv[1], "--corpus") == 0) {
    DIR* dir = opendir(argv[2]);
    if (!dir) {
      std::fprintf(stderr, "%s: cannot open %s\n", argv[0], argv[2]);
      return 1;
    }
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') continue;
      failures += check(std::string(argv[2]) + "/" + entry->d_name, false);
      ++files;
    }
    closedir(dir);
  } else if (std::strcmp(argv[1], "--admission") == 0) {
    for (int i = 2; i < argc; ++i, ++files) failures += check_admission(argv[i]);
  } else {
    for (int i = 2; i < argc; ++i, ++files) failures += check(argv[i], true);
  }
  std::printf("%d passed, %d failed\n", files - failures, failures);
  return failures ? 1 : 0;
}
