"""Determinism and stability on a random-ish mixed cluster, with invariants checked every cycle."""

import random
from dataclasses import replace

import pytest

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import job, nodes
from scheduling.core.cycle import apply_decisions
from scheduling.core.model import EVICT_REASONS


def random_cluster(seed: int) -> Snapshot:
    rng = random.Random(seed)
    pools = (
        Pool("h100", gpu_model="H100", placement="binpack"),
        Pool("a100", gpu_model="A100", gpu_memory_mib=40960, placement="default"),
        Pool("spot", gpu_model="L4", gpu_memory_mib=24576, placement="spread", spot=True),
        Pool("mig", gpu_model="A100-80", sharing=frozenset({"mig"}), mig_layout=("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")),
        Pool("ts", gpu_model="T4", gpu_memory_mib=16384, sharing=frozenset({"timeslice"}), timeslice_replicas=4),
    )
    cluster_nodes = (nodes("h100", 3, 8) + nodes("a100", 4, 4) + nodes("spot", 2, 2) + nodes("mig", 2, 2)
                     + nodes("ts", 1, 2))
    queues = (
        Queue("org-x", deserved_milli=12000, over_quota_weight=2),
        Queue("x-train", parent="org-x", deserved_milli=8000, limit_milli=30000),
        Queue("x-infer", parent="org-x", deserved_milli=4000),
        Queue("org-y", deserved_milli=8000),
        Queue("y-all", parent="org-y", deserved_milli=8000, over_quota_weight=1),
        Queue("scratch", over_quota_weight=0.5),
    )
    leaves = ["x-train", "x-infer", "y-all", "scratch"]
    jobs = []
    for i in range(60):
        kind = rng.choice(["whole", "whole", "gang", "elastic", "fraction", "mig", "ts", "rc"])
        q = rng.choice(leaves)
        common = dict(priority=rng.choice([0, 0, 5, 10]), created=float(i), preemptible=rng.random() < 0.8)
        if kind == "whole":
            jobs.append(job(f"j{i}", q, gpus=rng.choice([1, 1, 2, 4]), **common))
        elif kind == "gang":
            jobs.append(job(f"j{i}", q, replicas=rng.choice([2, 3, 4]), gpus=rng.choice([1, 2]), **common))
        elif kind == "elastic":
            jobs.append(job(f"j{i}", q, replicas=rng.choice([3, 4]), min_replicas=1, **common))
        elif kind == "fraction":
            jobs.append(job(f"j{i}", q, mode="fraction", milli=rng.choice([200, 300, 500]),
                            gpu_mem=rng.choice([4096, 8192]), **common))
        elif kind == "mig":
            jobs.append(job(f"j{i}", q, mode="mig", mig=rng.choice(["3g.40gb", "1g.10gb", "2g.20gb"]), **common))
        elif kind == "ts":
            jobs.append(job(f"j{i}", q, mode="timeslice", **common))
        else:
            jobs.append(job(f"j{i}", q, reduce_cost=True, **common))
    return Snapshot(pools=pools, nodes=cluster_nodes, queues=queues, jobs=tuple(jobs), next_off_peak="23:00")


def check_cycle(snap: Snapshot, decisions) -> None:
    jobs = {j.id: j for j in snap.jobs}
    for e in decisions.evicts:
        assert e.reason in EVICT_REASONS
        # a non-preemptible job loses only elastic replicas above its minimum (or a lost node's)
        assert jobs[e.job_id].preemptible or e.reason in ("node-lost", "shrink"), f"non-preemptible {e.job_id} evicted"
    running = {}
    after = apply_decisions(snap, decisions)
    for r in after.running:
        running[r.job_id] = running.get(r.job_id, 0) + 1
    for j in snap.jobs:
        have = running.get(j.id, 0)
        minimum = sum(r.min_replicas for r in j.roles)
        assert have == 0 or have >= minimum, f"gang {j.id} runs {have} of its minimum {minimum}"
        if have < minimum:
            assert decisions.pending.get(j.id), f"pending job {j.id} has no reason"
        else:
            assert j.id not in decisions.pending


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_converges_and_stays_quiet(seed):
    snap = random_cluster(seed)
    changes = []
    for _ in range(8):
        d = run_cycle(snap)
        check_cycle(snap, d)
        changes.append(d.changes)
        snap = apply_decisions(snap, d)   # rebuilding the session validates no GPU is over-committed
    assert changes[0] > 0
    assert changes[-3:] == [0, 0, 0], f"still changing: {changes}"

    # jobs finish, new ones come, night falls: it settles again
    rng = random.Random(seed)
    finished = set(rng.sample([j.id for j in snap.jobs], 15))
    snap = replace(snap, jobs=tuple(j for j in snap.jobs if j.id not in finished),
                   running=tuple(r for r in snap.running if r.job_id not in finished), off_peak=True)
    changes = []
    for _ in range(8):
        d = run_cycle(snap)
        check_cycle(snap, d)
        changes.append(d.changes)
        snap = apply_decisions(snap, d)
    assert changes[-3:] == [0, 0, 0], f"still changing: {changes}"


def test_same_snapshot_same_decisions():
    snap = random_cluster(7)
    first = run_cycle(snap)
    assert first.changes > 0
    assert run_cycle(snap) == first
    # the order in which the snapshot lists jobs does not matter either
    shuffled = list(snap.jobs)
    random.Random(0).shuffle(shuffled)
    assert run_cycle(replace(snap, jobs=tuple(shuffled))) == first
    # nor on a cluster already running things
    later = apply_decisions(snap, first)
    assert run_cycle(later) == run_cycle(replace(later, running=tuple(reversed(later.running))))
