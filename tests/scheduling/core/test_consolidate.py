"""Consolidation moves a preemptible replica to make room."""

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes, placed


def whole(job_id: str, node: str, gpu: int) -> RunningReplica:
    return RunningReplica(job_id, "worker", 0, node, (gpu,), Slice("whole", 1000, 81920))


def two_nodes(a1_preemptible: bool = True) -> Snapshot:
    return Snapshot(
        pools=(Pool("h100", placement="binpack"),),
        nodes=nodes("h100", 2, 2),
        queues=(Queue("team-a", deserved_milli=2000), Queue("team-b", deserved_milli=2000)),
        jobs=(job("a1", "team-a", preemptible=a1_preemptible), job("b1", "team-b", created=1),
              job("a2", "team-a", gpus=2, created=2)),
        running=(whole("a1", "h100-0", 0), whole("b1", "h100-1", 0)),
    )


def test_a1_moves_to_node_2_and_a2_runs_on_node_1():
    d = run_cycle(two_nodes())
    assert [(e.job_id, e.node, e.reason) for e in d.evicts] == [("a1", "h100-0", "consolidate")]
    assert sorted((b.job_id, b.node, b.gpus) for b in d.binds) == [("a1", "h100-1", (1,)),
                                                                   ("a2", "h100-0", (0, 1))]
    assert d.pending == {}
    snap, quiet = cycles(two_nodes(), 4)
    assert quiet[0].changes == 3 and all(x.changes == 0 for x in quiet[1:])
    assert placed(snap) == {"a1": 1, "b1": 1, "a2": 1}


def test_nothing_moves_when_the_moved_replica_could_not_fit_again():
    snap = two_nodes()
    # b1 holds both GPUs of node 2: a1 would have nowhere to go
    snap = Snapshot(**{**snap.__dict__,
                       "jobs": (job("a1", "team-a"), job("b1", "team-b", gpus=2, created=1),
                                job("a2", "team-a", gpus=2, created=2)),
                       "running": (whole("a1", "h100-0", 0),
                                   RunningReplica("b1", "worker", 0, "h100-1", (0, 1), Slice("whole", 1000, 81920)))})
    d = run_cycle(snap)
    assert d.evicts == () and d.binds == ()
    assert "a2" in d.pending


def test_non_preemptible_replicas_are_not_moved():
    d = run_cycle(two_nodes(a1_preemptible=False))
    # a1 stays; b1 (preemptible) is moved next to it instead
    assert [(e.job_id, e.reason) for e in d.evicts] == [("b1", "consolidate")]
    assert sorted((b.job_id, b.node) for b in d.binds) == [("a2", "h100-1"), ("b1", "h100-0")]


def test_fractions_are_packed_together_to_free_a_whole_gpu():
    half = Slice("fraction", 500, 8000)
    snap = Snapshot(
        pools=(Pool("v100", gpu_memory_mib=16384, placement="binpack"),),
        nodes=nodes("v100", 1, 2),
        queues=(Queue("q"),),
        jobs=(job("f1", "q", mode="fraction", milli=500, gpu_mem=8000),
              job("f2", "q", mode="fraction", milli=500, gpu_mem=8000, created=1),
              job("whole", "q", created=2)),
        running=(RunningReplica("f1", "worker", 0, "v100-0", (0,), half),
                 RunningReplica("f2", "worker", 0, "v100-0", (1,), half)),
    )
    snap, [d, *quiet] = cycles(snap, 3)
    assert len(d.evicts) == 1 and d.evicts[0].reason == "consolidate"
    moved = d.evicts[0].job_id
    by_job = {b.job_id: b.gpus for b in d.binds}
    assert set(by_job) == {moved, "whole"}
    assert by_job[moved] != by_job["whole"]
    assert all(x.changes == 0 for x in quiet)
    assert placed(snap) == {"f1": 1, "f2": 1, "whole": 1}


def test_a_chain_move_makes_room_when_one_move_is_not_enough():
    # t4-0 holds two preemptible 300-milli replicas; a whole-GPU job needs that GPU. The first
    # moves into t4-1's 300 gap, the second fits nowhere until the preemptible 200 on t4-2
    # moves into t4-3's 200 gap: a chain of three moves in one cycle.
    def frac(job_id: str, node: str, milli: int) -> RunningReplica:
        return RunningReplica(job_id, "worker", 0, node, (0,), Slice("fraction", milli, 0))

    def fjob(job_id: str, milli: int, preemptible: bool, created: int):
        return job(job_id, "q", mode="fraction", milli=milli, preemptible=preemptible, created=created)

    snap = Snapshot(
        pools=(Pool("t4", gpu_memory_mib=16384, placement="binpack"),),
        nodes=nodes("t4", 4, 1),
        queues=(Queue("q", deserved_milli=4000),),
        jobs=(fjob("a", 300, True, 0), fjob("b", 300, True, 1), fjob("c", 700, False, 2),
              fjob("d", 600, False, 3), fjob("e", 200, True, 4), fjob("f", 800, False, 5),
              job("whole", "q", created=6)),
        running=(frac("a", "t4-0", 300), frac("b", "t4-0", 300), frac("c", "t4-1", 700),
                 frac("d", "t4-2", 600), frac("e", "t4-2", 200), frac("f", "t4-3", 800)),
    )
    snap, [d, *quiet] = cycles(snap, 3)
    assert sorted((e.job_id, e.node, e.reason) for e in d.evicts) == [
        ("a", "t4-0", "consolidate"), ("b", "t4-0", "consolidate"), ("e", "t4-2", "consolidate")]
    assert sorted((b.job_id, b.node) for b in d.binds) == [("a", "t4-1"), ("b", "t4-2"), ("e", "t4-3"),
                                                           ("whole", "t4-0")] or sorted(
        (b.job_id, b.node) for b in d.binds) == [("a", "t4-2"), ("b", "t4-1"), ("e", "t4-3"), ("whole", "t4-0")]
    assert d.pending == {}
    assert all(x.changes == 0 for x in quiet)
    assert placed(snap) == dict.fromkeys("abcdef", 1) | {"whole": 1}
