"""Properties of quotes over generated specs, pools, times and zones."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st
from test_quotes_helpers import demo_pool_offers

from billing.quotes import QuoteError, choose_option, quote
from scheduling.offpeak import is_offpeak
from scheduling.spec.model import JobSpec, RoleSpec
from tests.world import world_rates

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]
MIG = {"1g.10gb": (1, 9728), "2g.20gb": (2, 19968), "3g.40gb": (3, 40192)}  # usable MiB (scheduling.core.mig)


@st.composite
def roles(draw, name: str) -> RoleSpec:
    sharing = draw(st.sampled_from(["exclusive", "fraction", "mig", "timeslice"]))
    low = draw(st.integers(0 if name == "worker" else 1, 6))
    common = dict(
        name=name,
        image="busybox:1.36",
        min_replicas=low,
        max_replicas=draw(st.integers(max(low, 1), 12)),
        cpu_milli=draw(st.integers(1, 64)) * 500,
        mem_mib=draw(st.integers(1, 64)) * 1024,
        vendor=draw(st.sampled_from(["nvidia", "amd", "any"])) if sharing != "mig" else "nvidia",
    )
    if sharing == "exclusive":
        count = draw(st.integers(0, 3))
        return RoleSpec(**common, sharing="exclusive", num_gpus=count, gpu_milli=1000 if count else 0)
    if sharing == "fraction":
        memory = draw(st.one_of(st.none(), st.integers(1, 60).map(lambda gib: gib * 1024)))
        milli = draw(st.integers(1, 99)) * 10
        return RoleSpec(**common, sharing="fraction", gpu_milli=milli, gpu_mem_mib=memory)
    if sharing == "mig":
        profile = draw(st.sampled_from(sorted(MIG)))
        slices, memory = MIG[profile]
        return RoleSpec(
            **common, sharing="mig", gpu_milli=slices * 1000 // 7, gpu_mem_mib=memory, mig_profile=profile
        )
    return RoleSpec(**common, sharing="timeslice")


@st.composite
def specs(draw) -> JobSpec:
    two = draw(st.booleans())
    role_list = (draw(roles("master")), draw(roles("worker"))) if two else (draw(roles("main")),)
    reduce_cost = draw(st.booleans())
    return JobSpec(
        name="job",
        type="pytorch" if two else "single",
        roles=role_list,
        priority=draw(st.integers(0, 100)),
        preemptible=reduce_cost or draw(st.booleans()),
        reduce_cost=reduce_cost,
        expected_duration_s=draw(st.integers(60, 3 * 86400)),
    )


@st.composite
def pool_sets(draw):
    pools = demo_pool_offers(with_totals=draw(st.booleans()))
    chosen = draw(
        st.lists(st.sampled_from(pools), min_size=1, max_size=len(pools), unique_by=lambda p: p.name)
    )
    return [
        replace(pool, free_milli_now=draw(st.one_of(st.none(), st.integers(0, 40).map(lambda g: g * 1000))))
        for pool in chosen
    ]


moments = st.datetimes(
    min_value=datetime(2025, 1, 1), max_value=datetime(2027, 12, 31), timezones=st.just(UTC)
)


def asked(role: RoleSpec) -> tuple[Fraction, int]:
    if role.sharing == "fraction":
        return Fraction(role.gpu_milli, 1000), role.gpu_mem_mib or 0
    if role.sharing == "mig":
        slices, memory = MIG[role.mig_profile or ""]
        return Fraction(slices, 7), memory
    return Fraction(1), 0


@settings(max_examples=200, deadline=None)
@given(spec=specs(), pools=pool_sets(), now=moments, zone=st.sampled_from(ZONES))
def test_every_quote_is_consistent_and_honest(spec, pools, now, zone):
    tz = ZoneInfo(zone)
    rates = world_rates()
    try:
        result = quote(spec, pools, rates, now=now, tz=tz)
    except QuoteError as error:
        assert all(pool.name in str(error) for pool in pools)
        return
    options = result.options
    assert [o.cheapest for o in options].count(True) == 1
    assert len({o.id for o in options}) == len(options)
    assert result.cheapest.amount_low == min(o.amount_low for o in options)
    offpeak_now = is_offpeak(now, rates.offpeak_windows, tz)
    by_name = {pool.name: pool for pool in pools}
    for option in options:
        pool = by_name[option.pool]
        assert option.estimate_low <= option.estimate_high
        assert option.price_per_hour_offpeak <= option.price_per_hour
        if option.when == "now":
            assert option.starts_at == now
        else:
            assert not offpeak_now and option.starts_at > now
            assert is_offpeak(option.starts_at, rates.offpeak_windows, tz)
            assert not option.can_start_now
        if spec.reduce_cost:
            assert option.spot or option.when == "off-peak" or offpeak_now
        for role, held in zip(spec.roles, option.roles, strict=True):
            assert (held.min_replicas, held.max_replicas) == (role.min_replicas, role.max_replicas)
            if role.num_gpus == 0:
                assert held.sharing == "none" and held.gpu_share == 0
                continue
            assert role.vendor in ("any", pool.vendor)
            compute, memory = asked(role)
            if held.sharing == role.sharing == "timeslice":
                continue  # the spec asked for a slot itself
            guaranteed = {
                "exclusive": (Fraction(held.num_gpus), pool.gpu_memory_mib),
                "fraction": (Fraction(held.gpu_milli, 1000), held.gpu_mem_mib or pool.gpu_memory_mib),
                "mig": (Fraction(int((held.mig_profile or "0")[0]), 7), held.gpu_mem_mib or 0),
                "timeslice": (Fraction(1, pool.timeslice_replicas), pool.gpu_memory_mib),
            }[held.sharing]
            assert guaranteed[0] >= compute * role.num_gpus and guaranteed[1] >= memory
    assert choose_option(result, None, spec) in options
    again = quote(spec, list(reversed(pools)), rates, now=now, tz=tz)
    assert [o.id for o in again.options] == [o.id for o in options]
    assert again.cheapest.id == result.cheapest.id
