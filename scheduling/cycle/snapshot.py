"""The scheduler's view of the database: one core Snapshot per cycle, built with a few queries.

`build_snapshot(now)` reads it whole. The process that runs the cycles passes a `SnapshotCache`: it
keeps the last snapshot and, each cycle, reads every job and placement row's stamp only (`row_stamp`: on
PostgreSQL the id of the transaction that last wrote the row), then the version of the rows written since
(`row_version`: the content of the columns the snapshot reads, an MD5 of it computed by PostgreSQL), and
then only the rows whose version changed, so a cycle on a large cluster reads what changed, not everything.
Pools, nodes, GPUs and queues are few and read whole. The snapshot is the one `build_snapshot(now)`
would give (tests compare them after random changes).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from scheduling import offpeak_calendar
from scheduling.core import model as cm
from scheduling.core.live import LiveSnapshot
from scheduling.core.units import MILLI_PER_GPU, gpu_model_name, vendor_name
from scheduling.cycle.usage import queue_usage
from scheduling.models import (
    ACTIVE_STATES,
    FINAL_STATES,
    UNSCHEDULED_STATES,
    Gpu,
    Job,
    Node,
    NodePool,
    Queue,
    Replica,
)


def core_queue(queue: Queue, parent: str | None) -> cm.Queue:
    return cm.Queue(
        name=queue.name, parent=parent, deserved_milli=int(queue.deserved_gpus * MILLI_PER_GPU),
        over_quota_weight=float(queue.over_quota_weight),
        limit_milli=None if queue.limit_gpus is None else int(queue.limit_gpus * MILLI_PER_GPU), priority=queue.priority,
    )


REQUEST_FIELDS = ("mode", "num_gpus", "gpu_milli", "gpu_mem_mib", "mig_profile", "cpu_milli", "mem_mib", "vendor",
                  "gpu_model", "pool")


def core_request(role: dict) -> cm.Request:
    fields = {f: role[f] for f in REQUEST_FIELDS}
    # jobs stored before names were normalised at submit may spell them differently
    fields["gpu_model"], fields["vendor"] = gpu_model_name(fields["gpu_model"]), vendor_name(fields["vendor"])
    return cm.Request(**fields)


def core_roles(roles: list[dict]) -> tuple[cm.Role, ...]:
    return tuple(cm.Role(r["name"], core_request(r), r["min_replicas"], r["max_replicas"]) for r in roles)


def core_job(job_id: int, queue: str, roles: tuple[cm.Role, ...], priority: int, preemptible: bool,
             reduce_cost: bool, created: datetime, topology: str | dict | None = None,
             latest_start: datetime | None = None) -> cm.Job:
    """`latest_start`: a deadline job's (scheduling.deadlines keeps it current), as epoch seconds for the core."""
    return cm.Job(
        id=str(job_id), queue=queue, priority=priority, preemptible=preemptible, reduce_cost=reduce_cost,
        created=created.timestamp(), roles=roles, topology=core_topology(topology),
        latest_start=latest_start.timestamp() if latest_start is not None else None,
    )


_TOPOLOGIES: dict[str, cm.Topology | None] = {"{}": None, "": None}


def core_topology(stored: str | dict | None) -> cm.Topology | None:
    """A job's stored topology ({"required": level} or {"preferred": level}, as JSON text or decoded) for
    the core; jobs share one object per text."""
    if not stored:
        return None
    text = stored if isinstance(stored, str) else json.dumps(stored, sort_keys=True)
    if text not in _TOPOLOGIES:
        value = json.loads(text) if isinstance(stored, str) else stored
        required = value.get("required")
        level = required or value.get("preferred")
        _TOPOLOGIES[text] = cm.Topology(level, required=bool(required)) if level else None
    return _TOPOLOGIES[text]


def core_labels(labels: dict, keys: set[str]) -> tuple[tuple[str, str], ...]:
    """The node's labels the pools' topology levels read, sorted."""
    return tuple(sorted((k, str(v)) for k, v in (labels or {}).items() if k in keys))


def core_slice(slice_: dict, gpu_memory: list[int]) -> cm.Slice:
    """A stored slice. A whole-GPU one written before slices named their memory holds the GPUs'
    full memory (the core refuses a whole GPU that holds none: evicting it would free nothing)."""
    held = cm.Slice(**slice_)
    if held.kind == "whole" and held.gpu_mem_mib <= 0 and gpu_memory and min(gpu_memory) > 0:
        held = replace(held, gpu_milli=MILLI_PER_GPU, gpu_mem_mib=min(gpu_memory))
    return held


class Cluster:
    """Pools, nodes (with their GPUs) and queues, read whole: a few thousand rows at most."""

    def __init__(self) -> None:
        self.pools = tuple(p.as_core() for p in NodePool.objects.all())
        gpus_by_node: dict[int, list[cm.Gpu]] = defaultdict(list)
        for node_id, index, uuid, memory in Gpu.objects.values_list("node_id", "index", "uuid", "memory_mib"):
            gpus_by_node[node_id].append(cm.Gpu(index=index, uuid=uuid, memory_mib=memory))
        self.node_names: dict[int, str] = {}
        nodes = []
        keys = {key for pool in self.pools for key in pool.topology}
        for pk, name, pool, cpu, mem, ready, silent, cordoned, labels in Node.objects.values_list(
                "pk", "name", "pool__name", "cpu_milli", "memory_mib", "ready", "agent_silent", "cordoned", "labels"):
            self.node_names[pk] = name
            nodes.append(cm.Node(name=name, pool=pool, gpus=tuple(sorted(gpus_by_node[pk], key=lambda g: g.index)),
                                 cpu_milli=cpu, memory_mib=mem, ready=ready and not silent, cordoned=cordoned,
                                 labels=core_labels(labels, keys) if keys else ()))
        self.nodes = tuple(nodes)
        self.queue_names = dict(Queue.objects.values_list("pk", "name"))
        self.queues = tuple(core_queue(q, self.queue_names.get(q.parent_id)) for q in Queue.objects.all())
        self.memory = {(node.name, gpu.index): gpu.memory_mib for node in self.nodes for gpu in node.gpus}

    def fields(self, now: datetime) -> dict:
        """The Snapshot's fields besides jobs and replicas."""
        when = offpeak_calendar.off_peak_at(now)
        # ReduceCost jobs are few: their workspaces are read every cycle (a currency may change monthly)
        own = offpeak_calendar.job_off_peak_at(now, dict(scheduled_jobs(now).filter(reduce_cost=True).order_by().values_list(
            "pk", "workspace_id")))
        usage = queue_usage(now, sum(len(n.gpus) for n in self.nodes) * MILLI_PER_GPU)
        return dict(pools=self.pools, nodes=self.nodes, queues=self.queues, now=now.timestamp(), off_peak=when.now,
                    next_off_peak=when.next_start, job_off_peak=tuple(sorted(
                        (str(pk), w.now, w.next_start) for pk, w in own.items())),
                    queue_usage=tuple(sorted(usage.items())), usage_k=settings.FAIR_SHARE_USAGE_K if usage else 0.0,
                    held=self.held(now), backfill_patience_s=settings.BACKFILL_PATIENCE_S)

    def held(self, now: datetime) -> tuple[cm.HeldReplica, ...]:
        """Evicted replicas whose pods are still stopping (Replica.held_until, set on a backend whose pods
        stop in their own time): few, read every cycle through the index on held_until."""
        found = []
        for job_id, role, index, node_id, gpus, slice_, roles in Replica.objects.filter(
                held_until__gt=now, node__isnull=False).values_list(
                "job_id", "role", "index", "node_id", "gpu_indices", "slice", "job__roles"):
            node = self.node_names.get(node_id)
            asked = next((r for r in roles or () if r.get("name") == role), {})
            if node is not None:
                found.append(cm.HeldReplica(
                    str(job_id), role, index, node, tuple(gpus),
                    core_slice(slice_, [self.memory.get((node, g), 0) for g in gpus]),
                    int(asked.get("cpu_milli") or 0), int(asked.get("mem_mib") or 0)))
        return tuple(sorted(found, key=lambda h: (h.job_id, h.role, h.index)))

    def running(self, job_id: int, role: str, index: int, node_id: int, gpus: list, slice_: dict) -> cm.RunningReplica:
        node = self.node_names[node_id]
        return cm.RunningReplica(job_id=str(job_id), role=role, index=index, node=node, gpus=tuple(gpus),
                                 slice=core_slice(slice_, [self.memory.get((node, g), 0) for g in gpus]))


def scheduled_jobs(now: datetime):
    """The jobs the scheduler sees: not ended or stopped, with roles, not held for later."""
    return Job.objects.exclude(state__in=UNSCHEDULED_STATES).exclude(roles=[]).exclude(not_before__gt=now)


def placed_replicas():
    """The replicas that hold capacity: active, on a node, of a job that has not ended."""
    return Replica.objects.filter(state__in=ACTIVE_STATES, node__isnull=False).exclude(job__state__in=FINAL_STATES)


JOB_COLUMNS = ("pk", "queue_id", Cast("roles", TextField()), "priority", "preemptible", "reduce_cost", "created",
               Cast("topology", TextField()), "latest_start")
REPLICA_COLUMNS = ("pk", "job_id", "role", "index", "node_id", "gpu_indices", "slice")


class Roles:
    """Roles decoded once per distinct JSON text: many jobs share their roles (the core's objects
    are immutable, so sharing them is safe), and decoding them was about half of the build. Equal
    roles are one tuple, so the core's per-roles caches (`Session.plans`) serve all their jobs."""

    def __init__(self) -> None:
        self.by_text: dict[str, tuple[cm.Role, ...]] = {}
        self.interned: dict[tuple[cm.Role, ...], tuple[cm.Role, ...]] = {}

    def __call__(self, text: str) -> tuple[cm.Role, ...]:
        found = self.by_text.get(text)
        if found is None:
            decoded = core_roles(json.loads(text))
            found = self.by_text[text] = self.interned.setdefault(decoded, decoded)
        return found


def build_snapshot(now: datetime, cache: SnapshotCache | None = None) -> cm.Snapshot:
    """The scheduler's snapshot of the database at `now`; with `cache`, read incrementally."""
    if cache is not None:
        return cache.build(now)
    cluster = Cluster()
    roles = Roles()
    queues = cluster.queue_names
    jobs = [core_job(pk, queues[queue_id], roles(text), priority, preemptible, reduce_cost, created, topology, latest)
            for pk, queue_id, text, priority, preemptible, reduce_cost, created, topology, latest in
            scheduled_jobs(now).order_by("pk").values_list(*JOB_COLUMNS)]
    running = [cluster.running(*row[1:]) for row in placed_replicas().values_list(*REPLICA_COLUMNS)]
    return cm.Snapshot(jobs=tuple(jobs), running=tuple(sorted(running, key=lambda r: (r.job_id, r.role, r.index))),
                       **cluster.fields(now))


VERSION_COLUMNS = {Job: ("queue_id", "roles", "priority", "preemptible", "reduce_cost", "created", "topology",
                         "latest_start"),
                   Replica: ("job_id", "role", "index", "node_id", "gpu_indices", "slice")}


def row_version(model) -> RawSQL:
    """A row's version as the snapshot sees it: its content in the columns the snapshot reads (on
    PostgreSQL their MD5, computed by the server), so writes to other columns (a pending job's
    reason is rewritten most cycles) do not make the row read again. Which rows are taken at all
    is the query's filter, read every cycle."""
    table = connection.ops.quote_name(model._meta.db_table)
    parts = [f"COALESCE(CAST({table}.{connection.ops.quote_name(c)} AS TEXT), '')" for c in VERSION_COLUMNS[model]]
    content = " || '/' || ".join(parts)
    return RawSQL(f"md5({content})" if connection.vendor == "postgresql" else content, ())


def row_stamp(model) -> RawSQL:
    """What tells, cheaply, that a row may have changed: on PostgreSQL the transaction that wrote the row's current
    version (`xmin`: every write makes a new version, and freezing keeps it) and where that version lies (`ctid`:
    a row written twice in one transaction keeps its `xmin`, not its place). A row with the same stamp is
    unchanged, so only rows with a new one have their `row_version` computed (hashing every row's roles was most
    of a large cluster's read). Elsewhere the version itself."""
    if connection.vendor != "postgresql":
        return row_version(model)
    table = connection.ops.quote_name(model._meta.db_table)
    return RawSQL(f"{table}.xmin::text || {table}.ctid::text", ())


class SnapshotCache:
    """The last snapshot of a long-lived process (the Celery worker that runs the cycles; a cold
    process builds it whole), kept per database, and each job and replica row's version when read.
    `build(now)` reads the versions of the rows the snapshot takes, then the rows that are new or
    changed, and drops those gone. A change of queue names, node names or GPU memory (which jobs
    and replicas are read through) reads those rows whole again."""

    CHUNK = 5000  # primary keys per query when reading changed rows

    def __init__(self) -> None:
        self.database: tuple | None = None
        self.reset()

    def reset(self) -> None:
        self.live: LiveSnapshot | None = None
        self.jobs: dict[int, tuple] = {}          # job pk -> (row stamp, row version)
        self.replicas: dict[int, tuple] = {}      # replica pk -> (row stamp, row version, replica key)
        self.roles = Roles()
        self.queue_names: dict[int, str] | None = None
        self.node_names: dict[int, str] | None = None
        self.memory: dict | None = None
        self.reads = {"jobs": 0, "replicas": 0}  # rows read whole by the last build
        self.checked = {"jobs": 0, "replicas": 0}  # rows whose version the last build computed (stamp changed)

    def build(self, now: datetime) -> cm.Snapshot:
        database = (connection.alias, connection.settings_dict.get("NAME"), connection.vendor)
        if database != self.database:
            self.database = database
            self.reset()
        try:
            return self._build(now)
        except BaseException:
            self.reset()   # a half-applied read is not kept
            raise

    def _build(self, now: datetime) -> cm.Snapshot:
        cluster = Cluster()
        if self.live is None:
            self.live = LiveSnapshot(cm.Snapshot(pools=(), nodes=(), queues=(), jobs=()), order=int)
        live = self.live
        if cluster.queue_names != self.queue_names:
            for job_id in list(live.jobs):          # their queue names are read again
                live.drop_job(job_id, replicas=False)
            self.jobs = {}
            self.queue_names = cluster.queue_names
        if cluster.node_names != self.node_names or cluster.memory != self.memory:
            for *_, key in self.replicas.values():   # their nodes and slices are read again
                live.drop_running(key)
            self.replicas = {}
            self.node_names, self.memory = cluster.node_names, cluster.memory
        self._jobs(now, cluster)
        self._replicas(cluster)
        live.set_cluster(**cluster.fields(now))
        return live.snapshot()

    def _changed(self, kept: dict, query, name: str) -> tuple[list[int], list[int]]:
        """(pks new or changed, pks gone) between the kept (stamp, version, ...) and the rows now: the stamps of
        every row taken, then the versions of those written since; a row written only in columns the snapshot
        does not read keeps its entry with its new stamp."""
        model = query.model
        seen, written = set(), []
        for pk, stamp in query.order_by().values_list("pk", row_stamp(model)):   # in any order: no sort
            seen.add(pk)
            entry = kept.get(pk)
            if entry is None or entry[0] != stamp:
                written.append(pk)
        gone = [pk for pk in kept if pk not in seen]
        if connection.vendor != "postgresql":   # the stamp is the version
            self.checked[name] = 0
            return written, gone
        self.checked[name] = len(written)
        changed = []
        for start in range(0, len(written), self.CHUNK):
            chunk = written[start:start + self.CHUNK]
            found = set()
            for pk, stamp, version in query.filter(pk__in=chunk).values_list("pk", row_stamp(model), row_version(model)):
                found.add(pk)
                entry = kept.get(pk)
                if entry is not None and entry[1] == version:
                    kept[pk] = (stamp, *entry[1:])
                else:
                    changed.append(pk)
            changed.extend(pk for pk in chunk if pk not in found)   # no longer taken: dropped when read
        return changed, gone

    def _jobs(self, now: datetime, cluster: Cluster) -> None:
        live, queues = self.live, cluster.queue_names
        query = scheduled_jobs(now)
        changed, gone = self._changed(self.jobs, query, "jobs")
        for pk in gone:
            del self.jobs[pk]
            live.drop_job(str(pk), replicas=False)
        self.reads["jobs"] = len(changed)
        for start in range(0, len(changed), self.CHUNK):
            chunk = changed[start:start + self.CHUNK]
            found = set()
            for pk, stamp, version, queue_id, text, priority, preemptible, reduce_cost, created, topology, latest in (
                    query.filter(pk__in=chunk).values_list("pk", row_stamp(Job), row_version(Job), *JOB_COLUMNS[1:])):
                found.add(pk)
                self.jobs[pk] = (stamp, version)
                live.put_job(core_job(pk, queues[queue_id], self.roles(text), priority, preemptible, reduce_cost,
                                      created, topology, latest))
            for pk in chunk:
                if pk not in found:   # written again since its version was read, and no longer taken
                    if self.jobs.pop(pk, None) is not None:
                        live.drop_job(str(pk), replicas=False)
        if len(self.roles.by_text) > 2 * len(live.jobs) + 1000:
            kept = {id(job.roles) for job in live.jobs.values()}
            self.roles.by_text = {t: r for t, r in self.roles.by_text.items() if id(r) in kept}
            self.roles.interned = {r: r for r in self.roles.by_text.values()}

    def _replicas(self, cluster: Cluster) -> None:
        live = self.live
        query = placed_replicas()
        changed, gone = self._changed(self.replicas, query, "replicas")
        for pk in gone:
            live.drop_running(self.replicas.pop(pk)[2])
        self.reads["replicas"] = len(changed)
        for start in range(0, len(changed), self.CHUNK):
            chunk = changed[start:start + self.CHUNK]
            found = set()
            for pk, stamp, version, *row in query.filter(pk__in=chunk).values_list(
                    "pk", row_stamp(Replica), row_version(Replica), *REPLICA_COLUMNS[1:]):
                found.add(pk)
                replica = cluster.running(*row)
                key = (replica.job_id, replica.role, replica.index)
                old = self.replicas.get(pk)
                if old is not None and old[2] != key:
                    live.drop_running(old[2])
                self.replicas[pk] = (stamp, version, key)
                live.put_running(replica)
            for pk in chunk:
                if pk not in found and pk in self.replicas:
                    live.drop_running(self.replicas.pop(pk)[2])

