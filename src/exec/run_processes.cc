// The processes a run starts beside its executors (exec/run.h): the private
// rtaccel-server and the declarer, the executors and bridges, the regulator
// of an isolated run, best-effort programs; and the run's children's lot
// (die_with_parent, join_the_run).
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cassert>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>
#include "core/busy.h"
#include "core/cgroup.h"
#include "core/clock.h"
#include "core/daemon.h"
#include "core/fd.h"
#include "core/futex.h"
#include "core/percentile.h"
#include "core/procfs.h"
#include "core/realtime.h"
#include "core/signals.h"
#include "exec/bridge.h"
#include "exec/executor.h"
#include "exec/leftovers.h"
#include "exec/monitor.h"
#include "exec/nodes.h"
#include "exec/plan.h"
#include "exec/resources.h"
#include "exec/segments.h"
#include "exec/shared.h"
#include "exec/timeline.h"
#include "rtaccel/accel.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/exec.hpp"
#include "rtaccel/isolate.h"

#include "exec/run.h"

namespace rtaccel::exec {

namespace {

constexpr int kGatewayPort = 7411;  // in the accelerators' node's own namespace

// paam: the workload's chains are declared to the server's admission
// control before any executor registers a callback, so that it analyses
// what the run's own analysis does: the chains that call no accelerator
// beside those that do, and the chains that feed a fusion before the one
// waiting at it. A chain past the protocol's limits is left out, and the
// run says so. A process of its own declares them and holds them, so that
// a server that never answers keeps the runner waiting no more than it
// waits for executors (watch_declaration()).
struct DeclarationAnswer {
  int32_t err;
  char why[256];
};
static_assert(sizeof(DeclarationAnswer) <= PIPE_BUF, "one write, read whole");

// What a best-effort program's log keeps: its first 16 MiB of output, and
// its last 64 KiB where it wrote more.
constexpr uint64_t kBestEffortLogBytes = uint64_t{16} << 20;

// The last line a program wrote to its log (from its last 4 KiB: a
// build's log can be large): what a shell says when it cannot find a
// command, or what a benchmark printed when it gave up.
static std::string last_line(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : 0;
  in.seekg(std::max<std::streamoff>(0, size - 4096));
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// The processes of a best-effort program (the supervisor's descendants:
// those that left their parent come to it, the subreaper) that are
// stopped, as (pid, name); of at most the first 4096 processes found, which
// bounds what a fork bomb costs this loop. Stopped by a signal ('T'), not
// by a tracer ('t'), which under strace is a moment at each system call.
static std::vector<std::pair<pid_t, std::string>> stopped_processes(pid_t supervisor) {
  std::vector<std::pair<pid_t, std::string>> stopped;
  std::vector<long> found;
  auto add = [](long child, void* arg) { static_cast<std::vector<long>*>(arg)->push_back(child); };
  rtaccel_for_each_child(supervisor, add, &found);
  for (size_t i = 0; i < found.size() && i < 4096; ++i) {
    rtaccel_proc_stat st;
    if (!rtaccel_read_proc_stat(found[i], &st)) continue;
    if (st.state == 'T') stopped.emplace_back(static_cast<pid_t>(found[i]), st.name);
    rtaccel_for_each_child(found[i], add, &found);
  }
  return stopped;
}

// "sleep (pid 41), sh (pid 40)", the first three and a count of the rest.
static std::string name_processes(const std::vector<std::pair<pid_t, std::string>>& processes) {
  std::string said;
  for (size_t i = 0; i < processes.size() && i < 3; ++i)
    said += (i ? ", " : "") + processes[i].second + " (pid " + std::to_string(processes[i].first) + ")";
  if (processes.size() > 3) said += " and " + std::to_string(processes.size() - 3) + " more";
  return said;
}

}  // namespace

// In a forked child: dies with the runner, whatever kills it.
void die_with_parent(pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
}

// In a forked process of the run (an executor, a bridge): dies with the
// runner, and leaves to it the signals a terminal sends its whole
// foreground process group, Ctrl-C and a hang-up, and a SIGTERM from
// anyone else (`timeout`, a service manager): the runner then stops the
// run's processes itself and writes the results. Ctrl-Z does not stop
// them. A SIGTERM from the runner ends the process.
void join_the_run(pid_t runner) {
  die_with_parent(runner);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTSTP, SIG_IGN);
  rtaccel_stop_through_parent(
      [](int sig) {
        signal(sig, SIG_DFL);
        raise(sig);
      },
      0);
}

std::string self_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// The interposer's report written now, when it is preloaded into this
// process (rtaccel/shim.h): forked executors leave with _exit(), which skips
// the report it writes at exit.
void write_shim_report() {
  using WriteReport = int (*)();
  if (auto write = reinterpret_cast<WriteReport>(dlsym(RTLD_DEFAULT, "rtaccel_shim_write_report"))) write();
}

// This process's environment without the interposer, for the programs a run
// starts beside the workload's (the regulator, best-effort load): their locks
// are not the run's, and their reports would be mistaken for its programs'.
std::vector<std::string> environment_without_shim() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view var(*e);
    if (var.starts_with("RTACCEL_SHIM")) continue;
    if (!var.starts_with("LD_PRELOAD=")) {
      env.emplace_back(var);
      continue;
    }
    std::string kept;
    std::string_view list = var.substr(strlen("LD_PRELOAD="));
    while (!list.empty()) {
      const size_t end = std::min(list.find_first_of(": "), list.size());
      const std::string_view lib = list.substr(0, end);
      if (!lib.empty() && lib.find("librtaccel_shim.so") == std::string_view::npos)
        kept += (kept.empty() ? "" : ":") + std::string(lib);
      list.remove_prefix(std::min(end + 1, list.size()));
    }
    if (!kept.empty()) env.push_back("LD_PRELOAD=" + kept);
  }
  return env;
}

std::string isolate_binary(const RunOptions& o) {
  return o.isolate_binary.empty() ? self_dir() + "/rtaccel-isolate" : o.isolate_binary;
}

// The server's command line for the workload's accelerators.
std::vector<std::string> server_args(const workload::Workload& w, const std::string& socket) {
  assert(!w.accelerators.empty());
  const auto& first = w.accelerators.front();
  std::vector<std::string> args = {"--socket", socket, "--backend",
                                   std::string(workload::to_string(first.backend)),
                                   "--levels", std::to_string(first.priority_levels)};
  for (size_t d = 0; d < w.accelerators.size(); ++d) {
    args.push_back("--device");
    args.push_back(std::to_string(device_of(w, d)));
  }
  const uint64_t kappa = first.preemption_cost_ns;
  const uint64_t epsilon = w.server ? w.server->overhead_ns : 0;
  if (w.server) {
    args.push_back("--server-core");
    args.push_back(std::to_string(w.server->core));
  }
  args.push_back("--epsilon-us");
  args.push_back(std::to_string((epsilon + 999) / 1000));
  args.push_back("--kappa-us");
  args.push_back(std::to_string((kappa + 999) / 1000));
  args.push_back("--release-jitter-us");
  args.push_back(std::to_string((w.release_jitter_ns + 999) / 1000));
  // The regulator's time on the executors' and the device's cores, which
  // the run's bounds charge (the workload's isolation, where the run is
  // isolated: none otherwise).
  const auto& iso = w.isolation;
  if (iso.declared && iso.cost_ns) {
    args.insert(args.end(), {"--regulator-cost-us", std::to_string((iso.cost_ns + 999) / 1000),
                             "--regulator-period-us", std::to_string(iso.period_ns / 1000)});
    std::string cores;
    for (int core : iso.cores) cores += (cores.empty() ? "" : ",") + std::to_string(core);
    if (!cores.empty()) args.insert(args.end(), {"--regulated-cores", cores});
  }
  return args;
}

std::string Run::server_address(size_t e) const {
  bool segments = false;
  for (size_t cb : setup_.plan.by_executor[e]) segments = segments || !setup_.workload.callbacks[cb].segments.empty();
  if (!segments) return socket_;
  const size_t here = setup_.workload.executors[e].node, there = setup_.workload.accelerators.front().node;
  if (here == there) return socket_;
  const auto link = static_cast<size_t>(setup_.workload.link_between(here, there));
  return std::string(setup_.workload.links[link].transport->name) + ":" + nodes_.host(link, there) + ":" +
         std::to_string(kGatewayPort);
}

// paam without a socket: a private rtaccel-server, logging to the result
// folder, stopped by the runner after the executors (not by a Ctrl-C). With
// callbacks on other nodes than the accelerators', it runs in the
// accelerators' node's namespace with its gateway for them, and a policy
// naming their ends of the links.
Status Run::start_private_server() {
  // Named after the runner, so that a run after one killed finds it.
  std::string dir = "/tmp/" + std::string(kRunPrefix) + std::to_string(getpid()) + "-XXXXXX";
  if (!mkdtemp(dir.data())) return Status::os_error("cannot create a folder for the server's socket", errno);
  server_dir_ = dir;
  socket_ = server_dir_ + "/server.sock";
  const std::string binary = options_.server_binary.empty() ? self_dir() + "/rtaccel-server" : options_.server_binary;
  auto args = server_args(setup_.workload, socket_);
  args.insert(args.begin(), binary);
  if (!rtaccel_fifo_allowed(1)) args.push_back("--no-fifo");  // the server would say so, in its log
  if (options_.policy != Policy::kPaam) {
    // ros2 and picas: only requests from other nodes come here, served in
    // arrival order as a service node would serve them.
    *(std::find(args.begin(), args.end(), "--levels") + 1) = "1";
  }
  if (setup_.gateway) {  // callbacks use an accelerator on another node
    const size_t there = setup_.workload.accelerators.front().node;
    std::string policy = "allow:\n  - {user: root, priorities: [-2147483648, 2147483647]}\n  - {uid: " +
                         std::to_string(geteuid()) + ", priorities: [-2147483648, 2147483647]}\n";
    for (size_t l = 0; l < setup_.workload.links.size(); ++l) {
      const auto& link = setup_.workload.links[l];
      if (link.a != there && link.b != there) continue;
      policy += "  - {peer: " + nodes_.host(l, link.a == there ? link.b : link.a) +
                ", priorities: [-2147483648, 2147483647]}\n";
    }
    const std::string policy_path = server_dir_ + "/policy.yaml";
    if (Status st = write_file(policy_path, policy); !st) return st;
    args.insert(args.end(), {"--policy", policy_path, "--listen",
                             std::string(setup_.gateway->name) + ":0.0.0.0:" + std::to_string(kGatewayPort)});
    const auto prefix = nodes_.run_in(there);
    args.insert(args.begin(), prefix.begin(), prefix.end());
  }
  // Under gangs the bounds are the gang analysis', which the PAAM analysis
  // of the server's admission control does not match: it would refuse
  // chains the run's analysis bounds.
  if (setup_.gang) args.push_back("--no-deadline-check");
  if (setup_.isolation && setup_.bwlock_bucket >= 0 && options_.policy == Policy::kPaam)
    args.insert(args.end(), {"--bwlock", run_name_, "--bwlock-threshold",
                             std::to_string(setup_.workload.isolation.bwlock_threshold_mbps), "--bwlock-bucket",
                             std::to_string(setup_.bwlock_bucket)});
  args.push_back("--stopped-by-parent");
  server_log_ = (std::filesystem::path(options_.out_dir) / "server.log").string();
  core::SpawnOptions options;
  options.log_path = server_log_;
  options.parent_death_signal = SIGTERM;
  options.ignore_terminal_signals = true;
  options.ready_handshake = true;
  auto child = core::Child::spawn(args, options);
  if (!child) return child.status().context("cannot start " + binary);
  server_ = child.take();
  shim_processes_[server_.pid()] = "server";
  if (Status ready = server_.wait_ready(10 * kSecond); !ready)
    return Status::error("rtaccel-server did not start (" + binary + "): " + ready.message() + "; see " + server_log_);
  return Status();
}

Status Run::start_declaring() {
  auto* header = shared_.header();
  if (options_.policy != Policy::kPaam || socket_.empty()) {
    header->declared.store(1, std::memory_order_release);
    return Status();
  }
  const auto& w = setup_.workload;
  std::vector<rtaccel_chain_desc> chains;
  chains.reserve(w.chains.size());
  for (size_t c = 0; c < w.chains.size(); ++c) {
    rtaccel_chain_desc desc;
    if (Status st = chain_desc_for(w, c, &desc); !st) {
      fprintf(stderr, "rtaccel run: chain '%s' is not declared to rtaccel-server, whose admission control does not "
              "see it: %s\n", w.chains[c].name.c_str(), st.message().c_str());
      continue;
    }
    chains.push_back(desc);
  }
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) < 0) return Status::os_error("pipe", errno);
  core::UniqueFd read_end(ends[0]), write_end(ends[1]);
  const pid_t self = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Status::os_error("fork", errno);
  if (pid == 0) {
    join_the_run(self);
    DeclarationAnswer answer{};
    rtaccel_client* client = nullptr;
    answer.err = rtaccel_client_connect(socket_.c_str(), &client);
    if (answer.err)
      snprintf(answer.why, sizeof(answer.why), "cannot connect to rtaccel-server at %s: %s", socket_.c_str(),
               strerror(-answer.err));
    else
      answer.err = rtaccel_client_declare(client, chains.data(), chains.size(), answer.why, sizeof(answer.why));
    if (write(write_end.get(), &answer, sizeof(answer)) != ssize_t(sizeof(answer)) || answer.err) _exit(1);
    for (;;) pause();  // the runner ends it once the executors are done
  }
  declarer_ = core::Child::adopt(pid);
  fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
  declared_pipe_ = std::move(read_end);
  return Status();
}

// The declarer's answer, once it came: the executors may register then.
Status Run::watch_declaration() {
  if (!declared_pipe_) return Status();
  DeclarationAnswer answer{};
  const ssize_t n = read(declared_pipe_.get(), &answer, sizeof(answer));
  if (n < 0 && errno == EAGAIN) return Status();
  declared_pipe_.reset();
  if (n != ssize_t(sizeof(answer)))
    return Status::error("the declaration of the workload's chains to rtaccel-server ended without an answer");
  if (answer.err) {
    answer.why[sizeof(answer.why) - 1] = '\0';
    return Status::error(std::string("rtaccel-server refused the workload's chains: ") +
                             (answer.why[0] ? answer.why : strerror(-answer.err)),
                         -answer.err);
  }
  auto* header = shared_.header();
  header->declared.store(1, std::memory_order_release);
  futex_wake(reinterpret_cast<uint32_t*>(&header->declared), INT_MAX, true);
  return Status();
}

Status Run::start_executors() {
  const pid_t self = getpid();
  for (size_t e = 0; e < setup_.workload.executors.size(); ++e) {
    const pid_t pid = fork();
    if (pid < 0) return Status::os_error("fork", errno);
    if (pid == 0) {
      join_the_run(self);
      if (Status st = nodes_.enter(setup_.workload.executors[e].node); !st) {
        snprintf(shared_.executor(e)->error, sizeof(shared_.executor(e)->error), "%s", st.message().c_str());
        shared_.executor(e)->status.store(static_cast<uint32_t>(ExecutorStatus::kFailed));
        _exit(1);
      }
      ExecutorConfig config;
      config.workload = &setup_.workload;
      config.plan = &setup_.plan;
      config.requests = &setup_.requests;
      config.shared = &shared_;
      config.executor = e;
      config.policy = options_.policy;
      config.work_fraction = options_.work_fraction;
      config.walk_ns_per_line = &setup_.walk_ns_per_line;
      config.socket = server_address(e);
      config.remote_accelerator = config.socket != socket_;
      if (setup_.gang) {
        config.gang_lock = gang_lock_;
        config.gang = &setup_.gangs[setup_.gang_of[e]];
      }
      if (setup_.isolation && !setup_.workload.isolation.bwlock_chains.empty()) {
        config.bwlock = run_name_;
        config.bwlock_threshold_mbps = setup_.workload.isolation.bwlock_threshold_mbps;
        config.holds_bwlock = &setup_.holds_bwlock;
      }
      const bool ok = run_executor(config).ok();
      write_shim_report();
      _exit(ok ? 0 : 1);
    }
    shim_processes_[pid] = "executor " + setup_.workload.executors[e].name;
    executors_.push_back(core::Child::adopt(pid));
  }
  return Status();
}

// One process per end of every link that carries topics, in its node's
// namespace.
Status Run::start_bridges() {
  const pid_t self = getpid();
  const auto run_id = static_cast<unsigned>(self);
  for (size_t b = 0; b < setup_.plan.bridges.size(); ++b) {
    const BridgePlan& bp = setup_.plan.bridges[b];
    const auto& link = setup_.workload.links[bp.link];
    BridgeConfig config;
    config.workload = &setup_.workload;
    config.plan = &setup_.plan;
    config.shared = &shared_;
    config.bridge = b;
    config.flow_control = options_.flow_control;
    config.connect_needs_port = !link.transport->one_machine;
    config.listen_address = nodes_.listen_address(bp.link, bp.node, run_id);
    const size_t other = bp.node == link.a ? link.b : link.a;
    config.connect_address = nodes_.connect_address(bp.link, bp.node, 0, run_id);
    if (config.connect_needs_port) config.connect_address.resize(config.connect_address.rfind(':') + 1);
    // The one peer the listening end admits: the other end's address.
    const std::string peer = nodes_.listen_address(bp.link, other, run_id);
    config.allow = link.transport->one_machine
                       ? "uid:" + std::to_string(geteuid())
                       : peer.substr(peer.find(':') + 1, peer.rfind(':') - peer.find(':') - 1);
    const pid_t pid = fork();
    if (pid < 0) return Status::os_error("fork", errno);
    if (pid == 0) {
      join_the_run(self);
      ExecutorState* state = shared_.executor(setup_.workload.executors.size() + b);
      if (Status st = nodes_.enter(bp.node); !st) {
        snprintf(state->error, sizeof(state->error), "%s", st.message().c_str());
        state->status.store(static_cast<uint32_t>(ExecutorStatus::kFailed));
        _exit(1);
      }
      const bool ok = run_bridge(config).ok();
      write_shim_report();
      _exit(ok ? 0 : 1);
    }
    shim_processes_[pid] = "bridge " + link.name + "@" + setup_.workload.nodes[bp.node].name;
    executors_.push_back(core::Child::adopt(pid));
  }
  return Status();
}

// Fault injection: the links due to go down by now.
void Run::fail_links(uint64_t now) {
  for (const auto& [l, at_ns] : setup_.link_failures) {
    if (link_down_ns_[l] || now < t0_ + at_ns) continue;
    link_down_ns_[l] = now;
    const char* name = setup_.workload.links[l].name.c_str();
    if (Status st = nodes_.take_down(l); !st)
      fprintf(stderr, "%srtaccel run: cannot take link '%s' down: %s\n", warning_start(), name, st.message().c_str());
    else if (options_.progress)
      fprintf(stderr, "%srtaccel run: link '%s' taken down at %.1f s\n", warning_start(), name,
              static_cast<double>(now - t0_) / 1e9);
  }
}

// The regulator's command line (run.h): its options are rtaccel-isolate's
// table's (isolate/regulate_options.h).
std::vector<std::string> regulator_args(const workload::Workload& w, bool gang, const std::string& name,
                                        const std::string& cgroup, const std::filesystem::path& out) {
  const auto& iso = w.isolation;
  std::string cores;
  if (iso.cores.empty()) {
    for (int c = 0; c < w.cores; ++c) cores += (c ? "," : "") + std::to_string(c);
  } else {
    for (int c : iso.cores) cores += (cores.empty() ? "" : ",") + std::to_string(c);
  }
  std::vector<std::string> args = {"regulate", "--cores", cores, "--period-us", std::to_string(iso.period_ns / 1000),
                                   "--cgroup", cgroup, "--own-cgroup", "--bwlock", name, "--be-peak-mbps",
                                   std::to_string(iso.be_peak_mbps), "--summary", (out / "regulator.json").string(),
                                   "--trace", (out / "regulator.trace.json").string(), "--quiet",
                                   "--stopped-by-parent"};
  if (iso.threshold_mbps != workload::Isolation::kUnlimited)
    args.insert(args.end(), {"--threshold", std::to_string(iso.threshold_mbps)});
  if (gang) args.insert(args.end(), {"--gang", name});
  return args;
}

// The regulator for the run (rtaccel-isolate regulate, regulator_args),
// started with the readiness handshake (--ready-fd).
Status Run::start_isolation() {
  if (!rtaccel_fifo_allowed(99))
    return Status::error("isolation: the regulator needs SCHED_FIFO and perf events (root); run without it "
                         "with --no-isolation");
  const std::filesystem::path out(options_.out_dir);
  std::vector<std::string> args = regulator_args(setup_.workload, setup_.gang, run_name_, cgroup_, out);
  args.insert(args.begin(), isolate_binary(options_));
  core::SpawnOptions options;
  options.log_path = (out / "regulator.log").string();
  options.parent_death_signal = SIGTERM;
  options.ignore_terminal_signals = true;
  options.ready_handshake = true;
  options.environment = environment_without_shim();
  auto child = core::Child::spawn(args, options);
  if (!child) return child.status().context("cannot start the regulator " + args[0]);
  regulator_ = child.take();
  if (Status ready = regulator_.wait_ready(10 * kSecond); !ready)
    return Status::error("the regulator did not start: " + ready.message() + "; see " + options.log_path);
  return Status();
}

// Whatever way the run ends: the best-effort programs, then the regulator
// (which removes its cgroup once they are gone), then the shared-memory
// objects named after the run. Nothing of it is left behind.
void Run::end_isolation() {
  if (!setup_.isolation) return;
  end_best_effort();
  regulator_.terminate(10 * kSecond);
  rtaccel_bwlock_unlink(run_name_.c_str());
  if (setup_.gang) rtaccel_gang_lock_unlink(run_name_.c_str());
  rtaccel_regulator_status_unlink(run_name_.c_str());
}

// Best-effort programs: plain SCHED_OTHER children, on any core, from a
// shell so that a user writes them as on a command line.
Status Run::start_best_effort() {
  for (size_t i = 0; i < options_.best_effort.size(); ++i) {
    BestEffort program;
    program.command = options_.best_effort[i];
    program.log = "best_effort_" + std::to_string(i) + ".log";
    core::SpawnOptions options;
    options.log_path = (std::filesystem::path(options_.out_dir) / program.log).string();
    options.parent_death_signal = SIGTERM;
    // In a session of its own, with no terminal, as a cron job: the
    // terminal's signals do not reach it, and nothing there can stop it
    // (SIGTTIN for a program that reads /dev/tty). It reads /dev/null, as a
    // script's background job does, and starts with the signals the user's
    // command had, not the run's.
    options.as_started = true;
    options.stdin_from_null = true;
    options.own_session = true;
    options.environment = environment_without_shim();
    // rtaccel-isolate run-be ends what the shell started, all of it, when
    // the run stops it and also where the run is killed (--end-with-parent),
    // which SIGTERM to the shell alone would not; and it keeps a chatty
    // program (`yes` writes 400 MB a second) from filling the disk the
    // results need. Under isolation the regulated cgroup is where
    // best-effort work runs.
    std::vector<std::string> argv = {isolate_binary(options_), "run-be", "--end-with-parent",
                                     "--output-cap", std::to_string(kBestEffortLogBytes)};
    if (setup_.isolation)
      argv.insert(argv.end(), {"--cgroup", cgroup_});
    else
      argv.push_back("--no-cgroup");
    argv.insert(argv.end(), {"--", "/bin/sh", "-c", program.command});
    auto child = core::Child::spawn(argv, options);
    if (!child) return child.status().context("cannot start best-effort program '" + program.command + "'");
    program.child = child.take();
    best_effort_.push_back(std::move(program));
  }
  return Status();
}

// Each supervisor ends its program and what that started (SIGKILL for what
// is left a second after the SIGTERM) and is done at most 1.5 s after its
// SIGTERM by its own clock. It is waited for longer: a supervisor killed
// before it is done leaves what it supervises running, and one on a slow
// host, or on a core the regulator parks, takes longer. (Under isolation the
// regulator ends what is left in its cgroup; without it nothing would.)
void Run::end_best_effort() {
  constexpr uint64_t kSupervisorGrace = 10 * kSecond;
  for (auto& program : best_effort_) program.child.terminate(kSupervisorGrace);
}

// A best-effort program that ends before the run leaves the run without
// the load it was asked to run beside: said at once, kept in the summary.
// One the shell could not start at all (status 126 or 127: not found, not
// executable) is a mistake in the command, and ends the run.
Status Run::watch_best_effort(uint64_t now) {
  for (auto& program : best_effort_) {
    int status = 0;
    if (program.ended_ns || !program.child.exited(&status)) continue;
    program.ended_ns = now;
    program.wait_status = status;
    const std::string said = last_line(std::filesystem::path(options_.out_dir) / program.log);
    const std::string what = "best-effort program '" + program.command + "' " + core::describe_wait_status(status) +
                             (said.empty() ? "" : " (its log: \"" + said + "\")");
    if (WIFEXITED(status) && (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127))
      return Status::invalid(what + "; give a command the run's PATH finds, or its full path");
    if (t0_ && now > t0_)
      fprintf(stderr, "%srtaccel run: warning: %s %.1f s into the run; the rest of the run is without it\n",
              warning_start(), what.c_str(), static_cast<double>(now - t0_) / 1e9);
    else
      fprintf(stderr, "rtaccel run: warning: %s before the run began; the run is without it\n", what.c_str());
  }
  return Status();
}

// A best-effort program stopped (SIGSTOP, or SIGTSTP sent from outside the
// run: in a session of its own, no terminal stops it) is a load the run
// goes without while it stays so, as one that ended is: said when seen and
// when it continues, kept in the summary. Looked at once a second.
void Run::watch_stops(uint64_t now) {
  constexpr size_t kStopsKept = 100;
  const double at_s = into_run_s(now);
  for (auto& program : best_effort_) {
    if (program.ended_ns || program.child.pid() < 0) continue;
    // Stopped since the last look, as the stops below are kept.
    if (!program.stopped.empty()) program.stopped_ns += now - program.looked_ns;
    program.looked_ns = now;
    const auto stopped = stopped_processes(program.child.pid());
    std::vector<std::pair<pid_t, std::string>> began, ended;
    for (const auto& [pid, name] : stopped)
      if (program.stopped.try_emplace(pid, BestEffort::Stop{name, pid, now, 0}).second) began.emplace_back(pid, name);
    uint64_t longest = 0;
    for (auto it = program.stopped.begin(); it != program.stopped.end();) {
      if (std::any_of(stopped.begin(), stopped.end(), [&](const auto& p) { return p.first == it->first; })) {
        ++it;
        continue;
      }
      BestEffort::Stop stop = std::move(it->second);
      it = program.stopped.erase(it);
      stop.until_ns = now;
      longest = std::max(longest, now - stop.from_ns);
      ended.emplace_back(stop.pid, stop.process);
      if (program.stops.size() < kStopsKept)
        program.stops.push_back(std::move(stop));
      else
        ++program.stops_not_kept;
    }
    if (!began.empty())
      fprintf(stderr,
              "%srtaccel run: warning: best-effort program '%s': %s stopped %.1f s into the run (SIGSTOP, or "
              "SIGTSTP from outside the run); its load is absent while it stays stopped\n",
              warning_start(), program.command.c_str(), name_processes(began).c_str(), at_s);
    if (!ended.empty())
      fprintf(stderr, "%srtaccel run: best-effort program '%s': %s no longer stopped %.1f s into the run, after up to %.1f s\n",
              warning_start(), program.command.c_str(), name_processes(ended).c_str(), at_s,
              static_cast<double>(longest) / 1e9);
  }
}

}  // namespace rtaccel::exec
