"""An evictable option's expected loss at its queue's recent eviction rate: evicted replicas per GPU-hour its
replicas ran in the last 7 days, each eviction losing half a checkpoint interval (half the run without one)."""

from datetime import timedelta
from decimal import Decimal

import pytest

from billing.quotes import with_expected_loss
from billing.services import quote_for_workspace, quote_spec
from scheduling.api import queue_eviction_rate
from scheduling.models import JobState, Queue, Replica
from scheduling.spec import parse_job_spec
from tests.factories import JobFactory

ON_SPOT = """\
name: train
queue: {queue}
expectedDuration: 2h
{extra}roles:
  - name: main
    image: busybox:1.36
    resources: {{gpu: 1}}
    nodePool: {pool}
"""


def spec(queue="vision-lab", pool="a100-spot", extra=""):
    return ON_SPOT.format(queue=queue, pool=pool, extra=extra)


def replica(job, now, *, started_h, ended_h=None, gpus=1, state=JobState.SUCCEEDED, attempt=0):
    """A replica of `job` that started `started_h` hours before `now` and ended `ended_h` hours before it."""
    return Replica.objects.create(
        job=job,
        role="main",
        index=0,
        attempt=attempt,
        state=state,
        slice={"kind": "whole"},
        gpu_indices=list(range(gpus)),
        started=now - timedelta(hours=started_h),
        ended=None if ended_h is None else now - timedelta(hours=ended_h),
    )


@pytest.fixture
def history(cluster, clock):
    """vision-lab's last 7 days: 25 GPU-hours run, one eviction; older runs and nlp-group's evictions aside."""
    now = clock.now
    vision = Queue.objects.get(name="vision-lab")
    evicted = JobFactory(workspace=cluster.vision, queue=vision)
    replica(evicted, now, started_h=10, ended_h=5, gpus=2, state=JobState.PREEMPTED)  # 10 GPU-hours, evicted
    replica(evicted, now, started_h=5, gpus=2, state=JobState.RUNNING, attempt=1)  # 10 so far
    replica(
        JobFactory(workspace=cluster.vision, queue=vision), now, started_h=7 * 24 + 3, ended_h=7 * 24 - 5
    )  # 5 of its 8 GPU-hours within the 7 days
    old = JobFactory(workspace=cluster.vision, queue=vision)
    replica(old, now, started_h=9 * 24, ended_h=8 * 24, gpus=8, state=JobState.PREEMPTED)  # before the 7 days
    nlp = JobFactory(workspace=cluster.nlp, queue=Queue.objects.get(name="nlp-group"))
    for attempt in range(3):  # another queue's evictions
        replica(
            nlp, now, started_h=3 - attempt, ended_h=2 - attempt, state=JobState.PREEMPTED, attempt=attempt
        )
    return cluster


def options(workspace, text):
    _parsed, quote = quote_for_workspace(workspace, text)
    return [option.to_json() for option in quote.options]


def test_the_rate_counts_the_queues_evictions_over_the_gpu_hours_it_ran_in_seven_days(history, clock):
    evictions, gpu_hours = queue_eviction_rate("vision-lab", clock.now)
    assert (evictions, gpu_hours.quantize(Decimal("0.0001"))) == (1, Decimal("25.0000"))
    assert queue_eviction_rate("nlp-group", clock.now)[0] == 3
    assert queue_eviction_rate("community", clock.now) is None  # nothing ran: no rate at all


def test_a_spot_option_states_the_loss_at_the_rate_half_the_run_lost_per_eviction(history):
    [option] = [o for o in options(history.vision, spec()) if o["when"] == "now"]
    # 0.04 evictions per GPU-hour x 2 GPU-hours x (half of 2 h on 1 GPU) = 0.08 GPU-hours
    loss = option["expected_loss"]
    assert (loss["gpu_hours"], loss["evictions_per_gpu_hour"]) == ("0.08", "0.0400")
    assert abs(Decimal(loss["cost"]) - Decimal("0.08") * Decimal(option["price_per_gpu_hour"])) <= Decimal(
        "0.01"
    )
    assert Decimal(loss["cost"]) > 0
    assert (
        f"may be evicted: about 0.08 GPU-hours (${loss['cost']}) lost at this queue's recent eviction "
        "rate; a checkpoint every 30 min would cut it"
    ) in option["tradeoffs"]
    assert "expected_loss" in [c["code"] for c in option["tradeoff_codes"]]


def test_another_queues_evictions_do_not_count(history):
    """nlp-group had three evictions in an hour's GPU-hours each; vision-lab's rate is its own."""
    nlp = [o for o in options(history.nlp, spec(queue="nlp-group")) if o["when"] == "now"][0]
    vision = [o for o in options(history.vision, spec()) if o["when"] == "now"][0]
    assert nlp["expected_loss"]["evictions_per_gpu_hour"] == "1.0000"  # 3 evictions over 3 GPU-hours
    assert vision["expected_loss"]["evictions_per_gpu_hour"] == "0.0400"


def test_a_resumable_spec_loses_half_its_checkpoint_interval(history, clock):
    parsed = parse_job_spec(spec(extra="checkpoint: {path: /ckpt, volume: runs, every: 30m}\n"))
    quote = with_expected_loss(quote_spec(parsed, now=clock.now), parsed, 1, Decimal(25))
    option = next(o for o in quote.options if o.when == "now").to_json()
    # 0.04 x 2 GPU-hours x a quarter of an hour on 1 GPU = 0.02 GPU-hours, and no advice to checkpoint
    assert option["expected_loss"]["gpu_hours"] == "0.02"
    assert any(
        t.startswith("may be evicted: about 0.02 GPU-hours") and "checkpoint every" not in t
        for t in option["tradeoffs"]
    )


def test_no_history_no_figure_and_an_option_that_cannot_be_evicted_has_none(history):
    for option in options(history.vision, spec(queue="community")):  # nothing ran in community
        assert "expected_loss" not in option
        assert not any(t.startswith("may be evicted") for t in option["tradeoffs"])
    for option in options(history.vision, spec(pool="h100")):  # neither spot nor preemptible
        assert "expected_loss" not in option
    preemptible = options(history.vision, spec(pool="h100", extra="preemptible: true\n"))
    assert all(o["expected_loss"]["gpu_hours"] == "0.08" for o in preemptible if o["when"] == "now")


def test_a_queue_that_ran_without_evictions_says_zero_without_a_trade_off(history, clock):
    parsed = parse_job_spec(spec())
    quote = with_expected_loss(quote_spec(parsed, now=clock.now), parsed, 0, Decimal(25))
    option = next(o for o in quote.options if o.when == "now").to_json()
    assert option["expected_loss"] == {
        "gpu_hours": "0.00",
        "cost": "0.00",
        "evictions_per_gpu_hour": "0.0000",
    }
    assert not any(t.startswith("may be evicted") for t in option["tradeoffs"])
