"""Reclaim as NVIDIA KAI-Scheduler's reclaim tests expect it, one test per case of theirs.

Each test builds the case's cluster in our own terms (KAI's queues become queues with a deserved quota
and an over-quota weight; its departments, parent queues whose over-quota weight is their deserved
quota; its inference jobs, non-preemptible jobs; a job's running tasks, running replicas) and checks
one cycle: which jobs lose their GPUs, which are bound, the fair shares the decision rests on, and
that the cycles after it move nothing. The docstring names the KAI test mirrored; the tables there
are the reference for the semantics (the cases are rebuilt, not copied).
"""

from __future__ import annotations

import pytest

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes
from scheduling.core.cycle import apply_decisions
from scheduling.core.model import Decisions
from scheduling.core.session import Session

H100 = (Pool("h100"),)

def whole(job_id: str, node: str, *gpus: int) -> RunningReplica:
    return RunningReplica(job_id, "worker", 0, node, gpus, Slice("whole", 1000, 81920))


def part(job_id: str, node: str, gpu: int, milli: int) -> RunningReplica:
    return RunningReplica(job_id, "worker", 0, node, (gpu,), Slice("fraction", milli, 0))


def fraction(job_id: str, queue: str, milli: int, created: float) -> object:
    return job(job_id, queue, mode="fraction", milli=milli, created=created)


def dept(name: str, gpus: int) -> Queue:
    """A department as KAI's tests model it: its over-quota weight is its deserved quota."""
    return Queue(name, deserved_milli=gpus * 1000, over_quota_weight=gpus)


def shares(snap: Snapshot) -> dict[str, int]:
    return {q: round(v) for q, v in Session.build(snap).fair_share.items()}


def held_milli(snap: Snapshot) -> dict[str, int]:
    queue_of = {j.id: j.queue for j in snap.jobs}
    out = {q.name: 0 for q in snap.queues}
    for r in snap.running:
        out[queue_of[r.job_id]] += r.slice.gpu_milli * len(r.gpus)
    return out


def allocatable(snap: Snapshot) -> dict[str, int]:
    return {q: round(v) for q, v in Session.build(snap).allocatable.items()}


def check(snap: Snapshot, *, fair: dict[str, int], evicted: set[str], bound: set[str],
          quiet: bool = True) -> tuple[Decisions, Snapshot]:
    """One cycle evicts and binds exactly these jobs, on these fair shares; with `quiet`, the next
    cycles change nothing; a cycle that visits every job (`exact`) decides the same. Returns the cycle's
    decisions and the snapshot after them."""
    assert shares(snap) == fair
    d = run_cycle(snap)
    assert run_cycle(snap, exact=True) == d
    assert {e.job_id for e in d.evicts} == evicted
    assert {b.job_id for b in d.binds} == bound
    after = apply_decisions(snap, d)
    if quiet:
        _, later = cycles(after, 3)
        assert [x.changes for x in later] == [0, 0, 0]
    return d, after


def test_queue_under_fair_share_reclaims_from_one_over_it():
    """KAI integration reclaim 00, "queue0 is under fair share, queue1 is over fair share - reclaim".

    Four GPUs; queue0 (deserved 1, weight 3) holds 1.5 and asks half a GPU more; queue1 (deserved 2,
    weight 1) holds 2.5. The one GPU over the deserved quotas goes whole to queue0, the queue with the
    bigger remainder (fair shares 2 and 2), so queue1's half GPU goes and queue0's half takes it."""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 4),
        queues=(Queue("queue0", deserved_milli=1000, over_quota_weight=3),
                Queue("queue1", deserved_milli=2000, over_quota_weight=1)),
        jobs=(job("q0-job0", "queue0", created=1), fraction("q0-job1", "queue0", 500, 2),
              job("q1-job0", "queue1", gpus=2, created=3), fraction("q1-job1", "queue1", 500, 4),
              fraction("q0-job2", "queue0", 500, 5)),
        running=(whole("q0-job0", "h100-0", 1), part("q0-job1", "h100-0", 0, 500),
                 whole("q1-job0", "h100-0", 2, 3), part("q1-job1", "h100-0", 0, 500)),
    )
    d, _ = check(snap, fair={"queue0": 2000, "queue1": 2000}, evicted={"q1-job1"}, bound={"q0-job2"})
    assert [(e.rule, e.level) for e in d.evicts] == [("fair-share", "queue1")]


def test_queue_within_its_deserved_reclaims_a_whole_job_from_an_over_committed_cluster():
    """KAI integration reclaim 06, "1 running job over quota but with queue that has higher
    reclaimable deserved gpus, ... cluster is in over capacity - reclaim".

    Eight GPUs but 11 deserved (6 and 5). The fair shares scale the quotas down to the cluster, but a
    queue may hold its deserved quota whatever its fair share: queue0's 8-GPU job is over its 6, and
    queue1 asks exactly its 5."""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("queue0", deserved_milli=6000, over_quota_weight=6),
                Queue("queue1", deserved_milli=5000, over_quota_weight=5)),
        jobs=(job("running0", "queue0", gpus=8, created=1), job("pending0", "queue1", gpus=5, created=2)),
        running=(whole("running0", "h100-0", *range(8)),),
    )
    assert allocatable(snap) == {"queue0": 6000, "queue1": 5000}
    check(snap, fair={"queue0": 4364, "queue1": 3636}, evicted={"running0"}, bound={"pending0"})


def test_whole_gpu_remainder_goes_to_the_queue_with_the_bigger_fraction():
    """KAI integration reclaim 11, "Reclaim according to the reclaimable deserved GPUs, queue0 has 1 GPU
    from remaining ...".

    Seven GPUs; queue0 (deserved 2, weight 2) holds 4 and asks 1 more, queue1 (deserved 1, weight 1)
    holds 3. The 4 GPUs over quota split 2:1 are 2.67 and 1.33: each gets its whole GPUs (2 and 1) and
    the one left goes to queue0, whose fraction is bigger: shares 5 and 2, so queue1's 3-GPU job goes."""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 7),
        queues=(Queue("queue0", deserved_milli=2000, over_quota_weight=2),
                Queue("queue1", deserved_milli=1000, over_quota_weight=1)),
        jobs=(job("running0", "queue0", gpus=4, created=1), job("running1", "queue1", gpus=3, created=2),
              job("pending0", "queue0", created=3)),
        running=(whole("running0", "h100-0", 0, 1, 2, 3), whole("running1", "h100-0", 4, 5, 6)),
    )
    check(snap, fair={"queue0": 5000, "queue1": 2000}, evicted={"running1"}, bound={"pending0"})


def test_over_quota_queue_gives_before_a_higher_priority_queue_over_its_share():
    """KAI integration reclaim 09, "2 train job for overquota project 1, 1 job for overquota project
    with deserved of 0, 1 job recalim from different project - reclaim from less prioritized queue".

    Four GPUs; queue0 (deserved 1) runs two 1-GPU jobs, queue2 (deserved 1, no over-quota weight,
    higher priority) two, queue1 (deserved 1) asks one. queue2 is over its fair share and queue0 over
    its deserved quota: queue0, the lower-priority queue, gives its newest job."""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 4),
        queues=(Queue("queue0", deserved_milli=1000, over_quota_weight=1),
                Queue("queue1", deserved_milli=1000, over_quota_weight=1),
                Queue("queue2", deserved_milli=1000, over_quota_weight=0, priority=1)),
        jobs=(job("running0", "queue0", created=1), job("running1", "queue0", created=2),
              job("running2", "queue2", created=3), job("running3", "queue2", created=4),
              job("pending0", "queue1", created=5)),
        running=(whole("running0", "h100-0", 0), whole("running1", "h100-0", 1),
                 whole("running2", "h100-0", 2), whole("running3", "h100-0", 3)),
    )
    d, after = check(snap, fair={"queue0": 2000, "queue1": 1000, "queue2": 1000}, evicted={"running1"},
                     bound={"pending0"}, quiet=False)
    assert [(e.rule, e.level) for e in d.evicts] == [("reclaim-within-deserved", "queue0")]
    # then queue0, back within its fair share of 2, takes its GPU back from queue2, over its own
    after, [second, *later] = cycles(after, 4)
    assert [(e.job_id, e.rule, e.by_queue) for e in second.evicts] == [("running3", "fair-share", "queue0")]
    assert [x.changes for x in later] == [0, 0, 0]
    assert held_milli(after) == {"queue0": 2000, "queue1": 1000, "queue2": 1000}


def test_reclaim_from_another_department_and_from_a_sibling():
    """KAI integration reclaim 17 and reclaimDepartments 04, "Reclaim from different department and
    same department".

    Four GPUs; department d1 (deserved 0) has queue0 running 2 GPUs; d2 (deserved 4) has queue1
    (deserved 0) running 2 and queue2 (deserved 4) asking 4. Both running jobs go: d1 is over its
    share of 0, queue1 over its own of 0 within d2."""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 4),
        queues=(dept("d1", 0), dept("d2", 4),
                Queue("queue0", parent="d1", deserved_milli=1000, over_quota_weight=1),
                Queue("queue1", parent="d2", deserved_milli=0, over_quota_weight=0),
                Queue("queue2", parent="d2", deserved_milli=4000, over_quota_weight=4)),
        jobs=(job("running0", "queue0", gpus=2, created=1), job("running1", "queue1", gpus=2, created=2),
              job("pending0", "queue2", gpus=4, created=3)),
        running=(whole("running0", "h100-0", 0, 1), whole("running1", "h100-0", 2, 3)),
    )
    d, _ = check(snap, fair={"d1": 0, "d2": 4000, "queue0": 0, "queue1": 0, "queue2": 4000},
                 evicted={"running0", "running1"}, bound={"pending0"})
    assert sorted((e.job_id, e.level) for e in d.evicts) == [("running0", "d1"), ("running1", "queue1")]


def test_reclaim_from_the_department_most_over_its_share():
    """KAI reclaimDepartments 08, "Reclaim from overquota department with multiple departments".

    Sixteen GPUs, four departments deserving 4 each. d1 holds its 4 (all in project2, over its share
    of 3) and its project1 asks one GPU for a non-preemptible job; d2 holds 8, d3 its 4; d4 asks 5,
    more than its share. d1 may go to 5 over its share of 4, for d2 stays further over its own (7 of
    4): d2's newest job goes, not d1's own."""
    d1p2 = tuple(job(f"d1-p2-job{i}", "d1-project2", created=i) for i in range(1, 5))
    d2 = tuple(job(f"d2-job{i}", "d2-project1", created=10 + i) for i in range(1, 9))
    d3 = tuple(job(f"d3-job{i}", "d3-project1", created=20 + i) for i in range(1, 5))
    running = tuple(whole(j.id, "h100-0", gpu) for gpu, j in enumerate(d1p2 + d2 + d3))
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 16),
        queues=(dept("d1", 4), dept("d2", 4), dept("d3", 4), dept("d4", 4),
                Queue("d1-project1", parent="d1", deserved_milli=3000, over_quota_weight=3),
                Queue("d1-project2", parent="d1", deserved_milli=1000, over_quota_weight=1),
                Queue("d2-project1", parent="d2", deserved_milli=4000, over_quota_weight=4),
                Queue("d3-project1", parent="d3", deserved_milli=4000, over_quota_weight=4),
                Queue("d4-project1", parent="d4", deserved_milli=4000, over_quota_weight=4)),
        jobs=(job("d1-p1-pending", "d1-project1", preemptible=False, created=0), *d1p2, *d2, *d3,
              job("d4-job1", "d4-project1", gpus=5, created=30)),
        running=running,
    )
    d, _ = check(snap, fair={"d1": 4000, "d2": 4000, "d3": 4000, "d4": 4000, "d1-project1": 1000,
                             "d1-project2": 3000, "d2-project1": 4000, "d3-project1": 4000, "d4-project1": 4000},
                 evicted={"d2-job8"}, bound={"d1-p1-pending"})
    assert [(e.rule, e.level) for e in d.evicts] == [("fair-share", "d2")]


def test_queues_over_committed_in_equal_ratio_reclaim_nothing():
    """KAI reclaim 11, "Queues are over provisioned, ratio between queues are equal, yet don't reclaim
    since number of used GPUs is equal to the deserved GPUs".

    Two GPUs, two queues deserving 2 each (fair shares scaled down to 1 each): queue0 holds its 2,
    over its fair share but within its deserved quota, so queue1's pending jobs take nothing from it."""
    q0 = (job("running0", "queue0", created=1), job("running1", "queue0", created=2))
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 2),
        queues=(Queue("queue0", deserved_milli=2000, over_quota_weight=2),
                Queue("queue1", deserved_milli=2000, over_quota_weight=2)),
        jobs=(*q0, job("pending0", "queue1", created=3), job("pending1", "queue1", created=4)),
        running=(whole("running0", "h100-0", 0), whole("running1", "h100-0", 1)),
    )
    assert allocatable(snap) == {"queue0": 2000, "queue1": 2000}
    check(snap, fair={"queue0": 1000, "queue1": 1000}, evicted=set(), bound=set())


def test_whole_gpu_over_quota_division_in_one_round():
    """KAI integration reclaim 19, "Verify we do only 1 round of GPU allocation for whole GPUs jobs, and
    give the GPUs to the one with the bigger remaining - this is a bug we had".

    Eight GPUs; queue0 (deserved 4, weight 4) holds 7 in jobs of 5, 1 and 1; queue1 (deserved 2,
    weight 2) asks 3. The 2 GPUs over quota split 4:2 are 1.33 and 0.67: queue0 gets its whole one and
    the one left goes to queue1, whose fraction is bigger (shares 5 and 3): queue0's two 1-GPU jobs go,
    its 5-GPU job stays."""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 8),
        queues=(Queue("queue0", deserved_milli=4000, over_quota_weight=4),
                Queue("queue1", deserved_milli=2000, over_quota_weight=2)),
        jobs=(job("running0", "queue0", gpus=5, created=1), job("running1", "queue0", created=2),
              job("running2", "queue0", created=3), job("pending0", "queue1", gpus=3, created=4)),
        running=(whole("running0", "h100-0", 0, 1, 2, 3, 4), whole("running1", "h100-0", 5),
                 whole("running2", "h100-0", 6)),
    )
    check(snap, fair={"queue0": 5000, "queue1": 3000}, evicted={"running1", "running2"}, bound={"pending0"})


@pytest.mark.parametrize(
    "queues, weights, fair, evicted, bound",
    [
        # KAI resource division, "distributes remainder between queues based on creation time": two
        # queues of equal weight, and the rounding kept half a GPU from each. KAI gives the GPU to the
        # queue created first; queues here have no creation order, so the GPU is halved: 2.5 each. queue1,
        # holding 2 and asking half a GPU more, takes it from queue0 (3 of its 2.5).
        (("queue0", "queue1"), (1, 1), {"queue0": 2500, "queue1": 2500}, {"queue0-job2"}, {"queue1-half"}),
        # The same with weights 2:1 (parts 2 and 1): nothing to round, nothing is over its share.
        (("queue0", "queue1"), (2, 1), {"queue0": 3000, "queue1": 2000}, set(), set()),
        # Weights 3:2 (parts 1.8 and 1.2): each its whole GPU, and the one left to queue0, whose fraction
        # is bigger: queue0 holds its share of 3 (divided exactly, 2.8 and 2.2).
        (("queue0", "queue1"), (3, 2), {"queue0": 3000, "queue1": 2000}, set(), set()),
    ],
)
def test_over_quota_gpus_in_whole_gpus_unless_a_tie_decides(queues, weights, fair, evicted, bound):
    """Five GPUs; two queues deserving one each; queue0 holds three 1-GPU jobs, queue1 two and asks half
    a GPU more (and a whole one, so that it asks more than its share). The three GPUs over quota go in
    whole GPUs, the queue the rounding kept the most from getting the one left, except where a tie
    would decide it."""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 5),
        queues=tuple(Queue(name, deserved_milli=1000, over_quota_weight=w)
                     for name, w in zip(queues, weights, strict=True)),
        jobs=(job("queue0-job0", "queue0", created=1), job("queue0-job1", "queue0", created=2),
              job("queue0-job2", "queue0", created=3), job("queue1-job0", "queue1", created=4),
              job("queue1-job1", "queue1", created=5), fraction("queue1-half", "queue1", 500, 6),
              job("queue1-more", "queue1", created=7)),
        running=(whole("queue0-job0", "h100-0", 0), whole("queue0-job1", "h100-0", 1),
                 whole("queue0-job2", "h100-0", 2), whole("queue1-job0", "h100-0", 3),
                 whole("queue1-job1", "h100-0", 4)),
    )
    d, _ = check(snap, fair=fair, evicted=evicted, bound=bound)
    assert [(e.rule, e.level) for e in d.evicts] == [("fair-share", "queue0")] * len(evicted)


def test_a_priority_level_gets_the_gpu_its_rounding_left_before_a_lower_level():
    """KAI resource division gives the GPUs a priority level's rounding left only once every level has
    been poured: a lower level may take a whole GPU of them while higher queues still ask. Here a level
    gets its own first.

    Four GPUs, no deserved quotas; qa and qc (priority 1, weights 2 and 1) and qb (priority 0). qb runs
    one GPU, qa two and asks one more, qc one and asks one more. The level above splits the 4 GPUs 2.67
    and 1.33: 2 and 1, and the one left to qa (KAI: to qb, shares 2, 1 and 1; divided exactly, 2.67,
    1.33 and 0, and neither qa nor qc could take a whole GPU). qa takes qb's GPU."""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 1, 4),
        queues=(Queue("qa", over_quota_weight=2, priority=1), Queue("qb"), Queue("qc", priority=1)),
        jobs=(job("b-job0", "qb", created=1), job("a-job0", "qa", created=2), job("a-job1", "qa", created=3),
              job("c-job0", "qc", created=4), job("a-job2", "qa", created=5), job("c-job1", "qc", created=6)),
        running=(whole("b-job0", "h100-0", 0), whole("a-job0", "h100-0", 1), whole("a-job1", "h100-0", 2),
                 whole("c-job0", "h100-0", 3)),
    )
    d, _ = check(snap, fair={"qa": 3000, "qb": 0, "qc": 1000}, evicted={"b-job0"}, bound={"a-job2"})
    assert [(e.rule, e.level, e.by_queue) for e in d.evicts] == [("fair-share", "qb", "qa")]


def test_reclaim_moves_one_half_gpu_job_next_to_the_other():
    """KAI reclaim, "Reclaim based on releasing resources with consolidation".

    Two 1-GPU nodes each run a half-GPU job of a queue that deserves nothing; queue2 (deserved 2) asks
    a whole GPU. Moving one half-GPU job next to the other frees a node: only that job moves (evicted
    and bound again in the same cycle), none is lost, and the whole-GPU job takes the freed node. (The
    two half-GPU jobs are alike; which of them moves is not weighed.)"""
    snap = Snapshot(
        pools=H100, nodes=nodes("h100", 2, 1),
        queues=(Queue("queue0", over_quota_weight=0), Queue("queue1", over_quota_weight=0),
                Queue("queue2", deserved_milli=2000, over_quota_weight=0)),
        jobs=(fraction("running0", "queue0", 500, 1), fraction("running1", "queue1", 500, 2),
              job("pending0", "queue2", created=3)),
        running=(part("running0", "h100-0", 0, 500), part("running1", "h100-1", 0, 500)),
    )
    assert shares(snap) == {"queue0": 0, "queue1": 0, "queue2": 1000}
    d = run_cycle(snap)
    assert len(d.evicts) == 1
    moved = d.evicts[0].job_id
    assert moved in ("running0", "running1")
    assert {b.job_id for b in d.binds} == {moved, "pending0"}
    after = apply_decisions(snap, d)
    on = {r.job_id: r.node for r in after.running}
    assert on["running0"] == on["running1"] != on["pending0"]
    assert held_milli(after) == {"queue0": 500, "queue1": 500, "queue2": 1000}
    _, later = cycles(after, 3)
    assert [x.changes for x in later] == [0, 0, 0]
