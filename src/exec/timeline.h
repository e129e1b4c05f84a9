// A run's Perfetto timeline, OUT/trace.json (internal): written an event a
// line as the runner makes them, with other programs' traces (the
// regulator's, the interposer's) merged into it an event at a time.
//
// Half an hour of the Autoware system is a 760 MB trace: made whole in
// memory as one JSON document, it took the runner ten times that at the
// run's end. One event a line also lets `rtaccel cut` read it an event at
// a time.
#ifndef RTACCEL_EXEC_TIMELINE_H_
#define RTACCEL_EXEC_TIMELINE_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "rtaccel/status.hpp"

namespace rtaccel::exec {

// Closes OUT, a result file written to PATH. One not written whole (a full
// disk) is removed: cut short, no reader takes it, and it holds the room
// the next result file needs. The error names PATH and the reason.
Status finish_result_file(std::ofstream& out, const std::filesystem::path& path);

class TraceFile {
 public:
  // Starts the document at PATH.
  Status open(const std::filesystem::path& path);
  // Writes one trace event (an object with "ph" and, but for metadata, "ts").
  void add(const nlohmann::json& event);
  // The highest process number written so far.
  int last_pid() const { return last_pid_; }
  // Ends the document; an error if any write failed.
  Status close();

 private:
  std::filesystem::path path_;
  std::ofstream out_;
  bool first_ = true;
  int last_pid_ = 0;
};

// Appends the Perfetto trace at PATH to TRACE, on the run's timeline: its
// ts 0 is its otherData.origin_us on CLOCK_MONOTONIC, the run's t0_ns; its
// processes are numbered past TRACE's, and named PROCESS_NAME when one is
// given. otherData comes first in the traces rtaccel's programs write:
// events before it, and a file that is missing or not a trace, are left
// out; of a trace cut short, the events before the cut are kept, and an
// event of another shape (a pid that is not a number) is left out.
void merge_trace(const std::filesystem::path& path, uint64_t t0_ns, TraceFile* trace,
                 const std::string& process_name = {});

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_TIMELINE_H_
