"""Reclaim, fair share by queue priority and eviction causes, as a table of scenarios.

Each scenario is a cluster as it runs with new work pending; one cycle must evict and bind exactly
what the row says, every eviction naming who took its GPUs and by which rule, and the cycles after
must move nothing (fair shares stay put, no job moves twice). The behaviours follow what NVIDIA
KAI-Scheduler's reclaim and proportion tests expect: a queue over its fair share may lose a job even
when that leaves it below its deserved quota; a queue over its deserved quota may lose work to one
that stays within its own; siblings under a full parent reclaim from each other; queue priority
orders the over-quota division and the victims.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes
from scheduling.core.cycle import apply_decisions, without_jobs
from scheduling.core.model import EVICT_RULES, Decisions
from scheduling.core.session import Session

H100 = (Pool("h100"),)


def on(job_id: str, node: str, *gpus: int, index: int = 0) -> RunningReplica:
    """A running replica holding whole GPUs."""
    return RunningReplica(job_id, "worker", index, node, gpus, Slice("whole", 1000, 81920))


def singles(prefix: str, queue: str, count: int, start: int = 1, **kwargs) -> tuple:
    """`count` one-GPU jobs <prefix>1.. created one after the other from `start`."""
    return tuple(job(f"{prefix}{i}", queue, created=start + i, **kwargs) for i in range(1, count + 1))


def spread(node: str, jobs: tuple, first_gpu: int = 0) -> tuple[RunningReplica, ...]:
    """One-GPU jobs running on consecutive GPUs of `node`."""
    return tuple(on(j.id, node, first_gpu + i) for i, j in enumerate(jobs))


@dataclass(frozen=True)
class Scenario:
    name: str
    snapshot: Snapshot
    # (job, reason, rule, by job, by queue, level) per evicted replica, in decision order
    evicts: list[tuple[str, str, str, str, str, str]]
    binds: list[str]                                    # jobs bound, sorted
    shares: dict[str, int]                              # fair shares in milli-GPU
    held: dict[str, int] = field(default_factory=dict)  # GPUs per leaf queue after the cycle


def over_share_gang() -> Scenario:
    # team-b runs one 6-GPU gang over its fair share of 4; taking it leaves team-b at 0, below its
    # deserved 4, which the fair-share rule allows (the gang cannot be split)
    b_gang = job("b-gang", "team-b", gpus=3, replicas=2, created=1)
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("team-a", deserved_milli=4000), Queue("team-b", deserved_milli=4000)),
        jobs=(job("a1", "team-a", gpus=2), b_gang, job("a2", "team-a", gpus=2, created=2)),
        running=(on("a1", "h100-0", 0, 1), on("b-gang", "h100-0", 2, 3, 4), on("b-gang", "h100-0", 5, 6, 7, index=1)),
    )
    cause = ("reclaim", "fair-share", "a2", "team-a", "team-b")
    return Scenario("victim over its fair share loses its only, unsplittable job even below deserved", snap,
                    [("b-gang", *cause), ("b-gang", *cause)], ["a2"], {"team-a": 4000, "team-b": 4000},
                    {"team-a": 4, "team-b": 0})


def within_deserved() -> Scenario:
    # team-b holds 4 H100s, its fair share (the idle L4 pool counts in the cluster total) but over its
    # deserved 2; team-a asks 2 H100s, within its own deserved 2
    b_jobs = singles("b", "team-b", 4, pool="h100")
    snap = Snapshot(
        pools=(Pool("h100"), Pool("l4", gpu_model="L4", gpu_memory_mib=24576)),
        nodes=nodes("h100", 1, 4) + nodes("l4", 1, 4),
        queues=(Queue("team-a", deserved_milli=2000), Queue("team-b", deserved_milli=2000)),
        jobs=(*b_jobs, job("a1", "team-a", gpus=2, pool="h100", created=10)),
        running=spread("h100-0", b_jobs),
    )
    cause = ("reclaim", "reclaim-within-deserved", "a1", "team-a", "team-b")
    return Scenario("reclaimer within deserved takes from a queue over deserved but within its fair share", snap,
                    [("b3", *cause), ("b4", *cause)], ["a1"], {"team-a": 2000, "team-b": 4000},
                    {"team-a": 2, "team-b": 2})


def siblings_at_parent_limit() -> Scenario:
    # dept is at its 4-GPU limit, all of it held by team-b; four more GPUs are free but dept may not use them
    b_jobs = (job("b1", "team-b", gpus=2, created=1), job("b2", "team-b", gpus=2, created=2))
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("dept", deserved_milli=4000, limit_milli=4000),
                Queue("team-a", parent="dept", deserved_milli=2000), Queue("team-b", parent="dept", deserved_milli=2000)),
        jobs=(*b_jobs, job("a1", "team-a", gpus=2, created=3)),
        running=(on("b1", "h100-0", 0, 1), on("b2", "h100-0", 2, 3)),
    )
    return Scenario("siblings under a parent at its limit reclaim from each other", snap,
                    [("b2", "reclaim", "fair-share", "a1", "team-a", "team-b")], ["a1"],
                    {"dept": 4000, "team-a": 2000, "team-b": 2000}, {"team-a": 2, "team-b": 2})


def siblings_at_parent_share() -> Scenario:
    # the cluster is full: dept-1 holds its fair share of 4, all of it team-b's, dept-2 holds the rest
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("dept-1", deserved_milli=4000), Queue("dept-2", deserved_milli=4000),
                Queue("team-a", parent="dept-1", deserved_milli=2000),
                Queue("team-b", parent="dept-1", deserved_milli=2000),
                Queue("team-c", parent="dept-2", deserved_milli=4000)),
        jobs=(job("b1", "team-b", gpus=2, created=1), job("b2", "team-b", gpus=2, created=2),
              job("c1", "team-c", gpus=4, created=3), job("a1", "team-a", gpus=2, created=4)),
        running=(on("b1", "h100-0", 0, 1), on("b2", "h100-0", 2, 3), on("c1", "h100-0", 4, 5, 6, 7)),
    )
    return Scenario("siblings under a parent at its fair share reclaim from each other, not from elsewhere", snap,
                    [("b2", "reclaim", "fair-share", "a1", "team-a", "team-b")], ["a1"],
                    {"dept-1": 4000, "dept-2": 4000, "team-a": 2000, "team-b": 2000, "team-c": 4000},
                    {"team-a": 2, "team-b": 2, "team-c": 4})


def between_departments() -> Scenario:
    # team-y holds 6 GPUs, dept-y's share is 4: the shares weighed are the departments'
    y_jobs = singles("y", "team-y", 6)
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("dept-x", deserved_milli=4000), Queue("dept-y", deserved_milli=4000),
                Queue("team-x", parent="dept-x", deserved_milli=4000),
                Queue("team-y", parent="dept-y", deserved_milli=4000)),
        jobs=(*singles("x", "team-x", 2, start=10), *y_jobs, job("x3", "team-x", gpus=2, created=20)),
        running=spread("h100-0", y_jobs) + (on("x1", "h100-0", 6), on("x2", "h100-0", 7)),
    )
    cause = ("reclaim", "fair-share", "x3", "team-x", "dept-y")
    return Scenario("reclaim between departments names the department whose share was weighed", snap,
                    [("y5", *cause), ("y6", *cause)], ["x3"],
                    {"dept-x": 4000, "dept-y": 4000, "team-x": 4000, "team-y": 4000}, {"team-x": 4, "team-y": 4})


def priority_share() -> Scenario:
    # both queues deserve 2; the 4 GPUs over quota go to the higher-priority queue first
    lo_jobs = singles("lo", "lo", 8)
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("hi", deserved_milli=2000, priority=1), Queue("lo", deserved_milli=2000)),
        jobs=(*lo_jobs, *singles("hi", "hi", 8, start=10)),
        running=spread("h100-0", lo_jobs),
    )
    cause = ("reclaim", "fair-share")
    return Scenario("higher-priority queue gets the over-quota share first", snap,
                    # the oldest hi job takes the newest lo job's GPU, and so on
                    [(f"lo{i}", *cause, f"hi{9 - i}", "hi", "lo") for i in range(3, 9)],
                    [f"hi{i}" for i in range(1, 7)], {"hi": 6000, "lo": 2000}, {"hi": 6, "lo": 2})


def priority_victims() -> Scenario:
    # team-b and team-c are both over their fair share of 2; team-c has the lower priority, so it
    # gives first although team-b's jobs are the newest
    c_jobs, b_jobs = singles("c", "team-c", 4), singles("b", "team-b", 4, start=5)
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("team-a", priority=2), Queue("team-b", deserved_milli=2000, over_quota_weight=0, priority=1),
                Queue("team-c", deserved_milli=2000, over_quota_weight=0)),
        jobs=(*c_jobs, *b_jobs, job("a1", "team-a", gpus=2, created=20)),
        running=spread("h100-0", c_jobs) + spread("h100-0", b_jobs, first_gpu=4),
    )
    cause = ("reclaim", "fair-share", "a1", "team-a", "team-c")
    return Scenario("victims come from the lower-priority queue first", snap, [("c3", *cause), ("c4", *cause)],
                    ["a1"], {"team-a": 2000, "team-b": 2000, "team-c": 2000},
                    {"team-a": 2, "team-b": 4, "team-c": 2})


def preempt_by_priority() -> Scenario:
    low = (job("low1", "q", priority=1), job("low2", "q", priority=1, created=1))
    snap = Snapshot(pools=H100, nodes=nodes("h100", 1, 2), queues=(Queue("q"),),
                    jobs=(*low, job("high", "q", priority=10, created=2)), running=spread("h100-0", low))
    return Scenario("a preempted job names the higher-priority job of its queue", snap,
                    [("low2", "preempt", "priority", "high", "q", "q")], ["high"], {"q": 2000}, {"q": 2})


def consolidation_move() -> Scenario:
    snap = Snapshot(
        pools=(Pool("h100", placement="binpack"),), nodes=nodes("h100", 2, 2),
        queues=(Queue("team-a", deserved_milli=2000), Queue("team-b", deserved_milli=2000)),
        jobs=(job("a1", "team-a"), job("b1", "team-b", created=1), job("a2", "team-a", gpus=2, created=2)),
        running=(on("a1", "h100-0", 0), on("b1", "h100-1", 0)),
    )
    return Scenario("a moved job names the job it made room for", snap,
                    [("a1", "consolidate", "consolidation", "a2", "team-a", "")], ["a1", "a2"],
                    {"team-a": 3000, "team-b": 1000}, {"team-a": 3, "team-b": 1})


def reduce_cost_yields() -> Scenario:
    snap = Snapshot(pools=(Pool("onprem"),), nodes=nodes("onprem", 1, 2), queues=(Queue("research"), Queue("cheap")),
                    jobs=(job("saver", "cheap", reduce_cost=True), job("train", "research", gpus=2, created=5)),
                    running=(on("saver", "onprem-0", 0),), next_off_peak="00:00")
    return Scenario("a ReduceCost job on borrowed capacity names the job it yielded to", snap,
                    [("saver", "preempt", "reduce-cost", "train", "research", "")], ["train"],
                    {"research": 1000, "cheap": 1000}, {"research": 2, "cheap": 0})


SCENARIOS = [over_share_gang(), within_deserved(), siblings_at_parent_limit(), siblings_at_parent_share(),
             between_departments(), priority_share(), priority_victims(), preempt_by_priority(),
             consolidation_move(), reduce_cost_yields()]


def evicted(d: Decisions) -> list[tuple]:
    return [(e.job_id, e.reason, e.rule, e.by_job, e.by_queue, e.level) for e in d.evicts]


def gpus_held(snap: Snapshot, queues) -> dict[str, int]:
    queue_of = {j.id: j.queue for j in snap.jobs}
    held = dict.fromkeys(queues, 0)
    for r in snap.running:
        held[queue_of[r.job_id]] += len(r.gpus)
    return held


def fair_shares(snap: Snapshot) -> dict[str, int]:
    return {q: round(v) for q, v in Session.build(snap).fair_share.items()}


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_scenario(sc: Scenario):
    assert fair_shares(sc.snapshot) == sc.shares
    d = run_cycle(sc.snapshot)
    assert evicted(d) == sc.evicts
    assert sorted({b.job_id for b in d.binds}) == sc.binds
    assert all(e.rule in EVICT_RULES for e in d.evicts)
    after = apply_decisions(sc.snapshot, d)
    assert gpus_held(after, sc.held) == sc.held


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_scenario_settles_and_nothing_moves_twice(sc: Scenario):
    snap, history = cycles(sc.snapshot, 6)
    assert history[0].changes > 0
    assert [d.changes for d in history[1:]] == [0] * 5
    assert set(moves_per_job(history).values()) == {1}
    assert fair_shares(snap) == sc.shares
    assert gpus_held(snap, sc.held) == sc.held


def moves_per_job(history: list[Decisions]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in history:
        for job_id in {e.job_id for e in d.evicts}:
            out[job_id] = out.get(job_id, 0) + 1
    return out


def test_fair_shares_converge_by_priority_and_follow_a_change_once():
    # lo and mid fill the cluster; hi (the highest priority) arrives and takes its share, the lowest
    # priority giving first; then hi's work ends and the others grow back. Each change moves a job
    # at most once, and the cluster is quiet in between.
    queues = (Queue("hi", deserved_milli=1000, priority=2), Queue("mid", deserved_milli=1000, priority=1),
              Queue("lo", deserved_milli=1000))
    lo_jobs, mid_jobs = singles("lo", "lo", 4), singles("mid", "mid", 4, start=10)
    snap = Snapshot(pools=H100, nodes=nodes("h100", 2, 4), queues=queues,
                    jobs=(*lo_jobs, *mid_jobs, *singles("hi", "hi", 6, start=20)),
                    running=spread("h100-0", lo_jobs) + spread("h100-1", mid_jobs))
    assert fair_shares(snap) == {"hi": 6000, "mid": 1000, "lo": 1000}
    snap, history = cycles(snap, 6)
    assert [d.changes for d in history[1:]] == [0] * 5
    assert gpus_held(snap, ["hi", "mid", "lo"]) == {"hi": 6, "mid": 1, "lo": 1}
    assert [(e.job_id, e.level) for e in history[0].evicts] == [
        ("lo2", "lo"), ("lo3", "lo"), ("lo4", "lo"), ("mid2", "mid"), ("mid3", "mid"), ("mid4", "mid")]
    assert set(moves_per_job(history).values()) == {1}

    snap = without_jobs(snap, *(f"hi{i}" for i in range(1, 7)))
    assert fair_shares(snap) == {"hi": 0, "mid": 4000, "lo": 4000}
    snap, history = cycles(snap, 6)
    assert [d.changes for d in history[1:]] == [0] * 5
    assert history[0].evicts == ()
    assert gpus_held(snap, ["hi", "mid", "lo"]) == {"hi": 0, "mid": 4, "lo": 4}


def test_a_reclaim_that_cannot_make_room_gives_up_without_evicting(monkeypatch):
    """team-a may reclaim 8 GPUs from team-b (over its share), but its own job holds a GPU of each node, so
    no node can be emptied whatever team-b loses: the scenario gives up before evicting anything, and the
    cycle evicts nothing."""
    b_jobs = singles("b", "team-b", 14, start=10)
    running = (on("a-run", "h100-0", 0), on("a-run2", "h100-1", 0), *spread("h100-0", b_jobs[:7], 1),
               *spread("h100-1", b_jobs[7:], 1))
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 2, 8),
        queues=(Queue("team-a", deserved_milli=12000), Queue("team-b", deserved_milli=4000)),
        jobs=(job("a-run", "team-a", created=1), job("a-run2", "team-a", created=2), *b_jobs,
              job("a-big", "team-a", gpus=8, created=30)),
        running=running)
    evictions = []
    unbind = Session.unbind
    monkeypatch.setattr(Session, "unbind", lambda s, key, *a, **k: (evictions.append(key), unbind(s, key, *a, **k)))
    decisions = run_cycle(snap)
    assert decisions.evicts == () and decisions.binds == ()
    assert evictions == []
    assert "a-big" in decisions.pending
