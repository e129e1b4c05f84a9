// Other runs on this machine (internal): what runs that were killed left
// behind, and runs under way beside this one.
//
// A run removes what it made as it ends, whatever way it ends but one: a
// runner killed outright (SIGKILL, the OOM killer) removes nothing. Every
// name a run gives what it makes carries its runner's pid, so the next run
// finds those of runners that are gone and removes them: the network
// namespaces rtaccel-run-PID-N, the best-effort cgroup rtaccel-run-PID with
// whatever still runs in it, the shared-memory objects rtaccel-*.run-PID in
// /dev/shm, and the server's folder /tmp/rtaccel-run-PID-*.
#ifndef RTACCEL_EXEC_LEFTOVERS_H_
#define RTACCEL_EXEC_LEFTOVERS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace rtaccel::exec {

// The prefix of every name above (shared memory: "run-PID").
inline constexpr const char* kRunPrefix = "rtaccel-run-";

// Removes what runs whose runner is gone left behind; one line for each
// thing removed, to tell the user. What this user may not remove stays.
std::vector<std::string> remove_leftovers_of_dead_runs();

// The runners of the other runs under way on this machine: processes named
// rtaccel-exec whose parent is not one (an executor's or a bridge's is).
// Two runs share the machine's cores, and neither measures what it alone
// would take.
std::vector<pid_t> other_runs_under_way();

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_LEFTOVERS_H_
