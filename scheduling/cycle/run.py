"""The scheduling cycle against a backend: reconcile, snapshot, decide, apply.

Database first, backend after commit: a worker killed in between leaves the database ahead of
the backend, and the next cycle's reconcile closes the gap (launches replicas recorded as
Scheduled that the backend lacks, evicts pods the database no longer holds). So no replica is
bound twice or lost.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from functools import partial

from django.db import transaction
from django.db.models import Max

from scheduling import (
    buckets,
    clock,
    core,
    deadlines,
    inference,
    kinds,
    secrets,
    signals,
    ssh,
    storage,
    tensorboard,
)
from scheduling import history_catalogue as texts
from scheduling.backends.base import FAILED, RUNNING, SUCCEEDED, ClusterBackend, ReplicaLaunch, ReplicaStatus
from scheduling.bulk import insert_rows, update_rows
from scheduling.core.cycle import CycleMemo
from scheduling.cycle.inventory import sync_inventory, sync_workspaces
from scheduling.cycle.pending import PENDING_FIELDS, PendingReasons, set_pending_reasons
from scheduling.cycle.snapshot import SnapshotCache, build_snapshot
from scheduling.evictions import eviction_cause, explain_said, lost_said
from scheduling.health import update_agent_silence
from scheduling.history_texts import english, joined, said
from scheduling.lifecycle import attempts, checkpoints, ends, retries, runtime
from scheduling.lifecycle import cycle as lifecycle_cycle
from scheduling.lifecycle.cleanup import clean_up_finished
from scheduling.logs import capture_replica_logs
from scheduling.models import ACTIVE_STATES, Gpu, Job, JobState, Node, Replica, ServiceScale
from scheduling.reasons import english as reason_text
from scheduling.services import record_event, record_events, requeue_jobs, stop_workload
from scheduling.spec.units import format_duration

log = logging.getLogger(__name__)


@dataclass
class CycleReport:
    binds: int = 0
    evicts: int = 0
    started: int = 0
    finished: int = 0
    requeued: int = 0
    relaunched: int = 0
    orphans_removed: int = 0
    pending: int = 0
    inventory_changes: int = 0
    services_scaled: int = 0
    released: int = 0          # blocked jobs released or cancelled
    array_children: int = 0    # array indices made
    seconds: float = 0.0


def _at(epoch: float | None, default: datetime) -> datetime:
    return datetime.fromtimestamp(epoch, tz=default.tzinfo) if epoch else default


def gpu_uuids(node_ids) -> dict[int, dict[int, str]]:
    by_node: dict[int, dict[int, str]] = defaultdict(dict)
    for node_id, index, uuid in Gpu.objects.filter(node_id__in=node_ids).values_list("node_id", "index", "uuid"):
        by_node[node_id][index] = uuid
    return by_node


def launch_for(replica: Replica, uuids_by_node: dict[int, dict[int, str]] | None = None,
               material: secrets.LaunchSecrets | None = None,
               keys: dict[int, tuple[str, ...]] | None = None) -> ReplicaLaunch:
    """`material`: the secrets and registry credentials of the batch's jobs, `keys` their submitters' SSH keys
    (each read for this replica's job alone when not given)."""
    job = replica.job
    keys = keys if keys is not None else ssh.launch_keys([job])
    role = next(r for r in job.roles if r["name"] == replica.role)
    material = material if material is not None else secrets.launch_secrets([job])
    pull = material.pull_for(job.workspace_id, role["image"])
    uuids = (uuids_by_node or gpu_uuids([replica.node_id]))[replica.node_id]
    world = sum(r["max_replicas"] for r in job.roles)
    rank = sum(r["max_replicas"] for r in job.roles[: job.roles.index(role)]) + replica.index
    fields = dict(
        job_id=job.pk, role=replica.role, index=replica.index, workspace=job.workspace.slug, job_name=job.name,
        job_type=job.job_type, image=role["image"], command=tuple(role["command"]),
        env=tuple(sorted(role["env"].items())), node=replica.node.name, gpus=tuple(replica.gpu_indices),
        gpu_uuids=tuple(uuids.get(i, "") for i in replica.gpu_indices), slice=replica.slice,
        cpu_milli=role["cpu_milli"], mem_mib=role["mem_mib"], expected_duration_s=job.expected_duration_s,
        world_size=world, rank=rank, labels={"replica-uid": str(replica.uid)},
        secret_env=tuple(sorted((role.get("secret_env") or {}).items())),
        secret_mounts=tuple(tuple(m) for m in role.get("secret_mounts") or ()),
        secret_values=material.values_for(job.workspace_id, secrets.referenced(role)),
        pull_secret=pull.server if pull else "", pull_config=pull.config if pull else "",
        mounts=storage.role_mounts(job, replica.role),
        bucket_mounts=buckets.launch_mounts(role, replica.node.pool_id), attempt=replica.attempt,
        ssh_keys=keys.get(job.pk, ()), ssh_token=ssh.ssh_token(job.pk) if ssh.has_ssh(job) else "",
    )
    fields.update(checkpoints.launch_fields(job))   # its grace and checkpoint
    fields.update(tensorboard.launch_fields(job, replica))   # TensorBoard beside the first replica
    # what the job's kind adds or sets: its name and process, a notebook's token and home, a service's server
    return ReplicaLaunch(**{**fields, **kinds.kind_of(job).launch_fields(job)})


# --------------------------------------------------------------------------- reconcile


Release = tuple[tuple, str | None]   # a pod to delete after commit: its key, and the eviction's reason or None


def release_all(backend: ClusterBackend, releases: list[Release]) -> None:
    """After commit: evict pods (with a reason) or forget ended ones. Their logs go with them, so they
    are kept first; a backend that can (the simulated cluster) deletes them all in one call."""
    capture_replica_logs(backend, [key for key, _ in releases])
    if hasattr(backend, "release_many"):
        backend.release_many(releases)
        return
    for key, evict_reason in releases:
        if evict_reason is None:
            backend.forget(key)
        else:
            backend.evict(key, evict_reason)


def _release_on_commit(backend: ClusterBackend, releases: list[Release]) -> None:
    if releases:
        transaction.on_commit(partial(release_all, backend, releases))


def _finish_job(job: Job, state: str, now: datetime, reason, report: CycleReport, releases: list[Release],
                code: str = ""):
    for other in job.replicas.filter(state__in=ACTIVE_STATES):
        other.state, other.ended, other.end_reason = JobState.CANCELLED, now, f"job {state.lower()}"
        other.save(update_fields=["state", "ended", "end_reason"])
        releases.append(((job.pk, other.role, other.index), "job finished"))
    job.state, job.finished, job.pending_reason, job.pending_code, job.pending_params = state, now, "", "", {}
    fields = ["state", "finished", "pending_reason", "pending_code", "pending_params"]
    if code:
        fields += ends.mark_end(job, code, reason, now)
    job.save(update_fields=fields)
    notes = signals.finish_notes(job)  # in this transaction: the event below already carries them
    record_event(job, state.lower(), reason=joined([reason, *notes]))
    report.finished += 1


def _update_job_states(job_ids: set[int], now: datetime, report: CycleReport, failures: dict,
                       releases: list[Release]) -> None:
    states: dict[int, list[str]] = defaultdict(list)
    nodes: dict[int, set[str]] = defaultdict(set)
    scales: dict[int, float] = {}
    for job_id, state, node, scale in Replica.objects.filter(job_id__in=job_ids).values_list(
            "job_id", "state", "node__name", "clock_scale"):
        states[job_id].append(state)
        if state in ACTIVE_STATES:
            nodes[job_id].add(node or "")
            scales[job_id] = scale
    started, failed, attempt_ends = [], [], []
    for job in Job.objects.filter(pk__in=job_ids).select_related("workspace"):
        if job.is_final:
            continue
        if job.pk in failures:
            failed.append((job, failures[job.pk]))
            continue
        active = [s for s in states[job.pk] if s in ACTIVE_STATES]
        if not active and JobState.SUCCEEDED in states[job.pk] and job.state in (JobState.RUNNING, JobState.SCHEDULED):
            _finish_job(job, JobState.SUCCEEDED, now, said(texts.EVERY_REPLICA_FINISHED), report, releases,
                        code=ends.SUCCEEDED)
            attempt_ends.append(attempts.AttemptEnd(job, ends.SUCCEEDED))
        elif active and all(s == JobState.RUNNING for s in active) and job.state == JobState.SCHEDULED:
            job.state, job.started = JobState.RUNNING, job.started or now
            job.deadline = runtime.deadline_for(job, now, scales.get(job.pk, 1.0))
            started.append((job, len(active), ", ".join(sorted(nodes[job.pk]))))
        elif not active and job.state in (JobState.RUNNING, JobState.SCHEDULED):
            failed.append((job, ends.Failure(ends.NODE_LOST, said(texts.REPLICAS_LOST_WITH_NODE))))
    _end_runs(failed, now, report, releases, attempt_ends)
    update_rows([job for job, *_ in started], ["state", "started", "deadline"])
    attempts.open_attempts([(job, where) for job, _, where in started], now)
    record_events([(job, "running", said(texts.RUNNING, count=count), None)
                   for job, count, _ in started])
    report.started += len(started)


def _end_runs(failed: list[tuple[Job, ends.Failure]], now: datetime, report: CycleReport, releases: list[Release],
              attempt_ends: list) -> None:
    """Runs that failed: each is retried after its back-off, requeued (a lost node its retries do not count)
    or its job ends Failed with the failure's class; every run's attempt is ended first."""
    verdicts = retries.judge(failed)
    requeued, retried = [], []
    for job, failure in failed:
        verdict = verdicts[job.pk]
        attempt_ends.append(attempts.AttemptEnd(job, failure.code, verdict.counted, failure.exit_code,
                                                failure.memory_mib))
        if verdict.retry:
            retried.append((job, failure, verdict))
        elif failure.code == ends.NODE_LOST and not verdict.counted:
            requeued.append((job, failure.reason, "node-lost", None))
        else:
            reason = (said(texts.NO_RETRY_LEFT, why=failure.reason, limit=verdict.limit) if verdict.counted
                      else failure.reason)
            _finish_job(job, JobState.FAILED, now, reason, report, releases, code=failure.code)
    attempts.end_attempts(attempt_ends, now)
    requeue_jobs(requeued)
    report.requeued += len(requeued)
    _retry_after_backoff(retried, now, releases)


def _retry_after_backoff(retried: list, now: datetime, releases: list[Release]) -> None:
    """Failed runs that retry: their other replicas stop, and each job waits in its queue for its back-off."""
    if not retried:
        return
    rows = list(Replica.objects.filter(job_id__in=[job.pk for job, *_ in retried], state__in=ACTIVE_STATES)
                .values_list("pk", "job_id", "role", "index"))
    Replica.objects.filter(pk__in=[pk for pk, *_ in rows]).update(state=JobState.CANCELLED, ended=now,
                                                                   end_reason="retry")
    releases.extend(((job_id, role, index), "retry") for _, job_id, role, index in rows)
    events = []
    for job, failure, verdict in retried:
        until = now + timedelta(seconds=verdict.backoff_s)
        job.state, job.not_before, job.deadline = JobState.PENDING, until, None
        job.pending_code, job.pending_params = "retry_backoff", {"until": f"{until:%Y-%m-%d %H:%M:%S %Z}"}
        job.pending_reason = reason_text(job.pending_code, job.pending_params)
        events.append((job, "retrying", said(texts.RETRYING, why=failure.reason, retry=verdict.number,
                                             limit=verdict.limit, backoff=format_duration(verdict.backoff_s)),
                       {"class": failure.code, "exit_code": failure.exit_code, "backoff_s": verdict.backoff_s}))
    update_rows([job for job, *_ in retried], ["state", "not_before", "deadline", *PENDING_FIELDS])
    record_events(events)


@transaction.atomic
def end_overdue_runs(backend: ClusterBackend, now: datetime, report: CycleReport) -> None:
    """Runs past their max runtime: a notebook or a service stops; a job's replicas are evicted (their
    graceful stop) and the run fails as max_runtime_exceeded, retried when its spec says so."""
    overdue = list(Job.objects.filter(deadline__lte=now, state__in=ACTIVE_STATES).select_related("workspace"))
    if not overdue:
        return
    releases: list[Release] = []
    attempt_ends = []
    failing = []
    for job in overdue:
        failure = ends.max_runtime_failure(job.max_runtime_s or 0)
        if kinds.kind_of(job).overdue_action() == kinds.OVERDUE_STOP:   # it can start again
            stop_workload(None, job, failure.reason)
            attempt_ends.append(attempts.AttemptEnd(job, ends.MAX_RUNTIME_EXCEEDED))
        else:
            failing.append((job, failure))
    rows = list(Replica.objects.filter(job_id__in=[job.pk for job, _ in failing], state__in=ACTIVE_STATES)
                .values_list("pk", "job_id", "role", "index"))
    Replica.objects.filter(pk__in=[pk for pk, *_ in rows]).update(state=JobState.FAILED, ended=now,
                                                                   end_reason="max runtime")
    releases.extend(((job_id, role, index), "max runtime") for _, job_id, role, index in rows)
    _end_runs(failing, now, report, releases, attempt_ends)
    _release_on_commit(backend, releases)


@transaction.atomic
def reconcile(backend: ClusterBackend, now: datetime, report: CycleReport) -> None:
    statuses: dict[tuple, ReplicaStatus] = {s.key: s for s in backend.statuses()}
    touched: set[int] = set()
    failures: dict = {}
    relaunch, changed, releases = [], [], []
    # every active replica's state is compared; only those that change are read whole
    todo = []
    for pk, job_id, role, index, state in Replica.objects.filter(state__in=ACTIVE_STATES).values_list(
            "pk", "job_id", "role", "index", "state"):
        status = statuses.pop((job_id, role, index), None)
        if status is None or status.phase in (SUCCEEDED, FAILED) or (
                status.phase == RUNNING and state == JobState.SCHEDULED):
            todo.append((pk, status))
    rows = Replica.objects.select_related("job__workspace", "node").in_bulk([pk for pk, _ in todo])
    for pk, status in todo:
        replica = rows.get(pk)
        if replica is None or replica.state not in ACTIVE_STATES:
            continue   # ended since it was read
        key = (replica.job_id, replica.role, replica.index)
        if status is None:
            if replica.state == JobState.SCHEDULED:
                relaunch.append(replica)  # decided, never applied: apply now
                continue
            replica.state, replica.ended, replica.end_reason = JobState.PREEMPTED, now, "node-lost"
        elif status.phase == RUNNING and replica.state == JobState.SCHEDULED:
            replica.state, replica.started = JobState.RUNNING, _at(status.started_at, now)
        elif status.phase in (SUCCEEDED, FAILED):
            replica.state = JobState.SUCCEEDED if status.phase == SUCCEEDED else JobState.FAILED
            replica.started = replica.started or _at(status.started_at, now)
            replica.ended, replica.end_reason = _at(status.finished_at, now), status.message[:64]
            releases.append((key, None))
            if status.phase == FAILED:
                failures[replica.job_id] = ends.replica_failure(
                    f"{replica.role}-{replica.index}", status.exit_code, status.oom, _memory_of(replica), status.message)
        else:
            continue
        changed.append(replica)
        touched.add(replica.job_id)
    update_rows(changed, ["state", "started", "ended", "end_reason"])
    if relaunch:
        uuids = gpu_uuids({r.node_id for r in relaunch})
        material = secrets.launch_secrets(r.job for r in relaunch)
        keys = ssh.launch_keys(r.job for r in relaunch)
        launches = [launch_for(r, uuids, material, keys) for r in relaunch]
        transaction.on_commit(lambda: launch_all(backend, launches))
        report.relaunched += len(relaunch)
    for key in statuses:  # the backend runs something the database does not hold
        releases.append((key, "not held by the scheduler"))
        report.orphans_removed += 1
    _update_job_states(touched, now, report, failures, releases)
    _release_on_commit(backend, releases)
    checkpoints.release_gone(backend, now)   # evicted pods gone: what they held is free again


def _memory_of(replica: Replica) -> int | None:
    """The memory limit of the replica's role, MiB (what an OOM hit)."""
    return next((r.get("mem_mib") for r in replica.job.roles if r["name"] == replica.role), None)


def launch_all(backend: ClusterBackend, launches: list[ReplicaLaunch]) -> None:
    """One call when the backend can take a batch (the simulated cluster), else one per replica."""
    if hasattr(backend, "launch_many"):
        backend.launch_many(launches)
    else:
        for launch in launches:
            backend.launch(launch)


# --------------------------------------------------------------------------- apply


@transaction.atomic
def apply(decisions: core.Decisions, backend: ClusterBackend, now: datetime, report: CycleReport,
          kept_reasons: PendingReasons | None = None) -> None:
    evicted_jobs: dict[int, list[core.Evict]] = defaultdict(list)
    releases: list[Release] = []
    # the evicted replicas still active (locked until commit), then each reason's rows in one UPDATE
    rows = Replica.objects.select_for_update().filter(
        job_id__in={int(e.job_id) for e in decisions.evicts}, state__in=ACTIVE_STATES,
    ).values_list("pk", "job_id", "role", "index", "gpu_indices")
    active = {(job_id, role, index): pk for pk, job_id, role, index, _ in rows}
    gpus_of = {pk: gpus for pk, *_, gpus in rows}
    by_reason: dict[str, list[int]] = defaultdict(list)
    evicted: dict[int, tuple] = {}
    freed: set[tuple[str, int]] = set()
    for e in decisions.evicts:
        key = (int(e.job_id), e.role, e.replica)
        pk = active.pop(key, None)   # popped: a replica listed twice is evicted once
        if pk is not None:
            by_reason[e.reason].append(pk)
            evicted[pk] = key
            freed.update((e.node, gpu) for gpu in gpus_of.get(pk) or ())
            evicted_jobs[key[0]].append(e)
            releases.append((key, e.reason))
            report.evicts += 1
    for reason, pks in by_reason.items():
        Replica.objects.filter(pk__in=pks).update(state=JobState.PREEMPTED, ended=now, end_reason=reason)
    _release_on_commit(backend, releases)
    takers = {e.by_job for evicts in evicted_jobs.values() for e in evicts if e.by_job.isdigit()}
    workspace_of = dict(Job.objects.filter(pk__in=takers).values_list("pk", "workspace_id"))
    still_running = set(Replica.objects.filter(job_id__in=evicted_jobs, state__in=ACTIVE_STATES)
                        .values_list("job_id", flat=True).distinct())
    shrunk, requeued = [], []
    jobs_evicted = Job.objects.filter(pk__in=evicted_jobs).select_related("workspace").in_bulk()
    lost = checkpoints.record_losses(evicted, jobs_evicted, now, pods_linger=getattr(backend, "pods_linger", False))
    for job in jobs_evicted.values():
        evicts = evicted_jobs[job.pk]
        reasons = ", ".join(sorted({e.reason for e in evicts}))
        causes = [eviction_cause(e, same_workspace=e.by_job.isdigit() and workspace_of.get(int(e.by_job))
                                 == job.workspace_id) for e in evicts]
        sentences = [s for s in map(explain_said, causes) if s]
        why = joined({english(s): s for s in sentences}.values())   # each sentence once
        details = {"causes": list({json.dumps(c, sort_keys=True): c for c in causes}.values()),
                   "lost_gpu_hours": str(lost.get(job.pk, 0))}
        lost_sentence = lost_said(lost.get(job.pk, Decimal(0)), resumable=checkpoints.every_of(job) is not None)
        if job.pk in still_running:
            reason = (said(texts.SOME_EVICTED_WHY, count=len(evicts),
                           reasons=reasons, why=why) if sentences
                      else said(texts.SOME_EVICTED, count=len(evicts),
                                reasons=reasons))
            shrunk.append((job, "shrunk", joined([reason, lost_sentence]), details))
        else:
            reason = (said(texts.EVICTED_WHY, reasons=reasons, why=why) if sentences
                      else said(texts.EVICTED, reasons=reasons))
            requeued.append((job, joined([reason, lost_sentence]), reasons, details))
    record_events(shrunk)
    requeue_jobs(requeued)
    report.requeued += len(requeued)

    binds = decisions.binds
    if freed and getattr(backend, "pods_linger", False):   # those GPUs are free once the evicted pods are gone
        binds = checkpoints.binds_after_stops(binds, freed)
    nodes = {n.name: n for n in Node.objects.filter(name__in={b.node for b in binds})}
    bound: dict[int, list[core.Bind]] = defaultdict(list)
    for b in binds:
        bound[int(b.job_id)].append(b)
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=bound).select_related("workspace")}
    attempts = {
        (row["job_id"], row["role"], row["index"]): row["last"]
        for row in Replica.objects.filter(job_id__in=bound).values("job_id", "role", "index").annotate(last=Max("attempt"))
    }
    # a service's placement launches its current revision (the job's spec) and remembers which
    revisions = dict(ServiceScale.objects.filter(job_id__in=bound).values_list("job_id", "revision"))
    slices: dict[core.Slice, dict] = {}   # a cycle's binds hold a few kinds of slice: each made a dict once
    new = [
        Replica(job=jobs[job_id], role=b.role, index=b.replica, state=JobState.SCHEDULED, node=nodes[b.node],
                gpu_indices=list(b.gpus), slice=dict(slices.get(b.slice) or slices.setdefault(b.slice, asdict(b.slice))),
                clock_scale=getattr(backend, "clock_scale", 1.0),
                attempt=attempts.get((job_id, b.role, b.replica), -1) + 1, revision=revisions.get(job_id))
        for job_id, binds in bound.items() for b in binds
    ]
    insert_rows(new)   # their keys are not needed: launches name a replica by its uid
    report.binds += len(new)
    events, scheduled = [], []
    for job_id, job in jobs.items():
        where = ", ".join(sorted({b.node for b in bound[job_id]}))
        if job.state == JobState.PENDING:
            job.state, job.pending_reason, job.pending_code, job.pending_params = JobState.SCHEDULED, "", "", {}
            scheduled.append(job)
            events.append((job, "scheduled", said(texts.PLACED, count=len(bound[job_id]), nodes=where), None))
        else:
            events.append((job, "grown", said(texts.GROWN, count=len(bound[job_id]), nodes=where), None))
    update_rows(scheduled, ["state", *PENDING_FIELDS])
    record_events(events)
    uuids = gpu_uuids({n.pk for n in nodes.values()})
    material = secrets.launch_secrets(r.job for r in new)
    keys = ssh.launch_keys(r.job for r in new)
    launches = [launch_for(r, uuids, material, keys) for r in new]
    transaction.on_commit(lambda: launch_all(backend, launches))

    set_pending_reasons(decisions.pending_codes, decisions.pending, kept_reasons)
    report.pending = len(decisions.pending)


class NoLongerLeading(RuntimeError):
    """The cycle no longer holds its lock: another worker may be deciding on the same cluster."""


class Kept:
    """What the process that runs the cycles keeps from one to the next: the snapshot, read
    incrementally (`cycle.snapshot.SnapshotCache`), the core's memo (`core.cycle.CycleMemo`) and the
    reasons the pending rows hold (`cycle.pending.PendingReasons`). None changes a decision; a cold
    process builds them whole."""

    def __init__(self) -> None:
        self.snapshot = SnapshotCache()
        self.memo = CycleMemo()
        self.reasons = PendingReasons()
        self.lock = threading.Lock()   # one cycle at a time uses them
        self.frozen_cycles = 0         # cycles since the whole heap was last collected (collected_once)


KEPT = Kept()

# Cycles between two collections of the whole heap (collected_once): garbage cycles among frozen objects wait that long.
WHOLE_HEAP_EVERY = 50


@contextmanager
def collected_once(kept: Kept) -> Iterator[None]:
    """One pass of the cyclic garbage collector per cycle, over what the cycle left, not the whole heap.

    A worker keeps half a million objects between cycles on a 1,000-node cluster (the snapshot, the memo, the
    reasons). With the collector on, its full passes walked them all during the cycle, 0.8-0.9 s of a 5 s
    database cycle on a slow machine. The collector is off while the cycle runs (the core already kept it off);
    after it, one pass collects what the cycle left and freezes the survivors, so later passes skip them
    (an object whose last reference goes is still freed at once). Every WHOLE_HEAP_EVERY cycles the heap is
    unfrozen first, so that garbage cycles among frozen objects are freed too."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        kept.frozen_cycles += 1
        if kept.frozen_cycles >= WHOLE_HEAP_EVERY:
            kept.frozen_cycles = 0
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        if collecting:
            gc.enable()


def run_scheduling_cycle(backend: ClusterBackend, now: datetime | None = None,
                         still_leading: Callable[[], bool] = lambda: True, kept: Kept | None = KEPT) -> CycleReport:
    """One cycle. Its decisions commit only if `still_leading()` holds once they are written, so a
    worker that lost its lock mid-cycle rolls them back (and launches nothing) instead of binding
    beside the worker that took the lock over. `kept=None` reads the snapshot whole."""
    if kept is None:
        return _run_cycle(backend, now, still_leading, None)
    with collected_once(kept):
        return _run_cycle(backend, now, still_leading, kept)


def _run_cycle(backend: ClusterBackend, now: datetime | None, still_leading: Callable[[], bool],
               kept: Kept | None) -> CycleReport:
    started = time.perf_counter()
    now = now or clock.now()
    report = CycleReport()
    with signals.batched():
        report.inventory_changes = sync_inventory(backend) + len(update_agent_silence(now))
        sync_workspaces(backend)
        reconcile(backend, now, report)
        end_overdue_runs(backend, now, report)
        clean_up_finished(backend, now)
        report.services_scaled = len(inference.scale_services(backend, now))
        report.released, report.array_children = lifecycle_cycle.advance(now)   # before the snapshot reads them
        factors: deadlines.Factors = {}   # the queues' run-time factors, read once for both deadline checks
        deadlines.refresh(now, factors)   # deadline jobs' latest starts, which the snapshot gives the core
        if kept is None:
            decisions = core.run_cycle(build_snapshot(now))
        else:
            with kept.lock:
                decisions = core.run_cycle(build_snapshot(now, kept.snapshot), kept.memo)
        with transaction.atomic():
            apply(decisions, backend, now, report, kept.reasons if kept is not None else None)
            record_events(deadlines.report_unmeetable(now, factors))   # a deadline that can no longer be met, at once
            if not still_leading():
                raise NoLongerLeading("the scheduling cycle lost its lock before committing its decisions")
    report.seconds = time.perf_counter() - started
    if report.binds or report.evicts or report.finished:
        log.info("cycle: %s", report)
    return report
