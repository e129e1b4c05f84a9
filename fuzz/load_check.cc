// Loads workload files the way every rtaccel tool does and checks the outcome.
//   load_check --expect-valid FILE...   every file loads and analyses
//   load_check --corpus DIR             every file in DIR loads or is refused
//                                       with diagnostics; none crashes
// Exit 0 on success, 1 on failure.
#include <dirent.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace {

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
    std::fprintf(stderr, "usage: %s --expect-valid FILE... | --corpus DIR\n", argv[0]);
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
  } else {
    for (int i = 2; i < argc; ++i, ++files) failures += check(argv[i], true);
  }
  std::printf("%d passed, %d failed\n", files - failures, failures);
  return failures ? 1 : 0;
}
