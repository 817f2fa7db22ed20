"""The node agent reads the kubelet's per-claim used bytes (kubelet_volume_stats_used_bytes) and sends
them with a usage post every few intervals, for storage billed by use."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx

from nodeagent.agent import Agent, AgentConfig
from nodeagent.kubelet import KubeletVolumeStats, parse_volume_stats
from nodeagent.simulated import SimulatedCollector
from nodeagent.spool import Spool

EXPOSITION = """\
# HELP kubelet_volume_stats_used_bytes [ALPHA] Number of used bytes in the volume
# TYPE kubelet_volume_stats_used_bytes gauge
kubelet_volume_stats_used_bytes{namespace="gpu-ws-vision-lab",persistentvolumeclaim="vol-weights"} 2.147483648e+09
kubelet_volume_stats_used_bytes{namespace="gpu-ws-nlp-group",persistentvolumeclaim="ds-vision-lab-imagenet-v3"} 1024
kubelet_volume_stats_used_bytes{namespace="gpu-ws-a\\"b",persistentvolumeclaim="odd"} 7
kubelet_volume_stats_used_bytes{namespace="broken",persistentvolumeclaim="nan"} NaN
kubelet_volume_stats_used_bytes{persistentvolumeclaim="no-namespace"} 5
kubelet_volume_stats_capacity_bytes{namespace="gpu-ws-vision-lab",persistentvolumeclaim="vol-weights"} 1.073741824e+11
kubelet_volume_stats_used_bytes{namespace="gpu-ws-vision-lab",persistentvolumeclaim="vol-empty"} 0 1732860000000
"""


def test_the_used_bytes_of_each_claim_are_read_and_nothing_else():
    assert parse_volume_stats(EXPOSITION) == [
        {"namespace": 'gpu-ws-a"b', "claim": "odd", "used_bytes": 7},
        {"namespace": "gpu-ws-nlp-group", "claim": "ds-vision-lab-imagenet-v3", "used_bytes": 1024},
        {"namespace": "gpu-ws-vision-lab", "claim": "vol-empty", "used_bytes": 0},
        {"namespace": "gpu-ws-vision-lab", "claim": "vol-weights", "used_bytes": 2 * 2**30},
    ]
    assert parse_volume_stats("kubelet_volume_stats_used_bytes{namespace=broken 3\n") == []


def test_the_kubelet_is_read_with_the_service_account_token(tmp_path):
    (tmp_path / "token").write_text("sa-token\n")
    seen = []

    def kubelet(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("authorization")))
        return httpx.Response(200, text=EXPOSITION)

    stats = KubeletVolumeStats("https://10.0.0.5:10250/metrics", account_dir=tmp_path,
                               transport=httpx.MockTransport(kubelet))
    assert len(stats.read()) == 4
    assert seen == [("https://10.0.0.5:10250/metrics", "Bearer sa-token")]
    stats.close()


class RecordingClient:
    def __init__(self) -> None:
        self.volume_posts: list[tuple[str, list[dict]]] = []

    def send_volumes(self, node, volumes):
        self.volume_posts.append((node, volumes))
        return {"accepted": [], "rejected": [], "volumes": {"recorded": len(volumes), "unknown": 0}}

    def send_heartbeat(self, node, payload):
        return {}


class FixedStats:
    def __init__(self, volumes):
        self.volumes = volumes

    def read(self):
        return self.volumes

    def close(self):
        pass


class FailingStats(FixedStats):
    def read(self):
        raise httpx.ConnectError("kubelet down")


def make_agent(tmp_path, stats, **config) -> tuple[Agent, RecordingClient]:
    client = RecordingClient()
    collector = SimulatedCollector(lambda: [], node="node-1", gpus=1, seed=1)
    agent = Agent(AgentConfig(node="node-1", **config), collector, Spool(tmp_path / "spool.sqlite"), client,
                  clock=lambda: datetime(2026, 11, 29, 6, tzinfo=UTC), volume_stats=stats)
    return agent, client


def test_the_agent_sends_volume_stats_every_few_intervals(tmp_path):
    volumes = parse_volume_stats(EXPOSITION)
    agent, client = make_agent(tmp_path, FixedStats(volumes), volumes_every=3)
    for _ in range(7):
        agent.tick()
    assert client.volume_posts == [("node-1", volumes)] * 3  # ticks 0, 3 and 6
    assert agent.send_volumes() == 4
    json.dumps(client.volume_posts)  # what goes on the wire is plain JSON


def test_a_kubelet_that_fails_does_not_stop_the_agent_and_without_it_nothing_is_sent(tmp_path):
    agent, client = make_agent(tmp_path, FailingStats([]), volumes_every=1)
    agent.tick()
    assert agent.send_volumes() is None and client.volume_posts == []
    assert agent.spool.count() > 0  # the usage of the interval was still collected
    quiet, quiet_client = make_agent(tmp_path / "other", None)
    quiet.tick()
    assert quiet.send_volumes() is None and quiet_client.volume_posts == []


def test_the_kubelets_certificate_is_checked_against_the_cluster_ca_unless_told_not_to(tmp_path):
    (tmp_path / "ca.crt").write_text("")
    checked = KubeletVolumeStats("https://10.0.0.5:10250/metrics", account_dir=tmp_path,
                                 transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    skipped = KubeletVolumeStats("https://10.0.0.5:10250/metrics", account_dir=tmp_path, insecure=True,
                                 transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    assert checked.verify == str(tmp_path / "ca.crt") and skipped.verify is False
    checked.close()
    skipped.close()
