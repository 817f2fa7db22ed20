"""Backfill reservations (actions/reserve.py): a whole-GPU gang that waited past the patience gets nodes
held for it, so that small jobs submitted after it stop taking every GPU that frees."""

from dataclasses import replace

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import job, nodes
from scheduling.core.replay import ReplayJob, replay

PATIENCE = 1800.0


def cluster(patience: float | None) -> Snapshot:
    # four nodes of 8 GPUs: the 16-GPU gang needs two of them whole
    return Snapshot(pools=(Pool("h100"),), nodes=nodes("h100", 4, 8), queues=(Queue("q", deserved_milli=32000),),
                    jobs=(), backfill_patience_s=patience)


def d1_jobs() -> list[ReplayJob]:
    """The cluster full of one-GPU jobs ending one by one, a 16-GPU gang first in line at t=10, and a
    one-GPU job of the same priority submitted every 60 s after it."""
    busy = [ReplayJob.simple(f"busy-{i:02d}", "q", 1, 0, 600 + 97 * i) for i in range(32)]
    gang = ReplayJob.simple("gang", "q", 8, 10, 3600, replicas=2)
    later = [ReplayJob.simple(f"later-{i:03d}", "q", 1, 20 + 60 * i, 2400) for i in range(150)]
    return [*busy, gang, *later]


def test_without_reservations_later_jobs_of_the_same_priority_overtake_the_gang():
    result = replay(cluster(None), d1_jobs(), start=0, cycle_s=10)
    gang = result.jobs["gang"]
    overtook = [j for j in result.jobs.values() if j.id.startswith("later") and j.start is not None
                and (gang.start is None or j.start < gang.start)]
    # the D1 failure: position 1, and well over a hundred later jobs start first
    assert len(overtook) > 100
    assert gang.start is None or gang.start > 3 * 3600


def test_with_reservations_the_gang_starts_once_its_held_nodes_drain():
    result = replay(cluster(PATIENCE), d1_jobs(), start=0, cycle_s=10)
    gang = result.jobs["gang"]
    # held from t=1810 on; the busy jobs on its two nodes end by 600 + 97 * 31 s at the latest, and the
    # later jobs placed there before 1810 run 2400 s
    assert gang.start is not None and gang.start <= 1810 + 2400 + 10
    without = replay(cluster(None), d1_jobs(), start=0, cycle_s=10).jobs["gang"]
    assert without.start is None or gang.start < without.start


def test_the_held_nodes_take_no_other_job_and_the_reason_says_so():
    snapshot = replace(cluster(PATIENCE), now=PATIENCE + 20, jobs=(
        job("gang", "q", 8, replicas=2, created=10), job("small", "q", 1, created=PATIENCE)))
    # two of the four nodes are full; the other two have 7 GPUs free each
    from scheduling.core import RunningReplica, Slice
    running = [RunningReplica(f"busy-{n}-{g}", "worker", 0, f"h100-{n}", (g,), Slice("whole", 1000, 81920))
               for n in range(4) for g in range(8 if n < 2 else 1)]
    busy = tuple(job(r.job_id, "q", 1, created=0) for r in running)
    snapshot = replace(snapshot, jobs=snapshot.jobs + busy, running=tuple(running))
    decisions = run_cycle(snapshot)
    assert not [b for b in decisions.binds if b.job_id == "small"]
    # the small job's reason names the held nodes, not a pool without nodes
    small = decisions.pending_codes["small"]
    assert small.code == "several" and small.params["parts"][-1] == {
        "code": "backfill_held", "params": {"pools": ["h100"], "nodes": 2}}
    reason = decisions.pending_codes["gang"]
    assert reason.code == "several" and reason.params["parts"][0]["code"] == "backfill_reserved"
    assert reason.params["parts"][0]["params"] == {"nodes": 2, "gpus": 16, "free": 14}
    # before its patience ran out the small job backfills
    early = run_cycle(replace(snapshot, now=100))
    assert [b.job_id for b in early.binds] == ["small"]
    # and with reservations off it does too
    off = run_cycle(replace(snapshot, backfill_patience_s=None))
    assert [b.job_id for b in off.binds] == ["small"]


def test_a_gang_that_fits_now_holds_nothing_and_waits_its_turn():
    # a higher-priority job submitted later comes first; the gang then no longer fits and holds nodes
    snapshot = replace(cluster(PATIENCE), now=PATIENCE + 20, jobs=(
        job("urgent", "q", 1, created=PATIENCE + 10, priority=1), job("gang", "q", 8, replicas=4, created=10)))
    decisions = run_cycle(snapshot)
    assert sorted({b.job_id for b in decisions.binds}) == ["urgent"]
    assert "backfill_reserved" not in str(decisions.pending_codes["gang"])
    alone = run_cycle(replace(snapshot, jobs=snapshot.jobs[1:]))
    assert {b.job_id for b in alone.binds} == {"gang"}


def test_thousands_of_waiting_jobs_are_asked_once_per_kind(monkeypatch):
    """Jobs that waited past the patience and fit now: each kind is tried once, not each job (the database
    cycle's 29,000 waiting jobs once cost 25,000 trial placements a cycle)."""
    import importlib

    reserve = importlib.import_module("scheduling.core.actions.reserve")
    tried = []
    would_place = reserve.would_place
    monkeypatch.setattr(reserve, "would_place", lambda s, state: tried.append(state.job.id) or would_place(s, state))
    kinds = [1, 2, 4]
    waiting = tuple(job(f"w{i:04d}", "q", kinds[i % 3], created=float(i)) for i in range(1500))
    snapshot = replace(cluster(PATIENCE), now=PATIENCE + 2000, jobs=waiting)
    decisions = run_cycle(snapshot)
    assert sum(len(b.gpus) for b in decisions.binds) == 32   # every GPU taken, by the first jobs in order
    assert len(tried) == 3                                  # one trial per kind of job
    assert run_cycle(snapshot, exact=True).binds == decisions.binds
    assert len(tried) > 1000                                # the exact session asks every job
