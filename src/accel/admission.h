// Admission control of rtaccel-server (internal): the chains admitted so far,
// the device each callback was assigned to (worst fit), and the PAAM analysis
// run on them for every new registration.
//
// Set-up time only: allocates, runs the analysis. Not thread-safe; the server
// calls it from its control thread.
#ifndef RTACCEL_ACCEL_ADMISSION_H_
#define RTACCEL_ACCEL_ADMISSION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rtaccel/accel.h"
#include "rtaccel/status.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::accel {

struct AdmissionOptions {
  uint64_t epsilon_ns = 50000;  // server overhead per request (analysis' epsilon)
  uint64_t kappa_ns = 0;        // device preemption cost (analysis' kappa)
  uint64_t jitter_ns = 0;       // release jitter of the clients' timers
  int server_core = -1;         // the server's core; -1: none an executor uses
  bool check_deadlines = true;  // false: no EDEADLK, no analysis (ServerOptions)
  std::vector<uint32_t> device_levels;  // priority levels of each device
  workload::Backend backend = workload::Backend::kCpu;
  // The cpu backend's devices: each one's core, where its kernels share
  // the core with the regulator's thread. Empty: core 0 each.
  std::vector<int> device_cores;
  // The memory-bandwidth regulator, whose thread preempts every executor
  // and kernel on the cores it regulates for up to cost_ns each period
  // (what `rtaccel bench regulator` measures); 0: no regulator runs.
  // No cores: every core.
  uint64_t regulator_cost_ns = 0;
  uint64_t regulator_period_ns = 1000000;
  std::vector<int> regulated_cores;
};

struct Admitted {
  uint32_t device = 0;
  int priority = 0;  // request priority: the most critical chain's with the callback
};

// Where a callback's requests go on its device.
struct Placement {
  int priority = 0;     // its request priority (Admitted's)
  uint32_t bucket = 0;  // its bucket among the device's request priorities
};

class Admission {
 public:
  explicit Admission(AdmissionOptions options);

  // Adds the chain of `desc` (or a new reference to it, if admitted before)
  // when every critical chain stays schedulable (unless check_deadlines is
  // off). A refusal says why, with err() EINVAL (the description conflicts
  // with an admitted one) or EDEADLK (a deadline would be missed).
  Status admit(const rtaccel_registration_desc& desc, Admitted* out);
  // Adds the chains of a declaration together, each another reference where
  // admitted before, when every critical chain stays schedulable with them
  // all: one analysis, so that a chain may wait at a fusion for one declared
  // beside it. Refusals as admit()'s; none of them is added then.
  Status declare(const std::vector<rtaccel_chain_desc>& chains);
  // Drops one reference to a chain; the last one removes it and the callbacks
  // no other chain has.
  void release(const std::string& chain);

  // Current request priority and bucket of a callback with segments.
  Admitted lookup(const std::string& callback) const;
  uint32_t bucket(const std::string& callback) const;
  // Those of every callback on `device`, in one pass over the admitted set:
  // the server places all of a device's regions anew after each change, and
  // lookup() and bucket() per callback would take time cubic in them.
  std::map<std::string, Placement> placements(uint32_t device) const;
  // Sum over the callbacks assigned to `device` of their segments' WCET over
  // their period.
  double device_utilisation(uint32_t device) const;
  size_t chains() const { return chains_.size(); }
  // Changes whenever the admitted set does (a chain admitted or let go of),
  // not for another reference to a chain: what was derived from the set,
  // placements() among it, holds until then.
  uint64_t generation() const { return generation_; }

  // The admitted set as a workload (what the analysis sees).
  workload::Workload workload() const;

 private:
  struct ChainEntry {
    rtaccel_chain_desc desc;
    int references = 0;
    // The chains of one declaration that say RTACCEL_RELEASE_TOGETHER share
    // one (workload::Trigger::release_group); every other chain has none.
    uint32_t release_group = workload::Trigger::kUnaligned;
  };
  struct CallbackEntry {
    rtaccel_callback_desc desc;
    uint32_t device = 0;
  };

  // The admitted set with chains added, before the analysis has judged it.
  struct Staged {
    std::map<std::string, ChainEntry> chains;
    std::map<std::string, CallbackEntry> callbacks;
    std::vector<double> load;        // each device's accelerator utilisation
    std::vector<std::string> added;  // chains new to the set
  };
  Staged stage() const;
  // Another reference to an admitted chain, whose description must be CHAIN.
  static Status refer(ChainEntry* entry, const rtaccel_chain_desc& chain);
  // Adds CHAIN to S (another reference where S has it), in RELEASE_GROUP:
  // the conflicts with what S holds are refused, its new callbacks placed
  // on devices.
  Status add(const rtaccel_chain_desc& chain, uint32_t release_group, Staged* s) const;
  // Keeps S when every critical chain of it is schedulable.
  Status commit(Staged s);

  workload::Workload build(const std::map<std::string, ChainEntry>& chains,
                           const std::map<std::string, CallbackEntry>& callbacks) const;

  AdmissionOptions options_;
  std::map<std::string, ChainEntry> chains_;
  std::map<std::string, CallbackEntry> callbacks_;
  uint64_t generation_ = 0;
  uint32_t last_release_group_ = workload::Trigger::kUnaligned;  // the last declaration's
};

// Same meaning, compared field by field (bytes after a name's NUL do not count).
bool same_callback(const rtaccel_callback_desc& a, const rtaccel_callback_desc& b);
bool same_chain(const rtaccel_chain_desc& a, const rtaccel_chain_desc& b);

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_ADMISSION_H_
