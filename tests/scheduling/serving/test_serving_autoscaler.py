"""The autoscaler on known sequences: up at once, down after the delay, to zero, a cold start; its meters."""

import pytest

from scheduling.serving.autoscaler import Autoscaler, ScalePolicy, Scrape, TrafficWindow, observe
from scheduling.spec import parse_job_spec


def test_recommendation_is_the_load_over_the_target_clamped():
    scaler = Autoscaler(ScalePolicy(0, 10, "concurrency", 4, 60))
    assert [scaler.recommend(x) for x in (0, 0.1, 8, 8.5, 100)] == [0, 1, 2, 3, 10]
    floor = Autoscaler(ScalePolicy(2, 10, "concurrency", 4, 60))
    assert floor.recommend(0) == 2


def test_up_at_once_down_after_the_delay_then_to_zero():
    scaler = Autoscaler(ScalePolicy(0, 10, "concurrency", 4, 60))
    up = scaler.decide(0, 20, current=0)
    assert (up.desired, up.recommended) == (5, 5) and up.reason_key == "up" and dict(up.figures)["current"] == "0"
    held = scaler.decide(2, 4, current=5)
    assert (held.desired, held.recommended) == (5, 1)             # lower, but not for a whole delay yet
    assert scaler.decide(59, 4, current=5).desired == 5
    down = scaler.decide(61, 4, current=5)                       # the 5 of t=0 is older than 60 s
    assert down.desired == 1 and down.reason_key == "down" and dict(down.figures)["current"] == "5"
    assert scaler.decide(70, 0, current=1).desired == 1          # no traffic, but the 1 of t=61 is recent
    assert scaler.decide(122, 0, current=1).desired == 0         # a whole delay without traffic: zero


def test_a_request_at_zero_wakes_one_replica_or_the_minimum():
    scaler = Autoscaler(ScalePolicy(0, 4, "concurrency", 4, 30))
    wake = scaler.wake(10)
    assert wake.desired == 1 and wake.reason_key == "woken"
    assert scaler.decide(12, 0, current=1).desired == 1          # the wake counts as a recommendation
    assert Autoscaler(ScalePolicy(0, 4, "rps", 4, 30)).decide(0, 0, current=0, waiting=3).desired == 1


def test_requests_per_second_and_no_delay():
    scaler = Autoscaler(ScalePolicy(1, 5, "rps", 10, 0))
    assert scaler.decide(0, 35, current=1).desired == 4
    assert scaler.decide(1, 5, current=4).desired == 1           # delay 0: down at once
    assert scaler.decide(2, 0, current=1).desired == 1           # never below min


def test_policy_from_a_service_spec():
    spec = parse_job_spec("kind: inference\nname: s\nmodel: {path: /m}\nreplicas: {min: 0, max: 3}\n"
                          "target: {rps: 2.5}\nscaleDownDelay: 90s\n")
    role = spec.roles[0]
    policy = ScalePolicy.of_service(role.min_replicas, role.max_replicas, spec.inference)
    assert policy == ScalePolicy(0, 3, "rps", 2.5, 90.0)


def test_bad_policies():
    with pytest.raises(ValueError):
        ScalePolicy(3, 2)
    with pytest.raises(ValueError):
        ScalePolicy(0, 2, "latency")
    with pytest.raises(ValueError):
        ScalePolicy(0, 2, target=0)


def test_traffic_window_averages_requests_in_flight_over_time():
    window = TrafficWindow(0)
    window.arrive(0)
    window.arrive(1)
    window.finish(2)
    window.finish(4)
    concurrency, rps = window.read(4)
    assert concurrency == pytest.approx((1 * 1 + 2 * 1 + 1 * 2) / 4)
    assert rps == pytest.approx(0.5)
    assert window.read(6) == (0.0, 0.0)


def test_metrics_from_two_scrapes():
    before, after = Scrape(0, 100, 50.0), Scrape(10, 150, 80.0)
    assert observe(before, after, "rps") == 5.0
    assert observe(before, after, "concurrency") == 3.0
    restarted = Scrape(10, 20, 5.0)
    assert observe(before, restarted, "rps") == 2.0 and observe(before, restarted, "concurrency") == 0.5
    with pytest.raises(ValueError):
        observe(after, before, "rps")


def test_queue_depth_scales_in_proportion_and_down_only_after_the_window():
    scaler = Autoscaler(ScalePolicy(0, 10, "queueDepth", 2, 60))
    up = scaler.decide(0, 6, current=2, busy=True)            # 6 waiting per replica, 2 wanted: 3 times the replicas
    assert (up.desired, up.recommended) == (6, 6) and up.reason_key == "up"
    assert scaler.decide(1, 2.5, current=6, busy=True).recommended == 8   # over target: grows again
    calm = scaler.decide(5, 0, current=8, busy=True)          # nothing waits, but requests are answered
    assert (calm.desired, calm.recommended) == (8, 1)         # the stabilisation window keeps the 8
    assert scaler.decide(62, 0, current=8, busy=True).desired == 1
    assert scaler.decide(130, 0, current=1, busy=False).desired == 0     # no traffic for a whole window


def test_time_to_first_token_at_p95():
    scaler = Autoscaler(ScalePolicy(1, 8, "ttftP95", 0.5, 0))
    assert scaler.decide(0, 1.5, current=2, busy=True).desired == 6      # 3 times too slow: 3 times the replicas
    assert scaler.decide(1, 0.2, current=6, busy=True).desired == 3      # well under: fewer (no delay here)
    assert scaler.decide(2, 0.0, current=3, busy=False).desired == 1     # the minimum
