"""Many cycles on the state each leaves behind: fair shares are reached and kept, and no job moves twice
without a change of input.

Departments with teams and elastic jobs: each change (work arrives, work ends) settles within a
cycle or two at the new fair shares, and the cycles after it decide nothing. Then random queue trees
(departments, deserved quotas, weights, priorities) with single and elastic one-GPU jobs: every run
settles, no job is evicted in two cycles, and no queue that still wants GPUs is left a whole GPU
below its fair share.
"""

from __future__ import annotations

import random

import pytest

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes, with_jobs
from scheduling.core.cycle import apply_decisions, without_jobs
from scheduling.core.model import Decisions
from scheduling.core.session import Session
from tests.scheduling.core.test_reclaim_scenarios import fair_shares, gpus_held, moves_per_job, singles

LEAVES = ["a1", "a2", "b"]


def departments() -> Snapshot:
    queues = (Queue("dept-a", deserved_milli=8000), Queue("dept-b", deserved_milli=8000),
              Queue("a1", parent="dept-a", deserved_milli=4000), Queue("a2", parent="dept-a", deserved_milli=4000),
              Queue("b", parent="dept-b", deserved_milli=8000))
    return Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 2, 8), queues=queues,
                    jobs=(job("e1", "a1", replicas=16, min_replicas=1, created=1),))


def settle(snap: Snapshot, count: int = 5) -> tuple[Snapshot, list[Decisions]]:
    """Cycles until quiet: all changes in the first cycle, no job evicted in two."""
    snap, history = cycles(snap, count)
    assert history[0].changes > 0
    assert [d.changes for d in history[1:]] == [0] * (count - 1)
    assert set(moves_per_job(history).values()) <= {1}
    return snap, history


def evictions(d: Decisions) -> set[tuple]:
    return {(e.job_id, e.reason, e.rule) for e in d.evicts}


def test_fair_shares_follow_each_change_and_nothing_moves_in_between():
    # alone, the elastic job grows over the whole cluster
    snap, _ = settle(departments())
    assert gpus_held(snap, LEAVES) == {"a1": 16, "a2": 0, "b": 0}

    # dept-b's elastic job arrives: its minimum and then its extras take dept-b's half back, in one cycle
    snap, history = settle(with_jobs(snap, job("eb", "b", replicas=12, min_replicas=2, created=2)))
    assert fair_shares(snap) == {"dept-a": 8000, "dept-b": 8000, "a1": 8000, "a2": 0, "b": 8000}
    assert gpus_held(snap, LEAVES) == {"a1": 8, "a2": 0, "b": 8}
    assert evictions(history[0]) == {("e1", "shrink", "fair-share")}

    # a2's work arrives: it takes its deserved half of dept-a from e1's extras; dept-b keeps its own
    snap, history = settle(with_jobs(snap, *singles("x", "a2", 6, start=10)))
    assert fair_shares(snap)["a1"] == fair_shares(snap)["a2"] == 4000
    assert gpus_held(snap, LEAVES) == {"a1": 4, "a2": 4, "b": 8}
    assert evictions(history[0]) == {("e1", "shrink", "fair-share")}

    # dept-b's job ends: dept-a grows into the whole cluster without evicting anything
    snap, history = settle(without_jobs(snap, "eb"))
    assert fair_shares(snap)["a1"] == 10000 and fair_shares(snap)["a2"] == 6000
    assert gpus_held(snap, LEAVES) == {"a1": 10, "a2": 6, "b": 0}
    assert all(d.evicts == () for d in history)


def random_tree(seed: int) -> Snapshot:
    rng = random.Random(seed)
    depts = [f"d{i}" for i in range(rng.randint(1, 3))]
    queues = [Queue(d, deserved_milli=rng.choice([0, 2000, 4000]), over_quota_weight=rng.choice([0.5, 1, 2]),
                    priority=rng.choice([0, 0, 1])) for d in depts]
    leaves = []
    for d in depts:
        for k in range(rng.randint(1, 3)):
            leaves.append(f"{d}-t{k}")
            queues.append(Queue(leaves[-1], parent=d, deserved_milli=rng.choice([0, 1000, 2000]),
                                over_quota_weight=rng.choice([1, 2]), priority=rng.choice([0, 0, 1])))
    jobs = []
    for i in range(rng.randint(6, 20)):
        common = dict(created=i, priority=rng.choice([0, 0, 5]))
        if rng.random() < 0.5:
            jobs.append(job(f"e{i}", rng.choice(leaves), replicas=rng.randint(2, 8), min_replicas=1, **common))
        else:
            jobs.append(job(f"s{i}", rng.choice(leaves), **common))
    return Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", rng.randint(2, 4), 4), queues=tuple(queues),
                    jobs=tuple(jobs))


@pytest.mark.parametrize("seed", range(24))
def test_random_trees_reach_their_fair_shares_and_no_job_moves_twice(seed):
    snap = random_tree(seed)
    history = []
    for _ in range(8):
        history.append(run_cycle(snap))
        snap = apply_decisions(snap, history[-1])
    assert [d.changes for d in history[-3:]] == [0, 0, 0]
    assert set(moves_per_job(history).values()) <= {1}
    # one-GPU replicas: a queue that still wants GPUs is within one GPU of its fair share
    s = Session.build(snap)
    wanting = {state.job.queue for state in s.jobs.values() if state.wants()}
    assert {q: s.alloc[q] for q in wanting if s.alloc[q] + 1000 <= s.fair_share[q] + 1e-6} == {}
