// rtaccel analysis: worst-case end-to-end response time of processing chains
// whose callbacks use accelerators through the rtaccel server (PAAM).
//
// Implements Enright et al., "PAAM: A Framework for Coordinated and
// Priority-Driven Accelerator Management in ROS 2" (RTAS 2024), Section IV-F,
// in the paper's notation: Lemma 1 (arrival bound), Lemma 2 (per-segment
// handling time), Lemma 3 (per-chain handling time), Eq. 1 (server overhead
// epsilon per segment), Lemma 4 (PiCAS chains without accelerators) and
// Theorem 1 (PAAM chains, spin or suspend), with chains spanning executors as
// the sum of their sub-chains plus communication. docs/analysis.md maps each
// equation to the code and lists where rtaccel is more careful than the paper.
//
// The analysis fails safe: a chain whose recurrence passes its horizon, or
// whose bound relies on another chain that has none, is reported as not
// schedulable with the reason, never with a number that is not a bound.
//
// Everything here allocates and is meant for set-up time (the CLI, admission
// control at registration), not for real-time paths. Thread-compatible.
#ifndef RTACCEL_ANALYSIS_HPP_
#define RTACCEL_ANALYSIS_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "rtaccel/workload.hpp"

namespace rtaccel::analysis {

// How far a fixed-point iteration may go before the chain is declared
// unschedulable.
enum class Horizon {
  kDeadline,  // stop as soon as the bound passes the deadline (fastest)
  kPeriod,    // go on up to the period, so a miss is reported with its size
};

struct Options {
  Horizon horizon = Horizon::kPeriod;
  // Lemma 4 charges the blocking by a lower-priority callback with its CPU
  // WCET only. A single-threaded executor stays occupied while that callback
  // waits for its accelerator segments, so by default rtaccel charges those
  // too. false reproduces the paper's term exactly.
  bool lp_blocking_includes_accelerator = true;
  // A single-threaded executor holds its thread while a callback waits for
  // its segment, so no other segment of the same executor is queued or
  // running meanwhile: such segments are left out of a segment's hps and
  // lps (Lemmas 2 and 3). A higher-priority chain's segments on the same
  // executor are interference on the executor already. false: the paper's
  // sets, every chain of higher (lower) priority on the accelerator.
  bool one_segment_per_executor = true;
  // Lemma 1 counts ceil(t/T) + 1 activations of a higher-priority chain in a
  // window t (its release jitter added to t). Once that chain has a bound R
  // (from its nominal release to its end, jitter included), all of an
  // activation's work lies within R of the release, so at most
  // ceil((t + R) / T) activations reach the window; the smaller count is
  // taken. false: Lemma 1's count only.
  bool jitter_from_bounds = true;
  // The same count for the chains that have no bound yet as a chain is
  // analysed (lower chains on executors of higher OS priority on its core):
  // where the first analysis counted one of them by Lemma 1, the analysis
  // runs again with every bound of the first, each one valid, and keeps
  // each chain's smaller bound. Only with jitter_from_bounds.
  bool jitter_from_earlier_bounds = true;
  // The blocking callback's segments and the sub-chain's own are issued one
  // after another from one executor, within the sub-chain's window: one
  // activation of a higher chain delays them all at most once. Their wait
  // is bounded together by Lemma 3 over the union of their hps, when that
  // is less than the blocking callback's Lemma 2 bounds plus the sub-chain's
  // own handling time. Only with lp_blocking_includes_accelerator.
  bool blocking_shares_arrivals = true;
  // The lower callback that blocks a sub-chain of chain c (Lemma 4) is in
  // progress as the sub-chain becomes ready. Until it ends, no segment of a
  // callback c owns (every firing one of c's activations) can be issued:
  // c's earlier callbacks of this activation have ended, its later ones
  // wait behind the blocker on its executor, and its previous activation
  // ended within its period. Those segments are left out of what delays the
  // blocking callback's segments. false: every higher chain's segment on
  // the accelerator, c's included.
  bool blocking_without_own_segments = true;
  // A callback that every firing of which belongs to an activation of a
  // chain (the chain's head, or triggered by a topic only its predecessor on
  // the path publishes: see owned_) is counted once, not once per chain that
  // contains it: its segments' arrivals are at most those of the slowest
  // owning chain, and it adds nothing to the interference on a chain that
  // owns it, whose window holds only its own firing (the bound within the
  // period). The Autoware hot paths share their tail this way.
  bool shared_callbacks_once = true;
  // A callback that a chain owns and shares with other chains has an entry
  // in each of them, yet its every firing is one of the chain's
  // activations: for the chain's own segments (in its Lemmas 2 and 3, and
  // where the chain interferes with another) those entries are neither
  // higher nor lower segments. In the activation the firing has ended, is
  // the segment's own, or has not begun; the other activations end before
  // it starts or start after it ends, on the premise of the chain's bound
  // within its period. Where a callback of the chain blocks another chain,
  // whose analysis does not rest on that bound, they still count. Only with
  // shared_callbacks_once.
  bool shared_segments_are_own = true;
  // Chains that start at the same callback are released by its firings,
  // one activation each. A callback of chain H after the part of the path
  // it shares with chain C from there, fired only for H, runs in C's
  // activation only once that part has ended, and at most once (earlier
  // activations of H have ended, later ones begin after C's, both bounds
  // within the period): it does not delay C's callbacks and segments on
  // the common part, and delays those after it at most once, whatever the
  // window. Only with shared_callbacks_once.
  bool shared_heads = true;
  // A chain over several executors is bounded sub-chain by sub-chain, each
  // charged the higher work that reaches its own window: a higher chain
  // whose activation reaches two of them is charged in both. Over the
  // chain's activation as a whole, each unit of that work delays it once,
  // in whichever sub-chain it is then: the interference is also bounded by
  // the higher activations that reach the chain's whole window, each at its
  // largest charge in any sub-chain, and the smaller of the two is taken.
  // Chains that wait at a fusion keep the sum.
  bool interference_once_per_chain = true;
  // A callback with several trigger topics (a fusion) fires once each has a
  // message: a chain that reaches it on one topic waits there for the others.
  // The chain's pieces between its fusions are bounded one by one, and each
  // wait is bounded from the other topic's publisher: by the bound of its
  // chain through it where that chain is released with this one, else by
  // its period plus that bound (docs/analysis.md, "Fusions"). false: the
  // paper's chains, which do not wait.
  bool fusions_wait = true;
  // A fusion's firing takes one message of each input. Where a chain from a
  // timer brings every message of the topic it reaches the fusion on, the
  // fusion fires at most once per release, and an input of another rate that
  // publishes again between two firings is there when the next release
  // arrives: the wait counts from the fusion's last firing, not from a
  // message just taken (docs/analysis.md, "Fusions"). false: every release
  // may wait the other input's period and its bound. Only with fusions_wait.
  bool fusion_waits_from_last_firing = true;
  // Chains whose first callbacks are timers of one release group on one node
  // (Trigger::release_group: rtaccel's runner starts them at one instant;
  // unaligned ones are in none) are released from one instant on: where a lower one's period is a multiple of a higher
  // one's, every release of the lower is one of the higher's. The lower one,
  // bounded within the higher's period, has ended its previous activation at
  // the higher's release and starts this one, if any, after it: its
  // callbacks (those that fire only for it) do not block the higher's first
  // sub-chain (Lemma 4).
  bool released_together = true;
  // A chain's transfers between nodes are sequential: a higher-priority
  // transfer delays at most one of them, and together they wait at most for
  // what the higher flows send within the chain's limit
  // (NetworkTerms::chain_legs). false: each hop and request bounded on its
  // own, every higher transfer that may delay it counted in each.
  bool transfers_once_per_chain = true;

  // The paper's analysis exactly: its Lemma 4 blocking and its hps and lps.
  static Options paper() {
    Options options;
    options.lp_blocking_includes_accelerator = false;
    options.one_segment_per_executor = false;
    options.jitter_from_bounds = false;
    options.jitter_from_earlier_bounds = false;
    options.blocking_shares_arrivals = false;
    options.blocking_without_own_segments = false;
    options.shared_callbacks_once = false;
    options.shared_segments_are_own = false;
    options.shared_heads = false;
    options.interference_once_per_chain = false;
    options.fusions_wait = false;
    options.fusion_waits_from_last_firing = false;
    options.released_together = false;
    options.transfers_once_per_chain = false;
    return options;
  }
};

// The terms of a chain's bound; they add up to wcrt_ns.
struct Breakdown {
  uint64_t blocking_ns = 0;       // B_c: lower-priority callback in progress
  uint64_t cpu_ns = 0;            // E_c: the chain's own CPU work
  uint64_t accelerator_ns = 0;    // H_c^*: the chain's accelerator segments, queueing included
  uint64_t interference_ns = 0;   // higher-priority chains on the executor and the core
  uint64_t communication_ns = 0;  // hand-overs between executors
  uint64_t network_ns = 0;        // transfers over links between nodes
  uint64_t release_jitter_ns = 0; // the chain's first callback started late by the OS
  // Isolation: the memory-bandwidth regulator's own time on the chain's
  // executor cores (its thread preempts everything there once a period).
  uint64_t regulator_ns = 0;
  // The kernel's work for the links' transfers (softirqs) on the chain's
  // executor cores: Link::kernel_ns_per_kb of every message that can cross
  // a link of their nodes within the window.
  uint64_t network_kernel_ns = 0;
  // Waits at fusions for their other trigger topics (Options::fusions_wait).
  uint64_t fusion_wait_ns = 0;
};

// The regulator's time on CORE within a window of WINDOW_NS: a cost per
// period, in every period the window touches (Lemma 1's count); 0 when the
// workload's isolation does not regulate CORE.
uint64_t regulator_ns(const workload::Workload& workload, int core, uint64_t window_ns);
// A segment of WCET_NS on ACCELERATOR, stretched by the regulator when the
// accelerator is a core (the cpu backend) that it regulates.
uint64_t regulated_segment_ns(const workload::Workload& workload, size_t accelerator, uint64_t wcet_ns);

// A maximal run of a chain's callbacks on one executor (Gamma_c in the paper).
struct SubchainResult {
  std::string executor;
  bool bounded = false;
  uint64_t wcrt_ns = 0;  // R_c, valid when bounded
  uint64_t handling_ns = 0;  // H_c^* = min(lemma2_ns, lemma3_ns) + delta_c * epsilon
  uint64_t lemma2_ns = 0;    // H_c by Lemma 2 (sum over segments); UINT64_MAX if none
  uint64_t lemma3_ns = 0;    // H_c by Lemma 3 at the final R_c; UINT64_MAX if none
  bool handling_by_lemma3 = false;  // which bound gave the minimum H_c
  Breakdown breakdown;
};

struct ChainResult {
  std::string chain;
  int priority = 0;
  bool critical = true;
  uint64_t period_ns = 0;
  uint64_t deadline_ns = 0;
  bool bounded = false;      // a bound exists within the horizon
  uint64_t wcrt_ns = 0;      // valid when bounded
  bool schedulable = false;  // bounded && wcrt_ns <= deadline_ns
  Breakdown breakdown;
  std::string reason;  // why not schedulable; empty when schedulable
  std::vector<SubchainResult> subchains;

  // The largest term of the breakdown: "blocking", "cpu", "accelerator",
  // "interference", "communication", "network", "regulator", "network
  // kernel" or "fusion wait".
  const char* dominant_term() const;
};

// Analyzes every chain of `workload`, in the workload's chain order.
std::vector<ChainResult> analyze(const workload::Workload& workload, const Options& options = {});

// True when every critical chain is schedulable.
bool all_critical_schedulable(const std::vector<ChainResult>& results);

// Lemma 1: the number of requests a segment of a chain with period `period_ns`
// can issue in any window of `window_ns`: ceil(window / period) + 1.
uint64_t arrivals(uint64_t window_ns, uint64_t period_ns);

// Server bucket for a request priority: the distinct priorities `priorities`
// (any order; a list ascending and distinct is read without a copy) are
// divided into `levels` evenly sized groups, the highest priorities into the
// highest bucket (PAAM Sec. IV-C). Returns 0..levels-1, or -1 when
// `priority` is not among `priorities`.
int bucket_of(int priority, const std::vector<int>& priorities, int levels);
// The bucket of segment SEGMENT of callback CALLBACK: bucket_of() its
// callback's priority among every request priority on its accelerator, as
// the analysis and the server form the buckets.
int segment_bucket(const workload::Workload& workload, size_t callback, size_t segment);

// ---- Gangs (RT-Gang, Ali and Yun, RTAS 2019, Sec. III-B) -------------------
//
// Under one-gang-at-a-time the gangs form a uniprocessor fixed-priority
// system: a gang's job is delayed only by the jobs of higher-priority gangs,
// each of which stops it once and lets it resume once. With delta the cost of
// one gang preemption (measured by `rtaccel bench gang-preemption`):
//
//   R_i = C_i + sum over j in hp(i) of ceil(R_i / T_j) * (C_j + 2 delta)
//
// Gangs of one priority (a virtual gang) run together and do not delay each
// other through the lock; what they do to each other through the hardware
// belongs in their WCETs, as in the paper.
struct GangTask {
  std::string name;
  int priority = 1;       // higher first
  uint64_t wcet_ns = 0;   // C_i: the job's length with every thread running
  uint64_t period_ns = 0; // T_i: minimum inter-arrival time
  uint64_t deadline_ns = 0;
};

struct GangTaskResult {
  std::string name;
  bool bounded = false;  // a bound within the horizon
  uint64_t wcrt_ns = 0;
  bool schedulable = false;
  uint64_t interference_ns = 0;  // higher gangs' jobs
  uint64_t preemption_ns = 0;    // of which the 2 delta terms
  std::string reason;
};

std::vector<GangTaskResult> analyze_gang_tasks(const std::vector<GangTask>& tasks, uint64_t delta_ns,
                                               Horizon horizon = Horizon::kPeriod);

// ---- Bandwidth lock (BWLOCK++, Ali and Yun, ECRTS 2018, Sec. 7) -------------
//
// Real-time tasks on one core under fixed priorities; each GPU kernel or
// synchronous copy runs under the bandwidth lock, whose priority ceiling makes
// it non-preemptive. With E_i = C_i + G^m_i + G^e_i (CPU, copies, kernels,
// each measured with best-effort cores regulated at the task's threshold) and
// B_i the longest locked segment of a lower-priority task (Eq. 4):
//
//   R_i = E_i + B_i + sum over j in hp(i) of ceil(R_i / P_j) * E_j
struct BwlockTask {
  std::string name;
  int priority = 1;               // higher first
  uint64_t cpu_ns = 0;            // C_i
  uint64_t copy_ns = 0;           // G^m_i: synchronous copies, all of the job
  uint64_t kernel_ns = 0;         // G^e_i: GPU kernels, all of the job
  uint64_t longest_segment_ns = 0;  // the longest single kernel or copy
  uint64_t period_ns = 0;         // P_i
  uint64_t deadline_ns = 0;       // 0: the period
};

struct BwlockTaskResult {
  std::string name;
  bool bounded = false;
  uint64_t wcrt_ns = 0;
  bool schedulable = false;
  uint64_t blocking_ns = 0;       // B_i
  uint64_t interference_ns = 0;   // higher-priority jobs
  std::string reason;
};

std::vector<BwlockTaskResult> analyze_bwlock_tasks(const std::vector<BwlockTask>& tasks,
                                                   Horizon horizon = Horizon::kPeriod);

// ---- Transfers on a flow-controlled link (net layer) -----------------------
//
// One sending end of a link under the net layer's policy: transfers go in
// chunks, the highest priority first at every chunk boundary, FIFO among
// equal priorities. A transfer of flow i is delayed by at most one chunk of
// a lower priority plus what the transport already holds (the window), by
// one transfer of every other flow of its priority (constrained deadlines:
// at most one is ahead of it), and by the higher-priority transfers that
// arrive while it waits. With C_j the time flow j's transfer takes on the
// link (bytes at the link's rate, plus a cost per chunk):
//
//   R_i = C_i + B_i + sum_{j equal} C_j + sum_{j in hp(i)} ceil((R_i + J_j) / T_j) * C_j
//   B_i = min(chunk + window, largest lower-priority transfer) at the rate
//
// R_i is the communication term of a chain hop over the link.
struct NetLink {
  double bytes_per_s = 0;          // measured rate of the link
  uint64_t chunk_bytes = 64 << 10;
  uint64_t window_bytes = 0;       // held below the flow-control layer
  uint64_t per_chunk_ns = 0;       // the layer's cost per chunk (rtaccel bench net-overhead)
};

struct NetFlow {
  std::string name;
  int priority = 0;                // higher first
  uint64_t bytes = 0;              // per transfer
  uint64_t period_ns = 0;          // minimum time between transfers
  uint64_t jitter_ns = 0;          // release jitter of the transfers
  uint64_t deadline_ns = 0;        // 0: the period
};

struct NetFlowResult {
  std::string name;
  bool bounded = false;
  uint64_t wcrt_ns = 0;            // from the send call to the last byte at the receiver
  bool schedulable = false;
  uint64_t transmission_ns = 0;    // C_i
  uint64_t blocking_ns = 0;        // B_i
  uint64_t interference_ns = 0;    // equal and higher priorities
  uint64_t equal_ns = 0;           // of it, the other flows of its priority
  std::string reason;
};

// The time BYTES take on LINK alone: bytes at its rate plus a cost per chunk.
uint64_t net_transfer_ns(const NetLink& link, uint64_t bytes);

std::vector<NetFlowResult> analyze_net_link(const NetLink& link, const std::vector<NetFlow>& flows,
                                            Horizon horizon = Horizon::kDeadline);

// The network term of a workload whose callbacks sit on several nodes. Every
// topic that goes from its publisher's node to a subscriber on another node
// is a flow on the link joining them, one direction of it: bytes = the
// publisher's message_kb, period = the shortest period of the chains through
// the publisher, priority = that of the most critical chain carrying the hop
// (else the publisher's), jitter = the deadline of the most critical chain
// through the publisher (it publishes by then when that chain is
// schedulable). A segment of a callback on another node than its
// accelerator adds two flows, its request and its response (request_kb,
// response_kb, at the callback's period and priority). analyze_net_link
// bounds each flow among the others of its direction; a chain adds the bound
// of every hop of its path that crosses nodes and of every remote segment's
// request and response, with the higher flows' transfers shared among them
// (chain_legs).
class NetworkTerms {
 public:
  explicit NetworkTerms(const workload::Workload& workload);
  // The bound of the transfer from PUBLISHER to SUBSCRIBER (callback
  // indices): 0 on one node, kUnbounded when the link cannot carry its flows.
  uint64_t hop_ns(size_t publisher, size_t subscriber) const;
  // Request and response of CALLBACK's segment SEGMENT over the link to its
  // accelerator: 0 when both are on one node.
  uint64_t segment_ns(size_t callback, size_t segment) const;
  // Each flow's result, for rtaccel analyze: "topic a->b over link".
  const std::vector<std::pair<std::string, NetFlowResult>>& flows() const { return flows_; }
  // The kernel's work for the transfers on CORE within a window of
  // WINDOW_NS: for every flow over a link with kernel_ns_per_kb whose ends'
  // executors use CORE, its cost per message times the messages that can
  // cross within the window (jitter included, as for a sporadic task).
  uint64_t kernel_ns(int core, uint64_t window_ns) const;
  // The same work flow by flow, for a recurrence of another shape: each a
  // sporadic load on the cores it is charged on.
  struct KernelLoad {
    std::vector<int> cores;  // the executor cores of the link's nodes
    uint64_t ns_per_message, period_ns, jitter_ns;
  };
  std::vector<KernelLoad> kernel_loads(int core) const;

  // The transfers of one instance of a chain, leg by leg: its hops and its
  // remote segments' requests and responses. They are sequential (a hop
  // ends before its subscriber runs; a request's response before the
  // callback goes on), so a higher-priority transfer that delays one leg
  // delays no other, and together the legs on one direction of a link wait
  // at most for what its higher-priority flows send while the instance
  // runs: a flow with transfers of C_h, bound R_h, period T_h and jitter J_h
  // sends at most ceil((W + R_h + J_h) / T_h) of them while a window of W
  // is open (those that started before it included). Each leg keeps its
  // own transmission, blocking and equal-priority terms; the higher
  // priorities' share goes to the legs in path order, each up to its own
  // bound's, until the direction's total for the window is spent, so that
  // every prefix of the legs is bounded too. Where the chain waits at a
  // fusion, what follows the wait starts when another chain's message
  // arrives, not when this chain's earlier legs ended: the shares start
  // again there, each piece between fusions with the whole of its own.
  class ChainLegs {
   public:
    uint64_t hop_ns(size_t publisher, size_t subscriber) const;
    uint64_t segment_ns(size_t callback, size_t segment) const;

   private:
    friend class NetworkTerms;
    std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> hops_;
    std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> segments_;
  };
  // PATH's legs for an instance that ends within WINDOW_NS of its release
  // (a bounded chain's limit); UINT64_MAX: each leg's own bound, as
  // hop_ns and segment_ns give. WAITS (empty: none) marks the positions of
  // PATH where the chain waits at a fusion: after the hop into it, before
  // its requests.
  ChainLegs chain_legs(const std::vector<size_t>& path, uint64_t window_ns,
                       const std::vector<bool>& waits = {}) const;

 private:
  // A flow on one direction of a link, as analyze_net_link bounded it.
  struct Leg {
    std::pair<size_t, size_t> direction;  // (link, receiving node)
    NetFlow flow;
    NetFlowResult result;
  };

  std::vector<KernelLoad> kernel_;
  std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> hops_;
  std::vector<std::pair<std::pair<size_t, size_t>, uint64_t>> segments_;
  std::vector<std::pair<std::string, NetFlowResult>> flows_;
  std::vector<Leg> legs_;
  std::vector<std::pair<std::pair<size_t, size_t>, size_t>> hop_leg_;      // (publisher, subscriber) -> legs_
  std::vector<std::pair<std::pair<size_t, size_t>, size_t>> request_leg_;   // (callback, segment) -> legs_
  std::vector<std::pair<std::pair<size_t, size_t>, size_t>> response_leg_;
};

// Chains of a gang-scheduled workload (rtaccel run --gang). Every callback is
// a job of its executor's gang, with C = its CPU WCET plus its accelerator
// segments (plus the server overhead per segment), T = the shortest period of
// the chains through it. A callback is delayed by the callbacks of
// higher-priority gangs (C_j + 2 delta each, the recurrence above) and by
// the other callbacks of its own gang priority on its core (C_j each: its
// executor, or another executor sharing the core), and on its core by the
// regulator's thread and the kernel's work for the links (NetworkTerms::
// kernel_ns), as in the PAAM analysis. A chain's bound is its
// release jitter plus the sum of its callbacks' bounds plus a hand-over cost
// (communication) between executors, plus its waits at fusions
// (Options::fusions_wait). Each piece of a chain between the fusions it
// waits at (the whole chain where there are none) is also bounded as one
// window of the gang lock, and the smaller bound is taken.
std::vector<ChainResult> analyze_gangs(const workload::Workload& workload, const Options& options = {});

}  // namespace rtaccel::analysis

#endif  // RTACCEL_ANALYSIS_HPP_
