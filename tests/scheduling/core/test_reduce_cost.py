"""ReduceCost runs off-peak, on spot pools, or on idle capacity nobody wants."""

from dataclasses import replace

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes, placed, with_jobs


def busy_onprem(*extra) -> Snapshot:
    """2 free GPUs on-prem, wanted by a waiting 3-GPU gang of another team."""
    return Snapshot(
        pools=(Pool("onprem"),),
        nodes=nodes("onprem", 1, 2),
        queues=(Queue("research"), Queue("cheap")),
        jobs=(job("big", "research", replicas=3), job("saver", "cheap", reduce_cost=True, created=1), *extra),
        off_peak=False,
        next_off_peak="00:00",
    )


def test_reduce_cost_waits_outside_off_peak_and_starts_inside():
    d = run_cycle(busy_onprem())
    assert d.binds == ()
    assert d.pending["saver"].startswith("ReduceCost job: runs only off-peak (waits until 00:00)")
    assert "gang needs 3 GPUs" in d.pending["big"]

    night = replace(busy_onprem(), off_peak=True, next_off_peak="")
    d = run_cycle(night)
    assert [b.job_id for b in d.binds] == ["saver"]
    assert "saver" not in d.pending


def test_a_job_with_its_own_window_follows_it():
    """A workspace billed in another currency has its price table's off-peak window (谷电 23:00-07:00
    Shanghai, say): its ReduceCost jobs follow that window, the others the platform's."""
    own_open = replace(busy_onprem(job("saver-cny", "cheap", reduce_cost=True, created=2)),
                       job_off_peak=(("saver-cny", True, ""),))
    d = run_cycle(own_open)
    assert [b.job_id for b in d.binds] == ["saver-cny"]
    assert d.pending["saver"].startswith("ReduceCost job: runs only off-peak (waits until 00:00)")

    own_closed = replace(busy_onprem(job("saver-cny", "cheap", reduce_cost=True, created=2)), off_peak=True,
                         next_off_peak="", job_off_peak=(("saver-cny", False, "23:00 CST"),))
    d = run_cycle(own_closed)
    assert [b.job_id for b in d.binds] == ["saver"]
    assert d.pending["saver-cny"].startswith("ReduceCost job: runs only off-peak (waits until 23:00 CST)")


def test_reduce_cost_runs_at_once_on_a_spot_pool():
    snap = busy_onprem()
    snap = replace(snap, pools=snap.pools + (Pool("spot", spot=True),), nodes=snap.nodes + nodes("spot", 1, 1))
    d = run_cycle(snap)
    assert [(b.job_id, b.node) for b in d.binds] == [("saver", "spot-0")]


def test_reduce_cost_uses_idle_capacity_nobody_asks_for_and_yields_it():
    idle = Snapshot(pools=(Pool("onprem"),), nodes=nodes("onprem", 1, 2), queues=(Queue("research"), Queue("cheap")),
                    jobs=(job("saver", "cheap", reduce_cost=True),), next_off_peak="00:00")
    snap, [d] = cycles(idle, 1)
    assert [b.job_id for b in d.binds] == ["saver"]
    # a normal job arrives and needs both GPUs: the ReduceCost job is evicted first
    snap = with_jobs(snap, job("train", "research", gpus=2, created=5))
    snap, [d] = cycles(snap, 1)
    assert [(e.job_id, e.reason) for e in d.evicts] == [("saver", "preempt")]
    assert [b.job_id for b in d.binds] == ["train"]
    assert placed(snap) == {"train": 1}
    _, quiet = cycles(snap, 3)
    assert all(x.changes == 0 for x in quiet)
