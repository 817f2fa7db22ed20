"""GPU advice for serving: weights plus the KV cache for a context and a concurrency, the model shape from
its size, and the smallest slice or MIG profile that holds it."""

from decimal import Decimal

import pytest

from scheduling.serving.memory import (
    fit_slice,
    inference_memory,
    kv_cache_bytes,
    memory_needed,
    model_shape,
)

GIB = Decimal(2**30)


def test_kv_cache_of_llama_2_7b():
    # 2 x 32 layers x 4096 hidden x 2 bytes x 4096 tokens = 2 GiB
    assert kv_cache_bytes(32, 4096, 4096, 2) == 2 * 2**30


@pytest.mark.parametrize(("params", "shape"), [("13", (40, 5120)), ("7", (33, 4224)), ("70", (71, 9088))])
def test_model_shape_by_rule_of_thumb(params, shape):
    assert model_shape(params) == shape


def test_serving_memory_is_weights_plus_kv_plus_runtime():
    need = inference_memory("7", "fp16", 4096, 1, layers=32, hidden=4096)
    parts = dict(need.parts)
    assert parts["weights"] == Decimal(7 * 10**9 * 2) / GIB
    assert parts["KV cache (1 x 4096 tokens, 32 layers x 4096)"] == Decimal(2)
    assert parts["runtime (CUDA context, activations)"] == Decimal(1)
    assert need.gib == Decimal("16.1")                    # 13.04 + 2 + 1, rounded up
    eight = inference_memory("7", "fp16", 4096, 8, layers=32, hidden=4096)
    assert eight.gib == Decimal("30.1")                   # the KV cache grows with the concurrency
    quantised = inference_memory("7", "int4", 4096, 1, layers=32, hidden=4096, overhead_gib=Decimal(0))
    assert dict(quantised.parts)["weights"] == Decimal(7 * 10**9) / 2 / GIB   # KV stays fp16: 2 GiB
    assert len(quantised.parts) == 2
    fp8 = inference_memory("7", "fp8", 4096, 1, layers=32, hidden=4096)
    assert dict(fp8.parts)["weights"] == Decimal(7 * 10**9) / GIB            # one byte per parameter, KV fp16


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"precision": "fp4"}, "precision"), ({"context": 0}, "context"), ({"concurrency": -1}, "concurrency"),
    ({"params_b": "big"}, "params_b"), ({"layers": 0}, "layers"),
])
def test_bad_input_names_the_field(kwargs, field):
    args = {"params_b": "7", "precision": "fp16", "context": 4096, **kwargs}
    with pytest.raises(ValueError, match=f"^{field}:"):
        inference_memory(**args)


def test_smallest_slice_and_mig_profile():
    need_mib = inference_memory("7", "fp16", 4096, 1, layers=32, hidden=4096).mib     # 16.1 GiB
    assert need_mib == 16487
    on_h100 = fit_slice(need_mib, 81920, ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"])
    assert (on_h100.fraction_milli, on_h100.whole_gpus, on_h100.mig_profile) == (210, 1, "2g.20gb")
    on_a100_40 = fit_slice(need_mib, 40960, ["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"])
    assert (on_a100_40.fraction_milli, on_a100_40.mig_profile) == (410, "3g.20gb")
    no_mig = fit_slice(need_mib, 24576)
    assert (no_mig.fraction_milli, no_mig.mig_profile) == (680, None)
    too_big = fit_slice(200_000, 81920, ["7g.80gb"])
    assert (too_big.fraction_milli, too_big.whole_gpus, too_big.mig_profile) == (None, 3, None)
    full_card = fit_slice(81920, 81920)
    assert (full_card.fraction_milli, full_card.whole_gpus) == (None, 1)


def test_the_size_only_rule_is_unchanged():
    assert memory_needed("7", "inference", "fp16").gib == Decimal("19.6")


H200_PROFILES = ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]


def test_a_17_gib_need_on_an_h200_does_not_get_a_1g_18gb():
    """A 1g.18gb instance holds 16384 MiB on a real H200 (NVML, driver 580), not the 18432 its name says."""
    fit = fit_slice(17 * 1024, 143771, H200_PROFILES)
    assert fit.mig_profile == "1g.35gb"
    assert fit_slice(16384, 143771, H200_PROFILES).mig_profile == "1g.18gb"
    assert fit_slice(16385, 143771, H200_PROFILES).mig_profile == "1g.35gb"
    assert fit_slice(141 * 1024, 143771, ["7g.141gb"]).mig_profile is None     # 140.00 GiB usable
