// rtaccel-accel-bench: measurements of rtaccel-server, run by `rtaccel bench`.
//
//   request-overhead --socket S --wait suspend|spin [--requests N] [--kernel-us K]
//                    [--gap-us G] [--idle N] [--clients C,...] [--buckets B,...] [--rounds R] [--json]
//     Round trips of busy requests of K us (default 100: long enough that a
//     suspending client really sleeps). Per request: submit -> worker start
//     -> kernel end -> client resumed; the overhead is the round trip minus
//     the kernel's own time (the PAAM paper's 198-391 us, Fig. 12). Through
//     a gateway (S = tcp:HOST:PORT), each hop of the way too. With
//     --clients, --buckets or --rounds: C clients at once over B buckets,
//     each shape after the one-client baseline, in R rounds that take the
//     shapes in turn (request_phases.h: what is overhead once requests
//     queue). --gap-us: each client sleeps G us between a request's end and
//     its next, as a periodic callback does, so that the server's worker
//     stops polling and both cores can go idle: what a run's requests meet.
//     --idle N: N registrations of another client in the measured client's
//     bucket, which submit nothing: what a device serving many callbacks
//     has beside the one that runs.
//   preemption --socket S [--iterations N] [--sizes cpu|gpu] [--json]
//     Cross-bucket preemption delay (the paper's Table I): the response time
//     of a small high-bucket request while a large low-bucket request of the
//     same kernel runs, minus its response time alone with its worker awake;
//     four kernels. On the cpu backend the difference is waking the higher
//     bucket's worker, switching to it, and the cache the low kernel took.
//     --sizes gpu makes the low-bucket kernels large enough to keep a GPU
//     busy for milliseconds (hundreds of MB of requests).
//   kernels --socket S [--iterations N] --json
//     How long each of four kernels takes on the device, by the server's
//     start and end of it: a compute-bound matmul whose data fit the core's
//     cache and three that stream megabytes. Each request a millisecond
//     after the previous one ended, as periodic callbacks leave gaps, so
//     that other work runs on the device's core between kernels. Every
//     sample, for `rtaccel bench corunners`, which runs it beside memory
//     hogs on each core in turn.
//   registrations --socket S [--callbacks N,...] [--executor-core E] [--json]
//     How long registrations take with N callbacks registered, eight to a
//     critical chain: the admission of the N-th's chain (its first
//     callback's registration, which analyses every chain admitted) and
//     the median of its chain's registrations up to it; and how long the
//     server takes to let go of them all when their client leaves (another
//     client's registration of one of their names is refused, -EEXIST,
//     until then). N up to 792: 99 chains, the default policy's priorities.
//     A chain's first registration analyses everything admitted: what
//     grows with N.
//   timer-latency [--iterations N] [--json]
//     How late a timer wakes the calling thread (cyclictest's measure): N
//     absolute 1 ms sleeps. Its p99 is the release jitter `rtaccel calibrate`
//     gives the analysis. Needs no server.
//
// The client is pinned to the calling thread's current core set; run it on a
// core other than the device's.
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <latch>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/percentile.h"
#include "core/size.h"
#include "core/realtime.h"
#include "rtaccel/accel.h"
#include "rtaccel/requests.h"
#include "request_phases.h"

namespace {

using nlohmann::ordered_json;
using rtaccel::core::monotonic_ns;
using rtaccel::bench::Phases;
using rtaccel::bench::Sample;
using rtaccel::bench::split_phases;

// Clients of one request-overhead run: threads of this process, each with a
// connection of its own.
constexpr int kMaxClients = 256;

// COUNTS: whole numbers of 1..MOST separated by commas.
bool parse_counts(const char* text, long most, std::vector<long>* out) {
  out->clear();
  std::string all(text);
  for (size_t at = 0; at <= all.size();) {
    const size_t comma = std::min(all.find(',', at), all.size());
    long v;
    if (rtaccel_parse_long(all.substr(at, comma - at).c_str(), 1, most, &v)) return false;
    out->push_back(v);
    at = comma + 1;
  }
  return true;
}

struct Stats {
  double p50 = 0, p99 = 0, max = 0, min = 0, mean = 0;
};

Stats stats_us(std::vector<double> ns) {
  Stats s;
  if (ns.empty()) return s;
  rtaccel_sort_double(ns.data(), ns.size());
  s.p50 = rtaccel_percentile_sorted(ns.data(), ns.size(), 0.50) / 1000.0;
  s.p99 = rtaccel_percentile_sorted(ns.data(), ns.size(), 0.99) / 1000.0;
  s.max = ns.back() / 1000.0;
  s.min = ns.front() / 1000.0;
  double sum = 0;
  for (double v : ns) sum += v;
  s.mean = sum / double(ns.size()) / 1000.0;
  return s;
}

void fill_desc(rtaccel_registration_desc* d, const char* chain, int priority, const char* service,
               uint32_t request_max, uint32_t response_max, rtaccel_wait_mode wait, uint64_t wcet_ns) {
  memset(d, 0, sizeof(*d));
  snprintf(d->chain.name, sizeof(d->chain.name), "%s", chain);
  d->chain.priority = priority;
  d->chain.critical = 0;  // a benchmark measures; it asks for no guarantee
  d->chain.period_ns = 1000000000;
  d->chain.deadline_ns = 1000000000;
  d->chain.ncallbacks = 1;
  rtaccel_callback_desc& cb = d->chain.callbacks[0];
  snprintf(cb.name, sizeof(cb.name), "%s-callback", chain);
  snprintf(cb.executor, sizeof(cb.executor), "%s-executor", chain);
  cb.executor_core = 0;
  cb.executor_priority = priority;
  cb.cpu_ns = 1000;
  cb.wait = wait;
  cb.nsegments = 1;
  snprintf(cb.segments[0].service, sizeof(cb.segments[0].service), "%s", service);
  cb.segments[0].wcet_ns = wcet_ns;
  d->nservices = 1;
  snprintf(d->services[0].name, sizeof(d->services[0].name), "%s", service);
  d->services[0].request_max = request_max;
  d->services[0].response_max = response_max;
}

int register_one(rtaccel_client* c, const rtaccel_registration_desc& d, rtaccel_registration** r) {
  char why[256];
  int err = rtaccel_client_register(c, &d, r, why, sizeof(why));
  if (err) fprintf(stderr, "rtaccel-accel-bench: registration refused: %s (%s)\n", why, strerror(-err));
  return err;
}

void print_stats(const char* name, const Stats& s) {
  printf("%-22s min %9.2f  p50 %9.2f  p99 %9.2f  max %9.2f  mean %9.2f us\n", name, s.min, s.p50,
         s.p99, s.max, s.mean);
}

// --- request overhead ------------------------------------------------------

// A client of the overhead benchmark: its own connection and registration,
// as each executor process of a run has.
struct OverheadClient {
  rtaccel_client* connection = nullptr;
  rtaccel_registration* reg = nullptr;
  int service = -1;
  int priority = 0;
  int requests = 0, warm_up = 0;
  uint64_t gap_ns = 0;  // asleep between a request's end and the next
  std::latch* start = nullptr;
  std::vector<Sample> samples;  // reserved before the start: the loop allocates nothing
  int error = 0;
};

void* overhead_client_main(void* arg) {
  auto& c = *static_cast<OverheadClient*>(arg);
  // As its registration says (executor_priority), when real-time
  // priorities are in force at all: an executor of a more critical chain
  // preempts a less critical one on the clients' core.
  int policy;
  sched_param param;
  if (pthread_getschedparam(pthread_self(), &policy, &param) == 0 && policy == SCHED_FIFO) {
    param.sched_priority = c.priority;
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
  }
  c.start->arrive_and_wait();
  for (int i = 0; i < c.warm_up + c.requests; i++) {
    rtaccel_ticket t;
    int err = rtaccel_submit(c.reg, c.service, sizeof(rtaccel_busy_request), &t);
    if (!err) err = rtaccel_wait(c.reg, &t, 5000000000ull, nullptr);
    const uint64_t resumed = monotonic_ns();
    if (err) {
      c.error = err;
      return nullptr;
    }
    rtaccel_request_times times;
    rtaccel_request_timestamps(c.reg, &t, &times);
    Sample s{times.submit_ns, times.start_ns, times.end_ns, resumed, c.priority, i < c.warm_up};
    rtaccel_remote_times hops;
    if (rtaccel_request_remote_times(c.reg, &t, &hops) == 0) {
      s.gateway_arrival = hops.gateway_arrival_ns;
      s.gateway_taken = hops.gateway_taken_ns;
      s.gateway_reply = hops.gateway_reply_ns;
      s.arrival = hops.arrival_ns;
    }
    c.samples.push_back(s);
    if (c.gap_ns) rtaccel_sleep_until(CLOCK_MONOTONIC, monotonic_ns() + c.gap_ns);
  }
  return nullptr;
}

// Spreads `clients` over `buckets` request priorities, 50 the lowest, so
// that the server's down-sampling (one distinct priority per bucket when it
// has at least as many levels) gives each group its own bucket. A remote
// client's gateway thread runs at its priority.
int client_priority(int index, int buckets) { return 50 + 5 * (buckets - 1 - index % buckets); }

struct OverheadOptions {
  std::string socket;  // a path, or tcp:HOST:PORT for the gateway
  rtaccel_wait_mode wait = RTACCEL_WAIT_SUSPEND;
  uint64_t kernel_ns = 100000;
  uint64_t gap_ns = 0;
  long idle = 0;  // registrations of another client beside the measured ones
  const char* mode() const { return wait == RTACCEL_WAIT_SPIN ? "spin" : "suspend"; }
  bool remote() const { return socket.find(':') != std::string::npos && socket[0] != '/'; }
};

struct Shape {
  int clients, buckets;
};

// One shape's requests, over every round.
struct ShapeRun {
  Phases phases;
  std::map<int, uint32_t> bucket_of_priority;
  uint64_t measured_ns = 0;  // first submission to last resumption, summed over rounds
};

// `requests` round trips by `shape.clients` clients at once, each with a
// connection and registration of its own, added to `run`.
int run_shape(const OverheadOptions& o, Shape shape, int requests, ShapeRun* run) {
  std::vector<OverheadClient> clients(static_cast<size_t>(shape.clients));
  std::latch start(shape.clients + 1);
  const int per_client = (requests + shape.clients - 1) / shape.clients;
  int status = 0;
  for (int i = 0; i < shape.clients && !status; i++) {
    OverheadClient& c = clients[size_t(i)];
    if (int err = rtaccel_client_connect(o.socket.empty() ? nullptr : o.socket.c_str(), &c.connection)) {
      fprintf(stderr, "rtaccel-accel-bench: client %d cannot connect to the server: %s\n", i, strerror(-err));
      status = 1;
      break;
    }
    char chain[RTACCEL_NAME_MAX];
    snprintf(chain, sizeof(chain), "overhead-%s-%d", o.mode(), i);
    c.priority = client_priority(i, shape.buckets);
    rtaccel_registration_desc d;
    fill_desc(&d, chain, c.priority, "busy", sizeof(rtaccel_busy_request), 0, o.wait, o.kernel_ns + 1000);
    if (register_one(c.connection, d, &c.reg)) {
      status = 1;
      break;
    }
    c.service = rtaccel_service_index(c.reg, "busy");
    static_cast<rtaccel_busy_request*>(rtaccel_request_buffer(c.reg, c.service, nullptr))->ns = o.kernel_ns;
    c.requests = per_client;
    c.warm_up = std::max(1, per_client / 10);
    c.gap_ns = o.gap_ns;
    c.start = &start;
    c.samples.reserve(size_t(c.warm_up + c.requests));
  }
  // Local registrations read their bucket as the server last moved it; a
  // remote one knows it only as the gateway's registration found it.
  for (const OverheadClient& c : clients) {
    if (!c.reg) continue;
    rtaccel_registration_info info;
    rtaccel_registration_query(c.reg, &info);
    run->bucket_of_priority[c.priority] = info.bucket;
  }
  if (!status && !o.remote()) {
    std::map<uint32_t, int> seen;
    for (const auto& [priority, bucket] : run->bucket_of_priority) seen[bucket]++;
    if (int(seen.size()) != shape.buckets) {
      fprintf(stderr, "rtaccel-accel-bench: %d request priorities landed in %zu buckets; the server needs %d levels\n",
              shape.buckets, seen.size(), shape.buckets);
      status = 1;
    }
  }
  std::vector<pthread_t> threads;
  if (!status) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    // Locked memory (rtaccel_lock_memory) holds every stack whole: keep them small.
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
    for (OverheadClient& c : clients) {
      pthread_t t;
      if (int err = pthread_create(&t, &attr, overhead_client_main, &c)) {
        fprintf(stderr, "rtaccel-accel-bench: cannot start a client thread: %s\n", strerror(err));
        status = 1;
        break;
      }
      threads.push_back(t);
    }
    pthread_attr_destroy(&attr);
  }
  // The threads that started wait for the whole count: release them.
  for (size_t i = threads.size(); i < clients.size() + 1; i++) start.count_down();
  for (pthread_t t : threads) pthread_join(t, nullptr);
  std::vector<Sample> all;
  for (OverheadClient& c : clients) {
    if (c.error && !status) {
      fprintf(stderr, "rtaccel-accel-bench: request failed: %s\n", strerror(-c.error));
      status = 1;
    }
    all.insert(all.end(), c.samples.begin(), c.samples.end());
    if (c.reg) rtaccel_client_unregister(c.reg);
    rtaccel_client_close(c.connection);
  }
  if (status) return status;
  rtaccel::bench::add_phases(all, &run->phases);  // a round at a time: each is a device timeline of its own
  uint64_t first = UINT64_MAX, last = 0;
  for (const Sample& s : all)
    if (!s.warm_up) first = std::min(first, s.submit), last = std::max(last, s.resumed);
  run->measured_ns += last - first;
  return 0;
}

ordered_json stats_json(const std::vector<double>& ns) {
  const Stats s = stats_us(ns);
  return {{"p50_us", s.p50}, {"p99_us", s.p99}, {"max_us", s.max}, {"min_us", s.min}, {"mean_us", s.mean}};
}

ordered_json shape_json(Shape shape, const ShapeRun& run) {
  const Phases& p = run.phases;
  const Stats o = stats_us(p.overhead);
  ordered_json by_priority = ordered_json::array();
  for (auto it = run.bucket_of_priority.rbegin(); it != run.bucket_of_priority.rend(); ++it) {
    std::vector<double> group;
    for (size_t k = 0; k < p.overhead.size(); k++)
      if (p.priority[k] == it->first) group.push_back(p.overhead[k]);
    const Stats g = stats_us(group);
    by_priority.push_back({{"priority", it->first}, {"bucket", it->second}, {"requests", group.size()},
                           {"p50_us", g.p50}, {"p99_us", g.p99}, {"max_us", g.max}});
  }
  const double per_s = double(p.overhead.size()) * 1e9 / double(std::max<uint64_t>(1, run.measured_ns));
  ordered_json out = {{"clients", shape.clients},
                      {"buckets", shape.buckets},
                      {"requests", p.overhead.size()},
                      {"requests_per_s", per_s},
                      {"p50_us", o.p50},
                      {"p99_us", o.p99},
                      {"max_us", o.max},
                      {"phases",
                       {{"submit_to_start", stats_json(p.to_start)},
                        {"queued", stats_json(p.queued)},
                        {"dispatch", stats_json(p.dispatch)},
                        {"kernel", stats_json(p.kernel)},
                        {"end_to_resumed", stats_json(p.to_resume)},
                        {"overhead", stats_json(p.overhead)}}},
                      {"by_priority", by_priority}};
  if (!p.to_gateway.empty())
    out["hops"] = {{"client_to_gateway", stats_json(p.to_gateway)},
                   {"gateway_wake", stats_json(p.gateway_wake)},
                   {"gateway_to_start", stats_json(p.gateway_to_start)},
                   {"kernel", stats_json(p.kernel)},
                   {"end_to_reply", stats_json(p.end_to_reply)},
                   {"reply_to_client", stats_json(p.reply_to_client)},
                   {"client_wake", stats_json(p.client_wake)}};
  return out;
}

// IDLE registrations of another client, at the measured client's priority
// and so in its bucket, that submit nothing: what a device serving a
// system's many callbacks has beside the one that runs. Closed by the caller.
int register_idle(const OverheadOptions& o, rtaccel_client** holder) {
  *holder = nullptr;
  if (o.idle == 0) return 0;
  if (int err = rtaccel_client_connect(o.socket.empty() ? nullptr : o.socket.c_str(), holder)) {
    fprintf(stderr, "rtaccel-accel-bench: the idle registrations' client cannot connect: %s\n", strerror(-err));
    return 1;
  }
  for (long i = 0; i < o.idle; i++) {
    char chain[RTACCEL_NAME_MAX];
    snprintf(chain, sizeof(chain), "idle-%ld", i);
    rtaccel_registration_desc d;
    fill_desc(&d, chain, client_priority(0, 1), "busy", sizeof(rtaccel_busy_request), 0, o.wait, o.kernel_ns + 1000);
    rtaccel_registration* r;
    if (register_one(*holder, d, &r)) return 1;
  }
  return 0;
}

// One client, one bucket, one round: the server's overhead per request as
// `rtaccel calibrate` takes it for epsilon.
int request_overhead(const OverheadOptions& o, int requests, bool json) {
  ShapeRun run;
  if (int rc = run_shape(o, {1, 1}, requests, &run)) return rc;
  if (json) {
    ordered_json out = {{"version", 1}, {"benchmark", "request-overhead"}, {"wait", o.mode()},
                        {"kernel_us", double(o.kernel_ns) / 1000.0}, {"gap_us", double(o.gap_ns) / 1000.0},
                        {"idle", o.idle}};
    out.update(shape_json({1, 1}, run));
    printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  const Phases& p = run.phases;
  printf("# request overhead, wait=%s, %zu requests of busy(%.0f us), %.0f us apart, %ld idle registrations\n",
         o.mode(), p.overhead.size(), double(o.kernel_ns) / 1000.0, double(o.gap_ns) / 1000.0, o.idle);
  print_stats("submit -> start", stats_us(p.to_start));
  print_stats("start -> end (kernel)", stats_us(p.kernel));
  print_stats("end -> resumed", stats_us(p.to_resume));
  print_stats("overhead", stats_us(p.overhead));
  return 0;
}

// The one-client baseline, then every shape of `clients` x `buckets` that
// has a client for each bucket, in `rounds` rounds that take each shape in
// turn, so that the machine's changes over the run fall on every shape
// alike; each shape's figures are over the requests of all its rounds.
int request_overhead_at_scale(const OverheadOptions& o, const std::vector<long>& clients,
                              const std::vector<long>& buckets, int rounds, int requests, bool json) {
  std::vector<Shape> shapes = {{1, 1}};
  for (long c : clients)
    for (long b : buckets)
      if (b <= c && !(c == 1 && b == 1)) shapes.push_back({int(c), int(b)});
  std::vector<ShapeRun> runs(shapes.size());
  const int per_round = std::max(1, requests / rounds);
  for (int r = 0; r < rounds; r++)
    for (size_t k = 0; k < shapes.size(); k++)
      if (int rc = run_shape(o, shapes[k], std::max(per_round, shapes[k].clients), &runs[k])) return rc;
  ordered_json rows = ordered_json::array();
  for (size_t k = 0; k < shapes.size(); k++) rows.push_back(shape_json(shapes[k], runs[k]));
  if (json) {
    const ordered_json out = {{"version", 1}, {"benchmark", "request-overhead-scale"}, {"wait", o.mode()},
                              {"kernel_us", double(o.kernel_ns) / 1000.0}, {"rounds", rounds},
                              {"rows", rows}};
    printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  printf("# request overhead (dispatch + end -> resumed), wait=%s, busy(%.0f us), %d rounds\n", o.mode(),
         double(o.kernel_ns) / 1000.0, rounds);
  for (const ordered_json& row : rows)
    printf("%3d clients %d buckets: %6.0f requests/s  p50 %8.2f  p99 %8.2f  max %9.2f us\n",
           row["clients"].get<int>(), row["buckets"].get<int>(), row["requests_per_s"].get<double>(),
           row["p50_us"].get<double>(), row["p99_us"].get<double>(), row["max_us"].get<double>());
  return 0;
}

// --- preemption ----------------------------------------------------------------

struct KernelCase {
  const char* service;
  uint32_t small_n;  // high-bucket request (short)
  uint32_t large_n;  // low-bucket request (runs for milliseconds)
};

// Request bytes of `service` for size n, and the response bytes
// (histograms: 64 bins).
void sizes(const char* service, uint32_t n, uint32_t* request, uint32_t* response) {
  const int kind = rtaccel_builtin_of(service);
  uint64_t inputs = 0, result = 0;
  rtaccel_request_sizes(kind, n, 64, &inputs, &result);
  *request = uint32_t(rtaccel_request_header_size(kind) + inputs * sizeof(float));
  *response = uint32_t(result);
}

void fill_request(const char* service, uint32_t n, void* buffer, uint32_t cap) {
  const int kind = rtaccel_builtin_of(service);
  rtaccel_request_encode(kind, n, 64, 0.0f, 1.0f, buffer, cap);
  uint64_t inputs = 0, result = 0;
  rtaccel_request_sizes(kind, n, 64, &inputs, &result);
  float* x = reinterpret_cast<float*>(static_cast<char*>(buffer) + rtaccel_request_header_size(kind));
  for (uint64_t i = 0; i < inputs; i++)
    x[i] = kind == RTACCEL_HISTOGRAM ? float(i % 1000) / 1000.0f : float(i % 7) * 0.5f;
}

int preemption(rtaccel_client* c, int iterations, bool gpu, bool json) {
  const KernelCase cpu_cases[] = {
      {"matmul", 48, 256}, {"reduction", 100000, 8000000}, {"vecadd", 50000, 4000000}, {"histogram", 50000, 4000000}};
  // The GPU's low kernels are as large as a request buffer allows
  // (RTACCEL_MAX_BUFFER, 64 MiB): two 2048x2048 matrices, 16 M floats, or
  // two vectors of 8 M.
  static_assert(2ull * 2048 * 2048 * sizeof(float) <= RTACCEL_MAX_BUFFER - 4096, "matmul request too large");
  static_assert(16000000ull * sizeof(float) <= RTACCEL_MAX_BUFFER - 4096, "reduction request too large");
  const KernelCase gpu_cases[] = {
      {"matmul", 64, 2048}, {"reduction", 100000, 16000000}, {"vecadd", 100000, 8000000}, {"histogram", 100000, 16000000}};
  const KernelCase* cases = gpu ? gpu_cases : cpu_cases;
  if (json) printf("{\n  \"version\": 1,\n  \"benchmark\": \"preemption\",\n  \"iterations\": %d,\n  \"kernels\": {\n", iterations);
  else printf("# cross-bucket preemption delay, %d iterations per kernel\n", iterations);
  constexpr size_t kCases = sizeof(cpu_cases) / sizeof(cpu_cases[0]);
  for (size_t k = 0; k < kCases; k++) {
    const KernelCase& kc = cases[k];
    uint32_t req_hi, resp_hi, req_lo, resp_lo;
    sizes(kc.service, kc.small_n, &req_hi, &resp_hi);
    sizes(kc.service, kc.large_n, &req_lo, &resp_lo);
    rtaccel_registration_desc hd, ld;
    std::string hname = std::string("preempt-high-") + kc.service, lname = std::string("preempt-low-") + kc.service;
    fill_desc(&hd, hname.c_str(), 90, kc.service, req_hi, resp_hi, RTACCEL_WAIT_SPIN, 1000000);
    fill_desc(&ld, lname.c_str(), 10, kc.service, req_lo, resp_lo, RTACCEL_WAIT_SPIN, 1000000);
    rtaccel_registration *hi, *lo;
    if (register_one(c, ld, &lo) || register_one(c, hd, &hi)) return 1;
    rtaccel_registration_info hinfo, linfo;
    rtaccel_registration_query(hi, &hinfo);
    rtaccel_registration_query(lo, &linfo);
    if (hinfo.bucket == linfo.bucket) {
      fprintf(stderr, "rtaccel-accel-bench: both requests landed in bucket %u; the server needs 2+ levels\n", hinfo.bucket);
      return 1;
    }
    const int s_hi = rtaccel_service_index(hi, kc.service), s_lo = rtaccel_service_index(lo, kc.service);
    fill_request(kc.service, kc.small_n, rtaccel_request_buffer(hi, s_hi, nullptr), req_hi);
    fill_request(kc.service, kc.large_n, rtaccel_request_buffer(lo, s_lo, nullptr), req_lo);
    std::vector<double> alone, preempting;
    for (int i = -2; i < iterations; i++) {
      rtaccel_ticket th, tl;
      // Alone, right after another request, so that the worker is awake and
      // the device core busy (no idle exit) as it is when preempting.
      if (rtaccel_submit(hi, s_hi, req_hi, &th) || rtaccel_wait(hi, &th, 5000000000ull, nullptr)) return 1;
      uint64_t t0 = monotonic_ns();
      if (rtaccel_submit(hi, s_hi, req_hi, &th) || rtaccel_wait(hi, &th, 5000000000ull, nullptr)) return 1;
      const uint64_t alone_ns = monotonic_ns() - t0;
      // While the low-bucket kernel runs: submit it, wait until its worker
      // has started it, then submit the high one.
      if (rtaccel_submit(lo, s_lo, req_lo, &tl)) return 1;
      rtaccel_request_times lt;
      const uint64_t give_up = monotonic_ns() + 1000000000ull;
      do rtaccel_request_timestamps(lo, &tl, &lt);
      while (rtaccel_poll(lo, &tl, nullptr) == -EAGAIN && lt.start_ns < lt.submit_ns && monotonic_ns() < give_up);
      t0 = monotonic_ns();
      if (rtaccel_submit(hi, s_hi, req_hi, &th) || rtaccel_wait(hi, &th, 5000000000ull, nullptr)) return 1;
      const uint64_t with_ns = monotonic_ns() - t0;
      const bool overlapped = rtaccel_poll(lo, &tl, nullptr) == -EAGAIN;
      if (rtaccel_wait(lo, &tl, 10000000000ull, nullptr)) return 1;
      if (i < 0 || !overlapped) continue;  // the low kernel ended first: no preemption to measure
      alone.push_back(double(alone_ns));
      preempting.push_back(double(with_ns));
    }
    std::vector<double> delay(alone.size());
    for (size_t i = 0; i < alone.size(); i++) delay[i] = std::max(0.0, preempting[i] - alone[i]);
    const Stats a = stats_us(alone), p = stats_us(preempting), dly = stats_us(delay);
    if (json) {
      printf("    \"%s\": {\"samples\": %zu, \"alone_p50_us\": %.3f, \"preempting_p50_us\": %.3f, "
             "\"delay_mean_us\": %.3f, \"delay_p50_us\": %.3f, \"delay_p99_us\": %.3f, \"delay_max_us\": %.3f}%s\n",
             kc.service, delay.size(), a.p50, p.p50, dly.mean, dly.p50, dly.p99, dly.max,
             k + 1 < kCases ? "," : "");
    } else {
      printf("%-10s samples %5zu  alone p50 %8.2f us  preempting p50 %8.2f us  delay mean %7.2f p99 %7.2f max %7.2f us\n",
             kc.service, delay.size(), a.p50, p.p50, dly.mean, dly.p99, dly.max);
    }
    rtaccel_client_unregister(hi);
    rtaccel_client_unregister(lo);
  }
  if (json) printf("  }\n}\n");
  return 0;
}

// --- kernels, for co-runners ----------------------------------------------------

int kernels(rtaccel_client* c, int iterations) {
  // matmul's inputs (128 x 128 x 2 floats, 128 KiB) stay in the core's
  // cache; the others' (4 MiB and 8 MiB) come from memory each time.
  const struct {
    const char* service;
    uint32_t n;
  } cases[] = {{"matmul", 128}, {"reduction", 1 << 20}, {"vecadd", 1 << 20}, {"histogram", 1 << 20}};
  nlohmann::ordered_json out = {{"version", 1}, {"benchmark", "kernels"}, {"iterations", iterations}};
  for (const auto& kc : cases) {
    uint32_t request, response;
    sizes(kc.service, kc.n, &request, &response);
    rtaccel_registration_desc d;
    const std::string chain = std::string("kernels-") + kc.service;
    fill_desc(&d, chain.c_str(), 50, kc.service, request, response, RTACCEL_WAIT_SUSPEND, 1000000000);
    rtaccel_registration* r;
    if (register_one(c, d, &r)) return 1;
    const int service = rtaccel_service_index(r, kc.service);
    fill_request(kc.service, kc.n, rtaccel_request_buffer(r, service, nullptr), request);
    std::vector<double> took_us;
    took_us.reserve(size_t(iterations));
    for (int i = -2; i < iterations; i++) {  // two to warm up
      rtaccel_ticket t;
      rtaccel_request_times times;
      int err = rtaccel_submit(r, service, request, &t);
      if (!err) err = rtaccel_wait(r, &t, 5000000000ull, nullptr);
      if (!err) err = rtaccel_request_timestamps(r, &t, &times);
      if (err) {
        fprintf(stderr, "rtaccel-accel-bench: %s request: %s\n", kc.service, strerror(-err));
        return 1;
      }
      if (i >= 0) took_us.push_back(double(times.end_ns - times.start_ns) / 1e3);
      // A gap on the device's core: without one its worker would hold the
      // core and the kernel's real-time throttling would stop it there.
      rtaccel_sleep_until(CLOCK_MONOTONIC, monotonic_ns() + 1000000);
    }
    out["kernels"][kc.service] = {{"n", kc.n}, {"request_bytes", request}, {"us", took_us}};
    rtaccel_client_unregister(r);
  }
  printf("%s\n", out.dump().c_str());
  return 0;
}

// --- registrations at scale --------------------------------------------------

constexpr uint32_t kScaleChainLength = 8;
constexpr long kMostCallbacks = 99 * kScaleChainLength;

// Registration I: callback I % 8 of critical chain I / 8, whose eight
// callbacks run on eight executors of core EXECUTOR_CORE (not the server's:
// rule R1), each with a busy segment. The chains have priorities of their
// own, as a workload's do: the default policy's 0..99 hold 99 chains.
rtaccel_registration_desc scale_desc(long i, int executor_core) {
  rtaccel_registration_desc d;
  const std::string chain = "scale-" + std::to_string(i / kScaleChainLength);
  fill_desc(&d, chain.c_str(), int(1 + i / kScaleChainLength), "busy", sizeof(rtaccel_busy_request), 64,
            RTACCEL_WAIT_SUSPEND, 1000);
  d.chain.critical = 1;
  // Room for all: each callback costs the chains below it the server's
  // overheads (epsilon, kappa), 150 us and more.
  d.chain.period_ns = d.chain.deadline_ns = 100 * RTACCEL_NS_PER_S;
  d.chain.ncallbacks = kScaleChainLength;
  for (uint32_t k = 0; k < kScaleChainLength; k++) {
    rtaccel_callback_desc& cb = d.chain.callbacks[k];
    cb = d.chain.callbacks[0];
    snprintf(cb.name, sizeof(cb.name), "%s-callback-%u", chain.c_str(), k);
    snprintf(cb.executor, sizeof(cb.executor), "scale-executor-%u", k);
    cb.executor_core = executor_core;
    cb.executor_priority = int(10 + k);
  }
  d.callback = uint32_t(i % kScaleChainLength);
  return d;
}

int registrations(const std::string& socket_path, const std::vector<long>& counts, int executor_core, bool json) {
  const char* socket = socket_path.empty() ? nullptr : socket_path.c_str();
  rtaccel_client *holder, *other;
  if (int err = rtaccel_client_connect(socket, &holder); err || (err = rtaccel_client_connect(socket, &other))) {
    fprintf(stderr, "rtaccel-accel-bench: cannot connect to the server: %s\n", strerror(-err));
    return 1;
  }
  const long most = *std::max_element(counts.begin(), counts.end());
  std::vector<double> took_ms;
  took_ms.reserve(size_t(most));
  for (long i = 0; i < most; i++) {
    const rtaccel_registration_desc d = scale_desc(i, executor_core);
    rtaccel_registration* r;
    const uint64_t start = monotonic_ns();
    if (register_one(holder, d, &r)) return 1;
    took_ms.push_back(double(monotonic_ns() - start) / 1e6);
  }
  const uint64_t left = monotonic_ns();
  rtaccel_client_close(holder);
  const rtaccel_registration_desc first = scale_desc(0, executor_core);
  int err;
  do {
    rtaccel_registration* r;
    char why[256];
    err = rtaccel_client_register(other, &first, &r, why, sizeof(why));
  } while (err == -EEXIST && monotonic_ns() - left < 600 * RTACCEL_NS_PER_S);
  const double release_ms = double(monotonic_ns() - left) / 1e6;
  rtaccel_client_close(other);
  if (err) {
    fprintf(stderr, "rtaccel-accel-bench: the registrations of a client that left were not released: %s\n",
            strerror(-err));
    return 1;
  }
  ordered_json out = {{"version", 1}, {"benchmark", "registrations"}, {"release_of", most},
                      {"release_ms", release_ms}};
  // The last chain's registrations up to the N-th: the first of a chain's
  // admits it (the analysis of every chain admitted), the others find it
  // admitted.
  for (long n : counts) {
    const long head = (n - 1) / long(kScaleChainLength) * long(kScaleChainLength);
    std::vector<double> chain(took_ms.begin() + head, took_ms.begin() + n);
    rtaccel_sort_double(chain.data(), chain.size());
    out["at"].push_back({{"callbacks", n},
                         {"chains", head / long(kScaleChainLength) + 1},
                         {"admit_ms", took_ms[size_t(head)]},
                         {"register_ms", rtaccel_percentile_sorted(chain.data(), chain.size(), 0.50)}});
  }
  if (json) {
    printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  printf("# the N-th registration's chain (8 callbacks): its admission, and its registrations' median\n");
  printf("%9s %6s %12s %12s\n", "callbacks", "chains", "admit ms", "median ms");
  for (const auto& at : out["at"])
    printf("%9ld %6ld %12.3f %12.3f\n", at["callbacks"].get<long>(), at["chains"].get<long>(),
           at["admit_ms"].get<double>(), at["register_ms"].get<double>());
  printf("# the server let go of %ld registrations of a client that left in %.1f ms\n", most, release_ms);
  return 0;
}

// --- timer latency ----------------------------------------------------------

int timer_latency(int iterations, bool json) {
  std::vector<double> late;
  late.reserve(size_t(iterations));
  uint64_t next = monotonic_ns();
  for (int i = 0; i < iterations; ++i) {
    next += 1000000;
    rtaccel_sleep_until(CLOCK_MONOTONIC, next);
    late.push_back(double(monotonic_ns() - next));
  }
  const Stats s = stats_us(late);
  if (json)
    printf("{\n  \"version\": 1,\n  \"benchmark\": \"timer-latency\",\n  \"iterations\": %d,\n"
           "  \"p50_us\": %.3f,\n  \"p99_us\": %.3f,\n  \"max_us\": %.3f\n}\n",
           iterations, s.p50, s.p99, s.max);
  else
    printf("# timer wake-up latency, %d sleeps of 1 ms: p50 %.1f us, p99 %.1f us, max %.1f us\n", iterations,
           s.p50, s.p99, s.max);
  return 0;
}

const char kUsage[] =
    "usage: rtaccel-accel-bench request-overhead --socket S --wait suspend|spin [--requests N]\n"
    "                           [--kernel-us K] [--gap-us G] [--idle N] [--clients C,...] [--buckets B,...]\n"
    "                           [--rounds R] [--json]\n"
    "       rtaccel-accel-bench preemption --socket S [--iterations N] [--sizes cpu|gpu] [--json]\n"
    "       rtaccel-accel-bench kernels --socket S [--iterations N] --json\n"
    "       rtaccel-accel-bench registrations --socket S [--callbacks N,...] [--executor-core E] [--json]\n"
    "       rtaccel-accel-bench timer-latency [--iterations N] [--json]\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fputs(kUsage, stderr);
    return 2;
  }
  const std::string what = argv[1];
  std::string socket_path, wait = "suspend";
  int count = 0;
  long kernel_us = 100, rounds = 0, gap_us = 0, idle = 0;
  std::vector<long> clients, buckets;  // request-overhead at scale when either is given
  std::vector<long> callbacks = {8, 80, 400, 792};  // registrations
  long executor_core = 0;
  bool json = false, gpu = false;
  const option longopts[] = {{"sizes", required_argument, nullptr, 'z'},
                             {"socket", required_argument, nullptr, 's'},
                             {"wait", required_argument, nullptr, 'w'},
                             {"requests", required_argument, nullptr, 'n'},
                             {"iterations", required_argument, nullptr, 'n'},
                             {"json", no_argument, nullptr, 'j'},
                             {"kernel-us", required_argument, nullptr, 'k'},
                             {"clients", required_argument, nullptr, 'c'},
                             {"buckets", required_argument, nullptr, 'b'},
                             {"rounds", required_argument, nullptr, 'r'},
                             {"gap-us", required_argument, nullptr, 'g'},
                             {"callbacks", required_argument, nullptr, 'C'},
                             {"executor-core", required_argument, nullptr, 'E'},
                             {"idle", required_argument, nullptr, 'I'},
                             {nullptr, 0, nullptr, 0}};
  optind = 2;
  int opt;
  while ((opt = getopt_long(argc, argv, "", longopts, nullptr)) != -1) {
    switch (opt) {
      case 's': socket_path = optarg; break;
      case 'w': wait = optarg; break;
      case 'n': count = atoi(optarg); break;
      case 'j': json = true; break;
      case 'k': kernel_us = atol(optarg); break;
      case 'c':
        if (!parse_counts(optarg, kMaxClients, &clients)) {
          fprintf(stderr, "rtaccel-accel-bench: --clients takes counts of 1..%d separated by commas\n", kMaxClients);
          return 2;
        }
        break;
      case 'b':
        // The server refuses more levels than it has (8) when it starts.
        if (!parse_counts(optarg, kMaxClients, &buckets)) {
          fprintf(stderr, "rtaccel-accel-bench: --buckets takes counts of 1..%d separated by commas\n", kMaxClients);
          return 2;
        }
        break;
      case 'C':
        if (!parse_counts(optarg, kMostCallbacks, &callbacks)) {
          fprintf(stderr, "rtaccel-accel-bench: --callbacks takes counts of 1..%ld separated by commas\n",
                  kMostCallbacks);
          return 2;
        }
        break;
      case 'E':
        if (rtaccel_parse_long(optarg, 0, 4095, &executor_core)) {
          fprintf(stderr, "rtaccel-accel-bench: --executor-core must be 0..4095\n");
          return 2;
        }
        break;
      case 'I':
        if (rtaccel_parse_long(optarg, 0, 4096, &idle)) {
          fprintf(stderr, "rtaccel-accel-bench: --idle must be 0..4096\n");
          return 2;
        }
        break;
      case 'g':
        if (rtaccel_parse_long(optarg, 0, 1000000, &gap_us)) {
          fprintf(stderr, "rtaccel-accel-bench: --gap-us must be 0..1000000\n");
          return 2;
        }
        break;
      case 'r':
        if (rtaccel_parse_long(optarg, 1, 1000, &rounds)) {
          fprintf(stderr, "rtaccel-accel-bench: --rounds must be 1..1000\n");
          return 2;
        }
        break;
      case 'z':
        if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "gpu") != 0) {
          fprintf(stderr, "rtaccel-accel-bench: --sizes must be cpu or gpu\n");
          return 2;
        }
        gpu = strcmp(optarg, "gpu") == 0;
        break;
      default: fputs(kUsage, stderr); return 2;
    }
  }
  if (kernel_us < 0 || kernel_us > 1000000) {
    fprintf(stderr, "rtaccel-accel-bench: --kernel-us must be 0..1000000\n");
    return 2;
  }
  if (wait != "suspend" && wait != "spin") {
    fprintf(stderr, "rtaccel-accel-bench: --wait must be suspend or spin\n");
    return 2;
  }
  const bool at_scale = !clients.empty() || !buckets.empty() || rounds > 0;
  if (clients.empty()) clients = {1};
  if (buckets.empty()) buckets = {1};
  const long most_clients = *std::max_element(clients.begin(), clients.end());
  if (wait == "spin" && most_clients > 1) {
    // Each would keep the clients' core until its own request ended.
    fprintf(stderr, "rtaccel-accel-bench: --wait spin takes one client; clients that share a core suspend\n");
    return 2;
  }
  if (*std::max_element(buckets.begin(), buckets.end()) > most_clients) {
    fprintf(stderr, "rtaccel-accel-bench: --buckets must be at most the most --clients (each bucket needs one)\n");
    return 2;
  }
  rtaccel_lock_memory();  // where it cannot starve later thread stacks
  if (what == "timer-latency") return timer_latency(count > 0 ? count : 2000, json);
  if (what == "registrations") return registrations(socket_path, callbacks, int(executor_core), json);
  if (what == "request-overhead") {
    const OverheadOptions o{socket_path, wait == "spin" ? RTACCEL_WAIT_SPIN : RTACCEL_WAIT_SUSPEND,
                            uint64_t(kernel_us) * 1000, uint64_t(gap_us) * 1000, idle};
    const int requests = count > 0 ? count : 20000;
    rtaccel_client* holder;
    int rc = register_idle(o, &holder);
    if (rc == 0)
      rc = at_scale ? request_overhead_at_scale(o, clients, buckets, rounds > 0 ? int(rounds) : 1, requests, json)
                    : request_overhead(o, requests, json);
    rtaccel_client_close(holder);
    return rc;
  }
  rtaccel_client* c;
  if (int err = rtaccel_client_connect(socket_path.empty() ? nullptr : socket_path.c_str(), &c)) {
    fprintf(stderr, "rtaccel-accel-bench: cannot connect to the server: %s\n", strerror(-err));
    return 1;
  }
  int rc;
  if (what == "preemption")
    rc = preemption(c, count > 0 ? count : 200, gpu, json);
  else if (what == "kernels")
    rc = kernels(c, count > 0 ? count : 200);
  else {
    fputs(kUsage, stderr);
    rc = 2;
  }
  rtaccel_client_close(c);
  return rc;
}
