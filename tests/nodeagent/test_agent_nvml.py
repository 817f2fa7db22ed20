"""NVML collector against a fake NVML library object (no GPU here) and a fake /proc tree."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pynvml  # only for its error classes and constants; its C library is not loaded
import pytest

from nodeagent.cgroup import pod_uid_for_pid, pod_uid_from_cgroup
from nodeagent.nvml import NvmlCollector, NvmlUnavailable
from nodeagent.samples import GpuInfo, MigInstance, Reading

MIB = 1024 * 1024
NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
POD_A = "7d0e3c1a-2b4f-4c6d-8e9f-0a1b2c3d4e5f"
POD_B = "11111111-2222-4333-8444-555555555555"
POD_M = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"


@dataclass
class FakeDevice:
    uuid: str
    name: str
    total_mib: int
    used_mib: int
    util: int | None = None  # None: NVML answers NotSupported
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, bytes)
    # (pid, timestamp_us, sm%) samples; None: NotSupported; [] -> NotFound (no samples)
    process_util: list[tuple[int, int, int]] | None = field(default_factory=list)
    mig_slots: list[FakeDevice | None] | None = None  # None: MIG off; None slot: no instance
    gi: int = 0
    ci: int = 0
    lost: bool = False


class FakeNvml:
    """The subset of the pynvml module the collector uses, answering like NVML does."""

    NVMLError = pynvml.NVMLError
    NVMLError_NotFound = pynvml.NVMLError_NotFound
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVMLError_FunctionNotFound = pynvml.NVMLError_FunctionNotFound
    NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE

    def __init__(self, devices: list[FakeDevice], init_error: type[Exception] | None = None) -> None:
        self.devices = devices
        self.init_error = init_error
        self.util_calls: list[tuple[str, int]] = []
        self.shut_down = False

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error()

    def nvmlShutdown(self):
        self.shut_down = True

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        device = self.devices[index]
        if device.lost:
            raise pynvml.NVMLError_GpuIsLost()
        return device

    def nvmlDeviceGetUUID(self, h):
        return h.uuid

    def nvmlDeviceGetName(self, h):
        return h.name.encode()  # older bindings answer bytes

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=h.total_mib * MIB, used=h.used_mib * MIB, free=(h.total_mib - h.used_mib) * MIB)

    def nvmlDeviceGetUtilizationRates(self, h):
        if h.util is None:
            raise pynvml.NVMLError_NotSupported()
        return SimpleNamespace(gpu=h.util, memory=0)

    def nvmlDeviceGetMigMode(self, h):
        if h.mig_slots is None:
            return [0, 0]
        return [pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_ENABLE]

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return len(h.mig_slots or [])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, slot):
        if h.mig_slots[slot] is None:
            raise pynvml.NVMLError_NotFound()
        return h.mig_slots[slot]

    def nvmlDeviceGetGpuInstanceId(self, h):
        return h.gi

    def nvmlDeviceGetComputeInstanceId(self, h):
        return h.ci

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in h.processes]

    def nvmlDeviceGetProcessUtilization(self, h, last_seen):
        self.util_calls.append((h.uuid, last_seen))
        if h.process_util is None:
            raise pynvml.NVMLError_NotSupported()
        fresh = [s for s in h.process_util if s[1] > last_seen]
        if not fresh:
            raise pynvml.NVMLError_NotFound()
        return [SimpleNamespace(pid=p, timeStamp=t, smUtil=sm, memUtil=0, encUtil=0, decUtil=0) for p, t, sm in fresh]


def write_proc(root: Path, pid: int, cgroup: str) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "cgroup").write_text(cgroup)


@pytest.fixture
def proc_root(tmp_path) -> Path:
    root = tmp_path / "proc"
    a = POD_A.replace("-", "_")
    # pod A: two processes, cgroup v2 with the systemd driver (uid dashes written as underscores)
    write_proc(root, 100, f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice/"
                          "cri-containerd-4f1e9a.scope\n")
    write_proc(root, 101, f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{a}.slice/"
                          "cri-containerd-77aa01.scope\n")
    # pod B: cgroup v1 with the cgroupfs driver
    write_proc(root, 200, f"12:memory:/kubepods/besteffort/pod{POD_B}/0b1c2d3e\n"
                          f"11:cpu,cpuacct:/kubepods/besteffort/pod{POD_B}/0b1c2d3e\n")
    # a process of the host, not in any pod
    write_proc(root, 300, "0::/user.slice/user-1000.slice/session-3.scope\n")
    # pod on a MIG instance, guaranteed QoS (no QoS level in the path)
    write_proc(root, 500, f"0::/kubepods.slice/kubepods-pod{POD_M.replace('-', '_')}.slice/cri-containerd-9.scope\n")
    # pid 400 has exited: no /proc entry
    return root


def h100(**overrides) -> FakeDevice:
    values = dict(
        uuid="GPU-aaaa", name="NVIDIA H100 80GB HBM3", total_mib=81559, used_mib=30000, util=87,
        processes=[(100, 10000 * MIB), (101, 2000 * MIB), (200, 5000 * MIB), (300, 700 * MIB), (400, 64 * MIB)],
        process_util=[(100, 1_000, 30), (100, 2_000, 50), (101, 2_000, 20), (300, 2_000, 9)],
    )
    return FakeDevice(**(values | overrides))


def a100_with_mig() -> FakeDevice:
    big = FakeDevice(uuid="MIG-1111", name="NVIDIA A100-SXM4-40GB MIG 3g.20gb", total_mib=19968, used_mib=4096,
                     processes=[(500, 4000 * MIB)], process_util=None, gi=1, ci=0)
    small = FakeDevice(uuid="MIG-2222", name="NVIDIA A100-SXM4-40GB MIG 1g.5gb", total_mib=4864, used_mib=0,
                       gi=9, ci=0)
    return FakeDevice(uuid="GPU-bbbb", name="NVIDIA A100-SXM4-40GB", total_mib=40960, used_mib=4200, util=None,
                      mig_slots=[big, None, small])


def test_inventory_lists_gpus_and_their_mig_instances():
    collector = NvmlCollector(FakeNvml([h100(), a100_with_mig()]))

    assert collector.inventory() == [
        GpuInfo(uuid="GPU-aaaa", index=0, model="NVIDIA H100 80GB HBM3", memory_mib=81559),
        GpuInfo(uuid="GPU-bbbb", index=1, model="NVIDIA A100-SXM4-40GB", memory_mib=40960, mig_enabled=True,
                mig_instances=(MigInstance("MIG-1111", "3g.20gb", 19968, 1, 0),
                               MigInstance("MIG-2222", "1g.5gb", 4864, 9, 0))),
    ]


def test_processes_are_mapped_to_pods_with_memory_and_utilisation(proc_root):
    collector = NvmlCollector(FakeNvml([h100()]), proc_root=proc_root)

    readings = collector.sample(NOW)

    assert readings == [
        Reading("GPU-aaaa", 0, None, 87.0, 30000),  # the whole device, host process included
        Reading("GPU-aaaa", 0, POD_B, 0.0, 5000),  # no utilisation sample: idle
        Reading("GPU-aaaa", 0, POD_A, 60.0, 12000),  # mean(30, 50) + 20; 10000 + 2000 MiB
    ]


def test_mig_instances_are_reported_with_their_own_uuid_and_pods(proc_root):
    collector = NvmlCollector(FakeNvml([a100_with_mig()]), proc_root=proc_root)

    readings = collector.sample(NOW)

    assert readings == [
        Reading("GPU-bbbb", 0, None, None, 4200),  # NVML has no utilisation for a MIG-enabled GPU
        Reading("MIG-1111", 0, None, None, 4096),
        Reading("MIG-1111", 0, POD_M, None, 4000),
        Reading("MIG-2222", 0, None, None, 0),
    ]


def test_process_utilisation_asks_only_for_new_samples_and_treats_none_as_idle(proc_root):
    nvml = FakeNvml([h100()])
    collector = NvmlCollector(nvml, proc_root=proc_root)

    collector.sample(NOW)
    second = collector.sample(NOW)  # no sample newer than 2000 us: NVML raises NotFound

    assert nvml.util_calls == [("GPU-aaaa", 0), ("GPU-aaaa", 2_000)]
    assert {r.pod_uid: r.gpu_util_pct for r in second if r.pod_uid} == {POD_A: 0.0, POD_B: 0.0}


def test_unknown_process_memory_counts_as_zero_and_a_lost_gpu_does_not_stop_the_others(proc_root):
    lost = h100(uuid="GPU-lost", lost=True)
    ok = h100(uuid="GPU-cccc", processes=[(200, None)], process_util=[])
    collector = NvmlCollector(FakeNvml([lost, ok]), proc_root=proc_root)

    readings = collector.sample(NOW)

    assert readings == [Reading("GPU-cccc", 1, None, 87.0, 30000), Reading("GPU-cccc", 1, POD_B, 0.0, 0)]


@pytest.mark.parametrize("error", [pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded,
                                   pynvml.NVMLError_NoPermission])
def test_nvml_that_cannot_start_raises_a_clear_error(error):
    with pytest.raises(NvmlUnavailable, match="NVML could not start"):
        NvmlCollector(FakeNvml([], init_error=error))


def test_close_shuts_nvml_down():
    nvml = FakeNvml([])
    NvmlCollector(nvml).close()
    assert nvml.shut_down


@pytest.mark.parametrize(
    ("cgroup", "pod"),
    [
        ("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f5e2a1b_3c4d_4e5f_8a9b_"
         "0c1d2e3f4a5b.slice/cri-containerd-1a2b.scope", "0f5e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"),
        ("0::/kubepods.slice/kubepods-pod0f5e2a1b_3c4d_4e5f_8a9b_0c1d2e3f4a5b.slice/crio-77.scope",
         "0f5e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"),
        ("11:devices:/kubepods/burstable/pod0f5e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b/abcdef\n"
         "1:name=systemd:/kubepods/burstable/pod0f5e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b/abcdef",
         "0f5e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"),
        ("4:pids:/kubepods/pod0f5e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b/abcdef", "0f5e2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b"),
        # a static (mirror) pod: the uid is a 32-digit config hash
        ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b2f0c8e9d1a4b3c5e7f9a0b1c2d3e4f"
         ".slice/cri-containerd-5.scope", "6b2f0c8e9d1a4b3c5e7f9a0b1c2d3e4f"),
        ("0::/user.slice/user-1000.slice/session-2.scope", None),
        ("12:memory:/docker/3f4e5d6c7b8a", None),
        ("0::/system.slice/podman-pod1234.slice", None),
        ("", None),
    ],
)
def test_pod_uid_is_read_from_cgroup_v1_and_v2_paths(cgroup, pod):
    assert pod_uid_from_cgroup(cgroup) == pod


def test_pod_uid_for_a_pid_reads_the_proc_tree(proc_root):
    assert pod_uid_for_pid(100, proc_root) == POD_A
    assert pod_uid_for_pid(300, proc_root) is None
    assert pod_uid_for_pid(400, proc_root) is None  # exited
