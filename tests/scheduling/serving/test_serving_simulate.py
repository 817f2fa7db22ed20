"""One service in simulated time: a cold start from zero, scale-down to zero after the delay, GPU-seconds
against a fixed deployment, the same answer for the same seed; and the idle rule of notebooks."""

import pytest

from scheduling.serving.autoscaler import ScalePolicy
from scheduling.serving.idle import idle_since
from scheduling.serving.simulate import Step, percentile, simulate

STEPS = [Step(6, 60), Step(0, 120)]
POLICY = ScalePolicy(0, 3, "rps", 2, 30)


def test_a_burst_wakes_the_service_and_it_goes_back_to_zero():
    result = simulate(STEPS, POLICY, 0.5, cold_start_s=5, seed=3)
    burst, quiet = result.steps
    assert burst.cold_starts == 1 and burst.replica_starts >= 1
    assert burst.cold_requests > 0 and burst.requests > burst.cold_requests
    assert burst.p95_s >= 5 * 0.5           # some waited through the cold start
    assert burst.p95_warm_s < 2 * result.saturated_latency_s
    assert quiet.requests == 0 and quiet.replicas[-1] == 0 and quiet.replicas_min == 0
    assert result.unfinished == 0 and result.requests == burst.requests


def test_fixed_deployment_holds_max_replicas_all_the_time():
    fixed = simulate(STEPS, POLICY, 0.5, fixed=True, seed=3)
    assert fixed.gpu_seconds == pytest.approx(3 * 0.5 * 180)
    assert fixed.cold_starts == 0 and all(s.cold_requests == 0 for s in fixed.steps)
    scaled = simulate(STEPS, POLICY, 0.5, cold_start_s=5, seed=3)
    assert scaled.gpu_seconds < fixed.gpu_seconds


def test_same_seed_same_answer():
    first = simulate(STEPS, POLICY, 0.5, seed=7)
    again = simulate(STEPS, POLICY, 0.5, seed=7)
    assert first == again


def test_bad_steps():
    with pytest.raises(ValueError):
        simulate([], POLICY, 0.5)
    with pytest.raises(ValueError):
        simulate([Step(-1, 10)], POLICY, 0.5)


def test_percentile_nearest_rank():
    assert percentile([], 95) is None
    assert percentile([3, 1, 2], 50) == 2
    assert percentile(list(range(1, 101)), 95) == 95


def test_a_notebook_is_idle_from_its_last_kernel_activity_or_gpu_use():
    assert idle_since(100, None, 50) == 100
    assert idle_since(100, 160, 50) == 160
    assert idle_since(10, None, 50) == 50   # nothing happened since it started
