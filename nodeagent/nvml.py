"""NVML collector: GPU inventory and per-pod usage read through nvidia-ml-py (module ``pynvml``).

The nvml module is passed in, so tests can hand a fake library object at this boundary.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
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

    def close(self) -> None:
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
