// rtaccel._core: the Python face of the C++ workload loader and analysis.
// Python never reimplements either; it formats, plots and drives experiments.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <tuple>

#include "accel_client.h"
#include "core/netns.h"
#include "core/percentile.h"
#include "core/realtime.h"
#include "exec/run.h"
#include "exec/run_options.h"
#include "isolate/regulate_options.h"
#include "rtaccel/analysis.hpp"
#include "rtaccel/isolate.h"
#include "rtaccel/chainset.hpp"
#include "rtaccel/workload.hpp"

namespace py = pybind11;
using namespace rtaccel;

namespace {

analysis::Horizon parse_horizon(const std::string& text) {
  if (text == "deadline") return analysis::Horizon::kDeadline;
  if (text == "period") return analysis::Horizon::kPeriod;
  throw py::value_error("horizon must be 'deadline' or 'period', got '" + text + "'");
}

// paper: the printed analysis exactly (analysis::Options::paper()); else
// rtaccel's, with its refinements unless refine is false.
analysis::Options make_options(const std::string& horizon, bool paper, bool refine = true) {
  analysis::Options options = paper ? analysis::Options::paper() : analysis::Options{};
  if (!paper && !refine) {
    options.one_segment_per_executor = false;
    options.jitter_from_bounds = false;
    options.jitter_from_earlier_bounds = false;
    options.blocking_shares_arrivals = false;
    options.blocking_without_own_segments = false;
    options.shared_callbacks_once = false;
    options.shared_segments_are_own = false;
    options.shared_heads = false;
    options.interference_once_per_chain = false;
    options.released_together = false;
    options.fusion_waits_from_last_firing = false;
  }
  options.horizon = parse_horizon(horizon);
  return options;
}

workload::Workload unwrap(Expected<workload::Workload> result, const py::object& error_type) {
  if (result) return result.take();
  py::list messages;
  for (const std::string& text : result.status().lines()) {
    // A file name need not be UTF-8; a message must still reach Python.
    PyObject* str = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                                         "backslashreplace");
    if (!str) throw py::error_already_set();
    messages.append(py::reinterpret_steal<py::str>(str));
  }
  PyErr_SetObject(error_type.ptr(), messages.ptr());
  throw py::error_already_set();
}


// An rtaccel call's -errno as OSError, WHAT its filename.
void check_errno(int err, const std::string& what) {
  if (err < 0) {
    errno = -err;
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, what.c_str());
    throw py::error_already_set();
  }
}

// The workload loader: Workload and its chains, load_file, load_string and the
// copies with the machine's calibration; WorkloadError for a workload that does not load.
void bind_workload(py::module_& m) {
  // WorkloadError(args[0] = list of "file:line:col: message" strings).
  static py::exception<std::runtime_error> workload_error(m, "WorkloadError", PyExc_ValueError);
  py::object error_type = workload_error;

  py::class_<workload::Chain>(m, "Chain")
      .def_readonly("name", &workload::Chain::name)
      .def_readonly("priority", &workload::Chain::priority)
      .def_readonly("period_ns", &workload::Chain::period_ns)
      .def_readonly("deadline_ns", &workload::Chain::deadline_ns)
      .def_readonly("critical", &workload::Chain::critical)
      .def_readonly("path", &workload::Chain::path);

  py::class_<workload::Workload>(m, "Workload")
      .def_readonly("name", &workload::Workload::name)
      .def_readonly("cores", &workload::Workload::cores)
      .def_readonly("chains", &workload::Workload::chains)
      .def_property_readonly("callbacks",
                             [](const workload::Workload& w) {
                               py::list names;
                               for (const auto& cb : w.callbacks) names.append(cb.name);
                               return names;
                             })
      .def_readonly("gang_scheduling", &workload::Workload::gang_scheduling)
      .def_readonly("gang_preemption_ns", &workload::Workload::gang_preemption_ns)
      .def_property_readonly("nodes",
                             [](const workload::Workload& w) {
                               py::list names;
                               for (const auto& n : w.nodes) names.append(n.name);
                               return names;
                             })
      // Each accelerator's backend ("cpu", "opencl", "cuda").
      .def_property_readonly("accelerator_backends",
                             [](const workload::Workload& w) {
                               py::list backends;
                               for (const auto& a : w.accelerators) backends.append(std::string(workload::to_string(a.backend)));
                               return backends;
                             })
      // The isolation section as a dict, or None without one.
      .def_property_readonly("isolation",
                             [](const workload::Workload& w) -> py::object {
                               const auto& iso = w.isolation;
                               if (!iso.declared) return py::none();
                               py::list chains;
                               for (size_t c : iso.bwlock_chains) chains.append(w.chains[c].name);
                               py::dict d;
                               d["cores"] = iso.cores;
                               d["period_ns"] = iso.period_ns;
                               d["cost_ns"] = iso.cost_ns;
                               d["threshold_mbps"] = iso.threshold_mbps == workload::Isolation::kUnlimited
                                                         ? py::object(py::none())
                                                         : py::object(py::int_(iso.threshold_mbps));
                               d["bwlock_chains"] = chains;
                               d["bwlock_threshold_mbps"] = iso.bwlock_threshold_mbps;
                               return d;
                             })
      .def("callback_priority", &workload::Workload::callback_priority);

  m.def(
      "without_isolation",
      [](workload::Workload w) {
        w.isolation = workload::Isolation();
        return w;
      },
      py::arg("workload"), "A copy of the workload without its isolation section (rtaccel analyze --no-isolation).");

  m.def(
      "load_workload",
      [error_type](const py::object& path, int machine_cores) {
        // The file system's bytes, as Python's own file functions take them:
        // a name need not be valid UTF-8.
        std::string native = py::module_::import("os").attr("fsencode")(path).cast<std::string>();
        workload::LoadOptions options;
        options.machine_cores = machine_cores;
        return unwrap(workload::load_file(native, options), error_type);
      },
      py::arg("path"), py::arg("machine_cores") = 0,
      "Load and validate a workload file; raises WorkloadError with every problem found.");
  m.def(
      "load_workload_string",
      [error_type](const std::string& text, const std::string& file_name, int machine_cores) {
        workload::LoadOptions options;
        options.machine_cores = machine_cores;
        return unwrap(workload::load_string(text, file_name, options), error_type);
      },
      py::arg("text"), py::arg("file_name") = "<string>", py::arg("machine_cores") = 0);

  m.def(
      "raise_overheads",
      [](workload::Workload w, uint64_t epsilon_ns, uint64_t kappa_ns, uint64_t jitter_ns,
         uint64_t link_kernel_ns_per_kb) {
        workload::raise_overheads(&w, epsilon_ns, kappa_ns, jitter_ns, link_kernel_ns_per_kb);
        return w;
      },
      py::arg("workload"), py::arg("epsilon_ns"), py::arg("kappa_ns"), py::arg("jitter_ns") = 0,
      py::arg("link_kernel_ns_per_kb") = 0,
      "A copy of the workload with its server overhead, preemption costs, release jitter and "
      "links' kernel work raised to at least these (the machine's calibration).");
}

// What an executor of a program's own callbacks (rtaccel.ros's) analyses:
// its chains as a workload, and the kernel's real-time throttling as a
// premise of their bound.
void bind_executor_analysis(py::module_& m) {
  m.def(
      "executor_workload",
      [](const std::string& name, const std::vector<std::tuple<std::string, int, int>>& executors,
         const std::vector<std::tuple<std::string, size_t, uint64_t>>& callbacks,
         const std::vector<std::tuple<std::string, int, uint64_t, uint64_t, std::vector<size_t>>>& chains) {
        workload::Workload w;
        w.name = name;
        w.cores = rtaccel_cores_usable();
        for (const auto& [ename, core, priority] : executors) {
          workload::Executor e;
          e.name = ename;
          e.core = core;
          e.priority = priority;
          w.executors.push_back(e);
        }
        for (const auto& [cname, executor, cpu_ns] : callbacks) {
          if (executor >= w.executors.size()) throw py::value_error("callback " + cname + ": no such executor");
          workload::Callback cb;
          cb.name = cname;
          cb.executor = executor;
          cb.cpu_ns = cpu_ns;
          cb.trigger.release_group = workload::Trigger::kUnaligned;
          w.callbacks.push_back(cb);
        }
        for (const auto& [cname, priority, period_ns, deadline_ns, path] : chains) {
          if (path.empty() || period_ns == 0) throw py::value_error("chain " + cname + ": no path or no period");
          workload::Chain c;
          c.name = cname;
          c.priority = priority;
          c.period_ns = period_ns;
          c.deadline_ns = deadline_ns ? deadline_ns : period_ns;
          for (size_t i : path) {
            if (i >= w.callbacks.size()) throw py::value_error("chain " + cname + ": no such callback");
            c.path.push_back(i);
          }
          w.callbacks[path[0]].trigger.timer_ns = period_ns;
          w.chains.push_back(c);
        }
        return w;
      },
      py::arg("name"), py::arg("executors"), py::arg("callbacks"), py::arg("chains"),
      "The system an executor of a program's own callbacks knows, as a workload to analyze(): "
      "EXECUTORS (name, core, SCHED_FIFO priority), CALLBACKS (name, executor index, WCET ns), "
      "CHAINS (name, priority, period ns, deadline ns or 0, path of callback indices). Each "
      "chain's first callback is a timer of its period, started at a phase nobody knows "
      "(the program's); the others follow their predecessor.");

  m.def(
      "rt_throttles",
      [](const std::vector<std::pair<uint64_t, uint64_t>>& callbacks) {
        std::vector<uint64_t> cpu, period;
        for (const auto& [c, t] : callbacks) cpu.push_back(c), period.push_back(t);
        char why[512] = "";
        return rtaccel_rt_throttles(cpu.data(), period.data(), cpu.size(), why, sizeof why) ? std::string(why)
                                                                                           : std::string();
      },
      py::arg("callbacks"),
      "Where the kernel's real-time throttling can stop a SCHED_FIFO thread that runs CALLBACKS "
      "((WCET ns, period ns) each): why (\"its callbacks may ask ...\"); else \"\" (core/realtime.h).");
}

// The PAAM response-time analysis (analysis.hpp): bounds per chain, with their
// breakdown, and the helpers the Python reports share.
void bind_paam_analysis(py::module_& m) {
  py::class_<analysis::Breakdown>(m, "Breakdown")
      .def_readonly("blocking_ns", &analysis::Breakdown::blocking_ns)
      .def_readonly("cpu_ns", &analysis::Breakdown::cpu_ns)
      .def_readonly("accelerator_ns", &analysis::Breakdown::accelerator_ns)
      .def_readonly("interference_ns", &analysis::Breakdown::interference_ns)
      .def_readonly("communication_ns", &analysis::Breakdown::communication_ns)
      .def_readonly("network_ns", &analysis::Breakdown::network_ns)
      .def_readonly("release_jitter_ns", &analysis::Breakdown::release_jitter_ns)
      .def_readonly("regulator_ns", &analysis::Breakdown::regulator_ns)
      .def_readonly("network_kernel_ns", &analysis::Breakdown::network_kernel_ns)
      .def_readonly("fusion_wait_ns", &analysis::Breakdown::fusion_wait_ns);

  py::class_<analysis::SubchainResult>(m, "SubchainResult")
      .def_readonly("executor", &analysis::SubchainResult::executor)
      .def_readonly("bounded", &analysis::SubchainResult::bounded)
      .def_readonly("wcrt_ns", &analysis::SubchainResult::wcrt_ns)
      .def_readonly("handling_ns", &analysis::SubchainResult::handling_ns)
      .def_readonly("lemma2_ns", &analysis::SubchainResult::lemma2_ns)
      .def_readonly("lemma3_ns", &analysis::SubchainResult::lemma3_ns)
      .def_readonly("handling_by_lemma3", &analysis::SubchainResult::handling_by_lemma3)
      .def_readonly("breakdown", &analysis::SubchainResult::breakdown);

  py::class_<analysis::ChainResult>(m, "ChainResult")
      .def_readonly("chain", &analysis::ChainResult::chain)
      .def_readonly("priority", &analysis::ChainResult::priority)
      .def_readonly("critical", &analysis::ChainResult::critical)
      .def_readonly("period_ns", &analysis::ChainResult::period_ns)
      .def_readonly("deadline_ns", &analysis::ChainResult::deadline_ns)
      .def_readonly("bounded", &analysis::ChainResult::bounded)
      .def_readonly("wcrt_ns", &analysis::ChainResult::wcrt_ns)
      .def_readonly("schedulable", &analysis::ChainResult::schedulable)
      .def_readonly("breakdown", &analysis::ChainResult::breakdown)
      .def_readonly("reason", &analysis::ChainResult::reason)
      .def_readonly("subchains", &analysis::ChainResult::subchains)
      .def_property_readonly("dominant_term", &analysis::ChainResult::dominant_term);

  m.def(
      "analyze",
      [](const workload::Workload& w, const std::string& horizon, bool paper, bool refine) {
        return analysis::analyze(w, make_options(horizon, paper, refine));
      },
      py::arg("workload"), py::arg("horizon") = "period", py::arg("paper") = false, py::arg("refine") = true,
      "PAAM response-time analysis of every chain (Theorem 1).");
  m.def(
      "analyze_gangs",
      [](const workload::Workload& w, const std::string& horizon) {
        return analysis::analyze_gangs(w, make_options(horizon, false));
      },
      py::arg("workload"), py::arg("horizon") = "period",
      "Response-time analysis of every chain under one-gang-at-a-time (RT-Gang).");

  m.def("all_critical_schedulable", &analysis::all_critical_schedulable, py::arg("results"),
        "True when every critical chain of analyze()'s results is schedulable.");
  m.def("arrivals", &analysis::arrivals, py::arg("window_ns"), py::arg("period_ns"),
        "Lemma 1: ceil(window / period) + 1.");
  m.def("bucket_of", &analysis::bucket_of, py::arg("priority"), py::arg("priorities"), py::arg("levels"));
  m.def(
      "percentile",
      [](std::vector<double> values, double q) {
        if (values.empty()) throw py::value_error("percentile of no values");
        if (!(q >= 0 && q <= 1)) throw py::value_error("percentile: q must be in [0, 1]");
        std::sort(values.begin(), values.end());
        return rtaccel_percentile_sorted(values.data(), values.size(), q);
      },
      py::arg("values"), py::arg("q"),
      "The Q-quantile (0..1) of VALUES as every rtaccel report computes it (core/percentile.h): "
      "nearest rank, a value that was measured.");
}

// Gang (RT-Gang) and bandwidth-lock (BWLOCK++) analyses of single cores.
void bind_isolation_analysis(py::module_& m) {
  py::class_<analysis::GangTask>(m, "GangTask")
      .def(py::init([](std::string name, int priority, uint64_t wcet_ns, uint64_t period_ns, uint64_t deadline_ns) {
             return analysis::GangTask{std::move(name), priority, wcet_ns, period_ns,
                                       deadline_ns ? deadline_ns : period_ns};
           }),
           py::arg("name"), py::arg("priority"), py::arg("wcet_ns"), py::arg("period_ns"), py::arg("deadline_ns") = 0)
      .def_readonly("name", &analysis::GangTask::name)
      .def_readonly("priority", &analysis::GangTask::priority)
      .def_readonly("wcet_ns", &analysis::GangTask::wcet_ns)
      .def_readonly("period_ns", &analysis::GangTask::period_ns)
      .def_readonly("deadline_ns", &analysis::GangTask::deadline_ns);
  py::class_<analysis::GangTaskResult>(m, "GangTaskResult")
      .def_readonly("name", &analysis::GangTaskResult::name)
      .def_readonly("bounded", &analysis::GangTaskResult::bounded)
      .def_readonly("wcrt_ns", &analysis::GangTaskResult::wcrt_ns)
      .def_readonly("schedulable", &analysis::GangTaskResult::schedulable)
      .def_readonly("interference_ns", &analysis::GangTaskResult::interference_ns)
      .def_readonly("preemption_ns", &analysis::GangTaskResult::preemption_ns)
      .def_readonly("reason", &analysis::GangTaskResult::reason);
  m.def(
      "analyze_gang_tasks",
      [](const std::vector<analysis::GangTask>& tasks, uint64_t delta_ns, const std::string& horizon) {
        return analysis::analyze_gang_tasks(tasks, delta_ns, make_options(horizon, true).horizon);
      },
      py::arg("tasks"), py::arg("delta_ns"), py::arg("horizon") = "period",
      "Uniprocessor response-time analysis over gangs with the gang preemption cost delta.");

  py::class_<analysis::BwlockTask>(m, "BwlockTask")
      .def(py::init([](std::string name, int priority, uint64_t cpu_ns, uint64_t copy_ns, uint64_t kernel_ns,
                       uint64_t longest_segment_ns, uint64_t period_ns, uint64_t deadline_ns) {
             return analysis::BwlockTask{std::move(name), priority, cpu_ns, copy_ns, kernel_ns,
                                         longest_segment_ns, period_ns, deadline_ns};
           }),
           py::arg("name"), py::arg("priority"), py::arg("cpu_ns"), py::arg("copy_ns"), py::arg("kernel_ns"),
           py::arg("longest_segment_ns"), py::arg("period_ns"), py::arg("deadline_ns") = 0);
  py::class_<analysis::BwlockTaskResult>(m, "BwlockTaskResult")
      .def_readonly("name", &analysis::BwlockTaskResult::name)
      .def_readonly("bounded", &analysis::BwlockTaskResult::bounded)
      .def_readonly("wcrt_ns", &analysis::BwlockTaskResult::wcrt_ns)
      .def_readonly("schedulable", &analysis::BwlockTaskResult::schedulable)
      .def_readonly("blocking_ns", &analysis::BwlockTaskResult::blocking_ns)
      .def_readonly("interference_ns", &analysis::BwlockTaskResult::interference_ns)
      .def_readonly("reason", &analysis::BwlockTaskResult::reason);
  m.def(
      "analyze_bwlock_tasks",
      [](const std::vector<analysis::BwlockTask>& tasks, const std::string& horizon) {
        return analysis::analyze_bwlock_tasks(tasks, make_options(horizon, true).horizon);
      },
      py::arg("tasks"), py::arg("horizon") = "period",
      "Fixed-priority RTA of one real-time core whose GPU segments hold the bandwidth lock "
      "(BWLOCK++ Eq. 4).");
}

// The net layer's analysis: flows sharing a flow-controlled link, and its transports.
void bind_net_analysis(py::module_& m) {
  py::class_<analysis::NetLink>(m, "NetLink")
      .def(py::init([](double bytes_per_s, uint64_t chunk_bytes, uint64_t window_bytes, uint64_t per_chunk_ns) {
             return analysis::NetLink{bytes_per_s, chunk_bytes, window_bytes, per_chunk_ns};
           }),
           py::arg("bytes_per_s"), py::arg("chunk_bytes") = 64 << 10, py::arg("window_bytes") = 128 << 10,
           py::arg("per_chunk_ns") = 0);
  py::class_<analysis::NetFlow>(m, "NetFlow")
      .def(py::init([](std::string name, int priority, uint64_t bytes, uint64_t period_ns, uint64_t jitter_ns,
                       uint64_t deadline_ns) {
             return analysis::NetFlow{std::move(name), priority, bytes, period_ns, jitter_ns, deadline_ns};
           }),
           py::arg("name"), py::arg("priority"), py::arg("bytes"), py::arg("period_ns"), py::arg("jitter_ns") = 0,
           py::arg("deadline_ns") = 0);
  py::class_<analysis::NetFlowResult>(m, "NetFlowResult")
      .def_readonly("name", &analysis::NetFlowResult::name)
      .def_readonly("bounded", &analysis::NetFlowResult::bounded)
      .def_readonly("wcrt_ns", &analysis::NetFlowResult::wcrt_ns)
      .def_readonly("schedulable", &analysis::NetFlowResult::schedulable)
      .def_readonly("transmission_ns", &analysis::NetFlowResult::transmission_ns)
      .def_readonly("blocking_ns", &analysis::NetFlowResult::blocking_ns)
      .def_readonly("interference_ns", &analysis::NetFlowResult::interference_ns)
      .def_readonly("reason", &analysis::NetFlowResult::reason);
  m.def("net_transfer_ns", &analysis::net_transfer_ns, py::arg("link"), py::arg("bytes"),
        "The time BYTES take alone on a flow-controlled link.");
  m.def(
      "analyze_net_link",
      [](const analysis::NetLink& link, const std::vector<analysis::NetFlow>& flows, const std::string& horizon) {
        return analysis::analyze_net_link(link, flows, make_options(horizon, false).horizon);
      },
      py::arg("link"), py::arg("flows"), py::arg("horizon") = "deadline",
      "Bounds on the transfers of flows sharing one flow-controlled link (the net layer's policy).");
  m.def(
      "net_transports",
      []() {
        std::vector<std::string> names;
        for (int i = 0; rtaccel_net_transport_at(i); ++i) names.push_back(rtaccel_net_transport_at(i)->name);
        return names;
      },
      "The net layer's transports by name, as workloads and addresses spell them (rtaccel/net.h).");
}

// The gang lock (isolate layer). Methods release the GIL: job_begin
// blocks while a higher gang runs, and a parked thread must not hold it.
void bind_gang_lock(py::module_& m) {
  struct GangLock {
    rtaccel_gang_lock_t* lock = nullptr;
    ~GangLock() { rtaccel_gang_lock_close(lock); }
  };
  py::class_<GangLock>(m, "GangLock")
      .def(py::init([](const std::string& name) {
             auto g = std::make_unique<GangLock>();
             check_errno(rtaccel_gang_lock_open(name.c_str(), &g->lock), "gang lock '" + name + "'");
             return g;
           }),
           py::arg("name"))
      .def_static(
          "unlink", [](const std::string& name) { check_errno(rtaccel_gang_lock_unlink(name.c_str()), name); },
          py::arg("name"))
      .def(
          "join",
          [](GangLock& g, const std::string& gang, int priority, uint32_t threshold_mbps) {
            check_errno(rtaccel_gang_join(g.lock, gang.c_str(), priority, threshold_mbps), "join gang '" + gang + "'");
          },
          py::arg("gang"), py::arg("priority"), py::arg("threshold_mbps") = 0)
      .def("status", [](GangLock& g) {
        rtaccel_gang_status st{};
        check_errno(rtaccel_gang_lock_status(g.lock, &st), "status");
        py::dict d;
        d["running_priority"] = st.running_priority;
        d["threshold_mbps"] = st.threshold_mbps;
        d["running"] = st.running;
        d["waiting"] = st.waiting;
        d["parked"] = st.parked;
        d["members"] = st.members;
        d["preemptions"] = st.preemptions;
        d["recoveries"] = st.recoveries;
        return d;
      });
  m.def("gang_leave", []() { check_errno(rtaccel_gang_leave(), "leave"); });
  m.def("gang_job_begin", []() {
    int err;
    {
      py::gil_scoped_release unlocked;
      err = rtaccel_gang_job_begin();
    }
    check_errno(err, "job_begin");
  });
  m.def("gang_job_end", []() {
    int err;
    {
      py::gil_scoped_release unlocked;
      err = rtaccel_gang_job_end();
    }
    check_errno(err, "job_end");
  });
  m.def("gang_self_stats", []() {
    rtaccel_gang_thread_stats st{};
    check_errno(rtaccel_gang_self_stats(&st), "stats");
    py::dict d;
    d["jobs"] = st.jobs;
    d["waits"] = st.waits;
    d["parks"] = st.parks;
    d["parked_ns"] = st.parked_ns;
    return d;
  });
}

// The bandwidth lock: a holder takes and releases it without a system
// call, so the GIL is kept (the ceiling option, which does call, is short).
void bind_bwlock(py::module_& m) {
  struct BwLock {
    rtaccel_bwlock_t* lock = nullptr;
    ~BwLock() { rtaccel_bwlock_close(lock); }
  };
  struct BwHolder {
    rtaccel_bwlock_holder_t* holder = nullptr;
    ~BwHolder() { rtaccel_bwlock_holder_destroy(holder); }
  };
  py::class_<BwHolder>(m, "BwLockHolder")
      .def("take", [](BwHolder& h) { check_errno(rtaccel_bwlock_take(h.holder), "take"); })
      .def("release", [](BwHolder& h) { check_errno(rtaccel_bwlock_release(h.holder), "release"); })
      .def("close", [](BwHolder& h) {
        rtaccel_bwlock_holder_destroy(h.holder);
        h.holder = nullptr;
      });
  py::class_<BwLock>(m, "BwLock")
      .def(py::init([](const std::string& name) {
             auto b = std::make_unique<BwLock>();
             check_errno(rtaccel_bwlock_open(name.c_str(), &b->lock), "bandwidth lock '" + name + "'");
             return b;
           }),
           py::arg("name"))
      .def_static(
          "unlink", [](const std::string& name) { check_errno(rtaccel_bwlock_unlink(name.c_str()), name); },
          py::arg("name"))
      .def(
          "holder",
          [](BwLock& b, const std::string& label, uint32_t threshold_mbps, int ceiling) {
            auto h = std::make_unique<BwHolder>();
            check_errno(rtaccel_bwlock_holder_init(b.lock, label.c_str(), threshold_mbps, ceiling, &h->holder),
                  "holder '" + label + "'");
            return h;
          },
          py::arg("label"), py::arg("threshold_mbps"), py::arg("ceiling_priority") = 0,
          py::keep_alive<0, 1>())
      .def("status", [](BwLock& b) {
        rtaccel_bwlock_status st{};
        check_errno(rtaccel_bwlock_get_status(b.lock, &st), "status");
        py::dict d;
        d["threshold_mbps"] = st.threshold_mbps == RTACCEL_BWLOCK_UNLIMITED ? py::object(py::none())
                                                                          : py::object(py::int_(st.threshold_mbps));
        d["held"] = st.held;
        d["holders"] = st.holders;
        d["takes"] = st.takes;
        d["reaped"] = st.reaped;
        return d;
      })
      .def("reap", [](BwLock& b) {
        int n = rtaccel_bwlock_reap(b.lock);
        check_errno(n, "reap");
        return n;
      });
}

// Network namespaces and veth pairs, as rtaccel run makes them (core/netns.h).
void bind_netns(py::module_& m) {
  m.def(
      "netns_add",
      [](const std::string& ns) {
        char why[768];
        if (rtaccel_netns_add(ns.c_str(), why, sizeof(why))) throw std::runtime_error(why);
      },
      py::arg("ns"), "ip netns add NS, its loopback up; RuntimeError says what failed.");
  m.def(
      "netns_del", [](const std::string& ns) { rtaccel_netns_del(ns.c_str()); }, py::arg("ns"),
      "ip netns del NS, best effort.");
  m.def(
      "veth_join",
      [](std::tuple<std::string, std::string, std::string> a, std::tuple<std::string, std::string, std::string> b) {
        const rtaccel_veth_end ends[2] = {
            {std::get<0>(a).c_str(), std::get<1>(a).c_str(), std::get<2>(a).c_str(), nullptr, 0, 0},
            {std::get<0>(b).c_str(), std::get<1>(b).c_str(), std::get<2>(b).c_str(), nullptr, 0, 0}};
        char why[768];
        if (rtaccel_veth_join(ends, why, sizeof(why))) throw std::runtime_error(why);
      },
      py::arg("a"), py::arg("b"),
      "A veth pair between A and B, each (namespace, interface, address/prefix), up; RuntimeError "
      "says what failed.");
}

// Random chainsets (the PAAM paper's schedulability experiments).
void bind_chainset(py::module_& m) {
  py::class_<analysis::ChainsetParams>(m, "ChainsetParams")
      .def(py::init<>())
      .def_readwrite("chains", &analysis::ChainsetParams::chains)
      .def_readwrite("callbacks_per_chain", &analysis::ChainsetParams::callbacks_per_chain)
      .def_readwrite("cores", &analysis::ChainsetParams::cores)
      .def_readwrite("executor_per_chain", &analysis::ChainsetParams::executor_per_chain)
      .def_readwrite("utilization", &analysis::ChainsetParams::utilization)
      .def_readwrite("accel_to_cpu", &analysis::ChainsetParams::accel_to_cpu)
      .def_readwrite("min_period_ns", &analysis::ChainsetParams::min_period_ns)
      .def_readwrite("max_period_ns", &analysis::ChainsetParams::max_period_ns)
      .def_readwrite("priority_levels", &analysis::ChainsetParams::priority_levels)
      .def_readwrite("preemption_cost_ns", &analysis::ChainsetParams::preemption_cost_ns)
      .def_readwrite("overhead_ns", &analysis::ChainsetParams::overhead_ns)
      .def_property(
          "spin", [](const analysis::ChainsetParams& p) { return p.wait == workload::WaitMode::kSpin; },
          [](analysis::ChainsetParams& p, bool spin) {
            p.wait = spin ? workload::WaitMode::kSpin : workload::WaitMode::kSuspend;
          });

  m.def(
      "generate_chainset",
      [](const analysis::ChainsetParams& params, uint64_t seed) {
        std::mt19937_64 rng(seed);
        return analysis::generate_chainset(params, rng);
      },
      py::arg("params"), py::arg("seed"));
  m.def(
      "acceptance",
      [](const analysis::ChainsetParams& params, int sets, uint64_t seed, const std::string& horizon,
         bool paper) {
        const auto options = make_options(horizon, paper);
        py::gil_scoped_release release;  // lets experiment points run on several threads
        auto a = analysis::acceptance(params, sets, seed, options);
        return std::make_pair(a.schedulable, a.sets);
      },
      py::arg("params"), py::arg("sets"), py::arg("seed"), py::arg("horizon") = "deadline",
      py::arg("paper") = false,
      "Number of schedulable chainsets out of `sets` generated from `seed`: (schedulable, sets).");
}

void bind_run_options(py::module_& m) {
  // A run's options, the table rtaccel-exec parses with (exec/run_options.h):
  // `rtaccel run`'s parser and the command line it hands rtaccel-exec are
  // made from it.
  m.def(
      "run_options",
      [] {
        py::list out;
        for (const exec::RunOptionSpec& spec : exec::run_option_specs()) {
          py::dict d;
          d["name"] = spec.name;
          d["short"] = spec.short_name ? py::object(py::str(std::string(1, spec.short_name))) : py::none();
          d["value"] = spec.value ? py::object(py::str(spec.value)) : py::none();
          d["default"] = spec.given ? py::object(py::str(spec.given)) : py::none();
          d["alone"] = spec.alone ? py::object(py::str(spec.alone)) : py::none();
          d["repeated"] = spec.repeated;
          d["for_users"] = spec.for_users;
          d["help"] = spec.help;
          out.append(d);
        }
        return out;
      },
      "rtaccel-exec's options, in its usage's order: dicts of name, short, value (None: a flag), "
      "default (None: none), alone (what `rtaccel run --NAME` means without a value; None: it needs one), "
      "repeated, for_users (False: what rtaccel itself gives) and help.");
  m.def(
      "check_run_option",
      [](const std::string& name, const std::string& value) -> std::optional<std::string> {
        const exec::RunOptionSpec* spec = exec::find_run_option(name);
        if (!spec) return "no option --" + name;
        exec::RunOptions scratch;
        if (spec->set(&scratch, spec->value ? value.c_str() : nullptr)) return std::nullopt;
        return "--" + name + " takes " + spec->takes;
      },
      py::arg("name"), py::arg("value"),
      "None where rtaccel-exec takes VALUE for --NAME, else what it takes (\"--duration takes seconds, "
      "0.001..86400\").");
}

void bind_regulate_options(py::module_& m) {
  // rtaccel-isolate regulate's options, one table (isolate/regulate_options.h),
  // and the command line a run hands it (exec/run.h regulator_args):
  // tests/python/test_regulate_options.py holds them, the usage and the docs
  // to each other.
  m.def(
      "regulate_options",
      [] {
        py::list out;
        size_t n;
        const regulate_option_spec* specs = regulate_option_specs(&n);
        for (size_t i = 0; i < n; ++i) {
          py::dict d;
          d["name"] = specs[i].name;
          d["value"] = specs[i].value ? py::object(py::str(specs[i].value)) : py::none();
          d["help"] = specs[i].help;
          out.append(d);
        }
        return out;
      },
      "rtaccel-isolate regulate's options, in its usage's order: dicts of name, value (None: a flag) and help.");
  m.def(
      "check_regulate_option",
      [](const std::string& name, const std::string& value) -> std::optional<std::string> {
        const regulate_option_spec* spec = regulate_find_option(name.c_str());
        if (!spec) return "no option --" + name;
        regulate_options scratch;
        regulate_options_defaults(&scratch);
        if (spec->set(&scratch, spec->value ? value.c_str() : nullptr)) return std::nullopt;
        return "--" + name + " takes " + spec->takes;
      },
      py::arg("name"), py::arg("value"),
      "None where rtaccel-isolate regulate takes VALUE for --NAME, else what it takes (\"--period-us takes "
      "microseconds, 100..1000000\").");
  m.def(
      "regulator_args",
      [](const workload::Workload& w, bool gang, const std::string& name, const std::string& cgroup,
         const std::string& out) { return exec::regulator_args(w, gang, name, cgroup, out); },
      py::arg("workload"), py::arg("gang"), py::arg("name") = "run-1", py::arg("cgroup") = "rtaccel-run-1",
      py::arg("out") = "out",
      "rtaccel-isolate's command line (after the program) for the regulator of a run of WORKLOAD under "
      "isolation, as rtaccel run starts it.");
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "rtaccel core: workload loader, PAAM response-time analysis and the accelerator server's client (C++)";
  m.attr("__version__") = RTACCEL_VERSION;
  bind_workload(m);
  bind_paam_analysis(m);
  bind_executor_analysis(m);
  bind_isolation_analysis(m);
  bind_net_analysis(m);
  bind_gang_lock(m);
  bind_bwlock(m);
  bind_netns(m);
  bind_chainset(m);
  bind_run_options(m);
  bind_regulate_options(m);
  bind_accel_client(m);
}
