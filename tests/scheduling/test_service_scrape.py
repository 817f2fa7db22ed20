"""What the autoscaler reads from a model server: vLLM's Prometheus names (as a real vLLM server and the simulated
one expose them), its time-to-first-token histogram as quantiles, and the phase seconds the cost is split by."""

from __future__ import annotations

import math

import pytest

from scheduling.inference import Window, histogram_quantile, prometheus_figures

VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama"} 3.0
vllm:num_requests_waiting{model_name="llama"} 5.0
vllm:gpu_cache_usage_perc{model_name="llama"} 0.4
vllm:request_success_total{finished_reason="stop",model_name="llama"} 40.0
vllm:request_success_total{finished_reason="length",model_name="llama"} 60.0
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="llama"} 50.0
vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="llama"} 90.0
vllm:time_to_first_token_seconds_bucket{le="1.0",model_name="llama"} 100.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="llama"} 100.0
vllm:time_to_first_token_seconds_count{model_name="llama"} 100.0
vllm:request_prefill_time_seconds_sum{model_name="llama"} 4.5
vllm:request_decode_time_seconds_sum{model_name="llama"} 30.25
process_start_time_seconds 1000.0
"""


def test_a_vllm_server_is_read_by_its_own_names():
    figures = prometheus_figures(VLLM_TEXT, now=1600.0)
    assert (figures.running, figures.waiting, figures.requests) == (3, 5, 100)
    assert figures.uptime_s == 600.0 and figures.in_flight_s is None
    assert (figures.prefill_s, figures.decode_s) == (4.5, 30.25)
    assert figures.ttft_buckets == ((0.1, 50), (0.5, 90), (1.0, 100), (math.inf, 100))
    with pytest.raises(ValueError, match="vllm:num_requests_running"):
        prometheus_figures("sim_ready 1\n", now=0.0)


def test_ttft_quantiles_interpolate_within_the_bucket():
    buckets = [(0.1, 50), (0.5, 90), (1.0, 100), (math.inf, 100)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.95, buckets) == pytest.approx(0.75)
    assert histogram_quantile(0.5, [(0.1, 0), (math.inf, 0)]) is None


def test_a_window_takes_the_differences_since_the_last_scrape():
    earlier = prometheus_figures(VLLM_TEXT, now=1600.0)
    later = prometheus_figures(
        VLLM_TEXT.replace('le="+Inf",model_name="llama"} 100.0', 'le="+Inf",model_name="llama"} 110.0')
        .replace('le="1.0",model_name="llama"} 100.0', 'le="1.0",model_name="llama"} 110.0')
        .replace("30.25", "31.25"),
        now=1660.0,
    )
    window = Window()
    window.add(earlier.counters(), later)
    assert window.decode_s == pytest.approx(1.0) and window.prefill_s == 0.0
    assert window.concurrency == 8 and window.waiting == 5  # no integral kept: what is in flight now
    assert 0.5 < window.ttft_quantile(0.95) <= 1.0  # the ten new answers all took 0.5..1 s
