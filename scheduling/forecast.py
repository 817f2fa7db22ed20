"""A pending job's place in its queue and when it should start.

Position: the job's 1-based rank among its queue's pending jobs in the order the scheduler's actions
take a queue's jobs (`core/actions/walk.py` `job_order`: higher priority first, then the older, then the
job id as text). Jobs held for an off-peak window they were quoted for (`not_before` still ahead) are
not in the scheduler's snapshot, so they are not counted ahead of anyone; a held job is ranked as if
it were in the queue now.

Expected start: the cluster as the cycle sees it (`cycle/snapshot.py`) run forward through the
scheduler core by `core/replay.py`, every pending job watched, once with low run times and once
with high ones.

Run times (the rule): a job runs for its declared `expectedDuration` (the spec defaults it to 1 h;
it is what the job was quoted on) in platform seconds, that is divided by the clock scale of its
replicas (a simulated cluster runs SIM_SPEEDUP times faster; a job not placed yet takes the scale
of the newest placement). It is widened by how the queue's jobs ran against what they declared:
over the queue's last HISTORY_JOBS finished jobs (at least HISTORY_MIN of them, else no widening),
the low estimate is declared x min(1, first quartile of actual/declared) and the high estimate
declared x max(1, third quartile). A running job ends at its start plus its estimate; one already
past it ends at once. A job stopped before with resumable checkpoints has the work they kept taken
off (`saved_work`), running or waiting again: without it, a job resumed after an eviction would be
replayed as if it started over, and jobs waiting for its GPUs told a start later than the real one.

Range: `earliest` replays the low run times with a cycle the moment a job ends, and no job submitted
after now; `latest` replays the high run times plus one cycle interval per job (its end is seen by the
next cycle, and a started job first pulls its image) with cycles only every SCHEDULER_INTERVAL_S, adds
one more interval (the beat's phase), and has others keep submitting: each queue's jobs of the last
ARRIVAL_WINDOW_S submitted again, newest first, as a rate that starts at the queue's rate of its last
BURST_WINDOW_S (or of all the platform has seen, when it has run less) and fades to its rate of the hour
over BURST_LASTS times that span (a burst goes on a while, then ends), each job where the count expected
by then reaches its number at its upper bound (m + ARRIVAL_Z sqrt(m) + 1 for m expected), for
ARRIVAL_SPAN_S (at most MAX_ARRIVALS jobs). Both replays are the scheduler core's cycle, so backfill of
smaller and later jobs, quotas for non-preemptible work, reclaim and preemption and elastic extras happen
in them as in the real cycle.

Open-ended: where the late replay cannot place the job while its modelled arrivals last, or within
HORIZON_S and MAX_CYCLES, the replays' answer is `earliest` with no `latest` ("not before ...; depends on jobs
ending"). A start beyond HORIZON_S in the early replay, or none, is unknown (None).

Calibration (`core/forecast.py` `calibrate`): the platform keeps each job's first answer while it waits
(the replays' own, on `Job.first_forecast`, written by `keep_first_forecasts`, a beat task, never by a page or an
API call that reads a forecast, so what calibration learns does not depend on who looked) and,
once the job started, sets it against its real start (`recent_outcomes`: each queue's newest HISTORY_JOBS
jobs started within OUTCOMES_WITHIN; a queue with fewer than HISTORY_MIN takes the cluster's newest). An open-ended answer is
bounded at now + the early wait (at least CALIBRATION_FLOOR_S) times the OPEN_Q quantile of realised over
early waits of those jobs that waited at least CALIBRATION_FLOOR_S; a bounded answer's late wait is stretched
by the WIDEN_Q quantile of realised over late waits where that is above 1 (never tightened). Without such
history the answer stays as the replays gave it: open-ended where they could not bound it, never a made-up
bound. In a surge of submissions (the cluster's jobs of the last SURGE_WINDOW_S at least SURGE_AT times as
fast as over the hour) every late wait is then stretched by that ratio: a burst outlasts the modelled arrivals.

Both replays cover every pending job of the cluster at once; the answer is kept for REUSE_S while the
cluster's snapshot (jobs, replicas, nodes, queues), the jobs' durations and the queues' run-time history
stay the same, so pages and API calls between two cycles share one computation. A job not submitted yet
(a quote's option) is forecast the same way and its answer kept the same way.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Max, Window
from django.db.models.functions import RowNumber
from django.utils.formats import date_format
from django.utils.timezone import localtime
from django.utils.translation import gettext

from scheduling import clock
from scheduling.core import model as cm
from scheduling.core.forecast import (
    ARRIVAL_WINDOW_S,
    HISTORY_JOBS,
    Arrival,
    JobInput,
    Outcome,
    calibrate,
    forecast_windows,
    runtime_spread,
    surge,
)
from scheduling.cycle.snapshot import build_snapshot, core_job, core_roles
from scheduling.lifecycle.checkpoints import checkpoint_every, lost_seconds
from scheduling.models import ACTIVE_STATES, FINAL_STATES, Job, JobState, Replica

REUSE_S = 30.0
OUTCOMES_WITHIN = timedelta(days=7)   # first answers of jobs started longer ago say little of the queue now


@dataclass(frozen=True)
class StartWindow:
    earliest: datetime | None
    latest: datetime | None

    @property
    def open_ended(self) -> bool:
        """Not before `earliest`, and no bound after it: the start depends on jobs ending (and arriving)."""
        return self.earliest is not None and self.latest is None


def window_summary(window: StartWindow) -> str:
    """The range in words, in the active language, its times in the active time zone."""
    def at(moment: datetime) -> str:
        return date_format(localtime(moment), "Y-m-d H:i")

    if window.open_ended:
        return gettext("not before %(start)s; depends on jobs ending") % {"start": at(window.earliest)}
    if window.earliest is not None and window.latest is not None:
        return gettext("between %(earliest)s and %(latest)s") % {"earliest": at(window.earliest),
                                                                  "latest": at(window.latest)}
    return gettext("unknown")


@dataclass(frozen=True)
class PendingOutlook:
    """A pending job's position in its queue and its expected start (None: unknown)."""

    position: int
    expected_start: StartWindow | None


# --------------------------------------------------------------------------- queue position


def order_key(priority: int, created: datetime, pk: int) -> tuple:
    """The scheduler's order of a queue's jobs (core/actions/walk.py job_order, on the core job's fields)."""
    return (-priority, created.timestamp(), str(pk))


def queue_positions(jobs: Iterable[Job], now: datetime | None = None) -> dict[int, int]:
    """The 1-based rank of each pending job of `jobs` among its queue's pending jobs (see the module)."""
    now = now or clock.now()
    wanted = [j for j in jobs if j.state == JobState.PENDING]
    ahead: dict[int, list[tuple]] = defaultdict(list)
    rows = Job.objects.filter(queue_id__in={j.queue_id for j in wanted}, state=JobState.PENDING).exclude(
        roles=[]).values_list("pk", "queue_id", "priority", "created", "not_before")
    for pk, queue_id, priority, created, not_before in rows:
        if not_before is None or not_before <= now:
            ahead[queue_id].append(order_key(priority, created, pk))
    for keys in ahead.values():
        keys.sort()
    out = {}
    for job in wanted:
        key = order_key(job.priority, job.created, job.pk)
        keys = ahead.get(job.queue_id, [])
        out[job.pk] = bisect.bisect_left(keys, key) + 1
    return out


# --------------------------------------------------------------------------- run times


def runtime_factors(queues: Iterable[str]) -> dict[str, tuple[float, float]]:
    """Per queue, (low, high) multipliers of a declared duration from its recent finished jobs."""
    out = {}
    for name in sorted(set(queues)):
        rows = (Job.objects.filter(queue__name=name, state__in=(JobState.SUCCEEDED, JobState.FAILED),
                                   started__isnull=False, finished__isnull=False, expected_duration_s__gt=0)
                .annotate(scale=Max("replicas__clock_scale")).order_by("-finished", "-id")
                .values_list("expected_duration_s", "started", "finished", "scale")[:HISTORY_JOBS])
        out[name] = runtime_spread([max((finished - started).total_seconds(), 0.0) * (scale or 1.0) / declared
                                    for declared, started, finished, scale in rows])
    return out


def default_clock_scale() -> float:
    """Simulated seconds per platform second for a job not placed yet: the newest placement's."""
    scale = Replica.objects.order_by("-id").values_list("clock_scale", flat=True).first()
    if scale:
        return float(scale)
    return float(settings.SIM_SPEEDUP) if settings.SCHEDULER_BACKEND == "simulated" else 1.0


def saved_work() -> dict[str, float]:
    """Each unfinished job's work its checkpoints kept from the runs it was stopped in, in its own seconds, as
    the cycle's evictions keep it: a run (its replicas stopped at one moment, from the first one's start) adds
    its time to the work kept before, rounded down to the checkpoint interval. A job without resumable
    checkpoints keeps nothing; its runs start over."""
    runs: dict[str, dict[datetime, tuple[datetime, float]]] = defaultdict(dict)
    every: dict[str, int] = {}
    for job_id, spec, started, ended, scale in Replica.objects.filter(
            state=JobState.PREEMPTED, started__isnull=False, ended__isnull=False).exclude(
            job__state__in=FINAL_STATES).values_list("job_id", "job__spec", "started", "ended", "clock_scale"):
        key = str(job_id)
        if key not in every:
            every[key] = checkpoint_every(spec)
        if every[key]:
            first = runs[key].get(ended)
            runs[key][ended] = (min(first[0], started) if first else started, float(scale or 1.0))
    out = {}
    for key, stopped in runs.items():
        kept = 0.0
        for ended, (started, scale) in sorted(stopped.items()):
            # what the run worked, less what its eviction lost (as the cycle counts the loss)
            kept += max((ended - started).total_seconds(), 0.0) * scale - lost_seconds(started, ended, scale, every[key])
        if kept:
            out[key] = kept
    return out


def _inputs(snapshot: cm.Snapshot, now: datetime) -> tuple[JobInput, ...]:
    placed = {r.job_id for r in snapshot.running}
    started: dict[str, float] = {}
    scales: dict[str, float] = {}
    for job_id, begun, scale in Replica.objects.filter(state__in=ACTIVE_STATES, node__isnull=False).exclude(
            job__state__in=FINAL_STATES).values_list("job_id", "started", "clock_scale"):
        key = str(job_id)
        scales[key] = max(scales.get(key, 0.0), float(scale or 1.0))
        if begun is not None:
            started[key] = min(started.get(key, begun.timestamp()), begun.timestamp())
    fallback = default_clock_scale()
    kept = saved_work()
    rows = {str(pk): (state, declared) for pk, state, declared in Job.objects.exclude(
        state__in=FINAL_STATES).exclude(roles=[]).values_list("pk", "state", "expected_duration_s")}
    out = []
    for job in snapshot.jobs:
        # a job that ended since the snapshot was read: gone at once
        state, declared = rows.get(job.id, (None, 0))
        scale = scales.get(job.id, fallback)
        out.append(JobInput(job, job.queue, declared / scale, started.get(job.id), job.id in placed, None,
                            state == JobState.PENDING, saved=kept.get(job.id, 0.0) / scale))
    roles_by_text: dict[str, tuple[cm.Role, ...]] = {}
    held = Job.objects.filter(state=JobState.PENDING, not_before__gt=now).exclude(roles=[]).values_list(
        "pk", "expected_duration_s", "not_before", "queue__name", "roles", "priority", "preemptible", "reduce_cost",
        "created", "topology")
    for pk, declared, not_before, queue, roles, priority, preemptible, reduce_cost, created, topology in held:
        text = repr(roles)
        if text not in roles_by_text:
            roles_by_text[text] = core_roles(roles)
        job = core_job(pk, queue, roles_by_text[text], priority, preemptible, reduce_cost, created, topology)
        out.append(JobInput(job, queue, declared / fallback, None, False, not_before.timestamp(), True))
    return tuple(out)


# --------------------------------------------------------------------------- the forecast


def recent_arrivals(now: datetime, window_s: float = ARRIVAL_WINDOW_S) -> tuple[Arrival, ...]:
    """Every queue's jobs submitted in the last `window_s` before `now`, oldest first."""
    scale = default_clock_scale()
    rows = Job.objects.filter(created__gt=now - timedelta(seconds=window_s), created__lte=now).exclude(
        roles=[]).order_by("created", "pk").values_list(
        "pk", "queue__name", "roles", "priority", "preemptible", "reduce_cost", "created", "topology",
        "expected_duration_s")
    roles_by_text: dict[str, tuple[cm.Role, ...]] = {}
    out = []
    for pk, queue, roles, priority, preemptible, reduce_cost, created, topology, declared in rows:
        if queue is None:
            continue
        text = repr(roles)
        if text not in roles_by_text:
            roles_by_text[text] = core_roles(roles)
        job = core_job(pk, queue, roles_by_text[text], priority, preemptible, reduce_cost, created, topology)
        out.append(Arrival(job, (declared or 0) / scale, (now - created).total_seconds()))
    return tuple(out)


def observed_since(now: datetime, window_s: float = ARRIVAL_WINDOW_S) -> float:
    """How long submissions have been seen, at most `window_s`: since the first job, on a new platform."""
    first = Job.objects.order_by("created").values_list("created", flat=True).first()
    return window_s if first is None else min(window_s, max((now - first).total_seconds(), 1.0))


def recent_outcomes(now: datetime) -> tuple[Outcome, ...]:
    """The first answers kept on jobs that started by `now` (`Job.first_forecast`) with their starts, within
    OUTCOMES_WITHIN: each queue's newest HISTORY_JOBS (their union holds the cluster's newest too), oldest
    start first."""
    rows = (Job.objects.filter(started__gt=now - OUTCOMES_WITHIN, started__lte=now, first_forecast__isnull=False)
            .annotate(rank=Window(RowNumber(), partition_by=[F("queue_id")], order_by=[F("started").desc(),
                                                                                      F("id").desc()]))
            .filter(rank__lte=HISTORY_JOBS).values_list("queue__name", "first_forecast", "started"))
    out = []
    for queue, first, started in rows:
        try:
            out.append(Outcome(queue, float(first["asked"]), first.get("earliest"), first.get("latest"),
                               started.timestamp()))
        except (KeyError, TypeError, ValueError):
            continue   # not a first answer this module wrote
    return tuple(sorted(out, key=lambda o: (o.started, o.asked, o.queue)))


def _without_first_answer():
    """Pending jobs that never started and have no first answer kept yet."""
    return Job.objects.filter(state=JobState.PENDING, started__isnull=True, first_forecast__isnull=True)


def keep_first_answers(raw: dict[str, tuple[float | None, float | None]], now: datetime) -> int:
    """Store each pending job's first answer (the replays', before calibration) while it waits for its first
    start; returns how many were stored."""
    ids = [int(job_id) for job_id in raw if int(job_id) > 0]
    if not ids:
        return 0
    fresh = list(_without_first_answer().filter(pk__in=ids).values_list("pk", flat=True))
    asked = now.timestamp()
    Job.objects.bulk_update([Job(pk=pk, first_forecast={"asked": asked, "earliest": raw[str(pk)][0],
                                                        "latest": raw[str(pk)][1]}) for pk in fresh],
                            ["first_forecast"])
    return len(fresh)


def _forecast(snapshot: cm.Snapshot, inputs: tuple[JobInput, ...], factors: dict[str, tuple[float, float]],
              now: datetime, arrivals: tuple[Arrival, ...] = (), outcomes: tuple[Outcome, ...] = ()
              ) -> tuple[dict[int, StartWindow], dict[str, tuple[float | None, float | None]]]:
    """(the calibrated answers by job id, the replays' own by core job id)."""
    def at(ts: float | None) -> datetime | None:
        return None if ts is None else datetime.fromtimestamp(ts, tz=now.tzinfo)

    observed = observed_since(now) if arrivals else None
    raw = forecast_windows(snapshot, inputs, factors, now.timestamp(),
                           interval=float(settings.SCHEDULER_INTERVAL_S), arrivals=arrivals, observed_s=observed)
    queues = {i.job.id: i.queue for i in inputs}
    windows = calibrate(raw, {job_id: queues[job_id] for job_id in raw}, now.timestamp(), outcomes,
                        surge(arrivals, observed_s=observed))
    return ({int(job_id): StartWindow(at(earliest), at(latest)) for job_id, (earliest, latest) in windows.items()},
            raw)


class _Kept:
    """Answers kept for REUSE_S while the state they were computed from stays the same."""

    LIMIT = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: object = None
        self._at = 0.0
        self._answers: dict[object, object] = {}

    def _fresh(self, state: object, at: float) -> bool:
        return self._state == state and 0 <= at - self._at <= REUSE_S

    def get(self, state: object, at: float, key: object = None) -> object | None:
        with self._lock:
            return self._answers.get(key) if self._fresh(state, at) else None

    def put(self, state: object, at: float, answer: object, key: object = None) -> None:
        with self._lock:
            if not self._fresh(state, at) or len(self._answers) >= self.LIMIT:
                self._state, self._at, self._answers = state, at, {}
            self._answers[key] = answer

    def forget(self) -> None:
        with self._lock:
            self._state, self._at, self._answers = None, 0.0, {}


_pending_kept = _Kept()
_new_kept = _Kept()


def forget_kept() -> None:
    """Drop every kept forecast (a test's world starts from none)."""
    _pending_kept.forget()
    _new_kept.forget()


def forecast_starts(now: datetime | None = None) -> dict[int, StartWindow]:
    """The expected start range of every pending job of the cluster, by job id. Reads only."""
    return _pending_forecast(now or clock.now())[0]


def keep_first_forecasts(now: datetime | None = None) -> int:
    """Store the first answer of each pending job that has none yet (`keep_first_answers`); the forecast is
    computed only when such a job exists, and shared with the pages as theirs is. Returns the answers stored."""
    now = now or clock.now()
    if not _without_first_answer().exists():
        return 0
    return keep_first_answers(_pending_forecast(now)[1], now)


def _pending_forecast(now: datetime) -> tuple[dict[int, StartWindow], dict[str, tuple[float | None, float | None]]]:
    """(the calibrated answers by job id, the replays' own by core job id) for every pending job, kept for
    REUSE_S while the state they come from stays the same."""
    snapshot = build_snapshot(now)
    inputs = _inputs(snapshot, now)
    factors = runtime_factors(i.queue for i in inputs)
    arrivals = recent_arrivals(now)
    outcomes = recent_outcomes(now)
    state = (replace(snapshot, now=0.0, queue_usage=()), inputs, factors, settings.SCHEDULER_INTERVAL_S,
             tuple(a.job.id for a in arrivals), outcomes)
    kept = _pending_kept.get(state, now.timestamp())
    if kept is not None:
        return kept
    answers = _forecast(snapshot, inputs, factors, now, arrivals, outcomes)
    _pending_kept.put(state, now.timestamp(), answers)
    return answers


def forecast_new_jobs(candidates: dict[str, tuple[cm.Job, float]], now: datetime | None = None, *,
                      snapshot: cm.Snapshot | None = None) -> dict[str, StartWindow]:
    """When each candidate, a job not submitted yet (core job, declared seconds), would start if it
    joined its queue now: each one on its own (they are alternatives, such as a quote's options),
    behind the pending jobs and the running jobs' ends, replayed as the pending jobs' starts are
    (and kept as theirs are). ``snapshot``: the cluster at ``now``, when the caller read it already."""
    if not candidates:
        return {}
    now = now or clock.now()
    snapshot = snapshot or build_snapshot(now)
    others = tuple(replace(i, pending=False) for i in _inputs(snapshot, now))
    factors = runtime_factors([*(i.queue for i in others), *(job.queue for job, _ in candidates.values())])
    scale = default_clock_scale()
    arrivals = recent_arrivals(now)
    outcomes = recent_outcomes(now)
    state = (replace(snapshot, now=0.0, queue_usage=()), others, factors, scale, settings.SCHEDULER_INTERVAL_S,
             tuple(a.job.id for a in arrivals), outcomes)
    out = {}
    for n, (name, (job, seconds)) in enumerate(candidates.items(), 1):
        asked = (replace(job, id="0", created=0.0), seconds)
        window = _new_kept.get(state, now.timestamp(), asked)
        if window is None:
            # a negative id never meets a stored job's; a hair after now: behind jobs submitted this instant
            job = replace(job, id=str(-n), created=now.timestamp() + 0.001)
            extra = JobInput(job, job.queue, seconds / scale, None, False, None, True)
            window = _forecast(snapshot, (*others, extra), factors, now, arrivals, outcomes)[0].get(
                -n, StartWindow(None, None))
            _new_kept.put(state, now.timestamp(), window, asked)
        out[name] = window
    return out


def pending_outlook(jobs: Iterable[Job], now: datetime | None = None) -> dict[int, PendingOutlook]:
    """For each pending job of `jobs` (the caller scoped them): its queue position and expected start."""
    now = now or clock.now()
    jobs = [j for j in jobs if j.state == JobState.PENDING]
    if not jobs:
        return {}
    positions = queue_positions(jobs, now)
    starts = forecast_starts(now)
    out = {}
    for job in jobs:
        window = starts.get(job.pk)
        known = window is not None and (window.earliest is not None or window.latest is not None)
        out[job.pk] = PendingOutlook(positions[job.pk], window if known else None)
    return out
