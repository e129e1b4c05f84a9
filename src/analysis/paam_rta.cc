// PAAM response-time analysis (Enright et al., RTAS 2024, Sec. IV-F).
//
// Notation follows the paper: a chain Gamma_c is analyzed per sub-chain (its
// callbacks on one executor); tau_{i,j} is the j-th accelerator segment of
// callback tau_i; A*_{i,j} = A_{i,j} + 2 kappa; epsilon is the server overhead
// per segment. Arithmetic is exact in integer nanoseconds and saturates at
// kUnbounded, which is larger than every horizon.
#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <set>
#include <string>

#include "analysis/joins.h"
#include "analysis/results.h"
#include "analysis/saturating.h"
#include "rtaccel/analysis.hpp"

namespace rtaccel::analysis {
namespace {

using workload::Callback;
using workload::Chain;
using workload::WaitMode;
using workload::Workload;

std::string us(uint64_t ns) {
  if (ns == kUnbounded) return "inf";
  std::string text = std::to_string(ns / 1000);
  if (uint64_t frac = ns % 1000) {
    std::string f = std::to_string(frac);
    text += "." + std::string(3 - f.size(), '0') + f;
    while (text.back() == '0') text.pop_back();
  }
  return text + " us";
}

// A set of chains, a bit each: a bound's premises (the chains it rests on)
// are added many times over, every higher segment's chain for every blocker.
class ChainSet {
 public:
  ChainSet() = default;
  explicit ChainSet(size_t chains) : words_((chains + 63) / 64, 0) {}
  void insert(size_t chain) { words_[chain / 64] |= uint64_t(1) << (chain % 64); }
  void insert(const ChainSet& other) {
    for (size_t w = 0; w < other.words_.size(); ++w) words_[w] |= other.words_[w];
  }
  std::vector<size_t> members() const {  // ascending
    std::vector<size_t> out;
    for (size_t w = 0; w < words_.size(); ++w)
      for (uint64_t bits = words_[w]; bits; bits &= bits - 1) out.push_back(w * 64 + size_t(__builtin_ctzll(bits)));
    return out;
  }

 private:
  std::vector<uint64_t> words_;
};

// A set of higher entries (below) as their time within a window is summed:
// the A* of one chain's entries added up, since they are all released as
// often as that chain, and apart from them the entries of callbacks that
// several of their chains own, each segment of which counts once. Made once
// per set, so that the recurrences take a term per chain, not per entry.
struct HpCharges {
  std::vector<size_t> entries;                        // sorted, each once
  std::vector<uint64_t> bits;                         // the same, a bit per entry
  std::vector<std::pair<size_t, uint64_t>> by_chain;  // (chain, its entries' A*)
  std::vector<size_t> once;                           // owned shared callbacks', by segment
  // Entries of segments that fire at most once in the window, whatever its
  // length (Options::shared_heads): sorted, a subset of `entries`; and the
  // first of each such segment, the one charged.
  std::vector<size_t> singles;
  std::vector<size_t> single_segments;
  ChainSet chains;                                    // the chains of its entries
};

constexpr size_t kNoChain = SIZE_MAX;

// One accelerator segment as requested by one chain: a (chain, callback,
// segment) triple. A callback shared by several chains gives one entry per
// chain, so it is charged once per chain that contains it (safe).
struct Entry {
  size_t chain = 0;
  size_t callback = 0;
  size_t segment = 0;  // j, its index among the callback's segments
  size_t position = 0;  // of the callback on the chain's path
  size_t accelerator = 0;
  uint64_t a_star = 0;  // A*_{i,j}
  int bucket = 0;       // b(tau_{i,j}), from the request priority
  HpCharges hps;  // hps(tau_{i,j}): entries of HP chains, same accelerator
  uint64_t max_lp_same_bucket = 0;  // max over lps(tau_{i,j}) in b(tau_{i,j}) of A*
  uint64_t lemma2 = kUnbounded;     // H_{c,i,j} of Lemma 2 with Lemma 1's counts (no chain bounded yet)
  // Where the segment blocks another chain's sub-chain (Hold): hps and lps
  // with the other chains' entries of the callbacks its chain owns, which
  // Options::shared_segments_are_own leaves out above on the premise of its
  // chain's bound, which the blocked chain's analysis does not have.
  bool blocking_differs = false;
  HpCharges blocking_hps;  // valid where blocking_differs
  uint64_t blocking_max_lp = 0;
};

// What a callback of a sub-chain holds its executor for where it blocks a
// higher sub-chain there (Lemma 4): the same for every sub-chain it blocks,
// so made once.
struct Hold {
  uint64_t cpu_ns = 0;          // its CPU WCET plus epsilon per segment
  std::vector<size_t> entries;  // its segments' (with lp_blocking_includes_accelerator)
  uint64_t lemma3_base_ns = 0;  // sum of A* + max lps in their bucket (Lemma 3's constant part)
  HpCharges hps;                // the entries that may delay them
};

// A lower-priority callback that may hold a sub-chain's executor at its
// release, and what its segments add to the hold there.
struct Blocker {
  const Hold* hold = nullptr;
  uint64_t lemma2_ns = 0;  // its segments' Lemma 2 bounds, summed
  // The blocked chain, whose segments its hps sums leave out
  // (Options::blocking_without_own_segments); kNoChain: none left out.
  size_t skip = kNoChain;
  // Its hps and the ones that may delay the blocked sub-chain's own
  // segments: one of the two where it holds the other, else `both`.
  const HpCharges* hps_with_own = nullptr;
  HpCharges both;
};

struct Subchain {
  size_t chain = 0;
  size_t executor = 0;
  size_t first = 0;  // position of its first callback on the chain's path
  std::vector<size_t> callbacks;
  std::vector<size_t> entries;
  std::vector<Hold> holds;  // per callback
  HpCharges own_hps;        // the entries that may delay its own segments (Lemma 3's set)
  bool all_owned = false;   // every callback fires only for the chain (owned_)
  bool after_a_wait = false;  // the chain waits at a fusion before it
  uint64_t cpu_ns = 0;  // E of the sub-chain
  bool spins = false;   // some segment busy-waits
  uint64_t spin_ns = 0;  // spin(Gamma_h) when charged as an hpp chain

  // What each higher sub-chain in its interference term costs it per
  // activation (Options::interference_once_per_chain): the sub-chain's
  // index, its usual charge and the part that fires once in the window.
  struct Interferer {
    size_t sub;
    uint64_t usual;
    uint64_t single;
  };
  std::vector<Interferer> interferers;

  bool computed = false;
  bool bounded = false;
  uint64_t wcrt_ns = 0;
  uint64_t handling_star_ns = 0;  // H^*
  uint64_t lemma2_ns = 0;
  uint64_t lemma3_ns = 0;
  bool by_lemma3 = false;
  Breakdown breakdown;
};

class Analysis {
 public:
  Analysis(const Workload& w, const Options& options)
      : workload_(w), options_(options), network_(w), joins_(w, network_, options) {
    epsilon_ = workload_.server ? workload_.server->overhead_ns : 0;
    for (const Chain& chain : workload_.chains) max_period_ = std::max(max_period_, chain.period_ns);
    owned_ = owned_callbacks(workload_);
    counted_unbounded_ = ChainSet(workload_.chains.size());
    on_paths_.assign(workload_.callbacks.size(), 0);
    for (const auto& chain : workload_.chains)
      for (size_t cb : chain.path) on_paths_[cb]++;
    build_entries();
    for (Entry& e : entries_) {
      e.hps = charges(std::move(e.hps.entries), std::move(e.hps.singles));
      if (e.blocking_differs) e.blocking_hps = charges(std::move(e.blocking_hps.entries));
    }
    for (Entry& e : entries_) e.lemma2 = lemma2(e, max_period_);
    path_owned_.assign(workload_.chains.size(), false);
    for (size_t c = 0; c < workload_.chains.size(); ++c)
      path_owned_[c] = std::all_of(owned_[c].begin(), owned_[c].end(), [](bool owned) { return owned; });
    build_subchains();
  }

  // Options::jitter_from_earlier_bounds: each analysis is sound on its own,
  // so each chain keeps the smaller of its bounds. A third analysis gained
  // little on random workloads and costs as much as the first: the server
  // runs this at every registration.
  std::vector<ChainResult> run() {
    counted_unbounded_ = ChainSet(workload_.chains.size());  // not the constructor's Lemma 2 counts
    std::vector<ChainResult> best = run_once();
    bool any = false;
    for (size_t c : counted_unbounded_.members()) any = any || best[c].bounded;
    if (!any) return best;
    earlier_.assign(best.size(), kUnbounded);
    for (size_t c = 0; c < best.size(); ++c)
      if (best[c].bounded) earlier_[c] = best[c].wcrt_ns;
    std::vector<ChainResult> next = run_once();
    for (size_t c = 0; c < best.size(); ++c)
      if (next[c].bounded && (!best[c].bounded || next[c].wcrt_ns < best[c].wcrt_ns)) best[c] = std::move(next[c]);
    return best;
  }

  std::vector<ChainResult> run_once() {
    std::vector<size_t> order(workload_.chains.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return workload_.chains[a].priority > workload_.chains[b].priority; });

    // A chain's waits at fusions rest on the bounds of other chains, lower
    // ones among them, whose arrivals the recurrences count with this
    // chain's bound (jitter_from_bounds). So the chains are analysed again,
    // each wait from the pieces of the pass before, until the bounds that
    // the recurrences used are the ones the waits give; from no wait at
    // all, they only grow.
    //
    // A lower chain released with a chain does not block it on the premise
    // of its own bound (Options::released_together); where it turns out to
    // have none, or one beyond the chain's period, the analysis runs again
    // with it as a blocker.
    for (;;) {
      pieces_.assign(workload_.chains.size(), {});
      composed_total_.assign(workload_.chains.size(), 0);
      constexpr int kPasses = 32;
      for (int pass = 0;; ++pass) {
        results_.assign(workload_.chains.size(), ChainResult{});
        depends_.assign(workload_.chains.size(), ChainSet(workload_.chains.size()));
        together_.assign(workload_.chains.size(), {});
        for (Subchain& s : subs_) s.computed = s.bounded = false;
        for (size_t c : order) analyze_chain(c);
        if (!joins_.any() || settled()) break;
        if (pass + 1 == kPasses) {
          for (size_t c = 0; c < results_.size(); ++c) {
            if (joins_.sources_of(c).empty()) continue;
            withdraw(&results_[c], "its waits at fusions did not settle in " + std::to_string(kPasses) + " passes");
          }
          break;
        }
      }
      propagate_validity();
      bool again = false;
      for (size_t c = 0; c < together_.size(); ++c)
        for (size_t d : together_[c])
          if ((!results_[d].bounded || results_[d].wcrt_ns > joins_.timer_of(c)) && blocks_anyway_.insert(d).second)
            again = true;
      if (!again) return std::move(results_);
    }
  }

 private:
  int priority(size_t chain) const { return workload_.chains[chain].priority; }
  uint64_t period(size_t chain) const { return workload_.chains[chain].period_ns; }
  // Where the iterations for a chain give up: its deadline or its period.
  uint64_t limit(size_t chain) const {
    return options_.horizon == Horizon::kDeadline ? workload_.chains[chain].deadline_ns : period(chain);
  }
  // Activations of `chain` within a window: with release jitter J, a window of
  // length t sees the releases of a window of t + J (Lemma 1). A chain already
  // bounded by R does all of an activation's work within R of its nominal
  // release: activations released in a span of t + R, at most ceil((t + R)/T).
  //
  // The recurrences ask this for every higher segment at every step: most
  // of the analysis' time. So the smaller of the two counts is one
  // division: ceil(x / T) + 1 = ceil((x + T) / T), and ceil is monotone, so
  // min(ceil((t + J) / T) + 1, ceil((t + R) / T)) = ceil((t + min(J + T, R)) / T),
  // where nothing saturates.
  uint64_t released(uint64_t window_ns, size_t chain) const {
    const uint64_t p = period(chain), jitter = workload_.release_jitter_ns;
    if (!options_.jitter_from_bounds) return arrivals(add(window_ns, jitter), p);
    uint64_t bound = chain < results_.size() && results_[chain].bounded ? results_[chain].wcrt_ns : kUnbounded;
    if (chain < earlier_.size()) bound = std::min(bound, earlier_[chain]);
    if (bound == kUnbounded) {
      if (options_.jitter_from_earlier_bounds && earlier_.empty()) counted_unbounded_.insert(chain);
      return arrivals(add(window_ns, jitter), p);
    }
    constexpr uint64_t kFar = uint64_t{1} << 62;  // the sums below stay under 2^64
    if (p == 0 || p > kFar || window_ns > kFar || jitter > kFar || bound > kFar) {
      const uint64_t span = add(window_ns, bound);
      return std::min(arrivals(add(window_ns, jitter), p), p ? span / p + (span % p ? 1 : 0) : kUnbounded);
    }
    const uint64_t x = window_ns + std::min(jitter + p, bound);
    return x / p + (x % p ? 1 : 0);
  }

  void build_entries() {
    const std::vector<std::vector<int>> requests = request_priorities(workload_);
    const std::vector<int> callback_priority = workload_.callback_priorities();
    for (size_t c = 0; c < workload_.chains.size(); ++c) {
      const auto& path = workload_.chains[c].path;
      for (size_t k = 0; k < path.size(); ++k) {
        const size_t cb = path[k];
        for (size_t j = 0; j < workload_.callbacks[cb].segments.size(); ++j) {
          const auto& seg = workload_.callbacks[cb].segments[j];
          const auto& acc = workload_.accelerators[seg.accelerator];
          Entry e;
          e.chain = c;
          e.callback = cb;
          e.segment = j;
          e.position = k;
          e.accelerator = seg.accelerator;
          // Preemption (and its cost kappa, before and after the segment) only
          // exists between buckets; a one-level device never preempts.
          uint64_t kappa = acc.priority_levels > 1 ? acc.preemption_cost_ns : 0;
          e.a_star = add(regulated_segment_ns(workload_, seg.accelerator, seg.wcet_ns), mul(2, kappa));
          e.bucket = bucket_of(callback_priority[cb], requests[seg.accelerator], acc.priority_levels);
          entries_.push_back(e);
        }
      }
    }
    for (Entry& e : entries_) {
      const size_t executor = workload_.callbacks[e.callback].executor;
      const bool holds_executor = options_.one_segment_per_executor && workload_.executors[executor].threads == 1;
      const bool sequential = options_.shared_segments_are_own && limit(e.chain) <= period(e.chain);
      for (size_t x = 0; x < entries_.size(); ++x) {
        const Entry& o = entries_[x];
        if (o.accelerator != e.accelerator || o.chain == e.chain) continue;
        // While e's callback waits for e, its single-threaded executor runs
        // nothing else: a segment issued there is neither queued nor running.
        if (holds_executor && workload_.callbacks[o.callback].executor == executor) continue;
        // Another chain's entry of a callback that e's chain owns is a
        // request of e's chain: its firing in this activation has ended
        // before e, is e, or comes after it, and the others belong to
        // activations that end before this one starts or start after it
        // ends (the chain's bound, within its period).
        const bool own = sequential && owns(e.chain, o.callback);
        if (own) e.blocking_differs = true;
        if (priority(o.chain) > priority(e.chain)) {
          // A higher chain released with e's by the same head fires o's
          // callback once per activation, after the part of the path the
          // two have in common: not while e waits, where e is on that part,
          // and at most once in e's window after it.
          const size_t common = own ? 0 : after_common_part(e.chain, o.chain, o.position);
          if (common) {
            e.blocking_differs = true;
            e.blocking_hps.entries.push_back(x);
            if (e.position >= common) {
              e.hps.entries.push_back(x);
              e.hps.singles.push_back(x);
            }
            continue;
          }
          (own ? e.blocking_hps : e.hps).entries.push_back(x);
        } else if (o.bucket == e.bucket) {
          // Same bucket, lower chain: a request already running cannot be
          // preempted (R3). Lower buckets are preempted (R4) and do not block.
          if (!own) e.max_lp_same_bucket = std::max(e.max_lp_same_bucket, o.a_star);
          e.blocking_max_lp = std::max(e.blocking_max_lp, o.a_star);
        }
      }
      if (e.blocking_differs) {
        std::vector<size_t>& all = e.blocking_hps.entries;
        all.insert(all.end(), e.hps.entries.begin(), e.hps.entries.end());
        std::sort(all.begin(), all.end());
        all.erase(std::unique(all.begin(), all.end()), all.end());
      }
    }
  }

  bool owns(size_t chain, size_t callback) const {
    if (!options_.shared_callbacks_once) return false;
    const auto& path = workload_.chains[chain].path;
    for (size_t k = 0; k < path.size(); ++k) {
      if (path[k] == callback) return owned_[chain][k];
    }
    return false;
  }

  // Options::shared_heads: where chains C and H start at the same callback,
  // their activations are its firings, one each. The length of the part of
  // their paths they have in common from there, where H's Q-th callback
  // comes after it and fires only for H (owned_); else 0. Every firing of
  // that callback belongs to one activation of H and comes after its
  // common part; an earlier activation ends before C's release, a later one
  // begins after C's end (both bounds within the period, H's a premise of
  // what counts H at all).
  size_t after_common_part(size_t c, size_t h, size_t q) const {
    if (!options_.shared_heads || !options_.shared_callbacks_once) return 0;
    const auto& mine = workload_.chains[c].path;
    const auto& theirs = workload_.chains[h].path;
    if (mine.empty() || theirs.empty() || mine[0] != theirs[0] || q >= theirs.size() || !owned_[h][q]) return 0;
    if (period(c) != period(h) || limit(c) > period(c) || limit(h) > period(h)) return 0;
    size_t common = 0;
    while (common < mine.size() && common < theirs.size() && mine[common] == theirs[common] &&
           owned_[c][common] && owned_[h][common])
      ++common;
    return q >= common ? common : 0;
  }

  // HPS, a sorted set of entries, grouped for hp_segments_ns. A callback on
  // one path has one entry per segment: nothing to count once. SINGLES
  // (sorted, a subset): entries whose segment fires at most once in the
  // window; one that another entry of HPS counts as usual is not.
  HpCharges charges(std::vector<size_t> hps, std::vector<size_t> singles = {}) const {
    HpCharges out;
    out.chains = ChainSet(workload_.chains.size());
    std::set<std::pair<size_t, size_t>> once_only, charged;  // (callback, segment)
    if (!singles.empty()) {
      std::set<std::pair<size_t, size_t>> usual;
      for (size_t x : hps) {
        const Entry& o = entries_[x];
        (std::binary_search(singles.begin(), singles.end(), x) ? once_only : usual).emplace(o.callback, o.segment);
      }
      for (const auto& key : usual) once_only.erase(key);
    }
    for (size_t x : hps) {
      const Entry& o = entries_[x];
      out.chains.insert(o.chain);
      if (!once_only.empty() && once_only.count({o.callback, o.segment})) {
        out.singles.push_back(x);
        if (charged.emplace(o.callback, o.segment).second) out.single_segments.push_back(x);
        continue;
      }
      if (on_paths_[o.callback] >= 2 && owns(o.chain, o.callback)) {
        out.once.push_back(x);
        continue;
      }
      if (out.by_chain.empty() || out.by_chain.back().first != o.chain) out.by_chain.emplace_back(o.chain, 0);
      out.by_chain.back().second = add(out.by_chain.back().second, o.a_star);
    }
    // One segment's entries side by side, in the order of the set.
    std::stable_sort(out.once.begin(), out.once.end(), [&](size_t a, size_t b) {
      return std::pair(entries_[a].callback, entries_[a].segment) < std::pair(entries_[b].callback, entries_[b].segment);
    });
    out.bits.assign((entries_.size() + 63) / 64, 0);
    for (size_t x : hps) out.bits[x / 64] |= uint64_t(1) << (x % 64);
    out.entries = std::move(hps);
    return out;
  }

  // Whether A holds every entry of B.
  static bool includes(const HpCharges& a, const HpCharges& b) {
    for (size_t w = 0; w < a.bits.size(); ++w)
      if (b.bits[w] & ~a.bits[w]) return false;
    return true;
  }

  // The charges of the union of two sets: a segment fires at most once in
  // the window where it does in each set that holds it.
  HpCharges charges(const HpCharges& a, const HpCharges& b) const {
    std::vector<size_t> both, singles;
    both.reserve(a.entries.size() + b.entries.size());
    std::set_union(a.entries.begin(), a.entries.end(), b.entries.begin(), b.entries.end(),
                   std::back_inserter(both));
    const auto usual_in = [](const HpCharges& set, size_t x) {
      return (set.bits[x / 64] >> (x % 64) & 1) && !std::binary_search(set.singles.begin(), set.singles.end(), x);
    };
    std::set_union(a.singles.begin(), a.singles.end(), b.singles.begin(), b.singles.end(),
                   std::back_inserter(singles));
    std::erase_if(singles, [&](size_t x) { return usual_in(a, x) || usual_in(b, x); });
    return charges(std::move(both), std::move(singles));
  }

  // The accelerator time of the segments in HPS (entries of higher chains)
  // released within a window: mu(window) A* each (Lemmas 2 and 3). The
  // entries of one segment of a callback that some of their chains own are
  // one segment, as often as the slowest owning chain releases it. The
  // arithmetic saturates, so a chain's A* summed first gives the same total.
  // SKIP: a chain whose segments none of the window holds (Blocker::skip),
  // and with them every segment of a callback it owns.
  uint64_t hp_segments_ns(const HpCharges& hps, uint64_t window, size_t skip = kNoChain) const {
    uint64_t total = 0;
    for (size_t x : hps.single_segments)
      if (entries_[x].chain != skip) total = add(total, entries_[x].a_star);
    for (const auto& [chain, a_star] : hps.by_chain)
      if (chain != skip) total = add(total, mul(released(window, chain), a_star));
    // A segment in several entries: its first's A*, at the fewest arrivals.
    for (size_t i = 0; i < hps.once.size();) {
      const Entry& first = entries_[hps.once[i]];
      uint64_t mu = released(window, first.chain);
      bool skipped = first.chain == skip;
      for (++i; i < hps.once.size(); ++i) {
        const Entry& o = entries_[hps.once[i]];
        if (o.callback != first.callback || o.segment != first.segment) break;
        mu = std::min(mu, released(window, o.chain));
        skipped = skipped || o.chain == skip;
      }
      if (!skipped) total = add(total, mul(mu, first.a_star));
    }
    return total;
  }

  // interference_ns's terms for chain C's sub-chain, from the higher
  // sub-chains on its executor (HP: their CPU time and handling time per
  // activation) and on other executors of its core (HPP: CPU time and spin).
  // They hold through the sub-chain's recurrence, so they are made before it
  // and each step takes a product per chain. With shared callbacks counted
  // once: a callback C owns is left out when C's window holds only C's own
  // activation (its bound within the period), since its firings there are
  // C's own, counted as C's, or fall outside this sub-chain's window; a
  // callback that interfering chains own is charged once, as often as the
  // slowest of them releases it.
  struct InterferenceTerms {
    std::vector<std::pair<size_t, uint64_t>> whole;  // (chain, cost per activation)
    struct Split {
      size_t chain;
      uint64_t full;  // every activation whole, as the paper charges it
      uint64_t rest;  // its callbacks that neither C nor its chain owns
    };
    std::vector<Split> split;
    struct Pooled {
      size_t callback;
      size_t chain;
      uint64_t cost;  // per firing
      bool single;    // fires at most once in the window (Options::shared_heads)
    };
    std::vector<Pooled> pooled;  // by callback
  };

  // What one firing of callback CB of sub-chain O costs a sub-chain it
  // interferes with, callback by callback: its CPU time, and per segment
  // epsilon and, on the same executor (hp) or where it spins (hpp), the
  // segment's Lemma 2 bound.
  uint64_t firing_cost(const Subchain& o, size_t cb, bool same_executor) const {
    uint64_t cost = workload_.callbacks[cb].cpu_ns;
    const bool spins = workload_.callbacks[cb].wait == WaitMode::kSpin;
    for (size_t i : o.entries) {
      const Entry& e = entries_[i];
      if (e.callback != cb) continue;
      cost = add(cost, add(same_executor || spins ? lemma2(e, max_period_) : 0, epsilon_));
    }
    return cost;
  }

  InterferenceTerms interference_terms(const Subchain& s, const std::vector<const Subchain*>& hp,
                                       const std::vector<const Subchain*>& hpp) const {
    const size_t c = s.chain;
    const bool once = options_.shared_callbacks_once && limit(c) <= period(c);
    InterferenceTerms out;
    for (const auto* list : {&hp, &hpp}) {
      const bool same_executor = list == &hp;
      for (const Subchain* h : *list) {
        const uint64_t full = add(h->cpu_ns, same_executor ? h->handling_star_ns : h->spin_ns);
        bool split = false;
        for (size_t cb : h->callbacks) split = split || (once && (owns(c, cb) || owns(h->chain, cb)));
        if (!split) {
          if (out.whole.empty() || out.whole.back().first != h->chain) out.whole.emplace_back(h->chain, 0);
          out.whole.back().second = add(out.whole.back().second, full);
          continue;
        }
        // Callback by callback: CPU time, and each segment's Lemma 2 bound
        // plus epsilon (hp) or its spin (hpp).
        uint64_t rest = 0;
        for (size_t n = 0; n < h->callbacks.size(); ++n) {
          const size_t cb = h->callbacks[n];
          if (owns(c, cb)) continue;
          // After the part of the path that H shares with C from their
          // common head: it fires once that part has ended, once.
          const size_t common = after_common_part(c, h->chain, h->first + n);
          if (common && s.first + s.callbacks.size() <= common) continue;
          const uint64_t cost = firing_cost(*h, cb, same_executor);
          if (!owns(h->chain, cb)) {
            rest = add(rest, cost);
            continue;
          }
          out.pooled.push_back({cb, h->chain, cost, common > 0});
        }
        out.split.push_back({h->chain, full, rest});
      }
    }
    std::stable_sort(out.pooled.begin(), out.pooled.end(),
                     [](const auto& a, const auto& b) { return a.callback < b.callback; });
    return out;
  }

  // What sub-chain O, on S's executor (SAME_EXECUTOR: hp) or another of its
  // core (hpp), costs S per activation, as interference_terms charges it:
  // the whole sub-chain, or callback by callback where C owns some of its
  // callbacks or some fire once in C's activation (Options::shared_heads).
  Subchain::Interferer interferer(const Subchain& s, const Subchain& o, bool same_executor) const {
    const size_t c = s.chain;
    const bool once = options_.shared_callbacks_once && limit(c) <= period(c);
    const uint64_t full = add(o.cpu_ns, same_executor ? o.handling_star_ns : o.spin_ns);
    Subchain::Interferer out{size_t(&o - subs_.data()), full, 0};
    // Whole, the sub-chain costs at most FULL: its handling time is at most
    // its segments' Lemma 2 bounds, and a suspending segment's spin is
    // epsilon either way. Callback by callback only where that can be less
    // (the admission analyses hundreds of such pairs at every registration).
    bool split = !same_executor && o.spins;
    for (size_t n = 0; n < o.callbacks.size() && !split; ++n)
      split = (once && owns(c, o.callbacks[n])) || after_common_part(c, o.chain, o.first + n);
    if (!split) return out;
    out.usual = 0;
    bool whole = true;
    for (size_t n = 0; n < o.callbacks.size(); ++n) {
      const size_t cb = o.callbacks[n];
      if (once && owns(c, cb)) {
        whole = false;
        continue;
      }
      const size_t common = after_common_part(c, o.chain, o.first + n);
      if (common && s.first + s.callbacks.size() <= common) {
        whole = false;
        continue;
      }
      const uint64_t cost = firing_cost(o, cb, same_executor);
      if (common) {
        out.single = add(out.single, cost);
        whole = false;
      } else {
        out.usual = add(out.usual, cost);
      }
    }
    if (whole) out.usual = std::min(out.usual, full);
    return out;
  }

  // Options::interference_once_per_chain: the chain's bound TOTAL with the
  // interference of its sub-chains, each bounded in its own window, taken
  // instead over the chain's whole activation where that is less. Every
  // unit of a higher sub-chain's work delays the chain once at most, in
  // whichever sub-chain it is in then, so over the activation [r, r + R]
  // it costs what its activations that reach the window bring: its largest
  // charge in any sub-chain, at most ceil((R + R_h) / T_h) times (or
  // Lemma 1's count), or once for what fires once in the activation. Per
  // interfering chain the smaller of that and its charges summed over the
  // sub-chains would be tighter still, but the callbacks pooled from
  // several chains have no one chain to go to; the smaller of the two sums
  // is taken.
  uint64_t once_per_chain(size_t c, uint64_t total, uint64_t* interference) const {
    const auto& mine = subchains_of_[c];
    if (mine.size() < 2) return total;
    uint64_t summed = 0;
    for (size_t m : mine) summed = add(summed, subs_[m].breakdown.interference_ns);
    if (summed == 0 || summed == kUnbounded || total == kUnbounded || total < summed) return total;
    // Each interfering sub-chain at its largest charge, then summed per
    // chain: slots by index, since the server does this for every chain of
    // hundreds at each registration.
    std::vector<Subchain::Interferer> largest;
    std::vector<size_t> slot(subs_.size(), SIZE_MAX);
    for (size_t m : mine) {
      for (const auto& i : subs_[m].interferers) {
        if (slot[i.sub] == SIZE_MAX) {
          slot[i.sub] = largest.size();
          largest.push_back(i);
          continue;
        }
        Subchain::Interferer& l = largest[slot[i.sub]];
        l.usual = std::max(l.usual, i.usual);
        l.single = std::max(l.single, i.single);
      }
    }
    std::vector<std::pair<size_t, uint64_t>> per_chain;  // (chain, usual charge per activation)
    std::vector<size_t> chain_slot(workload_.chains.size(), SIZE_MAX);
    uint64_t singles = 0;
    for (const auto& i : largest) {
      const size_t h = subs_[i.sub].chain;
      if (chain_slot[h] == SIZE_MAX) {
        chain_slot[h] = per_chain.size();
        per_chain.emplace_back(h, i.usual);
      } else {
        per_chain[chain_slot[h]].second = add(per_chain[chain_slot[h]].second, i.usual);
      }
      singles = add(singles, i.single);
    }
    const uint64_t rest = total - summed;
    uint64_t r = rest;
    for (;;) {
      uint64_t whole = singles;
      for (const auto& [h, usual] : per_chain) whole = add(whole, mul(released(r, h), usual));
      const uint64_t next = add(rest, std::min(summed, whole));
      if (next == r) break;
      r = next;
    }
    *interference = r - rest;
    return r;
  }

  // The interference within a window from TERMS. Callback by callback loses
  // Lemma 3 for the handling time: never more than the whole activations.
  uint64_t interference_ns(const InterferenceTerms& terms, uint64_t window) const {
    uint64_t plain = 0;  // every activation whole
    uint64_t total = 0;
    for (const auto& [chain, full] : terms.whole) {
      const uint64_t charge = mul(released(window, chain), full);
      plain = add(plain, charge);
      total = add(total, charge);
    }
    for (const auto& h : terms.split) {
      const uint64_t mu = released(window, h.chain);
      plain = add(plain, mul(mu, h.full));
      total = add(total, mul(mu, h.rest));
    }
    // A callback pooled from several chains: as often as the slowest of
    // them releases it, at its largest cost.
    for (size_t i = 0; i < terms.pooled.size();) {
      const size_t callback = terms.pooled[i].callback;
      uint64_t mu = released(window, terms.pooled[i].chain), cost = terms.pooled[i].cost;
      bool single = terms.pooled[i].single;
      for (++i; i < terms.pooled.size() && terms.pooled[i].callback == callback; ++i) {
        mu = std::min(mu, released(window, terms.pooled[i].chain));
        cost = std::max(cost, terms.pooled[i].cost);
        single = single || terms.pooled[i].single;
      }
      if (single) mu = std::min<uint64_t>(mu, 1);
      total = add(total, mul(mu, cost));
    }
    return std::min(total, plain);
  }

  // Lemma 2, Eq. (3): H <- A* + max_lps A* + sum_hps mu(H) A*, from the first
  // two terms; kUnbounded once it passes `limit`.
  // SKIP as for hp_segments_ns.
  // BLOCKING: the bound where e's callback blocks another chain
  // (Entry::blocking_differs).
  uint64_t lemma2(const Entry& e, uint64_t limit, size_t skip = kNoChain, bool blocking = false) const {
    blocking = blocking && e.blocking_differs;
    const uint64_t base = add(e.a_star, blocking ? e.blocking_max_lp : e.max_lp_same_bucket);
    const HpCharges& hps = blocking ? e.blocking_hps : e.hps;
    uint64_t h = base;
    while (true) {
      const uint64_t next = add(base, hp_segments_ns(hps, h, skip));
      if (next > limit) return kUnbounded;
      if (next == h) return h;
      h = next;
    }
  }

  void build_subchains() {
    subchains_of_.resize(workload_.chains.size());
    for (size_t c = 0; c < workload_.chains.size(); ++c) {
      const auto& path = workload_.chains[c].path;
      for (size_t k = 0; k < path.size(); ++k) {
        const size_t cb = path[k];
        const size_t ex = workload_.callbacks[cb].executor;
        auto& mine = subchains_of_[c];
        // A fusion's wait breaks the executor's busy window: the part from
        // the fusion on is released when its inputs are all there.
        if (mine.empty() || subs_[mine.back()].executor != ex || joins_.waits_at(c, k)) {
          Subchain s;
          s.chain = c;
          s.executor = ex;
          s.first = k;
          subs_.push_back(s);
          mine.push_back(subs_.size() - 1);
        }
        Subchain& s = subs_[mine.back()];
        s.callbacks.push_back(cb);
        s.cpu_ns = add(s.cpu_ns, workload_.callbacks[cb].cpu_ns);
      }
    }
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      for (size_t s : subchains_of_[e.chain]) {
        auto& cbs = subs_[s].callbacks;
        if (std::find(cbs.begin(), cbs.end(), e.callback) != cbs.end()) subs_[s].entries.push_back(i);
      }
    }
    // spin(Gamma_h) of Theorem 1: a spinning segment occupies its core for the
    // whole handling time, a suspending one for epsilon. Per-segment Lemma 2
    // bounds are used so that any chain can be charged, whatever its priority.
    for (Subchain& s : subs_) {
      for (size_t i : s.entries) {
        const Entry& e = entries_[i];
        bool spin = workload_.callbacks[e.callback].wait == WaitMode::kSpin;
        s.spins = s.spins || spin;
        s.spin_ns = add(s.spin_ns, spin ? add(e.lemma2, epsilon_) : epsilon_);
      }
      s.own_hps = charges({});
      for (size_t i : s.entries) s.own_hps = charges(s.own_hps, entries_[i].hps);
      for (size_t cb : s.callbacks) {
        Hold h;
        h.cpu_ns = workload_.callbacks[cb].cpu_ns;
        h.hps = charges({});
        if (options_.lp_blocking_includes_accelerator) {
          for (size_t i : s.entries) {
            const Entry& e = entries_[i];
            if (e.callback != cb) continue;
            h.cpu_ns = add(h.cpu_ns, epsilon_);
            h.entries.push_back(i);
            const uint64_t max_lp = e.blocking_differs ? e.blocking_max_lp : e.max_lp_same_bucket;
            h.lemma3_base_ns = add(h.lemma3_base_ns, add(e.a_star, max_lp));
            h.hps = charges(h.hps, e.blocking_differs ? e.blocking_hps : e.hps);
          }
        }
        s.holds.push_back(std::move(h));
      }
      s.all_owned = true;
      for (size_t n = s.first; n < s.first + s.callbacks.size(); ++n) s.all_owned = s.all_owned && owned_[s.chain][n];
      for (size_t k = 1; k <= s.first; ++k) s.after_a_wait = s.after_a_wait || joins_.waits_at(s.chain, k);
    }
  }

  // Sub-chain O of another chain is done before sub-chain S of chain C
  // begins, and the next activation's starts after S ends: C and O's chain
  // are released together, S comes after a fusion that C waits at, O's
  // chain passes that fusion after O, and O's callbacks fire only for their
  // chain. The fusion takes the message of O's chain from the same release,
  // and the next release comes after C's bound (at most the period). So O
  // does not interfere with S.
  bool done_before(size_t c, const Subchain& s, const Subchain& o) const {
    if (!s.after_a_wait || !o.all_owned || !options_.released_together || !joins_.released_together(c, o.chain))
      return false;
    const auto& path = workload_.chains[c].path;
    const auto& theirs = workload_.chains[o.chain].path;
    const size_t o_end = o.first + o.callbacks.size();
    for (size_t k = 1; k <= s.first; ++k) {
      if (!joins_.waits_at(c, k)) continue;
      for (size_t q = o_end; q < theirs.size(); ++q)
        if (theirs[q] == path[k]) return true;
    }
    return false;
  }

  // Chains whose arrivals Lemma 1 counts for the entries of HPS.
  void depend_on_hps(size_t chain, const HpCharges& hps) { depends_[chain].insert(hps.chains); }

  // Theorem 1 for one sub-chain. Returns false (and sets `why`) if no bound.
  bool analyze_subchain(Subchain& s, uint64_t limit, std::string& why) {
    s.computed = true;
    if (!executor_covered(s, why)) return false;
    std::vector<Blocker> blockers = blockers_of(s);
    const OwnSegments own = own_segments(s);
    share_arrivals(s.own_hps, &blockers);
    std::vector<const Subchain*> hp, hpp;
    if (!higher_subchains(s, &hp, &hpp, why)) return false;
    uint64_t r = 0;
    if (!solve_theorem1(s, limit, blockers, own, interference_terms(s, hp, hpp), &r, why)) return false;
    s.wcrt_ns = r;
    s.bounded = true;
    record_interferers(s, hp, hpp);
    return true;
  }

  // The analysis covers single-threaded executors, with the server on a
  // core without executors (PAAM rule R1): false (and `why`) where S's
  // executor is not such.
  bool executor_covered(const Subchain& s, std::string& why) const {
    const auto& ex = workload_.executors[s.executor];
    if (ex.threads != 1) {
      why = "executor '" + ex.name + "' has " + std::to_string(ex.threads) +
            " threads; the analysis covers single-threaded executors only";
      return false;
    }
    if (workload_.server && !entries_.empty() && workload_.server->core == ex.core) {
      why = "the server shares core " + std::to_string(ex.core) + " with executor '" + ex.name +
            "'; the analysis needs the server on a core without executors (PAAM rule R1)";
      return false;
    }
    return true;
  }

  // B_c (Lemma 4): the longest callback of a lower-priority chain on this
  // executor, which cannot be preempted once started; each candidate with
  // what its segments add (Blocker), taken at every step of the recurrence.
  // A sub-chain that starts at a fusion fed by its own executor alone
  // starts as the executor ends the callback that fed it: no callback of
  // lower priority is in progress then. At the chain's release, one of a
  // lower chain released with it (bounded within this chain's period) is
  // not either, where all its firings are that chain's: the chain's
  // previous activation has ended and this one, if any, waits for higher
  // work.
  std::vector<Blocker> blockers_of(const Subchain& s) {
    const size_t c = s.chain;
    std::vector<Blocker> blockers;
    const bool fed_here = options_.fusions_wait && s.first > 0 && joins_.fed_by_own_executor(c, s.first);
    for (const Subchain& o : subs_) {
      if (fed_here || o.executor != s.executor || priority(o.chain) >= priority(c)) continue;
      const bool together = options_.released_together && s.first == 0 && joins_.released_with(o.chain, c) &&
                            !blocks_anyway_.count(o.chain);
      for (size_t n = 0; n < o.callbacks.size(); ++n) {
        if (together && owned_[o.chain][o.first + n]) {
          depends_[c].insert(o.chain);
          together_[c].insert(o.chain);
          continue;
        }
        Blocker b;
        b.hold = &o.holds[n];
        // Every callback of the chain is its own: none of its segments is
        // issued while the blocker holds the executor.
        if (options_.blocking_without_own_segments && path_owned_[c]) b.skip = c;
        for (size_t i : b.hold->entries) b.lemma2_ns = add(b.lemma2_ns, lemma2(entries_[i], max_period_, b.skip, true));
        depend_on_hps(c, b.hold->hps);
        blockers.push_back(std::move(b));
      }
    }
    return blockers;
  }

  // A sub-chain's own segments: Lemma 2 summed, and Lemma 3's constant
  // part (its HP set is the sub-chain's own_hps).
  struct OwnSegments {
    uint64_t lemma2_sum = 0;
    uint64_t lemma3_base = 0;
    uint64_t overhead = 0;  // delta_c * epsilon, Eq. (1)
  };
  OwnSegments own_segments(const Subchain& s) {
    OwnSegments own;
    for (size_t i : s.entries) {
      const Entry& e = entries_[i];
      own.lemma2_sum = add(own.lemma2_sum, lemma2(e, max_period_));
      own.lemma3_base = add(own.lemma3_base, add(e.a_star, e.max_lp_same_bucket));
    }
    depend_on_hps(s.chain, s.own_hps);
    own.overhead = mul(s.entries.size(), epsilon_);
    return own;
  }

  // Options::blocking_shares_arrivals: each blocker's hps together with
  // the sub-chain's own (LEMMA3_HPS), made once, not at every step of the
  // recurrence: one of the two where it holds the other, else their union.
  void share_arrivals(const HpCharges& lemma3_hps, std::vector<Blocker>* blockers) const {
    for (Blocker& b : *blockers) {
      const HpCharges& theirs = b.hold->hps;
      if (!options_.blocking_shares_arrivals || theirs.entries.empty()) continue;
      if (includes(theirs, lemma3_hps)) {
        b.hps_with_own = &theirs;
      } else if (includes(lemma3_hps, theirs)) {
        b.hps_with_own = &lemma3_hps;
      } else {
        b.both = charges(lemma3_hps, theirs);
        b.hps_with_own = &b.both;
      }
    }
  }

  // hp(Gamma_c): HP chains on this executor; hpp(Gamma_c): chains on other
  // executors of this core with a process priority at least as high (equal
  // SCHED_FIFO priorities run to completion in turn, so they count too).
  // False (and `why`) where a higher sub-chain on this executor has no
  // bound.
  bool higher_subchains(const Subchain& s, std::vector<const Subchain*>* hp, std::vector<const Subchain*>* hpp,
                        std::string& why) {
    const size_t c = s.chain;
    const auto& ex = workload_.executors[s.executor];
    for (const Subchain& o : subs_) {
      if (o.chain == c) continue;
      if (done_before(c, s, o)) {
        depends_[c].insert(o.chain);
        continue;
      }
      const auto& oex = workload_.executors[o.executor];
      if (o.executor == s.executor) {
        if (priority(o.chain) < priority(c)) continue;
        if (!o.computed || !o.bounded) {
          why = "relies on chain '" + workload_.chains[o.chain].name + "', which has no bound";
          return false;
        }
        hp->push_back(&o);
        depends_[c].insert(o.chain);
      } else if (oex.core == ex.core && oex.priority >= ex.priority) {
        hpp->push_back(&o);
        depends_[c].insert(o.chain);
        for (size_t i : o.entries) {
          if (workload_.callbacks[entries_[i].callback].wait == WaitMode::kSpin) depend_on_hps(c, entries_[i].hps);
        }
      }
    }
    return true;
  }

  // Theorem 1's recurrence for sub-chain S: R = B_c + E_c + H_c^* +
  // interference + regulator + kernel, each term taken at the R before,
  // from the CPU time of the longest blocker, E_c and the constant part of
  // H_c^*. Each step's terms are left in S, the last one's too where R
  // passes LIMIT (false, with `why`); true with the fixed point in *WCRT.
  bool solve_theorem1(Subchain& s, uint64_t limit, const std::vector<Blocker>& blockers, const OwnSegments& own,
                      const InterferenceTerms& terms, uint64_t* wcrt, std::string& why) {
    const auto& ex = workload_.executors[s.executor];
    uint64_t blocking_cpu = 0;
    for (const Blocker& b : blockers) blocking_cpu = std::max(blocking_cpu, b.hold->cpu_ns);
    uint64_t r = add(add(blocking_cpu, s.cpu_ns), add(own.lemma3_base, own.overhead));
    while (true) {
      uint64_t lemma3 = own.lemma3_base;
      lemma3 = add(lemma3, hp_segments_ns(s.own_hps, r));
      s.by_lemma3 = lemma3 < own.lemma2_sum;
      s.lemma2_ns = own.lemma2_sum;
      s.lemma3_ns = lemma3;
      const uint64_t own_handling = std::min(own.lemma2_sum, lemma3);
      const uint64_t handling_star = add(own_handling, own.overhead);  // H_c^*, Eq. (1)
      const uint64_t blocking = blocking_at(blockers, r, own.lemma3_base, own_handling);
      const uint64_t interference = interference_ns(terms, r);
      // Isolation: the regulator's thread on this core, above every executor.
      const uint64_t regulator = regulator_ns(workload_, ex.core, r);
      // The kernel's work for the links, on this core at any priority.
      const uint64_t kernel = network_.kernel_ns(ex.core, r);
      const uint64_t next =
          add(add(add(blocking, s.cpu_ns), add(handling_star, interference)), add(regulator, kernel));
      s.handling_star_ns = handling_star;
      s.breakdown = {blocking, s.cpu_ns, handling_star, interference, 0};
      s.breakdown.regulator_ns = regulator;
      s.breakdown.network_kernel_ns = kernel;
      if (next > limit) {
        why = "no bound within the " + std::string(options_.horizon == Horizon::kDeadline ? "deadline" : "period") +
              " (" + us(limit) + "): the recurrence on executor '" + ex.name + "' passed it";
        return false;
      }
      if (next == r) break;
      r = next;
    }
    *wcrt = r;
    return true;
  }

  // B_c within a window of R: the dearest blocker, its CPU time plus its
  // segments' wait, the smaller of their Lemma 2 bounds and, where they
  // share arrivals with ours, Lemma 3 over both less our own handling time
  // OWN_HANDLING (which H_c^* charges already).
  uint64_t blocking_at(const std::vector<Blocker>& blockers, uint64_t r, uint64_t lemma3_base,
                       uint64_t own_handling) const {
    uint64_t blocking = 0;
    for (const Blocker& b : blockers) {
      uint64_t waits = b.lemma2_ns;
      if (b.hps_with_own) {
        // Lemma 3 over the blocking segments and ours together, each
        // higher activation in the window counted once.
        uint64_t together = add(b.hold->lemma3_base_ns, lemma3_base);
        together = add(together, hp_segments_ns(*b.hps_with_own, r, b.skip));
        waits = std::min(waits, together - std::min(together, own_handling));
      }
      blocking = std::max(blocking, add(b.hold->cpu_ns, waits));
    }
    return blocking;
  }

  // Options::interference_once_per_chain: what each sub-chain of HP and
  // HPP costs S per activation, for once_per_chain.
  void record_interferers(Subchain& s, const std::vector<const Subchain*>& hp,
                          const std::vector<const Subchain*>& hpp) const {
    s.interferers.clear();
    if (!options_.interference_once_per_chain) return;
    for (const auto* list : {&hp, &hpp})
      for (const Subchain* o : *list) s.interferers.push_back(interferer(s, *o, list == &hp));
  }

  void analyze_chain(size_t c) {
    const Chain& chain = workload_.chains[c];
    const auto& path = chain.path;
    ChainResult& out = results_[c];
    out = result_for(chain);
    const uint64_t limit = this->limit(c);

    // A chain over several executors: R* = sum of sub-chain bounds plus one
    // hand-over per executor boundary, plus the transfers of hops between
    // nodes and of requests to an accelerator on another node. Summed from
    // the start of each piece between fusions; the first piece starts at
    // the nominal release, and the OS may start the chain late.
    Joins::Pieces& pieces = pieces_[c];
    pieces.known = true;
    pieces.limit_ns = limit;
    pieces.within.assign(path.size(), 0);
    pieces.enter.assign(path.size(), 0);
    const NetworkTerms::ChainLegs legs =
        network_.chain_legs(path, options_.transfers_once_per_chain ? limit : kUnbounded, joins_.waits(c));
    out.breakdown.release_jitter_ns = workload_.release_jitter_ns;
    uint64_t run = workload_.release_jitter_ns;
    bool bounded = true;
    const auto& mine = subchains_of_[c];
    for (size_t n = 0; n < mine.size(); ++n) {
      Subchain& s = subs_[mine[n]];
      std::string why;
      if (!analyze_subchain(s, limit, why)) {
        bounded = false;
        if (out.reason.empty()) out.reason = why;
      }
      SubchainResult sr;
      sr.executor = workload_.executors[s.executor].name;
      sr.bounded = s.bounded;
      sr.wcrt_ns = s.bounded ? s.wcrt_ns : 0;
      sr.handling_ns = s.handling_star_ns;
      sr.lemma2_ns = s.lemma2_ns;
      sr.lemma3_ns = s.lemma3_ns;
      sr.handling_by_lemma3 = s.by_lemma3;
      sr.breakdown = s.breakdown;
      out.subchains.push_back(sr);
      out.breakdown.blocking_ns = add(out.breakdown.blocking_ns, s.breakdown.blocking_ns);
      out.breakdown.cpu_ns = add(out.breakdown.cpu_ns, s.breakdown.cpu_ns);
      out.breakdown.accelerator_ns = add(out.breakdown.accelerator_ns, s.breakdown.accelerator_ns);
      out.breakdown.interference_ns = add(out.breakdown.interference_ns, s.breakdown.interference_ns);
      out.breakdown.regulator_ns = add(out.breakdown.regulator_ns, s.breakdown.regulator_ns);
      out.breakdown.network_kernel_ns = add(out.breakdown.network_kernel_ns, s.breakdown.network_kernel_ns);

      uint64_t enter = 0;
      if (s.first > 0) {
        if (workload_.callbacks[path[s.first - 1]].executor != s.executor) {
          enter = workload_.communication_ns;
          out.breakdown.communication_ns = add(out.breakdown.communication_ns, enter);
        }
        const uint64_t hop = legs.hop_ns(path[s.first - 1], path[s.first]);
        out.breakdown.network_ns = add(out.breakdown.network_ns, hop);
        enter = add(enter, hop);
      }
      const size_t end = n + 1 < mine.size() ? subs_[mine[n + 1]].first : path.size();
      uint64_t requests = 0;
      for (size_t k = s.first; k < end; ++k)
        for (size_t j = 0; j < workload_.callbacks[path[k]].segments.size(); ++j)
          requests = add(requests, legs.segment_ns(path[k], j));
      out.breakdown.network_ns = add(out.breakdown.network_ns, requests);
      if (joins_.waits_at(c, s.first)) {
        pieces.enter[s.first] = enter;
        run = 0;
      } else {
        run = add(run, enter);
      }
      run = add(run, add(s.bounded ? s.wcrt_ns : kUnbounded, requests));
      for (size_t k = s.first; k < end; ++k) pieces.within[k] = run;
    }

    uint64_t total = run;
    if (joins_.any()) {
      const Joins::Composed composed = joins_.compose(pieces_)[c];
      total = composed.end.empty() ? 0 : composed.end.back();
      composed_total_[c] = total;
      out.breakdown.fusion_wait_ns = composed.wait_ns;
      if (bounded && total == kUnbounded && !composed.reason.empty()) {
        bounded = false;
        out.reason = composed.reason;
      }
      for (size_t d : joins_.sources_of(c)) depends_[c].insert(d);
    }
    if (bounded && options_.interference_once_per_chain &&
        std::none_of(joins_.waits(c).begin(), joins_.waits(c).end(), [](bool w) { return w; })) {
      uint64_t interference = out.breakdown.interference_ns;
      total = once_per_chain(c, total, &interference);
      out.breakdown.interference_ns = interference;
    }
    if (bounded && total > limit) {
      bounded = false;
      out.reason = std::string(out.breakdown.fusion_wait_ns ? "with its waits at fusions (" + us(out.breakdown.fusion_wait_ns) + "), "
                                                            : "") +
                   "the sum over its executors (" + us(total) + ") passes the " +
                   (options_.horizon == Horizon::kDeadline ? "deadline" : "period") + " (" + us(limit) + ")";
    }
    out.bounded = bounded;
    out.wcrt_ns = bounded ? total : 0;
    out.schedulable = bounded && total <= chain.deadline_ns;
    if (bounded && !out.schedulable) {
      out.reason = "bound " + us(total) + " exceeds the deadline " + us(chain.deadline_ns);
    }
  }

  // Whether every bound of this pass is the one its pieces give now: the
  // waits composed during the pass used the pieces of lower chains from the
  // pass before.
  bool settled() const {
    const std::vector<Joins::Composed> now = joins_.compose(pieces_);
    for (size_t c = 0; c < now.size(); ++c)
      if ((now[c].end.empty() ? 0 : now[c].end.back()) != composed_total_[c]) return false;
    return true;
  }

  // Lemma 1 holds only for chains that are themselves schedulable (bounded
  // within their period): a bound that counted the arrivals of a chain
  // without one is withdrawn (results.h).
  void propagate_validity() {
    withdraw_unfounded(workload_, [&](size_t c) { return depends_[c].members(); }, &results_);
  }

  const Workload& workload_;
  const Options& options_;
  const NetworkTerms network_;
  const Joins joins_;
  std::vector<Joins::Pieces> pieces_;
  std::vector<uint64_t> composed_total_;  // each chain's bound with its waits, as this pass used it
  uint64_t epsilon_ = 0;
  uint64_t max_period_ = 0;
  std::vector<Entry> entries_;
  std::vector<Subchain> subs_;
  std::vector<std::vector<size_t>> subchains_of_;
  std::vector<ChainResult> results_;
  std::vector<ChainSet> depends_;
  std::vector<std::set<size_t>> together_;  // lower chains left out of blocking as released together
  std::set<size_t> blocks_anyway_;          // ... and found without a bound
  std::vector<std::vector<bool>> owned_;
  std::vector<size_t> on_paths_;  // how often the chains' paths name each callback
  // Per chain, its bound by an earlier analysis (kUnbounded: none); the
  // chains the first counted by Lemma 1 for want of a bound.
  std::vector<uint64_t> earlier_;
  mutable ChainSet counted_unbounded_;
  // Per chain, whether it owns every callback of its path (owned_).
  std::vector<bool> path_owned_;
};

}  // namespace

uint64_t arrivals(uint64_t window_ns, uint64_t period_ns) {
  if (period_ns == 0) return kUnbounded;
  return window_ns / period_ns + (window_ns % period_ns ? 1 : 0) + 1;
}

uint64_t regulator_ns(const workload::Workload& workload, int core, uint64_t window_ns) {
  const auto& iso = workload.isolation;
  if (!iso.declared || iso.cost_ns == 0) return 0;
  if (!iso.cores.empty() && std::find(iso.cores.begin(), iso.cores.end(), core) == iso.cores.end()) return 0;
  return mul(arrivals(window_ns, iso.period_ns), iso.cost_ns);
}

uint64_t regulated_segment_ns(const workload::Workload& workload, size_t accelerator, uint64_t wcet_ns) {
  const auto& acc = workload.accelerators[accelerator];
  if (acc.backend != workload::Backend::kCpu) return wcet_ns;  // a device the regulator does not run on
  // The kernel and the regulator share the device's core: the fixed point
  // of A' = A + regulator(A'), which converges since cost < period.
  uint64_t a = wcet_ns;
  for (;;) {
    const uint64_t next = add(wcet_ns, regulator_ns(workload, acc.core, a));
    if (next == a || next == kUnbounded) return next;
    a = next;
  }
}

int bucket_of(int priority, const std::vector<int>& priorities, int levels) {
  // Sorted and distinct already where the analysis and the server ask, for
  // every segment of hundreds of chains: a copy sorted each time would make
  // forming the buckets quadratic.
  std::vector<int> copy;
  const bool ascending = std::adjacent_find(priorities.begin(), priorities.end(), std::greater_equal<int>()) ==
                         priorities.end();
  if (!ascending) {
    copy = priorities;
    std::sort(copy.begin(), copy.end());
    copy.erase(std::unique(copy.begin(), copy.end()), copy.end());
  }
  const std::vector<int>& sorted = ascending ? priorities : copy;
  auto it = std::lower_bound(sorted.begin(), sorted.end(), priority);
  if (it == sorted.end() || *it != priority || levels < 1) return -1;
  const long long m = static_cast<long long>(sorted.size());
  const long long below_top = m - 1 - (it - sorted.begin());  // 0 for the highest priority
  // Evenly sized groups counted from the top, so that the most critical
  // requests always get the highest bucket.
  return static_cast<int>(levels - 1 - (below_top * levels) / m);
}

int segment_bucket(const workload::Workload& workload, size_t callback, size_t segment) {
  const size_t accelerator = workload.callbacks[callback].segments[segment].accelerator;
  return bucket_of(workload.callback_priority(callback), request_priorities(workload)[accelerator],
                   workload.accelerators[accelerator].priority_levels);
}

const char* ChainResult::dominant_term() const {
  const std::pair<uint64_t, const char*> terms[] = {
      {breakdown.blocking_ns, "blocking"},       {breakdown.cpu_ns, "cpu"},
      {breakdown.accelerator_ns, "accelerator"}, {breakdown.interference_ns, "interference"},
      {breakdown.communication_ns, "communication"}, {breakdown.network_ns, "network"},
      {breakdown.regulator_ns, "regulator"},     {breakdown.network_kernel_ns, "network kernel"},
      {breakdown.fusion_wait_ns, "fusion wait"},
  };
  const auto* best = &terms[0];
  for (const auto& t : terms) {
    if (t.first > best->first) best = &t;
  }
  return best->second;
}

std::vector<ChainResult> analyze(const workload::Workload& workload, const Options& options) {
  return Analysis(workload, options).run();
}

bool all_critical_schedulable(const std::vector<ChainResult>& results) {
  return std::all_of(results.begin(), results.end(),
                     [](const ChainResult& r) { return !r.critical || r.schedulable; });
}

}  // namespace rtaccel::analysis
