// A file rtaccel reads whole, read up to a bound (core, internal; C++): the
// workload, the server's policy. A device or a pipe given for one
// (/dev/zero) would be read for ever, and a file of gigabytes taken whole
// into memory.
#ifndef RTACCEL_CORE_TEXT_FILE_H_
#define RTACCEL_CORE_TEXT_FILE_H_

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "rtaccel/status.hpp"

namespace rtaccel::core {

// What no such file is larger than: a workload of a thousand chains is some
// 200 kB.
inline constexpr size_t kTextFileMaxBytes = size_t{16} << 20;

// The bytes of PATH, a WHAT file ("workload"); an error that says why not,
// without PATH: it cannot be opened, it is a folder, or it is larger than
// kTextFileMaxBytes.
inline Expected<std::string> read_text_file(const std::string& path, const std::string& what) {
  // A folder opens as a stream that reads nothing: an empty file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Status::invalid("a folder, not a " + what + " file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::invalid(std::string("cannot open the file: ") + std::strerror(errno));
  std::string text;
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kTextFileMaxBytes)
      return Status::invalid("larger than 16 MB, which no " + what + " is (a device or a pipe?)");
  }
  return text;
}

}  // namespace rtaccel::core

#endif  // RTACCEL_CORE_TEXT_FILE_H_
