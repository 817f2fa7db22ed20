"""The scheduler's and the cluster's figures for Prometheus, read by the portal's /metrics.

Two sources, no prometheus_client multiprocess directory: the cycle runs in a Celery worker (its own
pod on Kubernetes) while /metrics is served by the web process, and a shared directory cannot span pods.

- Events in worker processes (a cycle's duration and decisions, Celery task failures, export
  durations) are added to one Redis hash (`SHARED`), so every process and pod adds to the same figures
  and any web replica serves them. Recording never fails the caller: a Redis error is logged and the
  figure lost.
- Cluster state (GPUs, queues, pending jobs) is computed from the database at scrape time
  (`cluster_figures`), so it is right whichever process asks.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import redis
from django.conf import settings
from prometheus_client import CollectorRegistry, disable_created_metrics

from scheduling import clock
from scheduling.core.fairshare import fair_shares
from scheduling.core.reasons import lead_code
from scheduling.core.session import request_milli
from scheduling.core.units import MILLI_PER_GPU
from scheduling.cycle.snapshot import core_queue, core_request
from scheduling.cycle.usage import queue_usage
from scheduling.models import UNSCHEDULED_STATES, Gpu, Job, JobState, Node, NodePool, Queue, Replica
from scheduling.sharing import mode_of

log = logging.getLogger(__name__)

KEY = "gpu-platform:metrics"
CYCLE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
EXPORT_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)
DECISION_KINDS = ("binds", "evicts", "started", "finished", "requeued", "relaunched", "orphans_removed")
# A GPU counts as used when a sample from the last USED_WINDOW showed it busy.
USED_WINDOW = timedelta(minutes=2)


@dataclass(frozen=True)
class Shared:
    kind: str  # counter, gauge or histogram
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()


SHARED: dict[str, Shared] = {
    "gpu_platform_scheduler_cycle_seconds": Shared("histogram", "Duration of a scheduling cycle.",
                                                   buckets=CYCLE_BUCKETS),
    "gpu_platform_scheduler_decisions": Shared("counter", "Scheduler decisions applied, by kind.", ("kind",)),
    "gpu_platform_scheduler_last_cycle_decisions": Shared("gauge", "Decisions of the last cycle, by kind.",
                                                          ("kind",)),
    "gpu_platform_scheduler_last_cycle_timestamp_seconds": Shared("gauge", "When the last cycle ended (Unix time)."),
    "gpu_platform_celery_task_failures": Shared("counter", "Celery tasks that raised, by task name.", ("task",)),
    "gpu_platform_report_export_seconds": Shared("histogram", "Duration of an Excel report export.",
                                                 buckets=EXPORT_BUCKETS),
}

disable_created_metrics()  # no *_created series: they double every counter for nothing

# Figures kept in this process (web-side events), served by this process's /metrics.
LOCAL = CollectorRegistry(auto_describe=True)

_client: tuple[int, redis.Redis] | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None or _client[0] != os.getpid():  # a forked worker needs its own connections
        _client = (os.getpid(), redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1))
    return _client[1]


def _field(name: str, labels: dict[str, str]) -> str:
    return json.dumps([name, sorted(labels.items())])


def _check(name: str, labels: dict[str, str]) -> Shared:
    spec = SHARED[name]
    if set(labels) != set(spec.labels):
        raise ValueError(f"{name} takes labels {spec.labels}, got {sorted(labels)}")
    return spec


def _write(ops: list[tuple[str, str, float]]) -> None:
    try:
        pipe = _redis().pipeline(transaction=False)
        for op, fld, value in ops:
            (pipe.hincrbyfloat if op == "inc" else pipe.hset)(KEY, fld, value)
        pipe.execute()
    except redis.RedisError as exc:
        log.warning("metrics not recorded (Redis): %s", exc)


def _inc_ops(name: str, labels: dict[str, str], amount: float) -> list[tuple[str, str, float]]:
    _check(name, labels)
    return [("inc", _field(name, labels), amount)]


def _observe_ops(name: str, labels: dict[str, str], value: float) -> list[tuple[str, str, float]]:
    spec = _check(name, labels)
    ops = [("inc", _field(name + "_bucket", {**labels, "le": _le(b)}), 1) for b in spec.buckets if value <= b]
    ops.append(("inc", _field(name + "_bucket", {**labels, "le": "+Inf"}), 1))
    ops.append(("inc", _field(name + "_sum", labels), value))
    ops.append(("inc", _field(name + "_count", labels), 1))
    return ops


def _le(bound: float) -> str:
    return repr(float(bound))


def inc(name: str, amount: float = 1, **labels: str) -> None:
    _write(_inc_ops(name, labels, amount))


def observe(name: str, value: float, **labels: str) -> None:
    _write(_observe_ops(name, labels, value))


def record_cycle(report) -> None:
    """A finished scheduling cycle (a cycle.run.CycleReport)."""
    ops = _observe_ops("gpu_platform_scheduler_cycle_seconds", {}, report.seconds)
    for kind in DECISION_KINDS:
        count = getattr(report, kind)
        ops.append(("set", _field("gpu_platform_scheduler_last_cycle_decisions", {"kind": kind}), count))
        if count:
            ops += _inc_ops("gpu_platform_scheduler_decisions", {"kind": kind}, count)
    ops.append(("set", _field("gpu_platform_scheduler_last_cycle_timestamp_seconds", {}), time.time()))
    _write(ops)


def read_shared() -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Every recorded series by family: name -> [(sample name, labels, value)]. Empty when Redis is down."""
    try:
        raw = _redis().hgetall(KEY)
    except redis.RedisError as exc:
        log.warning("shared metrics unavailable (Redis): %s", exc)
        return {}
    families: dict[str, list] = defaultdict(list)
    for key, value in raw.items():
        sample, labels = json.loads(key)
        family = next((n for n in SHARED if sample == n or sample.startswith(n + "_")), None)
        if family is not None:
            families[family].append((sample, dict(labels), float(value)))
    return families


def reset_shared() -> None:
    """Tests only: forget every shared figure."""
    _redis().delete(KEY)


# --- cluster state, computed at scrape time ---------------------------------------------------------------

@dataclass
class ClusterFigures:
    gpus: dict[tuple[str, str], float] = field(default_factory=dict)  # (pool, model) -> GPUs
    allocated: dict[tuple[str, str], float] = field(default_factory=dict)
    used: dict[tuple[str, str], float] = field(default_factory=dict)
    pending: dict[tuple[str, str], int] = field(default_factory=dict)  # (queue, reason code) -> jobs
    fair_share: dict[str, float] = field(default_factory=dict)  # queue -> GPUs
    queue_allocated: dict[str, float] = field(default_factory=dict)
    deserved: dict[str, float] = field(default_factory=dict)
    agent_last_seen: dict[str, float] = field(default_factory=dict)  # node -> Unix time
    # (node id, GPU index) -> GPUs held on it, and its (pool, model): billing marks the busy ones
    held: dict[tuple[int, int], float] = field(default_factory=dict)
    held_pool: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)


def slice_gpus(piece: dict, pool: NodePool | None) -> float:
    """GPUs one replica holds on each of its GPUs, from its stored slice."""
    return mode_of(piece).gpus_held(piece, pool)


def cluster_figures(now: datetime | None = None) -> ClusterFigures:
    now = now or clock.now()
    out = ClusterFigures()
    pools = {p.pk: p for p in NodePool.objects.all()}
    node_pool = dict(Node.objects.values_list("pk", "pool_id"))

    def key(pool_id) -> tuple[str, str]:
        pool = pools[pool_id]
        return pool.name, pool.gpu_model

    for pool in pools.values():
        k = key(pool.pk)
        out.gpus[k] = out.allocated[k] = out.used[k] = 0.0
    for pool_id in Gpu.objects.values_list("node__pool_id", flat=True):
        out.gpus[key(pool_id)] += 1

    replicas = Replica.objects.filter(state__in=[JobState.SCHEDULED, JobState.RUNNING], node__isnull=False)
    per_queue: dict[str, float] = defaultdict(float)
    for node_id, gpu_indices, piece, queue in replicas.values_list("node_id", "gpu_indices", "slice", "job__queue__name"):
        pool_id = node_pool.get(node_id)
        if pool_id is None:
            continue
        share = slice_gpus(piece or {}, pools[pool_id])
        for index in gpu_indices or []:
            out.allocated[key(pool_id)] += share
            out.held[(node_id, index)] = out.held.get((node_id, index), 0.0) + share
            out.held_pool[(node_id, index)] = key(pool_id)
        per_queue[queue] += share * len(gpu_indices or [])

    for queue, code, params in Job.objects.filter(state=JobState.PENDING).values_list(
            "queue__name", "pending_code", "pending_params"):
        k = (queue, lead_code(code, params) or "unknown")
        out.pending[k] = out.pending.get(k, 0) + 1

    rows = list(Queue.objects.all())
    names = {q.pk: q.name for q in rows}
    queues = [core_queue(q, names.get(q.parent_id)) for q in rows]
    demand: dict[str, float] = defaultdict(float)
    pool_by_name = {p.name: p for p in pools.values()}
    for queue, roles in Job.objects.exclude(state__in=UNSCHEDULED_STATES).values_list("queue__name", "roles"):
        for role in roles or []:
            try:
                request = core_request(role)
            except (KeyError, TypeError, ValueError):
                continue
            pool = pool_by_name.get(request.pool or "")
            demand[queue] += request_milli(request, pool.as_core() if pool else None) * role.get("max_replicas", 1)
    capacity = Gpu.objects.filter(node__ready=True, node__agent_silent=False, node__cordoned=False).count() * MILLI_PER_GPU
    usage = queue_usage(clock.now(), capacity)  # the time-based division, as the cycle makes it
    shares = fair_shares(queues, capacity, demand, usage, settings.FAIR_SHARE_USAGE_K) if queues else {}
    for q in queues:
        out.fair_share[q.name] = shares.get(q.name, 0.0) / MILLI_PER_GPU
        out.deserved[q.name] = q.deserved_milli / MILLI_PER_GPU
        out.queue_allocated[q.name] = 0.0
    # a parent queue holds what its subtree holds
    parents = {q.name: q.parent for q in queues}
    for leaf, amount in per_queue.items():
        name = leaf
        while name is not None and name in out.queue_allocated:
            out.queue_allocated[name] += amount
            name = parents.get(name)

    for name, seen in Node.objects.exclude(last_heartbeat=None).values_list("name", "last_heartbeat"):
        out.agent_last_seen[name] = seen.timestamp()
    return out
