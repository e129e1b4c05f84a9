// Room made resident up front (core, internal; C++).
//
// A process that must hold its memory flat through a long run (the
// runner, sampling the machine every 20 ms for hours) takes the room its
// samples will need at the start: reserved, a vector still grows into
// fresh pages that the kernel maps one fault at a time, and the process's
// resident memory climbs with the run.
#ifndef RTACCEL_CORE_RESIDENT_H_
#define RTACCEL_CORE_RESIDENT_H_

#include <unistd.h>

#include <cstddef>
#include <vector>

namespace rtaccel::core {

// Reserves room for N elements in V and touches each of its pages, so that
// V grows to N without an allocation or a page fault.
template <class T, class Allocator>
void reserve_resident(std::vector<T, Allocator>& v, size_t n) {
  v.reserve(n);
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // The storage past size() is the allocator's raw memory: bytes written
  // there are no element's. Volatile: a store never read is still made.
  volatile char* room = reinterpret_cast<volatile char*>(v.data() + v.size());
  const size_t bytes = (v.capacity() - v.size()) * sizeof(T);
  for (size_t at = 0; at < bytes; at += page) room[at] = 0;
  if (bytes) room[bytes - 1] = 0;  // the last page, where the room starts mid-page
}

}  // namespace rtaccel::core

#endif  // RTACCEL_CORE_RESIDENT_H_
