"""Which options a quote offers (pools, sharing modes, vendors, now / off-peak, spot) and which one
a submission runs with."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest
from test_quotes_helpers import OFFPEAK, PEAK, SEED_YAML, UTC_ZONE, WHOLE, demo_pool_offers

from billing.quotes import PoolOffer, QuoteError, choose_option, quote
from scheduling.spec import parse_job_spec
from tests.world import world_rates

# 0.25 of a GPU with 10 GiB reserved: fits a fraction anywhere, MIG 2g.20gb (the smallest profile
# with >= 0.25 compute and >= 10 GiB), a 4-way time-slice slot (1/4 >= 0.25) or a whole GPU.
QUARTER_YAML = """\
name: quarter
roles:
  - name: main
    image: busybox:1.36
    resources: {gpu: 0.25, gpuMemory: 10Gi}
"""


def ids(result) -> set[str]:
    return {option.id for option in result.options}


def quote_demo(text: str, now: datetime = PEAK, **pool_kwargs):
    return quote(parse_job_spec(text), demo_pool_offers(**pool_kwargs), world_rates(), now=now, tz=UTC_ZONE)


def test_seed_yaml_at_peak_offers_only_off_peak_or_spot_options():
    result = quote_demo(SEED_YAML)
    assert ids(result) == {
        "a100-spot.exclusive.now",
        "a100-spot.exclusive.off-peak",
        "h100.exclusive.off-peak",
    }
    assert all(o.when == "off-peak" or o.spot for o in result.options)
    assert all("no completion promise" in " ".join(o.tradeoffs) for o in result.options)
    # pools that cannot run it say why
    reasons = dict(line.split(": ", 1) for line in result.unavailable)
    assert set(reasons) == {"h100-mig", "l40s-shared", "rtx4090", "mi300x"}
    assert "8 GPUs" in reasons["mi300x"] and "10 GPUs" in reasons["mi300x"]
    assert "role 'master' 1 whole GPU" in reasons["h100-mig"]


def test_seed_yaml_gets_amd_options_where_the_amd_pool_can_hold_the_gang():
    # unknown pool sizes: nothing rules out the 8-GPU MI300X pool for the 10-replica gang
    result = quote_demo(SEED_YAML, with_totals=False)
    amd = [o for o in result.options if o.vendor == "amd"]
    assert [o.id for o in amd] == ["mi300x.exclusive.off-peak"]
    assert "ROCm" in " ".join(amd[0].tradeoffs)
    # a gang of 8 fits the 8 MI300X GPUs
    smaller = quote_demo(SEED_YAML.replace("MinReplicas: 10", "MinReplicas: 8"))
    assert "mi300x.exclusive.off-peak" in ids(smaller)


def test_vendor_nvidia_gets_no_amd_option():
    result = quote_demo(SEED_YAML.replace("AMDSupport: true", "AMDSupport: false"), with_totals=False)
    assert result.options and all(o.vendor == "nvidia" for o in result.options)
    assert any(line.startswith("mi300x: ") and "AMD" in line for line in result.unavailable)


def test_reduce_cost_during_off_peak_runs_now_anywhere():
    result = quote_demo(SEED_YAML, now=OFFPEAK)
    assert ids(result) == {"a100-spot.exclusive.now", "h100.exclusive.now"}
    assert all(o.starts_at == OFFPEAK and o.can_start_now for o in result.options)


def test_without_reduce_cost_every_pool_offers_now_and_off_peak():
    result = quote_demo(SEED_YAML.replace("ReduceCost: true", "ReduceCost: false"))
    assert ids(result) == {
        f"{pool}.exclusive.{when}" for pool in ("h100", "a100-spot") for when in ("now", "off-peak")
    }
    h100_now = result.option("h100.exclusive.now")
    assert h100_now.starts_at == PEAK and h100_now.can_start_now and not h100_now.spot


def test_a_fractional_ask_gets_every_mode_that_gives_at_least_what_it_asked():
    result = quote_demo(QUARTER_YAML)
    modes = {(o.pool, o.sharing) for o in result.options if o.when == "now"}
    assert modes == {
        ("h100", "fraction"),
        ("h100", "exclusive"),
        ("h100-mig", "mig"),
        ("a100-spot", "fraction"),
        ("a100-spot", "exclusive"),
        ("l40s-shared", "timeslice"),
        ("rtx4090", "fraction"),
        ("rtx4090", "exclusive"),
    }
    assert len(result.options) == 16  # each also off-peak
    mig = result.option("h100-mig.mig.now")
    assert mig.roles[0].mig_profile == "2g.20gb" and not mig.matches_spec
    slot = result.option("l40s-shared.timeslice.now")
    assert "no GPU memory isolation" in " ".join(slot.tradeoffs) and "3 other jobs" in " ".join(
        slot.tradeoffs
    )
    whole = result.option("h100.exclusive.now")
    assert (
        not whole.matches_spec
        and "pays for 1 GPU per replica, more than the 0.25 GPU asked" in whole.tradeoffs
    )
    fraction = result.option("rtx4090.fraction.now")
    assert fraction.matches_spec and "GPU memory capped at 10Gi" in " ".join(fraction.tradeoffs)


def test_time_slicing_is_not_offered_for_more_than_a_slot_guarantees():
    result = quote_demo(QUARTER_YAML.replace("gpu: 0.25", "gpu: 0.5"))
    assert not any(o.pool == "l40s-shared" for o in result.options)
    assert not any(o.pool == "h100-mig" for o in result.options)  # 0.5 needs 4 of 7 slices; layout tops at 3g


def test_mig_too_small_in_memory_is_not_offered():
    result = quote_demo(QUARTER_YAML.replace("gpuMemory: 10Gi", "gpuMemory: 30Gi"))
    assert result.option("h100-mig.mig.now").roles[0].mig_profile == "3g.40gb"
    # 30 GiB is more than an RTX 4090 has
    assert not any(o.pool == "rtx4090" for o in result.options)


def test_an_exclusive_ask_runs_as_a_7g_instance_but_never_time_sliced():
    pools = [
        PoolOffer("h100-7g", "nvidia", "H100-80GB", 81920, 8, frozenset({"mig"}), frozenset({"7g.80gb"})),
        PoolOffer("l40s", "nvidia", "L40S-48GB", 49152, 4, frozenset({"timeslice"}), timeslice_replicas=4),
    ]
    spec = parse_job_spec("name: one\nroles:\n  - name: main\n    image: busybox:1.36\n")
    result = quote(spec, pools, world_rates(), now=PEAK, tz=UTC_ZONE)
    assert ids(result) == {"h100-7g.mig.now", "h100-7g.mig.off-peak"}
    assert result.option("h100-7g.mig.now").roles[0].gpu_share == 1  # 7/7: the price of the whole GPU
    assert any(line.startswith("l40s: ") for line in result.unavailable)


def test_a_mig_ask_is_preferred_and_alternatives_are_flagged():
    result = quote_demo(QUARTER_YAML.replace("{gpu: 0.25, gpuMemory: 10Gi}", "{mig: 1g.10gb}"))
    own = result.option("h100-mig.mig.now")
    assert own.matches_spec and own.roles[0].mig_profile == "1g.10gb"
    # the same compute as a fraction: ceil(1/7, 0.01) = 0.15 GPU with the 9.5 GiB a 1g.10gb instance
    # really holds, no hardware isolation
    frac = result.option("h100.fraction.now")
    assert not frac.matches_spec and (frac.roles[0].gpu_milli, frac.roles[0].gpu_mem_mib) == (150, 9728)
    assert "l40s-shared.timeslice.now" in ids(result)  # 1/4 >= 1/7


def test_pins_rule_out_other_pools():
    pinned = QUARTER_YAML + "    nodePool: rtx4090\n"
    assert {o.pool for o in quote_demo(pinned).options} == {"rtx4090"}
    model = QUARTER_YAML + "    gpuModel: h100-80gb\n"  # compared ignoring case
    assert {o.pool for o in quote_demo(model).options} == {"h100", "h100-mig"}


def test_a_multi_role_job_uses_one_pool_and_one_mode_for_all_gpu_roles():
    yaml_text = """\
name: mixed
type: pytorch
roles:
  - name: master
    image: busybox:1.36
    resources: {gpu: 1}
  - name: worker
    image: busybox:1.36
    replicas: 2
    resources: {gpu: 0.5}
"""
    result = quote_demo(yaml_text)
    for option in result.options:
        assert len({role.sharing for role in option.roles}) == 1 or option.sharing == "exclusive+fraction"
    own = result.option("h100.exclusive+fraction.now")
    assert own.matches_spec and [r.sharing for r in own.roles] == ["exclusive", "fraction"]
    both_whole = result.option("h100.exclusive.now")
    assert not both_whole.matches_spec and [r.num_gpus for r in both_whole.roles] == [1, 1]
    assert "h100.fraction.now" not in ids(result)  # the master's whole GPU is no fraction


def test_exactly_one_cheapest_and_ties_break_deterministically():
    twin = [
        PoolOffer("b-pool", "nvidia", "A100-80GB", 81920, 8, WHOLE),
        PoolOffer("a-pool", "nvidia", "A100-80GB", 81920, 8, WHOLE),
    ]
    spec = parse_job_spec(QUARTER_YAML)
    first = quote(spec, twin, world_rates(), now=PEAK, tz=UTC_ZONE)
    again = quote(spec, list(reversed(twin)), world_rates(), now=PEAK, tz=UTC_ZONE)
    assert [o.cheapest for o in first.options].count(True) == 1
    assert first.cheapest.id == again.cheapest.id == "a-pool.fraction.off-peak"
    assert [o.id for o in first.options] == [o.id for o in again.options]
    low = [o.estimate_low for o in first.options]
    assert low == sorted(low)


def test_free_capacity_decides_can_start_now():
    # the seed gang needs 10 GPUs at its minimum
    result = quote_demo(SEED_YAML, a100_spot=9000)
    blocked = result.option("a100-spot.exclusive.now")
    assert not blocked.can_start_now
    assert "9 GPUs free in a100-spot now, the job needs 10 GPUs to start" in " ".join(blocked.tradeoffs)
    assert quote_demo(SEED_YAML, a100_spot=10000).option("a100-spot.exclusive.now").can_start_now


def test_choose_option_by_id_or_spec_or_cheapest_that_can_start():
    spec = parse_job_spec(QUARTER_YAML)
    result = quote_demo(QUARTER_YAML)
    assert result.cheapest.id == "a100-spot.fraction.off-peak"
    assert choose_option(result, "h100-mig.mig.off-peak", spec).id == "h100-mig.mig.off-peak"
    assert choose_option(result, None, spec).id == "a100-spot.fraction.now"  # own sharing, starts now
    # no free capacity where the spec's own mode runs: the cheapest that can start now
    full = quote_demo(QUARTER_YAML, a100_spot=0, rtx4090=0, h100=0)
    assert choose_option(full, None, spec).id == "l40s-shared.timeslice.now"
    # nothing can start now: the spec's own choice, now (it waits in its queue; nobody asked for off-peak)
    nothing = quote_demo(QUARTER_YAML, a100_spot=0, rtx4090=0, h100=0, h100_mig=0, l40s_shared=0)
    assert nothing.cheapest.id == "a100-spot.fraction.off-peak"
    assert choose_option(nothing, None, spec).id == "a100-spot.fraction.now"


def test_choose_option_names_a_bad_id_and_the_valid_ones():
    result = quote_demo(SEED_YAML)
    with pytest.raises(ValueError, match=r"'h100\.mig\.now'.*a100-spot\.exclusive\.now") as caught:
        choose_option(result, "h100.mig.now", parse_job_spec(SEED_YAML))
    assert "h100.exclusive.off-peak" in str(caught.value)


def test_no_pool_can_run_it_says_why_for_each():
    pinned = QUARTER_YAML + "    gpuModel: A100-80GB\n    nodePool: h100\n"
    with pytest.raises(QuoteError, match="h100: role 'main' asks gpuModel 'A100-80GB'.*rtx4090: role 'main'"):
        quote_demo(pinned)


def test_bad_inputs_are_refused_by_name():
    spec = parse_job_spec(QUARTER_YAML)
    with pytest.raises(ValueError, match="now must be a timezone-aware datetime"):
        quote(spec, demo_pool_offers(), world_rates(), now=datetime(2026, 3, 2, 10), tz=UTC_ZONE)
    with pytest.raises(ValueError, match="pool names must be unique"):
        quote(spec, demo_pool_offers() * 2, world_rates(), now=PEAK, tz=UTC_ZONE)
    with pytest.raises(ValueError, match="vendor 'intel'"):
        PoolOffer("x", "intel", "Max-1550", 1024, 8)
    with pytest.raises(ValueError, match="MIG is an NVIDIA feature"):
        PoolOffer("x", "amd", "MI300X-192GB", 1024, 8, frozenset({"mig"}), frozenset({"1g.10gb"}))
    with pytest.raises(ValueError, match="unknown MIG profile"):
        PoolOffer("x", "nvidia", "H100-80GB", 81920, 8, frozenset({"mig"}), frozenset({"9g.99gb"}))
    with pytest.raises(ValueError, match="timeslice_replicas"):
        PoolOffer("x", "nvidia", "L40S-48GB", 49152, 4, frozenset({"timeslice"}), timeslice_replicas=0)


def test_reduce_cost_without_off_peak_windows_runs_only_on_spot():
    no_windows = replace(world_rates(), offpeak_windows=())
    result = quote(parse_job_spec(SEED_YAML), demo_pool_offers(), no_windows, now=PEAK, tz=UTC_ZONE)
    assert ids(result) == {"a100-spot.exclusive.now"}
    assert any(line.startswith("h100: ") and "no off-peak window" in line for line in result.unavailable)
