"""Simulated collector: usage for the pods a portal says run on this node, with believable utilisation.

Utilisation is deterministic for a given seed, pod and timestamp, so runs can be replayed. A pod that
is a real process measuring its own GPU use (the simulated cluster's notebook and inference servers:
its assignment has a `metrics_url`) reports what its server says instead, while the server answers.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import httpx

from nodeagent.samples import GpuInfo, Reading, format_ts

log = logging.getLogger(__name__)

_GPU_NAMESPACE = uuid.UUID("0b6f2d1e-8c3a-4e59-b7d4-95a1f3c2e8a0")
METRICS_TIMEOUT_S = 1.0  # a sample waits for no slow server: it falls back to invented figures


@dataclass(frozen=True)
class Assignment:
    """A pod (replica) the scheduler placed on one GPU of this node, with the share it holds."""

    pod_uid: str
    gpu_index: int
    milli: int  # 1000 = one whole GPU
    memory_mib: int
    metrics_url: str = ""  # the pod's server's own figures (JSON with "gpu": {"utilisation"}), if any
    metrics_auth: str = ""  # the Authorization header that server asks for


def parse_assignments(payload: object) -> list[Assignment]:
    """Parse ``{"assignments": [{"pod_uid"|"replica_id", "gpu_index", "milli", "memory_mib",
    "metrics_url"?, "metrics_auth"?}]}``."""
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
                    metrics_url=_optional_text(item, "metrics_url"),
                    metrics_auth=_optional_text(item, "metrics_auth"),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"assignments[{position}] is malformed ({exc!r}): {item!r}") from exc
    return result


def _optional_text(item: dict, key: str) -> str:
    value = item.get(key) or ""
    if not isinstance(value, str):
        raise ValueError(f"{key} must be text")
    return value


class ProcessMetrics:
    """Reads how busy a pod's server kept the share it holds (0..1): over the time since the previous
    read, from its busy and held GPU-seconds counters (as NVML averages over its sample period); at
    the first read, or after a restart set them back, what it says now. A server that does not answer
    gives None; that is logged once, not at every sample, until it answers again."""

    def __init__(self, timeout_s: float = METRICS_TIMEOUT_S, transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(timeout=timeout_s, transport=transport)
        self._failing: set[str] = set()
        self._last: dict[str, tuple[float, float]] = {}  # per URL: (busy, held) GPU-seconds at the last read

    def close(self) -> None:
        self._http.close()

    def keep_only(self, urls: set[str]) -> None:
        """Forget the servers no longer assigned (their pods ended)."""
        for url in set(self._last) - urls:
            del self._last[url]
        self._failing &= urls

    def utilisation(self, url: str, auth: str) -> float | None:
        try:
            response = self._http.get(url, headers={"Authorization": auth} if auth else {})
            response.raise_for_status()
            gpu = response.json()["gpu"]
            now = _fraction(gpu, "utilisation")
            busy, held = float(gpu.get("busy_seconds_total") or 0.0), float(gpu.get("held_seconds_total") or 0.0)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            if url not in self._failing:
                self._failing.add(url)
                log.warning("pod server at %s did not tell its GPU use (%s); inventing it until it does",
                            url.split("?")[0], exc)
            return None
        if url in self._failing:
            self._failing.discard(url)
            log.info("pod server at %s tells its GPU use again", url.split("?")[0])
        previous = self._last.get(url)
        self._last[url] = (busy, held)
        if previous is not None and held > previous[1] and busy >= previous[0]:
            return min(1.0, (busy - previous[0]) / (held - previous[1]))
        return now


def _fraction(figures: dict, key: str) -> float:
    value = figures[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"gpu.{key} {value!r} is not a number from 0 to 1")
    return float(value)


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
        metrics: ProcessMetrics | None = None,
    ) -> None:
        if gpus < 1:
            raise ValueError(f"a simulated node needs at least one GPU, got gpus={gpus}")
        self._assignments = assignments
        self._node = node
        self._gpus = gpus
        self._model = model
        self._memory_mib = memory_mib
        self._seed = seed
        self._metrics = metrics or ProcessMetrics()
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
        self._metrics.close()

    def sample(self, now: datetime) -> list[Reading]:
        ts = format_ts(now)
        per_gpu: dict[int, list[Reading]] = {i: [] for i in range(self._gpus)}
        measured: dict[str, float | None] = {}  # per server, read once a sample (a pod holds several GPUs)
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
                    gpu_util_pct=self._pod_util(item, ts, measured),
                    mem_used_mib=self._pod_memory(item),
                )
            )
        self._metrics.keep_only(set(measured))
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

    def _pod_util(self, item: Assignment, ts: str, measured: dict[str, float | None]) -> float:
        share_pct = item.milli / 10
        if item.metrics_url:
            if item.metrics_url not in measured:
                measured[item.metrics_url] = self._metrics.utilisation(item.metrics_url, item.metrics_auth)
            if measured[item.metrics_url] is not None:  # busy in proportion to the share it holds
                return round(min(100.0, share_pct * measured[item.metrics_url]), 2)
        # Each pod has its own efficiency (how much of its share it keeps busy), as real jobs do:
        # some train flat out, notebooks idle. Per interval it wobbles and sometimes stalls (I/O).
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
