"""Deadline jobs in the core, as a table of scenarios: before its latest start a deadline job takes idle GPUs
and gives them back to strict work like best-effort work; from its latest start on it is strict, reclaims and
preempts, and is no victim; one still pending then is reported late; a cluster settles (no flapping)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from scheduling.core import Pool, Queue, RunningReplica, Slice, Snapshot, run_cycle
from scheduling.core.builders import job, nodes
from scheduling.core.cycle import CycleMemo, apply_decisions
from scheduling.core.deadline import IDLE, STRICT, as_phased, phase, phased

H100 = (Pool("h100"),)
LATEST = 1_796_091_000.0                 # 2026-12-01 02:10 UTC
BEFORE, AT = LATEST - 3600, LATEST


def on(job_id: str, node: str, *gpus: int) -> RunningReplica:
    return RunningReplica(job_id, "worker", 0, node, gpus, Slice("whole", 1000, 81920))


def cluster(queues, jobs, running=(), *, now=BEFORE, gpus=4) -> Snapshot:
    return Snapshot(pools=H100, nodes=nodes("h100", 1, gpus), queues=tuple(queues), jobs=tuple(jobs),
                    running=tuple(running), now=now)


@dataclass
class Row:
    name: str
    snapshot: Snapshot
    binds: set[str] = field(default_factory=set)               # jobs bound
    evicts: dict[str, tuple[str, str]] = field(default_factory=dict)   # job -> (reason, rule)
    pending: dict[str, str] = field(default_factory=dict)      # job -> its reason's first code
    late: tuple[str, ...] = ()


TEAMS = (Queue("a", deserved_milli=4000), Queue("b", deserved_milli=0))
ONE = (Queue("q", deserved_milli=4000),)
D = dict(queue="b", gpus=4, created=1, latest_start=LATEST)

ROWS = [
    Row("before its latest start it takes idle GPUs",
        cluster(TEAMS, [job("d", **D)]), binds={"d"}),
    Row("before its latest start strict work within its quota reclaims it",
        cluster(TEAMS, [job("d", **D), job("s", "a", gpus=2, created=2, preemptible=False)], [on("d", "h100-0", 0, 1, 2, 3)]),
        binds={"s"}, evicts={"d": ("reclaim", "fair-share")}, pending={"d": "several"}),
    Row("before its latest start a strict job of its priority in its queue preempts it",
        cluster(ONE, [job("d", "q", gpus=4, created=1, latest_start=LATEST),
                      job("s", "q", gpus=2, created=2, preemptible=False)], [on("d", "h100-0", 0, 1, 2, 3)]),
        binds={"s"}, evicts={"d": ("preempt", "priority")}, pending={"d": "several"}),
    Row("before its latest start it waits behind an older strict job of its queue, and says until when",
        cluster(ONE, [job("d", "q", gpus=4, created=1, latest_start=LATEST), job("s", "q", gpus=4, created=2,
                                                                                 preemptible=False)]),
        binds={"s"}, pending={"d": "several"}),
    Row("at its latest start it reclaims from best-effort work of another queue",
        cluster((Queue("a", deserved_milli=0), Queue("b", deserved_milli=4000)),
                [job("be", "a", gpus=4, created=0), job("d", **D)], [on("be", "h100-0", 0, 1, 2, 3)], now=AT),
        binds={"d"}, evicts={"be": ("reclaim", "fair-share")}, pending={"be": "evicted_requeued"}),
    Row("at its latest start it preempts a lower priority in its queue",
        cluster(ONE, [job("low", "q", gpus=4, created=0, priority=-1),
                      job("d", "q", gpus=4, created=1, latest_start=LATEST)], [on("low", "h100-0", 0, 1, 2, 3)], now=AT),
        binds={"d"}, evicts={"low": ("preempt", "priority")}, pending={"low": "evicted_requeued"}),
    Row("before its latest start it ranks below the jobs of its own priority: no preemption",
        cluster(ONE, [job("low", "q", gpus=4, created=0, priority=-1),
                      job("d", "q", gpus=4, created=1, latest_start=LATEST, priority=-1)],
                [on("low", "h100-0", 0, 1, 2, 3)]),
        pending={"d": "several"}),
    Row("from its latest start it is no victim: strict work waits",
        cluster(TEAMS, [job("d", **D), job("s", "a", gpus=2, created=2, preemptible=False)],
                [on("d", "h100-0", 0, 1, 2, 3)], now=AT),
        pending={"s": "gpus_short"}),
    Row("from its latest start, still pending with no room: late, with a strict job's reason",
        cluster(TEAMS, [job("s", "a", gpus=4, created=0, preemptible=False), job("d", **D)],
                [on("s", "h100-0", 0, 1, 2, 3)], now=AT + 60),
        pending={"d": "queue_non_preemptible_quota"}, late=("d",)),
    Row("from its latest start, within its quota and no room: late, with the usual reason",
        cluster((Queue("a", deserved_milli=4000), Queue("b", deserved_milli=4000)),
                [job("s", "a", gpus=4, created=0, preemptible=False), job("d", **D)],
                [on("s", "h100-0", 0, 1, 2, 3)], now=AT + 60),
        pending={"d": "several"}, late=("d",)),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_deadline_scenario(row: Row):
    d = run_cycle(row.snapshot)
    assert {b.job_id for b in d.binds} == row.binds
    assert {e.job_id: (e.reason, e.rule) for e in d.evicts} == row.evicts
    assert {j: r.code for j, r in d.pending_codes.items()} == row.pending
    assert d.late == row.late
    waiting = [j for j in row.snapshot.jobs if j.latest_start is not None and row.snapshot.now < j.latest_start]
    for j in waiting:
        if j.id in d.pending_codes and not row.evicts.get(j.id):
            first = d.pending_codes[j.id].params["parts"][0]
            assert first == {"code": "deadline_waits_for_idle",
                             "params": {"until": "2026-12-01 02:10 UTC", "latest_start": LATEST}}
    # the same decisions with a memo (the Celery worker's) and in the exact walk
    assert run_cycle(row.snapshot, CycleMemo()) == d
    assert run_cycle(row.snapshot, exact=True) == d


def test_evicted_before_its_latest_start_says_so_and_waits_for_idle_gpus():
    d = run_cycle(ROWS[1].snapshot)
    assert "2026-12-01 02:10 UTC" in d.pending["d"]
    assert [p["code"] for p in d.pending_codes["d"].params["parts"]] == ["deadline_waits_for_idle",
                                                                          "evicted_requeued"]


def test_phase_and_phased_jobs():
    dl = job("d", "q", latest_start=LATEST, preemptible=False, priority=3)
    plain = job("p", "q")
    assert phase(plain, AT) is None and as_phased(plain, AT) is plain
    assert phase(dl, BEFORE) == IDLE and phase(dl, AT) == STRICT
    idle = as_phased(dl, BEFORE)
    assert idle.preemptible and idle.priority == 2.5 and idle.latest_start == LATEST
    strict = as_phased(replace(dl, preemptible=True), AT)
    assert not strict.preemptible and strict.priority == 3
    snap = cluster(ONE, [plain, dl])
    assert phased(replace(snap, jobs=(plain,))).jobs == (plain,)
    assert phased(snap).jobs[1] == idle


def test_the_memo_keeps_phased_jobs_while_the_phase_holds():
    dl = job("d", "q", latest_start=LATEST, gpus=8)
    snap = cluster(ONE, [dl])
    memo = CycleMemo()
    run_cycle(snap, memo)
    first = memo.phases.kept[id(dl)][2]
    run_cycle(replace(snap, now=BEFORE + 10), memo)
    assert memo.phases.kept[id(dl)][2] is first
    d = run_cycle(replace(snap, now=AT), memo)
    assert memo.phases.kept[id(dl)][2] is not first
    assert d.late == ("d",)          # the phase turned: the memo's last decisions were not reused


def test_deadline_jobs_over_time_use_idle_gpus_give_way_then_take_their_place_without_flapping():
    """Cycles over time on 4 GPUs of one queue: two deadline jobs with slack run on idle GPUs, a third waits
    for idle GPUs; strict work preempts one of the first two; at the third's latest start it preempts the
    other and runs; when the first two reach theirs, the queue's quota is held by strict work: they are
    reported late. Quiet cycles between change nothing."""
    slack = LATEST + 7200
    snap = cluster(ONE, [job("d1", "q", gpus=2, created=0, latest_start=slack),
                         job("d2", "q", gpus=2, created=1, latest_start=slack)], now=BEFORE)
    memo = CycleMemo()
    events: list[tuple[float, str, str]] = []
    late: dict[float, tuple[str, ...]] = {}

    def step(snap: Snapshot, now: float, *arrive) -> Snapshot:
        snap = replace(snap, now=now, jobs=snap.jobs + arrive)
        d = run_cycle(snap, memo)
        assert d == run_cycle(snap, exact=True)
        events.extend((now, "bind", b.job_id) for b in d.binds)
        events.extend((now, e.reason, e.job_id) for e in d.evicts)
        late[now] = d.late
        return apply_decisions(snap, d)

    def since(t: float) -> list[tuple[str, str]]:
        return sorted((what, j) for at, what, j in events if at >= t)

    snap = step(snap, BEFORE)
    snap = step(snap, BEFORE + 5, job("d3", "q", gpus=2, created=2, latest_start=LATEST))
    assert since(BEFORE) == [("bind", "d1"), ("bind", "d2")]
    assert run_cycle(snap).pending_codes["d3"].params["parts"][0]["code"] == "deadline_waits_for_idle"
    snap = step(snap, BEFORE + 10, job("s", "q", gpus=2, created=3, preemptible=False))
    assert since(BEFORE + 10) == [("bind", "s"), ("preempt", "d2")]
    for t in range(20, 3600, 60):
        snap = step(snap, BEFORE + t)
    assert since(BEFORE + 20) == []
    snap = step(snap, AT)
    assert since(AT) == [("bind", "d3"), ("preempt", "d1")]
    assert late[AT] == ()
    for t in range(10, 7200, 60):
        snap = step(snap, AT + t)
    assert since(AT + 10) == []
    snap = step(snap, slack)
    assert since(slack) == [] and late[slack] == ("d1", "d2")
    assert {r.job_id for r in snap.running} == {"s", "d3"}
    evicted = [j for _, what, j in events if what != "bind"]
    assert len(evicted) == len(set(evicted))
