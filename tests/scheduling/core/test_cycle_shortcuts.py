"""The cycle's shortcuts never change a decision.

A walk stops once no job left could change anything (`actions.walk.Quiet`), plans are shared by jobs with
the same roles and kept from cycle to cycle (`CycleMemo`), an unchanged snapshot gives the last
decisions again, and the service keeps its snapshot and changes it (`LiveSnapshot`). Over random
clusters (whole, fractional, MIG and time-sliced pools, queue trees with limits and priorities,
gangs, elastic, ReduceCost and non-preemptible jobs, roles shared by many jobs) run for several
cycles with work arriving and ending, every cycle decides exactly what visiting every job decides
(`exact=True`): the same evictions, binds and pending reasons.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from bench.cycle import Churn, build_snapshot, core_job, make_rows, place_running
from scheduling.core import Job, Node, Pool, Queue, Request, Role, Snapshot
from scheduling.core.actions.walk import Quiet
from scheduling.core.cycle import CycleMemo, apply_decisions, run_cycle, without_jobs
from scheduling.core.live import LiveSnapshot
from scheduling.core.model import Decisions, Evict


def same(a: Decisions, b: Decisions) -> bool:
    return (a.evicts, a.binds, a.pending, a.pending_codes) == (b.evicts, b.binds, b.pending, b.pending_codes)


class Cluster:
    """A random cluster and random work for it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        pools = [Pool("h100", gpu_model="H100", placement=rng.choice(["default", "binpack", "spread", "frag"])),
                 Pool("a100", gpu_model="A100", gpu_memory_mib=40960, placement=rng.choice(["default", "binpack"]),
                      spot=rng.random() < 0.5)]
        if rng.random() < 0.4:
            pools.append(Pool("mig", gpu_model="A100", sharing=frozenset({"mig"}),
                              mig_layout=("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb")))
        if rng.random() < 0.4:
            pools.append(Pool("ts", gpu_model="T4", sharing=frozenset({"timeslice"}), gpu_memory_mib=16384))
        self.pool_names = [p.name for p in pools]
        nodes = [Node.with_gpus(f"n{i}", rng.choice(pools).name, rng.choice([1, 2, 4, 8]),
                                cpu_milli=rng.choice([32000, 64000]), cordoned=rng.random() < 0.05)
                 for i in range(rng.randint(3, 30))]
        queues, self.leaves = [], []
        for d in range(rng.randint(1, 3)):
            queues.append(Queue(f"d{d}", deserved_milli=rng.choice([0, 4000, 8000, 16000]),
                                over_quota_weight=rng.choice([0.5, 1, 2]), priority=rng.choice([0, 0, 1]),
                                limit_milli=rng.choice([None, None, 30000])))
            for t in range(rng.randint(1, 4)):
                self.leaves.append(f"d{d}t{t}")
                queues.append(Queue(f"d{d}t{t}", parent=f"d{d}", deserved_milli=rng.choice([0, 1000, 2000, 4000]),
                                    over_quota_weight=rng.choice([0, 1, 2]), priority=rng.choice([0, 0, 1]),
                                    limit_milli=rng.choice([None, None, None, 6000])))
        # backfill reservations for some: every job waited longer than the patience
        self.snapshot = Snapshot(pools=tuple(pools), nodes=tuple(nodes), queues=tuple(queues), jobs=(),
                                 off_peak=rng.random() < 0.3, next_off_peak="00:00", now=1e6,
                                 backfill_patience_s=rng.choice([None, None, 60.0]))
        self.shared: list[tuple[Role, ...]] = []
        self.count = 0

    def roles(self) -> tuple[Role, ...]:
        rng = self.rng
        if self.shared and rng.random() < 0.5:
            return rng.choice(self.shared)   # many jobs share one tuple of roles, as the database snapshot's do
        kind, pool = rng.random(), rng.choice(["", "", "", *self.pool_names])
        if kind < 0.4:
            request = Request(num_gpus=rng.choice([1, 1, 2, 4, 8]), cpu_milli=rng.choice([0, 4000]), pool=pool)
        elif kind < 0.6:
            request = Request(mode="fraction", gpu_milli=rng.choice([100, 250, 500]),
                              gpu_mem_mib=rng.choice([4096, 8192, 20480]), pool=pool)
        elif kind < 0.7:
            request = Request(mode="mig", mig_profile=rng.choice(["1g.5gb", "2g.10gb", "3g.20gb"]))
        elif kind < 0.8:
            request = Request(mode="timeslice", num_gpus=rng.choice([1, 2]))
        elif kind < 0.85:
            request = Request(num_gpus=1, gpu_model="nowhere")
        else:
            request = Request(num_gpus=rng.choice([1, 2]), pool=pool)
        n = rng.choice([1, 1, 1, 2, 3, 4])
        roles = [Role("worker", request, rng.choice([n, n, 1]) if n > 1 else 1, n)]
        if rng.random() < 0.1:
            roles.append(Role("ps", Request(num_gpus=1), 1, rng.choice([1, 2])))
        self.shared.append(tuple(roles))
        return self.shared[-1]

    def jobs(self, count: int) -> tuple[Job, ...]:
        rng, out = self.rng, []
        for _ in range(count):
            self.count += 1
            preemptible = rng.random() < 0.85
            out.append(Job(f"j{self.count}", rng.choice(self.leaves), self.roles(), priority=rng.choice([0, 0, 50, 100]),
                           preemptible=preemptible, reduce_cost=preemptible and rng.random() < 0.1,
                           created=float(self.count)))
        return tuple(out)


@pytest.mark.parametrize("seed", range(60))
def test_every_cycle_decides_as_visiting_every_job(seed):
    rng = random.Random(seed)
    cluster = Cluster(rng)
    snap = replace(cluster.snapshot, jobs=cluster.jobs(rng.randint(5, 120)))
    live, memo = LiveSnapshot(snap), CycleMemo()
    for _ in range(6):
        kept = live.snapshot()
        assert kept == snap   # the service's kept snapshot is the one built whole
        decisions = run_cycle(kept, memo)
        assert same(decisions, run_cycle(snap, exact=True))
        snap = apply_decisions(snap, decisions)
        live.apply(decisions)
        running = sorted({r.job_id for r in snap.running})
        gone = rng.sample(running, min(len(running), rng.randint(0, 4)))
        arrived = cluster.jobs(rng.randint(0, 8))
        off_peak = snap.off_peak if rng.random() < 0.8 else not snap.off_peak
        snap = replace(without_jobs(snap, *gone), off_peak=off_peak)
        snap = replace(snap, jobs=snap.jobs + arrived)
        for job_id in gone:
            live.drop_job(job_id)
        for job in arrived:
            live.put_job(job)
        live.set_cluster(off_peak=off_peak)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("patience", [None, 60.0])
def test_a_busy_cluster_stops_its_walks_early_and_decides_the_same(seed, patience, monkeypatch):
    """The benchmark's cluster, small: thousands of pending jobs, most of which cannot be placed; with
    backfill reservations, thousands of jobs that waited past the patience, asked by kind."""
    stopped = []
    finish = Quiet.finish
    monkeypatch.setattr(Quiet, "finish", lambda self: stopped.append(len(self.where)) or finish(self))
    rows = make_rows(nodes=30, gpus_per_node=8, pending=2500, running=3000, queues=20, seed=seed)
    place_running(rows)
    snap = replace(build_snapshot(rows, with_pending=True), backfill_patience_s=patience, now=1e7)
    live, memo, churn, roles = LiveSnapshot(snap), CycleMemo(), Churn(rows, 25, seed), {}
    for _ in range(4):
        decisions = run_cycle(snap, memo)
        assert same(decisions, run_cycle(snap, exact=True))
        new, gone = churn.step(decisions)
        live.apply(decisions)
        for job_id in gone:
            live.drop_job(job_id)
        for row in new:
            live.put_job(core_job(row, roles))
        snap = live.snapshot()
        whole = build_snapshot(churn.rows(rows), with_pending=False)
        assert sorted(snap.jobs, key=lambda j: j.id) == sorted(whole.jobs, key=lambda j: j.id)
        assert snap.running == whole.running
    assert stopped and max(stopped) > 500   # walks did stop with hundreds of jobs left unvisited


def test_an_unchanged_snapshot_gives_the_last_decisions_again():
    rng = random.Random(3)
    cluster = Cluster(rng)
    snap = replace(cluster.snapshot, jobs=cluster.jobs(60))
    memo = CycleMemo()
    first = run_cycle(snap, memo)
    assert run_cycle(replace(snap, now=snap.now + 30), memo) is first   # the cycle does not read the time
    more = replace(snap, jobs=snap.jobs + cluster.jobs(1))
    again = run_cycle(more, memo)
    assert again is not first and same(again, run_cycle(more, exact=True))


def test_the_kept_snapshot_follows_puts_drops_and_decisions():
    rng = random.Random(5)
    cluster = Cluster(rng)
    snap = replace(cluster.snapshot, jobs=cluster.jobs(40))
    live = LiveSnapshot(snap)
    for _ in range(5):
        decisions = run_cycle(snap)
        snap = apply_decisions(snap, decisions)
        live.apply(decisions)
        job = rng.choice(snap.jobs)
        moved = replace(job, priority=job.priority + 1)   # a changed job keeps its place
        snap = replace(snap, jobs=tuple(moved if j.id == job.id else j for j in snap.jobs))
        live.put_job(moved)
        assert live.snapshot() == snap
    with pytest.raises(ValueError, match="not running"):
        live.apply(Decisions(evicts=(Evict("no-such-job", "worker", 0, "n0", "reclaim"),)))
