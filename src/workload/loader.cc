// Workload loader: YAML (yaml-cpp) -> validated rtaccel::workload::Workload.
//
// Two passes. The first reads every field with its type and range, reporting
// unknown, missing, duplicated and ill-typed keys where they are. The second
// resolves names and checks the workload as a whole (topics, chain paths,
// priorities, cores). Both passes keep going after an error so that a user
// fixes a file in one round.
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "rtaccel/workload.hpp"

#include "core/text_file.h"
#include "core/utf8.h"

namespace rtaccel::workload {
namespace {

constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kNsPerMs = 1000 * 1000;
// Durations are capped so that sums and products in the analysis stay far
// from uint64_t overflow; an hour is beyond any real-time deadline.
constexpr double kMaxDurationNs = 3600.0 * 1e9;
constexpr size_t kMaxNameLength = 64;
// Keys a workload leaves to its user, in any mapping: anchors for merge keys
// (`x-defaults: &cb {...}`), notes for other tools.
constexpr std::string_view kUserKeyPrefix = "x-";
// How deep merged mappings may merge in turn.
constexpr int kMaxMergeDepth = 16;

SourceLocation location_of(const YAML::Mark& mark) {
  if (mark.is_null()) return {};
  return {mark.line + 1, mark.column + 1};
}

SourceLocation location_of(const YAML::Node& node) {
  return node.IsDefined() ? location_of(node.Mark()) : SourceLocation{};
}

class Context {
 public:
  explicit Context(std::string file) : file_(std::move(file)) {}

  void error(SourceLocation where, std::string message) {
    errors_.push_back({file_, where, std::move(message)});
  }
  void error(const YAML::Node& node, std::string message) {
    error(location_of(node), std::move(message));
  }

  bool failed() const { return !errors_.empty(); }
  std::vector<Diagnostic> take_errors() { return std::move(errors_); }

 private:
  std::string file_;
  std::vector<Diagnostic> errors_;
};

std::string quoted(const YAML::Node& node) {
  if (node.IsNull()) return "nothing";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  std::string text = node.Scalar();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return "'" + text + "'";
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// Reads the keys of one YAML mapping. Every key a caller asks for becomes an
// allowed key; finish() reports the keys nobody asked for.
class Fields {
 public:
  Fields(Context& ctx, const YAML::Node& map, std::string what)
      : ctx_(ctx), map_(map), what_(std::move(what)) {
    if (!map_.IsMap()) {
      ctx_.error(map_, what_ + ": expected a mapping, got " + quoted(map_));
      valid_ = false;
      return;
    }
    std::vector<YAML::Node> merged;
    for (const auto& pair : map_) {
      if (!pair.first.IsScalar()) {
        ctx_.error(pair.first, what_ + ": keys must be plain words");
        continue;
      }
      if (is_merge_key(pair.first)) {
        merged.push_back(pair.second);
        continue;
      }
      const std::string& key = pair.first.Scalar();
      if (!seen_.emplace(key, std::make_pair(pair.first, pair.second)).second) {
        ctx_.error(pair.first, what_ + ": duplicate key '" + key + "'");
      }
    }
    for (const YAML::Node& from : merged) merge(from, 1);
  }

  Fields(const Fields&) = delete;
  Fields& operator=(const Fields&) = delete;

  bool valid() const { return valid_; }
  const std::string& what() const { return what_; }
  SourceLocation where() const { return location_of(map_); }

  // The value of `key`, or an undefined node. Reports a missing required key.
  YAML::Node get(const std::string& key, bool required) {
    if (std::find(allowed_.begin(), allowed_.end(), key) == allowed_.end()) allowed_.push_back(key);
    if (!valid_) return YAML::Node(YAML::NodeType::Undefined);
    auto it = seen_.find(key);
    if (it == seen_.end()) {
      if (required) ctx_.error(map_, what_ + ": missing required key '" + key + "'");
      return YAML::Node(YAML::NodeType::Undefined);
    }
    return it->second.second;
  }

  std::optional<std::string> name(const std::string& key, bool required) {
    YAML::Node node = get(key, required);
    if (!node.IsDefined()) return std::nullopt;
    if (!node.IsScalar() || !valid_name(node.Scalar())) {
      ctx_.error(node, what_ + ": " + key + " must be a name of letters, digits, '_', '-' or '.' "
                       "(at most 64), got " + quoted(node));
      return std::nullopt;
    }
    return node.Scalar();
  }

  std::optional<long long> integer(const std::string& key, bool required, long long min,
                                   long long max) {
    YAML::Node node = get(key, required);
    if (!node.IsDefined()) return std::nullopt;
    long long value = 0;
    if (!node.IsScalar() || !YAML::convert<long long>::decode(node, value)) {
      ctx_.error(node, what_ + ": " + key + " must be an integer, got " + quoted(node));
      return std::nullopt;
    }
    if (value < min || value > max) {
      ctx_.error(node, what_ + ": " + key + " must be between " + std::to_string(min) + " and " +
                           std::to_string(max) + ", got " + std::to_string(value));
      return std::nullopt;
    }
    return value;
  }

  // A duration given in `unit_ns` units (ms or us), returned in ns.
  std::optional<uint64_t> duration(const std::string& key, bool required, uint64_t unit_ns,
                                   bool allow_zero) {
    YAML::Node node = get(key, required);
    if (!node.IsDefined()) return std::nullopt;
    double value = 0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, value) || !std::isfinite(value)) {
      ctx_.error(node, what_ + ": " + key + " must be a number, got " + quoted(node));
      return std::nullopt;
    }
    double ns = value * static_cast<double>(unit_ns);
    if (ns < 0 || (!allow_zero && ns < 1.0) || ns > kMaxDurationNs) {
      ctx_.error(node, what_ + ": " + key + " must be " + (allow_zero ? "at least 0" : "positive") +
                           " and at most one hour, got " + node.Scalar());
      return std::nullopt;
    }
    return static_cast<uint64_t>(std::llround(ns));
  }

  std::optional<bool> boolean(const std::string& key, bool required) {
    YAML::Node node = get(key, required);
    if (!node.IsDefined()) return std::nullopt;
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
      ctx_.error(node, what_ + ": " + key + " must be true or false, got " + quoted(node));
      return std::nullopt;
    }
    return value;
  }

  // One of `choices`; returns its index.
  std::optional<size_t> choice(const std::string& key, bool required,
                               const std::vector<std::string>& choices) {
    YAML::Node node = get(key, required);
    if (!node.IsDefined()) return std::nullopt;
    if (node.IsScalar()) {
      for (size_t i = 0; i < choices.size(); ++i) {
        if (node.Scalar() == choices[i]) return i;
      }
    }
    std::string list;
    for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
    ctx_.error(node, what_ + ": " + key + " must be one of " + list + ", got " + quoted(node));
    return std::nullopt;
  }

  // A list; an undefined node when absent or not a list (reported).
  YAML::Node list(const std::string& key, bool required) {
    YAML::Node node = get(key, required);
    if (node.IsDefined() && !node.IsSequence()) {
      ctx_.error(node, what_ + ": " + key + " must be a list, got " + quoted(node));
      return YAML::Node(YAML::NodeType::Undefined);
    }
    return node;
  }

  // A list of names (topics, callbacks) with where each was written; items
  // that are not names are reported and skipped.
  std::vector<std::pair<std::string, SourceLocation>> names(const std::string& key, bool required,
                                                            const char* kind, bool allow_empty = false) {
    std::vector<std::pair<std::string, SourceLocation>> out;
    YAML::Node node = list(key, required);
    if (!node.IsDefined()) return out;
    if (node.size() == 0 && !allow_empty) ctx_.error(node, what_ + ": " + key + " is empty");
    for (const auto& item : node) {
      if (!item.IsScalar() || !valid_name(item.Scalar())) {
        ctx_.error(item, what_ + ": " + key + " must hold " + kind + " names, got " + quoted(item));
      } else {
        out.emplace_back(item.Scalar(), location_of(item));
      }
    }
    return out;
  }

  void finish() {
    if (!valid_) return;
    std::set<std::string> allowed(allowed_.begin(), allowed_.end());
    for (const auto& [key, nodes] : seen_) {
      if (allowed.count(key) || key.starts_with(kUserKeyPrefix)) continue;
      const YAML::Node& node = nodes.first;
      std::string list;
      for (const std::string& k : allowed_) list += (list.empty() ? "" : ", ") + k;
      ctx_.error(node, what_ + ": unknown key '" + key + "' (expected " + list + ")");
    }
  }

 private:
  // YAML's merge key (`<<: *defaults`, a plain `<<`, not a quoted one),
  // which yaml-cpp leaves to its user: a mapping, or a list of them, whose
  // keys this mapping takes where it does not have them; of a list, the
  // earlier mapping's keys win. Merged mappings may merge in turn.
  static bool is_merge_key(const YAML::Node& key) { return key.Scalar() == "<<" && key.Tag() == "?"; }

  void merge(const YAML::Node& from, int depth) {
    if (depth > kMaxMergeDepth) {
      ctx_.error(from, what_ + ": merge keys ('<<') nested more than " + std::to_string(kMaxMergeDepth) +
                           " deep");
      return;
    }
    if (from.IsSequence()) {
      for (const auto& item : from) {
        if (!item.IsMap()) {
          ctx_.error(item, what_ + ": '<<' must merge mappings, got " + quoted(item));
          continue;
        }
        merge(item, depth);
      }
      return;
    }
    if (!from.IsMap()) {
      ctx_.error(from, what_ + ": '<<' must merge a mapping or a list of mappings, got " + quoted(from));
      return;
    }
    // A mapping merged before adds nothing: its keys are here, or
    // overridden. Aliases could otherwise have a mapping merged an
    // exponential number of times, or merge itself.
    for (const YAML::Node& done : merged_) {
      if (done.is(from)) return;
    }
    merged_.push_back(from);
    std::vector<YAML::Node> nested;
    for (const auto& pair : from) {
      if (!pair.first.IsScalar()) {
        ctx_.error(pair.first, what_ + ": keys must be plain words");
      } else if (is_merge_key(pair.first)) {
        nested.push_back(pair.second);
      } else {
        seen_.emplace(pair.first.Scalar(), std::make_pair(pair.first, pair.second));
      }
    }
    for (const YAML::Node& inner : nested) merge(inner, depth + 1);
  }

  Context& ctx_;
  YAML::Node map_;
  std::string what_;
  bool valid_ = true;
  std::map<std::string, std::pair<YAML::Node, YAML::Node>> seen_;  // key -> (key, value)
  std::vector<YAML::Node> merged_;                                  // mappings merged so far
  std::vector<std::string> allowed_;
};

// What the first pass keeps besides the workload: names as written, with their
// positions, until the second pass resolves them.
struct PendingSegment {
  std::string accelerator;
  SourceLocation where;
};
struct PendingCallback {
  std::string executor;
  SourceLocation executor_where;
  std::vector<PendingSegment> segments;
  SourceLocation trigger_where;
  std::vector<std::pair<std::string, SourceLocation>> reads;
};
struct PendingName {
  std::string name;
  SourceLocation where;
};
struct PendingLink {
  std::vector<std::pair<std::string, SourceLocation>> between;
  SourceLocation where;
};
struct PendingChain {
  std::vector<std::pair<std::string, SourceLocation>> path;
  std::optional<uint64_t> period_ns;
  std::optional<uint64_t> deadline_ns;
  SourceLocation priority_where;
  bool priority_valid = false;
};

class Loader {
 public:
  Loader(Context& ctx, const LoadOptions& options) : ctx_(ctx), options_(options) {}

  std::optional<Workload> load(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) {
      ctx_.error(SourceLocation{}, "the workload is empty");
      return std::nullopt;
    }
    Fields top(ctx_, root, "workload");
    if (!top.valid()) return std::nullopt;
    if (auto v = top.integer("version", true, 0, 1 << 30); v && *v != 1) {
      ctx_.error(top.get("version", true), "workload: version " + std::to_string(*v) +
                                               " is not supported (this rtaccel reads version 1)");
    }
    if (auto name = top.name("name", true)) workload_.name = *name;
    read_list(top.list("nodes", false), "nodes", [&](const YAML::Node& n, size_t i) {
      read_node(n, i);
    });
    read_list(top.list("links", false), "links", [&](const YAML::Node& n, size_t i) {
      read_link(n, i);
    });
    read_platform(top.get("platform", false));
    read_server(top.get("server", false));
    read_list(top.list("executors", true), "executors", [&](const YAML::Node& n, size_t i) {
      read_executor(n, i);
    });
    read_list(top.list("callbacks", true), "callbacks", [&](const YAML::Node& n, size_t i) {
      read_callback(n, i);
    });
    read_list(top.list("chains", true), "chains", [&](const YAML::Node& n, size_t i) {
      read_chain(n, i);
    });
    gang_scheduling_ = top.boolean("gang_scheduling", false);
    read_list(top.list("gangs", false), "gangs", [&](const YAML::Node& n, size_t i) {
      read_gang(n, i);
    });
    read_isolation(top.get("isolation", false));
    top.finish();

    // Cross-checks run even after field errors, skipping what could not be
    // read, so that one round shows every problem.
    check_whole();
    if (ctx_.failed()) return std::nullopt;
    return std::move(workload_);
  }

 private:
  template <typename Fn>
  void read_list(const YAML::Node& list, const char* what, Fn&& fn) {
    if (!list.IsDefined()) return;
    if (list.size() == 0) ctx_.error(list, std::string("workload: ") + what + " is empty");
    for (size_t i = 0; i < list.size(); ++i) fn(list[i], i);
  }

  static std::string item(const char* kind, size_t index, const YAML::Node& node) {
    if (node.IsMap()) {
      YAML::Node name = node["name"];
      if (name.IsDefined() && name.IsScalar() && valid_name(name.Scalar())) {
        return std::string(kind) + " '" + name.Scalar() + "'";
      }
    }
    return std::string(kind) + " #" + std::to_string(index + 1);
  }

  void read_platform(const YAML::Node& node) {
    if (!node.IsDefined()) return;
    Fields f(ctx_, node, "platform");
    if (!f.valid()) return;
    if (auto cores = f.integer("cores", false, 1, 4096)) declared_cores_ = static_cast<int>(*cores);
    communication_ns_ = f.duration("communication_us", false, kNsPerUs, true);
    if (auto jitter = f.duration("release_jitter_us", false, kNsPerUs, true)) workload_.release_jitter_ns = *jitter;
    if (auto delta = f.duration("gang_preemption_us", false, kNsPerUs, true)) workload_.gang_preemption_ns = *delta;
    YAML::Node list = f.list("accelerators", false);
    if (list.IsDefined()) {
      for (size_t i = 0; i < list.size(); ++i) read_accelerator(list[i], i);
    }
    f.finish();
  }

  void read_node(const YAML::Node& node, size_t index) {
    Fields f(ctx_, node, item("node", index, node));
    if (!f.valid()) return;
    Node n;
    n.where = f.where();
    if (auto name = f.name("name", true)) n.name = *name;
    f.finish();
    workload_.nodes.push_back(std::move(n));
  }

  void read_link(const YAML::Node& node, size_t index) {
    Fields f(ctx_, node, item("link", index, node));
    if (!f.valid()) return;
    Link l;
    PendingLink p;
    l.where = p.where = f.where();
    if (auto name = f.name("name", true)) l.name = *name;
    YAML::Node between = f.get("between", false);
    p.between = f.names("between", true, "node");
    if (between.IsDefined() && between.IsSequence() && between.size() != 2)
      ctx_.error(between, f.what() + ": between must name two nodes");
    std::vector<std::string> transports;
    for (int i = 0; rtaccel_net_transport_at(i); ++i) transports.push_back(rtaccel_net_transport_at(i)->name);
    if (auto t = f.choice("transport", true, transports)) l.transport = rtaccel_net_transport_at(static_cast<int>(*t));
    if (auto mbps = f.integer("rate_mbps", true, 1, 10000000)) l.rate_bytes_per_s = static_cast<uint64_t>(*mbps) * 125000;
    if (auto chunk = f.integer("chunk_kb", false, 1, 16384)) l.chunk_bytes = static_cast<uint64_t>(*chunk) << 10;
    if (auto window = f.integer("window_kb", false, 1, 1 << 20)) l.window_bytes = static_cast<uint64_t>(*window) << 10;
    if (auto cost = f.duration("per_chunk_us", false, kNsPerUs, true)) l.per_chunk_ns = *cost;
    if (auto kernel = f.integer("kernel_ns_per_kb", false, 0, 1000000)) l.kernel_ns_per_kb = static_cast<uint64_t>(*kernel);
    f.finish();
    workload_.links.push_back(std::move(l));
    pending_links_.push_back(std::move(p));
  }

  // The node an executor or accelerator names, for the second pass.
  PendingName node_name(Fields& f) {
    PendingName p;
    if (auto name = f.name("node", false)) {
      p.name = *name;
      p.where = location_of(f.get("node", false));
    }
    return p;
  }

  void read_accelerator(const YAML::Node& node, size_t index) {
    Fields f(ctx_, node, item("accelerator", index, node));
    if (!f.valid()) return;
    Accelerator a;
    a.where = f.where();
    if (auto name = f.name("name", true)) a.name = *name;
    if (auto b = f.choice("backend", true, {std::begin(kBackendNames), std::end(kBackendNames)}))
      a.backend = static_cast<Backend>(*b);
    // Only the cpu backend turns a core into the device.
    if (auto core = f.integer("core", a.backend == Backend::kCpu, 0, 4095)) a.core = static_cast<int>(*core);
    else a.core = -1;
    if (auto levels = f.integer("priority_levels", false, 1, 64)) a.priority_levels = static_cast<int>(*levels);
    if (auto kappa = f.duration("preemption_cost_us", false, kNsPerUs, true)) a.preemption_cost_ns = *kappa;
    pending_accelerator_nodes_.push_back(node_name(f));
    if (a.backend == Backend::kOpenCl && a.priority_levels != 1) {
      ctx_.error(f.get("priority_levels", false), f.what() +
                 ": the opencl backend has one in-order, non-preemptive queue; priority_levels must be 1");
    }
    f.finish();
    workload_.accelerators.push_back(std::move(a));
  }

  void read_server(const YAML::Node& node) {
    if (!node.IsDefined()) return;
    Fields f(ctx_, node, "server");
    if (!f.valid()) return;
    Server s;
    s.where = f.where();
    if (auto core = f.integer("core", true, 0, 4095)) s.core = static_cast<int>(*core);
    if (auto eps = f.duration("overhead_us", true, kNsPerUs, true)) s.overhead_ns = *eps;
    f.finish();
    workload_.server = s;
  }

  void read_executor(const YAML::Node& node, size_t index) {
    Fields f(ctx_, node, item("executor", index, node));
    if (!f.valid()) return;
    Executor e;
    e.where = f.where();
    if (auto name = f.name("name", true)) e.name = *name;
    if (auto core = f.integer("core", true, 0, 4095)) e.core = static_cast<int>(*core);
    if (auto prio = f.integer("priority", true, 1, 99)) e.priority = static_cast<int>(*prio);
    if (auto threads = f.integer("threads", false, 1, 1024)) e.threads = static_cast<int>(*threads);
    pending_executor_nodes_.push_back(node_name(f));
    f.finish();
    workload_.executors.push_back(std::move(e));
  }

  void read_gang(const YAML::Node& node, size_t index) {
    Fields f(ctx_, node, item("gang", index, node));
    if (!f.valid()) return;
    Gang g;
    g.where = f.where();
    if (auto name = f.name("name", true)) {
      // The gang lock keeps names of up to 31 characters.
      if (name->size() > 31) ctx_.error(f.get("name", true), f.what() + ": name must be at most 31 characters");
      else g.name = *name;
    }
    if (auto prio = f.integer("priority", true, 1, 99)) g.priority = static_cast<int>(*prio);
    if (auto mbps = f.integer("threshold_mbps", false, 0, 1 << 30)) g.threshold_mbps = static_cast<uint32_t>(*mbps);
    pending_gangs_.push_back(f.names("executors", true, "executor"));
    f.finish();
    workload_.gangs.push_back(std::move(g));
  }

  void read_trigger(const YAML::Node& node, const std::string& what, Callback& cb) {
    Fields f(ctx_, node, what + ": trigger");
    if (!f.valid()) return;
    // Count the kinds present, valid or not, so that a bad value is reported
    // once, as itself.
    const int kinds = f.get("timer_ms", false).IsDefined() + f.get("topic", false).IsDefined() +
                      f.get("topics", false).IsDefined();
    if (auto timer = f.duration("timer_ms", false, kNsPerMs, false)) cb.trigger.timer_ns = *timer;
    if (auto name = f.name("topic", false)) cb.trigger.topics.push_back(*name);
    for (const auto& [topic, where] : f.names("topics", false, "topic")) {
      auto& topics = cb.trigger.topics;
      if (std::find(topics.begin(), topics.end(), topic) != topics.end()) {
        ctx_.error(where, what + ": trigger: topic '" + topic + "' is listed twice");
      } else {
        topics.push_back(topic);
      }
    }
    if (kinds != 1) {
      ctx_.error(node, what + ": trigger needs exactly one of timer_ms, topic or topics");
    }
    const YAML::Node release = f.get("release", false);
    if (auto r = f.choice("release", false, {"together", "unaligned"}))
      cb.trigger.release_group = *r == 0 ? Trigger::kRunStart : Trigger::kUnaligned;
    if (release.IsDefined() && !cb.trigger.timer_ns && kinds == 1)
      ctx_.error(release, what + ": trigger: release is a timer's: a subscription starts when its message comes");
    f.finish();
  }

  void read_isolation(const YAML::Node& node) {
    if (!node.IsDefined()) return;
    Fields f(ctx_, node, "isolation");
    if (!f.valid()) return;
    Isolation& iso = workload_.isolation;
    iso.declared = true;
    iso.where = f.where();
    YAML::Node regulator = f.get("regulator", false);
    if (regulator.IsDefined()) {
      Fields r(ctx_, regulator, "isolation: regulator");
      if (r.valid()) {
        YAML::Node cores = r.list("cores", false);
        if (cores.IsDefined()) {
          if (cores.size() == 0) ctx_.error(cores, "isolation: regulator: cores is empty");
          for (const auto& item : cores) {
            long long core = -1;
            if (!item.IsScalar() || !YAML::convert<long long>::decode(item, core) || core < 0 || core > 4095) {
              ctx_.error(item, "isolation: regulator: cores must hold core numbers (0..4095), got " + quoted(item));
            } else if (std::find(iso.cores.begin(), iso.cores.end(), core) != iso.cores.end()) {
              ctx_.error(item, "isolation: regulator: core " + std::to_string(core) + " is listed twice");
            } else {
              iso.cores.push_back(static_cast<int>(core));
              pending_isolation_cores_.push_back(location_of(item));
            }
          }
        }
        // The regulator's own limits (rtaccel-isolate regulate).
        if (auto period = r.duration("period_us", false, kNsPerUs, false)) {
          iso.period_ns = *period;
          if (iso.period_ns < 100 * kNsPerUs || iso.period_ns > 1000 * kNsPerMs)
            ctx_.error(r.get("period_us", false), "isolation: regulator: period_us must be between 100 and 1000000");
        }
        if (auto t = r.integer("threshold_mbps", false, 0, 1000000)) iso.threshold_mbps = static_cast<uint32_t>(*t);
        if (auto peak = r.integer("be_peak_mbps", false, 1, 1000000)) iso.be_peak_mbps = static_cast<uint32_t>(*peak);
        if (auto cost = r.duration("cost_us", false, kNsPerUs, true)) iso.cost_ns = *cost;
        if (iso.cost_ns >= iso.period_ns)
          ctx_.error(regulator, "isolation: regulator: cost_us must be less than period_us");
        r.finish();
      }
    }
    YAML::Node lock = f.get("bandwidth_lock", false);
    if (lock.IsDefined()) {
      Fields b(ctx_, lock, "isolation: bandwidth_lock");
      if (b.valid()) {
        pending_bwlock_chains_ = b.names("chains", true, "chain");
        if (auto t = b.integer("threshold_mbps", false, 0, 1000000)) iso.bwlock_threshold_mbps = static_cast<uint32_t>(*t);
        b.finish();
      }
    }
    f.finish();
  }

  void read_memory(const YAML::Node& node, const std::string& what, Callback& cb) {
    Fields f(ctx_, node, what + ": memory");
    if (!f.valid()) return;
    // At most 1 GiB: an executor allocates and locks it before the run.
    if (auto kb = f.integer("working_set_kb", true, 4, 1 << 20)) cb.working_set_bytes = static_cast<uint64_t>(*kb) << 10;
    if (auto pattern = f.choice("pattern", false, {"stream", "random"})) cb.pattern = static_cast<MemoryPattern>(*pattern);
    f.finish();
  }

  void read_callback(const YAML::Node& node, size_t index) {
    Fields f(ctx_, node, item("callback", index, node));
    if (!f.valid()) return;
    Callback cb;
    PendingCallback pending;
    cb.where = f.where();
    if (auto name = f.name("name", true)) cb.name = *name;
    if (auto ex = f.name("executor", true)) {
      pending.executor = *ex;
      pending.executor_where = location_of(f.get("executor", true));
    }
    YAML::Node trigger = f.get("trigger", true);
    if (trigger.IsDefined()) {
      pending.trigger_where = location_of(trigger);
      read_trigger(trigger, f.what(), cb);
    }
    if (auto topic = f.name("publishes", false)) cb.publishes = *topic;
    if (auto kb = f.integer("message_kb", false, 0, 1 << 20)) {
      cb.message_bytes = static_cast<uint64_t>(*kb) << 10;
      if (cb.publishes.empty()) ctx_.error(f.get("message_kb", false), f.what() + ": message_kb without publishes");
    }
    pending.reads = f.names("reads", false, "topic", /*allow_empty=*/true);
    for (const auto& read : pending.reads) cb.reads.push_back(read.first);
    if (auto cpu = f.duration("cpu_us", true, kNsPerUs, true)) cb.cpu_ns = *cpu;
    if (auto work = f.duration("work_us", false, kNsPerUs, true)) {
      cb.work_ns = *work;
      if (cb.work_ns > cb.cpu_ns)
        ctx_.error(f.get("work_us", false), f.what() + ": work_us (" + std::to_string(cb.work_ns / kNsPerUs) +
                                                 ") is more than cpu_us, its WCET (" +
                                                 std::to_string(cb.cpu_ns / kNsPerUs) + ")");
    }
    YAML::Node segments = f.list("segments", false);
    if (segments.IsDefined()) {
      for (size_t i = 0; i < segments.size(); ++i) {
        Fields s(ctx_, segments[i], f.what() + ": segment #" + std::to_string(i + 1));
        if (!s.valid()) continue;
        Segment seg;
        seg.where = s.where();
        PendingSegment ps;
        if (auto acc = s.name("accelerator", true)) {
          ps.accelerator = *acc;
          ps.where = location_of(s.get("accelerator", true));
        }
        if (auto service = s.name("service", true)) seg.service = *service;
        if (auto wcet = s.duration("wcet_us", true, kNsPerUs, false)) seg.wcet_ns = *wcet;
        if (auto kb = s.integer("request_kb", false, 0, 1 << 20)) seg.request_bytes = static_cast<uint64_t>(*kb) << 10;
        if (auto kb = s.integer("response_kb", false, 0, 1 << 20)) seg.response_bytes = static_cast<uint64_t>(*kb) << 10;
        s.finish();
        cb.segments.push_back(std::move(seg));
        pending.segments.push_back(std::move(ps));
      }
    }
    if (auto wait = f.choice("wait", false, {"suspend", "spin"})) cb.wait = static_cast<WaitMode>(*wait);
    YAML::Node memory = f.get("memory", false);
    if (memory.IsDefined()) read_memory(memory, f.what(), cb);
    f.finish();
    workload_.callbacks.push_back(std::move(cb));
    pending_callbacks_.push_back(std::move(pending));
  }

  void read_chain(const YAML::Node& node, size_t index) {
    Fields f(ctx_, node, item("chain", index, node));
    if (!f.valid()) return;
    Chain chain;
    PendingChain pending;
    chain.where = f.where();
    if (auto name = f.name("name", true)) chain.name = *name;
    if (auto prio = f.integer("priority", true, -1000000, 1000000)) {
      chain.priority = static_cast<int>(*prio);
      pending.priority_valid = true;
    }
    pending.priority_where = location_of(f.get("priority", false));
    pending.path = f.names("path", true, "callback");
    pending.period_ns = f.duration("period_ms", false, kNsPerMs, false);
    pending.deadline_ns = f.duration("deadline_ms", false, kNsPerMs, false);
    if (auto critical = f.boolean("critical", false)) chain.critical = *critical;
    f.finish();
    workload_.chains.push_back(std::move(chain));
    pending_chains_.push_back(std::move(pending));
  }

  // Second pass: names, topics, priorities and cores across the workload.
  void check_whole() {
    auto accelerators = index_names(workload_.accelerators, "accelerator");
    auto executors = index_names(workload_.executors, "executor");
    auto callbacks = index_names(workload_.callbacks, "callback");
    index_names(workload_.chains, "chain");
    check_nodes(index_names(workload_.nodes, "node"));
    index_names(workload_.links, "link");
    check_cores();
    workload_.communication_ns = communication_ns_ ? *communication_ns_ : (workload_.server ? workload_.server->overhead_ns : 0);
    const auto publisher = index_topics();
    resolve_callbacks(executors, publisher, accelerators);
    check_crossings(publisher, accelerators);
    std::vector<bool> in_chain(workload_.callbacks.size(), false);
    std::map<int, size_t> priorities;
    for (size_t c = 0; c < workload_.chains.size(); ++c) resolve_chain(c, callbacks, priorities, in_chain);
    check_gangs(executors);
    check_isolation();
    // After other errors a chain may be missing, so this would only mislead.
    for (size_t i = 0; i < workload_.callbacks.size() && !ctx_.failed(); ++i) {
      if (!in_chain[i]) {
        ctx_.error(workload_.callbacks[i].where, "callback '" + workload_.callbacks[i].name +
                                              "' is in no chain; put it in one (a best-effort chain with a low "
                                              "priority will do) so that its priority and interference are known");
      }
    }
  }

  void check_isolation() {
    Isolation& iso = workload_.isolation;
    for (size_t i = 0; i < iso.cores.size(); ++i)
      if (iso.cores[i] >= workload_.cores)
        ctx_.error(pending_isolation_cores_[i], "isolation: regulator: core " + std::to_string(iso.cores[i]) +
                                                    " does not exist: there are " + std::to_string(workload_.cores));
    for (const auto& pending : pending_bwlock_chains_) {
      const std::string& name = pending.first;  // a plain name: clang's lambdas take no structured binding
      const SourceLocation& where = pending.second;
      auto it = std::find_if(workload_.chains.begin(), workload_.chains.end(),
                             [&](const Chain& c) { return c.name == name; });
      if (it == workload_.chains.end()) {
        ctx_.error(where, "isolation: bandwidth_lock: chain '" + name + "' is not defined");
        continue;
      }
      const auto c = static_cast<size_t>(it - workload_.chains.begin());
      if (std::find(iso.bwlock_chains.begin(), iso.bwlock_chains.end(), c) != iso.bwlock_chains.end())
        ctx_.error(where, "isolation: bandwidth_lock: chain '" + name + "' is listed twice");
      else
        iso.bwlock_chains.push_back(c);
    }
  }

  // Name -> index of ITEMS, each name once.
  template <typename Items>
  std::map<std::string, size_t> index_names(const Items& items, const char* kind) {
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].name.empty()) continue;  // already reported
      auto [it, fresh] = index.emplace(items[i].name, i);
      if (!fresh) {
        ctx_.error(items[i].where, std::string(kind) + " '" + items[i].name + "' is defined twice (first at line " +
                                       std::to_string(items[it->second].where.line) + ")");
      }
    }
    return index;
  }

  // Every core named exists, and a cpu accelerator's core (its device) is
  // nobody else's.
  void check_cores() {
    const long online = sysconf(_SC_NPROCESSORS_CONF);
    const int machine =
        options_.machine_cores > 0 ? options_.machine_cores : static_cast<int>(online > 0 ? online : 1);
    workload_.cores = declared_cores_ ? *declared_cores_ : machine;
    const std::string cores_text =
        std::to_string(workload_.cores) + (declared_cores_ ? " (platform.cores)" : " on this machine");
    auto check_core = [&](int core, SourceLocation where, const std::string& what) {
      if (core >= workload_.cores)
        ctx_.error(where, what + ": core " + std::to_string(core) + " does not exist: there are " + cores_text);
    };
    std::map<int, size_t> device_cores;  // core -> cpu accelerator using it
    for (size_t i = 0; i < workload_.accelerators.size(); ++i) {
      const Accelerator& a = workload_.accelerators[i];
      if (a.backend != Backend::kCpu) continue;
      check_core(a.core, a.where, "accelerator '" + a.name + "'");
      auto [it, fresh] = device_cores.emplace(a.core, i);
      if (!fresh) {
        ctx_.error(a.where, "accelerator '" + a.name + "': core " + std::to_string(a.core) +
                                " is already the device of accelerator '" + workload_.accelerators[it->second].name + "'");
      }
    }
    if (workload_.server) check_core(workload_.server->core, workload_.server->where, "server");
    for (const Executor& e : workload_.executors) {
      check_core(e.core, e.where, "executor '" + e.name + "'");
      if (auto it = device_cores.find(e.core); it != device_cores.end()) {
        ctx_.error(e.where, "executor '" + e.name + "': core " + std::to_string(e.core) +
                                " is the device of accelerator '" + workload_.accelerators[it->second].name +
                                "' (cpu backend); give the executor another core");
      }
    }
  }

  // Topic -> the one callback that publishes it.
  std::map<std::string, size_t> index_topics() {
    std::map<std::string, size_t> publisher;
    for (size_t i = 0; i < workload_.callbacks.size(); ++i) {
      const Callback& cb = workload_.callbacks[i];
      if (cb.publishes.empty()) continue;
      auto [it, fresh] = publisher.emplace(cb.publishes, i);
      if (!fresh) {
        ctx_.error(cb.where, "callback '" + cb.name + "': topic '" + cb.publishes +
                                 "' is already published by callback '" + workload_.callbacks[it->second].name + "'");
      }
    }
    return publisher;
  }

  // Each callback's executor and accelerators by name; every topic it
  // subscribes to or reads is published, and not by itself.
  void resolve_callbacks(const std::map<std::string, size_t>& executors,
                         const std::map<std::string, size_t>& publisher,
                         const std::map<std::string, size_t>& accelerators) {
    for (size_t i = 0; i < workload_.callbacks.size(); ++i) {
      Callback& cb = workload_.callbacks[i];
      PendingCallback& p = pending_callbacks_[i];
      const std::string what = "callback '" + cb.name + "'";
      if (auto it = executors.find(p.executor); it != executors.end()) {
        cb.executor = it->second;
      } else if (!p.executor.empty()) {
        ctx_.error(p.executor_where, what + ": no executor named '" + p.executor + "'");
      }
      for (const std::string& topic : cb.trigger.topics) {
        if (auto it = publisher.find(topic); it == publisher.end()) {
          ctx_.error(p.trigger_where, what + ": topic '" + topic + "' is published by no callback");
        } else if (it->second == i) {
          ctx_.error(p.trigger_where, what + ": triggers itself through topic '" + topic + "'");
        }
      }
      for (const auto& [topic, where] : p.reads) {
        if (!publisher.count(topic)) ctx_.error(where, what + ": reads topic '" + topic + "', published by no callback");
      }
      for (size_t s = 0; s < cb.segments.size(); ++s) {
        const PendingSegment& ps = p.segments[s];
        if (auto it = accelerators.find(ps.accelerator); it != accelerators.end()) {
          cb.segments[s].accelerator = it->second;
        } else if (!ps.accelerator.empty()) {
          ctx_.error(ps.where, what + ": no accelerator named '" + ps.accelerator + "'");
        }
      }
      if (!cb.segments.empty() && !workload_.server) {
        ctx_.error(cb.where, what + ": uses an accelerator, so the workload needs a server: {core, overhead_us}");
      }
    }
  }

  // Chain C: a priority of its own, a path of callbacks each triggered by
  // the one before, and its period and deadline.
  void resolve_chain(size_t c, const std::map<std::string, size_t>& callbacks, std::map<int, size_t>& priorities,
                     std::vector<bool>& in_chain) {
    Chain& chain = workload_.chains[c];
    PendingChain& p = pending_chains_[c];
    const std::string what = "chain '" + chain.name + "'";
    if (!p.priority_valid) {
      // already reported
    } else if (auto [pit, fresh] = priorities.emplace(chain.priority, c); !fresh) {
      ctx_.error(p.priority_where, what + ": priority " + std::to_string(chain.priority) +
                                       " is already taken by chain '" + workload_.chains[pit->second].name +
                                       "' (chain priorities must be distinct)");
    }
    bool resolved = true;
    for (const auto& [name, where] : p.path) {
      auto it = callbacks.find(name);
      if (it == callbacks.end()) {
        ctx_.error(where, what + ": no callback named '" + name + "'");
        resolved = false;
        continue;
      }
      if (std::find(chain.path.begin(), chain.path.end(), it->second) != chain.path.end()) {
        ctx_.error(where, what + ": callback '" + name + "' appears twice in the path");
        resolved = false;
      }
      chain.path.push_back(it->second);
      in_chain[it->second] = true;
    }
    if (!resolved || chain.path.empty()) return;
    check_path_follows(chain, p, what);
    chain_timing(chain, p, what);
  }

  // Each callback of the path is triggered by the topic of the one before.
  void check_path_follows(const Chain& chain, const PendingChain& p, const std::string& what) {
    for (size_t k = 1; k < chain.path.size(); ++k) {
      const Callback& prev = workload_.callbacks[chain.path[k - 1]];
      const Callback& next = workload_.callbacks[chain.path[k]];
      const auto& topics = next.trigger.topics;
      const bool follows =
          !prev.publishes.empty() && std::find(topics.begin(), topics.end(), prev.publishes) != topics.end();
      if (!follows) {
        std::string published = prev.publishes.empty() ? "publishes nothing" : "publishes '" + prev.publishes + "'";
        std::string triggered = next.trigger.timer_ns ? "is triggered by its timer" : "is not triggered by that topic";
        ctx_.error(p.path[k].second, what + ": '" + next.name + "' does not follow '" + prev.name + "' ('" +
                                         prev.name + "' " + published + ", '" + next.name + "' " + triggered + ")");
      }
    }
  }

  // The period: the first callback's timer, or the chain's period_ms where
  // it has none; the deadline: the period unless given, never past it.
  void chain_timing(Chain& chain, const PendingChain& p, const std::string& what) {
    const Callback& first = workload_.callbacks[chain.path.front()];
    if (first.trigger.timer_ns) {
      chain.period_ns = first.trigger.timer_ns;
      if (p.period_ns && *p.period_ns != chain.period_ns) {
        ctx_.error(chain.where, what + ": period_ms disagrees with the timer of its first callback '" + first.name + "'");
      }
    } else if (p.period_ns) {
      chain.period_ns = *p.period_ns;
    } else {
      ctx_.error(chain.where, what + ": its first callback '" + first.name +
                                  "' has no timer, so the chain needs period_ms (the rate it is activated at)");
      return;
    }
    chain.deadline_ns = p.deadline_ns ? *p.deadline_ns : chain.period_ns;
    if (chain.deadline_ns > chain.period_ns) {
      ctx_.error(chain.where, what + ": deadline_ms exceeds the chain's period; rtaccel's analysis needs "
                                     "constrained deadlines (deadline <= period)");
    }
  }

  // Nodes, where executors and accelerators are, and the links.
  void check_nodes(const std::map<std::string, size_t>& nodes) {
    std::string listed;
    for (size_t i = 0; i < workload_.nodes.size(); ++i)  // in file order, each once
      if (auto it = nodes.find(workload_.nodes[i].name); it != nodes.end() && it->second == i)
        listed += (listed.empty() ? "" : ", ") + workload_.nodes[i].name;
    auto resolve = [&](const PendingName& p, const std::string& what, SourceLocation where) -> size_t {
      if (p.name.empty()) {
        if (!workload_.nodes.empty()) ctx_.error(where, what + ": the workload has nodes, so it needs node: (one of " + listed + ")");
        return 0;
      }
      auto it = nodes.find(p.name);
      if (it == nodes.end()) {
        ctx_.error(p.where, what + ": no node named '" + p.name + "'" +
                                (workload_.nodes.empty() ? " (the workload declares no nodes)" : " (nodes: " + listed + ")"));
        return 0;
      }
      return it->second;
    };
    for (size_t i = 0; i < workload_.executors.size(); ++i)
      workload_.executors[i].node = resolve(pending_executor_nodes_[i], "executor '" + workload_.executors[i].name + "'",
                                     workload_.executors[i].where);
    for (size_t i = 0; i < workload_.accelerators.size(); ++i)
      workload_.accelerators[i].node = resolve(pending_accelerator_nodes_[i],
                                        "accelerator '" + workload_.accelerators[i].name + "'", workload_.accelerators[i].where);
    // One accelerator server per workload, on the node of its accelerators.
    for (size_t i = 1; i < workload_.accelerators.size() && !workload_.nodes.empty(); ++i) {
      const Accelerator& a = workload_.accelerators[i];
      const Accelerator& first = workload_.accelerators[0];
      if (a.node != first.node) {
        ctx_.error(pending_accelerator_nodes_[i].where,
                   "accelerator '" + a.name + "' is on node '" + workload_.nodes[a.node].name + "', but accelerator '" +
                       first.name + "' is on node '" + workload_.nodes[first.node].name +
                       "': the workload's one server serves accelerators of one node");
      }
    }
    std::map<std::pair<size_t, size_t>, size_t> joined;
    for (size_t i = 0; i < workload_.links.size(); ++i) {
      Link& l = workload_.links[i];
      const PendingLink& p = pending_links_[i];
      const std::string what = "link '" + l.name + "'";
      if (p.between.size() != 2) {  // reported
        links_broken_ = true;
        continue;
      }
      bool known = true;
      size_t ends[2] = {0, 0};
      for (int k = 0; k < 2; ++k) {
        auto it = nodes.find(p.between[k].first);
        if (it == nodes.end()) {
          ctx_.error(p.between[k].second, what + ": no node named '" + p.between[k].first + "'" +
                                              (workload_.nodes.empty() ? " (the workload declares no nodes)" : ""));
          known = false;
        } else {
          ends[k] = it->second;
        }
      }
      if (!known) {
        links_broken_ = true;
        continue;
      }
      if (ends[0] == ends[1]) {
        ctx_.error(p.between[1].second, what + ": joins node '" + p.between[0].first + "' with itself");
        links_broken_ = true;
        continue;
      }
      l.a = ends[0];
      l.b = ends[1];
      auto key = std::minmax(l.a, l.b);
      if (auto [it, fresh] = joined.emplace(key, i); !fresh) {
        ctx_.error(l.where, what + ": nodes '" + p.between[0].first + "' and '" + p.between[1].first +
                                "' are already joined by link '" + workload_.links[it->second].name + "'");
      }
    }
  }

  // Topics and accelerator requests that cross nodes need a link. After a
  // link that could not be read, "no link joins" would only mislead.
  void check_crossings(const std::map<std::string, size_t>& publisher,
                       const std::map<std::string, size_t>& accelerators) {
    if (workload_.nodes.empty() || links_broken_) return;
    auto node = [&](size_t n) { return "'" + workload_.nodes[n].name + "'"; };
    for (size_t i = 0; i < workload_.callbacks.size(); ++i) {
      const Callback& cb = workload_.callbacks[i];
      const PendingCallback& p = pending_callbacks_[i];
      if (p.executor.empty() || cb.executor >= workload_.executors.size()) continue;
      const size_t here = workload_.node_of_callback(i);
      const std::string what = "callback '" + cb.name + "' on node " + node(here);
      auto check_topic = [&](const std::string& topic, SourceLocation where) {
        auto it = publisher.find(topic);
        if (it == publisher.end()) return;  // reported
        const size_t there = workload_.node_of_callback(it->second);
        if (there != here && workload_.link_between(here, there) < 0) {
          ctx_.error(where, what + ": topic '" + topic + "' comes from node " + node(there) +
                                ", and no link joins " + node(there) + " and " + node(here));
        }
      };
      for (const std::string& topic : cb.trigger.topics) check_topic(topic, p.trigger_where);
      for (const auto& [topic, where] : p.reads) check_topic(topic, where);
      for (size_t s = 0; s < cb.segments.size(); ++s) {
        if (!accelerators.count(p.segments[s].accelerator)) continue;  // reported
        const Accelerator& a = workload_.accelerators[cb.segments[s].accelerator];
        if (a.node != here && workload_.link_between(here, a.node) < 0) {
          ctx_.error(p.segments[s].where, what + ": accelerator '" + a.name + "' is on node " + node(a.node) +
                                              ", and no link joins " + node(here) + " and " + node(a.node));
        }
      }
    }
  }

  void check_gangs(const std::map<std::string, size_t>& executors) {
    std::map<std::string, size_t> names;
    std::map<size_t, size_t> gang_of;  // executor -> gang
    for (size_t g = 0; g < workload_.gangs.size(); ++g) {
      Gang& gang = workload_.gangs[g];
      const std::string what = "gang '" + gang.name + "'";
      if (!gang.name.empty()) {
        if (auto [it, fresh] = names.emplace(gang.name, g); !fresh) {
          ctx_.error(gang.where, what + " is defined twice (first at line " +
                                     std::to_string(workload_.gangs[it->second].where.line) + ")");
        }
      }
      for (const auto& [name, where] : pending_gangs_[g]) {
        auto it = executors.find(name);
        if (it == executors.end()) {
          ctx_.error(where, what + ": no executor named '" + name + "'");
          continue;
        }
        if (auto [git, fresh] = gang_of.emplace(it->second, g); !fresh) {
          ctx_.error(where, what + ": executor '" + name + "' is already in gang '" +
                                workload_.gangs[git->second].name + "' (an executor belongs to one gang)");
          continue;
        }
        gang.executors.push_back(it->second);
      }
    }
    // An executor left out of every gang becomes a gang of its own name.
    for (size_t e = 0; e < workload_.executors.size(); ++e) {
      const Executor& ex = workload_.executors[e];
      if (gang_of.count(e) || ex.name.empty()) continue;
      if (auto it = names.find(ex.name); it != names.end()) {
        ctx_.error(workload_.gangs[it->second].where,
                   "gang '" + ex.name + "': executor '" + ex.name +
                       "' is in no gang, so it forms a gang of its own name; rename one of them");
      } else if (ex.name.size() > 31 && (gang_scheduling_.value_or(false) || !workload_.gangs.empty())) {
        ctx_.error(ex.where, "executor '" + ex.name + "' is in no gang and its name, the name of its own gang, "
                             "is longer than 31 characters");
      }
    }
    workload_.gang_scheduling = gang_scheduling_ ? *gang_scheduling_ : !workload_.gangs.empty();
  }

  Context& ctx_;
  const LoadOptions& options_;
  Workload workload_;
  std::optional<bool> gang_scheduling_;
  std::vector<std::vector<std::pair<std::string, SourceLocation>>> pending_gangs_;
  std::vector<SourceLocation> pending_isolation_cores_;
  std::vector<std::pair<std::string, SourceLocation>> pending_bwlock_chains_;
  std::optional<int> declared_cores_;
  std::optional<uint64_t> communication_ns_;
  std::vector<PendingCallback> pending_callbacks_;
  std::vector<PendingChain> pending_chains_;
  std::vector<PendingName> pending_executor_nodes_, pending_accelerator_nodes_;
  std::vector<PendingLink> pending_links_;
  bool links_broken_ = false;
};

}  // namespace

namespace {

// Offset of the first byte that is not part of well-formed UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF included), or npos.
size_t first_invalid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const size_t n = rtaccel_utf8_sequence(bytes + i, text.size() - i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

SourceLocation location_of_offset(std::string_view text, size_t offset) {
  SourceLocation where{1, 1};
  for (size_t i = 0; i < offset; i++) {
    if (text[i] == '\n') {
      where.line++;
      where.column = 1;
    } else {
      where.column++;
    }
  }
  return where;
}

}  // namespace

namespace {

// Every diagnostic, in the file's order, one "file:line:col: message" a line.
Status refusal(std::vector<Diagnostic> errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.where.line, a.where.column) < std::tie(b.where.line, b.where.column);
  });
  std::string text;
  for (const Diagnostic& d : errors) text += (text.empty() ? "" : "\n") + d.to_string();
  return Status::invalid(text);
}

}  // namespace

Expected<Workload> load_string(std::string_view text, std::string_view file_name, const LoadOptions& options) {
  Context ctx{std::string(file_name)};
  // Messages quote the input; checking the encoding first keeps every one of
  // them valid text for whoever prints them (Python's str, JSON).
  if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", static_cast<unsigned char>(text[bad]));
    ctx.error(location_of_offset(text, bad),
              std::string("not UTF-8 text (byte ") + hex + "): a workload is a YAML file in UTF-8");
    return refusal(ctx.take_errors());
  }
  // YAML allows no control character but tab and line breaks; yaml-cpp
  // reports a NUL as a bad escape a line further on.
  const auto control = std::find_if(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f;
  });
  if (control != text.end()) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", static_cast<unsigned char>(*control));
    ctx.error(location_of_offset(text, static_cast<size_t>(control - text.begin())),
              std::string("a control character (byte ") + hex + "): a workload is a YAML text file");
    return refusal(ctx.take_errors());
  }
  YAML::Node root;
  try {
    // yaml-cpp limits nesting depth itself (DeepRecursion), so hostile input
    // cannot exhaust the stack here.
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    ctx.error(location_of(e.mark), "YAML syntax error: " + e.msg);
    return refusal(ctx.take_errors());
  } catch (const YAML::Exception& e) {
    ctx.error(location_of(e.mark), std::string("YAML error: ") + e.msg);
    return refusal(ctx.take_errors());
  }
  std::optional<Workload> workload;
  try {
    Loader loader(ctx, options);
    workload = loader.load(root);
  } catch (const YAML::Exception& e) {
    // Aliases and other constructs can still make yaml-cpp throw while we walk
    // the tree; report them where they are instead of crashing.
    ctx.error(location_of(e.mark), std::string("YAML error: ") + e.msg);
  }
  std::vector<Diagnostic> errors = ctx.take_errors();
  if (!errors.empty() || !workload) return refusal(std::move(errors));
  return std::move(*workload);
}

Expected<Workload> load_file(const std::string& path, const LoadOptions& options) {
  auto text = core::read_text_file(path, "workload");
  if (!text) return refusal({{path, {}, text.status().message()}});
  return load_string(*text, path, options);
}

}  // namespace rtaccel::workload
