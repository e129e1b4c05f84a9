#include "exec/leftovers.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "core/cgroup.h"
#include "core/netns.h"
#include "core/procfs.h"

namespace rtaccel::exec {
namespace {

constexpr uint64_t kSecond = 1000000000;

// The runner's pid in NAME, which begins with PREFIX and goes on with the
// pid and nothing or '-' after it; 0 where NAME is not such a name.
pid_t runner_in(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return 0;
  name.remove_prefix(prefix.size());
  pid_t pid = 0;
  const char* end = name.data() + name.size();
  const auto [at, error] = std::from_chars(name.data(), end, pid);
  if (error != std::errc() || pid <= 0) return 0;
  return at == end || *at == '-' ? pid : 0;
}

// Whether runner PID is gone. A pid taken since by another process reads as
// alive: what its run left stays, which is the safe side.
bool gone(pid_t pid) { return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH; }

// Calls FN with the name and path of each entry of FOLDER; a folder that
// cannot be read has none.
template <typename Fn>
void for_each_entry(const std::filesystem::path& folder, Fn fn) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
    fn(it->path().filename().string(), it->path());
}

// PID's name (its comm, as /proc/PID/stat gives it) and parent; false where
// it is gone or has ended.
bool name_and_parent(pid_t pid, std::string* name, pid_t* parent) {
  rtaccel_proc_stat st;
  if (!rtaccel_read_proc_stat(pid, &st) || st.state == 'Z') return false;
  *name = st.name;
  *parent = st.parent;
  return true;
}

}  // namespace

std::vector<pid_t> other_runs_under_way() {
  std::vector<pid_t> runners;
  const pid_t self = getpid();
  for_each_entry("/proc", [&](const std::string& entry, const std::filesystem::path&) {
    pid_t pid = 0;
    const auto [at, error] = std::from_chars(entry.data(), entry.data() + entry.size(), pid);
    if (error != std::errc() || at != entry.data() + entry.size() || pid == self) return;
    std::string name, parent_name;
    pid_t parent = 0, grandparent = 0;
    if (!name_and_parent(pid, &name, &parent) || name != "rtaccel-exec") return;
    if (name_and_parent(parent, &parent_name, &grandparent) && parent_name == "rtaccel-exec") return;
    runners.push_back(pid);
  });
  std::sort(runners.begin(), runners.end());
  return runners;
}

std::vector<std::string> remove_leftovers_of_dead_runs() {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  std::error_code ec;
  for_each_entry("/run/netns", [&](const std::string& name, const fs::path& path) {
    if (!gone(runner_in(name, kRunPrefix))) return;
    rtaccel_netns_del(name.c_str());
    if (!fs::exists(path, ec)) removed.push_back("network namespace " + name);
  });
  char root[256];
  if (rtaccel_cgroup2_root(root, sizeof(root)) == 0)
    for_each_entry(root, [&](const std::string& name, const fs::path& path) {
      if (!gone(runner_in(name, kRunPrefix))) return;
      // Its best-effort programs outlived the run: those that end on
      // SIGTERM get a second for it.
      int ended = 0;
      if (rtaccel_cgroup_remove(path.c_str(), kSecond, &ended) == 0)
        removed.push_back("cgroup " + name +
                          (ended ? " with the " + std::to_string(ended) + " process(es) still in it" : ""));
    });
  for_each_entry("/dev/shm", [&](const std::string& name, const fs::path& path) {
    const size_t dot = name.find(".run-");
    if (!name.starts_with("rtaccel-") || dot == std::string::npos) return;
    if (!gone(runner_in(std::string_view(name).substr(dot + 1), "run-"))) return;
    if (fs::remove(path, ec)) removed.push_back(path.string());
  });
  for_each_entry("/tmp", [&](const std::string& name, const fs::path& path) {
    if (!gone(runner_in(name, kRunPrefix)) || !fs::is_directory(path, ec)) return;
    fs::remove_all(path, ec);
    if (!ec) removed.push_back(path.string());
  });
  return removed;
}

}  // namespace rtaccel::exec
