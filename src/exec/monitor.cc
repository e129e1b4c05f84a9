#include "exec/monitor.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "core/busy.h"
#include "core/percentile.h"
#include "core/resident.h"

namespace rtaccel::exec {
namespace {

using nlohmann::json;

double us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// What a callback's execution may take beyond its CPU time and waits before
// its thread counts as kept off its core: the queue operations and wake-ups
// around its work, which its CPU clock does not measure.
constexpr uint64_t kOffCoreSlackNs = 200000;

std::string ms(uint64_t ns) {
  char text[32];
  snprintf(text, sizeof(text), "%.1f ms", static_cast<double>(ns) / 1e6);
  return text;
}

std::string seconds_text(double s) {
  char text[32];
  snprintf(text, sizeof(text), "%.1f s", s);
  return text;
}

// ms, or us below a millisecond: a timer's lateness is microseconds.
std::string short_time(uint64_t ns) {
  if (ns >= 1000000) return ms(ns);
  char text[32];
  snprintf(text, sizeof(text), "%.0f us", static_cast<double>(ns) / 1e3);
  return text;
}

// A time taken and the time allowed, in ms with as many decimals as it
// takes for an overrun to read as one (six show nanoseconds): "0.8 ms of
// CPU against a WCET of 0.8 ms" would say nothing was broken.
struct TookAllowed {
  std::string took, allowed;
};
TookAllowed took_allowed(uint64_t took_ns, uint64_t allowed_ns) {
  char took[32], allowed[32];
  for (int decimals = 1;; ++decimals) {
    snprintf(took, sizeof(took), "%.*f ms", decimals, static_cast<double>(took_ns) / 1e6);
    snprintf(allowed, sizeof(allowed), "%.*f ms", decimals, static_cast<double>(allowed_ns) / 1e6);
    if (decimals == 6 || took_ns <= allowed_ns || strcmp(took, allowed) != 0) break;
  }
  return {took, allowed};
}

// Time spans [begin, end), and their union: sorted, none overlapping.
using Spans = std::vector<std::pair<uint64_t, uint64_t>>;
Spans merged(Spans spans) {
  std::sort(spans.begin(), spans.end());
  Spans out;
  for (const auto& s : spans) {
    if (!out.empty() && s.first <= out.back().second)
      out.back().second = std::max(out.back().second, s.second);
    else
      out.push_back(s);
  }
  return out;
}

// The time of [from, to) that merged spans cover.
uint64_t covered(const Spans& spans, uint64_t from, uint64_t to) {
  uint64_t sum = 0;
  auto it = std::partition_point(spans.begin(), spans.end(), [&](const auto& s) { return s.second <= from; });
  for (; it != spans.end() && it->first < to; ++it) sum += std::min(it->second, to) - std::max(it->first, from);
  return sum;
}

std::string count_of(uint64_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// A piece of work that took longer than the analysis allowed it.
struct Overrun {
  Finding::Kind kind;  // not kInstance
  size_t what;         // kCpu, kOffCore: callback; kSegment, kOverhead: index into segments; kHop: hop;
                       // kRelease: timer
  uint64_t begin_ns;   // when it ran
  uint64_t end_ns;
  uint64_t took_ns;    // measured
  int core;            // kCpu, kRelease, kOffCore: its executor's core; else -1
};

// Measured against allowed, per callback, segment or hop.
struct Tally {
  uint64_t count = 0;
  uint64_t over = 0;
  uint64_t allowed_ns = 0;
  std::vector<uint64_t> took_ns;

  void add(uint64_t took) {
    ++count;
    over += took > allowed_ns;
    took_ns.push_back(took);
  }
  uint64_t fastest() const { return took_ns.empty() ? 0 : *std::min_element(took_ns.begin(), took_ns.end()); }
  json to_json(const char* allowed_key) {
    std::sort(took_ns.begin(), took_ns.end());
    return {{allowed_key, us(allowed_ns)},
            {"count", count},
            {"min_us", us(fastest())},
            {"p99_us", us(rtaccel_percentile_sorted_u64(took_ns.data(), took_ns.size(), 0.99))},
            {"max_us", took_ns.empty() ? 0.0 : us(took_ns.back())},
            {"over", over}};
  }
};

// What explains one chain's instances over its bound.
struct Explanation {
  struct Seen {
    uint64_t instances = 0;
    uint64_t max_ns = 0;
  };
  std::map<std::pair<int, size_t>, Seen> overruns;  // (kind, what)
  std::map<int, CoreLoss> cores;
  // Per cpu-backend accelerator: what its core lost while its kernels ran
  // over their declared times.
  std::map<size_t, CoreLoss> devices;
  double slowest = 0;  // the machine's speed, the lowest in their time
  uint64_t unexplained = 0;
  uint64_t policy_only = 0;  // nothing broken, under a policy not analysed
};

// One chain's instances over its bound, as Check::explain_chains goes
// through them, and what explains them.
struct ChainOverBound {
  size_t chain = 0;
  uint64_t bound_ns = 0;
  std::set<int> cores;  // its executors'
  // With the run's longest times in place of the declared ones, the
  // analysis bounds it (quantitative), at measured_bound_ns.
  bool quantitative = false;
  uint64_t measured_bound_ns = 0;
  Explanation why;
  // Per core, the sampling intervals already in why.cores and why.devices.
  std::vector<std::vector<bool>> counted, device_counted;
  uint64_t over = 0;                       // checked instances over the bound
  uint64_t beyond = 0, beyond_max_ns = 0;  // instances over even the measured bound
  uint64_t unchecked = 0;                  // instances over the bound after a trace filled
};

}  // namespace

CoreSampler::CoreSampler(std::vector<int> cores) : cores_(std::move(cores)) {
  std::sort(cores_.begin(), cores_.end());
  cores_.erase(std::unique(cores_.begin(), cores_.end()), cores_.end());
}

ptrdiff_t CoreSampler::column(int core) const {
  auto it = std::lower_bound(cores_.begin(), cores_.end(), core);
  return it != cores_.end() && *it == core ? it - cores_.begin() : -1;
}

void CoreSampler::sample(uint64_t now_ns, const char* path) {
  FILE* f = fopen(path, "re");
  if (!f) return;
  static const double ns_per_tick = 1e9 / static_cast<double>(sysconf(_SC_CLK_TCK));
  const size_t n = cores_.size();
  // A core missing from this read keeps its totals: it lost nothing since.
  totals_.resize(totals_.size() + n);
  CoreLoss* row = totals_.data() + totals_.size() - n;
  if (!at_ns_.empty()) std::copy(row - n, row, row);
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    // "cpuN ...", not the machine's total ("cpu  ..."), whose first count
    // %d would take for a core number.
    if (strncmp(line, "cpu", 3) != 0 || !isdigit(static_cast<unsigned char>(line[3]))) continue;
    int core;
    unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
    if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &core, &user, &nice, &system, &idle, &iowait,
               &irq, &softirq, &steal) != 9)
      continue;
    const ptrdiff_t c = column(core);
    if (c < 0) continue;
    auto to_ns = [](unsigned long long ticks) { return static_cast<uint64_t>(static_cast<double>(ticks) * ns_per_tick); };
    row[c] = {to_ns(irq), to_ns(softirq), to_ns(steal)};
  }
  fclose(f);
  at_ns_.push_back(now_ns);
}

void CoreSampler::record(uint64_t now_ns, const std::vector<CoreLoss>& cumulative) {
  for (int core : cores_)
    totals_.push_back(static_cast<size_t>(core) < cumulative.size() ? cumulative[static_cast<size_t>(core)] : CoreLoss{});
  at_ns_.push_back(now_ns);
}

void CoreSampler::reserve(size_t samples) {
  core::reserve_resident(at_ns_, samples);
  core::reserve_resident(totals_, samples * cores_.size());
}

CoreLoss CoreSampler::delta(size_t k, ptrdiff_t column) const {
  const size_t n = cores_.size();
  const CoreLoss& x = totals_[(k - 1) * n + static_cast<size_t>(column)];
  const CoreLoss& y = totals_[k * n + static_cast<size_t>(column)];
  // A counter that went back (a core brought online again counts afresh)
  // lost nothing the run can tell.
  auto since = [](uint64_t a, uint64_t b) { return b > a ? b - a : 0; };
  return {since(x.irq_ns, y.irq_ns), since(x.softirq_ns, y.softirq_ns), since(x.steal_ns, y.steal_ns)};
}

CoreLoss CoreSampler::lost(int core, uint64_t from_ns, uint64_t to_ns,
                           std::vector<std::vector<bool>>* counted) const {
  CoreLoss sum;
  const ptrdiff_t c = column(core);
  if (c < 0) return sum;
  std::vector<bool>* done = nullptr;
  if (counted) {
    if (counted->size() <= static_cast<size_t>(core)) counted->resize(static_cast<size_t>(core) + 1);
    done = &(*counted)[static_cast<size_t>(core)];
    done->resize(at_ns_.size());
  }
  // Interval k is (at_ns_[k-1], at_ns_[k]]: the first one that ends at or
  // after FROM, up to the first that ends at or after TO.
  const auto first = static_cast<size_t>(std::lower_bound(at_ns_.begin(), at_ns_.end(), from_ns) - at_ns_.begin());
  for (size_t k = std::max<size_t>(first, 1); k < at_ns_.size(); ++k) {
    if (at_ns_[k - 1] > to_ns) break;
    if (done) {
      if ((*done)[k]) continue;
      (*done)[k] = true;
    }
    sum += delta(k, c);
  }
  return sum;
}

CoreLoss CoreSampler::lost(int core) const {
  CoreLoss sum;
  const ptrdiff_t c = column(core);
  if (c < 0) return sum;
  for (size_t k = 1; k < at_ns_.size(); ++k) sum += delta(k, c);
  return sum;
}

std::vector<std::pair<uint64_t, CoreLoss>> CoreSampler::intervals(int core) const {
  std::vector<std::pair<uint64_t, CoreLoss>> out;
  const ptrdiff_t c = column(core);
  if (c < 0) return out;
  out.reserve(at_ns_.size());
  for (size_t k = 1; k < at_ns_.size(); ++k) out.emplace_back(at_ns_[k - 1], delta(k, c));
  return out;
}

std::vector<int> watched_cores(const workload::Workload& w) {
  std::vector<int> cores;
  for (const auto& ex : w.executors) cores.push_back(ex.core);
  for (const auto& a : w.accelerators)
    if (a.backend == workload::Backend::kCpu) cores.push_back(a.core);
  return cores;
}

void SpeedSampler::sample(uint64_t now_ns) {
  // On the thread's CPU clock: a probe preempted by the workload is not the
  // machine running slow. The callbacks' CPU time is on the same clock.
  record(now_ns, core::measure_busy_loop_rate(20000, 3, CLOCK_THREAD_CPUTIME_ID) / core::busy_loop_rate());
}

void SpeedSampler::record(uint64_t now_ns, double ratio) { samples_.emplace_back(now_ns, ratio); }

void SpeedSampler::reserve(size_t samples) { core::reserve_resident(samples_, samples); }

double SpeedSampler::slowest(uint64_t from_ns, uint64_t to_ns) const {
  double low = 0;
  auto it = std::lower_bound(samples_.begin(), samples_.end(), std::make_pair(from_ns, 0.0));
  if (it != samples_.begin()) --it;  // the probe just before
  for (; it != samples_.end(); ++it) {
    low = low == 0 ? it->second : std::min(low, it->second);
    if (it->first >= to_ns) break;  // the probe just after
  }
  return low;
}

namespace {

// The checks of one run's records, in the order the monitor makes them:
// each stage reads what the ones before it left here.
struct Check {
  using Thread = std::pair<size_t, uint32_t>;  // (executor, thread)

  Check(const MonitorInput& input, json* summaries, std::vector<Finding>* out)
      : in(input), w(*input.workload), plan(*input.plan), shared(*input.shared), chains(summaries), findings(out) {}

  json run() {
    set_allowed();
    read_trace();
    check_kernels();
    find_held();
    check_requests();
    check_legs();
    check_off_core();
    check_releases();
    sort_overruns();
    report_overruns();
    measure_bounds();
    find_filled_trace();
    const uint64_t unexplained = explain_chains();
    return summarise(unexplained);
  }

  void set_allowed();
  void read_trace();
  void check_kernels();
  void find_held();
  const Spans& held_above_of(const Thread& mine);
  void check_requests();
  void check_legs();
  void check_off_core();
  void check_releases();
  void sort_overruns();
  const std::vector<Tally>& tallies_of(Finding::Kind kind) const;
  void report_overruns();
  void measure_bounds();
  void find_filled_trace();
  uint64_t explain_chains();
  void explain_instance(const Sample& x, ChainOverBound* chain);
  bool tally_overruns_in(const Sample& x, ChainOverBound* chain, bool* hop_late, uint64_t* off_core_ns);
  json explanations_of(const ChainOverBound& chain);
  json summarise(uint64_t unexplained);

  std::string overrun_text(int kind, size_t what, uint64_t max_ns, uint64_t n, const std::string& of) const;
  std::string below_this_machine(const Tally& t, const char* what) const;
  std::string speed_text(double low, const std::string& when) const;
  static std::string loss_text(int core, const CoreLoss& loss, const std::string& when, const std::string& whose = "");
  std::pair<size_t, int> device_core(size_t segment) const;
  std::string device_loss_text(size_t a, const CoreLoss& loss, const std::string& when) const;
  size_t accelerator_of(const TraceEvent& ev) const { return w.callbacks[ev.callback].segments[ev.segment].accelerator; }

  const MonitorInput& in;
  const workload::Workload& w;
  const Plan& plan;
  const SharedRun& shared;
  json* chains;
  std::vector<Finding>* findings;

  // Every piece of work against what the analysis allowed it.
  std::vector<Tally> callbacks;
  std::vector<std::pair<size_t, size_t>> segment_of;  // (callback, segment)
  std::map<std::pair<size_t, size_t>, size_t> segment_index;
  std::vector<Tally> segments;
  std::vector<Tally> hops;
  // A segment served on another node: its request and response on the link
  // against the bound the network term gives them.
  std::vector<Tally> legs;
  std::vector<Tally> requests;
  std::vector<Tally> off_core;
  std::vector<Tally> releases;

  std::vector<Overrun> overruns;  // by begin, once every check has added its own
  uint64_t longest_overrun = 0;
  std::map<int, std::vector<const TraceEvent*>> busy;               // per core: callbacks' executions
  std::vector<const TraceEvent*> runs;                              // callbacks' executions
  std::vector<const TraceEvent*> kernels;                           // served segments' kernels
  std::map<std::pair<size_t, uint32_t>, std::vector<std::pair<uint64_t, uint64_t>>> waits;  // per thread
  std::map<Thread, Spans> held;
  std::map<Thread, Spans> held_above;  // made when first asked for

  std::map<std::string, uint64_t> measured_bound;  // bounded chains only
  uint64_t checked_until_ns = UINT64_MAX;
  json trace_filled = nullptr;
};

void Check::set_allowed() {
  callbacks.resize(w.callbacks.size());
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb) callbacks[cb].allowed_ns = w.callbacks[cb].cpu_ns;
  for (size_t cb = 0; cb < w.callbacks.size(); ++cb)
    for (size_t k = 0; k < w.callbacks[cb].segments.size(); ++k) {
      segment_index[{cb, k}] = segment_of.size();
      segment_of.emplace_back(cb, k);
    }
  segments.resize(segment_of.size());
  for (size_t i = 0; i < segment_of.size(); ++i)
    segments[i].allowed_ns = w.callbacks[segment_of[i].first].segments[segment_of[i].second].wcet_ns;
  hops.resize(plan.hops.size());
  legs.resize(segment_of.size());
  if (!w.links.empty()) {
    const analysis::NetworkTerms net(w);
    for (size_t h = 0; h < plan.hops.size(); ++h)
      for (uint32_t q : plan.hops[h].queues)
        hops[h].allowed_ns = std::max(hops[h].allowed_ns, net.hop_ns(plan.hops[h].publisher, plan.queues[q].consumer));
    for (size_t i = 0; i < segment_of.size(); ++i) legs[i].allowed_ns = net.segment_ns(segment_of[i].first, segment_of[i].second);
  }
}

void Check::read_trace() {
  for (size_t e = 0; e < w.executors.size() + plan.bridges.size(); ++e) {
    const uint64_t n = shared.trace_kept(e);
    for (uint64_t i = 0; i < n; ++i) {
      const TraceEvent& ev = shared.trace(e)[i];
      if (ev.end_ns + (ev.kind == static_cast<uint32_t>(TraceKind::kSegment) ? ev.resumed_after_ns : 0) > in.stop_ns)
        continue;
      // What an executor thread waited for, off its core by design: its
      // accelerator segments, and under gangs the lock.
      if (e < w.executors.size() && (ev.kind == static_cast<uint32_t>(TraceKind::kSegment) ||
                                     ev.kind == static_cast<uint32_t>(TraceKind::kGangWait) ||
                                     ev.kind == static_cast<uint32_t>(TraceKind::kGangPark)))
        // A segment's lasts until its thread went on, its wake-up included.
        waits[{e, ev.thread}].push_back(ev.kind == static_cast<uint32_t>(TraceKind::kSegment)
                                            ? std::make_pair(ev.submit_ns, ev.end_ns + ev.resumed_after_ns)
                                            : std::make_pair(ev.begin_ns, ev.end_ns));
      if (ev.kind == static_cast<uint32_t>(TraceKind::kCallback)) {
        Tally& t = callbacks[ev.callback];
        t.add(ev.cpu_ns);
        busy[w.executors[w.callbacks[ev.callback].executor].core].push_back(&ev);
        runs.push_back(&ev);
        if (ev.cpu_ns > t.allowed_ns)
          overruns.push_back({Finding::kCpu, ev.callback, ev.begin_ns, ev.end_ns, ev.cpu_ns,
                              w.executors[w.callbacks[ev.callback].executor].core});
      } else if (ev.kind == static_cast<uint32_t>(TraceKind::kSegment) && ev.bucket >= 0 &&
                 segment_index.count({ev.callback, ev.segment})) {
        // Under direct invocation a segment's time includes its wait for the
        // device, which no declared time covers; only served kernels count.
        kernels.push_back(&ev);
      } else if (ev.kind == static_cast<uint32_t>(TraceKind::kTransfer) && ev.segment < hops.size() &&
                 hops[ev.segment].allowed_ns) {
        // From the publish to the arrival, as the analysis bounds a hop.
        hops[ev.segment].add(ev.end_ns - ev.submit_ns);
        if (ev.end_ns - ev.submit_ns > hops[ev.segment].allowed_ns)
          overruns.push_back({Finding::kHop, ev.segment, ev.submit_ns, ev.end_ns, ev.end_ns - ev.submit_ns, -1});
      }
    }
  }
}

void Check::check_kernels() {
  // A kernel's own time: its span less the time a higher bucket's kernels
  // on its accelerator ran within it. The analysis charges those as
  // interference of their own (a higher bucket's worker preempts a lower one
  // on the cpu backend; on a GPU its stream's priority takes the SMs first):
  // counted here too, they would make a kernel that only waited for them
  // look over its declared time, as every low bucket's did on a GPU.
  // It charges each of them kappa twice as well (PAAM's A* = A + 2 kappa):
  // the switch to the higher kernel and the lower one's resumption after it
  // (its worker back on the core, its data back in the caches), which fall
  // within the lower kernel's span. Up to that much per higher kernel that
  // started within the span is theirs too.
  std::map<std::pair<size_t, int32_t>, Spans> by_bucket;  // (accelerator, bucket): its kernels' spans
  for (const TraceEvent* ev : kernels) by_bucket[{accelerator_of(*ev), ev->bucket}].emplace_back(ev->begin_ns, ev->end_ns);
  std::map<std::pair<size_t, int32_t>, Spans> above;  // the same: the union of every higher bucket's spans
  std::map<std::pair<size_t, int32_t>, std::vector<uint64_t>> above_starts;  // and their kernels' starts, in order
  for (const auto& [key, spans] : by_bucket) {
    Spans all;
    for (auto it = by_bucket.upper_bound(key); it != by_bucket.end() && it->first.first == key.first; ++it)
      all.insert(all.end(), it->second.begin(), it->second.end());
    std::vector<uint64_t>& starts = above_starts[key];
    for (const auto& span : all) starts.push_back(span.first);
    std::sort(starts.begin(), starts.end());
    above[key] = merged(std::move(all));
  }
  for (const TraceEvent* ev : kernels) {
    const auto key = std::make_pair(accelerator_of(*ev), ev->bucket);
    const workload::Accelerator& acc = w.accelerators[key.first];
    const uint64_t kappa = acc.priority_levels > 1 ? acc.preemption_cost_ns : 0;
    const std::vector<uint64_t>& starts = above_starts[key];
    const auto preemptions = static_cast<uint64_t>(std::lower_bound(starts.begin(), starts.end(), ev->end_ns) -
                                                   std::lower_bound(starts.begin(), starts.end(), ev->begin_ns));
    uint64_t own = ev->end_ns - ev->begin_ns - covered(above[key], ev->begin_ns, ev->end_ns);
    own -= std::min(own, 2 * kappa * preemptions);
    const size_t s = segment_index[{ev->callback, ev->segment}];
    segments[s].add(own);
    if (own > segments[s].allowed_ns) overruns.push_back({Finding::kSegment, s, ev->begin_ns, ev->end_ns, own, -1});
  }
}

void Check::find_held() {
  for (auto& [thread, spans] : waits) std::sort(spans.begin(), spans.end());
  // Per executor thread: when it held its core (its callbacks' spans less
  // its waits). What the other threads of its core at its priority or above
  // held keeps a thread from going on, and the bound charges that as their
  // interference.
  for (const TraceEvent* ev : runs) {
    const Thread mine{w.callbacks[ev->callback].executor, ev->thread};
    const Spans& own = waits[mine];
    Spans& out = held[mine];
    uint64_t at = ev->begin_ns;
    auto it = std::lower_bound(own.begin(), own.end(), std::make_pair(ev->begin_ns, uint64_t{0}));
    for (; it != own.end() && it->first < ev->end_ns; ++it) {
      if (it->first > at) out.emplace_back(at, it->first);
      at = std::max(at, it->second);
    }
    if (at < ev->end_ns) out.emplace_back(at, ev->end_ns);
  }
}

const Spans& Check::held_above_of(const Thread& mine) {
  auto [it, made] = held_above.try_emplace(mine);
  if (made) {
    const workload::Executor& ex = w.executors[mine.first];
    Spans all;
    for (const auto& [other, spans] : held)
      if (other != mine && w.executors[other.first].core == ex.core && w.executors[other.first].priority >= ex.priority)
        all.insert(all.end(), spans.begin(), spans.end());
    it->second = merged(std::move(all));
  }
  return it->second;
}

void Check::check_requests() {
  // The server's overhead per request, against epsilon: from the later of
  // its submission and the end of the kernel its accelerator ran before it
  // to its kernel's start, plus from its kernel's end to its client going
  // on (as bench/request_phases.h measures it), less the time in that the
  // threads above the client's held its core. A request from another node
  // has the server's gateway for its client there: from the request whole at
  // the gateway's link to the gateway's reply, less the same threads' time
  // while the gateway's thread waited to take it and to reply (its legs on
  // the link are checked below).
  requests.resize(segment_of.size());
  if (w.server) {
    for (Tally& t : requests) t.allowed_ns = w.server->overhead_ns;
    std::map<size_t, std::vector<uint64_t>> ends;  // per accelerator: its kernels' ends, in order
    for (const TraceEvent* ev : kernels) ends[accelerator_of(*ev)].push_back(ev->end_ns);
    for (auto& [a, e] : ends) std::sort(e.begin(), e.end());
    for (const TraceEvent* ev : kernels) {
      const size_t a = accelerator_of(*ev);
      const bool remote = w.accelerators[a].node != w.node_of_callback(ev->callback);
      if (remote && !ev->end_to_reply_ns && !ev->arrival_to_start_ns) continue;  // not measured
      // The client waited for its core while the threads above it there held
      // it. A remote client's stand-in, the gateway's thread at its priority,
      // waits for the core the analysis gives the callback on the server's
      // machine (docs/accel.md, "Limits").
      const Spans& above_it = held_above_of({w.callbacks[ev->callback].executor, ev->thread});
      const auto& e = ends[a];
      const auto before = std::upper_bound(e.begin(), e.end(), ev->begin_ns);
      const uint64_t submitted =
          remote ? ev->begin_ns - std::min<uint64_t>(ev->begin_ns, ev->arrival_to_start_ns) : ev->submit_ns;
      const uint64_t ready = std::max(submitted, before == e.begin() ? 0 : *std::prev(before));
      uint64_t waiting = ev->begin_ns > ready ? ev->begin_ns - ready : 0;
      if (remote) {
        const uint64_t taken = std::min(ev->begin_ns, submitted + ev->arrival_to_taken_ns);
        if (taken > ready) waiting -= covered(above_it, ready, taken);
      }
      const uint64_t resumed = ev->end_ns + ev->resumed_after_ns;
      const uint64_t back = remote ? ev->end_ns + ev->end_to_reply_ns : resumed;
      const uint64_t overhead = waiting + (back - ev->end_ns - covered(above_it, ev->end_ns, back));
      const size_t s = segment_index[{ev->callback, ev->segment}];
      requests[s].add(overhead);
      if (overhead > requests[s].allowed_ns)
        overruns.push_back({Finding::kOverhead, s, ev->submit_ns, resumed, overhead, -1});
    }
  }
}

void Check::check_legs() {
  // The two legs of a request served on another node, added: each crosses
  // the nodes' clocks in the other direction, so the sum is of one clock's
  // differences (segments.cc).
  for (const TraceEvent* ev : kernels) {
    const size_t s = segment_index[{ev->callback, ev->segment}];
    if (!legs[s].allowed_ns || !ev->legs_ns) continue;
    legs[s].add(ev->legs_ns);
    if (ev->legs_ns > legs[s].allowed_ns)
      overruns.push_back({Finding::kLegs, s, ev->submit_ns, ev->end_ns + ev->resumed_after_ns, ev->legs_ns, -1});
  }
}

void Check::check_off_core() {
  // A callback's thread kept off its core: the wall time of a callback's
  // execution beyond its CPU time, its waits, and the CPU time that the
  // callbacks of its priority or above took on its core while it was ready
  // (which the bound covers) went to something the analysis does not know: the
  // hypervisor (steal, which the thread's CPU clock does not count) or a
  // thread outside the workload. A lower executor's callback does not run
  // while it is ready, and another's wait for the accelerator takes no core.
  off_core.resize(w.callbacks.size());
  std::map<int, uint64_t> longest_run;  // per core
  for (auto& [core, spans] : busy) {
    std::sort(spans.begin(), spans.end(), [](const TraceEvent* a, const TraceEvent* b) { return a->begin_ns < b->begin_ns; });
    for (const TraceEvent* x : spans) longest_run[core] = std::max(longest_run[core], x->end_ns - x->begin_ns);
  }
  // The time of the waits that began within [from, to).
  auto within = [](const Spans& spans, uint64_t from, uint64_t to) {
    uint64_t sum = 0;
    auto it = std::lower_bound(spans.begin(), spans.end(), std::make_pair(from, uint64_t{0}));
    for (; it != spans.end() && it->first < to; ++it) sum += std::min(it->second, to) - it->first;
    return sum;
  };
  for (const TraceEvent* ev : runs) {
    const size_t e = w.callbacks[ev->callback].executor;
    const int core = w.executors[e].core;
    const uint64_t wall = ev->end_ns - ev->begin_ns;
    const Spans& own = waits[{e, ev->thread}];  // sorted, none overlapping: one thread's
    uint64_t preempted = 0;
    const auto& spans = busy[core];
    auto it = std::lower_bound(spans.begin(), spans.end(), ev->begin_ns - std::min(ev->begin_ns, longest_run[core]),
                               [](const TraceEvent* x, uint64_t at) { return x->begin_ns < at; });
    for (; it != spans.end() && (*it)->begin_ns < ev->end_ns; ++it) {
      const TraceEvent* other = *it;
      if (other == ev || other->end_ns <= ev->begin_ns ||
          w.executors[w.callbacks[other->callback].executor].priority < w.executors[e].priority)
        continue;
      // Its CPU time where this one was ready: while this one waited, the
      // wait accounts for the time already.
      const uint64_t from = std::max(other->begin_ns, ev->begin_ns), to = std::min(other->end_ns, ev->end_ns);
      preempted += std::min(other->cpu_ns, to - from - covered(own, from, to));
    }
    const uint64_t accounted = ev->cpu_ns + preempted + within(own, ev->begin_ns, ev->end_ns);
    const uint64_t off = wall > accounted ? wall - accounted : 0;
    Tally& t = off_core[ev->callback];
    t.allowed_ns = kOffCoreSlackNs;
    t.add(off);
    if (off > t.allowed_ns) overruns.push_back({Finding::kOffCore, ev->callback, ev->begin_ns, ev->end_ns, off, core});
  }
}

void Check::check_releases() {
  // Timer activations against the release jitter: how late each started
  // after its release, counted where no callback that could hold it back ran
  // on its core in between: one of its own executor, or of an executor of
  // its priority or above there (else the wait was interference, which the
  // bound covers). A lower executor's callback cannot: the timer's executor
  // preempts it.
  releases.resize(plan.timers.size());
  for (size_t t = 0; t < plan.timers.size(); ++t) {
    Tally& tally = releases[t];
    tally.allowed_ns = w.release_jitter_ns;
    const size_t cb = plan.timers[t];
    const workload::Executor& mine = w.executors[w.callbacks[cb].executor];
    // The spans that could hold it back, by begin, and the latest end of
    // the spans up to each.
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const TraceEvent* run : runs) {
      const size_t e = w.callbacks[run->callback].executor;
      if (w.executors[e].core == mine.core && (e == w.callbacks[cb].executor || w.executors[e].priority >= mine.priority))
        spans.emplace_back(run->begin_ns, run->end_ns);
    }
    std::sort(spans.begin(), spans.end());
    std::vector<uint64_t> latest;
    for (const auto& s : spans) latest.push_back(std::max(latest.empty() ? 0 : latest.back(), s.second));
    const uint64_t n = shared.records_kept(t);
    for (uint64_t i = 0; i < n; ++i) {
      const TimerRecord& r = shared.timer_records(t)[i];
      // Did such a callback run between the release and the start: one that
      // began before the start and ended after the release?
      const auto begun = std::lower_bound(spans.begin(), spans.end(), r.start_ns,
                                          [](const auto& s, uint64_t at) { return s.first < at; }) - spans.begin();
      if (begun > 0 && latest[static_cast<size_t>(begun - 1)] > r.release_ns) continue;
      tally.add(r.start_ns - r.release_ns);
      if (r.start_ns - r.release_ns > tally.allowed_ns)
        overruns.push_back({Finding::kRelease, t, r.release_ns, r.start_ns, r.start_ns - r.release_ns, mine.core});
    }
  }
}

void Check::sort_overruns() {
  std::sort(overruns.begin(), overruns.end(), [](const Overrun& a, const Overrun& b) { return a.begin_ns < b.begin_ns; });
  for (const auto& o : overruns) longest_overrun = std::max(longest_overrun, o.end_ns - o.begin_ns);
}

// Each kind's tallies, by an overrun's `what`.
const std::vector<Tally>& Check::tallies_of(Finding::Kind kind) const {
  switch (kind) {
    case Finding::kCpu: return callbacks;
    case Finding::kSegment: return segments;
    case Finding::kHop: return hops;
    case Finding::kRelease: return releases;
    case Finding::kOffCore: return off_core;
    case Finding::kLegs: return legs;
    case Finding::kOverhead:
    case Finding::kInstance: break;
  }
  return requests;
}

void Check::report_overruns() {
  if (!findings) return;
  // Room for every finding at once: growing by doubling would hold up to
  // three times their size while it copies.
  uint64_t over_bound = 0;
  for (const auto& c : *chains)
    if (c["over_bound"].is_number()) over_bound += c["over_bound"].get<uint64_t>();
  findings->reserve(findings->size() + overruns.size() + over_bound);
  for (const Overrun& o : overruns) {
    std::string_view what;
    if (o.kind == Finding::kSegment || o.kind == Finding::kOverhead || o.kind == Finding::kLegs) {
      const auto [cb, k] = segment_of[o.what];
      what = plan.callbacks[cb].segment_names[k];
    } else if (o.kind == Finding::kHop) {
      what = plan.hops[o.what].name;
    } else {
      what = w.callbacks[o.kind == Finding::kRelease ? plan.timers[o.what] : o.what].name;
    }
    findings->push_back({o.kind, what, o.begin_ns, o.end_ns, o.took_ns, tallies_of(o.kind)[o.what].allowed_ns});
  }
}

std::string Check::overrun_text(int kind, size_t what, uint64_t max_ns, uint64_t n, const std::string& of) const {
  if (kind == Finding::kCpu) {
    const auto t = took_allowed(max_ns, callbacks[what].allowed_ns);
    return "callback " + w.callbacks[what].name + " ran up to " + t.took + " of CPU against a WCET of " + t.allowed +
           " in " + count_of(n, "instance") + of;
  }
  if (kind == Finding::kSegment) {
    const auto [cb, k] = segment_of[what];
    const auto t = took_allowed(max_ns, segments[what].allowed_ns);
    // Its fastest in the run beside it: at or under the declared time,
    // the kernel was sized right and the device ran it slower at times.
    return "segment " + std::to_string(k + 1) + " of callback " + w.callbacks[cb].name + " (" +
           w.callbacks[cb].segments[k].service + ") ran up to " + t.took + " on the accelerator against " +
           t.allowed + " in " + count_of(n, "instance") + of + " (" +
           took_allowed(segments[what].fastest(), segments[what].allowed_ns).took + " at its fastest in the run)";
  }
  if (kind == Finding::kOverhead) {
    const auto [cb, k] = segment_of[what];
    return "the requests of segment " + std::to_string(k + 1) + " of callback " + w.callbacks[cb].name + " (" +
           w.callbacks[cb].segments[k].service + ") cost the server up to " + short_time(max_ns) +
           " against its overhead (epsilon) of " + short_time(requests[what].allowed_ns) + " in " +
           count_of(n, "instance") + of + below_this_machine(requests[what], "request");
  }
  if (kind == Finding::kLegs) {
    const auto [cb, k] = segment_of[what];
    const auto t = took_allowed(max_ns, legs[what].allowed_ns);
    return "the request and response of segment " + std::to_string(k + 1) + " of callback " + w.callbacks[cb].name +
           " (" + w.callbacks[cb].segments[k].service + ") took up to " + t.took + " on the link against their bound of " +
           t.allowed + " in " + count_of(n, "instance") + of;
  }
  if (kind == Finding::kOffCore)
    return "callback " + w.callbacks[what].name + " was kept off core " +
           std::to_string(w.executors[w.callbacks[what].executor].core) + " for up to " + short_time(max_ns) +
           " while it ran (steal, or a thread outside the workload) in " + count_of(n, "instance") + of;
  if (kind == Finding::kRelease)
    return "the timer of callback " + w.callbacks[plan.timers[what]].name + " started it up to " +
           short_time(max_ns) + " after its release against a release jitter of " +
           short_time(releases[what].allowed_ns) + " in " +
           count_of(n, "activation") + of + below_this_machine(releases[what], "activation");
  const auto t = took_allowed(max_ns, hops[what].allowed_ns);
  return "hop " + plan.hops[what].name + " took up to " + t.took + " against its bound of " + t.allowed + " in " +
         count_of(n, "message") + of;
}

// An overhead the workload declares below what this machine takes at the
// least: where every one of ten or more measured went over it, the
// declaration is off, not the run, and every instance will break it. The
// workload's overheads stand where the machine has no calibration.
std::string Check::below_this_machine(const Tally& t, const char* what) const {
  if (t.count < 10 || t.fastest() <= t.allowed_ns) return {};
  return "; at least " + short_time(t.fastest()) + " in each " + what + " of the run: below what this machine "
         "takes (`rtaccel calibrate` measures it)";
}

// The machine below the speed the work was sized for, at LOW at the
// slowest: a sentence, or empty.
std::string Check::speed_text(double low, const std::string& when) const {
  if (low <= 0 || low >= in.work_fraction) return {};
  char speed[32], fraction[32];
  snprintf(speed, sizeof(speed), "%.2f", low);
  snprintf(fraction, sizeof(fraction), "%.2f", in.work_fraction);
  return std::string("the machine ran the calibrated CPU work at as little as ") + speed + "x its speed at the start" +
         when + ", below the work fraction " + fraction;
}

// "core 1 lost 20.0 ms to softirqs" + WHEN; WHOSE names the core's owner.
std::string Check::loss_text(int core, const CoreLoss& loss, const std::string& when, const std::string& whose) {
  std::string parts;
  auto part = [&parts](uint64_t ns, const char* what) {
    if (!ns) return;
    parts += (parts.empty() ? "" : ", ") + ms(ns) + " to " + what;
  };
  part(loss.softirq_ns, "softirqs");
  part(loss.irq_ns, "interrupts");
  part(loss.steal_ns, "the hypervisor (steal)");
  return whose + "core " + std::to_string(core) + " lost " + parts + when;
}

// A cpu-backend accelerator's kernels run on a core of their own, which
// the hypervisor, interrupts and softirqs take time from as they do from
// the executors': said beside a kernel over its declared time, it tells
// a slow kernel from a kernel kept off its core (at the sampler's grain).
std::pair<size_t, int> Check::device_core(size_t segment) const {
  const auto [cb, k] = segment_of[segment];
  const size_t a = w.callbacks[cb].segments[k].accelerator;
  return std::make_pair(a, w.accelerators[a].backend == workload::Backend::kCpu ? w.accelerators[a].core : -1);
}

std::string Check::device_loss_text(size_t a, const CoreLoss& loss, const std::string& when) const {
  return loss_text(w.accelerators[a].core, loss, " while its kernels over their declared times ran" + when,
                   w.accelerators[a].name + "'s ");
}

void Check::measure_bounds() {
  // The bounds again, with each callback's, kernel's and release's longest
  // time in the run in place of the declared one where longer: what the
  // analysis promises for the run as it happened. A kernel's own time still
  // includes the cost of its preemptions, which the analysis also charges
  // (kappa), so this bound is if anything larger than the run's own times
  // give, and an instance beyond it more surely the analysis' fault.
  if (in.analyze) {
    auto longest = [](const Tally& t) {
      return t.took_ns.empty() ? uint64_t{0} : *std::max_element(t.took_ns.begin(), t.took_ns.end());
    };
    workload::Workload measured = w;
    for (size_t cb = 0; cb < w.callbacks.size(); ++cb)
      measured.callbacks[cb].cpu_ns = std::max(w.callbacks[cb].cpu_ns, longest(callbacks[cb]));
    for (size_t i = 0; i < segment_of.size(); ++i) {
      auto& seg = measured.callbacks[segment_of[i].first].segments[segment_of[i].second];
      seg.wcet_ns = std::max(seg.wcet_ns, longest(segments[i]));
    }
    for (const Tally& t : releases) measured.release_jitter_ns = std::max(measured.release_jitter_ns, longest(t));
    if (measured.server)
      for (const Tally& t : requests) measured.server->overhead_ns = std::max(measured.server->overhead_ns, longest(t));
    for (const auto& r : in.analyze(measured))
      if (r.bounded) measured_bound[r.chain] = r.wcrt_ns;
  }
}

void Check::find_filled_trace() {
  // An executor's (or bridge's) trace holds a set number of events: in a
  // run long enough to fill one, what came after it is not in the tallies
  // above, and an instance over its bound then cannot be checked. Checked:
  // the instances that ended before the first trace to fill did.
  for (size_t e = 0; e < w.executors.size() + plan.bridges.size(); ++e) {
    const uint64_t capacity = shared.trace_capacity(e);
    if (shared.executor(e)->trace_used.load() <= capacity) continue;
    uint64_t last_ns = 0;
    for (uint64_t i = 0; i < capacity; ++i) last_ns = std::max(last_ns, shared.trace(e)[i].end_ns);
    if (last_ns >= checked_until_ns) continue;
    checked_until_ns = last_ns;
    trace_filled = {{"of", trace_owner(w, plan, e)},
                    {"events", capacity},
                    {"at_s", static_cast<double>(last_ns - std::min(last_ns, in.t0_ns)) / 1e9}};
  }
}

uint64_t Check::explain_chains() {
  // Each chain over its bound: what broke in the time of its instances over
  // it, on its executors' cores for CPU work and losses.
  uint64_t unexplained = 0;
  for (size_t c = 0; c < w.chains.size(); ++c) {
    json& summary = (*chains)[c];
    if (!summary["over_bound"].is_number() || summary["over_bound"].get<uint64_t>() == 0) continue;
    ChainOverBound chain;
    chain.chain = c;
    chain.bound_ns = static_cast<uint64_t>(summary["wcrt_us"].get<double>() * 1000.0 + 0.5);
    for (size_t cb : w.chains[c].path) chain.cores.insert(w.executors[w.callbacks[cb].executor].core);
    const auto mb = measured_bound.find(w.chains[c].name);
    chain.quantitative = mb != measured_bound.end();
    if (chain.quantitative) chain.measured_bound_ns = mb->second;
    if (in.analyze) summary["measured_wcrt_us"] = chain.quantitative ? json(us(mb->second)) : json(nullptr);
    const uint64_t n = shared.samples_kept(c);
    for (uint64_t i = 0; i < n; ++i) {
      const Sample& x = shared.samples(c)[i];
      if (x.end_ns > in.stop_ns || x.end_ns - x.start_ns <= chain.bound_ns) continue;
      if (x.end_ns > checked_until_ns) {
        ++chain.unchecked;
        continue;
      }
      explain_instance(x, &chain);
    }
    summary["explained_by"] = explanations_of(chain);
    summary["unexplained"] = chain.why.unexplained;
    summary["unchecked"] = chain.unchecked;
    unexplained += chain.why.unexplained;
  }
  return unexplained;
}

// Instance X of CHAIN, over its bound and checked: what broke in its time
// and what its cores lost, into CHAIN's explanation; explained or not, a
// finding.
void Check::explain_instance(const Sample& x, ChainOverBound* chain) {
  Explanation& why = chain->why;
  ++chain->over;
  bool hop_late = false;
  // Its cores' time the analysis does not model: taken from its callbacks
  // while they ran (steal, threads outside the workload), and lost to
  // interrupts, softirqs and steal by the kernel's count. The two
  // overlap (steal is in both), so the larger stands for both.
  uint64_t off_core_ns = 0, lost_ns = 0;
  const bool broke = tally_overruns_in(x, chain, &hop_late, &off_core_ns);
  for (int core : chain->cores) {
    why.cores[core] += in.cores->lost(core, x.start_ns, x.end_ns, &chain->counted);
    // A loss in an interval counted for an earlier instance explains
    // this one too; what counts is what the core lost then.
    lost_ns += in.cores->lost(core, x.start_ns, x.end_ns, nullptr).total();
  }
  if (in.speed)
    if (const double low = in.speed->slowest(x.start_ns, x.end_ns); low > 0)
      why.slowest = why.slowest == 0 ? low : std::min(why.slowest, low);
  const uint64_t unmodelled_ns = std::max(off_core_ns, lost_ns);
  bool explained = broke || unmodelled_ns > 0;
  if (chain->quantitative) {
    // The analysis with the run's own times holds unless the instance
    // went further beyond it than its cores lost to what the analysis
    // does not model (a hop's time, and a remote request's on the link,
    // it models only as declared).
    const uint64_t latency = x.end_ns - x.start_ns;
    const uint64_t measured = chain->measured_bound_ns;
    if (latency > measured) {
      ++chain->beyond;
      chain->beyond_max_ns = std::max(chain->beyond_max_ns, latency - measured);
    }
    explained = latency <= measured || hop_late || latency - measured <= unmodelled_ns;
  }
  if (!explained && !in.policy_analysed) {
    ++why.policy_only;
    explained = true;
  }
  why.unexplained += !explained;
  if (findings)
    findings->push_back({Finding::kInstance, w.chains[chain->chain].name, x.start_ns, x.end_ns, x.end_ns - x.start_ns,
                         chain->bound_ns, chain->quantitative ? chain->measured_bound_ns : 0, explained});
}

// The overruns that overlap instance X, on CHAIN's cores where they are on
// a core, into its explanation (and a cpu-backend accelerator's kernels,
// what that core lost meanwhile). Whether any did; HOP_LATE: a hop or a
// remote request's legs among them; OFF_CORE_NS: the time they kept its
// callbacks off their cores.
bool Check::tally_overruns_in(const Sample& x, ChainOverBound* chain, bool* hop_late, uint64_t* off_core_ns) {
  Explanation& why = chain->why;
  bool broke = false;
  std::set<std::pair<int, size_t>> seen;
  // Sorted by start, so from the first that could still be running at its
  // start.
  auto it = std::lower_bound(overruns.begin(), overruns.end(), x.start_ns - std::min(x.start_ns, longest_overrun),
                             [](const Overrun& o, uint64_t t) { return o.begin_ns < t; });
  for (; it != overruns.end() && it->begin_ns <= x.end_ns; ++it) {
    if (it->end_ns < x.start_ns || (it->core >= 0 && !chain->cores.count(it->core))) continue;
    broke = true;
    *hop_late = *hop_late || it->kind == Finding::kHop || it->kind == Finding::kLegs;
    if (it->kind == Finding::kSegment)
      if (const auto [a, core] = device_core(it->what); core >= 0)
        why.devices[a] += in.cores->lost(core, it->begin_ns, it->end_ns, &chain->device_counted);
    if (it->kind == Finding::kOffCore) *off_core_ns += it->took_ns;
    auto& s = why.overruns[{it->kind, it->what}];
    s.max_ns = std::max(s.max_ns, it->took_ns);
    if (seen.insert({it->kind, it->what}).second) ++s.instances;
  }
  return broke;
}

// CHAIN's explained_by: a sentence each, for what explains its instances
// over its bound and for what does not.
json Check::explanations_of(const ChainOverBound& chain) {
  const Explanation& why = chain.why;
  const std::string of = " of the " + std::to_string(chain.over) + " over the bound";
  json explained_by = json::array();
  if (why.policy_only)
    explained_by.push_back(count_of(why.policy_only, "instance") + " over the bound had no assumption broken in " +
                           (why.policy_only == 1 ? "its" : "their") +
                           " time: the bound is for paam's scheduling, which this run's policy does not follow");
  if (chain.quantitative)
    explained_by.push_back("with the run's longest times in place of the declared ones the analysis bounds it at " +
                           ms(chain.measured_bound_ns) +
                           (chain.beyond ? ", and " + count_of(chain.beyond, "instance") +
                                               " went beyond that, by up to " + ms(chain.beyond_max_ns)
                                         : ", which covers every instance"));
  else if (in.analyze)
    explained_by.push_back("with the run's longest times in place of the declared ones the analysis finds no bound");
  if (chain.unchecked)
    explained_by.push_back(count_of(chain.unchecked, "instance") + " over the bound ended after the trace of " +
                           trace_filled["of"].get<std::string>() + " filled (" +
                           std::to_string(trace_filled["events"].get<uint64_t>()) + " events, " +
                           seconds_text(trace_filled["at_s"].get<double>()) +
                           " into the run): the run could not check " + (chain.unchecked == 1 ? "it" : "them"));
  // What the machine did first (a few lines at most), then the overruns
  // by what they can have added to these instances, the most first: their
  // longest excess over the allowed time, in as many instances. A long
  // list then reads from its top.
  for (const auto& [core, loss] : why.cores)
    if (loss.total()) explained_by.push_back(loss_text(core, loss, " in the time of the instances over the bound"));
  for (const auto& [a, loss] : why.devices)
    if (loss.total())
      explained_by.push_back(device_loss_text(a, loss, " in the instances over the bound"));
  if (const std::string slow = speed_text(why.slowest, " in the time of the instances over the bound"); !slow.empty())
    explained_by.push_back(slow);
  std::vector<std::pair<uint64_t, std::string>> ranked;
  for (const auto& [key, s] : why.overruns) {
    const uint64_t allowed = tallies_of(static_cast<Finding::Kind>(key.first))[key.second].allowed_ns;
    ranked.emplace_back((s.max_ns - std::min(s.max_ns, allowed)) * s.instances,
                        overrun_text(key.first, key.second, s.max_ns, s.instances, of));
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [added, text] : ranked) explained_by.push_back(std::move(text));
  if (why.unexplained) {
    const std::string its = why.unexplained == 1 ? "its" : "their";
    explained_by.push_back(count_of(why.unexplained, "instance") +
                           (chain.quantitative ? " beyond even that bound by more than " + its + " cores lost in " + its
                                               : " over the bound with no assumption broken in " + its) +
                           " time: the analysis does not hold for this run (a bug in rtaccel's analysis)");
  }
  return explained_by;
}

json Check::summarise(uint64_t unexplained) {
  // The run as a whole: per piece of work its figures, and a sentence for
  // each that went over what it was allowed.
  json broken = json::array();
  auto tallies = [&](int kind, std::vector<Tally>& all, const char* allowed_key, bool keep_unused,
                     const std::function<void(size_t, json*)>& name) {
    json out = json::array();
    for (size_t i = 0; i < all.size(); ++i) {
      Tally& t = all[i];
      if (!t.count && !keep_unused) continue;
      json j = t.to_json(allowed_key);  // sorts took_ns
      if (t.over)
        broken.push_back(overrun_text(kind, i, t.took_ns.back(), t.over, " of " + std::to_string(t.count)));
      name(i, &j);
      out.push_back(std::move(j));
    }
    return out;
  };
  json cb_json = tallies(Finding::kCpu, callbacks, "wcet_us", true, [&](size_t cb, json* j) {
    (*j)["callback"] = w.callbacks[cb].name;
    (*j)["working_set_kb"] = w.callbacks[cb].working_set_bytes >> 10;
  });
  json seg_json = tallies(Finding::kSegment, segments, "wcet_us", false, [&](size_t s, json* j) {
    (*j)["callback"] = w.callbacks[segment_of[s].first].name;
    (*j)["segment"] = segment_of[s].second + 1;
  });
  // What each cpu-backend accelerator's core lost while its kernels ran over
  // their declared times, and in the whole run.
  std::map<size_t, CoreLoss> device_overrun_loss;
  std::vector<std::vector<bool>> device_counted;
  for (const Overrun& o : overruns)
    if (o.kind == Finding::kSegment)
      if (const auto [a, core] = device_core(o.what); core >= 0)
        device_overrun_loss[a] += in.cores->lost(core, o.begin_ns, o.end_ns, &device_counted);
  for (const auto& [a, loss] : device_overrun_loss)
    if (loss.total()) broken.push_back(device_loss_text(a, loss, ""));
  json request_json = tallies(Finding::kOverhead, requests, "epsilon_us", false, [&](size_t s, json* j) {
    (*j)["callback"] = w.callbacks[segment_of[s].first].name;
    (*j)["segment"] = segment_of[s].second + 1;
  });
  json hop_json = tallies(Finding::kHop, hops, "bound_us", false,
                          [&](size_t h, json* j) { (*j)["hop"] = plan.hops[h].name; });
  json legs_json = tallies(Finding::kLegs, legs, "bound_us", false, [&](size_t s, json* j) {
    (*j)["callback"] = w.callbacks[segment_of[s].first].name;
    (*j)["segment"] = segment_of[s].second + 1;
  });
  json off_json = tallies(Finding::kOffCore, off_core, "slack_us", false,
                          [&](size_t cb, json* j) { (*j)["callback"] = w.callbacks[cb].name; });
  json release_json = tallies(Finding::kRelease, releases, "jitter_us", false,
                              [&](size_t t, json* j) { (*j)["timer"] = w.callbacks[plan.timers[t]].name; });
  json core_json = json::array();
  std::set<int> executor_cores;
  for (const auto& ex : w.executors) executor_cores.insert(ex.core);
  for (int core : executor_cores) {
    const CoreLoss loss = in.cores->lost(core);
    if (loss.total()) broken.push_back(loss_text(core, loss, " in the run"));
    core_json.push_back({{"core", core},
                         {"irq_ms", static_cast<double>(loss.irq_ns) / 1e6},
                         {"softirq_ms", static_cast<double>(loss.softirq_ns) / 1e6},
                         {"steal_ms", static_cast<double>(loss.steal_ns) / 1e6}});
  }
  json device_json = json::array();
  for (size_t a = 0; a < w.accelerators.size(); ++a) {
    if (w.accelerators[a].backend != workload::Backend::kCpu) continue;
    const CoreLoss loss = in.cores->lost(w.accelerators[a].core);
    const CoreLoss& over = device_overrun_loss[a];
    device_json.push_back({{"accelerator", w.accelerators[a].name},
                           {"core", w.accelerators[a].core},
                           {"irq_ms", static_cast<double>(loss.irq_ns) / 1e6},
                           {"softirq_ms", static_cast<double>(loss.softirq_ns) / 1e6},
                           {"steal_ms", static_cast<double>(loss.steal_ns) / 1e6},
                           {"lost_in_overruns_ms", static_cast<double>(over.total()) / 1e6}});
  }
  json speed = nullptr;
  if (in.speed && !in.speed->samples().empty()) {
    std::vector<double> ratios;
    for (const auto& [at, ratio] : in.speed->samples()) ratios.push_back(ratio);
    const double p50 = rtaccel_percentile_double(ratios.data(), ratios.size(), 0.5);  // sorts
    const double low = ratios.front();
    speed = {{"samples", ratios.size()}, {"slowest", low}, {"p50", p50}};
    if (const std::string slow = speed_text(low, " in the run"); !slow.empty()) broken.push_back(slow);
  }
  // In place (a stable sort takes a buffer of half of them): at one start,
  // overruns before instances, as they were found.
  if (findings)
    std::sort(findings->begin(), findings->end(), [](const Finding& a, const Finding& b) {
      return std::tie(a.begin_ns, a.kind, a.end_ns) < std::tie(b.begin_ns, b.kind, b.end_ns);
    });
  return {{"callbacks", std::move(cb_json)},
          {"segments", std::move(seg_json)},
          {"requests", std::move(request_json)},
          {"hops", std::move(hop_json)},
          {"remote_requests", std::move(legs_json)},
          {"releases", std::move(release_json)},
          {"off_core", std::move(off_json)},
          {"cores", std::move(core_json)},
          {"accelerator_cores", std::move(device_json)},
          {"speed", std::move(speed)},
          {"broken", std::move(broken)},
          {"trace_filled", std::move(trace_filled)},
          {"unexplained_violations", unexplained}};
}

}  // namespace

json check_assumptions(const MonitorInput& in, json* chains, std::vector<Finding>* findings) {
  return Check(in, chains, findings).run();
}

}  // namespace rtaccel::exec
