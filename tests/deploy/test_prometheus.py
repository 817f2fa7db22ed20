"""Alert rules (promtool), Grafana dashboards (every query names an exported metric) and a real
Prometheus scraping the live portal and a node agent. Skipped only where Debian's prometheus is absent."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from nodeagent import metrics as agent_metrics
from nodeagent.simulated import SimulatedCollector, parse_assignments
from nodeagent.spool import Spool
from portal.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus"
DASHBOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))
METRIC = re.compile(r"\bgpu_platform_[a-zA-Z0-9_]+")

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool absent (apt-get install prometheus)")
needs_prometheus = pytest.mark.skipif(shutil.which("prometheus") is None,
                                      reason="prometheus absent (apt-get install prometheus)")


@needs_promtool
def test_alert_rules_are_valid():
    out = subprocess.run(["promtool", "check", "rules", str(RULES / "rules.yml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "10 rules found" in out.stdout


@needs_promtool
def test_alert_rules_unit_tests_pass():
    out = subprocess.run(["promtool", "test", "rules", "rules_test.yml"], cwd=RULES, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_a_broken_alert_fails_its_unit_test(tmp_path):
    rules = (RULES / "rules.yml").read_text().replace("> 60", "> 600")
    (tmp_path / "rules.yml").write_text(rules)
    shutil.copy(RULES / "rules_test.yml", tmp_path / "rules_test.yml")
    out = subprocess.run(["promtool", "test", "rules", "rules_test.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and "GpuPlatformSchedulerStalled" in out.stdout + out.stderr


@needs_promtool
@pytest.mark.parametrize(("alert", "old", "new"), [
    ("GpuPlatformHttp5xx", "> 0.05", "> 0"),                           # back to firing on any error
    ("GpuPlatformScrapeDown", "for: 3m", "for: 0m"),
    ("GpuPlatformCeleryTaskFailures", ">= 3", ">= 1"),
    ("GpuPlatformNodeNotReady", "(gpu_platform_node_ready) == 0", "(gpu_platform_node_ready) == 1"),
])
def test_each_new_alert_has_a_unit_test_that_catches_a_change(tmp_path, alert, old, new):
    rules = (RULES / "rules.yml").read_text()
    assert rules.count(old) == 1
    (tmp_path / "rules.yml").write_text(rules.replace(old, new))
    shutil.copy(RULES / "rules_test.yml", tmp_path / "rules_test.yml")
    out = subprocess.run(["promtool", "test", "rules", "rules_test.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and alert in out.stdout + out.stderr


def test_alerts_cover_what_operators_need():
    names = {r["alert"] for g in yaml.safe_load((RULES / "rules.yml").read_text())["groups"] for r in g["rules"]}
    assert names == {"GpuPlatformSchedulerStalled", "GpuPlatformNodeAgentSilent", "GpuPlatformAgentSpoolGrowing",
                     "GpuPlatformGpuXidErrors", "GpuPlatformIdleAllocatedGpus", "GpuPlatformBudgetExceeded",
                     "GpuPlatformHttp5xx", "GpuPlatformScrapeDown", "GpuPlatformCeleryTaskFailures",
                     "GpuPlatformNodeNotReady"}


# --- what the code exports -------------------------------------------------------------------------------

SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"], "gauge": [""]}


def sample_names(text: str) -> set[str]:
    """The series names an exposition declares (a family with no series yet counts too)."""
    names = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, [""])}
    return names


def agent_server(tmp_path):
    collector = agent_metrics.RecordingCollector(SimulatedCollector(
        lambda: parse_assignments({"assignments": [{"pod_uid": "p", "gpu_index": 0, "milli": 1000,
                                                    "memory_mib": 1000}]}),
        node="sim-1", gpus=2, model="NVIDIA H100", memory_mib=81920, seed=3))
    collector.inventory()
    collector.sample(datetime.now(UTC))
    uploads = agent_metrics.UploadWatch(type("C", (), {"send_usage": lambda self, n, s: None})())
    uploads.send_usage("sim-1", [])
    stats = agent_metrics.SimulatedDeviceStats()
    stats.record_xid(0, 48)
    spool = Spool(tmp_path / "spool.sqlite")
    server = agent_metrics.serve(agent_metrics.AgentMetrics("sim-1", collector, spool, uploads, stats), 0,
                                 "127.0.0.1")
    return server, spool


@pytest.fixture
def exported(client, cluster, settings, tmp_path) -> set[str]:
    """Every sample name the portal (with its token, so with workspace series) and an agent export."""
    from billing.models import Budget
    from portal import metrics
    from scheduling import metrics as shared
    from scheduling.cycle.run import CycleReport

    settings.METRICS_TOKEN = "t"
    Budget.objects.create(workspace=cluster.vision, amount=Decimal(10))
    shared.reset_shared()
    shared.record_cycle(CycleReport(binds=1, seconds=0.1))
    metrics._task_failure(sender=type("T", (), {"name": "x"}))

    names = sample_names(client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode())
    server, spool = agent_server(tmp_path)
    try:
        names |= sample_names(httpx.get(f"http://127.0.0.1:{server.server_port}/metrics").text)
    finally:
        server.shutdown()
        spool.close()
    shared.reset_shared()
    return names


def test_every_dashboard_query_and_alert_names_an_exported_metric(exported):
    assert len(DASHBOARDS) == 5
    used: set[str] = set()
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        assert board["uid"] and board["panels"], path.name
        for panel in board["panels"]:
            for target in panel["targets"]:
                names = set(METRIC.findall(target["expr"]))
                assert names, f"{path.name}: {panel['title']}: no platform metric in {target['expr']}"
                missing = names - exported
                assert not missing, f"{path.name}: {panel['title']}: not exported: {missing}"
                used |= names
        for variable in board["templating"]["list"]:
            if variable["type"] == "query":
                assert set(METRIC.findall(variable["definition"])) <= exported, path.name
    rules = (RULES / "rules.yml").read_text()
    assert set(METRIC.findall(rules)) <= exported
    # the dashboards show every family the code exports
    families = {re.sub(r"_(bucket|sum|count|total)$", "", n) for n in exported if n.startswith("gpu_platform_")}
    shown = {re.sub(r"_(bucket|sum|count|total)$", "", n) for n in used}
    assert families - shown == set()


def test_the_dashboard_check_catches_a_metric_that_does_not_exist(exported):
    assert "gpu_platform_pool_gpus" in exported
    assert "gpu_platform_pool_gpu_count" not in exported


# --- a real Prometheus -----------------------------------------------------------------------------------

def query(base: str, promql: str) -> list[dict]:
    answer = httpx.get(f"{base}/api/v1/query", params={"query": promql}, timeout=5)
    answer.raise_for_status()  # a starting Prometheus answers 503 in plain text: the caller tries again
    answer = answer.json()
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@needs_prometheus
@pytest.mark.slow
def test_prometheus_scrapes_the_portal_and_an_agent(live_daphne, transactional_db, cluster, tmp_path):
    portal = live_daphne.url.removeprefix("http://")
    server, spool = agent_server(tmp_path)
    port = free_port()
    config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
              "scrape_configs": [
                  {"job_name": "gpu-platform-portal", "static_configs": [{"targets": [portal]}]},
                  {"job_name": "gpu-node-agent",
                   "static_configs": [{"targets": [f"127.0.0.1:{server.server_port}"]}]}]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                pools = query(base, 'gpu_platform_pool_gpus{pool="h100"}')
                util = query(base, "gpu_platform_agent_gpu_utilization_ratio")
                cycles = query(base, "gpu_platform_scheduler_cycle_seconds_count")
                if pools and util and cycles:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()
            time.sleep(0.5)
        assert float(pools[0]["value"][1]) == 16
        assert pools[0]["metric"]["job"] == "gpu-platform-portal"
        assert {r["metric"]["gpu"] for r in util} == {"0", "1"}
        assert all(r["metric"]["Hostname"] == "sim-1" and r["metric"]["job"] == "gpu-node-agent" for r in util)
        assert float(cycles[0]["value"][1]) >= 0
        up = {r["metric"]["job"]: r["value"][1] for r in query(base, "up")}
        assert up == {"gpu-platform-portal": "1", "gpu-node-agent": "1"}
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()
        server.shutdown()
        spool.close()
