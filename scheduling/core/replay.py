"""Forward simulation: the production scheduler core run over simulated time.

`replay` takes a cluster (a core Snapshot: pools, nodes, queues, the replicas already placed, the
off-peak and usage fields) and jobs (`ReplayJob`: a core Job, when it is submitted, how many seconds
of work it needs), and moves a simulated clock forward. At each cycle point it builds a Snapshot of
its own state and calls `cycle.run_cycle`, the function the Celery cycle calls, then carries out the
decisions itself (evictions, binds) and finishes jobs when their work is done. Nothing is modelled
twice: which job starts, where, and who is evicted are the production core's answers.

Cycle points. With `on_events=True` a cycle runs the moment jobs arrive or finish, and then every
`cycle_s` for as long as cycles still change something (a cycle that evicted or bound anything is
followed by another one, as the beat would run). With `on_events=False` cycles run only at the ticks
`start + k * cycle_s`, so an arrival or a completion is seen at the next tick, as with the beat. Either
way a quiet cluster costs nothing: when the last cycle changed nothing and no job arrived or finished
since, the same snapshot would give the same (empty) decisions, so the clock jumps to the next event;
and a cycle point where every job holds all its replicas (none waits, none could grow) is skipped, as
every action would pass.

Work. A job runs while every role holds its gang minimum; its work then advances with the clock and it
finishes after `duration` seconds of it. An eviction that stops it (reclaim, preempt, node-lost, or a
consolidation move, which restarts the moved replicas) keeps the work saved by its last checkpoint
(`checkpoint_s`: every that many seconds of work; 0: all of it; None: none, it starts over) and counts
the rest as lost. Shrinking an elastic job's extras does not stop it.

A long backlog. With `pending_window=N` a cycle's snapshot shows each queue only its first N jobs that hold
no replica (in the queue's own order: higher priority, then submitted first); the others wait outside it, as
if not yet submitted, and come in as those before them start. A cycle's cost grows with the jobs it is
shown, so a trace far bigger than the cluster (tens of thousands waiting) would otherwise cost seconds a
cycle. Decisions are the same as long as no queue has more than N such jobs; beyond, a job further back than
N cannot be backfilled and its queue's demand counts N jobs (the planner makes N at least twice the
cluster's GPUs, so every queue still asks for more than the cluster holds).

Deadlines. A job with a `deadline` (`ReplayJob.deadline`, epoch seconds) is given to the core with its latest
start: the deadline less the work it has left less `margin_s`, computed again whenever an eviction changes
the work left; a cycle runs at each waiting deadline job's latest start, when it turns strict.

Results: per job its first start, its end, how often it was stopped and the work lost (`JobResult`);
with `record_allocation=True` also every change of what a job holds on a node, `(time, job id, node, GPU milli)`
(a bind adds, an eviction or a completion takes away), from which allocation over time per queue or pool is
summed.
The expected start of pending jobs (scheduling/forecast.py) and trace replays use it; see
docs/DESIGN.md. Pure Python + numpy, no Django.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace

from . import builders
from .cycle import CycleMemo, run_cycle
from .model import Decisions, Job, ReplicaKey, RunningReplica, Snapshot

INF = math.inf


@dataclass(frozen=True)
class ReplayJob:
    """One job of a replay: the core job (its queue, roles, priority, preemptible flag; `job.created`
    orders it in its queue), when it enters the queue, and the seconds of work it needs once running.

    A job already running when the replay starts has its replicas in the cluster snapshot's `running`,
    its `submit_time` at or before the start, the work it has `done` so far and when it `started`."""

    job: Job
    submit_time: float
    duration: float
    checkpoint_s: float | None = None      # work saved every this many seconds; 0: always; None: never
    done: float = 0.0                      # seconds of work already done
    started: float | None = None           # when it first ran, for a job already running at the start
    deadline: float | None = None          # when its work must be done (epoch seconds); None: no deadline
    margin_s: float = 0.0                  # its latest start is this much before it must start to be done then

    def latest_start(self, done: float) -> float | None:
        """Its latest start with `done` seconds of work saved (None: no deadline)."""
        if self.deadline is None:
            return None
        return self.deadline - max(self.duration - done, 0.0) - self.margin_s

    def __post_init__(self) -> None:
        if self.duration < 0 or self.done < 0:
            raise ValueError(f"replay job {self.job.id!r}: duration and done must be >= 0")
        if self.checkpoint_s is not None and self.checkpoint_s < 0:
            raise ValueError(f"replay job {self.job.id!r}: checkpoint_s must be >= 0 or None")

    @classmethod
    def simple(cls, job_id: str, queue: str, gpus: int, submit_time: float, duration: float, *,
               checkpoint_s: float | None = None, deadline: float | None = None, margin_s: float = 0.0,
               **job_fields) -> ReplayJob:
        """A one-role job of `gpus` whole GPUs (or `mode`, `milli`, `replicas`, `preemptible`, `priority`,
        ... as `builders.job` takes them), queued by its submit time."""
        job_fields.setdefault("created", submit_time)
        return cls(builders.job(job_id, queue, gpus, **job_fields), submit_time, duration, checkpoint_s,
                   deadline=deadline, margin_s=margin_s)


@dataclass
class JobResult:
    id: str
    queue: str
    submit_time: float
    start: float | None = None             # first time it ran (its gang minimum placed)
    end: float | None = None               # when its work was done; None: not within the replay
    evictions: int = 0                     # times it was stopped after it had started
    lost_s: float = 0.0                    # seconds of work lost to those stops (done again)

    @property
    def wait_s(self) -> float | None:
        return None if self.start is None else self.start - self.submit_time


@dataclass
class ReplayResult:
    jobs: dict[str, JobResult]
    time: float                            # the simulated time reached (the last cycle's)
    cycles: int                            # cycles run
    skipped: int = 0                       # cycle points left out: no job waited or could grow
    binds: int = 0
    evicts: int = 0
    # with record_allocation: (time, job id, node, GPU milli gained or given back), in time order
    allocation: list[tuple[float, str, str, int]] = field(default_factory=list)


@dataclass
class _Job:
    spec: ReplayJob
    job: Job                               # the core job now (a deadline job's latest start moves with its work)
    result: JobResult
    held: dict[str, int]                   # role -> replicas placed now
    keys: set[ReplicaKey] = field(default_factory=set)   # those replicas
    done: float = 0.0                      # work saved (as of run_since)
    run_since: float | None = None         # running since then (None: not running)
    version: int = 0                       # invalidates its queued completion

    def at_minimum(self) -> bool:
        return all(self.held[r.name] >= r.min_replicas for r in self.job.roles)


CycleObserver = Callable[[float, Snapshot, Decisions], None]


class Replay:
    """The simulation's state; `replay()` is the usual way in. `run` may be called again with a later
    `until` to go on from where it stopped."""

    def __init__(self, cluster: Snapshot, jobs: Iterable[ReplayJob], *, start: float | None = None,
                 cycle_s: float = 2.0, on_events: bool = True, on_cycle: CycleObserver | None = None,
                 record_allocation: bool = False, reasons: bool | None = None,
                 pending_window: int | None = None) -> None:
        if cycle_s <= 0:
            raise ValueError("cycle_s must be > 0")
        if pending_window is not None and pending_window < 1:
            raise ValueError("pending_window must be >= 1 or None")
        self.cluster = replace(cluster, jobs=(), running=())
        self.start = cluster.now if start is None else start
        self.cycle_s = cycle_s
        self.on_events = on_events
        self.on_cycle = on_cycle
        # pending reasons in the decisions: nothing here reads them, an observer may (default: with one)
        self.reasons = on_cycle is not None if reasons is None else reasons
        self.time = self.start
        self.last_cycle: float | None = None
        self.cycles = self.binds = self.evicts = self.skipped = 0
        self.dirty = True                     # the first cycle always runs
        self.jobs: dict[str, _Job] = {}
        self.active: dict[str, Job] = {}      # submitted and not finished, in submission order
        self.running: dict[ReplicaKey, RunningReplica] = {}
        self._running_sorted: tuple[RunningReplica, ...] | None = None   # `running` by key, until it changes
        self.completions: list[tuple[float, str, int]] = []
        # waiting deadline jobs' latest starts: (when, job id, its version then), a cycle's point each
        self.turns: list[tuple[float, str, int]] = []
        self.short: set[str] = set()          # active jobs holding fewer than all their replicas
        self.allocation: list[tuple[float, str, str, int]] | None = [] if record_allocation else None
        # with a pending window: per queue the active jobs holding no replica, by the queue's order, and the
        # active jobs holding some (insertion-ordered, so snapshots do not depend on hashing)
        self.pending_window = pending_window
        self.waiting: dict[str, list[tuple[int, float, str]]] = {}
        self.holding: dict[str, None] = {}
        # what the Celery worker keeps between cycles (plans by roles); never changes a decision
        self.memo = CycleMemo()
        # jobs with equal roles share one roles tuple, so the core weighs and plans them once per shape
        # (its caches key on the tuple's identity), as the service's snapshot shares them
        same_roles: dict[tuple, tuple] = {}
        arrivals = []
        for spec in jobs:
            roles = same_roles.setdefault(spec.job.roles, spec.job.roles)
            if roles is not spec.job.roles:
                spec = replace(spec, job=replace(spec.job, roles=roles))
            jid = spec.job.id
            if jid in self.jobs:
                raise ValueError(f"replay job {jid!r}: duplicate job id")
            job = spec.job
            if spec.deadline is not None:
                job = replace(job, latest_start=spec.latest_start(spec.done))
            state = _Job(spec, job, JobResult(jid, spec.job.queue, spec.submit_time, start=spec.started),
                         {r.name: 0 for r in spec.job.roles}, done=spec.done)
            self.jobs[jid] = state
            if spec.submit_time <= self.start:
                self.active[jid] = job
                self._turn(state)
            else:
                arrivals.append((spec.submit_time, jid))
        arrivals.sort()
        self.arrivals = arrivals
        self.next_arrival = 0
        for rep in cluster.running:
            key = (rep.job_id, rep.role, rep.index)
            if rep.job_id not in self.active:
                raise ValueError(f"running replica {key}: its job is not a replay job submitted by the start")
            if key in self.running:
                raise ValueError(f"running replica {key}: listed twice")
            state = self.jobs[rep.job_id]
            if rep.role not in state.held:
                raise ValueError(f"running replica {key}: job {rep.job_id!r} has no role {rep.role!r}")
            self.running[key] = rep
            state.held[rep.role] += 1
            state.keys.add(key)
            self._record(self.start, rep.job_id, rep, +1)
        for jid in self.active:
            state = self.jobs[jid]
            self._check_short(state)
            self._check_waiting(state)
            if state.at_minimum():
                self._start(state, self.start)

    # ------------------------------------------------------------------ running

    def run(self, until: float | None = None, *, watch: Collection[str] | None = None,
            max_cycles: int | None = None) -> ReplayResult:
        """Cycle until nothing more can happen, or the next cycle would be after `until`, or every job of
        `watch` has started, or `max_cycles` cycles ran (in this call)."""
        self.advance(until, watch=watch, max_cycles=max_cycles)
        return self.result()

    def advance(self, until: float | None = None, *, watch: Collection[str] | None = None,
                max_cycles: int | None = None) -> int:
        """`run` without building its result (a copy of every job's): for callers that go on in many small
        steps. Returns the cycles run."""
        unknown = sorted(set(watch or ()) - set(self.jobs))
        if unknown:
            raise ValueError(f"watch: no replay job {unknown[0]!r}")
        waiting = {j for j in watch if self.jobs[j].result.start is None} if watch is not None else None
        ran = 0
        while (max_cycles is None or ran < max_cycles) and (waiting is None or waiting):
            at = self._next_cycle()
            if at is None or (until is not None and at > until):
                break
            self._advance(at)
            if self.cycles and self._settled():
                # nothing waits and nothing can grow: every action would pass, the cycle decides nothing
                self.last_cycle, self.dirty, self.skipped = at, False, self.skipped + 1
                continue
            snapshot = self._snapshot(at)
            decisions = run_cycle(snapshot, self.memo, reasons=self.reasons)
            self._apply(at, decisions)
            if self.on_cycle is not None:
                self.on_cycle(at, snapshot, decisions)
            ran += 1
            if waiting is not None:
                waiting = {j for j in waiting if self.jobs[j].result.start is None}
        return ran

    def ended(self) -> int:
        """How many jobs have finished their work so far."""
        return len(self.jobs) - len(self.active) - (len(self.arrivals) - self.next_arrival)

    def result(self) -> ReplayResult:
        """Where the replay stands now."""
        return ReplayResult({jid: s.result for jid, s in self.jobs.items()}, self.time, self.cycles,
                            self.skipped, self.binds, self.evicts, list(self.allocation or ()))

    def finished(self) -> bool:
        """Nothing more can happen: no job will arrive, end or be placed (`run` would return at once)."""
        return self._next_cycle() is None

    def _settled(self) -> bool:
        """Every submitted job holds all its replicas (so none is pending or elastic below its maximum).
        The first cycle has evicted what ran on nodes that are gone; the replay never changes nodes."""
        return not self.short

    def _check_short(self, state: _Job) -> None:
        """Keep `short` (the jobs below some role's maximum) up to date, so `_settled` costs nothing."""
        jid = state.spec.job.id
        if jid in self.active and any(state.held[r.name] < r.max_replicas for r in state.spec.job.roles):
            self.short.add(jid)
        else:
            self.short.discard(jid)

    def _record(self, at: float, jid: str, rep: RunningReplica, sign: int) -> None:
        if self.allocation is not None:
            self.allocation.append((at, jid, rep.node, sign * rep.slice.gpu_milli * len(rep.gpus)))

    def _next_event(self) -> float:
        arrival = self.arrivals[self.next_arrival][0] if self.next_arrival < len(self.arrivals) else INF
        turns = self.turns
        while turns:
            at, jid, version = turns[0]
            if self.jobs[jid].version == version and jid in self.active and (
                    self.last_cycle is None or at > self.last_cycle):
                arrival = min(arrival, at)
                break
            heapq.heappop(turns)              # stale: it started, ended, or a cycle has seen it strict
        while self.completions:
            end, jid, version = self.completions[0]
            if self.jobs[jid].version == version:
                return min(arrival, end)
            heapq.heappop(self.completions)   # stale: the job was stopped after it was queued
        return arrival

    def _turn(self, state: _Job) -> None:
        """A cycle at a waiting deadline job's latest start, when it turns strict."""
        latest = state.job.latest_start
        if latest is not None and state.spec.deadline is not None:
            heapq.heappush(self.turns, (latest, state.job.id, state.version))

    def _tick_at_or_after(self, t: float) -> float:
        k = math.ceil((t - self.start) / self.cycle_s - 1e-9)
        return self.start + max(k, 0) * self.cycle_s

    def _next_cycle(self) -> float | None:
        event = self._next_event()
        if self.last_cycle is None:
            return self.start
        tick = self.last_cycle + self.cycle_s
        if self.dirty:
            return min(tick, max(event, self.last_cycle)) if self.on_events else tick
        if event == INF:
            return None
        return max(event, self.last_cycle) if self.on_events else max(self._tick_at_or_after(event), tick)

    def _advance(self, at: float) -> None:
        """Finish the jobs whose work is done by `at`, and submit the jobs that arrive by then."""
        while self.completions and self.completions[0][0] <= at:
            end, jid, version = heapq.heappop(self.completions)
            state = self.jobs[jid]
            if state.version != version:
                continue
            state.result.end = end
            state.run_since = None
            state.version += 1
            del self.active[jid]
            self.short.discard(jid)
            for key in sorted(state.keys):
                self._record(end, jid, self.running.pop(key), -1)
                self._running_sorted = None
            state.keys.clear()
            state.held = dict.fromkeys(state.held, 0)
            self.holding.pop(jid, None)
            self.dirty = True
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival][0] <= at:
            _, jid = self.arrivals[self.next_arrival]
            self.active[jid] = self.jobs[jid].job
            self._turn(self.jobs[jid])
            self.short.add(jid)
            self._check_waiting(self.jobs[jid])
            self.next_arrival += 1
            self.dirty = True
        self.time = at

    def _check_waiting(self, state: _Job) -> None:
        """Keep `waiting` and `holding` up to date for an active job (with a pending window only)."""
        if self.pending_window is None:
            return
        job = state.job
        key = (-job.priority, job.created, job.id)
        queue = self.waiting.setdefault(job.queue, [])
        i = bisect.bisect_left(queue, key)
        listed = i < len(queue) and queue[i] == key
        if any(state.held.values()):
            if listed:
                del queue[i]
            self.holding[job.id] = None
        else:
            if not listed:
                queue.insert(i, key)
            self.holding.pop(job.id, None)

    def _snapshot(self, at: float) -> Snapshot:
        running = self._running_sorted
        if running is None:
            running = self._running_sorted = tuple(self.running[k] for k in sorted(self.running))
        if self.pending_window is None:
            jobs = tuple(self.active.values())
        else:
            specs = self.jobs
            jobs = tuple([specs[jid].job for jid in self.holding]
                         + [specs[key[2]].job for queue in self.waiting.values()
                            for key in queue[:self.pending_window]])
        return replace(self.cluster, jobs=jobs, running=running, now=at)

    def _apply(self, at: float, decisions: Decisions) -> None:
        stopped: set[str] = set()
        touched: set[str] = set()
        for e in decisions.evicts:
            key = (e.job_id, e.role, e.replica)
            gone = self.running.pop(key, None)
            self._running_sorted = None
            if gone is None:
                raise ValueError(f"evict {key}: replica is not running")
            self._record(at, e.job_id, gone, -1)
            state = self.jobs[e.job_id]
            state.held[e.role] -= 1
            state.keys.discard(key)
            touched.add(e.job_id)
            if e.reason != "shrink":
                stopped.add(e.job_id)
        for b in decisions.binds:
            key = (b.job_id, b.role, b.replica)
            if key in self.running:
                raise ValueError(f"bind {key}: replica is already running")
            rep = self.running[key] = RunningReplica(b.job_id, b.role, b.replica, b.node, b.gpus, b.slice)
            self._running_sorted = None
            self._record(at, b.job_id, rep, +1)
            state = self.jobs[b.job_id]
            state.held[b.role] += 1
            state.keys.add(key)
            touched.add(b.job_id)
        for jid in sorted(touched):
            state = self.jobs[jid]
            if state.run_since is not None and (jid in stopped or not state.at_minimum()):
                self._stop(state, at)
            if state.run_since is None and state.at_minimum():
                self._start(state, at)
            self._check_short(state)
            self._check_waiting(state)
        self.binds += len(decisions.binds)
        self.evicts += len(decisions.evicts)
        self.cycles += 1
        self.last_cycle = at
        self.dirty = decisions.changes > 0

    def _start(self, state: _Job, at: float) -> None:
        state.run_since = at
        if state.result.start is None:
            state.result.start = at
        state.version += 1
        heapq.heappush(self.completions, (at + max(state.spec.duration - state.done, 0.0), state.spec.job.id,
                                          state.version))

    def _stop(self, state: _Job, at: float) -> None:
        worked = state.done + (at - state.run_since)
        every = state.spec.checkpoint_s
        if every is None:
            saved = 0.0
        elif every == 0:
            saved = worked
        else:
            saved = max(state.done, math.floor(worked / every) * every)
        state.result.evictions += 1
        state.result.lost_s += worked - saved
        state.done = saved
        state.run_since = None
        state.version += 1
        spec = state.spec
        if spec.deadline is not None:
            latest = spec.latest_start(saved)
            if latest != state.job.latest_start:
                state.job = self.active[state.job.id] = replace(state.job, latest_start=latest)
            self._turn(state)


def replay(cluster: Snapshot, jobs: Iterable[ReplayJob], *, start: float | None = None, until: float | None = None,
           cycle_s: float = 2.0, on_events: bool = True, watch: Collection[str] | None = None,
           max_cycles: int | None = None, on_cycle: CycleObserver | None = None,
           record_allocation: bool = False) -> ReplayResult:
    """Run `jobs` through the scheduler core on `cluster` from `start` (default `cluster.now`); see the
    module's documentation. `cluster.jobs` is not read: the jobs are `jobs`."""
    return Replay(cluster, jobs, start=start, cycle_s=cycle_s, on_events=on_events, on_cycle=on_cycle,
                  record_allocation=record_allocation).run(until, watch=watch, max_cycles=max_cycles)


__all__ = ["JobResult", "Replay", "ReplayJob", "ReplayResult", "replay"]
