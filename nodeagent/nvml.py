"""NVML collector: GPU inventory and per-pod usage read through nvidia-ml-py (module ``pynvml``).

The nvml module is passed in, so tests can hand a fake library object at this boundary.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from nodeagent.cgroup import pod_uid_for_pid
from nodeagent.samples import GpuInfo, MigInstance, Reading

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_MIG_PROFILE = re.compile(r"(\d+g\.\d+gb(?:\+me)?)", re.IGNORECASE)


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used on this machine (no driver, no library, no GPU access)."""


def load_nvml() -> Any:
    """Import the real NVML bindings; raise NvmlUnavailable when the package is missing."""
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py not installed
        raise NvmlUnavailable("the nvidia-ml-py package (module pynvml) is not installed") from exc
    return pynvml


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class NvmlCollector:
    """Reads inventory and usage from NVML; one reading per device plus one per pod on it."""

    def __init__(self, nvml: Any, proc_root: Path | str = Path("/proc")) -> None:
        self._nvml = nvml
        self._proc_root = Path(proc_root)
        # Per device uuid: the NVML timestamp (microseconds) of the last process-utilisation sample seen.
        self._last_seen_us: dict[str, int] = {}
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise NvmlUnavailable(f"NVML could not start: {exc}") from exc
        # XID errors reach NVML's event sets only: one set for the process, drained without waiting at each
        # heartbeat and scrape. Nothing waits inside NVML, so close() can shut it down at any time.
        self._xids: Counter[tuple[int, int]] = Counter()  # (GPU index, XID) -> count since start
        self._xid_last: dict[int, int] = {}
        # close() and a /metrics scrape's reads take turns: nothing reaches NVML once it is shut down.
        self._lock = threading.RLock()
        self._closed = False
        self._xid_events = self._register_xid_events()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._xid_events is not None:
                self._read("nvmlEventSetFree", self._xid_events)
                self._xid_events = None
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as exc:
                log.warning("nvmlShutdown failed: %s", exc)

    # -- inventory -------------------------------------------------------------------------------

    def inventory(self) -> list[GpuInfo]:
        gpus = []
        for index in range(self._nvml.nvmlDeviceGetCount()):
            handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            migs = self._mig_instances(handle)
            gpus.append(
                GpuInfo(
                    uuid=_text(self._nvml.nvmlDeviceGetUUID(handle)),
                    index=index,
                    model=_text(self._nvml.nvmlDeviceGetName(handle)),
                    memory_mib=self._nvml.nvmlDeviceGetMemoryInfo(handle).total // MIB,
                    mig_enabled=migs is not None,
                    mig_instances=tuple(info for info, _ in migs or ()),
                )
            )
        return gpus

    def _mig_enabled(self, handle: Any) -> bool:
        nvml = self._nvml
        try:
            current, _pending = nvml.nvmlDeviceGetMigMode(handle)
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound):
            return False
        return current == nvml.NVML_DEVICE_MIG_ENABLE

    def _mig_instances(self, handle: Any) -> list[tuple[MigInstance, Any]] | None:
        """The MIG instances of a GPU with their handles, or None when MIG mode is off."""
        nvml = self._nvml
        if not self._mig_enabled(handle):
            return None
        instances = []
        for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except nvml.NVMLError_NotFound:
                continue  # empty slot: no instance created there
            profile = _MIG_PROFILE.search(_text(nvml.nvmlDeviceGetName(mig)))
            info = MigInstance(
                uuid=_text(nvml.nvmlDeviceGetUUID(mig)),
                profile=profile.group(1).lower() if profile else "",
                memory_mib=nvml.nvmlDeviceGetMemoryInfo(mig).total // MIB,
                gpu_instance_id=nvml.nvmlDeviceGetGpuInstanceId(mig),
                compute_instance_id=nvml.nvmlDeviceGetComputeInstanceId(mig),
            )
            instances.append((info, mig))
        return instances

    # -- health ----------------------------------------------------------------------------------

    def _register_xid_events(self) -> Any:
        """An event set for critical XID errors on every GPU, or None where NVML cannot give one."""
        nvml = self._nvml
        try:
            events = nvml.nvmlEventSetCreate()
        except (nvml.NVMLError, AttributeError) as exc:
            log.info("XID errors will not be reported: %s", exc)
            return None
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                nvml.nvmlDeviceRegisterEvents(nvml.nvmlDeviceGetHandleByIndex(index),
                                              nvml.nvmlEventTypeXidCriticalError, events)
            except (nvml.NVMLError, AttributeError) as exc:  # e.g. not supported on this board
                log.info("XID errors of GPU %d will not be reported: %s", index, exc)
        return events

    def _drain_xid_events(self) -> None:
        nvml = self._nvml
        with self._lock:  # the heartbeat and a /metrics scrape may drain at once
            if self._xid_events is None:
                return
            for _ in range(1000):  # a storm of events must not hold the heartbeat
                try:
                    event = nvml.nvmlEventSetWait(self._xid_events, 0)
                except (nvml.NVMLError, AttributeError):  # NVML_ERROR_TIMEOUT: nothing waiting
                    return
                try:
                    index = nvml.nvmlDeviceGetIndex(event.device)
                except (nvml.NVMLError, AttributeError):
                    continue
                self._xids[(index, int(event.eventData))] += 1
                self._xid_last[index] = int(event.eventData)

    def xid_counts(self) -> dict[tuple[int, int], int] | None:
        """(GPU index, XID) -> how many since the agent started; None where NVML gives no event set."""
        with self._lock:
            if self._xid_events is None:
                return None
            self._drain_xid_events()
            return dict(self._xids)

    def temperature_and_power(self, index: int) -> tuple[float | None, float | None]:
        """GPU `index`'s temperature (C) and power draw (W), None where NVML cannot tell or is shut down."""
        nvml = self._nvml
        with self._lock:
            if self._closed:
                return None, None
            handle = self._read("nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                return None, None
            temperature = self._read("nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
            milliwatts = self._read("nvmlDeviceGetPowerUsage", handle)
        return (None if temperature is None else float(temperature),
                None if milliwatts is None else milliwatts / 1000.0)

    def _read(self, function: str, *args) -> Any:
        """What NVML's `function` answers, or None where this device, driver or binding cannot tell."""
        try:
            return getattr(self._nvml, function)(*args)
        except (self._nvml.NVMLError, AttributeError, TypeError):
            return None

    def health(self) -> dict[int, dict]:
        """Per GPU index: utilisation, memory used, temperature, volatile uncorrected ECC errors and the
        XID errors seen since the agent started. None where NVML cannot tell (MIG mode: no utilisation;
        boards without ECC)."""
        nvml = self._nvml
        xids = self.xid_counts()
        out: dict[int, dict] = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = self._read("nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                continue  # fallen off the bus: the inventory says what is left
            util = self._read("nvmlDeviceGetUtilizationRates", handle)
            memory = self._read("nvmlDeviceGetMemoryInfo", handle)
            temperature = self._read("nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
            ecc = self._read("nvmlDeviceGetTotalEccErrors", handle,
                             getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), getattr(nvml, "NVML_VOLATILE_ECC", 0))
            out[index] = {
                "util_pct": None if util is None else float(util.gpu),
                "memory_used_mib": None if memory is None else memory.used // MIB,
                "temperature_c": None if temperature is None else int(temperature),
                "ecc_uncorrected": None if ecc is None else int(ecc),
                "xid_count": None if xids is None else sum(n for (i, _), n in xids.items() if i == index),
                "xid_last": self._xid_last.get(index),
            }
        return out

    # -- usage -----------------------------------------------------------------------------------

    def sample(self, now: datetime) -> list[Reading]:
        readings: list[Reading] = []
        for index in range(self._nvml.nvmlDeviceGetCount()):
            try:
                readings.extend(self._sample_gpu(index))
            except self._nvml.NVMLError as exc:
                # One failing GPU (fallen off the bus, reset) must not stop reporting for the others.
                log.error("GPU %d could not be read, skipped this interval: %s", index, exc)
        return readings

    def _sample_gpu(self, index: int) -> list[Reading]:
        handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(self._nvml.nvmlDeviceGetUUID(handle))
        readings = [self._device_reading(handle, uuid, index)]
        migs = self._mig_instances(handle)
        if migs is None:
            readings.extend(self._pod_readings(handle, uuid, index))
        else:
            for info, mig in migs:
                readings.append(self._device_reading(mig, info.uuid, index))
                readings.extend(self._pod_readings(mig, info.uuid, index))
        return readings

    def _device_reading(self, handle: Any, uuid: str, index: int) -> Reading:
        nvml = self._nvml
        try:
            util: float | None = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except nvml.NVMLError_NotSupported:  # MIG-enabled GPUs and MIG instances
            util = None
        used = nvml.nvmlDeviceGetMemoryInfo(handle).used // MIB
        return Reading(gpu_uuid=uuid, gpu_index=index, pod_uid=None, gpu_util_pct=util, mem_used_mib=used)

    def _pod_readings(self, handle: Any, uuid: str, index: int) -> list[Reading]:
        nvml = self._nvml
        try:
            processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except nvml.NVMLError_NotSupported:
            return []
        if not processes:
            return []
        sm_util = self._process_utilisation(handle, uuid)
        memory: dict[str, int] = defaultdict(int)
        util: dict[str, float] = defaultdict(float)
        for proc in processes:
            pod = pod_uid_for_pid(proc.pid, self._proc_root)
            if pod is None:
                continue  # host process: not billed to anyone, still counted in the device reading
            memory[pod] += (proc.usedGpuMemory or 0) // MIB  # None: NVML cannot tell
            if sm_util is not None:
                util[pod] += sm_util.get(proc.pid, 0.0)
        return [
            Reading(
                gpu_uuid=uuid,
                gpu_index=index,
                pod_uid=pod,
                gpu_util_pct=None if sm_util is None else min(100.0, util[pod]),
                mem_used_mib=memory[pod],
            )
            for pod in sorted(memory)
        ]

    def _process_utilisation(self, handle: Any, uuid: str) -> dict[int, float] | None:
        """Mean SM utilisation per pid since the last call; None when the device cannot report it."""
        nvml = self._nvml
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, self._last_seen_us.get(uuid, 0))
        except nvml.NVMLError_NotFound:
            return {}  # no samples since last time: the processes were idle
        except nvml.NVMLError_NotSupported:
            return None
        per_pid: dict[int, list[int]] = defaultdict(list)
        for item in samples:
            per_pid[item.pid].append(item.smUtil)
            self._last_seen_us[uuid] = max(self._last_seen_us.get(uuid, 0), item.timeStamp)
        return {pid: sum(values) / len(values) for pid, values in per_pid.items()}
