"""A Snapshot kept by a long-lived process and changed by what changed, not built anew each cycle.

The scheduling service keeps one between cycles (`scheduling/cycle/snapshot.py` from the database's
changed rows; `bench.cycle` from its synthetic changes): jobs submitted, changed or gone, replicas
bound or ended, and the cluster's pools, nodes and queues replaced when they change. `snapshot()`
gives the core Snapshot, equal to one built whole from the same state: jobs in the order they were
first put (or by `order`, when given), replicas sorted by key, as `cycle.apply_decisions` sorts them.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from .model import Decisions, Job, Node, Pool, Queue, ReplicaKey, RunningReplica, Snapshot


class LiveSnapshot:
    def __init__(self, snapshot: Snapshot, order: Callable[[str], Any] | None = None) -> None:
        self.base = replace(snapshot, jobs=(), running=())   # pools, nodes, queues and the other fields
        self.order = order
        self.jobs: dict[str, Job] = {}
        self._unsorted = False
        self._jobs_tuple: tuple[Job, ...] | None = None
        self.running: dict[ReplicaKey, RunningReplica] = {}
        self._keys: list[ReplicaKey] = []                   # sorted
        self._running_tuple: tuple[RunningReplica, ...] | None = None
        for job in snapshot.jobs:
            self.put_job(job)
        for r in snapshot.running:
            self.put_running(r)

    # ------------------------------------------------------------------ jobs

    def put_job(self, job: Job) -> None:
        """Add a job, or replace the one with its id."""
        jobs = self.jobs
        if job.id not in jobs and jobs and self.order is not None and self.order(job.id) < self.order(next(reversed(jobs))):
            self._unsorted = True
        jobs[job.id] = job
        self._jobs_tuple = None

    def drop_job(self, job_id: str, replicas: bool = True) -> None:
        """The job is gone, and its replicas with it (unless `replicas` is False: the caller keeps
        those apart)."""
        if self.jobs.pop(job_id, None) is not None:
            self._jobs_tuple = None
        if replicas:
            for key in self._replicas_of(job_id):
                self.drop_running(key)

    def _replicas_of(self, job_id: str) -> list[ReplicaKey]:
        keys = self._keys
        at = bisect.bisect_left(keys, (job_id,))
        out = []
        while at < len(keys) and keys[at][0] == job_id:
            out.append(keys[at])
            at += 1
        return out

    # ------------------------------------------------------------------ replicas

    def put_running(self, r: RunningReplica) -> None:
        key = (r.job_id, r.role, r.index)
        if key not in self.running:
            bisect.insort(self._keys, key)
        self.running[key] = r
        self._running_tuple = None

    def drop_running(self, key: ReplicaKey) -> None:
        if self.running.pop(key, None) is not None:
            keys = self._keys
            del keys[bisect.bisect_left(keys, key)]
            self._running_tuple = None

    def apply(self, decisions: Decisions) -> None:
        """What the backend does with a cycle's decisions: evictions first, then binds (as
        `cycle.apply_decisions`, with the same checks)."""
        for e in decisions.evicts:
            key = (e.job_id, e.role, e.replica)
            if key not in self.running:
                raise ValueError(f"evict {key}: replica is not running")
            self.drop_running(key)
        for b in decisions.binds:
            key = (b.job_id, b.role, b.replica)
            if key in self.running:
                raise ValueError(f"bind {key}: replica is already running")
            self.put_running(RunningReplica(b.job_id, b.role, b.replica, b.node, b.gpus, b.slice))

    # ------------------------------------------------------------------ the cluster

    def set_cluster(self, pools: Iterable[Pool] | None = None, nodes: Iterable[Node] | None = None,
                    queues: Iterable[Queue] | None = None, **fields: Any) -> None:
        """Replace what is given: pools, nodes, queues, and Snapshot fields (now, off_peak, ...)."""
        if pools is not None:
            fields["pools"] = tuple(pools)
        if nodes is not None:
            fields["nodes"] = tuple(nodes)
        if queues is not None:
            fields["queues"] = tuple(queues)
        if fields:
            self.base = replace(self.base, **fields)

    # ------------------------------------------------------------------ out

    def snapshot(self) -> Snapshot:
        if self._jobs_tuple is None:
            if self._unsorted:
                self.jobs = dict(sorted(self.jobs.items(), key=lambda kv: self.order(kv[0])))
                self._unsorted = False
            self._jobs_tuple = tuple(self.jobs.values())
        if self._running_tuple is None:
            running = self.running
            self._running_tuple = tuple([running[k] for k in self._keys])
        return replace(self.base, jobs=self._jobs_tuple, running=self._running_tuple)
