"""When a job not submitted yet would start: the scheduler's answer behind quotes.

A candidate placement (a quote option: its pool and how each role shares GPUs) starts now when every
role's MinReplicas find room together on the free capacity of its pool's nodes, as the scheduler would
place them (``core.session.Session.all_fit``: ``core/fit.py`` and the placement rules). Otherwise it
waits in its queue: its expected start is the earliest of the forward replay that gives pending jobs
theirs (``forecast.forecast_new_jobs``), or None beyond its horizon or without a queue.

The snapshot is read incrementally, as the cycle's worker reads it (``cycle.snapshot.SnapshotCache``:
every row's version, then only the rows new or changed since the last quote), so it is exactly as fresh
as the database. The session is kept while the cluster's snapshot stays the same (a placement's room
depends on the pools, nodes and running replicas, not on the time of asking), and the forecasts for
REUSE_S as the pending jobs' are, so repeated quotes and the submit that follows them between two
cycles build neither a session nor a replay. The snapshot is the whole cluster's, the same for every
workspace; nothing of one quote's spec is kept for another.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from scheduling.core import model as cm
from scheduling.core.actions.gang import queue_quota_block
from scheduling.core.reasons import Reason
from scheduling.core.session import Session, request_milli
from scheduling.cycle.snapshot import SnapshotCache, build_snapshot, core_job, core_request, core_roles
from scheduling.forecast import forecast_new_jobs
from scheduling.spec import JobSpec
from scheduling.spec.requests import job_topology, role_requests

_lock = threading.Lock()
_kept: tuple[cm.Snapshot, Session] | None = None
_snapshot_lock = threading.Lock()
_snapshots = SnapshotCache()


def forget_session() -> None:
    """Drop the kept session and snapshot (a test's world starts from none)."""
    global _kept
    with _lock:
        _kept = None
    with _snapshot_lock:
        _snapshots.reset()


def cluster_snapshot(now: datetime) -> cm.Snapshot:
    """The scheduler's snapshot at ``now``, read incrementally from the last one this process read."""
    with _snapshot_lock:
        return build_snapshot(now, _snapshots)


def cluster_session(snapshot: cm.Snapshot) -> Session | None:
    """The scheduler's session over ``snapshot``, reused while the cluster is unchanged; None when
    the state is not a consistent snapshot (the next cycle repairs it)."""
    global _kept
    state = replace(snapshot, now=0.0, queue_usage=())
    with _lock:
        if _kept is not None and _kept[0] == state:
            return _kept[1]
    try:
        session = Session.build(snapshot)
    except ValueError:
        return None
    with _lock:
        _kept = (state, session)
    return session


def _fits_now(session: Session, spec: JobSpec, placement: Mapping[str, Any]) -> bool:
    if job_topology(spec, placement).get("required"):
        return False   # room in the pool is not room in one domain: the forecast's cycles say when
    pool = placement.get("pool", "")
    if pool not in session.pool_mask:
        return False
    requests = [core_request(role) for role in role_requests(spec, dict(placement))
                for _ in range(role["min_replicas"])]
    with _lock:  # all_fit holds spots while it looks: one caller at a time on the shared session
        return session.all_fit(requests, pool)


def quota_block(session: Session, spec: JobSpec, placement: Mapping[str, Any], queue: str | None,
                preemptible: bool | None = None) -> Reason | None:
    """Why the queue's quota keeps the placement from starting now, by the cycle's own check
    (`core.actions.gang.queue_quota_block`: `queue_over_limit` for any work, `queue_non_preemptible_quota` for
    non-preemptible work over the deserved quota), for the queue and every queue above it; None when it allows
    it. `preemptible` overrides the spec's."""
    if not queue or queue not in session.queue_path:
        return None
    pool = session.pools.get(placement.get("pool", ""))
    need = sum(request_milli(core_request(role), pool) * role["min_replicas"]
               for role in role_requests(spec, dict(placement)))
    strict = not (spec.preemptible if preemptible is None else preemptible)
    return queue_quota_block(session, queue, need, need if strict else 0)


def _candidate(spec: JobSpec, placement: Mapping[str, Any], queue: str, now: datetime) -> tuple[cm.Job, float]:
    roles = core_roles(role_requests(spec, dict(placement)))
    topology = job_topology(spec, placement)
    return (core_job(0, queue, roles, spec.priority, spec.preemptible, spec.reduce_cost, now, topology),
            spec.expected_duration_s)


def expected_starts(spec: JobSpec, placements: Mapping[str, Mapping[str, Any]], queue: str | None,
                    now: datetime) -> dict[str, datetime | None] | None:
    """For each named placement of ``spec`` (a quote option's JSON: ``pool`` and ``roles``), when it
    would start if submitted at ``now`` into ``queue``: ``now`` when its queue's quota and the free GPUs
    allow it, else the earliest of the forecast (None: beyond its horizon, or no queue to wait in). None
    when the cluster cannot be read as a consistent snapshot: the caller keeps its own guess."""
    found = start_outlook(spec, placements, queue, now)
    return None if found is None else {name: outlook.start for name, outlook in found.items()}


@dataclass(frozen=True)
class StartOutlook:
    """When a placement would start, why not now when its queue's quota holds it (`held`: the cycle's reason),
    and whether the same placement would start now as preemptible work (for non-preemptible work held by
    its queue's deserved quota)."""

    start: datetime | None
    held: Reason | None = None
    preemptible_now: bool = False


def start_outlook(spec: JobSpec, placements: Mapping[str, Mapping[str, Any]], queue: str | None,
                  now: datetime, quota: Collection[str] | None = None, *,
                  snapshot: cm.Snapshot | None = None) -> dict[str, StartOutlook] | None:
    """`expected_starts` with the reasons: per placement its start, its queue's quota block and whether the
    preemptible variant would start now; `quota` names the placements whose quota is checked (None: all; a
    deadline job waits as preemptible work, which only its queue's limit holds). None when the cluster
    cannot be read as a consistent snapshot. `snapshot`: the cluster as read for a batch of quotes."""
    snapshot = snapshot or cluster_snapshot(now)
    session = cluster_session(snapshot)
    if session is None:
        return None
    out: dict[str, StartOutlook] = {}
    for name, placement in placements.items():
        held = quota_block(session, spec, placement, queue) if quota is None or name in quota else None
        fits = _fits_now(session, spec, placement)
        variant = (held is not None and held.code == "queue_non_preemptible_quota" and fits
                   and quota_block(session, spec, placement, queue, preemptible=True) is None)
        out[name] = StartOutlook(now if fits and held is None else None, held, variant)
    waiting = [name for name, outlook in out.items() if outlook.start is None]
    if waiting and queue:
        windows = forecast_new_jobs({name: _candidate(spec, placements[name], queue, now) for name in waiting},
                                    now, snapshot=snapshot)
        out.update({name: replace(out[name], start=window.earliest) for name, window in windows.items()})
    return out
