"""Allocation order across the queue tree, elastic replicas, gang consolidation and victims that are
moved rather than evicted, as a table of scenarios.

Each row is a cluster as it runs with new work pending. One cycle must evict and bind exactly what
the row says (replica and node), and the cycles after it must change nothing: no job moves twice.
The behaviours are those NVIDIA KAI-Scheduler's allocate, reclaim, preempt and consolidation
scenarios and its proportion plugin's queue order expect:

- queues are ordered by their share once the job being placed is added, level by level down the
  tree (departments first); a queue within its deserved quota with that job goes before one that is
  not, whatever the queues' priorities; ties go to the job submitted first, never to a queue's name;
- replicas above an elastic job's minimum are placed over quota, one at a time and round-robin over
  a queue's elastic jobs, and they reclaim, preempt and consolidate like any pending replica;
- consolidation for a gang clears as many nodes as the gang needs, and a moved replica goes back
  where it was when it still fits there, rather than restarting on another GPU of its node;
- the part of a victim that is not in the way stays; the part that is is moved when it fits
  elsewhere, and only what can go nowhere is evicted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes
from scheduling.core.cycle import apply_decisions
from scheduling.core.model import Decisions, Node
from tests.scheduling.core.test_reclaim_scenarios import gpus_held, moves_per_job, on, singles, spread

H100 = (Pool("h100"),)


def frac(job_id: str, node: str, gpu: int, milli: int, index: int = 0) -> RunningReplica:
    return RunningReplica(job_id, "worker", index, node, (gpu,), Slice("fraction", milli, 0))


@dataclass(frozen=True)
class Scenario:
    name: str
    snapshot: Snapshot
    evicts: list[tuple]          # (job, replica, node, reason, rule, by job), in decision order
    binds: list[tuple]           # (job, replica, node, gpus), in decision order
    held: dict[str, int] = field(default_factory=dict)   # GPUs per leaf queue after the cycle


# ---------------------------------------------------------------- (f) order across queues


def order_with_the_job() -> Scenario:
    # both queues hold 1 of their deserved 2; team-a's next job (2 GPUs) would take it over its
    # quota, team-b's (1 GPU) would not: team-b goes first although team-a's job is older
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 4),
        queues=(Queue("team-a", deserved_milli=2000), Queue("team-b", deserved_milli=2000)),
        jobs=(job("a1", "team-a", created=1), job("b1", "team-b", created=2), job("a2", "team-a", gpus=2, created=3),
              job("b2", "team-b", created=4)),
        running=(on("a1", "h100-0", 0), on("b1", "h100-0", 1)),
    )
    return Scenario("the queue within its deserved quota with the job goes first", snap, [],
                    [("b2", 0, "h100-0", (2,))], {"team-a": 1, "team-b": 2})


def order_by_department() -> Scenario:
    # x-new's share is 0 but it holds nothing, so a leaf-only order served it first; at the department
    # level dept-x is at its share and dept-y is not, so y gets the free GPU and nothing is reclaimed
    x_old, y_jobs = singles("xo", "x-old", 4), singles("y", "y", 3, start=5)
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("dept-x", deserved_milli=4000), Queue("dept-y", deserved_milli=4000),
                Queue("x-new", parent="dept-x"), Queue("x-old", parent="dept-x", deserved_milli=4000),
                Queue("y", parent="dept-y", deserved_milli=4000)),
        jobs=(*x_old, *y_jobs, job("xn1", "x-new", created=10), job("y4", "y", created=11)),
        running=spread("h100-0", x_old) + spread("h100-0", y_jobs, first_gpu=4),
    )
    return Scenario("departments are ordered before their teams", snap, [], [("y4", 0, "h100-0", (7,))],
                    {"x-new": 0, "x-old": 4, "y": 4})


def order_tie_by_submission() -> Scenario:
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 1),
        queues=(Queue("alpha", deserved_milli=1000), Queue("beta", deserved_milli=1000)),
        jobs=(job("a1", "alpha", created=2), job("b1", "beta", created=1)),
    )
    return Scenario("equal queues: the job submitted first goes first, not the first queue by name", snap, [],
                    [("b1", 0, "h100-0", (0,))], {"alpha": 0, "beta": 1})


def order_starved_before_priority() -> Scenario:
    # hi has the higher priority but already holds its deserved GPU; lo holds none of its own
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 2),
        queues=(Queue("hi", deserved_milli=1000, priority=1), Queue("lo", deserved_milli=1000)),
        jobs=(job("hi1", "hi", created=1), job("hi2", "hi", created=2), job("lo1", "lo", created=3)),
        running=(on("hi1", "h100-0", 0),),
    )
    return Scenario("a queue below its deserved quota goes before a higher-priority queue at it", snap, [],
                    [("lo1", 0, "h100-0", (1,))], {"hi": 1, "lo": 1})


# ---------------------------------------------------------------- (g) elastic replicas


def elastic_extra_reclaims() -> Scenario:
    b_jobs = singles("b", "team-b", 3, start=2)
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 4),
        queues=(Queue("team-a", deserved_milli=1000), Queue("team-b", deserved_milli=1000)),
        jobs=(job("e", "team-a", replicas=3, min_replicas=1, created=1), *b_jobs),
        running=(on("e", "h100-0", 0),) + spread("h100-0", b_jobs, first_gpu=1),
    )
    return Scenario("a replica above the minimum reclaims from a queue over its fair share", snap,
                    [("b3", 0, "h100-0", "reclaim", "fair-share", "e")], [("e", 1, "h100-0", (3,))],
                    {"team-a": 2, "team-b": 2})


def elastic_extra_preempts() -> Scenario:
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 2), queues=(Queue("q"),),
        jobs=(job("hp", "q", replicas=2, min_replicas=1, priority=10), job("lp", "q", created=1)),
        running=(on("hp", "h100-0", 0), on("lp", "h100-0", 1)),
    )
    return Scenario("a replica above the minimum preempts lower priority in its queue", snap,
                    [("lp", 0, "h100-0", "preempt", "priority", "hp")], [("hp", 1, "h100-0", (1,))], {"q": 2})


def elastic_extra_consolidates() -> Scenario:
    # the extra needs 2 GPUs on one node; the free ones are on two nodes
    snap = Snapshot(
        pools=(Pool("h100", placement="binpack"),), nodes=nodes("h100", 1, 4) + nodes("h100", 1, 2, prefix="small"),
        queues=(Queue("q", deserved_milli=6000),),
        jobs=(job("e", "q", gpus=2, replicas=2, min_replicas=1), job("a", "q", created=1), job("b", "q", created=2)),
        running=(on("e", "h100-0", 0, 1), on("a", "h100-0", 2), on("b", "small-0", 0)),
    )
    return Scenario("a replica above the minimum is made room for by consolidation", snap,
                    [("a", 0, "h100-0", "consolidate", "consolidation", "e")],
                    [("a", 0, "small-0", (1,)), ("e", 1, "h100-0", (2, 3))], {"q": 6})


def elastic_round_robin() -> Scenario:
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8), queues=(Queue("q"),),
        jobs=(job("e1", "q", replicas=4, min_replicas=1, created=1), job("e2", "q", replicas=4, min_replicas=1, created=2),
              job("busy", "q", gpus=2, created=3)),
        running=(on("e1", "h100-0", 0), on("e2", "h100-0", 1), on("busy", "h100-0", 2, 3)),
    )
    return Scenario("spare GPUs are shared round-robin by a queue's elastic jobs", snap, [],
                    [("e1", 1, "h100-0", (4,)), ("e1", 2, "h100-0", (6,)), ("e2", 1, "h100-0", (5,)),
                     ("e2", 2, "h100-0", (7,))], {"q": 8})


# ---------------------------------------------------------------- (h), (i) consolidation


def gang_consolidation() -> Scenario:
    # every node has one GPU free; the gang needs two whole nodes
    singles_ = singles("s", "q", 4)
    snap = Snapshot(
        pools=(Pool("h100", placement="binpack"),), nodes=nodes("h100", 4, 2), queues=(Queue("q", deserved_milli=8000),),
        jobs=(*singles_, job("gang", "q", gpus=2, replicas=2, created=10)),
        running=tuple(on(j.id, f"h100-{i}", 0) for i, j in enumerate(singles_)),
    )
    cause = ("consolidate", "consolidation", "gang")
    return Scenario("consolidation clears as many nodes as a gang needs", snap,
                    [("s1", 0, "h100-0", *cause), ("s2", 0, "h100-1", *cause)],
                    [("gang", 0, "h100-0", (0, 1)), ("gang", 1, "h100-1", (0, 1)), ("s1", 0, "h100-2", (1,)),
                     ("s2", 0, "h100-3", (1,))], {"q": 8})


def consolidation_keeps_what_fits() -> Scenario:
    # n0's GPU 0 must hold 800 of the gang: c/0 and a leave it. c/1, on GPU 1, was lifted on the way
    # but is not in the way: it stays, instead of c/0 restarting in its place and c/1 elsewhere
    pool = Pool("t4", gpu_memory_mib=16384, placement="binpack")
    snap = Snapshot(
        pools=(pool,), nodes=(Node.with_gpus("n0", "t4", 2), Node.with_gpus("n1", "t4", 1), Node.with_gpus("n2", "t4", 1)),
        queues=(Queue("q", deserved_milli=4000),),
        jobs=(job("a", "q", mode="fraction", milli=400), job("c", "q", mode="fraction", milli=300, replicas=2, created=1),
              job("d", "q", mode="fraction", milli=600, preemptible=False, created=2),
              job("e", "q", mode="fraction", milli=300, preemptible=False, created=3),
              job("p", "q", mode="fraction", milli=800, replicas=2, created=4)),
        running=(frac("c", "n0", 0, 300), frac("a", "n0", 0, 400), frac("c", "n0", 1, 300, index=1),
                 frac("d", "n0", 1, 600), frac("e", "n2", 0, 300)),
    )
    cause = ("consolidate", "consolidation", "p")
    return Scenario("a replica moved by consolidation does not restart on another GPU of its node", snap,
                    [("a", 0, "n0", *cause), ("c", 0, "n0", *cause)],
                    [("a", 0, "n2", (0,)), ("c", 0, "n2", (0,)), ("p", 0, "n1", (0,)), ("p", 1, "n0", (0,))], {"q": 7})


# ---------------------------------------------------------------- (j) victims moved, not evicted


def preempted_survivor_moves() -> Scenario:
    # the train job's extra goes; its minimum replica is in the way too, and moves to node1
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 2, prefix="node0") + nodes("h100", 1, 1, prefix="node1"),
        queues=(Queue("q", deserved_milli=2000),),
        jobs=(job("train", "q", replicas=2, min_replicas=1), job("infer", "q", gpus=2, priority=10, created=1)),
        running=(on("train", "node0-0", 0), on("train", "node0-0", 1, index=1)),
    )
    return Scenario("a preempted elastic job keeps its minimum by moving to another node", snap,
                    [("train", 0, "node0-0", "preempt", "priority", "infer"),
                     ("train", 1, "node0-0", "shrink", "priority", "infer")],
                    [("infer", 0, "node0-0", (0, 1)), ("train", 0, "node1-0", (0,))], {"q": 3})


def reclaimed_gang_survives() -> Scenario:
    # team-a needs 2 GPUs on one node; team-b (fair share 2) holds 4. b1 goes first, then gang v, whose
    # replica on h100-0 is in the way: that replica moves to the free GPU and the gang keeps running
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 3, 2),
        queues=(Queue("team-a", deserved_milli=2000), Queue("team-b", deserved_milli=2000, over_quota_weight=0)),
        jobs=(job("v", "team-b", replicas=2, created=1), job("b2", "team-b", preemptible=False, created=2),
              job("b1", "team-b", created=3), job("a1", "team-a", created=4), job("a2", "team-a", gpus=2, created=5)),
        running=(on("v", "h100-0", 0), on("b1", "h100-0", 1), on("v", "h100-1", 0, index=1), on("b2", "h100-1", 1),
                 on("a1", "h100-2", 0)),
    )
    cause = ("reclaim", "fair-share", "a2")
    return Scenario("a reclaimed gang's replica in the way moves and the rest stays", snap,
                    [("b1", 0, "h100-0", *cause), ("v", 0, "h100-0", *cause)],
                    [("a2", 0, "h100-0", (0, 1)), ("v", 0, "h100-2", (1,))], {"team-a": 3, "team-b": 3})


SCENARIOS = [order_with_the_job(), order_by_department(), order_tie_by_submission(), order_starved_before_priority(),
             elastic_extra_reclaims(), elastic_extra_preempts(), elastic_extra_consolidates(), elastic_round_robin(),
             gang_consolidation(), consolidation_keeps_what_fits(), preempted_survivor_moves(),
             reclaimed_gang_survives()]


def evicted(d: Decisions) -> list[tuple]:
    return [(e.job_id, e.replica, e.node, e.reason, e.rule, e.by_job) for e in d.evicts]


def bound(d: Decisions) -> list[tuple]:
    return [(b.job_id, b.replica, b.node, b.gpus) for b in d.binds]


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_scenario(sc: Scenario):
    d = run_cycle(sc.snapshot)
    assert evicted(d) == sc.evicts
    assert bound(d) == sc.binds
    assert gpus_held(apply_decisions(sc.snapshot, d), sc.held) == sc.held


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_scenario_settles_and_nothing_moves_twice(sc: Scenario):
    snap, history = cycles(sc.snapshot, 5)
    assert history[0].changes > 0
    assert [d.changes for d in history[1:]] == [0] * 4
    assert set(moves_per_job(history).values()) <= {1}
    assert gpus_held(snap, sc.held) == sc.held
