"""Formatting of the PAAM response-time analysis (computed in C++)."""

from __future__ import annotations

import json
import platform
import sys
from datetime import datetime, timezone

from rtaccel import _core

FORMAT_VERSION = 1

UNBOUNDED_NS = 2**64 - 1  # how the core marks a bound that does not exist


def _us(ns: int) -> float:
    return ns / 1000.0


def _bound_us(ns: int):
    return None if ns == UNBOUNDED_NS else _us(ns)


def _breakdown(b) -> dict:
    return {
        "blocking_us": _us(b.blocking_ns),
        "cpu_us": _us(b.cpu_ns),
        "accelerator_us": _us(b.accelerator_ns),
        "interference_us": _us(b.interference_ns),
        "communication_us": _us(b.communication_ns),
        "network_us": _us(b.network_ns),
        "release_jitter_us": _us(b.release_jitter_ns),
        "regulator_us": _us(b.regulator_ns),
        "network_kernel_us": _us(b.network_kernel_ns),
        "fusion_wait_us": _us(b.fusion_wait_ns),
    }


def chain_to_dict(r) -> dict:
    """One chain's result as plain JSON-ready data (times in microseconds)."""
    return {
        "chain": r.chain,
        "priority": r.priority,
        "critical": r.critical,
        "period_us": _us(r.period_ns),
        "deadline_us": _us(r.deadline_ns),
        "wcrt_us": _us(r.wcrt_ns) if r.bounded else None,
        "schedulable": r.schedulable,
        "dominant": r.dominant_term if r.bounded else None,
        "breakdown": _breakdown(r.breakdown),
        "reason": r.reason,
        "subchains": [
            {
                "executor": s.executor,
                "wcrt_us": _us(s.wcrt_ns) if s.bounded else None,
                "handling_us": _us(s.handling_ns),
                "lemma2_us": _bound_us(s.lemma2_ns),
                "lemma3_us": _bound_us(s.lemma3_ns),
                "handling_bound": "lemma3" if s.handling_by_lemma3 else "lemma2",
                "breakdown": _breakdown(s.breakdown),
            }
            for s in r.subchains
        ],
    }


def analyze_file(path: str, horizon: str = "period", paper_blocking: bool = False,
                 machine_cores: int = 0, calibration: dict | None = None, gang: bool | None = None,
                 isolation: bool | None = None):
    """Loads and analyzes a workload file; returns (workload, results). A
    calibration (``rtaccel calibrate``) raises the workload's overheads to the
    machine's. ISOLATION False analyzes it without its isolation section, as
    `rtaccel run --no-isolation` runs it."""
    workload = _core.load_workload(path, machine_cores=machine_cores)
    if isolation is False:
        workload = _core.without_isolation(workload)
    elif isolation and workload.isolation is None:
        raise _core.WorkloadError(f"{path}: --isolation: the workload has no isolation section")
    if calibration:
        workload = _core.raise_overheads(workload, int(calibration["epsilon_us"] * 1000),
                                         int(calibration["kappa_us"] * 1000),
                                         int(calibration.get("release_jitter_us", 0) * 1000),
                                         int(calibration.get("link_kernel_ns_per_kb", 0)))
    if workload_gang_scheduled(workload, gang):
        return workload, _core.analyze_gangs(workload, horizon=horizon)
    results = _core.analyze(workload, horizon=horizon, paper=paper_blocking)
    return workload, results


def workload_gang_scheduled(workload, gang: bool | None = None) -> bool:
    """Gang scheduling as `rtaccel run` decides it: the option, else the workload."""
    return workload.gang_scheduling if gang is None else gang


def to_json(path: str, workload, results, options: dict) -> str:
    doc = {
        "format_version": FORMAT_VERSION,
        "command": " ".join(sys.argv),
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.node(),
        "workload": {"file": path, "name": workload.name},
        "options": options,
        "all_critical_schedulable": _core.all_critical_schedulable(results),
        "chains": [chain_to_dict(r) for r in results],
    }
    return json.dumps(doc, indent=2)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def _overheads_lines(options: dict) -> list[str]:
    """Whose overheads the bounds took: this machine's calibration, or the
    workload's where the machine has none."""
    cal = options.get("calibration")
    if cal:
        return [f"# overheads at least this machine's ({cal['path']}): epsilon {cal['epsilon_us']:.0f} us, "
                f"kappa {cal['kappa_us']:.0f} us, release jitter {cal['release_jitter_us']:.0f} us"]
    if options.get("uncalibrated"):
        return [f"# overheads: the workload's; this machine has no calibration at {options['uncalibrated']} "
                "(`rtaccel calibrate` measures them in seconds)"]
    return []


def format_table(path: str, workload, results, options: dict) -> str:
    """cyclictest-style text: '#' status lines, then one fixed-width row per chain."""
    first = max([24] + [len(r.chain) for r in results])  # names whole: two may share a prefix
    lines = [
        f"# rtaccel analyze {path}: workload '{workload.name}', {len(results)} chains",
        (f"# one gang at a time (RT-Gang): gang preemption cost "
         f"{workload.gang_preemption_ns / 1000:.0f} us, charged twice per higher-priority job"
         if options.get("gang") else
         f"# horizon: {options['horizon']}; "
         + ("analysis: the paper's as printed (lower-priority blocking: CPU only)"
            if options["paper_blocking"] else
            "analysis: rtaccel's (lower-priority blocking: CPU and accelerator; "
            "the refinements of docs/analysis.md)")),
        *_overheads_lines(options),
        f"{'chain':<{first}} {'prio':>5} {'crit':>4} {'period_us':>10} {'deadline_us':>11} "
        f"{'wcrt_us':>10} {'sched':>5}  {'dominant':<12} {'blocking':>9} {'cpu':>9} "
        f"{'accel':>9} {'interf':>9} {'comm':>7} {'net':>9} {'regul':>7} {'fusion':>7}",
    ]
    iso = workload.isolation
    if iso is not None:
        # Which terms isolation brought, and what it promises in exchange.
        cores = ("core(s) " + ",".join(str(c) for c in iso["cores"])) if iso["cores"] else "every core"
        lines.insert(2, f"# isolation: the regulator on {cores}, {iso['cost_ns'] / 1000:.0f} us "
                        f"every {iso['period_ns'] / 1000:.0f} us: 'regul' on the executors' cores, and "
                        "in 'accel' on a regulated cpu accelerator's core; WCETs are to be measured "
                        "under regulation (rtaccel run reports them)"
                        + (f"; bandwidth lock held by {', '.join(iso['bwlock_chains'])} at "
                           f"{iso['bwlock_threshold_mbps']} MB/s per best-effort core"
                           if iso["bwlock_chains"] else ""))
    if any((r.breakdown.fusion_wait_ns for r in results)):
        lines.insert(2, "# fusions: 'fusion' is the wait at fusion callbacks for their other inputs "
                        "(docs/analysis.md, \"Fusions\")")
    if any((r.breakdown.network_kernel_ns for r in results)):
        lines.insert(2, "# links: 'net' holds the transfers' bounds and the kernel's work for them "
                        "(softirqs, kernel_ns_per_kb) on the executors' cores at both ends")
    for r in results:
        d = chain_to_dict(r)
        # Terms of a chain without a bound are partial sums: show none.
        b = d["breakdown"] if r.bounded else dict.fromkeys(d["breakdown"])
        net = None if b["network_us"] is None else b["network_us"] + b["network_kernel_us"]
        lines.append(
            f"{r.chain:<{first}} {r.priority:>5} {'yes' if r.critical else 'no':>4} "
            f"{_fmt(d['period_us']):>10} {_fmt(d['deadline_us']):>11} {_fmt(d['wcrt_us']):>10} "
            f"{'yes' if r.schedulable else 'NO':>5}  {d['dominant'] or '-':<12} "
            f"{_fmt(b['blocking_us']):>9} {_fmt(b['cpu_us']):>9} {_fmt(b['accelerator_us']):>9} "
            f"{_fmt(b['interference_us']):>9} {_fmt(b['communication_us']):>7} {_fmt(net):>9} "
            f"{_fmt(b['regulator_us']):>7} {_fmt(b['fusion_wait_us']):>7}"
        )
    for r in results:
        if r.reason:
            lines.append(f"# {r.chain}: {r.reason}")
    ok = _core.all_critical_schedulable(results)
    lines.append("# all critical chains schedulable" if ok else "# some critical chain is NOT schedulable")
    return "\n".join(lines)
