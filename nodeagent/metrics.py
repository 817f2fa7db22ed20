"""The node agent's own /metrics (`--metrics-port`): per-GPU figures labelled as dcgm-exporter labels them
(gpu, UUID, modelName, Hostname), the spool's depth and the last successful upload.

The agent's loop is left as it is: its collector and portal client are wrapped, so the figures are what
the agent last read and sent. A scrape reaches NVML only for temperature, power and XID errors, through
the collector, which lets no call through once it has shut NVML down.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from nodeagent.samples import GpuInfo, Reading

log = logging.getLogger(__name__)

LABELS = ["gpu", "UUID", "modelName", "Hostname"]
MIB = 1024 * 1024


class RecordingCollector:
    """A collector that keeps the last inventory and the last whole-device readings it returned."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self.gpus: list[GpuInfo] = []
        self.readings: dict[int, Reading] = {}

    def inventory(self) -> list[GpuInfo]:
        gpus = self.inner.inventory()
        with self._lock:
            self.gpus = list(gpus)
        return gpus

    def sample(self, now: datetime) -> list[Reading]:
        readings = self.inner.sample(now)
        by_gpu: dict[int, Reading] = {}
        for r in readings:
            if r.pod_uid is None and not r.gpu_uuid.startswith("MIG-"):
                by_gpu[r.gpu_index] = r
        for r in readings:  # no device reading: the pods' readings summed
            if r.gpu_index in by_gpu and by_gpu[r.gpu_index].pod_uid is None:
                continue
            prev = by_gpu.get(r.gpu_index)
            util = None if r.gpu_util_pct is None else r.gpu_util_pct + ((prev.gpu_util_pct or 0) if prev else 0)
            by_gpu[r.gpu_index] = Reading(r.gpu_uuid, r.gpu_index, "pods", util,
                                          r.mem_used_mib + (prev.mem_used_mib if prev else 0))
        with self._lock:
            self.readings = by_gpu
        return readings

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def snapshot(self) -> tuple[list[GpuInfo], dict[int, Reading]]:
        with self._lock:
            if not self.gpus:
                try:
                    self.gpus = list(self.inner.inventory())
                except Exception as exc:  # the inventory is retried at the next scrape
                    log.warning("metrics: inventory failed: %s", exc)
            return list(self.gpus), dict(self.readings)


class UploadWatch:
    """A portal client that notes when an upload last succeeded."""

    def __init__(self, inner: Any, clock: Callable[[], float] = time.time) -> None:
        self.inner = inner
        self._clock = clock
        self.last_upload: float | None = None

    def send_usage(self, node: str, samples: list[dict]):
        result = self.inner.send_usage(node, samples)
        self.last_upload = self._clock()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SimulatedDeviceStats:
    """Temperature and power that follow utilisation; XID errors only when a test records one."""

    def __init__(self) -> None:
        self.xids: Tally[tuple[int, int]] = Tally()

    def read(self, index: int, reading: Reading | None) -> tuple[float | None, float | None]:
        util = (reading.gpu_util_pct or 0.0) if reading else 0.0
        return 35.0 + 0.4 * util, 60.0 + 3.0 * util

    def record_xid(self, index: int, xid: int) -> None:
        self.xids[(index, xid)] += 1


class NvmlDeviceStats:
    """Temperature, power and XID errors as the NVML collector reads them: its one event set, and its lock,
    so a scrape never reaches NVML after the agent has shut it down."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector

    @property
    def xids(self) -> dict[tuple[int, int], int]:
        return self.collector.xid_counts() or {}

    def read(self, index: int, reading: Reading | None) -> tuple[float | None, float | None]:
        return self.collector.temperature_and_power(index)


class AgentMetrics:
    """The prometheus_client collector for the agent's figures."""

    def __init__(self, node: str, collector: RecordingCollector, spool: Any, uploads: UploadWatch | None,
                 stats: Any) -> None:
        self.node, self.collector, self.spool, self.uploads, self.stats = node, collector, spool, uploads, stats

    def collect(self):
        gpus, readings = self.collector.snapshot()
        fams = {
            "util": GaugeMetricFamily("gpu_platform_agent_gpu_utilization_ratio", "GPU utilisation (0-1).",
                                      labels=LABELS),
            "mem": GaugeMetricFamily("gpu_platform_agent_gpu_memory_used_bytes", "GPU memory in use.",
                                     labels=LABELS),
            "total": GaugeMetricFamily("gpu_platform_agent_gpu_memory_total_bytes", "GPU memory.", labels=LABELS),
            "temp": GaugeMetricFamily("gpu_platform_agent_gpu_temperature_celsius", "GPU temperature.",
                                      labels=LABELS),
            "power": GaugeMetricFamily("gpu_platform_agent_gpu_power_watts", "GPU power draw.", labels=LABELS),
        }
        xid = CounterMetricFamily("gpu_platform_agent_gpu_xid_errors", "XID errors reported by the driver.",
                                  labels=[*LABELS, "xid"])
        for gpu in gpus:
            labels = [str(gpu.index), gpu.uuid, gpu.model, self.node]
            reading = readings.get(gpu.index)
            fams["total"].add_metric(labels, gpu.memory_mib * MIB)
            if reading is not None:
                if reading.gpu_util_pct is not None:
                    fams["util"].add_metric(labels, reading.gpu_util_pct / 100.0)
                fams["mem"].add_metric(labels, reading.mem_used_mib * MIB)
            temp, power = self.stats.read(gpu.index, reading)
            if temp is not None:
                fams["temp"].add_metric(labels, temp)
            if power is not None:
                fams["power"].add_metric(labels, power)
            for (index, code), count in sorted(self.stats.xids.items()):
                if index == gpu.index:
                    xid.add_metric([*labels, str(code)], count)
        yield from fams.values()
        yield xid
        spool = GaugeMetricFamily("gpu_platform_agent_spool_samples", "Samples waiting in the spool.",
                                  labels=["Hostname"])
        spool.add_metric([self.node], self.spool.count())
        yield spool
        last = self.uploads.last_upload if self.uploads else None
        if last is not None:
            yield _one("gpu_platform_agent_last_upload_timestamp_seconds", "When an upload last succeeded (Unix time).",
                       self.node, last)

def _one(name: str, doc: str, node: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=["Hostname"])
    family.add_metric([node], value)
    return family


def registry_for(metrics: AgentMetrics) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return registry


def serve(metrics: AgentMetrics, port: int, address: str = "0.0.0.0"):
    """Serve /metrics on a daemon thread; returns the server (its `server_port` is the bound port)."""
    server, _thread = start_http_server(port, addr=address, registry=registry_for(metrics))
    return server
