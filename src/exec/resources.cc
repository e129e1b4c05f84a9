#include "exec/resources.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/resident.h"

namespace rtaccel::exec {

using nlohmann::json;

bool read_resources(pid_t pid, ProcessResources* out) {
  const std::string dir = "/proc/" + std::to_string(pid);
  FILE* statm = fopen((dir + "/statm").c_str(), "re");
  if (!statm) return false;
  unsigned long long size = 0, resident = 0, shared = 0;
  const bool read = fscanf(statm, "%llu %llu %llu", &size, &resident, &shared) == 3;
  fclose(statm);
  // A process that ended and is not yet reaped (a zombie) maps nothing and
  // holds no descriptors: it is gone, not a process that let all go.
  if (!read || size == 0) return false;
  const auto page_kb = static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 1024;
  out->rss_kb = resident * page_kb;
  out->shared_kb = shared * page_kb;
  DIR* fds = opendir((dir + "/fd").c_str());
  if (!fds) return false;
  out->descriptors = 0;
  while (const dirent* e = readdir(fds)) out->descriptors += e->d_name[0] != '.';
  closedir(fds);
  // Counting from the listing's own descriptor: it is not the process's.
  if (pid == getpid() && out->descriptors > 0) --out->descriptors;
  return true;
}

void ResourceSampler::watch(pid_t pid, std::string name) {
  if (pid > 0) processes_.push_back({pid, std::move(name), {}});
}

void ResourceSampler::sample(uint64_t now_ns) {
  for (Process& p : processes_) {
    ProcessResources r;
    if (read_resources(p.pid, &r)) p.samples.emplace_back(now_ns, r);
  }
}

void ResourceSampler::reserve(size_t samples) {
  for (Process& p : processes_) core::reserve_resident(p.samples, samples);
}

json ResourceSampler::summary() const {
  json out = json::array();
  for (const Process& p : processes_) {
    json one = {{"process", p.name}, {"pid", p.pid}, {"samples", p.samples.size()}};
    if (!p.samples.empty()) {
      uint64_t rss_max = 0, private_max = 0, fds_max = 0;
      for (const auto& [at, r] : p.samples) {
        rss_max = std::max(rss_max, r.rss_kb);
        private_max = std::max(private_max, r.rss_kb - r.shared_kb);
        fds_max = std::max(fds_max, r.descriptors);
      }
      const ProcessResources& first = p.samples.front().second;
      const ProcessResources& last = p.samples.back().second;
      one["rss_kb"] = {{"first", first.rss_kb}, {"last", last.rss_kb}, {"max", rss_max}};
      one["private_kb"] = {
          {"first", first.rss_kb - first.shared_kb}, {"last", last.rss_kb - last.shared_kb}, {"max", private_max}};
      one["descriptors"] = {{"first", first.descriptors}, {"last", last.descriptors}, {"max", fds_max}};
    }
    out.push_back(std::move(one));
  }
  return out;
}

}  // namespace rtaccel::exec
