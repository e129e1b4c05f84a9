// The run's results (exec/run.h): summary.json, whose schema
// (python/rtaccel/schemas/summary.schema.json) is its contract, latency.csv
// and trace.json.
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
#include "rtaccel/shim.h"

#include "exec/run.h"

namespace rtaccel::exec {

// Instances that ended after STOPPED are left out: they met the executors'
// wind-down (a higher one's exit holds a lower one's core), not the workload.
json chain_summary(const Setup& s, const SharedRun& shared, size_t c, std::ofstream* csv, uint64_t t0,
                   uint64_t stopped) {
  const auto& chain = s.workload.chains[c];
  const auto* state = shared.chain(c);
  const uint64_t count = shared.samples_kept(c);
  std::vector<uint64_t> latency;
  latency.reserve(count);
  uint64_t misses = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const Sample& x = shared.samples(c)[i];
    if (x.end_ns > stopped) continue;
    const uint64_t l = x.end_ns - x.start_ns;
    latency.push_back(l);
    if (l > chain.deadline_ns) ++misses;
    // To the nanosecond: a stream's default six digits turn a start 1.234567 s
    // into the run into 1.23457e+06 us, and half an hour in round it to a
    // millisecond.
    char times[64];
    snprintf(times, sizeof times, ",%.3f,%.3f\n", us(x.start_ns - t0), us(l));
    *csv << chain.name << times;
  }
  std::sort(latency.begin(), latency.end());
  uint64_t sum = 0;
  for (uint64_t l : latency) sum += l;
  const analysis::ChainResult* bound = bound_of(s, c);
  json j = {{"chain", chain.name},
            {"priority", chain.priority},
            {"critical", chain.critical},
            {"period_us", us(chain.period_ns)},
            {"deadline_us", us(chain.deadline_ns)},
            {"count", latency.size()},
            {"deadline_misses", misses},
            {"drops", state->drops.load()},
            {"link_losses", state->link_losses.load()}};
  if (latency.empty()) {
    j["p50_us"] = j["p99_us"] = j["max_us"] = j["mean_us"] = nullptr;
  } else {
    j["p50_us"] = us(percentile(latency, 50));
    j["p99_us"] = us(percentile(latency, 99));
    j["max_us"] = us(latency.back());
    j["mean_us"] = us(sum / latency.size());
  }
  if (bound && bound->bounded) {
    j["wcrt_us"] = us(bound->wcrt_ns);
    j["bound_held"] = latency.empty() || latency.back() <= bound->wcrt_ns;
    // How many instances, not only whether: one over and a tenth over are
    // different findings (latency is sorted).
    j["over_bound"] = latency.end() - std::upper_bound(latency.begin(), latency.end(), bound->wcrt_ns);
  } else {
    j["wcrt_us"] = nullptr;
    j["bound_held"] = nullptr;
    j["over_bound"] = nullptr;
    if (bound) j["no_bound"] = bound->reason;  // the analysis' why
  }
  return j;
}

json timer_summary(const Setup& s, const SharedRun& shared, size_t t) {
  const size_t cb = s.plan.timers[t];
  const uint64_t period = s.workload.callbacks[cb].trigger.timer_ns;
  const uint64_t count = shared.records_kept(t);
  const TimerRecord* r = shared.timer_records(t);
  // Period jitter: how far the time between two consecutive activations'
  // starts is from the period. Start delay: start minus release.
  std::vector<uint64_t> jitter, delay;
  for (uint64_t i = 0; i < count; ++i) {
    delay.push_back(r[i].start_ns - r[i].release_ns);
    if (i > 0 && r[i].release_ns - r[i - 1].release_ns == period) {
      const int64_t gap = static_cast<int64_t>(r[i].start_ns - r[i - 1].start_ns);
      jitter.push_back(static_cast<uint64_t>(std::llabs(gap - static_cast<int64_t>(period))));
    }
  }
  std::sort(jitter.begin(), jitter.end());
  std::sort(delay.begin(), delay.end());
  return {{"callback", s.workload.callbacks[cb].name},
          {"period_us", us(period)},
          {"activations", count},
          {"jitter_p50_us", us(percentile(jitter, 50))},
          {"jitter_p90_us", us(percentile(jitter, 90))},
          {"jitter_p99_us", us(percentile(jitter, 99))},
          {"jitter_max_us", jitter.empty() ? 0.0 : us(jitter.back())},
          {"start_delay_p99_us", us(percentile(delay, 99))},
          {"start_delay_max_us", delay.empty() ? 0.0 : us(delay.back())}};
}

namespace {

// The runner's most resident memory, its results written: what a run of
// this length needs beside the real-time work, which the samples during
// the run do not see. RESOURCES: summary.json's.
void note_runner_peak(json* resources) {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  for (json& p : *resources)
    if (p["process"] == "runner") p["peak_kb"] = static_cast<uint64_t>(self.ru_maxrss);
}

}  // namespace

Status write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return finish_result_file(out, path);
}

json Run::best_effort_summary(uint64_t stopped_ns) const {
  json programs = json::array();
  for (const auto& program : best_effort_) {
    json entry = {{"command", program.command}, {"log", program.log}, {"ended_s", nullptr}, {"ended", nullptr}};
    if (program.ended_ns) {
      entry["ended_s"] = into_run_s(program.ended_ns);
      entry["ended"] = core::describe_wait_status(program.wait_status);
    }
    // Stops, in the order they began; until_s null: stopped to the end.
    std::vector<BestEffort::Stop> stops = program.stops;
    for (const auto& [pid, stop] : program.stopped) stops.push_back(stop);
    std::sort(stops.begin(), stops.end(), [](const auto& a, const auto& b) { return a.from_ns < b.from_ns; });
    json listed = json::array();
    for (const auto& stop : stops)
      listed.push_back({{"process", stop.process},
                        {"pid", stop.pid},
                        {"from_s", into_run_s(stop.from_ns)},
                        {"until_s", stop.until_ns ? json(into_run_s(stop.until_ns)) : json(nullptr)}});
    entry["stopped"] = std::move(listed);
    if (program.stops_not_kept) entry["stops_not_kept"] = program.stops_not_kept;
    // A stop open at the end lasts to the run's end, as until_s null says.
    const uint64_t open = program.stopped.empty() || stopped_ns < program.looked_ns ? 0 : stopped_ns - program.looked_ns;
    entry["stopped_s"] = static_cast<double>(program.stopped_ns + open) / 1e9;
    programs.push_back(std::move(entry));
  }
  return programs;
}

// Per link: its set-up and, per topic crossing it, what was sent, delivered
// and lost, and when the first loss (and the first delivery after it) was.
json Run::link_summary() const {
  json links = json::array();
  auto at = [this](uint64_t ns) { return ns ? json(static_cast<double>(ns - t0_) / 1e9) : json(nullptr); };
  for (size_t l = 0; l < setup_.workload.links.size(); ++l) {
    const auto& link = setup_.workload.links[l];
    json hops = json::array();
    for (size_t h = 0; h < setup_.plan.hops.size(); ++h) {
      const HopPlan& hop = setup_.plan.hops[h];
      if (hop.link != l) continue;
      const HopState* st = shared_.hop(h);
      json j = {{"topic", hop.name},
                {"priority", hop.priority},
                {"bytes", hop.bytes},
                {"sent", st->sent.load()},
                {"delivered", st->delivered.load()},
                {"lost", st->lost.load()},
                {"first_loss_s", at(st->failed_ns.load())},
                {"recovered_s", at(st->recovered_ns.load())}};
      if (st->error[0]) j["error"] = st->error;
      hops.push_back(std::move(j));
    }
    links.push_back({{"link", link.name},
                     {"between", {setup_.workload.nodes[link.a].name, setup_.workload.nodes[link.b].name}},
                     {"transport", std::string(link.transport->name)},
                     {"rate_mbps", static_cast<double>(link.rate_bytes_per_s) * 8 / 1e6},
                     {"flow_control", options_.flow_control},
                     {"namespaces", {nodes_.namespace_of(link.a), nodes_.namespace_of(link.b)}},
                     {"taken_down_s", at(link_down_ns_[l])},
                     {"topics", std::move(hops)}});
  }
  return links;
}

// Per gang: jobs, waits and preemptions, from the trace.
json Run::gang_summary() const {
  struct Counts {
    uint64_t jobs = 0, waits = 0, preempted = 0;
    std::vector<uint64_t> wait_ns;
  };
  std::vector<Counts> counts(setup_.gangs.size());
  for (size_t e = 0; e < setup_.workload.executors.size(); ++e) {
    Counts& c = counts[setup_.gang_of[e]];
    const uint64_t n = shared_.trace_kept(e);
    for (uint64_t i = 0; i < n; ++i) {
      const TraceEvent& ev = shared_.trace(e)[i];
      if (ev.kind == static_cast<uint32_t>(TraceKind::kGangHold)) ++c.jobs;
      if (ev.kind == static_cast<uint32_t>(TraceKind::kGangPark)) ++c.preempted;
      if (ev.kind == static_cast<uint32_t>(TraceKind::kGangWait)) {
        ++c.waits;
        c.wait_ns.push_back(ev.end_ns - ev.begin_ns);
      }
    }
  }
  json gangs = json::array();
  for (size_t g = 0; g < setup_.gangs.size(); ++g) {
    auto& c = counts[g];
    std::sort(c.wait_ns.begin(), c.wait_ns.end());
    json executors = json::array();
    for (size_t e : setup_.gangs[g].executors) executors.push_back(setup_.workload.executors[e].name);
    gangs.push_back({{"gang", setup_.gangs[g].name},
                     {"priority", setup_.gangs[g].priority},
                     {"threshold_mbps", setup_.gangs[g].threshold_mbps},
                     {"executors", std::move(executors)},
                     {"jobs", c.jobs},
                     {"waits", c.waits},
                     {"wait_p99_us", us(percentile(c.wait_ns, 99))},
                     {"wait_max_us", c.wait_ns.empty() ? 0.0 : us(c.wait_ns.back())},
                     {"jobs_preempted", c.preempted}});
  }
  rtaccel_gang_status st{};
  if (gang_lock_) rtaccel_gang_lock_status(gang_lock_, &st);
  return {{"gangs", std::move(gangs)},
          {"preemptions", st.preemptions},
          {"recoveries", st.recoveries},
          {"preemption_cost_us", us(setup_.workload.gang_preemption_ns)}};
}

// The run's isolation: what it was set to and what the regulator reports.
json Run::isolation_summary() const {
  const auto& iso = setup_.workload.isolation;
  json chains = json::array();
  for (size_t c : iso.bwlock_chains) chains.push_back(setup_.workload.chains[c].name);
  std::ifstream in(std::filesystem::path(options_.out_dir) / "regulator.json");
  json regulator = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return {{"cgroup", cgroup_},
          {"period_us", us(iso.period_ns)},
          {"threshold_mbps", iso.threshold_mbps == workload::Isolation::kUnlimited ? json(nullptr)
                                                                                   : json(iso.threshold_mbps)},
          {"bandwidth_lock", {{"chains", std::move(chains)},
                              {"threshold_mbps", iso.bwlock_threshold_mbps},
                              {"server_bucket", setup_.bwlock_bucket < 0 ? json(nullptr) : json(setup_.bwlock_bucket)}}},
          {"regulator", regulator.is_discarded() ? json(nullptr) : std::move(regulator)},
          {"regulator_log", "regulator.log"}};
}

// The interposer's file of process PID, as src/shim/trace.c names them
// (SUFFIX ".json": its report; ".trace.json": its timeline).
std::filesystem::path Run::shim_file(pid_t pid, const char* suffix) const {
  return std::filesystem::path(shim_dir_) / (RTACCEL_SHIM_REPORT_PREFIX "." + std::to_string(pid) + suffix);
}

// The interposer in the run: per process, what its report says of the
// pthread locks it took (rtaccel lockstat on the folder tells more).
json Run::shim_summary() const {
  json processes = json::array();
  for (const auto& [pid, name] : shim_processes_) {
    const std::filesystem::path report = shim_file(pid, ".json");
    std::ifstream in(report);
    const json r = json::parse(in, nullptr, /*allow_exceptions=*/false);
    json entry = {{"process", name}, {"pid", pid}};
    if (!r.is_object() || !r.contains("locks") || !r["locks"].is_array()) {
      entry["report"] = nullptr;  // it died before writing one
      processes.push_back(std::move(entry));
      continue;
    }
    uint64_t acquisitions = 0, contended = 0, wait_max = 0, cuda_calls = 0;
    for (const auto& lock : r["locks"]) {
      acquisitions += lock.value("acquisitions", uint64_t{0});
      contended += lock.value("contended", uint64_t{0});
      wait_max = std::max(wait_max, lock.value("wait_ns_max", uint64_t{0}));
    }
    if (r.contains("cuda") && r["cuda"].contains("calls"))
      for (const auto& api : r["cuda"]["calls"]) cuda_calls += api.value("calls", uint64_t{0});
    entry["report"] = report.filename().string();
    entry["locks"] = r["locks"].size();
    entry["acquisitions"] = acquisitions;
    entry["contended"] = contended;
    entry["wait_max_us"] = us(wait_max);
    entry["cuda_calls"] = cuda_calls;
    entry["timeline_events_dropped"] = r.value("dropped_timeline_events", uint64_t{0});
    processes.push_back(std::move(entry));
  }
  return {{"modes", options_.shim_modes}, {"folder", shim_dir_}, {"processes", std::move(processes)}};
}

// Per chain: its latencies' figures against its deadline and bound, and
// latency.csv beside them, a row per instance (CSV_WRITTEN: whether it
// was written whole).
json Run::chains_summary(uint64_t stopped_ns, Status* csv_written) const {
  const std::filesystem::path path = std::filesystem::path(options_.out_dir) / "latency.csv";
  std::ofstream csv(path);
  csv << "chain,start_us,latency_us\n";
  json chains = json::array();
  for (size_t c = 0; c < setup_.workload.chains.size(); ++c)
    chains.push_back(chain_summary(setup_, shared_, c, &csv, t0_, stopped_ns));
  *csv_written = finish_result_file(csv, path);
  return chains;
}

// Per timer callback: its activations, their period jitter and start delay.
json Run::timers_summary() const {
  json timers = json::array();
  for (size_t t = 0; t < setup_.plan.timers.size(); ++t) timers.push_back(timer_summary(setup_, shared_, t));
  return timers;
}

// Per executor: whether it ran at real-time priority, its timer overruns,
// and the events its trace kept and lost.
json Run::executors_summary() const {
  const auto& w = setup_.workload;
  json execs = json::array();
  for (size_t e = 0; e < w.executors.size(); ++e) {
    const auto* st = shared_.executor(e);
    const uint64_t kept = shared_.trace_kept(e);
    execs.push_back({{"executor", w.executors[e].name},
                     {"realtime", st->realtime != 0},
                     {"timer_overruns", st->overruns.load()},
                     {"trace_events", kept},
                     {"trace_events_lost", st->trace_used.load() - kept}});
  }
  return execs;
}

// Per queue: its topic, who takes from it, what went through and what was
// dropped.
json Run::queues_summary() const {
  const auto& w = setup_.workload;
  json queues = json::array();
  for (size_t q = 0; q < setup_.plan.queues.size(); ++q) {
    const auto* st = shared_.queue(q);
    const QueuePlan& qp = setup_.plan.queues[q];
    std::string subscriber = w.callbacks[qp.consumer].name;
    if (qp.executor >= w.executors.size()) {  // an outbox: the link's bridge takes from it
      const BridgePlan& b = setup_.plan.bridges[qp.executor - w.executors.size()];
      subscriber = "link " + w.links[b.link].name + " (outbox on " + w.nodes[b.node].name + ")";
    }
    queues.push_back({{"topic", qp.topic},
                      {"subscriber", subscriber},
                      {"messages", st->pushed},
                      {"dropped", st->dropped}});
  }
  return queues;
}

// The monitor's check of the run against the analysis' assumptions: its
// summary, and CHAINS' entries told what explains their instances over
// their bounds; what it found over what was allowed goes to FINDINGS.
json Run::assumptions_summary(uint64_t stopped_ns, json* chains, std::vector<Finding>* findings) const {
  const auto& w = setup_.workload;
  // The bounds are PAAM's: under ros2 and picas a chain over one is the
  // policy's doing, not the analysis', and the monitor only lists what broke.
  MonitorInput monitor{&w, &setup_.plan, &setup_.bounds, &shared_, &cores_, t0_, {}, &speed_, options_.work_fraction,
                       stopped_ns};
  monitor.policy_analysed = options_.policy == Policy::kPaam;
  if (options_.policy == Policy::kPaam)
    monitor.analyze = [gang = setup_.gang](const workload::Workload& measured) {
      return gang ? analysis::analyze_gangs(measured) : analysis::analyze(measured);
    };
  return check_assumptions(monitor, chains, findings);
}

// The run as a whole: its workload and policy, how long it ran and how it
// ended, the overheads it was analysed with, and whether every critical
// chain held its bound (CHAINS: their entries).
json Run::run_summary(uint64_t stopped_ns, const std::string& failure, const json& chains) const {
  const auto& w = setup_.workload;
  bool held = true;
  for (const auto& c : chains)
    if (c["critical"].get<bool>() && c["bound_held"].is_boolean()) held = held && c["bound_held"].get<bool>();
  return {{"format_version", 1},
          {"workload", {{"file", options_.workload}, {"name", w.name}}},
          {"policy", std::string(to_string(options_.policy))},
          {"duration_s", static_cast<double>(stopped_ns - t0_) / 1e9},
          {"interrupted", stop_requested()},
          {"failed", failure.empty() ? json() : json(failure)},
          {"realtime", realtime_},
          {"work_fraction", options_.work_fraction},
          {"epsilon_us", us(w.server ? w.server->overhead_ns : 0)},
          {"kappa_us", us(w.accelerators.empty() ? 0 : w.accelerators.front().preemption_cost_ns)},
          {"release_jitter_us", us(w.release_jitter_ns)},
          {"critical_bounds_held", held},
          {"gang_scheduling", setup_.gang}};
}

// The working sets' walks, one calibration per size and pattern.
json Run::walks_summary() const {
  json walks = json::array();
  for (const auto& [key, ns] : setup_.walks)
    walks.push_back({{"working_set_kb", key.first >> 10}, {"pattern", key.second ? "random" : "stream"},
                     {"ns_per_line", ns}});
  return walks;
}

// Said beside the links' summary: each topic that lost messages on its
// link, and from when.
void Run::warn_of_lost_messages() const {
  const auto& w = setup_.workload;
  for (size_t h = 0; h < setup_.plan.hops.size(); ++h) {
    const HopState* st = shared_.hop(h);
    if (st->lost.load())
      fprintf(stderr, "rtaccel run: warning: %llu messages of '%s' lost on link '%s' from %.1f s on: %s\n",
              static_cast<unsigned long long>(st->lost.load()), setup_.plan.hops[h].name.c_str(),
              w.links[setup_.plan.hops[h].link].name.c_str(), static_cast<double>(st->failed_ns.load() - t0_) / 1e9,
              st->error);
  }
}

// Other runs seen under way beside this one, and when.
json Run::other_runs_summary() const {
  json others = json::array();
  for (const auto& [pid, seen] : other_runs_)
    others.push_back({{"runner_pid", pid},
                      {"first_seen_s", into_run_s(seen.first_ns)},
                      {"last_seen_s", into_run_s(seen.last_ns)}});
  return others;
}

// trace.json: the run's timeline, the best-effort programs' stops, and the
// regulator's and the interposer's timelines merged into it.
Status Run::write_trace(uint64_t stopped_ns, const std::vector<Finding>& findings) const {
  const std::filesystem::path out(options_.out_dir);
  TraceFile trace;
  Status written = trace.open(out / "trace.json");
  if (written) {
    trace_events(setup_, shared_, cores_, speed_, resources_, findings, t0_, &trace);
    best_effort_trace(stopped_ns, &trace);
    if (setup_.isolation) merge_trace(out / "regulator.trace.json", t0_, &trace);
    for (const auto& [pid, name] : shim_processes_)
      merge_trace(shim_file(pid, ".trace.json"), t0_, &trace, "shim: " + name + " (pid " + std::to_string(pid) + ")");
    written = trace.close();
  }
  return written;
}

// summary.json piece by piece, in the order they are measured (the chains'
// figures before the monitor's check of them, trace.json before the
// runner's peak memory), then written whole.
Status Run::write_results(uint64_t stopped_ns, const std::string& failure) {
  Status csv_written;
  json chains = chains_summary(stopped_ns, &csv_written);
  json timers = timers_summary();
  json executors = executors_summary();
  json queues = queues_summary();
  std::vector<Finding> findings;
  json assumptions = assumptions_summary(stopped_ns, &chains, &findings);

  json summary = run_summary(stopped_ns, failure, chains);
  summary["chains"] = std::move(chains);
  summary["timers"] = std::move(timers);
  summary["executors"] = std::move(executors);
  summary["queues"] = std::move(queues);
  summary["assumptions"] = std::move(assumptions);
  summary["walks"] = walks_summary();
  if (setup_.gang) summary["gang"] = gang_summary();
  if (setup_.isolation) summary["isolation"] = isolation_summary();
  if (!setup_.workload.links.empty()) {
    summary["links"] = link_summary();
    warn_of_lost_messages();
  }
  if (!options_.shim_modes.empty()) {
    write_shim_report();  // the runner's own: what it locked during the run
    summary["shim"] = shim_summary();
  }
  if (!best_effort_.empty()) summary["best_effort"] = best_effort_summary(stopped_ns);
  if (!other_runs_.empty()) summary["other_runs"] = other_runs_summary();
  summary["resources"] = resources_.summary();

  const Status trace_written = write_trace(stopped_ns, findings);
  note_runner_peak(&summary["resources"]);
  // Strings of the user's (a command line, a path) need not be UTF-8:
  // such bytes become U+FFFD, where a throw would lose the results.
  const std::filesystem::path out(options_.out_dir);
  if (Status st = write_file(out / "summary.json", summary.dump(2, ' ', false, json::error_handler_t::replace) + "\n"); !st)
    return st;
  if (!trace_written) return trace_written;
  return csv_written;
}

}  // namespace rtaccel::exec
