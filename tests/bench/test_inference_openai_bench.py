"""bench.inference --clients openai on a 20 s smoke run: the openai SDK streams through a real portal to a
scaled service and a fixed one; the report has every figure, and nothing is lost."""

import json
import os
import subprocess
import sys

import pytest

from portal.testing import ROOT

pytestmark = pytest.mark.slow  # a 20-second run against real servers


@pytest.fixture(scope="module")
def smoke_run():
    done = subprocess.run([sys.executable, "-m", "bench.inference", "--clients", "openai", "--duration", "20",
                           "--pattern", "flat", "--peak-rps", "2", "--max", "2", "--json"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_20_second_smoke_run(smoke_run):
    result = smoke_run
    scaled, fixed = result["services"]["scaled"], result["services"]["fixed"]
    assert result["run"]["planned_requests"] > 10
    for service in (scaled, fixed):
        assert service["answered"] + service["rate_limited"] + service["lost"] == result["run"]["planned_requests"]
        assert service["ttft_p50_s"] is not None and service["ttft_p95_s"] >= service["ttft_p50_s"]
        assert service["tokens"] > 0 and service["gpu_seconds"] > 0
    assert result["cold_starts"] >= 1 and result["cold_start_max_s"] is not None
    assert set(result["cost_per_million_tokens_usd"]) == {"exclusive", "fraction", "timeslice"}
    assert set(result["target"]) == {"under_half_of_fixed", "ttft_p95_within_2x_fixed", "cold_start_under_5s",
                                     "nothing_lost"}


def test_nothing_is_lost(smoke_run):
    for service in smoke_run["services"].values():
        assert service["lost"] == 0, service["errors"]
    assert smoke_run["target"]["nothing_lost"]
