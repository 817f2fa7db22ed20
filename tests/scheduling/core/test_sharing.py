"""Fractions and MIG, plus time-slicing and vendor/model constraints."""

import pytest

from scheduling.core import Pool, Queue, Snapshot, run_cycle
from scheduling.core.builders import cycles, job, nodes

V100 = 16384


def fractions_cluster(*jobs) -> Snapshot:
    return Snapshot(pools=(Pool("v100", gpu_memory_mib=V100, placement="binpack"),),
                    nodes=nodes("v100", 1, 2), queues=(Queue("q"),), jobs=jobs)


def test_fractions_share_a_gpu_and_one_that_does_not_fit_in_memory_goes_elsewhere():
    d = run_cycle(fractions_cluster(
        job("frac05", "q", mode="fraction", milli=500, gpu_mem=8192, created=1),
        job("frac03", "q", mode="fraction", milli=300, gpu_mem=4915, created=2),
        # 0.2 GPU would fit in compute on GPU 0, but 6000 MiB does not fit in the 3277 MiB left
        job("frac02", "q", mode="fraction", milli=200, gpu_mem=6000, created=3),
    ))
    where = {b.job_id: (b.node, b.gpus, b.slice.kind, b.slice.gpu_milli, b.slice.gpu_mem_mib) for b in d.binds}
    assert where == {
        "frac05": ("v100-0", (0,), "fraction", 500, 8192),
        "frac03": ("v100-0", (0,), "fraction", 300, 4915),
        "frac02": ("v100-0", (1,), "fraction", 200, 6000),
    }


def test_fraction_that_fits_nowhere_says_why():
    d = run_cycle(fractions_cluster(
        job("big1", "q", mode="fraction", milli=600, gpu_mem=10000, created=1),
        job("big2", "q", mode="fraction", milli=600, gpu_mem=10000, created=2),
        job("big3", "q", mode="fraction", milli=600, gpu_mem=10000, created=3),
    ))
    assert sorted(b.job_id for b in d.binds) == ["big1", "big2"]
    assert d.pending == {"big3": "needs 1 x 0.6 GPU with 10000 MiB, only 0 GPUs in pool v100 have that free"}


A100_40 = Pool("a100", gpu_model="A100-SXM4-40GB", gpu_memory_mib=40960, sharing=frozenset({"mig"}),
               mig_layout=("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"))
H100_80 = Pool("h100mig", gpu_model="H100-80GB", gpu_memory_mib=81920, sharing=frozenset({"mig"}),
               mig_layout=("3g.40gb", "3g.40gb", "1g.10gb"))


@pytest.mark.parametrize(
    "pool, asks, placed_on, pending",
    [
        # each request takes a free instance of its profile (instance = index in the layout)
        (A100_40, ["3g.20gb", "1g.5gb", "1g.5gb", "2g.10gb"], {"j0": 0, "j1": 2, "j2": 3, "j3": 1}, {}),
        # none left: pending with the reason
        (A100_40, ["3g.20gb", "3g.20gb"], {"j0": 0}, {"j1": "no free MIG instance 3g.20gb in pool a100"}),
        (H100_80, ["3g.40gb", "3g.40gb", "3g.40gb", "1g.10gb"], {"j0": 0, "j1": 1, "j3": 2},
         {"j2": "no free MIG instance 3g.40gb in pool h100mig"}),
    ],
)
def test_mig_requests_take_free_instances(pool, asks, placed_on, pending):
    snap = Snapshot(pools=(pool,), nodes=nodes(pool.name, 1, 1), queues=(Queue("q"),),
                    jobs=tuple(job(f"j{i}", "q", mode="mig", mig=p, created=i) for i, p in enumerate(asks)))
    d = run_cycle(snap)
    assert {b.job_id: b.slice.mig_instance for b in d.binds} == placed_on
    assert all(b.slice.kind == "mig" and b.slice.mig_profile == pool.mig_layout[b.slice.mig_instance]
               for b in d.binds)
    assert d.pending == pending
    # applied and run again: nothing moves
    _, history = cycles(snap, 3)
    assert all(x.changes == 0 for x in history[1:])


def test_mig_profile_not_in_any_layout():
    snap = Snapshot(pools=(A100_40,), nodes=nodes("a100", 1, 1), queues=(Queue("q"),),
                    jobs=(job("j", "q", mode="mig", mig="7g.80gb"),))
    assert run_cycle(snap).pending["j"] == ("role worker: MIG profile 7g.80gb is offered by no pool "
                                            "(offered: 1g.5gb, 2g.10gb, 3g.20gb)")


def test_time_slicing_oversubscribes_without_memory_isolation():
    pool = Pool("ts", sharing=frozenset({"timeslice"}), timeslice_replicas=3)
    snap = Snapshot(pools=(pool,), nodes=nodes("ts", 1, 1), queues=(Queue("q"),),
                    jobs=tuple(job(f"t{i}", "q", mode="timeslice", gpu_mem=80000, created=i) for i in range(4)))
    d = run_cycle(snap)
    assert sorted((b.job_id, b.slice.timeslice_slot) for b in d.binds) == [("t0", 0), ("t1", 1), ("t2", 2)]
    assert d.pending == {"t3": "needs 1 time-slice slot, only 0 free in pool ts"}


def test_vendor_and_model_constraints():
    pools = (Pool("mi300", vendor="amd", gpu_model="MI300X"), Pool("h100", gpu_model="H100"))
    snap = Snapshot(pools=pools, nodes=nodes("mi300", 1, 1) + nodes("h100", 1, 1), queues=(Queue("q"),),
                    jobs=(job("nv", "q", gpu_model="H100", created=0),
                          job("amd-ok", "q", vendor="any", created=1),
                          job("nv-only", "q", created=2)))
    d = run_cycle(snap)
    assert {b.job_id: b.node for b in d.binds} == {"nv": "h100-0", "amd-ok": "mi300-0"}
    assert "only 0 free in pool h100" in d.pending["nv-only"]
