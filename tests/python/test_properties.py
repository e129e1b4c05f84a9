"""Property tests of the analysis over random small workloads (hypothesis).

Workloads are generated as YAML and go through the same loader users use.
Some chains fuse their path with another chain's topic (a fusion callback),
some branch off the first callbacks of an earlier chain.
"""

import copy

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtaccel import _core

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def workloads(draw, levels=None):
    n_exec = draw(st.integers(1, 2))
    doc = {
        "version": 1,
        "name": "prop",
        "platform": {"accelerators": [{
            "name": "acc", "backend": "cpu", "core": 3,
            "priority_levels": levels if levels is not None else draw(st.integers(1, 4)),
            "preemption_cost_us": draw(st.integers(0, 200))}]},
        "server": {"core": 3, "overhead_us": draw(st.integers(0, 100))},
        "executors": [{"name": f"e{i}", "core": draw(st.integers(0, 1)), "priority": 10 + i}
                      for i in range(n_exec)],
        "callbacks": [],
        "chains": [],
    }
    n_chains = draw(st.integers(1, 4))
    priorities = draw(st.lists(st.integers(1, 100), min_size=n_chains, max_size=n_chains, unique=True))
    # Periods from a short list, so that chains released together (one
    # period) are common.
    periods = draw(st.lists(st.integers(20, 400), min_size=1, max_size=3))
    for c in range(n_chains):
        period = draw(st.sampled_from(periods))
        earlier = [cb["name"] for cb in doc["callbacks"]]
        path = []
        if doc["chains"] and draw(st.integers(0, 2)) == 0:
            # A branch: the first callbacks of an earlier chain, then its own.
            trunk = draw(st.sampled_from(doc["chains"]))["path"]
            path = list(trunk[:draw(st.integers(1, len(trunk)))])
        for k in range(len(path), len(path) + draw(st.integers(1, 3))):
            name = f"c{c}_{k}"
            trigger = {"timer_ms": period} if k == 0 else {"topic": path[-1]}
            others = [topic for topic in earlier if not path or topic != path[-1]]
            if k > 0 and others and draw(st.integers(0, 2)) == 0:
                # A fusion of its predecessor's topic and an earlier chain's.
                trigger = {"topics": [path[-1], draw(st.sampled_from(others))]}
            cb = {"name": name, "executor": f"e{draw(st.integers(0, n_exec - 1))}",
                  "trigger": trigger,
                  "publishes": name, "cpu_us": draw(st.integers(0, 3000)),
                  "wait": draw(st.sampled_from(["spin", "suspend"]))}
            segments = [{"accelerator": "acc", "service": "busy", "wcet_us": draw(st.integers(1, 4000))}
                        for _ in range(draw(st.integers(0, 2)))]
            if segments:
                cb["segments"] = segments
            doc["callbacks"].append(cb)
            path.append(name)
        doc["chains"].append({"name": f"chain{c}", "priority": priorities[c], "path": path})
    return doc


def load(doc):
    return _core.load_workload_string(yaml.safe_dump(doc), "prop.yaml", machine_cores=4)


def analyze(doc, **kw):
    return {r.chain: r for r in _core.analyze(load(doc), **kw)}


def analyze_gangs(doc):
    return {r.chain: r for r in _core.analyze_gangs(load(doc))}


def all_terms(b):
    return (b.blocking_ns + b.cpu_ns + b.accelerator_ns + b.interference_ns + b.communication_ns
            + b.network_ns + b.network_kernel_ns + b.release_jitter_ns + b.regulator_ns + b.fusion_wait_ns)


# The PAAM analysis and the gang analysis (rtaccel run --gang) alike.
BOTH = pytest.mark.parametrize("analysis", [analyze, analyze_gangs], ids=["paam", "gang"])


def own_execution_ns(doc, chain):
    names = set(next(c for c in doc["chains"] if c["name"] == chain)["path"])
    total = 0
    for cb in doc["callbacks"]:
        if cb["name"] in names:
            total += cb["cpu_us"] * 1000 + sum(s["wcet_us"] * 1000 for s in cb.get("segments", []))
    return total


@BOTH
@SETTINGS
@given(workloads())
def test_bound_covers_the_chains_own_execution_and_is_the_sum_of_its_terms(analysis, doc):
    for name, r in analysis(doc).items():
        if r.bounded:
            assert r.wcrt_ns >= own_execution_ns(doc, name)
            assert r.wcrt_ns == all_terms(r.breakdown), name


@BOTH
@SETTINGS
@given(workloads(), st.data())
def test_bound_never_decreases_when_a_wcet_grows(analysis, doc, data):
    before = analysis(doc)
    grown = copy.deepcopy(doc)
    cb = data.draw(st.sampled_from(grown["callbacks"]))
    if cb.get("segments") and data.draw(st.booleans()):
        seg = data.draw(st.sampled_from(cb["segments"]))
        seg["wcet_us"] += data.draw(st.integers(1, 5000))
    else:
        cb["cpu_us"] += data.draw(st.integers(1, 5000))
    after = analysis(grown)
    for name, r in after.items():
        if r.bounded:
            assert before[name].bounded, name
            assert r.wcrt_ns >= before[name].wcrt_ns, name


# Priority levels: 1 (one bucket) or more than the chains (a bucket each). With
# down-sampling in between, a new chain can legitimately move two chains that
# shared a bucket into different ones, which removes blocking.
@SETTINGS
@given(st.sampled_from([1, 8]).flatmap(lambda levels: workloads(levels=levels)), st.data())
def test_bound_never_decreases_when_a_higher_priority_chain_is_added(doc, data):
    before = analyze(doc)
    bigger = copy.deepcopy(doc)
    top = max(c["priority"] for c in doc["chains"]) + 1
    ex = data.draw(st.sampled_from([e["name"] for e in doc["executors"]]))
    cb = {"name": "intruder", "executor": ex, "trigger": {"timer_ms": data.draw(st.integers(20, 400))},
          "cpu_us": data.draw(st.integers(0, 3000))}
    if data.draw(st.booleans()):
        cb["segments"] = [{"accelerator": "acc", "service": "busy", "wcet_us": data.draw(st.integers(1, 4000))}]
    bigger["callbacks"].append(cb)
    bigger["chains"].append({"name": "intruder", "priority": top, "path": ["intruder"]})
    after = analyze(bigger)
    for name, r in before.items():
        if after[name].bounded:
            assert r.bounded, name
            assert after[name].wcrt_ns >= r.wcrt_ns, name


@SETTINGS
@given(workloads())
def test_handling_time_is_the_minimum_of_lemma_2_and_lemma_3(doc):
    # H* = min(Lemma 2, Lemma 3) + delta * epsilon: what is added is whole
    # server overheads, never a negative amount.
    epsilon = doc["server"]["overhead_us"] * 1000
    for r in analyze(doc).values():
        if not r.bounded:
            continue
        for s in r.subchains:
            lowest = min(s.lemma2_ns, s.lemma3_ns)
            if lowest == 2**64 - 1:
                continue  # no accelerator segment in this sub-chain
            overhead = s.handling_ns - lowest
            assert overhead >= 0
            assert overhead % epsilon == 0 if epsilon else overhead == 0
            assert s.handling_by_lemma3 == (s.lemma3_ns < s.lemma2_ns)


@SETTINGS
@given(workloads())
def test_paper_blocking_is_never_above_rtaccels(doc):
    # Without the refinements, rtaccel's analysis is the paper's with one term
    # that only adds: the blocking callback's accelerator wait.
    ours = analyze(doc, refine=False)
    paper = analyze(doc, paper=True)
    for name, r in ours.items():
        if r.bounded:
            assert paper[name].bounded
            assert paper[name].wcrt_ns <= r.wcrt_ns


@SETTINGS
@given(workloads())
def test_the_refinements_never_raise_a_bound(doc):
    plain = analyze(doc, refine=False)
    refined = analyze(doc)
    for name, r in plain.items():
        if r.bounded:
            assert refined[name].bounded
            assert refined[name].wcrt_ns <= r.wcrt_ns


@SETTINGS
@given(workloads(), st.data())
def test_a_timer_said_unaligned_never_lowers_a_bound(doc, data):
    # Less known of when the timers start (docs/analysis.md, item 5): the
    # bounds can only grow.
    apart = copy.deepcopy(doc)
    for cb in apart["callbacks"]:
        if "timer_ms" in cb["trigger"] and data.draw(st.booleans()):
            cb["trigger"]["release"] = "unaligned"
    together, unaligned = analyze(doc), analyze(apart)
    for name, r in unaligned.items():
        if r.bounded:
            assert together[name].bounded
            assert together[name].wcrt_ns <= r.wcrt_ns


@SETTINGS
@given(workloads())
def test_deadline_horizon_agrees_with_period_horizon_on_schedulable_chains(doc):
    by_period = analyze(doc, horizon="period")
    by_deadline = analyze(doc, horizon="deadline")
    for name, r in by_deadline.items():
        if r.schedulable:
            assert by_period[name].schedulable
            assert by_period[name].wcrt_ns == r.wcrt_ns


def test_the_gang_analysis_as_python_and_the_cli_call_it_waits_at_fusions():
    # src/analysis/gang_rta_test.cc works this one out by hand: A = 11 ms, of
    # which 5 is the wait for B's branch.
    doc = {"version": 1, "name": "gang_fusion",
           "platform": {"cores": 2, "gang_preemption_us": 0, "communication_us": 0},
           "gang_scheduling": True,
           "executors": [{"name": "exA", "core": 0, "priority": 50}, {"name": "exB", "core": 1, "priority": 40}],
           "callbacks": [
               {"name": "a1", "executor": "exA", "trigger": {"timer_ms": 100}, "publishes": "ta", "cpu_us": 1000},
               {"name": "f", "executor": "exA", "trigger": {"topics": ["ta", "tb"]}, "cpu_us": 2000},
               {"name": "b0", "executor": "exB", "trigger": {"timer_ms": 100}, "publishes": "tb0", "cpu_us": 2000},
               {"name": "b1", "executor": "exB", "trigger": {"topic": "tb0"}, "publishes": "tb", "cpu_us": 3000}],
           "chains": [{"name": "A", "priority": 2, "path": ["a1", "f"]},
                      {"name": "B", "priority": 1, "path": ["b0", "b1", "f"]}]}
    a = analyze_gangs(doc)["A"]
    assert (a.wcrt_ns, a.breakdown.fusion_wait_ns) == (11_000_000, 5_000_000)


@given(st.lists(st.floats(-1e9, 1e9), min_size=1, max_size=200), st.floats(0, 1))
@SETTINGS
def test_percentile_is_the_nearest_rank(values, q):
    """rtaccel's one percentile: the smallest measured value with at least
    q x n of the values at or below it (the minimum for q 0)."""
    p = _core.percentile(values, q)
    assert p in values
    at_or_below = sum(v <= p for v in values)
    assert at_or_below >= q * len(values) - 1e-9
    assert all(sum(w <= v for w in values) < q * len(values) - 1e-9 for v in values if v < p)
