// How the request-overhead benchmark splits each request's time (header
// only; bench/request_phases_test.cc works its cases by hand).
#ifndef RTACCEL_BENCH_REQUEST_PHASES_H_
#define RTACCEL_BENCH_REQUEST_PHASES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

namespace rtaccel::bench {

// One request as its client saw it, on the clock the server stamps with.
struct Sample {
  uint64_t submit, start, end, resumed;
  int priority;  // its chain's
  bool warm_up;
  // Through a gateway (rtaccel_remote_times), else 0.
  uint64_t gateway_arrival = 0, gateway_taken = 0, gateway_reply = 0, arrival = 0;
};

// What each request's time went to, in ns. The device runs one kernel at a
// time (a higher bucket's preempting a lower one's), so a request that found
// it busy waited `queued`, which the bucket order decides, not the server's
// overhead; `dispatch` is the time from the later of its submission and the
// device's last kernel end to its own start, the server's cost of finding
// and starting it (the worker's wake-up, its scan of the buckets). With one
// client nothing is queued and overhead = round trip - kernel, the figure
// the analysis takes as epsilon.
struct Phases {
  std::vector<double> to_start, queued, dispatch, kernel, to_resume, overhead;
  std::vector<int> priority;  // each measured request's
  // The hops of requests through a gateway: to its link, its thread's
  // wake-up, from there to the kernel's start, from the kernel's end to the
  // response sent, to the client's link, the client's wake-up.
  std::vector<double> to_gateway, gateway_wake, gateway_to_start, end_to_reply, reply_to_client, client_wake;
};

// Adds the phases of the measured requests of `all`, the requests of one
// device timeline (one round), to `out`.
inline void add_phases(const std::vector<Sample>& all, Phases* out) {
  std::vector<std::pair<uint64_t, size_t>> ends;  // the device's kernel ends, in order
  ends.reserve(all.size());
  for (size_t i = 0; i < all.size(); i++) ends.emplace_back(all[i].end, i);
  std::sort(ends.begin(), ends.end());
  Phases& p = *out;
  for (size_t i = 0; i < all.size(); i++) {
    const Sample& s = all[i];
    if (s.warm_up) continue;
    auto it = std::upper_bound(ends.begin(), ends.end(), std::make_pair(s.start, SIZE_MAX));
    while (it != ends.begin() && std::prev(it)->second == i) --it;  // a kernel of 0 us ends as it starts
    const uint64_t device_free = it == ends.begin() ? 0 : std::prev(it)->first;
    const uint64_t ready = std::max(s.submit, device_free);
    const double dispatch = double(s.start - std::min(ready, s.start));
    p.to_start.push_back(double(s.start - s.submit));
    p.queued.push_back(double(s.start - s.submit) - dispatch);
    p.dispatch.push_back(dispatch);
    p.kernel.push_back(double(s.end - s.start));
    p.to_resume.push_back(double(s.resumed - s.end));
    p.overhead.push_back(dispatch + double(s.resumed - s.end));
    p.priority.push_back(s.priority);
    if (!s.arrival) continue;
    p.to_gateway.push_back(double(s.gateway_arrival - s.submit));
    p.gateway_wake.push_back(double(s.gateway_taken - s.gateway_arrival));
    p.gateway_to_start.push_back(double(s.start - s.gateway_taken));
    p.end_to_reply.push_back(double(s.gateway_reply - s.end));
    p.reply_to_client.push_back(double(s.arrival - s.gateway_reply));
    p.client_wake.push_back(double(s.resumed - s.arrival));
  }
}

inline Phases split_phases(const std::vector<Sample>& all) {
  Phases p;
  add_phases(all, &p);
  return p;
}

}  // namespace rtaccel::bench

#endif  // RTACCEL_BENCH_REQUEST_PHASES_H_
