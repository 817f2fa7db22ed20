"""Work of queues without a fair share (best-effort: they deserve nothing and get no over-quota share) is
placed on other nodes than the work of queues with one, where there is room, so that reclaiming it frees
whole nodes for gangs instead of GPUs scattered between guaranteed replicas."""

from __future__ import annotations

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import job, nodes, with_jobs
from scheduling.core.cycle import apply_decisions
from scheduling.core.session import Session

POOL = (Pool("h100"),)
QUEUES = (Queue("team", deserved_milli=8000),
          Queue("team:be", deserved_milli=0, over_quota_weight=0.0, priority=-1))


def layout(snap: Snapshot) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in snap.running:
        out.setdefault(r.node, []).append(r.job_id)
    return {node: sorted(ids) for node, ids in sorted(out.items())}


def arrive_one_by_one(*arrivals) -> Snapshot:
    """One cycle per arriving job, its decisions carried out."""
    snap = Snapshot(pools=POOL, nodes=nodes("h100", 2, 4), queues=QUEUES, jobs=())
    for t, (job_id, queue) in enumerate(arrivals, start=1):
        snap = with_jobs(snap, job(job_id, queue, created=t))
        snap = apply_decisions(snap, run_cycle(snap))
    return snap


def test_best_effort_and_guaranteed_work_take_different_nodes():
    snap = arrive_one_by_one(("t1", "team"), ("b1", "team:be"), ("t2", "team"), ("b2", "team:be"),
                             ("t3", "team"), ("b3", "team:be"), ("t4", "team"), ("b4", "team:be"))
    assert layout(snap) == {"h100-0": ["t1", "t2", "t3", "t4"], "h100-1": ["b1", "b2", "b3", "b4"]}
    s = Session.build(snap)
    assert s.no_share == {"team:be"} and s.kinds.tolist() == [[4, 0], [0, 4]]


def test_a_gang_then_reclaims_a_whole_node_of_best_effort_work():
    snap = arrive_one_by_one(("t1", "team"), ("b1", "team:be"), ("t2", "team"), ("b2", "team:be"),
                             ("t3", "team"), ("b3", "team:be"), ("b4", "team:be"))
    # the team's 4-GPU gang fits within its share of 8 GPUs only on a node cleared of best-effort work
    snap = with_jobs(snap, job("gang", "team", gpus=4, created=10))
    decisions = run_cycle(snap)
    assert sorted(e.job_id for e in decisions.evicts) == ["b1", "b2", "b3", "b4"]
    assert {e.rule for e in decisions.evicts} == {"fair-share"}
    # one victim moves to the GPU left beside the team's work rather than stop
    assert [(b.job_id, b.node) for b in decisions.binds] == [("b1", "h100-0"), ("gang", "h100-1")]


def test_with_room_only_beside_the_other_kind_work_goes_there():
    # the team's fifth job reclaims the newest best-effort job's GPU, beside the other best-effort work
    snap = arrive_one_by_one(("t1", "team"), ("b1", "team:be"), ("t2", "team"), ("b2", "team:be"),
                             ("t3", "team"), ("b3", "team:be"), ("t4", "team"), ("b4", "team:be"),
                             ("t5", "team"))
    assert layout(snap) == {"h100-0": ["t1", "t2", "t3", "t4"], "h100-1": ["b1", "b2", "b3", "t5"]}


def test_only_one_kind_of_queue_with_jobs_changes_nothing():
    snap = Snapshot(pools=POOL, nodes=nodes("h100", 2, 4), queues=QUEUES,
                    jobs=(job("t1", "team", created=1), job("t2", "team", created=2)))
    s = Session.build(snap)
    assert s.no_share == set() and s.kinds is None
