"""Storage used, sampled once an hour of platform time: what the ledger bills stored GiB on.

On the simulated cluster the platform reads each volume's and dataset version's folder itself; on
Kubernetes the node agents report the kubelet's volume stats per claim (`record_kubelet_volumes`).
Either way one sample per thing and hour is kept: the first; a second reading of the same hour
changes nothing, so posting every few seconds samples once an hour.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings

from billing.models import StorageSample
from scheduling.api import claim_index, clock, storage
from scheduling.models import DatasetVersion, Volume

# A dataset version has no class of its own: it is kept (and billed) as standard storage.
DATASET_STORAGE_CLASS = "standard"
SIMULATED = "simulated"
KUBELET = "kubelet"


def _hour(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Reading:
    workspace_id: int
    kind: str
    name: str
    storage_class: str
    used_bytes: int


def simulated_readings() -> Iterable[Reading]:
    """Every volume and dataset version with the bytes its folder holds now."""
    for volume in Volume.objects.select_related("workspace").order_by("pk"):
        used = storage.folder_used_bytes(storage.volume_dir(volume.workspace.slug, volume.name))
        yield Reading(volume.workspace_id, StorageSample.Kind.VOLUME, volume.name, volume.storage_class, used)
    versions = DatasetVersion.objects.select_related("dataset__workspace").order_by("pk")
    for version in versions:
        dataset = version.dataset
        used = storage.folder_used_bytes(storage.dataset_dir(dataset.workspace.slug, dataset.name, version.number))
        yield Reading(dataset.workspace_id, StorageSample.Kind.DATASET, f"{dataset.name}@v{version.number}",
                      DATASET_STORAGE_CLASS, used)


def record(readings: Iterable[Reading], *, now: datetime, source: str) -> int:
    """Keep the readings as this hour's samples (a thing sampled this hour already keeps its first)."""
    hour = _hour(now)
    rows = [StorageSample(workspace_id=r.workspace_id, kind=r.kind, name=r.name, storage_class=r.storage_class,
                          hour=hour, ts=now, used_bytes=r.used_bytes, source=source) for r in readings]
    before = StorageSample.objects.filter(hour=hour).count()
    StorageSample.objects.bulk_create(rows, ignore_conflicts=True)
    return StorageSample.objects.filter(hour=hour).count() - before


def sample_storage(*, now: datetime | None = None) -> int:
    """This hour's samples of the simulated cluster's storage (on Kubernetes the agents report them);
    returns how many were new. Cheap when the hour is sampled already: the folders are not read again."""
    now = now or clock.now()
    if settings.SCHEDULER_BACKEND != SIMULATED:
        return 0
    sampled = set(StorageSample.objects.filter(hour=_hour(now)).values_list("workspace_id", "kind", "name"))
    if _things() <= sampled:
        return 0
    return record(simulated_readings(), now=now, source=SIMULATED)


def _things() -> set[tuple[int, str, str]]:
    """Every volume and dataset version, as its samples name it."""
    volumes = {(ws, StorageSample.Kind.VOLUME.value, name) for ws, name in Volume.objects.values_list("workspace_id", "name")}
    versions = DatasetVersion.objects.values_list("dataset__workspace_id", "dataset__name", "number")
    return volumes | {(ws, StorageSample.Kind.DATASET.value, f"{name}@v{number}") for ws, name, number in versions}


MAX_VOLUMES = 5000
MAX_USED_BYTES = 2**63 - 1


def _volume_stat(raw: object) -> tuple[str, str, int]:
    if not isinstance(raw, dict):
        raise ValueError("a volume reading must be an object")
    texts = []
    for key in ("namespace", "claim"):
        value = raw.get(key)
        if not isinstance(value, str) or not 0 < len(value) <= 253 or "\x00" in value:
            raise ValueError(f"{key} must be a string of 1..253 characters without NUL")
        texts.append(value)
    used = raw.get("used_bytes")
    if isinstance(used, bool) or not isinstance(used, int) or not 0 <= used <= MAX_USED_BYTES:
        raise ValueError("used_bytes must be a whole number of bytes, 0 or more")
    return texts[0], texts[1], used


def record_kubelet_volumes(raw_readings: object, *, now: datetime) -> dict[str, int]:
    """The kubelet's used bytes per claim (`kubelet_volume_stats_used_bytes`), as a node agent read them,
    kept as this hour's samples of the volumes (notebook homes among them) and dataset versions the claims hold;
    claims that hold neither (the models cache) are left out. ValueError says what is unreadable."""
    if not isinstance(raw_readings, list):
        raise ValueError('"volumes" must be a list')
    if len(raw_readings) > MAX_VOLUMES:
        raise ValueError(f"a batch holds at most {MAX_VOLUMES} volume readings, got {len(raw_readings)}")
    stats = [_volume_stat(raw) for raw in raw_readings]
    if not stats:
        return {"recorded": 0, "unknown": 0}
    index = claim_index()
    readings, unknown = [], 0
    for namespace, claim, used in stats:
        held = index.get((namespace, claim))
        if held is None:
            unknown += 1
            continue
        readings.append(Reading(held.workspace_id, held.kind, held.name, held.storage_class or DATASET_STORAGE_CLASS,
                                used))
    return {"recorded": record(readings, now=now, source=KUBELET), "unknown": unknown}
