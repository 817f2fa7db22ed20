"""The capacity planner's work: replaying the platform's history (or an uploaded trace) on the actual cluster
and on one the operator edited, the figures of each, and the pool-against-silos saving the dashboard shows.

Every replay is `scheduling/core/replay.py`'s engine, so every decision is the production core's. Runs are
`PlannerRun` rows: `start_run` records one and queues `tasks.run_planner` after commit; the task calls
`execute_run`, which moves it from queued to running to done (or failed) with its progress on the way. An
operator may cancel a queued or running run (`cancel_run`): a replay checks at every progress update whether
its run is still running and stops there when it is not.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from django.db import transaction

from billing.api import price_tables, pricing
from portal.console import audit
from portal.console.models import PlannerRun
from scheduling.api import (
    MILLI_PER_GPU,
    HistoryJob,
    Replay,
    ReplayJob,
    clock,
    cluster_snapshot,
    deadlines,
    gang,
    gpu_model_name,
    history_jobs,
    late_allowed,
    percentile,
    read_philly,
    revoke_task,
    send_task,
)
from scheduling.api import cluster_model as cm
from scheduling.api import replay_jobs as history_replay_jobs

log = logging.getLogger(__name__)

CYCLE_S = 30.0              # simulated seconds between cycles (and on every arrival and end)
CHART_BUCKETS = 240         # points of the allocation chart
WAIT_POINTS = 101           # quantiles of each queue's waits kept for the distribution chart
STEP_CYCLES = 25            # simulated cycles between progress updates (and checks for a cancel)
MAX_CYCLES = 60_000         # per replay: beyond it the replay stops and says so
WAIT_TARGET_S = 60.0        # the savings search: every queue's p95 wait within this
MAX_SEARCH_NODES = 256      # the savings search gives up on a pool beyond this many nodes
BEST_EFFORT_PRIORITY, STRICT_PRIORITY = 0, 50


class PlannerInputError(ValueError):
    """Inputs the planner cannot replay (a queue tree the scheduler refuses, a trace it cannot read)."""


class ReplayCancelled(Exception):
    """The run was cancelled while it replayed: it stops at its next progress update."""


# --------------------------------------------------------------------------- the edited cluster


def actual_inputs(cluster: cm.Snapshot) -> dict:
    """The cluster as the planner form's starting values."""
    pools = {}
    for p in cluster.pools:
        mine = [n for n in cluster.nodes if n.pool == p.name]
        pools[p.name] = {"nodes": len(mine), "gpu_model": p.gpu_model, "gpu_memory_gib": p.gpu_memory_mib // 1024,
                         "gpus_per_node": len(mine[-1].gpus) if mine else 8}
    queues = {q.name: {"deserved_gpus": _gpus(q.deserved_milli),
                       "limit_gpus": None if q.limit_milli is None else _gpus(q.limit_milli)} for q in cluster.queues}
    return {"pools": pools, "queues": queues, "preemption": True}


def _gpus(milli: int) -> str:
    return f"{(Decimal(milli) / MILLI_PER_GPU).normalize():f}"


def edited_cluster(cluster: cm.Snapshot, inputs: dict) -> cm.Snapshot:
    """`cluster` with the inputs' node counts, GPU models and queue quotas. Nodes removed are the last by
    name; nodes added copy the pool's last node (or have `gpus_per_node` GPUs in an empty pool)."""
    edits = inputs.get("pools", {})
    pools, nodes = [], []
    for pool in cluster.pools:
        mine = [n for n in cluster.nodes if n.pool == pool.name]
        edit = edits.get(pool.name)
        if edit is None:
            pools.append(pool)
            nodes += mine
            continue
        model, memory = gpu_model_name(edit["gpu_model"]), int(edit["gpu_memory_gib"]) * 1024
        changed = (model, memory) != (pool.gpu_model, pool.gpu_memory_mib)
        pools.append(replace(pool, gpu_model=model, gpu_memory_mib=memory))
        count = int(edit["nodes"])
        kept = mine[:count]
        shape = mine[-1] if mine else cm.Node.with_gpus("new", pool.name, int(edit.get("gpus_per_node") or 8))
        gpus = int(edit.get("gpus_per_node") or len(shape.gpus))
        added = [cm.Node.with_gpus(f"{pool.name}-planned-{i + 1}", pool.name, gpus, cpu_milli=shape.cpu_milli,
                                   memory_mib=shape.memory_mib) for i in range(len(kept), count)]
        for node in kept + added:
            # a new model's GPUs have the pool's memory
            nodes.append(replace(node, gpus=tuple(replace(g, memory_mib=0) for g in node.gpus)) if changed else node)
    queue_edits = inputs.get("queues", {})
    queues = []
    for q in cluster.queues:
        edit = queue_edits.get(q.name)
        if edit is not None:
            limit = edit.get("limit_gpus")
            q = replace(q, deserved_milli=int(Decimal(edit["deserved_gpus"]) * MILLI_PER_GPU),
                        limit_milli=None if limit in (None, "") else int(Decimal(limit) * MILLI_PER_GPU))
        queues.append(q)
    return replace(cluster, pools=tuple(pools), nodes=tuple(nodes), queues=tuple(queues))


# --------------------------------------------------------------------------- jobs


def leaf_queues(cluster: cm.Snapshot) -> list[str]:
    parents = {q.parent for q in cluster.queues}
    return sorted(q.name for q in cluster.queues if q.name not in parents)


def trace_jobs(text: str, cluster: cm.Snapshot, *, default_queue: str, start: float,
               checkpoint_s: float | None) -> list[ReplayJob]:
    """An uploaded Philly trace as replay jobs from `start`: a team named like a leaf queue goes there, others
    to `default_queue`; whole GPUs on any pool that serves them, a job bigger than the largest node a gang of
    replicas; best-effort jobs preemptible at a lower priority, strict ones preemptible too (over quota)."""
    jobs = read_philly(text.splitlines(), max_jobs=MAX_TRACE_JOBS)
    leaves = set(leaf_queues(cluster))
    per_node = max((len(n.gpus) for n in cluster.nodes), default=8) or 8
    out = []
    for j in jobs:
        if j.gpus == 0:
            continue
        per, replicas = gang(j.gpus, per_node)
        queue = j.team if j.team in leaves else default_queue
        deadline = None if j.deadline is None else start + j.submit + j.deadline
        out.append(ReplayJob.simple(f"trace-{j.id}", queue, per, start + j.submit, j.duration, replicas=replicas,
                                    created=start + j.submit, checkpoint_s=checkpoint_s,
                                    priority=BEST_EFFORT_PRIORITY if j.best_effort else STRICT_PRIORITY,
                                    deadline=deadline, margin_s=0.0 if deadline is None else deadlines.margin_s(j.duration)))
    return out


def best_effort_ids(jobs: Iterable[ReplayJob], *, trace: bool) -> frozenset[str]:
    """The best-effort jobs among `jobs`, whose completion is a figure of its own: a trace's best-effort lines
    (they have the lower priority), or, in the history, the jobs their owners made preemptible. A deadline job
    is neither."""
    if trace:
        return frozenset(j.job.id for j in jobs if j.deadline is None and j.job.priority == BEST_EFFORT_PRIORITY)
    return frozenset(j.job.id for j in jobs if j.deadline is None and j.job.preemptible)


MAX_TRACE_JOBS = 40_000
MAX_TRACE_BYTES = 5 * 1024 * 1024


def check_trace(text: str) -> int:
    """How many jobs an uploaded trace holds; PlannerInputError (naming the line) if it cannot be replayed."""
    try:
        jobs = read_philly(text.splitlines(), max_jobs=MAX_TRACE_JOBS)
    except ValueError as error:
        raise PlannerInputError(str(error)) from None
    if not any(j.gpus for j in jobs):
        raise PlannerInputError("the trace holds no job that asks for GPUs")
    return len(jobs)


# --------------------------------------------------------------------------- one replay and its figures


def pending_window(cluster: cm.Snapshot) -> int:
    """The waiting jobs per queue a replay's cycle is shown (`Replay`'s pending_window): twice the cluster's
    GPUs, so that a queue shown that many still asks for more than the cluster holds, and at least 64."""
    return max(64, 2 * sum(len(n.gpus) for n in cluster.nodes))


def replay_side(cluster: cm.Snapshot, jobs: list[ReplayJob], *, start: float, end: float,
                progress: Callable[[float], None] = lambda f: None, rates: pricing.Rates | None = None,
                on_events: bool = True, best_effort: frozenset[str] = frozenset()) -> dict:
    """Replay `jobs` on `cluster` from `start` until every job is done (or MAX_CYCLES), reporting progress
    every STEP_CYCLES cycles: half the simulated time through the window [start, end] (the submissions),
    half the jobs done, so it moves while a backlog is worked off after the last submission too. Returns
    the figures (see `figures_of`; `best_effort`: the jobs whose completion counts apart, `target_figures`)."""
    engine = Replay(cluster, jobs, start=start, cycle_s=CYCLE_S, record_allocation=True, on_events=on_events,
                    pending_window=pending_window(cluster))
    span, total = max(end - start, 1.0), max(len(jobs), 1)
    while engine.cycles < MAX_CYCLES and not engine.finished():
        engine.advance(max_cycles=min(STEP_CYCLES, MAX_CYCLES - engine.cycles))
        progress(min(1.0, (min(max(engine.time - start, 0.0) / span, 1.0) + engine.ended() / total) / 2))
    stopped = not engine.finished()
    result = engine.result()
    figures = figures_of(cluster, jobs, result, start=start, end=end, rates=rates, best_effort=best_effort)
    figures["stopped_after_cycles"] = MAX_CYCLES if stopped else None
    return figures


def figures_of(cluster: cm.Snapshot, jobs: list[ReplayJob], result, *, start: float, end: float,
               rates: pricing.Rates | None, best_effort: frozenset[str] = frozenset()) -> dict:
    node_pool = {n.name: n.pool for n in cluster.nodes}
    pools = {p.name: p for p in cluster.pools}
    capacity = defaultdict(int)
    for n in cluster.nodes:
        capacity[n.pool] += len(n.gpus)
    queue_of = {j.job.id: j.job.queue for j in jobs}
    last = max([end, result.time] + [t for t, *_ in result.allocation[-1:]])
    span_h = max(last - start, 1.0) / 3600
    # GPU-seconds held per (queue, pool): each change at t of delta contributes -t * delta, plus what is
    # still held at the end, held until then
    held_s: dict[tuple[str, str], float] = defaultdict(float)
    level: dict[tuple[str, str], int] = defaultdict(int)
    buckets = [0.0] * CHART_BUCKETS
    width = (last - start) / CHART_BUCKETS or 1.0
    total, prev = 0, start
    for t, jid, node, milli in result.allocation:
        key = (queue_of[jid], node_pool[node])
        held_s[key] -= t * milli
        level[key] += milli
        _spread(buckets, start, width, prev, t, total)
        total += milli
        prev = max(prev, t)
    _spread(buckets, start, width, prev, last, total)
    for key, milli in level.items():
        held_s[key] += last * milli
    queues: dict[str, dict] = {}
    waits_by_queue: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])   # jobs, started, finished, preemptions
    for jid, r in result.jobs.items():
        q = queue_of[jid]
        c = counts[q]
        c[0] += 1
        c[3] += r.evictions
        if r.start is not None:
            c[1] += 1
            waits_by_queue[q].append(r.wait_s)
        if r.end is not None:
            c[2] += 1
    rate_cache: dict[str, Decimal | None] = {}

    def rate(pool: str) -> Decimal | None:
        if pool not in rate_cache:
            p = pools[pool]
            try:
                rate_cache[pool] = rates.gpu_rate(p.vendor, p.gpu_model) if rates else None
            except ValueError:
                rate_cache[pool] = None
        return rate_cache[pool]

    def cost(items: Iterable[tuple[tuple[str, str], float]]) -> tuple[str | None, list[str]]:
        amount, unpriced = Decimal(0), set()
        for (_, pool), seconds in items:
            r = rate(pool)
            if r is None:
                if seconds > 0:
                    unpriced.add(pool)
                continue
            amount += r * Decimal(seconds / 3600 / MILLI_PER_GPU).quantize(Decimal("0.0001"))
        money = str(pricing.quantize_money(amount, rates.currency)) if rates else None
        return money, sorted(unpriced)

    for q in sorted(counts):
        jobs_n, started, finished, preemptions = counts[q]
        waits = waits_by_queue[q]
        mine = [(k, v) for k, v in held_s.items() if k[0] == q]
        money, _ = cost(mine)
        queues[q] = {"jobs": jobs_n, "started": started, "never_started": jobs_n - started,
                     "unfinished": jobs_n - finished, "preemptions": preemptions,
                     "wait_p50_s": _round(percentile(waits, 50)), "wait_p95_s": _round(percentile(waits, 95)),
                     "gpu_hours": round(sum(v for _, v in mine) / 3600 / MILLI_PER_GPU, 2), "cost": money,
                     "wait_quantiles_min": _quantiles([w / 60 for w in waits])}
    by_pool = {}
    for name in pools:
        mine = [(k, v) for k, v in held_s.items() if k[1] == name]
        gpu_h = sum(v for _, v in mine) / 3600 / MILLI_PER_GPU
        money, _ = cost(mine)
        used = gpu_h / (capacity[name] * span_h) if capacity[name] else None
        by_pool[name] = {"gpus": capacity[name], "gpu_model": pools[name].gpu_model, "gpu_hours": round(gpu_h, 2),
                         "utilisation": None if used is None else round(used, 6),
                         "utilisation_pct": None if used is None else round(100 * used, 2), "cost": money}
    total_h = sum(held_s.values()) / 3600 / MILLI_PER_GPU
    money, unpriced = cost(held_s.items())
    gpus = sum(capacity.values())
    return {
        "queues": queues, "pools": by_pool,
        "total": {"gpus": gpus, "jobs": len(result.jobs), "gpu_hours": round(total_h, 2),
                  "utilisation": round(total_h / (gpus * span_h), 6) if gpus else None,
                  "utilisation_pct": round(100 * total_h / (gpus * span_h), 2) if gpus else None, "cost": money,
                  "currency": rates.currency if rates else "", "unpriced_pools": unpriced,
                  "never_started": sum(c[0] - c[1] for c in counts.values()),
                  "preemptions": sum(c[3] for c in counts.values()), "cycles": result.cycles,
                  **target_figures(jobs, result, best_effort, last)},
        "allocation": {"start": start, "step_s": width, "gpus": [round(b / MILLI_PER_GPU, 3) for b in buckets]},
    }


TARGET_FIGURES = ("strict_jobs", "strict_wait_p95_s", "deadline_jobs", "deadline_met", "deadline_met_pct",
                  "best_effort_jobs", "best_effort_finished", "best_effort_jct_p95_s")


def target_figures(jobs: list[ReplayJob], result, best_effort: frozenset[str], last: float) -> dict:
    """The three figures the trace replays' target is made of (bench/replay.py): the p95 wait of the strict
    jobs (neither best-effort nor with a deadline), the share of deadline jobs done by their deadlines, and
    best-effort completion (how many finished, their p95 time from submission to end). A job that never
    started or never finished counts as waiting or running until the replay's end (`last`)."""
    due = {j.job.id: j.deadline for j in jobs if j.deadline is not None}
    strict_waits, be_times = [], []
    met = be_done = 0
    for jid, r in result.jobs.items():
        if jid in due:
            met += r.end is not None and r.end <= due[jid]
        elif jid in best_effort:
            be_done += r.end is not None
            be_times.append((last if r.end is None else r.end) - r.submit_time)
        else:
            strict_waits.append((last if r.start is None else r.start) - r.submit_time)
    return {"strict_jobs": len(strict_waits), "strict_wait_p95_s": _round(percentile(strict_waits, 95)),
            "deadline_jobs": len(due), "deadline_met": met,
            "deadline_met_pct": round(100 * met / len(due), 2) if due else None,
            "best_effort_jobs": len(be_times), "best_effort_finished": be_done,
            "best_effort_jct_p95_s": _round(percentile(be_times, 95))}


def _spread(buckets: list[float], start: float, width: float, a: float, b: float, level: int) -> None:
    """Add `level` held from a to b to the time buckets as an average over each bucket."""
    if level == 0 or b <= a:
        return
    first = max(0, int((a - start) // width))
    last = min(len(buckets) - 1, int((b - start) // width))
    for i in range(first, last + 1):
        lo, hi = max(a, start + i * width), min(b, start + (i + 1) * width)
        if hi > lo:
            buckets[i] += level * (hi - lo) / width


def _round(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 1)


def _quantiles(values: list[float]) -> list[float]:
    """At most WAIT_POINTS evenly spaced quantiles: enough to draw the distribution, whatever the jobs."""
    if len(values) <= WAIT_POINTS:
        return sorted(round(v, 2) for v in values)
    ordered = sorted(values)
    return [round(ordered[round(i * (len(ordered) - 1) / (WAIT_POINTS - 1))], 2) for i in range(WAIT_POINTS)]


def current_rates(currency: str | None = None) -> pricing.Rates | None:
    """The rates in force now on `currency`'s timeline (default: the platform's)."""
    try:
        return pricing.table_in_force(price_tables(currency), clock.now()).rates
    except ValueError:
        return None


# --------------------------------------------------------------------------- runs


def start_run(user, *, kind: str, inputs: dict, trace_csv: str = "") -> PlannerRun:
    """Record a run and queue its task once the transaction commits. With the broker away the run
    stays queued (the page says so) instead of failing the request."""
    run = PlannerRun.objects.create(kind=kind, created_by=user, inputs=inputs, trace_csv=trace_csv,
                                    task_id=f"planner-run-{uuid.uuid4().hex}")
    transaction.on_commit(lambda: send_task(RUN_PLANNER, run.pk, task_id=task_id(run)))
    return run


def cancel_run(user, run: PlannerRun) -> bool:
    """Cancel a queued or running replay: the run says cancelled at once, a queued task is revoked (and
    would find the run taken anyway), a running replay stops at its next progress update. Audited. False
    when the run had already ended."""
    # one state at a time, as the database has it now (the worker may have taken the run meanwhile)
    for before in (PlannerRun.State.QUEUED, PlannerRun.State.RUNNING):
        if PlannerRun.objects.filter(pk=run.pk, state=before).update(state=PlannerRun.State.CANCELLED,
                                                                     finished=clock.now()):
            break
    else:
        return False
    if before == PlannerRun.State.QUEUED:
        revoke_task(task_id(run))
    run.refresh_from_db()
    audit.record(user, "cancel", run, changes={"state": [before, run.state]})
    return True


RUN_PLANNER = "portal.console.tasks.run_planner"


def task_id(run: PlannerRun) -> str:
    """The id its Celery task is sent under, to revoke it when the run is cancelled (runs queued before ids were
    stored: their key's)."""
    return run.task_id or f"planner-run-{run.pk}"


def execute_run(run_id: int) -> bool:
    """What the Celery task does: take the queued run (once: a duplicate message finds it taken), replay,
    store the figures. False when the run was not queued."""
    if not PlannerRun.objects.filter(pk=run_id, state=PlannerRun.State.QUEUED).update(
            state=PlannerRun.State.RUNNING, started=clock.now()):
        return False
    run = PlannerRun.objects.get(pk=run_id)
    running = PlannerRun.objects.filter(pk=run_id, state=PlannerRun.State.RUNNING)  # not once cancelled
    try:
        if run.kind == PlannerRun.Kind.SAVINGS:
            results = savings_results(progress=_progress_writer(run_id, 0.0, 1.0))
        else:
            results = whatif_results(run)
    except ReplayCancelled:
        log.info("planner run %s stopped: it was cancelled", run_id)
        return False
    except Exception as error:
        # (a time limit's exception says nothing: its name then)
        running.update(state=PlannerRun.State.FAILED, error=(str(error) or type(error).__name__)[:2000],
                       finished=clock.now())
        raise
    running.update(state=PlannerRun.State.DONE, results=results, progress=1.0, finished=clock.now())
    return True


def _progress_writer(run_id: int, offset: float, share: float) -> Callable[[float], None]:
    """Writes the run's progress (`offset` + `share` x the fraction reported); raises ReplayCancelled when
    the run is no longer running (an operator cancelled it)."""
    def write(fraction: float) -> None:
        if not PlannerRun.objects.filter(pk=run_id, state=PlannerRun.State.RUNNING).update(
                progress=round(offset + share * fraction, 3)):
            raise ReplayCancelled(run_id)
    return write


def whatif_results(run: PlannerRun) -> dict:
    inputs = run.inputs
    cluster = cluster_snapshot()
    edited = edited_cluster(cluster, inputs)
    checkpoint = inputs.get("checkpoint_min")
    checkpoint_s = None if checkpoint is None else float(checkpoint) * 60
    now = clock.now()
    if run.kind == PlannerRun.Kind.TRACE:
        start = now.timestamp()
        jobs = trace_jobs(run.trace_csv, cluster, default_queue=inputs["trace_queue"], start=start,
                          checkpoint_s=checkpoint_s)
        end = max((j.submit_time for j in jobs), default=start)
    else:
        days = int(inputs.get("days", 30))
        history = history_jobs(since=now - timedelta(days=days), until=now)
        jobs = history_replay_jobs(history, checkpoint_s=checkpoint_s)
        start, end = (now - timedelta(days=days)).timestamp(), now.timestamp()
    edited_jobs = jobs if inputs.get("preemption", True) else [
        replace(j, job=replace(j.job, preemptible=False)) for j in jobs]
    rates = current_rates(inputs.get("currency"))
    # An uploaded trace may hold tens of thousands of jobs: its cycles run on the beat's ticks only (as the
    # platform's do), not also the moment each of them arrives or ends.
    on_events = run.kind != PlannerRun.Kind.TRACE
    best_effort = best_effort_ids(jobs, trace=run.kind == PlannerRun.Kind.TRACE)
    actual = replay_side(cluster, jobs, start=start, end=end, rates=rates, on_events=on_events,
                         progress=_progress_writer(run.pk, 0.0, 0.5), best_effort=best_effort)
    what_if = replay_side(edited, edited_jobs, start=start, end=end, rates=rates, on_events=on_events,
                          progress=_progress_writer(run.pk, 0.5, 0.5), best_effort=best_effort)
    return {"window": {"start": start, "end": end}, "jobs": len(jobs), "actual": actual, "edited": what_if,
            "pinned_models": _pinned_models(jobs, edited)}


def _pinned_models(jobs: list[ReplayJob], cluster: cm.Snapshot) -> list[str]:
    """GPU models jobs ask for by name that no pool of the cluster offers (those jobs cannot start)."""
    offered = {p.gpu_model.casefold() for p in cluster.pools}
    asked = {r.request.gpu_model for j in jobs for r in j.job.roles if r.request.gpu_model}
    return sorted(m for m in asked if m.casefold() not in offered)


# --------------------------------------------------------------------------- pool against silos


def _meets(cluster: cm.Snapshot, jobs: list[ReplayJob], target_s: float,
           checkpoint: Callable[[], None] = lambda: None) -> bool:
    """Every queue's p95 wait within `target_s` and every job done; given up as soon as out of reach.
    `checkpoint` is called every six simulated hours (it raises ReplayCancelled to stop)."""
    if not jobs:
        return True
    engine = Replay(cluster, jobs, start=min(j.submit_time for j in jobs), cycle_s=CYCLE_S,
                    pending_window=pending_window(cluster))
    per_queue: dict[str, list[str]] = defaultdict(list)
    for j in jobs:
        per_queue[j.job.queue].append(j.job.id)
    allowed = {q: late_allowed(len(ids)) for q, ids in per_queue.items()}
    at = engine.start
    while not engine.finished():
        at += 6 * 3600
        engine.advance(until=at, max_cycles=MAX_CYCLES)
        checkpoint()
        for q, ids in per_queue.items():
            late = 0
            for jid in ids:
                r = engine.jobs[jid].result
                began = r.start if r.start is not None else (None if r.submit_time >= at else at)
                late += began is not None and began - r.submit_time > target_s
            if late > allowed[q]:
                return False
        if engine.cycles >= MAX_CYCLES:
            return False
    return all(s.result.end is not None for s in engine.jobs.values())


def _smallest_nodes(feasible: Callable[[int], bool], start: int) -> int | None:
    hi = max(start, 1)
    while not feasible(hi):
        if hi >= MAX_SEARCH_NODES:
            return None
        hi = min(MAX_SEARCH_NODES, hi * 2)
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def shares(total_milli: int, silos: dict[str, int]) -> dict[str, int]:
    """`total_milli` split in proportion to `silos`, by the largest remainder (whole GPUs where it can)."""
    whole = sum(silos.values())
    exact = {q: total_milli * g / whole for q, g in silos.items()}
    out = {q: math.floor(x) for q, x in exact.items()}
    for q in sorted(exact, key=lambda q: (out[q] - exact[q], q))[: total_milli - sum(out.values())]:
        out[q] += 1
    return out


def pool_savings(history: list[HistoryJob], cluster: cm.Snapshot, *, target_s: float = WAIT_TARGET_S,
                 checkpoint_s: float | None = 1800.0, progress: Callable[[float], None] = lambda f: None) -> dict:
    """Per pool, the fewest nodes (shaped like the pool's) on which its history meets the wait target: each
    queue on its own (a silo: the queue alone, deserving all of it), and all of them sharing one pool, each
    queue deserving a share in proportion to its silo with work over it borrowed (every job preemptible,
    an evicted one losing its work since its last checkpoint), as bench/replay.py's `pool`. Jobs count in the
    pool where they ran."""
    jobs_by_pool: dict[str, list[ReplayJob]] = defaultdict(list)
    for h, rj in zip(history, history_replay_jobs(history, checkpoint_s=checkpoint_s), strict=True):
        if h.pool:
            jobs_by_pool[h.pool].append(rj)
    pools_out = {}
    for done, pool in enumerate(cluster.pools):
        def checkpoint(done=done) -> None:
            progress(done / len(cluster.pools))   # by pools searched: each search's length is unknown

        jobs = jobs_by_pool.get(pool.name)
        mine = [n for n in cluster.nodes if n.pool == pool.name]
        if not jobs or not mine:
            continue
        shape = mine[-1]
        gpus = len(shape.gpus)

        def on(count: int, queues: tuple[cm.Queue, ...], pool=pool, shape=shape) -> cm.Snapshot:
            nodes = tuple(replace(shape, name=f"{pool.name}-{i}") for i in range(count))
            return cm.Snapshot(pools=(pool,), nodes=nodes, queues=queues, jobs=())

        silos, unreachable = {}, []
        by_queue: dict[str, list[ReplayJob]] = defaultdict(list)
        for j in jobs:
            by_queue[j.job.queue].append(j)
        for queue, team_jobs in sorted(by_queue.items()):
            def alone(n: int, queue=queue, team_jobs=team_jobs, on=on, gpus=gpus) -> bool:
                return _meets(on(n, (cm.Queue(queue, deserved_milli=n * gpus * MILLI_PER_GPU),)), team_jobs, target_s,
                              checkpoint)
            found = _smallest_nodes(alone, 1)
            if found is None:
                unreachable.append(queue)
            else:
                silos[queue] = found * gpus
        out = {"jobs": len(jobs), "actual_gpus": len(mine) * gpus, "silos": silos, "silos_gpus": None,
               "pool_gpus": None, "unreachable": unreachable}
        pools_out[pool.name] = out
        if unreachable:
            continue
        borrowing = [replace(j, job=replace(j.job, preemptible=True)) for j in jobs]

        def shared(n: int, on=on, gpus=gpus, silos=silos, borrowing=borrowing, checkpoint=checkpoint) -> bool:
            quotas = shares(n * gpus * MILLI_PER_GPU, silos)
            return _meets(on(n, tuple(cm.Queue(q, deserved_milli=m) for q, m in quotas.items())), borrowing, target_s,
                          checkpoint)

        pooled = _smallest_nodes(shared, max(1, len(mine) // 2))
        if pooled is None:
            out["unreachable"] = ["the pool"]
            continue
        out.update(silos_gpus=sum(silos.values()), pool_gpus=pooled * gpus)
    counted = [p for p in pools_out.values() if p["pool_gpus"] is not None]
    silos_total = sum(p["silos_gpus"] for p in counted)
    pool_total = sum(p["pool_gpus"] for p in counted)
    return {"pools": pools_out, "silos_gpus": silos_total, "pool_gpus": pool_total,
            "saved_gpus": silos_total - pool_total, "wait_target_s": target_s, "jobs": len(history)}


def savings_results(days: int = 30, progress: Callable[[float], None] = lambda f: None) -> dict:
    now = clock.now()
    since = now - timedelta(days=days)
    result = pool_savings(history_jobs(since=since, until=now), cluster_snapshot(), progress=progress)
    result["window"] = {"start": since.timestamp(), "end": now.timestamp()}
    return result


def refresh_savings(user=None) -> PlannerRun:
    """Compute the dashboard's pool-against-silos figure now (the beat, the demo loader)."""
    run = PlannerRun.objects.create(kind=PlannerRun.Kind.SAVINGS, created_by=user, inputs={"days": 30})
    execute_run(run.pk)
    run.refresh_from_db()
    return run


def latest_savings() -> PlannerRun | None:
    return PlannerRun.objects.filter(kind=PlannerRun.Kind.SAVINGS, state=PlannerRun.State.DONE).order_by(
        "-finished", "-id").first()
