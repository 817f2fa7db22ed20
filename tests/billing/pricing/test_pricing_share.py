"""Charged GPU share for each sharing mode."""

from decimal import Decimal

import pytest

from billing.pricing import (
    Allocation,
    Sharing,
    charged_gpu_share,
    hourly_price,
    mig_compute_slices,
)
from tests.world import world_rates

D = Decimal


def test_exclusive_is_the_number_of_gpus():
    assert charged_gpu_share("exclusive", num_gpus=4) == D(4)
    assert charged_gpu_share(Sharing.EXCLUSIVE, num_gpus=1) == D(1)
    assert charged_gpu_share("exclusive", num_gpus=0) == D(0)  # a CPU-only role


def test_fraction_is_the_larger_of_compute_and_memory_share():
    # 25 % of the compute but half of an 80 GiB card's memory: memory decides
    assert charged_gpu_share("fraction", gpu_milli=250, gpu_mem_mib=40960, gpu_total_mem_mib=81920) == D(
        "0.5"
    )
    # 75 % of the compute and an eighth of the memory: compute decides
    assert charged_gpu_share("fraction", gpu_milli=750, gpu_mem_mib=10240, gpu_total_mem_mib=81920) == D(
        "0.75"
    )
    assert charged_gpu_share("fraction", gpu_milli=10) == D("0.01")
    assert charged_gpu_share("fraction", gpu_mem_mib=24576, gpu_total_mem_mib=49152) == D("0.5")


def test_fraction_on_several_devices_counts_each_device():
    assert charged_gpu_share("fraction", gpu_milli=500, num_gpus=2) == D(1)


@pytest.mark.parametrize(
    ("profile", "slices"),
    [("1g.5gb", 1), ("2g.10gb", 2), ("3g.40gb", 3), ("4g.40gb", 4), ("7g.80gb", 7), ("1g.10gb+me", 1)],
)
def test_mig_profile_compute_slices(profile, slices):
    assert mig_compute_slices(profile) == slices


def test_mig_profile_accepts_the_kubernetes_resource_name():
    assert mig_compute_slices("nvidia.com/mig-3g.40gb") == 3


def test_mig_share_is_compute_slices_over_seven():
    assert charged_gpu_share("mig", mig_profile="3g.40gb") == D(3) / D(7)
    assert charged_gpu_share("mig", mig_profile="7g.80gb") == D(1)
    assert charged_gpu_share("mig", mig_profile="1g.10gb", num_gpus=2) == D(2) / D(7)
    # 3/7 of an A100 at 1.80 = 0.771428... kept to 4 places
    mig = Allocation(
        share=charged_gpu_share("mig", mig_profile="3g.40gb"), vendor="nvidia", gpu_model="A100-80GB"
    )
    assert hourly_price(world_rates(), mig) == D("0.7714")


def test_time_slicing_share_is_one_over_the_replicas_per_gpu():
    assert charged_gpu_share("timeslice", timeslice_replicas=4) == D("0.25")
    assert charged_gpu_share("time-slicing", timeslice_replicas=3) == D(1) / D(3)
    slice_ = Allocation(
        share=charged_gpu_share("timeslice", timeslice_replicas=3), vendor="nvidia", gpu_model="L40S-48GB"
    )
    assert hourly_price(world_rates(), slice_) == D("0.3333")


@pytest.mark.parametrize(
    ("sharing", "kwargs", "message"),
    [
        ("mig", {"mig_profile": "5g.50gb"}, "unknown MIG profile '5g.50gb'"),
        ("mig", {"mig_profile": "big"}, "unknown MIG profile 'big'"),
        ("mig", {}, "MIG sharing needs mig_profile"),
        ("exclusive", {}, "exclusive sharing needs num_gpus"),
        ("exclusive", {"num_gpus": -1}, "num_gpus must be at least 0"),
        ("mig", {"mig_profile": "3g.40gb", "num_gpus": 0}, "num_gpus must be at least 1"),
        ("fraction", {}, "fraction sharing needs gpu_milli or gpu_mem_mib"),
        ("fraction", {"gpu_milli": 1500}, "more than one GPU"),
        ("fraction", {"gpu_milli": -5}, "gpu_milli must be at least 1"),
        ("fraction", {"gpu_mem_mib": 1024}, "needs gpu_total_mem_mib"),
        ("fraction", {"gpu_mem_mib": 90000, "gpu_total_mem_mib": 81920}, "more than the GPU's 81920 MiB"),
        ("timeslice", {}, "needs timeslice_replicas"),
        ("timeslice", {"timeslice_replicas": 0}, "timeslice_replicas must be at least 1"),
        ("shared", {}, "unknown GPU sharing mode 'shared'"),
    ],
)
def test_bad_share_input_names_the_problem(sharing, kwargs, message):
    with pytest.raises(ValueError, match=message):
        charged_gpu_share(sharing, **kwargs)
