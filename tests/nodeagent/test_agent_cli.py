"""The agent as a process: `python -m nodeagent` against the fake portal, signals and exit codes."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodeagent.spool import Spool

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENTS = [{"pod_uid": "pod-1", "gpu_index": 0, "milli": 500, "memory_mib": 8000},
               {"pod_uid": "pod-2", "gpu_index": 1, "milli": 1000, "memory_mib": 40000}]
PER_TICK = 2 + len(ASSIGNMENTS)  # two GPUs plus the pods


@pytest.fixture
def agent_process():
    """Start `python -m nodeagent` with the simulated collector; killed at teardown if still running."""
    started: list[subprocess.Popen] = []

    def start(portal_url: str, token: str, spool: Path) -> subprocess.Popen:
        started.append(_spawn(portal_url, token, spool))
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _spawn(portal_url: str, token: str, spool: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nodeagent", "--portal", portal_url, "--token", token, "--collector", "simulated",
         "--interval", "0.2", "--spool", str(spool), "--node", "sim-node-1", "--sim-gpus", "2",
         "--heartbeat-every", "3", "--backoff-cap", "1"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def stop(process: subprocess.Popen) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=15)
    return process.returncode, err


def spooled(path: Path) -> int:
    spool = Spool(path)
    try:
        return spool.count()
    finally:
        spool.close()


def ticks_received(portal) -> int:
    with portal.lock:
        return len({s["ts"] for s in portal.samples.values()})


def test_cli_reports_simulated_usage_and_heartbeats_then_stops_cleanly(portal, tmp_path, agent_process):
    portal.assignments = ASSIGNMENTS
    process = agent_process(portal.url, portal.token, tmp_path / "spool.sqlite")
    wait_for(lambda: ticks_received(portal) >= 3)
    code, err = stop(process)

    assert code == 0, err
    assert "received SIGTERM, stopping" in err
    assert spooled(tmp_path / "spool.sqlite") == 0
    samples = list(portal.samples.values())
    assert len(samples) % PER_TICK == 0 and len(samples) >= 3 * PER_TICK
    assert {s["node"] for s in samples} == {"sim-node-1"}
    assert {s["pod_uid"] for s in samples} == {None, "pod-1", "pod-2"}
    assert all(s["interval_s"] == 0.2 for s in samples)
    assert all(0 <= s["gpu_util_pct"] <= 50 for s in samples if s["pod_uid"] == "pod-1")
    assert set(portal.times_received.values()) == {1}
    assert portal.heartbeats[0]["node"] == "sim-node-1"
    assert [g["index"] for g in portal.heartbeats[0]["gpus"]] == [0, 1]


def test_cli_started_while_portal_is_down_delivers_everything_once_it_is_up(portal, tmp_path, agent_process):
    portal.stop()
    process = agent_process(portal.url, portal.token, tmp_path / "spool.sqlite")
    time.sleep(1.0)  # several intervals with the portal unreachable
    portal.start()
    wait_for(lambda: ticks_received(portal) >= 5 and spooled(tmp_path / "spool.sqlite") == 0, timeout_s=10)
    code, err = stop(process)

    assert code == 0, err
    assert ticks_received(portal) >= 5  # the ticks collected during the outage arrived too
    assert len(portal.samples) == ticks_received(portal) * 2  # no assignments were readable: GPUs only
    assert set(portal.times_received.values()) == {1}
    assert spooled(tmp_path / "spool.sqlite") == 0


def test_cli_without_token_is_a_usage_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AGENT_")}
    result = subprocess.run([sys.executable, "-m", "nodeagent", "--portal", "http://127.0.0.1:9"],
                            cwd=REPO, capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 2
    assert "--token (or GPU_AGENT_TOKEN) is required" in result.stderr


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_nvml_library_present(), reason="this machine has NVML; the missing-NVML path cannot show")
def test_cli_without_nvml_exits_3_with_a_clear_message(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "nodeagent", "--portal", "http://127.0.0.1:9", "--token", "t",
         "--collector", "nvml", "--spool", str(tmp_path / "spool.sqlite")],
        cwd=REPO, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 3
    assert "NVML is not available on this machine" in result.stderr
    assert "--collector simulated" in result.stderr
    assert not (tmp_path / "spool.sqlite").exists()  # nothing was started
