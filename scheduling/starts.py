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
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from scheduling.core import model as cm
from scheduling.core.session import Session
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


def _candidate(spec: JobSpec, placement: Mapping[str, Any], queue: str, now: datetime) -> tuple[cm.Job, float]:
    roles = core_roles(role_requests(spec, dict(placement)))
    topology = job_topology(spec, placement)
    return (core_job(0, queue, roles, spec.priority, spec.preemptible, spec.reduce_cost, now, topology),
            spec.expected_duration_s)


def expected_starts(spec: JobSpec, placements: Mapping[str, Mapping[str, Any]], queue: str | None,
                    now: datetime) -> dict[str, datetime | None] | None:
    """For each named placement of ``spec`` (a quote option's JSON: ``pool`` and ``roles``), when it
    would start if submitted at ``now`` into ``queue``: ``now`` when it fits, else the earliest of the
    forecast (None: beyond its horizon, or no queue to wait in). None when the cluster cannot be read
    as a consistent snapshot: the caller keeps its own guess."""
    snapshot = cluster_snapshot(now)
    session = cluster_session(snapshot)
    if session is None:
        return None
    starts: dict[str, datetime | None] = {name: now if _fits_now(session, spec, placement) else None
                                          for name, placement in placements.items()}
    waiting = [name for name, start in starts.items() if start is None]
    if waiting and queue:
        windows = forecast_new_jobs({name: _candidate(spec, placements[name], queue, now) for name in waiting},
                                    now, snapshot=snapshot)
        starts.update({name: window.earliest for name, window in windows.items()})
    return starts
