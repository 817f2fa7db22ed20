"""GPU health in the heartbeat: what NVML gives (utilisation, memory, temperature, uncorrected ECC, XID
events), None for what it cannot tell, believable figures from the simulated collector, and a heartbeat
that goes out even when health cannot be read."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import pynvml
from test_agent_nvml import FakeDevice, FakeNvml

from nodeagent import __version__
from nodeagent.agent import Agent, AgentConfig
from nodeagent.nvml import NvmlCollector
from nodeagent.portal import PortalClient
from nodeagent.simulated import Assignment, SimulatedCollector
from nodeagent.spool import Spool

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


class HealthNvml(FakeNvml):
    """FakeNvml with temperatures, ECC counters and an XID event queue (ECC None: a board without ECC)."""

    nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError
    NVMLError_Timeout = pynvml.NVMLError_Timeout

    def __init__(self, devices, temperatures, ecc):
        super().__init__(devices)
        self.temperatures, self.ecc = temperatures, ecc
        self.events: list[tuple[int, int]] = []  # (device index, XID)
        self.registered: list[int] = []

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self.temperatures[self.devices.index(h)]

    def nvmlDeviceGetTotalEccErrors(self, h, error_type, counter):
        assert (error_type, counter) == (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
        value = self.ecc[self.devices.index(h)]
        if value is None:
            raise pynvml.NVMLError_NotSupported()
        return value

    def nvmlEventSetCreate(self):
        return "event-set"

    def nvmlDeviceRegisterEvents(self, h, types, event_set):
        self.registered.append(self.devices.index(h))

    def nvmlEventSetWait(self, event_set, timeout_ms):
        assert timeout_ms == 0  # never blocks the heartbeat
        if not self.events:
            raise pynvml.NVMLError_Timeout()
        index, xid = self.events.pop(0)
        return SimpleNamespace(device=self.devices[index], eventType=self.nvmlEventTypeXidCriticalError, eventData=xid)

    def nvmlDeviceGetIndex(self, h):
        return self.devices.index(h)

    def nvmlEventSetFree(self, event_set):
        self.freed = True


def two_gpus():
    return [FakeDevice("GPU-0", "NVIDIA H100 80GB HBM3", 81559, 40000, util=93),
            FakeDevice("GPU-1", "NVIDIA H100 80GB HBM3", 81559, 0, util=0)]


def test_nvml_health_reads_temperature_ecc_and_xid_events():
    nvml = HealthNvml(two_gpus(), temperatures=[71, 33], ecc=[3, None])
    collector = NvmlCollector(nvml)
    assert nvml.registered == [0, 1]
    nvml.events += [(0, 79), (0, 48), (1, 13)]
    health = collector.health()
    assert health[0] == {"util_pct": 93.0, "memory_used_mib": 40000, "temperature_c": 71, "ecc_uncorrected": 3,
                         "xid_count": 2, "xid_last": 48}
    assert health[1] == {"util_pct": 0.0, "memory_used_mib": 0, "temperature_c": 33, "ecc_uncorrected": None,
                         "xid_count": 1, "xid_last": 13}
    assert collector.health()[0]["xid_count"] == 2  # counted since the agent started, not per heartbeat
    collector.close()
    assert nvml.freed and nvml.shut_down


def test_nvml_health_is_none_where_nvml_cannot_tell():
    devices = two_gpus()
    devices[1].util = None  # MIG mode: no utilisation
    nvml = FakeNvml(devices)  # no temperature, ECC or event functions at all (older bindings)
    health = NvmlCollector(nvml).health()
    assert health[0]["util_pct"] == 93.0 and health[0]["temperature_c"] is None
    assert health[0]["ecc_uncorrected"] is None and health[0]["xid_count"] is None
    assert health[1]["util_pct"] is None


def test_nvml_health_skips_a_lost_gpu():
    devices = two_gpus()
    devices[0].lost = True
    assert list(NvmlCollector(HealthNvml(devices, [0, 40], [0, 0])).health()) == [1]


def test_simulated_health_follows_utilisation_and_reports_injected_xids():
    collector = SimulatedCollector(lambda: [Assignment("pod-a", 0, 1000, 70000)], node="n", gpus=2, seed=3)
    collector.sample(NOW)
    collector.xids[1] = [79]
    health = collector.health()
    assert health[0]["util_pct"] > 20 and health[1]["util_pct"] == 0
    assert health[0]["temperature_c"] > health[1]["temperature_c"]
    assert health[0]["memory_used_mib"] > 0 and health[0]["ecc_uncorrected"] == 0
    assert (health[1]["xid_count"], health[1]["xid_last"]) == (1, 79)


def make_agent(portal, tmp_path, collector):
    return Agent(AgentConfig(node="node-1"), collector, Spool(tmp_path / "s.sqlite"), PortalClient(portal.url, portal.token))


def test_the_heartbeat_carries_version_and_health(portal, tmp_path):
    collector = SimulatedCollector(lambda: [Assignment("pod-a", 1, 1000, 70000)], node="node-1", gpus=2)
    collector.sample(NOW)
    assert make_agent(portal, tmp_path, collector).heartbeat()
    [sent] = portal.heartbeats
    assert sent["agent_version"] == __version__
    assert [g["index"] for g in sent["gpus"]] == [0, 1]
    assert sent["gpus"][1]["util_pct"] > 0 and "temperature_c" in sent["gpus"][0]
    assert sent["gpus"][0]["uuid"] == collector.gpu_uuid(0)


def test_a_health_failure_does_not_stop_the_heartbeat(portal, tmp_path):
    collector = SimulatedCollector(lambda: [], node="node-1", gpus=1)

    def broken():
        raise RuntimeError("NVML went away")

    collector.health = broken
    assert make_agent(portal, tmp_path, collector).heartbeat()
    [sent] = portal.heartbeats
    assert sent["gpus"][0]["index"] == 0 and "temperature_c" not in sent["gpus"][0]


def test_the_default_heartbeat_is_well_inside_the_portals_window():
    config = AgentConfig(node="n")
    assert config.interval_s * config.heartbeat_every <= 30


class ClosingNvml(HealthNvml):
    """HealthNvml with power readings, that counts event sets and fails any call made after nvmlShutdown
    (the real library's state is gone then: on an H200 a call into a freed event set ended the agent)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.event_sets = 0
        self.after_shutdown: list[str] = []

    def __getattribute__(self, name):
        if name.startswith("nvml") and name != "nvmlShutdown" and object.__getattribute__(self, "shut_down"):
            object.__getattribute__(self, "after_shutdown").append(name)
        return object.__getattribute__(self, name)

    def nvmlEventSetCreate(self):
        self.event_sets += 1
        return super().nvmlEventSetCreate()

    def nvmlDeviceGetPowerUsage(self, h):
        return 412_500  # milliwatts


def test_metrics_read_xids_temperature_and_power_through_the_collector_and_nothing_after_close():
    from nodeagent.metrics import NvmlDeviceStats

    nvml = ClosingNvml(two_gpus(), temperatures=[71, 33], ecc=[0, 0])
    collector = NvmlCollector(nvml)
    stats = NvmlDeviceStats(collector)
    nvml.events += [(1, 79), (1, 79), (0, 48)]
    assert stats.xids == {(1, 79): 2, (0, 48): 1}
    assert collector.health()[1]["xid_count"] == 2  # the heartbeat counts the same events, not a second set's
    assert stats.read(0, None) == (71.0, 412.5)
    assert nvml.event_sets == 1
    assert not [t for t in threading.enumerate() if t.name == "xid-events"]  # nothing waits inside NVML
    collector.close()
    assert stats.read(0, None) == (None, None) and stats.xids == {}
    assert nvml.after_shutdown == []
