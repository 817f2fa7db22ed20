"""Each GPU sharing mode of a stored slice answers, in one place, what metrics, labels, billing and the
console's free-GPU tally read from it; an unknown or missing kind is whole."""

from __future__ import annotations

from decimal import Decimal

import pytest

from billing.metering.costs import replica_allocation
from scheduling.metrics import slice_gpus
from scheduling.models import NodePool, Replica
from scheduling.sharing import WHOLE_GPU_MEM_MIB, GpuHolds, mode_of

POOL = NodePool(name="a100", vendor="nvidia", gpu_model="A100-80GB", gpu_memory_mib=81920, timeslice_replicas=4)

# slice, GPUs it is placed on, its mode, GPUs it holds on each, label, charged share, one GPU's tally
CASES = [
    ({"kind": "whole"}, 2, "whole", 1.0, "2 GPUs", Decimal(2), GpuHolds(milli=1000, mem_mib=WHOLE_GPU_MEM_MIB)),
    ({"kind": "whole"}, 1, "whole", 1.0, "1 GPU", Decimal(1), GpuHolds(milli=1000, mem_mib=WHOLE_GPU_MEM_MIB)),
    ({"kind": "fraction", "gpu_milli": 250, "gpu_mem_mib": 40960}, 1, "fraction", 0.25, "0.25 GPU + 40 GiB",
     Decimal("0.5"), GpuHolds(milli=250, mem_mib=40960)),
    ({"kind": "fraction", "gpu_milli": 750, "gpu_mem_mib": 0}, 1, "fraction", 0.75, "0.75 GPU",
     Decimal("0.75"), GpuHolds(milli=750)),
    ({"kind": "mig", "mig_profile": "3g.40gb"}, 1, "mig", 0.428, "MIG 3g.40gb", Decimal(3) / 7,
     GpuHolds(mig=["3g.40gb"])),
    ({"kind": "timeslice", "timeslice_slot": 1}, 2, "timeslice", 0.25, "time-slice slot 1 on 2 GPUs",
     Decimal("0.5"), GpuHolds(slots=1)),
    ({"kind": "timeslice", "timeslice_slot": 3}, 1, "timeslice", 0.25, "time-slice slot 3",
     Decimal("0.25"), GpuHolds(slots=1)),
    # unknown or missing kinds are whole
    ({"kind": "bogus", "gpu_milli": 250}, 1, "whole", 1.0, "1 GPU", Decimal(1),
     GpuHolds(milli=1000, mem_mib=WHOLE_GPU_MEM_MIB)),
    ({}, 3, "whole", 1.0, "3 GPUs", Decimal(3), GpuHolds(milli=1000, mem_mib=WHOLE_GPU_MEM_MIB)),
    (None, 1, "whole", 1.0, "1 GPU", Decimal(1), GpuHolds(milli=1000, mem_mib=WHOLE_GPU_MEM_MIB)),
]


@pytest.mark.parametrize(("slice_", "count", "kind", "gpus", "label", "share", "tally"), CASES)
def test_each_mode_answers_for_its_slice(slice_, count, kind, gpus, label, share, tally):
    mode = mode_of(slice_)
    assert mode.kind == kind
    assert slice_gpus(slice_ or {}, POOL) == pytest.approx(gpus)
    replica = Replica(slice=slice_, gpu_indices=list(range(count)))
    assert replica.slice_label == label
    assert replica_allocation(replica, POOL, {}).share == share
    held = GpuHolds()
    mode.tally(slice_ or {}, held)
    assert held == tally


def test_a_replica_without_gpus_is_charged_nothing_and_reads_cpu_only():
    replica = Replica(slice={"kind": "whole"}, gpu_indices=[])
    assert replica_allocation(replica, POOL, {}).share == 0
    assert replica.slice_label == "CPU only"


def test_a_time_slice_without_its_pool_holds_a_whole_gpu():
    assert slice_gpus({"kind": "timeslice", "timeslice_slot": 0}, None) == 1.0


def test_replicas_on_one_gpu_add_up():
    held = GpuHolds()
    for piece in ({"kind": "fraction", "gpu_milli": 300, "gpu_mem_mib": 1024},
                  {"kind": "fraction", "gpu_milli": 200, "gpu_mem_mib": 2048},
                  {"kind": "timeslice"}, {"kind": "timeslice"}, {"kind": "mig", "mig_profile": "1g.10gb"}):
        mode_of(piece).tally(piece, held)
    assert held == GpuHolds(milli=500, mem_mib=3072, mig=["1g.10gb"], slots=2)


@pytest.mark.parametrize(("slice_", "count", "shown"), [
    ({"kind": "fraction", "gpu_milli": 500, "gpu_mem_mib": 0}, 1, "0.5 GPU"),
    ({"kind": "fraction", "gpu_milli": 500}, 1, "0.5 GPU"),
    ({"kind": "fraction", "gpu_milli": 250, "gpu_mem_mib": 10240}, 1, "0.25 GPU + 10 GiB"),
    ({"kind": "mig", "mig_profile": "3g.40gb"}, 1, "MIG 3g.40gb"),
    ({"kind": "timeslice", "timeslice_slot": 2}, 1, "time-slice slot 2"),
    ({"kind": "timeslice", "timeslice_slot": 1}, 2, "time-slice slot 1 on 2 GPUs"),
    ({"kind": "whole"}, 1, "1 GPU"), (None, 4, "4 GPUs"), ({}, 0, "CPU only"),
])
def test_a_slice_names_what_the_replica_holds(slice_, count, shown):
    assert Replica(slice=slice_, gpu_indices=list(range(count))).slice_label == shown
