"""The latency model of an inference replica on a GPU slice, and its M/M/c queueing figures, on known answers."""

import math

import pytest

from scheduling.serving.latency import ServerModel, erlang_c, queue_figures, replicas_for_rate, slice_share

MODEL = ServerModel()   # prefill 0.05 s + 32 tokens x 6.25 ms = 0.25 s of work on a whole GPU


def test_service_time_grows_as_the_slice_shrinks():
    assert MODEL.service_s(1.0) == pytest.approx(0.25)
    assert MODEL.service_s(0.5) == pytest.approx(0.25 * (0.1 + 0.9 / 0.5))          # 0.475
    assert MODEL.service_s(0.25) == pytest.approx(0.25 * (0.1 + 0.9 / 0.25))        # 0.925
    assert MODEL.service_s(1.0, tokens=64) == pytest.approx(0.05 + 64 * 0.00625)


def test_a_full_batch_is_slower_per_request_but_faster_in_all():
    assert MODEL.service_s(0.5, in_service=8) == pytest.approx(0.475 * 1.35)
    assert MODEL.saturated_s(0.5) == pytest.approx(0.64125)
    assert MODEL.service_s(0.5, in_service=20) == MODEL.saturated_s(0.5)          # never more than the slots
    assert MODEL.capacity_rps(0.5) == pytest.approx(8 / 0.64125)
    assert MODEL.capacity_rps(0.5) > 1 / MODEL.service_s(0.5)


@pytest.mark.parametrize(("request_", "share"), [
    (("fraction", 1, 250), 0.25), (("mig", 1, 0, "3g.40gb"), 3 / 7), (("exclusive", 1), 1.0),
    (("exclusive", 2), 2 ** 0.8), (("timeslice", 1), 1.0),
])
def test_the_share_a_slice_gives(request_, share):
    assert slice_share(*request_) == pytest.approx(share)


def test_no_gpu_serves_nothing():
    with pytest.raises(ValueError, match="some GPU"):
        slice_share("exclusive", 0, 0)


def test_erlang_c_known_values():
    assert erlang_c(1, 0.5) == pytest.approx(0.5)        # M/M/1: an arrival waits with probability rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(4, 4.0) == 1.0 and erlang_c(3, 0) == 0.0


def test_mm1_response_time_is_exponential():
    single = ServerModel(slots=1, batch_penalty=0)      # one slot, 0.25 s on a whole GPU: mu = 4 per second
    figures = queue_figures(2.0, 1, 1.0, single)          # lambda 2: T ~ Exp(mu - lambda = 2)
    assert figures.utilisation == pytest.approx(0.5)
    assert figures.mean_s == pytest.approx(0.5)
    assert figures.p95_s == pytest.approx(math.log(20) / 2, rel=1e-6)


def test_more_replicas_wait_less_and_saturation_never_ends():
    busy = queue_figures(20.0, 2, 0.5)
    calm = queue_figures(20.0, 4, 0.5)
    assert calm.p95_s < busy.p95_s and calm.wait_probability < busy.wait_probability
    over = queue_figures(13.0, 1, 0.5)                     # above one replica's 12.5 req/s
    assert math.isinf(over.mean_s) and math.isinf(over.p95_s)
    idle = queue_figures(0, 1, 0.5)
    assert idle.mean_s == pytest.approx(MODEL.saturated_s(0.5))


def test_replicas_for_a_steady_rate():
    assert replicas_for_rate(0, 0.5) == 0
    assert replicas_for_rate(200, 0.5) == math.ceil(200 / (8 / 0.64125 * 0.75))    # 22
    assert replicas_for_rate(200, 0.5) == 22
    assert replicas_for_rate(200, 1.0) < replicas_for_rate(200, 0.5)


def test_a_model_refuses_nonsense():
    with pytest.raises(ValueError):
        ServerModel(slots=0)
    with pytest.raises(ValueError):
        ServerModel(fixed_part=1)


def test_the_phases_split_the_service_time_by_their_work():
    prefill, decode = MODEL.phases_s(0.5)
    assert prefill + decode == pytest.approx(MODEL.service_s(0.5))
    assert prefill / decode == pytest.approx(0.05 / (32 * 0.00625))     # 0.05 s of prefill, 0.2 s of decode
    few, many = MODEL.phases_s(1.0, tokens=4), MODEL.phases_s(1.0, tokens=400)
    assert few[0] == pytest.approx(many[0]) and many[1] > few[1] * 50
