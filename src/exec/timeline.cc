#include "exec/timeline.h"

#include <algorithm>
#include <cerrno>
#include <map>

namespace rtaccel::exec {

using nlohmann::json;

Status finish_result_file(std::ofstream& out, const std::filesystem::path& path) {
  out.close();
  if (out) return Status();
  const int err = errno;
  std::error_code ec;
  std::filesystem::remove(path, ec);
  return Status::os_error("cannot write " + path.string() + " (what was written is removed)", err);
}

Status TraceFile::open(const std::filesystem::path& path) {
  path_ = path;
  out_.open(path);
  out_ << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  return out_ ? Status() : Status::error("cannot write " + path.string());
}

void TraceFile::add(const json& event) {
  // (Invalid UTF-8, a program's name or command line, becomes U+FFFD.)
  out_ << (first_ ? "\n" : ",\n") << event.dump(-1, ' ', false, json::error_handler_t::replace);
  first_ = false;
  const auto pid = event.find("pid");
  if (pid != event.end() && pid->is_number_integer()) last_pid_ = std::max(last_pid_, pid->get<int>());
}

Status TraceFile::close() {
  out_ << "\n]}\n";
  return finish_result_file(out_, path_);
}

void merge_trace(const std::filesystem::path& path, uint64_t t0_ns, TraceFile* trace,
                 const std::string& process_name) {
  std::ifstream in(path);
  if (!in) return;
  const int next_pid = trace->last_pid();
  const double t0_us = static_cast<double>(t0_ns) / 1000.0;
  std::map<int, int> pids;  // theirs -> the run's
  std::string section;      // the top-level key being parsed
  double shift = 0;
  bool placed = false;      // shift known: otherData.origin_us seen
  // Each event is renumbered, shifted and written as the parser ends it,
  // then dropped: nothing of the file but its otherData stays in memory.
  json::parser_callback_t each = [&](int depth, json::parse_event_t what, json& parsed) {
    if (depth == 1 && what == json::parse_event_t::key) section = parsed.get<std::string>();
    if (depth == 1 && what == json::parse_event_t::object_end && section == "otherData") {
      const auto origin = parsed.find("origin_us");
      if (origin != parsed.end() && origin->is_number()) {
        shift = origin->get<double>() - t0_us;
        placed = true;
      }
    }
    if (depth != 2 || section != "traceEvents") return true;
    if (what == json::parse_event_t::object_end && placed) {
      json& e = parsed;
      try {
        const int pid = e.value("pid", 0);
        e["pid"] = pids.emplace(pid, next_pid + 1 + static_cast<int>(pids.size())).first->second;
        if (!process_name.empty() && e.value("ph", "") == "M" && e.value("name", "") == "process_name")
          e["args"] = {{"name", process_name}};
        if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + shift;
        trace->add(e);
      } catch (const json::exception&) {
        // An event of another shape: left out.
      }
    }
    // Every element of traceEvents is dropped once seen.
    return what == json::parse_event_t::object_start;
  };
  // What is left of it: its otherData and an empty traceEvents.
  [[maybe_unused]] const json rest = json::parse(in, each, /*allow_exceptions=*/false);
}

}  // namespace rtaccel::exec
