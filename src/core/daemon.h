// Starting and supervising rtaccel's daemons and helper processes (core,
// internal).
//
// Readiness handshake: the parent passes the write end of a pipe as
// `--ready-fd N`; the daemon writes "ready\n" there once it serves, then
// closes it. The parent waits on the read end: "ready" means up, end of file
// means the daemon died or gave up before, and nobody polls connect().
#ifndef RTACCEL_CORE_DAEMON_H_
#define RTACCEL_CORE_DAEMON_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/fd.h"
#include "rtaccel/status.hpp"

namespace rtaccel::core {

// In the daemon: says it is ready on fd and closes it.
void notify_ready(int fd);

// Notes which of the signals rtaccel's programs take for their own (the
// terminal's SIGINT, SIGHUP, SIGTSTP and SIGTTOU, SIGTERM, SIGPIPE) this
// process was started with ignored, for SpawnOptions::as_started. Called
// first in main, before any of them is changed.
void note_signals_at_start();

struct SpawnOptions {
  // Where the child's stdout and stderr go; empty keeps the parent's.
  std::string log_path;
  // Signal the child gets when the parent dies (0: none).
  int parent_death_signal = 0;
  // The child ignores SIGINT and SIGHUP, which a terminal sends its whole
  // foreground process group (Ctrl-C, a hang-up): they are meant for the
  // parent, which stops the child. And Ctrl-Z's SIGTSTP, which would stop
  // it in the middle of the parent's work.
  bool ignore_terminal_signals = false;
  // A program of the user's (best-effort work): it starts with those
  // signals as this process was started with them (note_signals_at_start;
  // not noted: all at their default), not as this process set them for
  // itself. In it `timeout -s INT` ends what it runs, and a pipeline's
  // writer ends on SIGPIPE when its reader is done, as on a command line.
  bool as_started = false;
  // The child reads /dev/null, not the parent's stdin: in a process group
  // of its own, a program that read the terminal would be stopped there
  // (SIGTTIN), its work silently absent.
  bool stdin_from_null = false;
  // Pass a readiness pipe as `--ready-fd N` after argv[0]'s arguments.
  bool ready_handshake = false;
  // The child leads a process group of its own, and terminate() and
  // kill_now() signal the whole group: a shell and what it started.
  bool own_process_group = false;
  // The same, and the child leads a session of its own: it has no
  // controlling terminal, so nothing it starts is stopped for reading or
  // writing one (SIGTTIN, SIGTTOU: a program that opens /dev/tty gets ENXIO,
  // as in a cron job), and no terminal's hang-up or Ctrl-C reaches it.
  bool own_session = false;
  // The child's environment (NAME=VALUE each); unset: the parent's.
  std::optional<std::vector<std::string>> environment;
};

// A child process that is killed and reaped when its owner goes away.
class Child {
 public:
  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  // Starts argv[0] (a path) with argv.
  static Expected<Child> spawn(const std::vector<std::string>& argv, const SpawnOptions& options);

  // With the handshake: waits up to timeout_ns for "ready". An error says
  // whether the child exited (and how) or did not answer in time.
  Status wait_ready(uint64_t timeout_ns);
  // True, with its wait status, once the child has exited (reaps it).
  bool exited(int* status);
  // A child forked by the caller (not started by spawn).
  static Child adopt(pid_t pid);
  // SIGTERM (and SIGCONT, for a child that is stopped), then SIGKILL after
  // timeout_ns; reaps it and returns its wait status (-1 if it was gone
  // already).
  int terminate(uint64_t timeout_ns);
  void kill_now();
  pid_t pid() const { return pid_; }

 private:
  void send(int sig) const;

  pid_t pid_ = -1;
  bool group_ = false;
  UniqueFd ready_;
  bool ready_seen_ = false;
};

// "exited with status N" / "killed by signal N (name)".
std::string describe_wait_status(int status);

}  // namespace rtaccel::core

#endif  // RTACCEL_CORE_DAEMON_H_
