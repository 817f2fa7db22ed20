"""Data the agent reports: GPU inventory and usage samples, and how sample ids are made."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

# Fixed namespace so that the same (node, ts, gpu, pod) always yields the same sample id.
SAMPLE_NAMESPACE = uuid.UUID("6f1c3a52-4f0e-4d7b-9a47-2b8e1c0d5e13")


@dataclass(frozen=True)
class MigInstance:
    uuid: str
    profile: str  # e.g. "1g.10gb"; "" when NVML does not name it
    memory_mib: int
    gpu_instance_id: int
    compute_instance_id: int


@dataclass(frozen=True)
class GpuInfo:
    uuid: str
    index: int
    model: str
    memory_mib: int
    mig_enabled: bool = False
    mig_instances: tuple[MigInstance, ...] = ()

    def to_json(self) -> dict:
        data = asdict(self)
        data["mig_instances"] = [asdict(m) for m in self.mig_instances]
        return data


@dataclass(frozen=True)
class Reading:
    """What a collector measured on one GPU (or MIG instance) for one pod, or for the whole device."""

    gpu_uuid: str  # the physical GPU's uuid, or the MIG instance's "MIG-..." uuid
    gpu_index: int  # index of the physical GPU on the node
    pod_uid: str | None  # None: the whole device
    gpu_util_pct: float | None  # None: NVML cannot tell (for example on a MIG instance)
    mem_used_mib: int


@dataclass(frozen=True)
class UsageSample:
    id: str
    node: str
    ts: str  # UTC ISO 8601
    gpu_uuid: str
    gpu_index: int
    pod_uid: str | None
    gpu_util_pct: float | None
    mem_used_mib: int
    interval_s: float

    @classmethod
    def from_reading(cls, node: str, now: datetime, interval_s: float, reading: Reading) -> UsageSample:
        ts = format_ts(now)
        return cls(
            id=sample_id(node, ts, reading.gpu_uuid, reading.pod_uid),
            node=node,
            ts=ts,
            gpu_uuid=reading.gpu_uuid,
            gpu_index=reading.gpu_index,
            pod_uid=reading.pod_uid,
            gpu_util_pct=None if reading.gpu_util_pct is None else round(reading.gpu_util_pct, 2),
            mem_used_mib=int(reading.mem_used_mib),
            interval_s=float(interval_s),
        )

    def to_json(self) -> dict:
        return asdict(self)


def format_ts(now: datetime) -> str:
    if now.tzinfo is None:
        raise ValueError(f"timestamp {now!r} has no timezone; the agent reports UTC times only")
    return now.astimezone(UTC).isoformat(timespec="milliseconds")


def sample_id(node: str, ts: str, gpu_uuid: str, pod_uid: str | None) -> str:
    """Deterministic id: the same measurement always gets the same id, so the portal can dedup it."""
    return str(uuid.uuid5(SAMPLE_NAMESPACE, f"{node}|{ts}|{gpu_uuid}|{pod_uid or ''}"))
