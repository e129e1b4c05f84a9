// Fusions on a chain's path (analysis, internal): where a chain waits for a
// callback's other trigger topics, and until when.
//
// A callback with several trigger topics fires once each of them has a
// message, and keeps only the latest message of each (exec/plan.h). A chain
// that reaches it on one topic waits there for the others. For another topic
// whose publisher P is the q'-th callback of a chain C' with no fusion up to
// P (so that every activation of C' reaches P):
//
//  - common release: C' and the chain start at timers of one period on one
//    node, which the runner starts at one instant (timers of its release
//    group: not unaligned ones). While both are bounded
//    within that period, the message the chain's instance fuses with is the
//    one of C''s activation of the same release (an older one was taken by
//    the chain's previous instance, a newer one comes after this instance's
//    end), so it is there by C''s bound through P plus the hand-over to the
//    fusion, counted from the common release;
//  - otherwise, C' starts at a timer: P publishes once per activation, the
//    messages arrive at most G = T' + (C''s bound through P plus the
//    hand-over) apart, and the chain waits at most that long after its own
//    arrived.
//
// From the last firing: a firing takes one message of each input. Where the
// chain starts at a timer of period T and owns the fusion (every message of
// the topic it arrives on is one of its releases'), the fusion fires at most
// once per release. Let D bound, from each release, the instant the fusion
// has all its inputs, and X the fusion's own bound from then to its end,
// with D + X <= T: release k-1's firing has taken its messages by
// r_{k-1} + D + X <= r_k, before release k's message can arrive, and nothing
// takes a message between the two firings. A message of C' comes at most G
// after that firing, so release k finds it by r_{k-1} + D + X + G, which is
// at most r_k + D when G + X <= T. The first release needs a first message:
// where C' starts at a timer of the chain's release group on its node, the
// runner releases both at one instant and C''s first message is there by
// its bound through P plus the hand-over; elsewhere by the wait above. By induction D is the
// larger of the chain's own arrival, those first messages, and the other
// inputs' bounds above. Where D + X > T the bound above stays.
//
// The bound through P rests on C''s bound within its period: a source whose
// bound through P passes that is no source. A topic without a source leaves
// the wait, and so the chain, without a bound. A topic that the chain itself
// publishes earlier on its path, on the same node, is there before the chain
// reaches the fusion: no wait.
//
// Each analysis bounds the pieces of a chain between its fusions (its own
// work, from the moment the piece's first callback has all its inputs);
// compose() adds the waits, and gives each callback's end from the chain's
// release.
#ifndef RTACCEL_ANALYSIS_JOINS_H_
#define RTACCEL_ANALYSIS_JOINS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rtaccel/analysis.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::analysis {

class Joins {
 public:
  // Per chain, what an analysis bounded of it.
  struct Pieces {
    bool known = false;  // analysed; an unknown chain counts as ending at once
    uint64_t limit_ns = 0;  // its horizon: a bound through P above it is none
    // Per path position: from the start of its piece (the nominal release
    // for the first piece, release jitter included) to the callback's end;
    // kUnbounded where there is none.
    std::vector<uint64_t> within;
    // Per path position where a fusion waits: the hand-over into it from
    // its predecessor (executors, links), which `within` leaves out there.
    std::vector<uint64_t> enter;
  };
  // Per chain, the waits added.
  struct Composed {
    std::vector<uint64_t> end;    // per position, from the release; kUnbounded: none
    std::vector<uint64_t> start;  // per position, when its piece started
    uint64_t wait_ns = 0;         // the waits at fusions, summed
    std::string reason;           // why a wait has no bound
  };

  // Options::fusions_wait false: no chain waits (the paper's chains).
  // Options::fusion_waits_from_last_firing: as above.
  Joins(const workload::Workload& workload, const NetworkTerms& network, const Options& options);

  bool any() const { return any_; }
  // A fusion waits at position K of CHAIN: a piece starts there.
  bool waits_at(size_t chain, size_t k) const { return waits_[chain][k]; }
  // The same for every position of CHAIN's path.
  const std::vector<bool>& waits(size_t chain) const { return waits_[chain]; }
  // The period of the timer that starts CHAIN (0: none).
  uint64_t timer_of(size_t chain) const;
  // Chains A and B start at timers of one release group on one node: the
  // runner releases both first at one instant. The premise is the model's
  // (Trigger::release_group): a timer the runner does not start (an
  // unaligned one) starts with no other.
  bool starts_with(size_t a, size_t b) const;
  // Chains A and B start at timers of one period on one node: the runner
  // releases them at the same instants.
  bool released_together(size_t a, size_t b) const;
  // Every release of chain LOWER is one of chain HIGHER's: both start at
  // timers on one node, LOWER's period a multiple of HIGHER's.
  bool released_with(size_t lower, size_t higher) const;
  // The fusion at position K of CHAIN is fed by callbacks of its own
  // single-threaded executor only: it becomes ready as one of them ends.
  bool fed_by_own_executor(size_t chain, size_t k) const;
  // The chains whose bounds a wait of CHAIN rests on.
  const std::vector<size_t>& sources_of(size_t chain) const { return depends_[chain]; }

  // Every chain's waits, given what each piece takes. A cycle of waits that
  // does not settle leaves the chains in it without a bound.
  std::vector<Composed> compose(const std::vector<Pieces>& pieces) const;

 private:
  struct Source {
    bool common = false;  // released with the chain; else one per period
    bool same_start = false;  // its first release is the chain's
    size_t chain = 0, position = 0;
    uint64_t period_ns = 0;
    uint64_t hop_ns = 0;  // from P to the fusion
  };
  struct Input {
    std::string topic;
    std::vector<Source> sources;
  };
  struct Wait {
    size_t position = 0;
    // The chain's timer period where the fusion fires at most once per
    // release (from its last firing, above); 0 otherwise.
    uint64_t once_per_ns = 0;
    std::vector<Input> inputs;
  };

  Composed compose_chain(size_t c, const std::vector<Pieces>& pieces, const std::vector<Composed>& now) const;

  const workload::Workload& workload_;
  bool any_ = false;
  std::vector<std::vector<bool>> waits_;
  std::vector<std::vector<Wait>> joins_;
  std::vector<std::vector<size_t>> depends_;
};

}  // namespace rtaccel::analysis

#endif  // RTACCEL_ANALYSIS_JOINS_H_
