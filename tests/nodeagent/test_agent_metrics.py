"""The agent's /metrics: dcgm-style GPU labels, spool depth, the last upload; in-process and from the CLI."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from nodeagent import metrics as agent_metrics
from nodeagent.simulated import SimulatedCollector, parse_assignments
from nodeagent.spool import Spool
from tests.nodeagent.test_agent_cli import REPO, stop, wait_for

ASSIGNMENTS = [{"pod_uid": "pod-1", "gpu_index": 0, "milli": 500, "memory_mib": 8000}]


def parse(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    def __init__(self) -> None:
        self.fail = False

    def send_usage(self, node, samples):
        if self.fail:
            raise OSError("portal down")
        return "ok"


@pytest.fixture
def served(tmp_path):
    inner = SimulatedCollector(lambda: parse_assignments({"assignments": ASSIGNMENTS}), node="gpu-7", gpus=2, model="NVIDIA H100 80GB HBM3",
                               memory_mib=81920, seed=1)
    collector = agent_metrics.RecordingCollector(inner)
    spool = Spool(tmp_path / "spool.sqlite")
    uploads = agent_metrics.UploadWatch(Client(), clock=lambda: 1_700_000_000.0)
    stats = agent_metrics.SimulatedDeviceStats()
    server = agent_metrics.serve(agent_metrics.AgentMetrics("gpu-7", collector, spool, uploads, stats), 0,
                                 "127.0.0.1")
    yield collector, spool, uploads, stats, f"http://127.0.0.1:{server.server_port}/metrics"
    server.shutdown()
    spool.close()


def test_gpu_figures_carry_dcgm_labels(served):
    collector, spool, uploads, stats, url = served
    collector.inventory()
    collector.sample(datetime.now(UTC))
    families = parse(httpx.get(url).text)
    util = families["gpu_platform_agent_gpu_utilization_ratio"]
    assert {s.labels["gpu"] for s in util} == {"0", "1"}
    first = next(s for s in util if s.labels["gpu"] == "0")
    assert first.labels["Hostname"] == "gpu-7" and first.labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert first.labels["UUID"] == collector.inner.gpu_uuid(0)
    assert 0 < first.value <= 1
    memory = {s.labels["gpu"]: s.value for s in families["gpu_platform_agent_gpu_memory_total_bytes"]}
    assert memory == {"0": 81920 * 1024 * 1024, "1": 81920 * 1024 * 1024}
    assert len(families["gpu_platform_agent_gpu_temperature_celsius"]) == 2
    assert len(families["gpu_platform_agent_gpu_power_watts"]) == 2
    assert families["gpu_platform_agent_gpu_xid_errors"] == []


def test_xid_errors_spool_depth_and_last_upload(served):
    collector, spool, uploads, stats, url = served
    collector.inventory()
    stats.record_xid(1, 79)
    stats.record_xid(1, 79)
    families = parse(httpx.get(url).text)
    (xid,) = families["gpu_platform_agent_gpu_xid_errors"]
    assert xid.name == "gpu_platform_agent_gpu_xid_errors_total"
    assert xid.labels["gpu"] == "1" and xid.labels["xid"] == "79" and xid.value == 2
    assert families["gpu_platform_agent_spool_samples"][0].value == 0
    assert "gpu_platform_agent_last_upload_timestamp_seconds" not in families  # nothing sent yet

    samples = collector.sample(datetime.now(UTC))
    from nodeagent.samples import UsageSample

    spool.add([UsageSample.from_reading("gpu-7", datetime.now(UTC), 10, r) for r in samples])
    uploads.inner.fail = True
    with pytest.raises(OSError):
        uploads.send_usage("gpu-7", [])
    families = parse(httpx.get(url).text)
    assert families["gpu_platform_agent_spool_samples"][0].value == len(samples)
    assert "gpu_platform_agent_last_upload_timestamp_seconds" not in families  # a failed upload is no upload
    uploads.inner.fail = False
    uploads.send_usage("gpu-7", [])
    families = parse(httpx.get(url).text)
    assert families["gpu_platform_agent_last_upload_timestamp_seconds"][0].value == 1_700_000_000.0


def test_the_cli_serves_metrics_while_it_uploads(portal, tmp_path):
    portal.assignments = ASSIGNMENTS
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nodeagent", "--portal", portal.url, "--token", portal.token,
         "--collector", "simulated", "--interval", "0.2", "--spool", str(tmp_path / "spool.sqlite"),
         "--node", "sim-node-1", "--sim-gpus", "2", "--metrics-port", str(port), "--metrics-address", "127.0.0.1"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        def uploaded() -> bool:
            try:
                return "gpu_platform_agent_last_upload_timestamp_seconds{" in httpx.get(
                    f"http://127.0.0.1:{port}/metrics").text
            except httpx.HTTPError:
                return False

        wait_for(uploaded, timeout_s=20)
        families = parse(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
        assert {s.labels["Hostname"] for s in families["gpu_platform_agent_gpu_utilization_ratio"]} == {"sim-node-1"}
    finally:
        code, err = stop(process)
    assert code == 0, err
