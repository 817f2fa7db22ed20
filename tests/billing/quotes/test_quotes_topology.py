"""A pool with topology levels offers a gang a topology-constrained option (within one domain of the innermost
level that can hold it, same price); a spec that asks for topology carries it on every option, and a pool
without the level it requires gives no option."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_quotes_helpers import PEAK, UTC_ZONE, WHOLE

from billing.quotes import PoolOffer, choose_option, quote
from scheduling.spec import parse_job_spec
from tests.world import world_rates

BLOCK, RACK = "example.com/block", "topology.kubernetes.io/rack"
GANG = """\
name: gang
roles:
  - name: main
    image: busybox:1.36
    replicas: {min: 4, max: 4}
    resources: {gpu: 8}
"""
# 16 racks of 4 eight-GPU nodes (32 GPUs each), 4 racks a block (128 GPUs)
RACKED = PoolOffer("h100", "nvidia", "H100-80GB", 81920, 8, WHOLE, free_milli_now=512_000, total_gpus=512,
                   topology=((BLOCK, 128), (RACK, 32)))


def quote_for(text: str, *pools: PoolOffer):
    return quote(parse_job_spec(text), list(pools), world_rates(), now=PEAK, tz=UTC_ZONE)


def test_a_gang_gets_one_option_within_the_innermost_level_that_holds_it():
    result = quote_for(GANG, RACKED)
    plain = result.option("h100.exclusive.now")
    within = result.option("h100.exclusive.now.rack")
    assert plain.topology is None and plain.to_json()["topology"] == {}
    assert within.topology == ("required", "rack")
    assert within.to_json()["topology"] == {"required": "rack"}
    assert within.amount_low == plain.amount_low and within.estimate_high == plain.estimate_high
    assert not within.matches_spec and not within.can_start_now
    assert "runs within one rack of h100" in " ".join(within.tradeoffs)
    assert within.to_json()["tradeoff_codes"][-1]["code"] == "topology_one_domain"
    # the submission without a chosen option keeps the spec's own choice, with no topology
    assert choose_option(result, None, parse_job_spec(GANG)).topology is None


def test_a_gang_bigger_than_a_rack_is_offered_one_block():
    bigger = GANG.replace("min: 4, max: 4", "min: 8, max: 8")   # 64 GPUs: more than a rack, less than a block
    assert quote_for(bigger, RACKED).option("h100.exclusive.now.block").topology == ("required", "block")
    ids = {o.id for o in quote_for(bigger, RACKED).options}
    assert "h100.exclusive.now.rack" not in ids


@pytest.mark.parametrize(("pool", "text"), [
    (replace(RACKED, topology=()), GANG),                                    # no levels
    (RACKED, GANG.replace("min: 4, max: 4", "min: 1, max: 1")),              # not a gang
    (RACKED, GANG.replace("min: 4, max: 4", "min: 32, max: 32")),            # no domain holds 256 GPUs
])
def test_no_constrained_option_without_levels_a_gang_or_a_domain_big_enough(pool, text):
    assert all(o.topology is None for o in quote_for(text, pool).options)


def test_a_spec_that_asks_for_topology_carries_it_and_a_pool_without_the_level_says_why():
    flat = replace(RACKED, name="a100", gpu_model="A100-80GB", topology=())
    result = quote_for(GANG + "topology: {required: rack}\n", RACKED, flat)
    assert {o.pool for o in result.options} == {"h100"}
    assert all(o.topology == ("required", "rack") for o in result.options)
    assert not any(o.id.endswith(".rack") for o in result.options)
    (why,) = [u for u in result.unavailable if u.startswith("a100")]
    assert why == "a100: the job requires one rack, the pool has no such level (levels: none)"
    preferred = quote_for(GANG + "topology: {preferred: rack}\n", RACKED, flat)
    assert {o.pool for o in preferred.options} == {"h100", "a100"}
    assert all(o.topology == ("preferred", "rack") for o in preferred.options)
