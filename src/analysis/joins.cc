// Fusions on a chain's path: see joins.h for the argument.
#include "analysis/joins.h"

#include <algorithm>

#include "analysis/results.h"
#include "analysis/saturating.h"

namespace rtaccel::analysis {

Joins::Joins(const workload::Workload& w, const NetworkTerms& network, const Options& options)
    : workload_(w), waits_(w.chains.size()), joins_(w.chains.size()), depends_(w.chains.size()) {
  const bool enabled = options.fusions_wait;
  const std::vector<std::vector<bool>> owned = owned_callbacks(w);
  auto fuses = [&](size_t callback) { return w.callbacks[callback].trigger.topics.size() > 1; };
  // Position of CALLBACK on chain C when no fusion lies on C's path up to it.
  auto plain_position = [&](size_t c, size_t callback) -> long {
    const auto& path = w.chains[c].path;
    for (size_t q = 0; q < path.size(); ++q) {
      if (q > 0 && fuses(path[q])) return -1;
      if (path[q] == callback) return static_cast<long>(q);
    }
    return -1;
  };

  for (size_t c = 0; c < w.chains.size(); ++c) {
    const auto& path = w.chains[c].path;
    waits_[c].assign(path.size(), false);
    if (!enabled) continue;
    for (size_t k = 1; k < path.size(); ++k) {
      const workload::Callback& fusion = w.callbacks[path[k]];
      if (fusion.trigger.topics.size() < 2) continue;
      Wait wait;
      wait.position = k;
      if (options.fusion_waits_from_last_firing && owned[c][k]) wait.once_per_ns = timer_of(c);
      for (const std::string& topic : fusion.trigger.topics) {
        if (topic == w.callbacks[path[k - 1]].publishes) continue;
        // Published earlier on the path, on this node: there already.
        bool there = false;
        for (size_t q = 0; q + 1 < k; ++q)
          there = there || (w.callbacks[path[q]].publishes == topic &&
                            w.node_of_callback(path[q]) == w.node_of_callback(path[k]));
        if (there) continue;
        Input input;
        input.topic = topic;
        for (size_t p = 0; p < w.callbacks.size(); ++p) {
          if (w.callbacks[p].publishes != topic) continue;
          uint64_t hop = network.hop_ns(p, path[k]);
          if (w.callbacks[p].executor != fusion.executor) hop = add(hop, w.communication_ns);
          for (size_t o = 0; o < w.chains.size(); ++o) {
            const long q = plain_position(o, p);
            if (q < 0 || !w.callbacks[w.chains[o].path[0]].trigger.timer_ns) continue;
            Source s;
            s.chain = o;
            s.position = static_cast<size_t>(q);
            s.period_ns = w.chains[o].period_ns;
            s.hop_ns = hop;
            s.common = released_together(c, o);
            s.same_start = starts_with(c, o);
            input.sources.push_back(s);
            if (std::find(depends_[c].begin(), depends_[c].end(), o) == depends_[c].end()) depends_[c].push_back(o);
          }
        }
        wait.inputs.push_back(std::move(input));
      }
      if (wait.inputs.empty()) continue;
      waits_[c][k] = true;
      any_ = true;
      joins_[c].push_back(std::move(wait));
    }
  }
}

uint64_t Joins::timer_of(size_t chain) const {
  return workload_.callbacks[workload_.chains[chain].path[0]].trigger.timer_ns;
}

bool Joins::starts_with(size_t a, size_t b) const {
  const workload::Workload& w = workload_;
  const workload::Trigger& ta = w.callbacks[w.chains[a].path[0]].trigger;
  const workload::Trigger& tb = w.callbacks[w.chains[b].path[0]].trigger;
  return ta.timer_ns && tb.timer_ns && ta.release_group != workload::Trigger::kUnaligned &&
         ta.release_group == tb.release_group &&
         w.node_of_callback(w.chains[a].path[0]) == w.node_of_callback(w.chains[b].path[0]);
}

bool Joins::released_together(size_t a, size_t b) const {
  return starts_with(a, b) && timer_of(a) == timer_of(b);
}

bool Joins::released_with(size_t lower, size_t higher) const {
  return starts_with(lower, higher) && timer_of(lower) % timer_of(higher) == 0;
}

bool Joins::fed_by_own_executor(size_t chain, size_t k) const {
  const workload::Workload& w = workload_;
  const workload::Callback& fusion = w.callbacks[w.chains[chain].path[k]];
  if (w.executors[fusion.executor].threads != 1) return false;
  for (const std::string& topic : fusion.trigger.topics)
    for (const workload::Callback& p : w.callbacks)
      if (p.publishes == topic && p.executor != fusion.executor) return false;
  return true;
}

Joins::Composed Joins::compose_chain(size_t c, const std::vector<Pieces>& pieces,
                                     const std::vector<Composed>& now) const {
  const auto& path = workload_.chains[c].path;
  const Pieces& mine = pieces[c];
  Composed out;
  if (!mine.known) {  // not analysed yet: as if it took no time
    out.end.assign(path.size(), 0);
    out.start.assign(path.size(), 0);
    return out;
  }
  out.end.assign(path.size(), kUnbounded);
  out.start.assign(path.size(), kUnbounded);
  uint64_t start = 0;
  size_t next = 0;  // index into joins_[c]
  for (size_t k = 0; k < path.size(); ++k) {
    if (next < joins_[c].size() && joins_[c][next].position == k) {
      const Wait& wait = joins_[c][next++];
      const uint64_t arrival = add(out.end[k - 1], mine.enter[k]);
      const uint64_t own = mine.within[k];  // X in joins.h
      // READY: every release's, by the bounds of each input alone; FRESH:
      // counted from the fusion's last firing, where that holds.
      uint64_t ready = arrival, fresh = arrival;
      for (const Input& input : wait.inputs) {
        // The input is there by the earliest of its sources' bounds; FIRST:
        // the same for the first release; GAP: the longest between messages.
        uint64_t there = kUnbounded, first = kUnbounded, gap = kUnbounded;
        for (const Source& s : input.sources) {
          const Pieces& theirs = pieces[s.chain];
          if (!theirs.known) {
            const uint64_t guess = s.common ? 0 : arrival;  // optimistic until analysed
            there = std::min(there, guess);
            first = std::min(first, guess);
            continue;
          }
          const uint64_t through = s.chain == c ? out.end[s.position] : now[s.chain].end[s.position];
          if (through > theirs.limit_ns) continue;
          const uint64_t at = add(through, s.hop_ns);
          if (s.common) {
            there = std::min(there, at);
            first = std::min(first, at);
            continue;
          }
          const uint64_t apart = add(s.period_ns, at);  // G
          gap = std::min(gap, apart);
          there = std::min(there, add(arrival, apart));
          first = std::min(first, s.same_start ? at : add(arrival, apart));
        }
        if (there == kUnbounded && out.reason.empty() && arrival != kUnbounded) {
          out.reason = "waits at '" + workload_.callbacks[path[k]].name + "' for '" + input.topic + "', ";
          if (input.sources.empty())
            out.reason += "whose publisher no chain from a timer reaches without a fusion before it";
          else
            out.reason += "and chain '" + workload_.chains[input.sources[0].chain].name +
                          "', which publishes it, has no bound through its publisher";
        }
        ready = std::max(ready, there);
        const bool renewed = wait.once_per_ns && gap != kUnbounded && add(gap, own) <= wait.once_per_ns;
        fresh = std::max(fresh, renewed ? first : there);
      }
      if (fresh < ready && add(fresh, own) <= wait.once_per_ns) ready = fresh;
      if (ready != kUnbounded) out.wait_ns = add(out.wait_ns, ready - arrival);
      start = ready;
    }
    out.start[k] = start;
    out.end[k] = add(start, mine.within[k]);
  }
  return out;
}

std::vector<Joins::Composed> Joins::compose(const std::vector<Pieces>& pieces) const {
  // Each chain's ends from the others' of the round before: a wait depends
  // on the ends of its sources, which are settled once the rounds have gone
  // down the longest line of sources.
  // From no wait at all, the ends only grow; a line of sources is at most
  // as long as there are fusions on the paths.
  std::vector<Composed> now(pieces.size());
  size_t waits = 0;
  for (size_t c = 0; c < pieces.size(); ++c) {
    now[c].end.assign(workload_.chains[c].path.size(), 0);
    waits += joins_[c].size();
  }
  for (size_t round = 0; round <= waits + 1; ++round) {
    std::vector<Composed> next(pieces.size());
    bool settled = true;
    for (size_t c = 0; c < pieces.size(); ++c) {
      next[c] = compose_chain(c, pieces, now);
      settled = settled && next[c].end == now[c].end;
    }
    now = std::move(next);
    if (settled) return now;
  }
  for (size_t c = 0; c < pieces.size(); ++c) {
    if (joins_[c].empty()) continue;
    std::fill(now[c].end.begin(), now[c].end.end(), kUnbounded);
    now[c].reason = "its waits at fusions depend on each other in a cycle";
  }
  return now;
}

}  // namespace rtaccel::analysis
