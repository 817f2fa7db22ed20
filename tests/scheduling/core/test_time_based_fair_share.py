"""Time-based fair share: a queue's past usage lowers its over-quota share and raises its siblings';
deserved quotas stay; k = 0 (or no history) is the plain division. Then, over cycles, the queue
that used less reclaims from the one that used more, once, and the cluster stays quiet while the
history holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core import Pool, Queue, Snapshot
from scheduling.core.builders import cycles, nodes
from scheduling.core.fairshare import fair_shares, usage_weights
from tests.scheduling.core.test_reclaim_scenarios import fair_shares as session_shares
from tests.scheduling.core.test_reclaim_scenarios import gpus_held, moves_per_job, singles, spread

TWO = (Queue("a"), Queue("b"))  # deserved 0, weight 1 each
DEMAND = {"a": 16000, "b": 16000}


@pytest.mark.parametrize(("queues", "usage", "k", "expected"), [
    (TWO, {}, 1.0, {"a": 8000, "b": 8000}),                              # no history: plain division
    (TWO, {"a": 0.5, "b": 0.5}, 1.0, {"a": 8000, "b": 8000}),            # equal history: no change
    (TWO, {"a": 0.6, "b": 0.2}, 0.0, {"a": 8000, "b": 8000}),            # k = 0 turns it off
    (TWO, {"a": 0.6, "b": 0.2}, 0.5, {"a": 6000, "b": 10000}),           # shares 0.5 +- 0.5 * 0.25
    (TWO, {"a": 0.6, "b": 0.2}, 1.0, {"a": 4000, "b": 12000}),
    (TWO, {"a": 0.8, "b": 0.0}, 1.0, {"a": 0, "b": 16000}),              # all the history: no over-quota share
    # deserved quotas are kept whatever the history
    ((Queue("a", deserved_milli=4000), Queue("b", deserved_milli=4000)), {"a": 0.8}, 1.0, {"a": 4000, "b": 12000}),
    # weights keep their ratio when usage follows it
    ((Queue("a", over_quota_weight=3), Queue("b")), {"a": 0.6, "b": 0.2}, 1.0, {"a": 12000, "b": 4000}),
    # the division is per level: the departments compare their subtrees' usage
    ((Queue("d1"), Queue("d2"), Queue("a", parent="d1"), Queue("b", parent="d2")),
     {"a": 0.6, "b": 0.2}, 1.0, {"d1": 4000, "d2": 12000, "a": 4000, "b": 12000}),
])
def test_over_quota_division_follows_past_usage(queues, usage, k, expected):
    shares = fair_shares(queues, 16000, DEMAND, usage, k)
    assert {name: round(v) for name, v in shares.items()} == expected


def test_a_queue_without_weight_gets_nothing_over_quota_whatever_its_history():
    weights = usage_weights([Queue("a", over_quota_weight=0), Queue("b")], {"a": 0.0, "b": 0.9}, 1.0)
    assert weights["a"] == 0.0 and weights["b"] > 0


def test_the_queue_that_used_less_reclaims_once_and_the_cluster_stays_quiet():
    a_jobs = singles("a", "a", 8)
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, 8), queues=TWO,
                    jobs=(*a_jobs, *singles("b", "b", 8, start=20)), running=spread("h100-0", a_jobs))
    assert session_shares(snap) == {"a": 4000, "b": 4000}
    # a ran the cluster alone for days: b is owed more than half of what is over quota now
    snap = replace(snap, queue_usage=(("a", 0.6), ("b", 0.2)), usage_k=1.0)
    assert session_shares(snap) == {"a": 2000, "b": 6000}
    snap, history = cycles(snap, 6)
    assert [d.changes for d in history[1:]] == [0] * 5
    assert gpus_held(snap, ["a", "b"]) == {"a": 2, "b": 6}
    assert {e.rule for e in history[0].evicts} == {"fair-share"}
    assert set(moves_per_job(history).values()) == {1}
