"""GPU selection advice: the training-memory rule (bytes per parameter for weights, gradients and optimiser states) and the cheapest pool and sharing mode that fits;
and the fragmentation figure."""

from decimal import Decimal

import pytest

from portal.console.advice import memory_needed, spec_for_pool
from portal.console.fragmentation import FreeGpu, fragmentation
from scheduling.core.model import Pool, Request

GIB = 2**30


def test_inference_is_one_and_a_half_times_the_weights():
    need = memory_needed("7", "inference", "fp16")
    assert dict(need.parts)["weights"] == Decimal(7 * 10**9 * 2) / GIB
    assert need.gib == Decimal("19.6")  # 1.5 x 13.04 GiB, rounded up


def test_training_is_eight_times_the_fp16_weights():
    mixed = memory_needed("13", "training", "bf16")
    assert sum(g for _, g in mixed.parts) == 8 * Decimal(13 * 10**9 * 2) / GIB
    fp32 = memory_needed("13", "training", "fp32")
    assert sum(g for _, g in fp32.parts) == 5 * Decimal(13 * 10**9 * 4) / GIB


@pytest.mark.parametrize(("args", "field"), [
    (("-1", "training", "fp16"), "params_b"), (("seven", "training", "fp16"), "params_b"),
    (("7", "serving", "fp16"), "task"), (("7", "training", "fp8"), "precision"), (("7", "training", "int4"), "precision"),
])
def test_bad_input_names_the_field(args, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        memory_needed(*args)


def test_the_job_shape_for_a_pool():
    from billing.quotes import PoolOffer

    small = memory_needed("7", "inference", "int8")       # 9.8 GiB
    offer = PoolOffer("h100", "nvidia", "H100-80GB", 81920, 8)
    role = spec_for_pool(small, offer).roles[0]
    assert (role.sharing, role.gpu_mem_mib, role.gpu_milli) == ("fraction", small.mib, 130)
    big = memory_needed("70", "training", "bf16")          # ~1043 GiB: 14 x 80 GB over 2 nodes
    role = spec_for_pool(big, offer).roles[0]
    assert (role.sharing, role.num_gpus, role.min_replicas) == ("exclusive", 8, 2)


@pytest.mark.django_db
def test_advice_page_picks_the_cheapest_fitting_option(admin_client, cluster):
    response = admin_client.get("/console/advice/?params_b=7&task=inference&precision=fp16")
    options = response.context["options"]
    assert options and options == sorted(options, key=lambda o: o.price_per_hour)
    assert {"fraction", "exclusive"} <= {o.sharing for o in options}  # 19.6 GiB: a share of a big card will do
    cheapest = options[0]
    assert 'class="cheapest"' in response.content.decode() and cheapest.pool in response.content.decode()
    huge = admin_client.get("/console/advice/?params_b=70&task=inference&precision=fp16").context["options"]
    assert huge and {o.sharing for o in huge} == {"exclusive"}  # 195.6 GiB fits no single card
    bad = admin_client.get("/console/advice/?params_b=abc&task=inference&precision=fp16")
    assert "params_b:" in bad.content.decode()


def test_fragmentation_counts_free_capacity_no_pending_job_can_use():
    pool = Pool("p", gpu_memory_mib=81920)
    gpus = [FreeGpu("p", "n1", 0, free_milli=300, free_mem_mib=8000, node_free_whole=1),
            FreeGpu("p", "n1", 1, free_milli=1000, free_mem_mib=81920, node_free_whole=1),
            FreeGpu("p", "n2", 0, free_milli=0, free_mem_mib=0)]
    # a pending 0.5-GPU job cannot use the 0.3 left on n1/gpu0, but can use the free gpu1
    [result] = fragmentation([pool], gpus, [Request(mode="fraction", gpu_milli=500, gpu_mem_mib=10000)])
    assert (result.free_milli, result.stranded_milli, result.stranded_gpus) == (1300, 300, ("n1/gpu0",))
    assert result.partial_milli == 300  # only gpu0 is partly allocated
    # a 2-GPU job can use neither: everything free is stranded
    [result] = fragmentation([pool], gpus, [Request(num_gpus=2)])
    assert result.stranded_milli == 1300
    # a 0.2-GPU job fits both
    [result] = fragmentation([pool], gpus, [Request(mode="fraction", gpu_milli=200, gpu_mem_mib=1000)])
    assert result.stranded_milli == 0


def test_fragmentation_on_mig_and_timeslice_pools():
    mig = Pool("m", sharing=frozenset({"mig"}), mig_layout=("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
    ts = Pool("t", sharing=frozenset({"timeslice"}), timeslice_replicas=4)
    gpus = [FreeGpu("m", "a", 0, 0, 0, free_mig=("1g.10gb",)), FreeGpu("t", "b", 0, 0, 0, free_slots=2)]
    result = {r.pool: r for r in fragmentation([mig, ts], gpus, [Request(mode="mig", mig_profile="3g.40gb")])}
    assert result["m"].stranded_milli == 142 and result["t"].stranded_milli == 500
    assert result["m"].partial_milli == 142 and result["t"].partial_milli == 500
    result = {r.pool: r for r in fragmentation([mig, ts], gpus, [Request(mode="timeslice")])}
    assert result["t"].stranded_milli == 0 and result["m"].stranded_milli == 142
