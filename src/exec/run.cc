// The run's skeleton and its supervision (exec/run.h says what each piece of
// a run owns): Run::execute, from the set-up to the result files, and the
// watch over the run while it goes.
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

Status Run::check_options() const {
  if (!(options_.duration_s > 0) || options_.duration_s > 24 * 3600)
    return Status::invalid("duration must be between 0 and 24 hours");
  if (!(options_.work_fraction > 0) || options_.work_fraction > 1) return Status::invalid("work fraction must be in (0, 1]");
  for (const auto& [name, at_s] : options_.link_failures)
    if (!(at_s >= 0) || at_s > options_.duration_s)
      return Status::invalid("link '" + name + "' is to go down within the run (0 to its duration)");
  if (!options_.shim_modes.empty()) {
    if (("," + options_.shim_modes + ",").find(",trace,") == std::string::npos)
      return Status::invalid("the interposer's modes must include trace in a run");
    const char* modes = getenv("RTACCEL_SHIM");
    const char* dir = getenv("RTACCEL_SHIM_OUT");
    if (!dlsym(RTLD_DEFAULT, "rtaccel_shim_write_report") || !modes || options_.shim_modes != modes || !dir || !*dir)
      return Status::error("the interposer is not preloaded into the runner in modes '" + options_.shim_modes +
                           "' with RTACCEL_SHIM_OUT set (rtaccel-exec --shim does that)");
  }
  return Status();
}

// An executor that failed or any child that exited, as an error.
Status Run::failure() {
  for (size_t e = 0; e < processes(); ++e)
    if (shared_.executor(e)->status.load() == static_cast<uint32_t>(ExecutorStatus::kFailed))
      return Status::error(shared_.executor(e)->error, shared_.executor(e)->error_code);
  int status;
  bool exited = server_.pid() > 0 && server_.exited(&status);
  std::string what = "rtaccel-server exited during the run";
  if (!exited && regulator_.pid() > 0 && regulator_.exited(&status)) {
    exited = true;
    what = "the regulator exited during the run (" + core::describe_wait_status(status) + "); see " +
           (std::filesystem::path(options_.out_dir) / "regulator.log").string();
  }
  for (auto& child : executors_) {
    if (!exited && child.pid() > 0 && child.exited(&status)) {
      exited = true;
      what = "an executor exited during the run";
    }
  }
  if (!exited) return Status();
  for (size_t e = 0; e < processes(); ++e)
    if (shared_.executor(e)->error[0]) what = shared_.executor(e)->error;
  return Status::error(what);
}

// Every executor ready (pinned, registered), then one common start. A stop
// asked for meanwhile (Ctrl-C, SIGTERM, a hang-up) is an interrupted run
// like any other, of no time: nothing is released, and the results say so.
Status Run::wait_until_ready() {
  const uint64_t deadline = core::monotonic_ns() + 30 * kSecond;
  for (;;) {
    size_t ready = 0;
    for (size_t e = 0; e < processes(); ++e)
      ready += shared_.executor(e)->status.load() == static_cast<uint32_t>(ExecutorStatus::kReady);
    if (ready == processes()) break;
    if (stop_requested()) {
      t0_ = core::monotonic_ns();
      return Status();
    }
    if (Status d = watch_declaration(); !d) return d;
    if (Status f = failure(); !f) return f;
    if (Status f = watch_best_effort(core::monotonic_ns()); !f) return f;
    if (core::monotonic_ns() > deadline) return Status::error("the executors did not get ready in 30 s");
    core::sleep_ns(5 * kMs);
  }
  started_ = true;
  for (size_t e = 0; e < setup_.workload.executors.size(); ++e) realtime_ = realtime_ && shared_.executor(e)->realtime;
  // Said once: `rtaccel` has said it already where it started this run.
  if (!realtime_ && !getenv("RTACCEL_NO_RT_NOTED"))
    fprintf(stderr, "rtaccel run: no real-time priority (SCHED_FIFO refused): executors run at nice -20 where "
                    "allowed; the results are marked, and the analysis' bounds do not apply to them\n");
  auto* header = shared_.header();
  header->start_ns = core::monotonic_ns() + 50 * kMs;
  header->end_ns = header->start_ns + duration_ns_;
  header->go.store(1, std::memory_order_release);
  futex_wake(reinterpret_cast<uint32_t*>(&header->go), INT_MAX, true);
  t0_ = header->start_ns;
  next_report_ = t0_ + kSecond;
  progress_seen_.assign(setup_.workload.chains.size(), 0);
  progress_misses_.assign(setup_.workload.chains.size(), 0);
  progress_over_.assign(setup_.workload.chains.size(), 0);
  progress_bound_.assign(setup_.workload.chains.size(), 0);
  for (size_t c = 0; c < setup_.workload.chains.size(); ++c)
    if (const auto* bound = bound_of(setup_, c); bound && bound->bounded && setup_.workload.chains[c].critical)
      progress_bound_[c] = bound->wcrt_ns;
  return Status();
}

// A trace that fills before the run's end leaves the rest of the run
// unchecked by the monitor: said before the run starts, with the
// --trace-events that keeps it whole, rather than found in the results
// hours later. Traces sized by the memory fill at one time: one line.
void Run::warn_where_traces_fill() const {
  const auto rates = trace_events_per_second(setup_.workload, setup_.plan, setup_.gang);
  auto in_the_run = [](double s) {
    char text[32];
    if (s < 120)
      snprintf(text, sizeof text, "%.1f s", s);
    else
      snprintf(text, sizeof text, "%.0f min", s / 60);
    return std::string(text);
  };
  double first_fill_s = INFINITY, rate = 0;
  uint64_t kept_all = 0, whole_most = 0;
  for (size_t e = 0; e < rates.size(); ++e) {
    const double expected = rates[e] * options_.duration_s;
    const uint64_t kept = shared_.trace_capacity(e);
    rate += rates[e];
    kept_all += kept;
    if (expected <= static_cast<double>(kept)) continue;
    const double fills_s = static_cast<double>(kept) / rates[e];
    first_fill_s = std::min(first_fill_s, fills_s);
    // A tenth more than expected, in thousands: the expectation is the
    // timers' rates, and a run has a few activations more.
    const auto whole = static_cast<uint64_t>(std::ceil(expected * 1.1 / 1000) * 1000);
    whole_most = std::max(whole_most, whole);
    if (!options_.trace_events) continue;
    fprintf(stderr,
            "rtaccel run: warning: %s makes about %.0f trace events a second and keeps %llu (--trace-events): "
            "its trace fills about %s into the run, and the monitor checks the run up to there; "
            "--trace-events %llu keeps the whole run\n",
            trace_owner(setup_.workload, setup_.plan, e).c_str(), rates[e], static_cast<unsigned long long>(kept),
            in_the_run(fills_s).c_str(), static_cast<unsigned long long>(whole));
  }
  if (options_.trace_events || !whole_most) return;
  fprintf(stderr,
          "rtaccel run: warning: the run makes about %.0f trace events a second, and a quarter of this machine's "
          "available memory holds %llu: the traces fill about %s into the run, and the monitor checks the run up "
          "to there; --trace-events %llu keeps the whole run\n",
          rate, static_cast<unsigned long long>(kept_all), in_the_run(first_fill_s).c_str(),
          static_cast<unsigned long long>(whole_most));
}

// A terminal gets one line rewritten every second, a log a line every ten,
// and both the last state at the end (FINAL). Deadline misses of critical
// chains are counted apart from the others': a best-effort chain that misses
// by design must not read as a failing run. Critical instances over their
// chain's bound are counted as they come, so that a long run shows the first
// one when it happens, not half an hour later.
void Run::report_progress(uint64_t now, bool final) {
  if (!options_.progress || (!final && now < next_report_)) return;
  const bool tty = isatty(STDERR_FILENO);
  uint64_t done = 0, critical_misses = 0, other_misses = 0, over_bound = 0;
  bool any_other = false, any_bound = false;
  // Samples are written once, before the count that publishes them: each is
  // read once, from where the last report stopped.
  for (size_t c = 0; c < setup_.workload.chains.size(); ++c) {
    const auto& chain = setup_.workload.chains[c];
    const uint64_t count = shared_.chain(c)->count.load(std::memory_order_acquire);
    done += count;
    const uint64_t n = std::min(count, shared_.sample_capacity(c));
    for (uint64_t& i = progress_seen_[c]; i < n; ++i) {
      const Sample& x = shared_.samples(c)[i];
      progress_misses_[c] += x.end_ns - x.start_ns > chain.deadline_ns;
      progress_over_[c] += progress_bound_[c] && x.end_ns - x.start_ns > progress_bound_[c];
    }
    (chain.critical ? critical_misses : other_misses) += progress_misses_[c];
    over_bound += progress_over_[c];
    any_other = any_other || !chain.critical;
    any_bound = any_bound || progress_bound_[c];
  }
  const double elapsed = static_cast<double>(std::min(now, t0_ + duration_ns_) - t0_) / 1e9;
  if (final || tty || (next_report_ - t0_) % (10 * kSecond) == 0) {
    const auto n = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    const std::string policy(to_string(options_.policy));
    char others[64] = "", over[64] = "", line[512];
    if (any_other) snprintf(others, sizeof others, ", %llu non-critical", n(other_misses));
    // The bounds are the paam system's: under the other policies a chain
    // over one is the policy's doing, as the results' table says.
    if (any_bound && options_.policy == Policy::kPaam)
      snprintf(over, sizeof over, ", %llu over %s", n(over_bound), over_bound == 1 ? "its bound" : "their bounds");
    else if (any_bound)
      snprintf(over, sizeof over, ", %llu over the paam bounds", n(over_bound));
    snprintf(line, sizeof line, "rtaccel run: %s %5.0f/%.0f s, %llu chain instances, %llu critical deadline misses%s%s",
             policy.c_str(), elapsed, options_.duration_s, n(done), n(critical_misses), others, over);
    if (!tty) {
      fprintf(stderr, "%s\n", line);
    } else {
      // Rewritten in place: a line wider than the terminal would wrap, and
      // every rewrite would leave a line behind. Where the whole does not
      // fit, the counts alone, then as much of them as fits.
      winsize ws{};
      const size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
      if (strlen(line) >= width) {
        snprintf(line, sizeof line, "%s %.0f/%.0f s: %llu instances, %llu critical misses", policy.c_str(), elapsed,
                 options_.duration_s, n(done), n(critical_misses));
        if (any_other) snprintf(line + strlen(line), sizeof line - strlen(line), ", %llu other", n(other_misses));
        if (any_bound) snprintf(line + strlen(line), sizeof line - strlen(line), ", %llu over bound", n(over_bound));
        line[std::min(strlen(line), width - 1)] = '\0';
      }
      // Erased to the line's end: the line before may have been longer.
      fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
    }
    progress_line_open_ = tty && !final;
  }
  if (!final) next_report_ += kSecond;
}

void Run::watch_resources() {
  const auto& w = setup_.workload;
  resources_.watch(getpid(), "runner");
  resources_.watch(server_.pid(), "server");
  for (size_t i = 0; i < executors_.size(); ++i) {
    std::string name;
    if (i < w.executors.size()) {
      name = "executor " + w.executors[i].name;
    } else {
      const BridgePlan& b = setup_.plan.bridges[i - w.executors.size()];
      name = "bridge " + w.links[b.link].name + " on " + w.nodes[b.node].name;
    }
    resources_.watch(executors_[i].pid(), name);
  }
  resources_.watch(regulator_.pid(), "regulator");
}

// Other runs under way, looked for as this one starts (NOW 0) and as it
// samples its processes: a run that shares the cores is said at once, and
// kept in the summary with when it was seen.
void Run::note_other_runs(uint64_t now) {
  for (pid_t pid : other_runs_under_way()) {
    auto [it, first] = other_runs_.try_emplace(pid, OtherRun{now, now});
    it->second.last_ns = now;
    if (!first) continue;
    const std::string when =
        now ? "began " + std::to_string((now - t0_) / kSecond) + " s into this one" : "is under way";
    fprintf(stderr,
            "%srtaccel run: warning: another run %s on this machine (its runner: pid %d); the two share the cores, "
            "and neither run's times are what it alone would take\n",
            warning_start(), when.c_str(), static_cast<int>(pid));
  }
}

void Run::note_pause_requests() {
  if (!options_.pause_requests) return;
  const uint32_t asked = options_.pause_requests->load(std::memory_order_relaxed);
  if (asked == pause_requests_seen_) return;
  pause_requests_seen_ = asked;
  fprintf(stderr,
          "%srtaccel run: Ctrl-Z does not pause a run: its chains would miss every deadline while it stood still "
          "(Ctrl-C ends the run and writes its results)\n",
          warning_start());
}

const char* Run::warning_start() {
  const bool open = progress_line_open_;
  progress_line_open_ = false;
  return open ? "\n" : "";
}

// Until the run's end or a stop request; an error if something died.
Status Run::supervise() {
  const uint64_t end = t0_ + duration_ns_;
  Status status;
  // The cores' losses every 20 ms, or often enough for 100 000 samples in a
  // long run (a day: every 0.9 s), which bounds what the monitor keeps.
  const uint64_t sample_every = std::max<uint64_t>(20 * kMs, duration_ns_ / 100000);
  // The processes' resources every second, or 3 600 times in a longer run.
  const uint64_t resources_every = std::max<uint64_t>(kSecond, duration_ns_ / 3600);
  uint64_t next_sample = t0_, next_resources = t0_, next_stop_check = t0_;
  watch_resources();
  // The samples' room, taken now: one at the start, one per interval, one
  // at the end. The runner's memory then holds flat through the run, as the
  // other processes' do.
  cores_.reserve(duration_ns_ / sample_every + 2);
  speed_.reserve(duration_ns_ / sample_every + 2);
  resources_.reserve(duration_ns_ / resources_every + 2);
  while (core::monotonic_ns() < end && !stop_requested()) {
    if (status = failure(); !status) break;
    const uint64_t now = core::monotonic_ns();
    if (status = watch_best_effort(now); !status) break;
    if (now >= next_sample) {
      cores_.sample(now);
      speed_.sample(now);
      next_sample = now + sample_every;
    }
    if (now >= next_resources) {
      resources_.sample(now);
      note_other_runs(now);
      next_resources = now + resources_every;
    }
    if (now >= next_stop_check) {
      watch_stops(now);
      next_stop_check = now + kSecond;
    }
    fail_links(now);
    note_pause_requests();
    report_progress(now);
    core::sleep_ns(20 * kMs);
  }
  cores_.sample(core::monotonic_ns());
  resources_.sample(core::monotonic_ns());
  if (status)
    report_progress(core::monotonic_ns(), true);
  else
    fputs(warning_start(), stderr);
  return status;
}

void Run::stop_executors() {
  auto* header = shared_.header();
  header->stop.store(1, std::memory_order_release);
  futex_wake(reinterpret_cast<uint32_t*>(&header->go), INT_MAX, true);
  futex_wake(reinterpret_cast<uint32_t*>(&header->declared), INT_MAX, true);
  for (size_t e = 0; e < processes(); ++e) wake(shared_.executor(e));
}

// Executors finish the callback in progress (allow for the longest one),
// then the server goes: executors unregister on their way out.
void Run::wind_down() {
  // Best-effort programs first, so that their measurement spans the run
  // (the memory benchmarks print their bandwidth on SIGTERM).
  end_best_effort();
  stop_executors();
  uint64_t longest = 0;
  for (const auto& cb : setup_.workload.callbacks) {
    uint64_t t = cb.cpu_ns;
    for (const auto& seg : cb.segments) t += seg.wcet_ns;
    longest = std::max(longest, t);
  }
  const uint64_t deadline = core::monotonic_ns() + 5 * kSecond + 4 * longest;
  for (;;) {
    size_t done = 0;
    for (size_t e = 0; e < processes(); ++e) {
      const auto st = shared_.executor(e)->status.load();
      done += st == static_cast<uint32_t>(ExecutorStatus::kDone) || st == static_cast<uint32_t>(ExecutorStatus::kFailed);
    }
    if (done == processes() || core::monotonic_ns() > deadline) break;
    core::sleep_ns(5 * kMs);
  }
  declarer_.kill_now();  // what it declared goes with its connection
  server_.terminate(5 * kSecond);
  for (auto& child : executors_) {
    int status;
    while (child.pid() > 0 && !child.exited(&status) && core::monotonic_ns() < deadline) core::sleep_ns(5 * kMs);
    child.kill_now();
  }
  // Last: it writes its summary and trace, and removes its cgroup, which
  // the best-effort programs have left.
  regulator_.terminate(10 * kSecond);
}

Expected<RunEnd> Run::execute() {
  if (Status st = check_options(); !st) return st;
  if (Status st = prepare(options_, &setup_); !st) return st;
  duration_ns_ = static_cast<uint64_t>(options_.duration_s * 1e9);
  cores_ = CoreSampler(watched_cores(setup_.workload));
  std::error_code ec;
  std::filesystem::create_directories(options_.out_dir, ec);
  if (ec) return Status::invalid("cannot write the results into " + options_.out_dir + ": " + ec.message());
  // Said now, not after the run: a folder another user made (root's, to a
  // user without root) takes no results.
  if (access(options_.out_dir.c_str(), W_OK | X_OK) != 0)
    return Status::invalid("cannot write the results into " + options_.out_dir + ": " + strerror(errno) +
                           " (give another --out)");

  out_lock_.reset(open(options_.out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!out_lock_ || flock(out_lock_.get(), LOCK_EX | LOCK_NB) != 0)
    return Status::invalid("another rtaccel run writes into " + options_.out_dir + " (give another --out)");
  // An earlier run's results in the folder go now: a run that ends without
  // results of its own is not taken for that one, and no trace of another
  // run's regulator is merged into this one's.
  for (const char* name : {"summary.json", "trace.json", "latency.csv", "regulator.json", "regulator.trace.json"})
    std::filesystem::remove(std::filesystem::path(options_.out_dir) / name, ec);

  socket_ = options_.socket;
  if (!options_.shim_modes.empty()) {
    shim_dir_ = getenv("RTACCEL_SHIM_OUT");
    shim_processes_[getpid()] = "runner";
  }
  // Killed outright, a run removes nothing (exec/leftovers.h): the next
  // one does, before it makes names of its own.
  for (const auto& removed : remove_leftovers_of_dead_runs())
    fprintf(stderr, "rtaccel run: removed what a run that was killed left behind: %s\n", removed.c_str());
  note_other_runs(0);
  run_name_ = "run-" + std::to_string(getpid());
  cgroup_ = kRunPrefix + std::to_string(getpid());
  struct DirCleanup {
    std::string* dir;
    ~DirCleanup() {
      if (!dir->empty()) std::filesystem::remove_all(*dir);
    }
  } cleanup{&server_dir_};
  link_down_ns_.assign(setup_.workload.links.size(), 0);
  if (Status st = nodes_.create(setup_.workload); !st) return st;
  // A workload without accelerators has nothing for a server to serve.
  if ((options_.policy == Policy::kPaam || setup_.gateway) && socket_.empty() && !setup_.workload.accelerators.empty())
    if (Status st = start_private_server(); !st) return st;
  const Capacity capacity = capacity_for(setup_.workload, setup_.plan, duration_ns_, options_.trace_events,
                                         setup_.gang, rtaccel_memory_available());
  if (Status st = shared_.create(setup_.plan, capacity); !st) return st;
  warn_where_traces_fill();
  struct GangLockCleanup {
    rtaccel_gang_lock_t** lock;
    ~GangLockCleanup() { rtaccel_gang_lock_close(*lock); }
  } gang_cleanup{&gang_lock_};
  struct IsolationCleanup {
    Run* run;
    ~IsolationCleanup() { run->end_isolation(); }
  } isolation_cleanup{this};
  if (setup_.gang) {
    // Private to the run: the executors inherit it through fork. Under
    // isolation, named, so that the regulator enforces the running gang's
    // threshold.
    const int err = setup_.isolation ? rtaccel_gang_lock_open(run_name_.c_str(), &gang_lock_)
                                     : rtaccel_gang_lock_create_private(&gang_lock_);
    if (err) return Status::os_error("cannot create the run's gang lock", -err);
  }
  if (setup_.isolation) {
    if (Status st = start_isolation(); !st) return st;
  }
  Status st = start_declaring();
  if (st) st = start_executors();
  if (st) st = start_bridges();
  if (st) st = start_best_effort();
  if (st) st = wait_until_ready();
  if (!st) {
    stop_executors();
    return st;
  }
  if (started_) st = supervise();
  // A stop within the 50 ms before the common start: the run had no time.
  const uint64_t stopped = started_ ? std::max(core::monotonic_ns(), t0_) : t0_;
  wind_down();
  if (!st && st.invalid_input()) return st;  // a best-effort command that cannot start: nothing ran
  // A process of the run that died (the server, an executor, the
  // regulator) ends it, but what ran until then is measured, and the trace
  // up to the failure is what explains it: the results are written, marked.
  if (Status written = write_results(stopped, st ? std::string() : st.message()); !written) return written;
  if (!st) return Status::error(st.message() + "; the results up to then are in " + options_.out_dir, st.err());
  return stop_requested() ? RunEnd::kInterrupted : RunEnd::kCompleted;
}

Expected<RunEnd> run_workload(const RunOptions& options) { return Run(options).execute(); }

}  // namespace rtaccel::exec
