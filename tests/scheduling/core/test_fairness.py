"""Queue fairness and reclaim, and the water-filling fair share."""

import random

import pytest

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes, placed, with_jobs
from scheduling.core.fairshare import fair_shares


def two_teams() -> Snapshot:
    return Snapshot(
        pools=(Pool("h100"),),
        nodes=nodes("h100", 1, 4),
        queues=(Queue("team-a", deserved_milli=1000), Queue("team-b", deserved_milli=1000)),
        jobs=tuple(job(f"a{i}", "team-a", created=i) for i in range(1, 5)),
    )


def per_team(snapshot: Snapshot) -> dict[str, int]:
    counts = {"team-a": 0, "team-b": 0}
    for r in snapshot.running:
        counts["team-" + r.job_id[0]] += 1
    return counts


def test_team_b_reclaims_its_share_and_it_stays_so():
    snap, [first] = cycles(two_teams(), 1)
    assert sorted(b.job_id for b in first.binds) == ["a1", "a2", "a3", "a4"]
    assert per_team(snap) == {"team-a": 4, "team-b": 0}

    snap = with_jobs(snap, *(job(f"b{i}", "team-b", created=10 + i) for i in range(1, 5)))
    snap, [second] = cycles(snap, 1)
    assert [(e.job_id, e.reason) for e in second.evicts] == [("a3", "reclaim"), ("a4", "reclaim")]
    assert sorted(b.job_id for b in second.binds) == ["b1", "b2"]
    assert per_team(snap) == {"team-a": 2, "team-b": 2}

    later, history = cycles(snap, 5)
    assert all(d.changes == 0 for d in history)
    assert per_team(later) == {"team-a": 2, "team-b": 2}
    # whoever waits is told why
    assert set(history[-1].pending) == {"a3", "a4", "b3", "b4"}
    assert "only 0 free in pool h100" in history[-1].pending["b3"]


def test_non_preemptible_team_a_keeps_its_gpus():
    snap = two_teams()
    snap = Snapshot(**{**snap.__dict__, "jobs": tuple(job(f"a{i}", "team-a", preemptible=i > 1, created=i)
                                                        for i in range(1, 5))})
    # a1 is non-preemptible and within team-a's deserved 1 GPU; the others are preemptible
    snap, _ = cycles(snap, 1)
    snap = with_jobs(snap, *(job(f"b{i}", "team-b", created=10 + i) for i in range(1, 5)))
    snap, history = cycles(snap, 3)
    assert placed(snap)["a1"] == 1
    assert all(e.job_id != "a1" for d in history for e in d.evicts)
    assert per_team(snap) == {"team-a": 2, "team-b": 2}


@pytest.mark.parametrize(
    "queues, capacity, demand, expected",
    [
        # deserved first, then the rest by weight (equal weights split evenly)
        ([Queue("a", deserved_milli=1000), Queue("b", deserved_milli=1000)], 4000,
         {"a": 4000, "b": 4000}, {"a": 2000, "b": 2000}),
        # a queue that asks for little gets only that; the other takes the rest
        ([Queue("a", deserved_milli=1000), Queue("b", deserved_milli=1000)], 4000,
         {"a": 500, "b": 8000}, {"a": 500, "b": 3500}),
        # over-quota weight 3:1
        ([Queue("a", over_quota_weight=3), Queue("b", over_quota_weight=1)], 4000,
         {"a": 9000, "b": 9000}, {"a": 3000, "b": 1000}),
        # a limit caps the share, the remainder flows to the others
        ([Queue("a", limit_milli=1000), Queue("b")], 4000,
         {"a": 9000, "b": 9000}, {"a": 1000, "b": 3000}),
        # tree: org gets half, split inside by its children's deserved and weights (the GPU over x's quota
        # is halved: x and y weigh the same, so no rounding could pick one)
        ([Queue("org"), Queue("x", parent="org", deserved_milli=1000), Queue("y", parent="org"), Queue("z")],
         4000, {"x": 9000, "y": 9000, "z": 9000}, {"org": 2000, "x": 1500, "y": 500, "z": 2000}),
        # over quota in whole GPUs: 7 GPUs split 1:4 are 1.4 and 5.6, each gets its whole ones and the
        # one left goes to the queue the rounding kept the most from
        ([Queue("a", deserved_milli=2000), Queue("b", deserved_milli=2000, over_quota_weight=4)], 11000,
         {"a": 10000, "b": 10000}, {"a": 3000, "b": 8000}),
        ([Queue("a", deserved_milli=4000, over_quota_weight=4), Queue("b", deserved_milli=2000, over_quota_weight=2)],
         8000, {"a": 7000, "b": 3000}, {"a": 5000, "b": 3000}),
        # ... but where the rounding kept the same fraction from each, the GPU left is divided exactly
        ([Queue("a", deserved_milli=2000), Queue("b", deserved_milli=2000)], 11000,
         {"a": 6000, "b": 6000}, {"a": 5500, "b": 5500}),
        # a part that covers what a queue still asks for is given exactly, fractions of a GPU included
        ([Queue("a", deserved_milli=1000), Queue("b", deserved_milli=1000)], 4000,
         {"a": 1500, "b": 9000}, {"a": 1500, "b": 2500}),
        # the GPU a priority level's rounding left goes to that level before the next is poured
        ([Queue("a", over_quota_weight=2, priority=1), Queue("b"), Queue("c", priority=1)], 4000,
         {"a": 9000, "b": 9000, "c": 9000}, {"a": 3000, "b": 0, "c": 1000}),
        # deserved over-committed: scaled down in proportion
        ([Queue("a", deserved_milli=3000), Queue("b", deserved_milli=1000)], 2000,
         {"a": 9000, "b": 9000}, {"a": 1500, "b": 500}),
        # queue priority: the higher level is filled to its demand before the lower gets over-quota
        ([Queue("a", deserved_milli=1000, priority=1), Queue("b", deserved_milli=1000)], 4000,
         {"a": 9000, "b": 9000}, {"a": 3000, "b": 1000}),
        ([Queue("a", priority=1), Queue("b")], 4000, {"a": 1500, "b": 9000}, {"a": 1500, "b": 2500}),
        # ... and up to its limit; within a level, weights still split
        ([Queue("a", limit_milli=2000, priority=2), Queue("b", priority=1, over_quota_weight=3), Queue("c", priority=1)],
         6000, {"a": 9000, "b": 9000, "c": 9000}, {"a": 2000, "b": 3000, "c": 1000}),
    ],
)
def test_water_filling(queues, capacity, demand, expected):
    shares = fair_shares(queues, capacity, demand)
    assert {k: round(v) for k, v in shares.items()} == expected


@pytest.mark.parametrize("seed", range(20))
def test_siblings_of_equal_weight_are_divided_exactly(seed):
    """Equal over-quota weights leave every open sibling the same fraction, so the whole-GPU division
    never applies: each sibling gets the water level of the exact division (the trace replays' teams)."""
    rng = random.Random(seed)
    n = rng.randint(2, 11)
    deserved = [rng.randrange(0, 20) * 1000 for _ in range(n)]
    demand = [d + rng.choice([0, 500, rng.randrange(0, 30) * 1000, rng.randrange(0, 30_000)]) for d in deserved]
    capacity = sum(deserved) + rng.randrange(1, 60) * 1000 + rng.choice([0, 250])
    queues = [Queue(f"q{i}", deserved_milli=deserved[i]) for i in range(n)]
    shares = fair_shares(queues, capacity, {f"q{i}": demand[i] for i in range(n)})
    wants = [demand[i] - deserved[i] for i in range(n)]
    low, high = 0.0, float(max(wants))
    for _ in range(200):        # the level at which the siblings' over-quota parts use up what is left
        mid = (low + high) / 2
        low, high = (mid, high) if sum(min(w, mid) for w in wants) < capacity - sum(deserved) else (low, mid)
    for i in range(n):
        assert shares[f"q{i}"] == pytest.approx(deserved[i] + min(wants[i], high), abs=1e-3)


def test_queue_tree_errors_name_the_queue():
    with pytest.raises(ValueError, match="queue 'x': parent 'nope' does not exist"):
        fair_shares([Queue("x", parent="nope")], 1000, {})
    with pytest.raises(ValueError, match="cycle"):
        fair_shares([Queue("x", parent="y"), Queue("y", parent="x")], 1000, {})


def test_queue_limit_reason():
    snap = Snapshot(
        pools=(Pool("h100"),),
        nodes=nodes("h100", 1, 4),
        queues=(Queue("team-a", limit_milli=2000),),
        jobs=tuple(job(f"a{i}", "team-a", created=i) for i in range(1, 4)),
    )
    d = run_cycle(snap)
    assert sorted(b.job_id for b in d.binds) == ["a1", "a2"]
    assert d.pending["a3"].startswith("queue team-a is over its limit of 2 GPUs")


def test_reason_says_when_a_queue_cannot_reclaim_beyond_its_fair_share():
    snap = Snapshot(
        pools=(Pool("h100"),),
        nodes=nodes("h100", 1, 4),
        queues=(Queue("team-a", deserved_milli=1000), Queue("team-b", deserved_milli=1000)),
        jobs=(*(job(f"a{i}", "team-a", created=i) for i in range(3)), job("b1", "team-b", created=5)),
    )
    snap, _ = cycles(snap, 1)
    assert per_team(snap) == {"team-a": 3, "team-b": 1}
    _, [d] = cycles(with_jobs(snap, job("b2", "team-b", gpus=2, created=6)), 1)
    # team-b would exceed its fair share of 2 GPUs by taking 2 more, so nothing is reclaimed
    assert d.changes == 0
    assert d.pending["b2"] == ("needs 2 GPUs, only 0 free in pool h100; queue team-b already holds 1 GPU of "
                               "its fair share of 2 GPUs, so it cannot reclaim from team-a")
