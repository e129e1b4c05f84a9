#include "core/daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/clock.h"

namespace rtaccel::core {

namespace {

constexpr int kTakenSignals[] = {SIGINT, SIGHUP, SIGTSTP, SIGTTOU, SIGTERM, SIGPIPE};
sigset_t started_ignoring;  // of kTakenSignals; empty until noted

}  // namespace

void note_signals_at_start() {
  sigemptyset(&started_ignoring);
  for (int sig : kTakenSignals) {
    struct sigaction was {};
    if (sigaction(sig, nullptr, &was) == 0 && was.sa_handler == SIG_IGN) sigaddset(&started_ignoring, sig);
  }
}

void notify_ready(int fd) {
  static const char kReady[] = "ready\n";
  ssize_t n;
  do {
    n = write(fd, kReady, sizeof(kReady) - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

Child::Child(Child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      group_(other.group_),
      ready_(std::move(other.ready_)),
      ready_seen_(other.ready_seen_) {}

Child& Child::operator=(Child&& other) noexcept {
  kill_now();
  pid_ = std::exchange(other.pid_, -1);
  group_ = other.group_;
  ready_ = std::move(other.ready_);
  ready_seen_ = other.ready_seen_;
  return *this;
}

Child::~Child() { kill_now(); }

Expected<Child> Child::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) return Status::error("nothing to start");
  int ready[2] = {-1, -1};
  if (options.ready_handshake && pipe2(ready, O_CLOEXEC) < 0) return Status::os_error("pipe", errno);
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<std::string> args = argv;
  if (options.ready_handshake) {
    args.push_back("--ready-fd");
    args.push_back(std::to_string(ready[1]));
  }
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env_strings = options.environment.value_or(std::vector<std::string>());
  std::vector<char*> cenv;
  for (auto& e : env_strings) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  char** envp = options.environment ? cenv.data() : environ;
  const pid_t parent = getpid();

  // Until the child has set its signals, none is taken: one that came
  // between fork and execve would run a copy of this process's handler in
  // the child, which execve then forgets (a SIGTERM that asked a supervisor
  // to end its program lost; the supervisor killed later, its program left).
  // Blocked, it waits for the child's own dispositions: a SIGTERM then ends
  // the child before it has started anything.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    if (ready[0] >= 0) close(ready[0]), close(ready[1]);
    return Status::os_error("fork", err);
  }
  if (pid == 0) {
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction was {};
      if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, nullptr, &was) == 0 && was.sa_handler != SIG_IGN &&
          was.sa_handler != SIG_DFL)
        signal(sig, SIG_DFL);
    }
    if (options.parent_death_signal) {
      prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (getppid() != parent) _exit(127);
    }
    if (!options.log_path.empty()) {
      const int fd = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
    }
    if (options.ignore_terminal_signals) {
      signal(SIGINT, SIG_IGN);
      signal(SIGHUP, SIG_IGN);
      signal(SIGTSTP, SIG_IGN);
    }
    if (options.stdin_from_null) {
      const int fd = open("/dev/null", O_RDONLY);  // 0 itself where the parent's stdin was closed
      if (fd > STDIN_FILENO) {
        dup2(fd, STDIN_FILENO);
        close(fd);
      }
    }
    if (options.own_session)
      setsid();
    else if (options.own_process_group)
      setpgid(0, 0);
    if (options.as_started) {
      // Handlers are reset by execve; what is ignored stays ignored.
      for (int sig : kTakenSignals) signal(sig, sigismember(&started_ignoring, sig) == 1 ? SIG_IGN : SIG_DFL);
    }
    if (options.ready_handshake) fcntl(ready[1], F_SETFD, 0);  // inherited by the program
    sigprocmask(SIG_SETMASK, &before, nullptr);
    execve(cargv[0], cargv.data(), envp);
    const char* why = strerror(errno);
    (void)!write(STDERR_FILENO, "cannot start ", 13);
    (void)!write(STDERR_FILENO, cargv[0], strlen(cargv[0]));
    (void)!write(STDERR_FILENO, ": ", 2);
    (void)!write(STDERR_FILENO, why, strlen(why));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  Child child;
  child.pid_ = pid;
  if (options.own_process_group && !options.own_session)
    setpgid(pid, pid);  // also here: no signal may reach the group before the child made it
  // (A session leader's group cannot be made from here: until the child's
  // setsid(), send() finds no group and signals the child alone.)
  child.group_ = options.own_process_group || options.own_session;
  if (options.ready_handshake) {
    close(ready[1]);
    child.ready_.reset(ready[0]);
  }
  return child;
}

Status Child::wait_ready(uint64_t timeout_ns) {
  if (ready_seen_) return Status();
  if (!ready_) return Status::error("started without a readiness handshake");
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  char buf[16];
  size_t got = 0;
  for (;;) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline) return Status::error("did not get ready in " + std::to_string(timeout_ns / 1000000) + " ms");
    pollfd p{ready_.get(), POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>((deadline - now + 999999) / 1000000));
    if (r < 0 && errno != EINTR) return Status::os_error("poll", errno);
    if (r <= 0) continue;
    const ssize_t n = read(ready_.get(), buf + got, sizeof(buf) - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
      if (std::string(buf, got).find("ready\n") != std::string::npos) {
        ready_.reset();
        ready_seen_ = true;
        return Status();
      }
      if (got == sizeof(buf)) return Status::error("answered something else than ready");
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // End of file: the child closed the pipe without saying ready.
    int status = 0;
    for (int i = 0; i < 200; i++) {  // give it up to 2 s to finish exiting
      if (exited(&status)) return Status::error(describe_wait_status(status));
      sleep_ns(10000000);
    }
    return Status::error("closed its readiness pipe without saying ready");
  }
}

bool Child::exited(int* status) {
  if (pid_ < 0) return true;
  if (waitpid(pid_, status, WNOHANG) != pid_) return false;
  pid_ = -1;
  return true;
}

Child Child::adopt(pid_t pid) {
  Child child;
  child.pid_ = pid;
  return child;
}

void Child::send(int sig) const {
  if (group_ && kill(-pid_, sig) == 0) return;
  kill(pid_, sig);
}

int Child::terminate(uint64_t timeout_ns) {
  if (pid_ < 0) return -1;
  send(SIGTERM);
  // A stopped child (SIGSTOP, kill -TSTP) takes its SIGTERM once continued;
  // else it would wait for the SIGKILL, and a supervisor killed so leaves
  // what it supervises behind.
  send(SIGCONT);
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  int status = -1;
  while (monotonic_ns() < deadline) {
    if (exited(&status)) return status;
    sleep_ns(5000000);
  }
  send(SIGKILL);
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

void Child::kill_now() {
  if (pid_ < 0) return;
  send(SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace rtaccel::core
