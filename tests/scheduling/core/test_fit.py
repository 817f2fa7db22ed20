"""The fit module: whether a pool, a cluster or a GPU can serve a request, and why not (codes + text)."""

import pytest

from scheduling.core.fit import PoolTraits, Unfit, check_gpu, check_pool, check_pools
from scheduling.core.model import Pool, Request
from scheduling.core.reasons import reason_text
from scheduling.core.units import gpu_model_name, vendor_name

WHOLE = frozenset({"exclusive", "fraction"})
H100 = PoolTraits("h100", "nvidia", "H100-80GB", 81920, WHOLE, gpus_per_node=8)
A100 = PoolTraits("a100", "nvidia", "A100-80GB", 81920, WHOLE, gpus_per_node=8)
MI300 = PoolTraits("mi300x", "amd", "MI300X-192GB", 196608, WHOLE, gpus_per_node=8)
MIG = PoolTraits.of(Pool("mig", gpu_model="H100-80GB", sharing=frozenset({"mig"}), mig_layout=("3g.40gb",)))
POOLS = (H100, A100, MI300, MIG)


def test_names_are_normalised_to_one_spelling():
    assert gpu_model_name(" a100-80gb ") == "A100-80GB" and vendor_name("NVIDIA") == "nvidia"


def test_a_pool_serves_a_request_it_offers():
    assert check_pool(A100, Request(gpu_model="A100-80GB")) is None


@pytest.mark.parametrize(("request_", "code", "field"), [
    (Request(pool="h100"), "pool_pinned_elsewhere", "pool"),
    (Request(vendor="amd"), "pool_vendor_differs", "vendor"),
    (Request(gpu_model="H100-80GB"), "pool_model_differs", "gpu_model"),
    (Request(mode="timeslice"), "pool_sharing_not_offered", "mode"),
    (Request(mode="fraction", gpu_milli=500, gpu_mem_mib=90000), "pool_gpu_memory_too_small", "gpu_mem_mib"),
])
def test_a_pool_says_why_it_cannot_serve(request_, code, field):
    unfit = check_pool(A100, request_)
    assert (unfit.code, unfit.field) == (code, field)
    assert unfit.text == reason_text(unfit.code, unfit.params)


def test_a_model_no_pool_offers_names_the_models_on_offer():
    unfit = check_pools(POOLS, Request(gpu_model="T4-16GB"))
    assert unfit == Unfit("gpu_model_not_offered", {"model": "T4-16GB", "suggestion": None,
                                                    "offered": ["A100-80GB", "H100-80GB", "MI300X-192GB"]},
                          "gpu_model")
    assert unfit.text == "gpuModel 'T4-16GB' is in no pool (models: A100-80GB, H100-80GB, MI300X-192GB)"


@pytest.mark.parametrize(("request_", "code"), [
    (Request(pool="h10"), "pool_unknown"),
    (Request(pool="h100", gpu_model="A100-80GB"), "pool_has_other_model"),
    (Request(gpu_model="MI300X-192GB"), "amd_not_allowed"),
    (Request(mode="mig", mig_profile="1g.10gb"), "mig_profile_not_offered"),
    (Request(num_gpus=16), "too_many_gpus"),
    (Request(mode="fraction", gpu_milli=500, gpu_mem_mib=300000, vendor="any"), "gpu_memory_too_large"),
])
def test_a_cluster_says_which_constraint_no_pool_meets(request_, code):
    assert check_pools(POOLS, request_).code == code


def test_a_cluster_serves_what_one_pool_serves_and_cpu_only_anywhere():
    assert check_pools(POOLS, Request(mode="mig", mig_profile="3g.40gb")) is None
    assert check_pools(POOLS, Request(num_gpus=0, vendor="amd")) is None


def test_a_gpu_says_why_its_free_room_does_not_fit():
    half = Request(mode="fraction", gpu_milli=500, gpu_mem_mib=1024)
    assert check_gpu(half, free_milli=600, free_mem_mib=2048) is None
    assert check_gpu(half, free_milli=400, free_mem_mib=2048).code == "gpu_share_busy"
    assert check_gpu(Request(num_gpus=2), free_milli=1000, node_free_whole=1).code == "whole_gpus_busy"
