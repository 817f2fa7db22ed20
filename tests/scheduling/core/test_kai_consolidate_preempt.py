"""Consolidation and preemption limits, one test per NVIDIA KAI-Scheduler test case they mirror.

Each test builds the cluster of a KAI-Scheduler case (its nodes, queue quota, running and pending
jobs) and runs one of our cycles; what it evicts and binds must be what KAI-Scheduler's case expects.
Priorities are KAI-Scheduler's numbers: train jobs are preemptible, build and inference jobs are not.
A KAI case runs one action; the cycle runs allocate first, which in these clusters places nothing,
so the cycle's decisions are that action's.
"""

from __future__ import annotations

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot, run_cycle
from scheduling.core.builders import cycles, job
from scheduling.core.cycle import apply_decisions
from scheduling.core.model import Decisions, Node

TRAIN, BUILD, INFERENCE = 50, 100, 125
BINPACK = (Pool("gpu", placement="binpack"),)


def on(job_id: str, node: str, *gpus: int, index: int = 0) -> RunningReplica:
    return RunningReplica(job_id, "worker", index, node, gpus, Slice("whole", 1000, 81920))


def cluster(*gpus_per_node: int) -> tuple[Node, ...]:
    return tuple(Node.with_gpus(f"node{i}", "gpu", gpus) for i, gpus in enumerate(gpus_per_node))


def train(job_id: str, gpus: int, created: int, replicas: int = 1, **kwargs):
    return job(job_id, "q", gpus=gpus, replicas=replicas, priority=TRAIN, created=created, **kwargs)


def evicted(d: Decisions) -> list[tuple[str, int, str, str]]:
    return [(e.job_id, e.replica, e.node, e.reason) for e in d.evicts]


def bound(d: Decisions) -> list[tuple[str, int, str]]:
    return [(b.job_id, b.replica, b.node) for b in d.binds]


def nodes_of(snapshot: Snapshot) -> dict[tuple[str, int], tuple[str, tuple[int, ...]]]:
    return {(r.job_id, r.index): (r.node, r.gpus) for r in snapshot.running}


def settles(snapshot: Snapshot) -> bool:
    _, history = cycles(snapshot, 3)
    return history[0].changes > 0 and all(d.changes == 0 for d in history[1:])


# ---------------------------------------------------------------- consolidation


def test_consolidation_moves_only_the_replica_in_the_way():
    """KAI consolidation: "2 jobs of 2 & 1 GPUs running, two pending jobs, only second can be consolidated".

    node1 holds a 1-GPU and a 2-GPU replica. The first pending job (two 2-GPU replicas) cannot fit even
    with moves; the second (3 GPUs) fits on node1 once the 2-GPU replica moves to node0. The 1-GPU
    replica is not in the way and keeps its GPU."""
    snap = Snapshot(
        pools=BINPACK, nodes=cluster(4, 4), queues=(Queue("q", deserved_milli=2000),),
        jobs=(train("r0", 2, 0), train("r1", 1, 1), train("r2", 2, 2), train("p0", 2, 3, replicas=2),
              train("p1", 3, 4)),
        running=(on("r0", "node0", 0, 1), on("r1", "node1", 0), on("r2", "node1", 1, 2)),
    )
    d = run_cycle(snap)
    assert evicted(d) == [("r2", 0, "node1", "consolidate")]
    assert bound(d) == [("p1", 0, "node1"), ("r2", 0, "node0")]
    assert "p0" in d.pending
    assert nodes_of(apply_decisions(snap, d))[("r1", 0)] == ("node1", (0,))
    assert settles(snap)


def test_consolidation_moves_one_job_for_the_second_pending_job():
    """KAI consolidation: "2 jobs of 1 task running on different GPUs, 2 pending jobs, only second can be
    consolidated".

    Two 2-GPU replicas on two 4-GPU nodes; a 5-GPU job never fits, a 3-GPU job does once one of them
    joins the other. KAI moves the newer one; which of the two equal moves is taken is a tie-break, so
    the test asks for one move that gathers both on one node and the 3-GPU job on the other."""
    snap = Snapshot(
        pools=BINPACK, nodes=cluster(4, 4), queues=(Queue("q", deserved_milli=2000),),
        jobs=(train("r0", 2, 0), train("r1", 2, 1), train("p0", 5, 3), train("p1", 3, 4)),
        running=(on("r0", "node0", 0, 1), on("r1", "node1", 0, 1)),
    )
    d = run_cycle(snap)
    assert len(d.evicts) == 1 and d.evicts[0].reason == "consolidate"
    moved = d.evicts[0].job_id
    after = nodes_of(apply_decisions(snap, d))
    assert after[("r0", 0)][0] == after[("r1", 0)][0]
    assert after[("p1", 0)][0] == d.evicts[0].node != after[(moved, 0)][0]
    assert "p0" in d.pending
    assert settles(snap)


def test_gang_whose_replicas_cannot_share_a_node_moves_one_replica_per_node():
    """KAI consolidation: "1 jobs of 2 tasks that cannot sit together on the same node".

    Four 4-GPU nodes each run two 1-GPU jobs; a gang of two 3-GPU replicas needs two nodes with 3 GPUs
    free. KAI moves one 1-GPU job off each of two nodes (onto a third) and leaves the other six where
    they are, on their GPUs: two moves, not the clearing of whole nodes."""
    singles = tuple(train(f"r{i}", 1, i) for i in range(8))
    snap = Snapshot(
        pools=BINPACK, nodes=cluster(4, 4, 4, 4), queues=(Queue("q", deserved_milli=2000),),
        jobs=(*singles, train("gang", 3, 10, replicas=2)),
        running=tuple(on(f"r{i}", f"node{i % 4}", i // 4) for i in range(8)),
    )
    d = run_cycle(snap)
    assert len(d.evicts) == 2 and {e.reason for e in d.evicts} == {"consolidate"}
    gang_nodes = sorted(b.node for b in d.binds if b.job_id == "gang")
    assert len(set(gang_nodes)) == 2
    assert sorted(e.node for e in d.evicts) == gang_nodes
    before, after = nodes_of(snap), nodes_of(apply_decisions(snap, d))
    moved = {e.job_id for e in d.evicts}
    assert all(after[k][0] not in gang_nodes for k in before if k[0] in moved)
    assert all(after[k] == before[k] for k in before if k[0] not in moved)
    assert settles(snap)


# ---------------------------------------------------------------- preemption limits


def build_job_cluster(deserved_gpus: int) -> Snapshot:
    return Snapshot(
        pools=BINPACK, nodes=cluster(4), queues=(Queue("q", deserved_milli=deserved_gpus * 1000),),
        jobs=(train("r0", 1, 0), train("r1", 2, 1), train("r2", 1, 2),
              job("build", "q", gpus=4, priority=BUILD, preemptible=False, created=3)),
        running=(on("r0", "node0", 0), on("r1", "node0", 1, 2), on("r2", "node0", 3)),
    )


def test_build_job_over_deserved_quota_does_not_preempt():
    """KAI integration preempt: "3 jobs running for queue0 on 4 GPUs, 1 pending build job for queue0,
    deserved of queue1 is 3 - don't preempt".

    The build job (not preemptible) asks 4 GPUs of a queue that deserves 3: non-preemptible work may
    not go over the deserved quota, and evicting train jobs cannot change that, so nothing is evicted."""
    d = run_cycle(build_job_cluster(3))
    assert d.evicts == () and d.binds == ()
    assert d.pending_codes["build"].code == "queue_non_preemptible_quota"


def test_build_job_within_deserved_quota_preempts():
    """KAI integration preempt: "3 jobs running for queue0 on 4 GPUs, 1 pending build job for queue0,
    deserved of queue1 is 4 - preempt" (the same cluster, the quota one GPU larger)."""
    d = run_cycle(build_job_cluster(4))
    assert sorted(evicted(d)) == [("r0", 0, "node0", "preempt"), ("r1", 0, "node0", "preempt"),
                                  ("r2", 0, "node0", "preempt")]
    assert bound(d) == [("build", 0, "node0")]


def test_gang_does_not_preempt_when_it_would_go_over_quota():
    """KAI preempt: "don't preempt if will go over quota" (preemptGang_test).

    A build gang of two 2-GPU replicas in a queue that deserves 3 GPUs: placed whole it would hold 4
    non-preemptible GPUs, so the train job stays and the gang waits."""
    snap = Snapshot(
        pools=BINPACK, nodes=cluster(4), queues=(Queue("q", deserved_milli=3000),),
        jobs=(train("r0", 1, 0), job("gang", "q", gpus=2, replicas=2, priority=BUILD, preemptible=False, created=1)),
        running=(on("r0", "node0", 0),),
    )
    d = run_cycle(snap)
    assert d.evicts == () and d.binds == ()
    assert d.pending_codes["gang"].code == "queue_non_preemptible_quota"


def test_build_job_preempts_a_gang_within_quota():
    """KAI preempt: "preempt gang job" (preemptGang_test): a 2-GPU build job within the quota of 3
    evicts the whole train gang (two 2-GPU replicas) that holds the node."""
    snap = Snapshot(
        pools=BINPACK, nodes=cluster(4), queues=(Queue("q", deserved_milli=3000),),
        jobs=(train("tg", 2, 0, replicas=2), job("build", "q", gpus=2, priority=BUILD, preemptible=False, created=1)),
        running=(on("tg", "node0", 0, 1), on("tg", "node0", 2, 3, index=1)),
    )
    d = run_cycle(snap)
    assert evicted(d) == [("tg", 0, "node0", "preempt"), ("tg", 1, "node0", "preempt")]
    assert bound(d) == [("build", 0, "node0")]


# ---------------------------------------------------------------- elastic preemptor


def test_elastic_inference_preempting_train_gets_its_minimum():
    """KAI preempt: "Elastic inference job preempts train job" (preempt_elastic_test, the 7th case).

    An inference job of two 1-GPU replicas (minimum one) preempts the 2-GPU train job holding the
    node. Preemption serves what the job asks for once: its minimum, one replica; the second waits
    for a later cycle (it is not preempted for in the same pass)."""
    snap = Snapshot(
        pools=BINPACK, nodes=cluster(2), queues=(Queue("q", deserved_milli=2000),),
        jobs=(train("r0", 2, 0), job("inf", "q", replicas=2, min_replicas=1, priority=INFERENCE, preemptible=False,
                                     created=1)),
        running=(on("r0", "node0", 0, 1),),
    )
    d = run_cycle(snap)
    assert evicted(d) == [("r0", 0, "node0", "preempt")]
    assert bound(d) == [("inf", 0, "node0")]


def test_elastic_inference_preempts_an_elastic_extra_for_its_next_replica():
    """KAI preempt: "Elastic inference job preempts task from train job in favor of a single task"
    (preempt_elastic_test, the 8th case): an inference job at its minimum takes its next replica by
    evicting the train job's replica above its minimum; the train job keeps its minimum."""
    snap = Snapshot(
        pools=BINPACK, nodes=cluster(3), queues=(Queue("q", deserved_milli=3000),),
        jobs=(train("tr", 1, 0, replicas=2, min_replicas=1),
              job("inf", "q", replicas=2, min_replicas=1, priority=INFERENCE, preemptible=False, created=1)),
        running=(on("tr", "node0", 0), on("tr", "node0", 1, index=1), on("inf", "node0", 2)),
    )
    d = run_cycle(snap)
    assert evicted(d) == [("tr", 1, "node0", "shrink")]
    assert bound(d) == [("inf", 1, "node0")]
