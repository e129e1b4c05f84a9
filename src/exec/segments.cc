#include "core/cache.h"
#include "core/clock.h"
#include "core/fd.h"
#include "exec/segments.h"

#include "rtaccel/requests.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>

#include <sys/mman.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif


namespace rtaccel::exec {
namespace {

using core::monotonic_ns;

// Inputs of the numeric kernels: any values do; these stay finite in every
// kernel and fall inside the histogram's range.
void fill(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 97) / 97.0f;
}

// Takes the lines of [p, p + len) out of every cache level, so that a
// timing sees what a kernel meets at run time: its inputs and outputs
// evicted by the other callbacks' kernels since its last call. Timed warm,
// a streaming kernel was sized up to 1.7 times its target.
void evict(const void* p, size_t len) {
  const auto* bytes = static_cast<const char*>(p);
#if defined(__x86_64__) || defined(__i386__)
  for (size_t i = 0; i < len; i += 64) _mm_clflush(bytes + i);
  _mm_mfence();
#elif defined(__aarch64__)
  uint64_t ctr;
  asm volatile("mrs %0, ctr_el0" : "=r"(ctr));
  const size_t line = size_t(4) << ((ctr >> 16) & 0xf);
  for (size_t i = 0; i < len; i += line) asm volatile("dc civac, %0" : : "r"(bytes + i) : "memory");
  asm volatile("dsb ish" : : : "memory");
#else
  (void)bytes;
  (void)len;  // timed warm: sized a little large
#endif
}

// How a kernel's time grows with its size n: t ~ n^exponent.
double growth(const std::string& service) { return service == "matmul" ? 3.0 : 1.0; }

// The largest n whose request and response fit RTACCEL_MAX_BUFFER.
uint64_t max_size(const std::string& service) {
  const uint64_t floats = (RTACCEL_MAX_BUFFER - 64) / sizeof(float);
  if (service == "matmul") return static_cast<uint64_t>(std::sqrt(static_cast<double>(floats / 2)));
  if (service == "vecadd") return floats / 2;
  return floats;
}

Status copy_name(char* dst, size_t cap, const std::string& name) {
  if (name.size() >= cap)
    return Status::invalid("name '" + name + "' is longer than the server protocol's " + std::to_string(cap - 1) +
                           " characters");
  memcpy(dst, name.c_str(), name.size() + 1);
  return Status();
}

}  // namespace

bool build_request(const std::string& service, uint64_t n, SegmentRequest* out) {
  const int kind = rtaccel_builtin_of(service.c_str());
  // Histograms of 64 bins over [0, 1), which fill() draws from.
  const uint32_t bins = 64;
  uint64_t inputs, response;
  if (kind < 0 || rtaccel_request_sizes(kind, n, bins, &inputs, &response) < 0) return false;
  const size_t header = rtaccel_request_header_size(kind);
  out->service = service;
  out->bytes.assign(header + inputs * sizeof(float), 0);
  if (rtaccel_request_encode(kind, n, bins, 0.0f, 1.0f, out->bytes.data(), out->bytes.size()) < 0) return false;
  fill(reinterpret_cast<float*>(out->bytes.data() + header), inputs);
  out->n = n;
  out->size = out->bytes.size();
  out->response_max = response;
  return true;
}

Status build_requests(const workload::Workload& w, size_t executor, SegmentTable* table) {
  for (size_t cb = 0; cb < table->size(); ++cb) {
    if (w.callbacks[cb].executor != executor) continue;
    for (auto& req : (*table)[cb]) {
      SegmentRequest built;
      if (!build_request(req.service, req.n, &built) || built.size != req.size)
        return Status::error("callback '" + w.callbacks[cb].name + "': cannot build its " + req.service +
                             " request of size " + std::to_string(req.n));
      req.bytes = std::move(built.bytes);
    }
  }
  return Status();
}

Status AttachedMemory::reserve(rtaccel_direct* direct, size_t bytes) {
  if (memory_ && direct == direct_ && memory_.size() >= bytes) return Status();
  release();
  const size_t size = std::max<size_t>((bytes + 4095) & ~size_t(4095), 4096);
  // Shared memory, as the server's regions are (its pages, not an
  // anonymous mapping's, which may be huge pages).
  core::UniqueFd fd(memfd_create("rtaccel-direct", MFD_CLOEXEC));
  if (!fd || ftruncate(fd.get(), static_cast<off_t>(size)) < 0 ||
      !(memory_ = core::Mapping::map(fd.get(), size, PROT_READ | PROT_WRITE)))
    return Status::os_error("cannot map " + std::to_string(size >> 10) + " KiB for direct calls", errno);
  if (int err = rtaccel_direct_attach(direct, memory_.bytes(), size)) {
    memory_.reset();
    return Status::error("cannot attach " + std::to_string(size >> 10) + " KiB to the device: " + strerror(-err), -err);
  }
  direct_ = direct;
  return Status();
}

void AttachedMemory::release() {
  if (memory_ && direct_) rtaccel_direct_detach(direct_, memory_.bytes());
  direct_ = nullptr;
  memory_.reset();
}

KernelSizer::~KernelSizer() {
  memory_.release();
  rtaccel_direct_close(direct_);
}

Status KernelSizer::open(workload::Backend backend, int device) {
  const std::string name(workload::to_string(backend));
  if (backend != workload::Backend::kCuda) {
    const size_t llc = rtaccel_llc_bytes();
    others_.assign(2 * (llc ? llc : size_t{32} << 20), 1);
  }
  if (int err = rtaccel_direct_open(name.c_str(), device, 0, &direct_)) {
    std::string why = "cannot open the " + name + " device " + std::to_string(device) + ": " + strerror(-err);
    char detail[512] = "";
    if (rtaccel_backend_probe(name.c_str(), detail, sizeof(detail)) == 0 && detail[0]) why += std::string(" (") + detail + ")";
    return Status::error(why, -err);
  }
  return Status();
}

Status KernelSizer::time_once(const SegmentRequest& request, uint64_t* best_ns) {
  // Timed on attached memory, as the server's requests run: from pageable
  // memory a cuda kernel's copies took about 3x as long, and kernels sized
  // that way ran at a third of their WCET under the server.
  const size_t response_at = (request.bytes.size() + 63) & ~size_t(63);
  if (Status st = memory_.reserve(direct_, response_at + request.response_max); !st) return st;
  unsigned char* const input = memory_.data();
  unsigned char* const response = input + response_at;
  memcpy(input, request.bytes.data(), request.bytes.size());
  uint64_t best = UINT64_MAX;
  for (int trial = 0; trial < 3; ++trial) {
    // In a run, other work comes between two calls of a kernel. Flushing
    // the kernel's own lines leaves the TLB and the page tables' lines
    // warm, which that work does not: a vecadd sized for 720 us ran
    // 1.08-1.17x longer after reading 64 MiB than after the flush alone, in
    // 10 of 10 alternations (a matmul, whose data fit the cache, 1.01-1.04x).
    volatile unsigned char sink = 0;
    for (size_t i = 0; i < others_.size(); i += 64) sink = static_cast<unsigned char>(sink + others_[i]);
    evict(input, request.bytes.size());
    evict(response, request.response_max);
    const uint64_t t0 = core::monotonic_ns();
    size_t len = 0;
    if (const int err = rtaccel_direct_call(direct_, request.service.c_str(), input, request.bytes.size(), response,
                                            request.response_max, &len))
      return Status::error("service '" + request.service + "' failed on the device: " +
                           (err < 0 ? strerror(-err) : "status " + std::to_string(err)));
    best = std::min(best, core::monotonic_ns() - t0);
  }
  *best_ns = best;
  return Status();
}

Status KernelSizer::size(const std::string& service, uint64_t target_ns, SegmentRequest* out) {
  const Status unknown = Status::invalid(
      "service '" + service + "': rtaccel run sizes only the built-in services busy, vecadd, matmul, reduction, "
      "histogram");
  if (service == "busy") return build_request(service, target_ns, out) ? Status() : unknown;
  auto key = std::make_pair(service, target_ns);
  if (auto it = sizes_.find(key); it != sizes_.end())
    return build_request(service, it->second, out) ? Status() : unknown;
  uint64_t n = service == "matmul" ? 32 : 4096;
  if (!build_request(service, n, out)) return unknown;
  auto scaled = [&](uint64_t t) {
    const double scale = std::pow(static_cast<double>(target_ns) / static_cast<double>(std::max<uint64_t>(t, 1)),
                                  1.0 / growth(service));
    return static_cast<uint64_t>(
        std::clamp(static_cast<double>(n) * scale, 1.0, static_cast<double>(max_size(service))));
  };
  // Two or three rounds of scaling by the kernel's growth law land near the
  // target.
  for (int round = 0; round < 3; ++round) {
    uint64_t t = 0;
    if (Status st = time_once(*out, &t); !st) return st;
    const uint64_t next = scaled(t);
    if (next == n) break;
    n = next;
    build_request(service, n, out);
  }
  // The law is approximate, and a kernel sized over its target runs over its
  // WCET in every instance: the size kept is one timed within the target,
  // shrunk until it is (a few tries; the run's monitor reports a kernel that
  // still runs over).
  for (int shrink = 0; shrink < 4 && n > 1; ++shrink) {
    uint64_t t = 0;
    if (Status st = time_once(*out, &t); !st) return st;
    if (t <= target_ns) break;
    n = std::min(n - 1, scaled(t * 102 / 100));
    build_request(service, n, out);
  }
  sizes_[key] = n;
  return Status();
}

Status chain_desc_for(const workload::Workload& w, size_t c, rtaccel_chain_desc* out) {
  const workload::Chain& chain = w.chains[c];
  rtaccel_chain_desc& d = *out;
  d = rtaccel_chain_desc{};
  if (Status st = copy_name(d.name, sizeof(d.name), chain.name); !st) return st;
  if (chain.path.size() > RTACCEL_MAX_CALLBACKS)
    return Status::invalid("chain '" + chain.name + "' has more than " + std::to_string(RTACCEL_MAX_CALLBACKS) +
                           " callbacks, the most the server takes");
  d.priority = chain.priority;
  d.critical = chain.critical ? 1 : 0;
  d.period_ns = chain.period_ns;
  d.deadline_ns = chain.deadline_ns;
  d.ncallbacks = static_cast<uint32_t>(chain.path.size());
  // Started by the runner with the run's other timers (declared together).
  const bool together = !chain.path.empty() && w.callbacks[chain.path.front()].trigger.timer_ns &&
                        w.callbacks[chain.path.front()].trigger.release_group == workload::Trigger::kRunStart;
  d.release = together ? RTACCEL_RELEASE_TOGETHER : RTACCEL_RELEASE_UNALIGNED;
  for (size_t k = 0; k < chain.path.size(); ++k) {
    const auto& cb = w.callbacks[chain.path[k]];
    const auto& ex = w.executors[cb.executor];
    auto& out_cb = d.callbacks[k];
    if (Status st = copy_name(out_cb.name, sizeof(out_cb.name), cb.name); !st) return st;
    if (Status st = copy_name(out_cb.executor, sizeof(out_cb.executor), ex.name); !st) return st;
    if (cb.segments.size() > RTACCEL_MAX_SEGMENTS)
      return Status::invalid("callback '" + cb.name + "' has more than " + std::to_string(RTACCEL_MAX_SEGMENTS) +
                             " accelerator segments, the most the server takes");
    if (cb.trigger.topics.size() > RTACCEL_MAX_TRIGGERS)
      return Status::invalid("callback '" + cb.name + "' has more than " + std::to_string(RTACCEL_MAX_TRIGGERS) +
                             " trigger topics, the most the server takes");
    out_cb.executor_core = ex.core;
    out_cb.executor_priority = ex.priority;
    out_cb.cpu_ns = cb.cpu_ns;
    out_cb.wait = cb.wait == workload::WaitMode::kSpin ? RTACCEL_WAIT_SPIN : RTACCEL_WAIT_SUSPEND;
    out_cb.nsegments = static_cast<uint32_t>(cb.segments.size());
    for (size_t s = 0; s < cb.segments.size(); ++s) {
      const auto& seg = cb.segments[s];
      auto& out_seg = out_cb.segments[s];
      if (Status st = copy_name(out_seg.accelerator, sizeof(out_seg.accelerator), w.accelerators[seg.accelerator].name);
          !st)
        return st;
      if (Status st = copy_name(out_seg.service, sizeof(out_seg.service), seg.service); !st) return st;
      out_seg.wcet_ns = seg.wcet_ns;
    }
    if (Status st = copy_name(out_cb.publishes, sizeof(out_cb.publishes), cb.publishes); !st) return st;
    // The same in every chain that has the callback: the server compares.
    out_cb.ntriggers = static_cast<uint32_t>(cb.trigger.topics.size());
    for (size_t t = 0; t < cb.trigger.topics.size(); ++t)
      if (Status st = copy_name(out_cb.triggers[t], sizeof(out_cb.triggers[t]), cb.trigger.topics[t]); !st)
        return st;
  }
  return Status();
}

Expected<rtaccel_registration_desc> registration_for(const workload::Workload& w, size_t callback,
                                                     const SegmentTable& requests) {
  rtaccel_registration_desc desc{};
  rtaccel_registration_desc* out = &desc;
  const workload::Chain* chain = nullptr;
  for (const auto& c : w.chains) {
    if (std::find(c.path.begin(), c.path.end(), callback) == c.path.end()) continue;
    if (!chain || c.priority > chain->priority) chain = &c;
  }
  if (!chain) return Status::invalid("callback '" + w.callbacks[callback].name + "' is in no chain");
  if (Status st = chain_desc_for(w, size_t(chain - w.chains.data()), &out->chain); !st) return st;
  for (size_t k = 0; k < chain->path.size(); ++k)
    if (chain->path[k] == callback) out->callback = static_cast<uint32_t>(k);
  // One request and one response buffer per service, as large as its largest
  // segment needs.
  for (const auto& req : requests[callback]) {
    uint32_t i = 0;
    while (i < out->nservices && strcmp(out->services[i].name, req.service.c_str()) != 0) ++i;
    if (i == out->nservices) {
      if (Status st = copy_name(out->services[i].name, sizeof(out->services[i].name), req.service); !st) return st;
      ++out->nservices;
    }
    auto& need = out->services[i];
    need.request_max = std::max<uint32_t>(need.request_max, static_cast<uint32_t>(req.size));
    need.response_max = std::max<uint32_t>(need.response_max, static_cast<uint32_t>(req.response_max));
  }
  return desc;
}

namespace {

// paam: one registration per callback with segments; the request bytes stay
// in the shared region, rewritten only when two segments of a callback share
// a service with different inputs.
class ServerPath final : public AccelPath {
 public:
  explicit ServerPath(const PathConfig& config) : config_(config) {}
  ~ServerPath() override {
    for (auto& r : registrations_) rtaccel_client_unregister(r.reg);
    rtaccel_client_close(client_);
  }

  Status open() override {
    const auto& w = *config_.workload;
    std::vector<rtaccel_registration_desc> descs;
    std::vector<size_t> callbacks;
    for (size_t cb = 0; cb < w.callbacks.size(); ++cb) {
      if (w.callbacks[cb].executor != config_.executor || w.callbacks[cb].segments.empty()) continue;
      auto desc = registration_for(w, cb, *config_.requests);
      if (!desc) return desc.status();
      if (config_.best_effort) desc->chain.critical = 0;
      descs.push_back(*desc);
      callbacks.push_back(cb);
    }
    registrations_.resize(w.callbacks.size());
    if (descs.empty()) return Status();  // nothing of this executor's goes to the server
    if (int err = rtaccel_client_connect(config_.socket.c_str(), &client_))
      return Status::os_error("cannot connect to rtaccel-server at " + config_.socket, -err);
    std::vector<rtaccel_registration*> regs(descs.size());
    char reason[256] = "";
    if (int err = rtaccel_client_register_all(client_, descs.data(), descs.size(), regs.data(), reason,
                                              sizeof(reason)))
      return Status::error(std::string("rtaccel-server refused the executor's callbacks: ") +
                               (reason[0] ? reason : strerror(-err)),
                           -err);
    for (size_t i = 0; i < callbacks.size(); ++i) {
      auto& r = registrations_[callbacks[i]];
      r.reg = regs[i];
      r.callback = callbacks[i];
      const auto& segments = (*config_.requests)[callbacks[i]];
      r.loaded.assign(RTACCEL_MAX_SERVICES, -1);
      for (const auto& seg : segments) r.service.push_back(rtaccel_service_index(r.reg, seg.service.c_str()));
      // Each service's buffer gets its first segment's input now, before the
      // run: copied at the first call, tens of MiB of a fresh region took the
      // first instance milliseconds that no WCET declares.
      for (size_t k = 0; k < segments.size(); ++k)
        if (r.service[k] >= 0 && r.loaded[r.service[k]] < 0) load(&r, k);
      // A service that one segment alone uses keeps that segment's input in
      // its buffer all run long: the executor's copy would only be a second
      // one resident (and locked), megabytes per kernel.
      for (size_t k = 0; k < segments.size(); ++k)
        if (r.service[k] >= 0 && std::count(r.service.begin(), r.service.end(), r.service[k]) == 1)
          std::vector<unsigned char>().swap((*config_.requests)[callbacks[i]][k].bytes);
    }
    return Status();
  }

  int run(size_t, size_t callback, size_t segment, TraceEvent* event) override {
    auto& r = registrations_[callback];
    const auto& req = (*config_.requests)[callback][segment];
    const int service = r.service[segment];
    // Another segment of this callback used the service since: its input
    // goes back in, as a callback would prepare it, on the callback's CPU
    // time (the executor adds the event's).
    if (r.loaded[service] != static_cast<int>(segment)) {
      const uint64_t before = core::thread_cpu_ns();
      load(&r, segment);
      event->cpu_ns = core::thread_cpu_ns() - before;
    }
    rtaccel_ticket ticket;
    int status = rtaccel_submit(r.reg, service, req.size, &ticket);
    if (status == 0) status = rtaccel_wait(r.reg, &ticket, 0, nullptr);
    const uint64_t resumed = core::monotonic_ns();
    // A trace event's spans of the request are 32 bits: UINT32_MAX is that or longer.
    auto u32 = [](uint64_t ns) { return static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX)); };
    rtaccel_request_times times{};
    rtaccel_request_timestamps(r.reg, &ticket, &times);
    // The server's stamps are this machine's CLOCK_MONOTONIC, except a
    // remote registration's, whose kernel ran on another node.
    if (times.end_ns && resumed >= times.end_ns)
      event->resumed_after_ns = u32(resumed - times.end_ns);
    // A remote request's two legs: from the submission to the response's
    // arrival here, less the gateway's time from the request's arrival there
    // to its reply. Each difference is of one node's clock, so the sum holds
    // whatever the offset between the two.
    rtaccel_remote_times legs{};
    if (status == 0 && rtaccel_request_remote_times(r.reg, &ticket, &legs) == 0 && legs.arrival_ns >= times.submit_ns &&
        legs.gateway_reply_ns >= legs.gateway_arrival_ns) {
      const uint64_t here = legs.arrival_ns - times.submit_ns, there = legs.gateway_reply_ns - legs.gateway_arrival_ns;
      if (here > there) event->legs_ns = u32(here - there);
      if (legs.gateway_arrival_ns <= legs.gateway_taken_ns && legs.gateway_taken_ns <= times.start_ns &&
          times.end_ns <= legs.gateway_reply_ns) {
        event->arrival_to_taken_ns = u32(legs.gateway_taken_ns - legs.gateway_arrival_ns);
        event->arrival_to_start_ns = u32(times.start_ns - legs.gateway_arrival_ns);
        event->end_to_reply_ns = u32(legs.gateway_reply_ns - times.end_ns);
      }
    }
    rtaccel_registration_info info{};
    rtaccel_registration_query(r.reg, &info);
    event->submit_ns = times.submit_ns;
    event->begin_ns = times.start_ns;
    event->end_ns = times.end_ns;
    event->bucket = static_cast<int32_t>(info.bucket);
    event->status = status;
    return status;
  }

 private:
  struct Registration {
    rtaccel_registration* reg = nullptr;
    size_t callback = 0;
    std::vector<int> service;  // per segment: its service's index
    std::vector<int> loaded;   // per service: whose segment's input is in the buffer
  };

  // Puts segment SEGMENT's input into its service's request buffer.
  void load(Registration* r, size_t segment) {
    const auto& req = (*config_.requests)[r->callback][segment];
    const int service = r->service[segment];
    size_t cap = 0;
    void* buf = rtaccel_request_buffer(r->reg, service, &cap);
    memcpy(buf, req.bytes.data(), std::min(cap, req.bytes.size()));
    r->loaded[service] = static_cast<int>(segment);
  }

  PathConfig config_;
  rtaccel_client* client_ = nullptr;
  std::vector<Registration> registrations_;
};

// ros2, picas: each executor thread opens the device itself and runs the
// kernels in its own context, time-sharing the device with every other
// process at one priority.
class DirectPath final : public AccelPath {
 public:
  explicit DirectPath(const PathConfig& config) : config_(config) {}
  ~DirectPath() override {
    staged_.clear();  // detached before their devices close
    for (auto* d : direct_) rtaccel_direct_close(d);
  }

  Status open() override {
    const auto& w = *config_.workload;
    size_t response = 0;
    for (const auto& segments : *config_.requests)
      for (const auto& r : segments) response = std::max(response, r.response_max);
    for (size_t t = 0; t < config_.threads; ++t) {
      // Every segment of the workload names an accelerator; all share one
      // backend (the runner checks), and each thread opens every device.
      bool unstaged = false;  // a device whose responses go to ordinary memory
      for (size_t index = 0; index < w.accelerators.size(); ++index) {
        const auto& acc = w.accelerators[index];
        rtaccel_direct* d = nullptr;
        const std::string backend(workload::to_string(acc.backend));
        if (int err = rtaccel_direct_open(backend.c_str(), device_of(w, index), config_.direct_priority, &d))
          return Status::os_error("cannot open accelerator '" + acc.name + "' directly", -err);
        direct_.push_back(d);
        if (acc.backend != workload::Backend::kCuda) {
          unstaged = true;
        } else if (Status st = stage(direct_.size() - 1, index, response); !st) {
          return st;
        }
      }
      // Staged devices answer into their attached memory: none needed then.
      responses_.emplace_back(unstaged ? response + 1 : 0);
    }
    return Status();
  }

  int run(size_t thread, size_t callback, size_t segment, TraceEvent* event) override {
    const auto& w = *config_.workload;
    const auto& req = (*config_.requests)[callback][segment];
    const size_t device = w.callbacks[callback].segments[segment].accelerator;
    auto* d = direct_[thread * w.accelerators.size() + device];
    const void* input = req.bytes.data();
    void* response = responses_[thread].data();
    size_t capacity = responses_[thread].size();
    const size_t slot = thread * w.accelerators.size() + device;
    if (const Staged* s = slot < staged_.size() ? staged_[slot].get() : nullptr) {
      input = s->memory.data() + s->request_at[callback][segment];
      response = s->memory.data() + s->response_at;
      capacity = s->response_max;
    }
    event->submit_ns = event->begin_ns = core::monotonic_ns();
    size_t len = 0;
    const int status = rtaccel_direct_call(d, req.service.c_str(), input, req.bytes.size(), response, capacity, &len);
    event->end_ns = core::monotonic_ns();
    event->bucket = -1;
    event->status = status;
    return status;
  }

 private:
  // One thread's requests to one device, and its response, on memory
  // attached to that device, as the server's regions are.
  struct Staged {
    AttachedMemory memory;
    std::vector<std::vector<size_t>> request_at;  // [callback][segment]
    size_t response_at = 0;
    size_t response_max = 0;
  };

  // Copies this executor's requests to accelerator DEVICE into memory
  // attached to direct_[slot], once, before the run.
  Status stage(size_t slot, size_t device, size_t response_max) {
    const auto& w = *config_.workload;
    const auto& requests = *config_.requests;
    staged_.resize(direct_.size());
    auto s = std::make_unique<Staged>();
    s->request_at.resize(requests.size());
    size_t size = 0;
    for (size_t cb = 0; cb < requests.size(); ++cb) {
      s->request_at[cb].assign(requests[cb].size(), 0);
      if (w.callbacks[cb].executor != config_.executor) continue;
      for (size_t k = 0; k < requests[cb].size(); ++k) {
        if (w.callbacks[cb].segments[k].accelerator != device) continue;
        s->request_at[cb][k] = size;
        size = (size + requests[cb][k].bytes.size() + 63) & ~size_t(63);
      }
    }
    s->response_at = size;
    s->response_max = response_max + 1;
    if (Status st = s->memory.reserve(direct_[slot], size + s->response_max); !st) return st;
    for (size_t cb = 0; cb < requests.size(); ++cb) {
      if (w.callbacks[cb].executor != config_.executor) continue;
      for (size_t k = 0; k < requests[cb].size(); ++k)
        if (w.callbacks[cb].segments[k].accelerator == device)
          memcpy(s->memory.data() + s->request_at[cb][k], requests[cb][k].bytes.data(), requests[cb][k].bytes.size());
    }
    staged_[slot] = std::move(s);
    return Status();
  }

  PathConfig config_;
  std::vector<rtaccel_direct*> direct_;  // [thread][accelerator]
  std::vector<std::vector<unsigned char>> responses_;
  std::vector<std::unique_ptr<Staged>> staged_;  // [thread][accelerator], cuda only
};

}  // namespace

std::unique_ptr<AccelPath> make_server_path(const PathConfig& config) {
  return std::make_unique<ServerPath>(config);
}

std::unique_ptr<AccelPath> make_direct_path(const PathConfig& config) {
  return std::make_unique<DirectPath>(config);
}

}  // namespace rtaccel::exec
