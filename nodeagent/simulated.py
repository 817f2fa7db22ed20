"""Simulated collector: usage for the pods a portal says run on this node, with believable utilisation.

Utilisation is deterministic for a given seed, pod and timestamp, so runs can be replayed.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from nodeagent.samples import GpuInfo, Reading, format_ts

log = logging.getLogger(__name__)

_GPU_NAMESPACE = uuid.UUID("0b6f2d1e-8c3a-4e59-b7d4-95a1f3c2e8a0")


@dataclass(frozen=True)
class Assignment:
    """A pod (replica) the scheduler placed on one GPU of this node, with the share it holds."""

    pod_uid: str
    gpu_index: int
    milli: int  # 1000 = one whole GPU
    memory_mib: int


def parse_assignments(payload: object) -> list[Assignment]:
    """Parse ``{"assignments": [{"pod_uid"|"replica_id", "gpu_index", "milli", "memory_mib"}]}``."""
    if not isinstance(payload, dict) or not isinstance(payload.get("assignments"), list):
        raise ValueError('assignments payload must be an object with an "assignments" list')
    result = []
    for position, item in enumerate(payload["assignments"]):
        if not isinstance(item, dict):
            raise ValueError(f"assignments[{position}] must be an object, got {item!r}")
        pod = item.get("pod_uid") or item.get("replica_id")
        if not pod:
            raise ValueError(f"assignments[{position}] has no pod_uid (or replica_id)")
        try:
            result.append(
                Assignment(
                    pod_uid=str(pod),
                    gpu_index=int(item["gpu_index"]),
                    milli=int(item["milli"]),
                    memory_mib=int(item.get("memory_mib") or 0),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"assignments[{position}] is malformed ({exc!r}): {item!r}") from exc
    return result


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (independent of PYTHONHASHSEED)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class SimulatedCollector:
    def __init__(
        self,
        assignments: Callable[[], Sequence[Assignment]],
        node: str,
        gpus: int = 8,
        model: str = "NVIDIA A100-SXM4-80GB",
        memory_mib: int = 81920,
        seed: int = 0,
    ) -> None:
        if gpus < 1:
            raise ValueError(f"a simulated node needs at least one GPU, got gpus={gpus}")
        self._assignments = assignments
        self._node = node
        self._gpus = gpus
        self._model = model
        self._memory_mib = memory_mib
        self._seed = seed
        self._last_device: dict[int, Reading] = {}  # per GPU: the last whole-device reading
        self.xids: dict[int, list[int]] = {}  # per GPU: XID codes a test or a demo injects

    def gpu_uuid(self, index: int) -> str:
        return f"GPU-{uuid.uuid5(_GPU_NAMESPACE, f'{self._node}/{index}')}"

    def inventory(self) -> list[GpuInfo]:
        return [
            GpuInfo(uuid=self.gpu_uuid(i), index=i, model=self._model, memory_mib=self._memory_mib)
            for i in range(self._gpus)
        ]

    def close(self) -> None:
        pass

    def sample(self, now: datetime) -> list[Reading]:
        ts = format_ts(now)
        per_gpu: dict[int, list[Reading]] = {i: [] for i in range(self._gpus)}
        for item in self._assignments():
            if item.gpu_index not in per_gpu:
                log.warning("assignment of pod %s names GPU %d, this node has %d GPUs; ignored",
                            item.pod_uid, item.gpu_index, self._gpus)
                continue
            per_gpu[item.gpu_index].append(
                Reading(
                    gpu_uuid=self.gpu_uuid(item.gpu_index),
                    gpu_index=item.gpu_index,
                    pod_uid=item.pod_uid,
                    gpu_util_pct=self._pod_util(item, ts),
                    mem_used_mib=self._pod_memory(item),
                )
            )
        readings = []
        for index, pods in per_gpu.items():
            device = Reading(
                gpu_uuid=self.gpu_uuid(index),
                gpu_index=index,
                pod_uid=None,
                gpu_util_pct=float(min(100.0, sum(p.gpu_util_pct or 0.0 for p in pods))),
                mem_used_mib=min(self._memory_mib, sum(p.mem_used_mib for p in pods)),
            )
            self._last_device[index] = device
            readings.append(device)
            readings.extend(pods)
        return readings

    def health(self) -> dict[int, dict]:
        """Per GPU: the last sample's utilisation and memory, a temperature that follows them, no ECC
        errors, and the XID errors injected through `xids`."""
        out = {}
        for index in range(self._gpus):
            device = self._last_device.get(index)
            util = (device.gpu_util_pct or 0.0) if device else 0.0
            xids = self.xids.get(index, [])
            out[index] = {
                "util_pct": round(util, 2),
                "memory_used_mib": device.mem_used_mib if device else 0,
                "temperature_c": round(32 + 0.45 * util + 4 * _unit(self._seed, self._node, index, "temperature")),
                "ecc_uncorrected": 0,
                "xid_count": len(xids),
                "xid_last": xids[-1] if xids else None,
            }
        return out

    def _pod_util(self, item: Assignment, ts: str) -> float:
        # Each pod has its own efficiency (how much of its share it keeps busy), as real jobs do:
        # some train flat out, notebooks idle. Per interval it wobbles and sometimes stalls (I/O).
        share_pct = item.milli / 10
        efficiency = 0.3 + 0.65 * _unit(self._seed, item.pod_uid, "efficiency")
        wobble = _unit(self._seed, item.pod_uid, ts, "wobble")
        if wobble < 0.05:
            return round(share_pct * 0.1 * wobble / 0.05, 2)  # stalled: data loading, checkpointing
        return round(min(100.0, share_pct * efficiency * (0.85 + 0.3 * wobble)), 2)

    def _pod_memory(self, item: Assignment) -> int:
        limit = item.memory_mib or self._memory_mib * item.milli // 1000
        return int(limit * (0.55 + 0.4 * _unit(self._seed, item.pod_uid, "memory")))


class LastKnownAssignments:
    """Assignments from `fetch` (e.g. the portal); while it fails, the last list that was read."""

    def __init__(self, fetch: Callable[[], object]) -> None:
        self._fetch = fetch
        self._last: list[Assignment] = []

    def __call__(self) -> list[Assignment]:
        try:
            self._last = parse_assignments(self._fetch())
        except Exception as exc:  # portal down or a bad answer: the pods are most likely still running
            log.warning("could not read assignments (%s); using the last %d known", exc, len(self._last))
        return self._last
