"""Priority preemption (never of non-preemptible work) and a lost node."""

from dataclasses import replace

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes, placed, with_jobs


def one_queue(gpus: int, *jobs, deserved: int = 0) -> Snapshot:
    return Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, gpus),
                    queues=(Queue("q", deserved_milli=deserved),), jobs=jobs)


def test_higher_priority_preempts_lower_within_a_queue():
    snap, _ = cycles(one_queue(2, job("low1", "q", priority=1), job("low2", "q", priority=1, created=1)), 1)
    snap, [d] = cycles(with_jobs(snap, job("high", "q", priority=10, created=2)), 1)
    # the newest of the lowest priority goes first
    assert [(e.job_id, e.reason) for e in d.evicts] == [("low2", "preempt")]
    assert [b.job_id for b in d.binds] == ["high"]
    assert "low2" in d.pending
    _, quiet = cycles(snap, 3)
    assert all(x.changes == 0 for x in quiet)


def test_equal_priority_does_not_preempt():
    snap, _ = cycles(one_queue(1, job("first", "q", priority=5)), 1)
    d = run_cycle(with_jobs(snap, job("second", "q", priority=5, created=1)))
    assert d.changes == 0 and "second" in d.pending


def test_non_preemptible_job_is_never_evicted():
    snap, _ = cycles(one_queue(2, job("guard", "q", preemptible=False), job("low", "q", created=1),
                               deserved=2000), 1)
    assert placed(snap) == {"guard": 1, "low": 1}
    # needs both GPUs: evicting "low" alone is not enough and "guard" may not be touched
    snap2, history = cycles(with_jobs(snap, job("urgent", "q", gpus=2, priority=10, created=2)), 3)
    assert all(x.changes == 0 for x in history)
    assert placed(snap2) == {"guard": 1, "low": 1}
    # one GPU is enough: "low" goes, "guard" stays
    _, [d] = cycles(with_jobs(snap, job("urgent", "q", gpus=1, priority=10, created=2)), 1)
    assert [e.job_id for e in d.evicts] == ["low"]


def test_non_preemptible_work_must_fit_in_deserved_quota():
    d = run_cycle(one_queue(4, job("np", "q", gpus=2, preemptible=False), deserved=1000))
    assert d.binds == ()
    assert d.pending["np"] == ("non-preemptible work must fit in queue q's deserved quota of 1 GPU "
                               "(0 GPU non-preemptible in use, the job needs 2 GPUs)")


def test_lost_node_replicas_are_evicted_and_requeued():
    snap = Snapshot(pools=(Pool("h100", placement="spread"),), nodes=nodes("h100", 2, 1), queues=(Queue("q"),),
                    jobs=(job("a", "q"), job("b", "q", created=1)))
    snap, _ = cycles(snap, 1)
    on_first = next(r.job_id for r in snap.running if r.node == "h100-0")
    on_second = next(r.job_id for r in snap.running if r.node == "h100-1")

    # node h100-1 disappears: its replica is evicted (node-lost); no room elsewhere, so it waits
    gone = replace(snap, nodes=snap.nodes[:1])
    gone, [d] = cycles(gone, 1)
    assert d.evicts[0].job_id == on_second and d.evicts[0].reason == "node-lost"
    assert d.evicts[0].node == "h100-1" and d.binds == ()
    assert d.pending == {on_second: "needs 1 GPU, only 0 free in pool h100"}
    assert placed(gone) == {on_first: 1}

    # a replacement node joins: the requeued replica starts there
    back = replace(gone, nodes=gone.nodes + nodes("h100", 1, 1, prefix="new"))
    _, [d] = cycles(back, 1)
    assert [(b.job_id, b.node) for b in d.binds] == [(on_second, "new-0")]


def test_not_ready_node_counts_as_lost_and_the_replica_restarts_elsewhere_at_once():
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 2, 1), queues=(Queue("q"),), jobs=(job("a", "q"),))
    snap, _ = cycles(snap, 1)
    node = snap.running[0].node
    sick = replace(snap, nodes=tuple(replace(n, ready=n.name != node) for n in snap.nodes))
    d = run_cycle(sick)
    assert [(e.job_id, e.node, e.reason) for e in d.evicts] == [("a", node, "node-lost")]
    assert [b.job_id for b in d.binds] == ["a"] and d.binds[0].node != node


def test_high_priority_job_over_the_queue_limit_preempts_within_it():
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, 4), queues=(Queue("q", limit_milli=2000),),
                    jobs=(job("low1", "q"), job("low2", "q", created=1)))
    snap, _ = cycles(snap, 1)
    # two GPUs are free, but the queue is at its limit: "high" takes the place of the newest low job
    snap, [d, *quiet] = cycles(with_jobs(snap, job("high", "q", priority=10, created=2), job("low3", "q", created=3)), 4)
    assert [(e.job_id, e.reason) for e in d.evicts] == [("low2", "preempt")]
    assert [b.job_id for b in d.binds] == ["high"]
    assert d.pending["low3"].startswith("queue q is over its limit of 2 GPUs")
    assert all(x.changes == 0 for x in quiet)
    assert placed(snap) == {"low1": 1, "high": 1}
