// The run's processes' resident memory and open descriptors (internal).
//
// A real-time system runs for days: a process whose descriptors or memory
// grow with time fails long after any test ended. The runner samples each
// of its processes (the server, executors, bridges, the regulator, itself)
// through the run, so that a long run says whether they held flat.
#ifndef RTACCEL_EXEC_RESOURCES_H_
#define RTACCEL_EXEC_RESOURCES_H_

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rtaccel::exec {

struct ProcessResources {
  uint64_t rss_kb = 0;       // resident memory (/proc/PID/statm)
  // Of it, pages of files and of shared memory (the server's regions, the
  // run's shared state): resident once however many processes map them.
  uint64_t shared_kb = 0;
  uint64_t descriptors = 0;  // open file descriptors (/proc/PID/fd)
};

// PID's resources now; false once it is gone (or was never there).
bool read_resources(pid_t pid, ProcessResources* out);

class ResourceSampler {
 public:
  // Samples PID under NAME ("executor ex_hot", "server") from now on.
  void watch(pid_t pid, std::string name);
  // Reads every watched process that is still there: a file and a folder
  // of /proc each.
  void sample(uint64_t now_ns);
  // Room for SAMPLES samples of each process watched now, resident now.
  void reserve(size_t samples);

  // Per process: its name and pid, how many samples, and its resident
  // memory, the part of it not shared, and descriptors at the first sample,
  // the last and at most.
  nlohmann::json summary() const;

  struct Process {
    pid_t pid = 0;
    std::string name;
    std::vector<std::pair<uint64_t, ProcessResources>> samples;  // (at, resources)
  };
  const std::vector<Process>& processes() const { return processes_; }

 private:
  std::vector<Process> processes_;
};

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_RESOURCES_H_
