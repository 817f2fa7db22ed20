"""Elastic and gang jobs, and shrinking elastic extras first."""

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes, placed, with_jobs
from scheduling.core.cycle import without_jobs

ONE_QUEUE = (Queue("q"),)


def cluster(gpus: int, *jobs, queues=ONE_QUEUE) -> Snapshot:
    return Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 1, gpus), queues=queues, jobs=jobs)


def test_elastic_job_starts_on_one_gpu_and_grows_when_the_other_ends():
    snap, _ = cycles(cluster(2, job("busy", "q")), 1)
    snap = with_jobs(snap, job("elastic", "q", replicas=2, min_replicas=1, created=1))
    snap, [start] = cycles(snap, 1)
    assert [(b.job_id, b.replica) for b in start.binds] == [("elastic", 0)]
    assert "elastic" not in start.pending          # running at its minimum is not pending

    snap, [grow] = cycles(without_jobs(snap, "busy"), 1)
    assert [(b.job_id, b.replica) for b in grow.binds] == [("elastic", 1)]
    assert placed(snap) == {"elastic": 2}
    _, quiet = cycles(snap, 3)
    assert all(d.changes == 0 for d in quiet)


def test_elastic_extras_are_taken_back_first():
    queues = (Queue("a", deserved_milli=2000), Queue("b", deserved_milli=2000))
    snap, _ = cycles(cluster(4, job("grower", "a", replicas=4, min_replicas=2), queues=queues), 1)
    assert placed(snap) == {"grower": 4}            # idle GPUs: grows to its maximum
    snap = with_jobs(snap, job("b1", "b", gpus=2, created=5))
    snap, [d] = cycles(snap, 1)
    assert sorted((e.job_id, e.replica, e.reason) for e in d.evicts) == [("grower", 2, "shrink"),
                                                                          ("grower", 3, "shrink")]
    assert [b.job_id for b in d.binds] == ["b1"]
    assert placed(snap) == {"grower": 2, "b1": 1}
    _, quiet = cycles(snap, 3)
    assert all(x.changes == 0 for x in quiet)


def test_gang_of_three_with_two_free_gpus_does_not_start():
    d = run_cycle(cluster(2, job("gang", "q", replicas=3)))
    assert d.binds == () and d.evicts == ()
    assert d.pending["gang"] == "gang needs 3 GPUs (1 GPU each), only 2 free in pool h100"


def test_gang_starts_whole_when_it_fits():
    d = run_cycle(cluster(4, job("gang", "q", replicas=3)))
    assert sorted(b.replica for b in d.binds) == [0, 1, 2]
    assert d.pending == {}


def test_multi_gpu_replica_needs_one_node():
    snap = Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 2, 2), queues=(Queue("q", deserved_milli=4000),),
                    jobs=(job("x", "q", preemptible=False), job("y", "q", preemptible=False, created=1)))
    snap, _ = cycles(snap, 1)
    # binpack puts x and y on the same node, leaving a whole node free
    assert len({r.node for r in snap.running}) == 1
    d = run_cycle(with_jobs(snap, job("z", "q", gpus=3, created=2)))
    assert d.pending["z"] == "needs 3 GPUs, only 2 free in pool h100"

    # x and y on different nodes and not movable: 2 GPUs free, but not on one node
    spread = Snapshot(**{**snap.__dict__, "pools": (Pool("h100", placement="spread"),)})
    spread, _ = cycles(Snapshot(**{**spread.__dict__, "running": ()}), 1)
    assert len({r.node for r in spread.running}) == 2
    d = run_cycle(with_jobs(spread, job("z", "q", gpus=2, created=2)))
    assert d.changes == 0
    assert d.pending["z"] == "needs 2 GPUs on one node, pool h100 has 2 free GPUs but at most 1 on any node"
