"""Thirty days of demo history for the demo workspaces, made by the services that run live jobs, so
the reports, dashboards and job pages have a real-looking month right after `make run`. The
Chinese-speaking team (ai-lab, billed in CNY) works its own rhythm in Asia/Shanghai office hours, on
the shared preemptible queue it submits to; the others' month is the same with or without it.

The platform clock is moved through the past month from one event to the next (a submit, a pod
starting or ending, a cancel). At each one, jobs are submitted with a real quote, the scheduling
cycle places and reconciles them on the simulated cluster running in real time, usage samples go
through the node agents' ingest, and jobs end through the cycle (or their owner's cancel), which
prices them. So times, states, efficiency and costs agree everywhere, as they do for live jobs.
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction

from billing.api import (
    MAX_BATCH,
    ingest,
    ledger_cursor,
    platform_tz,
    post_ledger,
    replica_allocation,
    submit_quoted_job,
)
from portal.console.services import record_queue_allocation_through
from portal.demo import chinese
from portal.demo.history import DEMO_PREFIX, PlannedJob, plan_month
from portal.demo.tenants import WORKSPACES
from portal.models import Membership, Role
from portal.workspace_queues import HISTORY_DAYS
from scheduling.api import SimulatedBackend, cancel_job, clock, run_scheduling_cycle, signals
from scheduling.models import Gpu, Job, JobState, Node, Replica

__all__ = ["DEMO_PREFIX", "load_demo_usage"]

log = logging.getLogger(__name__)
SEED = 30
FAILURE_RATE = 0.05  # of jobs that crash at their end, as on the live simulated cluster
CYCLE_LAG = timedelta(seconds=5)  # the cycle that picks up a submitted job runs a few seconds later
SAMPLE_EVERY = timedelta(minutes=5)
SAMPLE_NAMESPACE = uuid.UUID("5d7c1a8e-3f0b-4c2e-9a61-2e8f4b7d9c10")


class _Hands:
    """The platform clock's source while the month plays: set by hand, event to event."""

    def __init__(self, at: datetime):
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@dataclass
class _Month:
    """What is still to happen, and how busy each submitted job keeps its GPUs."""

    plans: deque[PlannedJob]
    owners: dict[str, tuple]  # workspace slug -> (owner, workspace)
    busy: dict[int, float] = field(default_factory=dict)  # job id -> efficiency
    cancels: dict[int, datetime] = field(default_factory=dict)  # job id -> when its owner cancels it
    cycles: set[datetime] = field(default_factory=set)  # cycles due after submits
    sampled: set[int] = field(default_factory=set)  # replicas whose samples were sent
    gpu_uuids: dict[tuple[int, int], str] = field(default_factory=dict)  # (node id, index) -> uuid


def load_demo_usage(*, days: int = 30, now: datetime | None = None) -> int:
    """The last `days` days of demo jobs of the demo workspaces, played through the live services
    and posted to the ledger up to now. Idempotent: does nothing when demo jobs exist. Needs the
    demo tenants, cluster, queues and prices. Returns the jobs made."""
    if Job.objects.filter(name__startswith=DEMO_PREFIX).exists():
        return 0
    if transaction.get_connection().in_atomic_block:  # e.g. a test's transaction
        log.warning("demo history skipped: the cycle launches pods after commit, which never comes here")
        return 0
    real_now = now or clock.now()
    start = real_now - timedelta(days=days)
    closed = ledger_cursor().closed_until
    if closed is not None and closed > start:  # hours already final would never be billed
        log.warning("demo history skipped: the ledger is final up to %s, after %s", closed, start)
        return 0
    owners = _owners()
    plans = _plans(owners, start=start, end=real_now)
    if not plans:
        return 0
    month = _Month(deque(plans), owners, gpu_uuids=_gpu_uuids())
    hands = _Hands(plans[0].at)
    # Pages are not following a month ago: the events go out in one batch at the end.
    with clock.reading(hands), signals.batched():
        # the past has no training processes to run: a replica still running at the end runs without one
        _play(month, SimulatedBackend(speedup=1, failure_rate=FAILURE_RATE, training_processes=False), hands,
              until=real_now)
    post_ledger(now=real_now)
    return len(plans)


def _plans(owners: dict[str, tuple], *, start: datetime, end: datetime) -> list[PlannedJob]:
    team = chinese.WORKSPACE[0]
    plans = plan_month(sorted(set(owners) - {team}), start=start, end=end, tz=platform_tz(), seed=SEED)
    if team in owners:
        plans += plan_month([team], start=start, end=end, tz=ZoneInfo(chinese.TIME_ZONE), seed=SEED + 1,
                            queue=chinese.QUEUE, first=len(plans) + 1)
        plans.sort(key=lambda p: (p.at, p.workspace))
    return plans


def _owners() -> dict[str, tuple]:
    memberships = (Membership.objects.filter(role=Role.OWNER, workspace__slug__in=[*WORKSPACES, chinese.WORKSPACE[0]])
                   .select_related("user", "workspace").order_by("pk"))
    return {m.workspace.slug: (m.user, m.workspace) for m in memberships}


def _gpu_uuids() -> dict[tuple[int, int], str]:
    return {(node_id, index): gpu_uuid for node_id, index, gpu_uuid in
            Gpu.objects.values_list("node_id", "index", "uuid")}


def _play(month: _Month, backend: SimulatedBackend, hands: _Hands, *, until: datetime) -> None:
    at: datetime | None = month.plans[0].at
    while at is not None and at <= until:
        hands.at = at
        _cancel_due(month, at)
        if not _submit_due(month, at):  # a submit is picked up by the cycle CYCLE_LAG later
            run_scheduling_cycle(backend, now=at)
            _send_samples(month, _ended_replicas(month, since=at - SAMPLE_EVERY), at)
        following = _next_event(month, backend, after=at)
        _sample_queues(at, min(following or until, until), until=until)
        at = following
    hands.at = until
    run_scheduling_cycle(backend, now=until)
    _send_samples(month, list(_unsampled(month)), until)  # a replica still running: so far, the live agents go on


def _sample_queues(start: datetime, end: datetime, *, until: datetime) -> None:
    """The queues' allocation samples the beat takes every QUEUE_HISTORY_INTERVAL_S, for the instants in
    [start, end) of the last HISTORY_DAYS before `until` (what the 7-day charts draw): the state between two
    events holds through them."""
    every = settings.QUEUE_HISTORY_INTERVAL_S
    first = max(start, until - timedelta(days=HISTORY_DAYS))
    epoch = first.timestamp()
    tick = datetime.fromtimestamp(math.ceil(epoch / every) * every, tz=first.tzinfo)
    times = []
    while tick < end:
        times.append(tick)
        tick += timedelta(seconds=every)
    record_queue_allocation_through(times)


def _next_event(month: _Month, backend: SimulatedBackend, *, after: datetime) -> datetime | None:
    """The next instant something happens: a submit, a cycle after one, a cancel, a pod starting
    or ending, an off-peak job's window opening."""
    month.cycles = {at for at in month.cycles if at > after}
    waits = Job.objects.filter(pk__in=list(month.busy), state=JobState.PENDING, not_before__gt=after)
    candidates = [month.plans[0].at if month.plans else None, backend.next_change(after),
                  min(month.cycles, default=None), min((at for at in month.cancels.values() if at > after),
                                                       default=None),
                  min(waits.values_list("not_before", flat=True), default=None)]
    return min((at for at in candidates if at is not None), default=None)


def _submit_due(month: _Month, at: datetime) -> int:
    submitted = 0
    while month.plans and month.plans[0].at <= at:
        plan = month.plans.popleft()
        user, workspace = month.owners[plan.workspace]
        job = submit_quoted_job(user=user, workspace=workspace, spec=plan.spec)
        month.busy[job.pk] = plan.busy
        month.cycles.add(at + CYCLE_LAG)
        if plan.cancel_after is not None:
            month.cancels[job.pk] = at + plan.cancel_after
        submitted += 1
    return submitted


def _cancel_due(month: _Month, at: datetime) -> None:
    due = [job_id for job_id, when in month.cancels.items() if when <= at]
    for job in Job.objects.filter(pk__in=due).select_related("workspace").order_by("pk"):
        del month.cancels[job.pk]
        if not job.is_final:
            cancel_job(user=month.owners[job.workspace.slug][0], job=job)


# --------------------------------------------------------------------------- usage samples


def _unsampled(month: _Month):
    return (Replica.objects.filter(job_id__in=list(month.busy), started__isnull=False)
            .exclude(pk__in=list(month.sampled)).select_related("job", "node__pool"))


def _ended_replicas(month: _Month, *, since: datetime) -> list[Replica]:
    return list(_unsampled(month).filter(ended__gt=since))


def _send_samples(month: _Month, replicas: list[Replica], at: datetime) -> None:
    """What the node agents reported for these replicas' running time, one batch per node, through
    the agents' own ingest."""
    by_node: dict[int, list[dict]] = defaultdict(list)
    for replica in replicas:
        by_node[replica.node_id] += _replica_samples(replica, month, until=replica.ended or at)
        month.sampled.add(replica.pk)
    nodes = Node.objects.in_bulk(list(by_node))
    for node_id, samples in sorted(by_node.items()):
        node = nodes[node_id]
        for first in range(0, len(samples), MAX_BATCH):
            result = ingest(node, {"node": node.name, "samples": samples[first:first + MAX_BATCH]}, now=at)
            if result.rejected:
                log.warning("demo samples refused on %s: %s", node.name, result.rejected[:3])


def _gpu_share(replica: Replica) -> float:
    """The part of each of its GPUs the replica holds (a fraction, a MIG slice, a time slice...)."""
    role = next((r for r in replica.job.roles if r["name"] == replica.role), {})
    share = replica_allocation(replica, replica.node.pool, role).share
    return float(share) / max(1, len(replica.gpu_indices))


def _replica_samples(replica: Replica, month: _Month, *, until: datetime) -> list[dict]:
    """A sample per GPU every SAMPLE_EVERY of the replica's running time: its job's efficiency with a
    wobble, and now and then a stall (data loading, a checkpoint), as the simulated agents report."""
    rng = random.Random(f"{replica.job.name}/{replica.role}-{replica.index}#{replica.attempt}")
    busy, share = month.busy.get(replica.job_id, 0.5), _gpu_share(replica)
    memory = replica.node.pool.gpu_memory_mib * share
    samples, at = [], replica.started
    while at < until:
        step = min(SAMPLE_EVERY, until - at)
        at += step
        for index in replica.gpu_indices:
            wobble = rng.random()
            load = 0.1 * wobble / 0.05 if wobble < 0.05 else min(1.0, busy * (0.85 + 0.3 * wobble))
            samples.append(_sample(replica, month.gpu_uuids.get((replica.node_id, index), f"GPU-{index}"), index,
                                   at, util=100 * share * load, memory=memory * (0.5 + 0.4 * busy),
                                   seconds=step.total_seconds()))
    return samples


def _sample(replica: Replica, gpu_uuid: str, index: int, at: datetime, *, util: float, memory: float,
            seconds: float) -> dict:
    ts = at.isoformat()
    return {"id": str(uuid.uuid5(SAMPLE_NAMESPACE, f"{replica.node.name}|{ts}|{gpu_uuid}|{replica.uid}")),
            "node": replica.node.name, "ts": ts, "gpu_uuid": gpu_uuid, "gpu_index": index,
            "pod_uid": str(replica.uid), "gpu_util_pct": round(util, 2), "mem_used_mib": int(memory),
            "interval_s": max(seconds, 0.001)}
