"""The expected-start forecast on a core snapshot: no database, epoch seconds.

`scheduling/forecast.py` reads the cluster, the declared run times, the queues' run-time history and
recent arrivals from the database and asks `forecast_windows`; `bench/eta.py` asks it in trace replays
with what the platform would know at that moment. The rules (run times, range, arrivals, open-ended
answers) are told in `scheduling/forecast.py`'s documentation.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from . import model as cm
from .replay import ReplayJob, replay

HORIZON_S = 7 * 86400
MAX_CYCLES = 1000          # per replay: a bound on the work of one forecast (beyond: unknown)
HISTORY_JOBS = 50
HISTORY_MIN = 5
ARRIVAL_WINDOW_S = 3600.0  # a queue's recent arrivals: its jobs submitted this long before now
ARRIVAL_SPAN_S = 3 * 3600.0  # the late replay has others submit for this long (beyond: open-ended)
ARRIVAL_Z = 1.645          # the upper count: m + z*sqrt(m) + 1 jobs where m are expected (about the 95th pct)
BURST_WINDOW_S = 600.0     # a queue's rate now: its jobs of the last this many seconds (or since the platform began)
BURST_LASTS = 1.0          # a rate now above the hour's is taken to fade over this many times that window
LATE_FACTOR = 3.0          # the late replay looks this many times the early wait ahead (beyond: open-ended)
LATE_FLOOR_S = 600.0       # and at least this far
MAX_ARRIVALS = 10000       # modelled arrivals per forecast, at most (the rest of the span: open-ended)
OPEN_Q = 0.95              # an open-ended answer's bound: this quantile of realised over early waits
WIDEN_Q = 0.90             # a late bound is stretched by this quantile of realised over late waits, when above 1
CALIBRATION_FLOOR_S = 60.0  # waits shorter than this are taken as this long in those ratios (an early 0 is no scale)
SURGE_WINDOW_S = 300.0     # a surge: the cluster's submissions of the last this many seconds come
SURGE_AT = 2.0             # at least this many times as fast as over the hour


def runtime_spread(ratios: list[float]) -> tuple[float, float]:
    """(low, high) multipliers of a declared run time from a queue's recent actual/declared ratios (newest
    HISTORY_JOBS): the first and third quartiles, the low at most 1 and the high at least 1; (1, 1) with
    fewer than HISTORY_MIN."""
    if len(ratios) < HISTORY_MIN:
        return 1.0, 1.0
    first, _, third = statistics.quantiles(ratios, n=4, method="inclusive")
    return min(1.0, first), max(1.0, third)


@dataclass(frozen=True)
class JobInput:
    """What the forecast knows of one unfinished job, none of it depending on the time of asking."""

    job: cm.Job
    queue: str
    seconds: float                 # declared duration in platform seconds
    started: float | None          # a placed job: when it started (None: placed, not started yet)
    placed: bool
    arrives: float | None          # a held job: when it enters the queue
    pending: bool                  # Pending in the database: its start is asked for
    saved: float = 0.0             # work kept from earlier runs (checkpoints), platform seconds: not run again


@dataclass(frozen=True)
class Arrival:
    """A job submitted lately to a queue, a sample of what its users submit: the core job, its declared
    duration in platform seconds, and how long before now it came."""

    job: cm.Job
    seconds: float
    ago: float


def expected_count(now_rate: float, hour_rate: float, fade_s: float, t: float) -> float:
    """Jobs expected in the `t` seconds after now from a rate that starts at `now_rate` and fades towards
    `hour_rate` with time constant `fade_s` (a burst ends; a lull ends too)."""
    return hour_rate * t + (now_rate - hour_rate) * fade_s * (1.0 - math.exp(-t / fade_s))


def upper_count(now_rate: float, hour_rate: float, fade_s: float, z: float, t: float) -> float:
    """The upper bound of that count: m + z*sqrt(m) + 1 for m expected."""
    m = expected_count(now_rate, hour_rate, fade_s, t)
    return m + z * math.sqrt(m) + 1.0


def expected_arrivals(arrivals: Iterable[Arrival], now: float, *, window_s: float = ARRIVAL_WINDOW_S,
                      observed_s: float | None = None, span_s: float = ARRIVAL_SPAN_S, z: float = ARRIVAL_Z,
                      burst_s: float = BURST_WINDOW_S, lasts: float = BURST_LASTS, limit: int = MAX_ARRIVALS
                      ) -> tuple[list[tuple[float, cm.Job, float]], float]:
    """The jobs others are taken to submit after `now`, per queue from its jobs of the last `window_s`
    (`observed_s`: how long submissions have been seen, shorter where the platform has not run that long).
    Its rate now is that of its last `burst_s` (or of all it has seen, when shorter); its rate for the hour,
    its count over `window_s`. The rate now fades to the hour's over `lasts` times the span it was measured
    on, and the count expected by each moment is taken at its upper bound, m + z*sqrt(m) + 1: a burst goes
    on a while and ends, and over a long span the bound grows as the square root, not with every window.
    The k-th job comes when that count reaches k; the queue's seen jobs are submitted again newest first.
    Returns (when, core job, declared seconds) in time order, and until when arrivals are modelled
    (`span_s`, or sooner where `limit` cuts them short)."""
    observed = window_s if observed_s is None else max(1.0, min(observed_s, window_s))
    recent = min(burst_s, observed)
    by_queue: dict[str, list[Arrival]] = defaultdict(list)
    for a in arrivals:
        if 0 <= a.ago < window_s:
            by_queue[a.job.queue].append(a)
    planned = []
    for queue, seen in sorted(by_queue.items()):
        seen.sort(key=lambda a: (a.ago, a.job.id))
        now_rate = sum(1 for a in seen if a.ago < recent) / recent
        hour_rate, fade_s = len(seen) / window_s, lasts * recent

        # walk the span in steps that grow (the count changes fastest at first), each job where the count
        # reaches its number, linearly between steps
        k, t, step, before = 1, 0.0, 1.0, upper_count(now_rate, hour_rate, fade_s, z, 0.0)
        while t < span_s and len(planned) < limit + 1:
            t_next = min(span_s, t + step)
            after = upper_count(now_rate, hour_rate, fade_s, z, t_next)
            while k <= after and len(planned) < limit + 1:
                share = (k - before) / (after - before) if after > before else 1.0
                planned.append((now + t + (t_next - t) * max(0.0, share), f"~{queue}~{k}", seen[(k - 1) % len(seen)]))
                k += 1
            t, before, step = t_next, after, min(60.0, step * 1.1)
    planned.sort(key=lambda p: (p[0], p[1]))
    until = now + span_s
    if len(planned) > limit:
        until = planned[limit][0]
        planned = planned[:limit]
    return [(at, replace(a.job, id=jid, created=at, latest_start=None), a.seconds) for at, jid, a in planned], until


def surge(arrivals: Iterable[Arrival], *, window_s: float = ARRIVAL_WINDOW_S, observed_s: float | None = None) -> float:
    """How many times as fast the cluster's jobs came over its last SURGE_WINDOW_S as over `window_s` (or the
    `observed_s` the platform has seen, when shorter): that ratio from SURGE_AT on, else 1 (no surge)."""
    span = window_s if observed_s is None else max(1.0, min(observed_s, window_s))
    if span <= SURGE_WINDOW_S:
        return 1.0
    ago = [a.ago for a in arrivals if 0 <= a.ago < span]
    if not ago:
        return 1.0
    ratio = sum(1 for t in ago if t < SURGE_WINDOW_S) / SURGE_WINDOW_S / (len(ago) / span)
    return ratio if ratio >= SURGE_AT else 1.0


@dataclass(frozen=True)
class Outcome:
    """A started job's first answer, the replays' own (before `calibrate`), and when it really started: what the
    platform learns of its own forecasts. Epoch seconds."""

    queue: str
    asked: float
    earliest: float | None
    latest: float | None
    started: float


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _recent(outcomes: list[Outcome], queue: str, keep) -> list[Outcome]:
    """The queue's newest HISTORY_JOBS kept outcomes by start, or the cluster's where it has fewer than HISTORY_MIN."""
    mine = [o for o in outcomes if o.queue == queue and keep(o)][-HISTORY_JOBS:]
    if len(mine) >= HISTORY_MIN:
        return mine
    every = [o for o in outcomes if keep(o)][-HISTORY_JOBS:]
    return every if len(every) >= HISTORY_MIN else []


def _ratio(o: Outcome, bound: float) -> float:
    return (o.started - o.asked) / max(bound - o.asked, CALIBRATION_FLOOR_S)


def calibrate(windows: Mapping[str, tuple[float | None, float | None]], queues: Mapping[str, str], now: float,
              outcomes: Iterable[Outcome], surge: float = 1.0) -> dict[str, tuple[float | None, float | None]]:
    """The replays' answers (`forecast_windows`) set against how their first answers fared: per job's queue
    (`queues`), over the newest HISTORY_JOBS jobs that started by `now` (the cluster's where the queue has
    fewer than HISTORY_MIN), the ratio of each one's real wait from its answer to the wait its answer gave
    (each at least CALIBRATION_FLOOR_S). An open-ended answer is bounded at the early wait times the OPEN_Q
    quantile of realised over early, of the jobs that waited at least CALIBRATION_FLOOR_S; a bounded one is stretched by the WIDEN_Q quantile of realised over late
    where that is above 1 (its late bounds were too soon). Without such history, answers stay as they are. In a
    `surge` (see `surge`) every late wait is then stretched by it: the modelled arrivals go on at the rates
    seen, and a burst of submissions outlasts them (MIX1's bursts run on for a quarter of an hour and more)."""
    seen = sorted((o for o in outcomes if o.started <= now), key=lambda o: (o.started, o.asked))
    factors: dict[tuple[str, bool], float | None] = {}  # (queue, open-ended) -> factor: one per queue, not per job

    def factor(queue: str, open_ended: bool) -> float | None:
        if (queue, open_ended) not in factors:
            if open_ended:
                # a job that started within the floor says nothing of a wait the replays could not bound
                history = _recent(seen, queue,
                                  lambda o: o.earliest is not None and o.started - o.asked >= CALIBRATION_FLOOR_S)
                found = _nearest_rank([_ratio(o, o.earliest) for o in history], OPEN_Q) if history else None
            else:
                history = _recent(seen, queue, lambda o: o.earliest is not None and o.latest is not None)
                found = _nearest_rank([_ratio(o, o.latest) for o in history], WIDEN_Q) if history else 1.0
            factors[(queue, open_ended)] = found
        return factors[(queue, open_ended)]

    out = {}
    for job_id, (earliest, latest) in windows.items():
        if earliest is not None and latest is None:
            open_factor = factor(queues[job_id], True)
            if open_factor is not None:
                latest = max(earliest, now + open_factor * max(earliest - now, CALIBRATION_FLOOR_S))
        elif earliest is not None:
            widen = factor(queues[job_id], False)
            if widen > 1.0:
                latest = max(earliest, now + widen * max(latest - now, CALIBRATION_FLOOR_S))
        if latest is not None and surge > 1.0:
            latest = max(earliest, now + surge * (latest - now))
        out[job_id] = (earliest, latest)
    return out


def replay_jobs(inputs: Iterable[JobInput], factors: Mapping[str, tuple[float, float]], now: float, *,
                 high: bool, extra_s: float) -> list[ReplayJob]:
    jobs = []
    for i in inputs:
        low_factor, high_factor = factors.get(i.queue, (1.0, 1.0))
        seconds = i.seconds * (high_factor if high else low_factor) + extra_s
        if i.arrives is not None:
            jobs.append(ReplayJob(i.job, i.arrives, seconds))
        elif i.placed:
            begun = min(i.started if i.started is not None else now, now)
            jobs.append(ReplayJob(i.job, min(i.job.created, now), seconds,
                                  done=min(i.saved + now - begun, seconds), started=begun))
        else:
            jobs.append(ReplayJob(i.job, min(i.job.created, now), seconds, done=min(i.saved, seconds)))
    return jobs


def forecast_windows(snapshot: cm.Snapshot, inputs: Iterable[JobInput], factors: Mapping[str, tuple[float, float]],
                     now: float, *, interval: float, arrivals: Iterable[Arrival] = (),
                     arrival_window_s: float = ARRIVAL_WINDOW_S, observed_s: float | None = None,
                     watch: Iterable[str] | None = None) -> dict[str, tuple[float | None, float | None]]:
    """The forecast itself, on a core snapshot and epoch seconds (no database): for each watched job (default:
    every input marked pending), (earliest, latest) as the module says; latest None with an earliest: open-ended;
    both None: unknown. `interval`: seconds between the beat's cycles; `arrivals`: the queues' jobs of the last
    `arrival_window_s`; `observed_s`: how long the platform has seen submissions, where shorter than that."""
    inputs = tuple(inputs)
    watched = list(watch) if watch is not None else [i.job.id for i in inputs if i.pending]
    if not watched:
        return {}
    common = {"start": now, "until": now + HORIZON_S, "cycle_s": interval, "watch": watched,
              "max_cycles": MAX_CYCLES}
    early = replay(snapshot, replay_jobs(inputs, factors, now, high=False, extra_s=0.0), on_events=True, **common)
    coming, modelled_until = expected_arrivals(arrivals, now, window_s=arrival_window_s, observed_s=observed_s)
    late_jobs = replay_jobs(inputs, factors, now, high=True, extra_s=interval)
    for at, job, seconds in coming:
        high = factors.get(job.queue, (1.0, 1.0))[1]
        late_jobs.append(ReplayJob(job, at, seconds * high + interval))
    # a bound further than LATE_FACTOR times the early wait (at least LATE_FLOOR_S) is no bound: open-ended
    soonest = [early.jobs[j].start for j in watched if early.jobs[j].start is not None]
    bound = now + max(LATE_FLOOR_S, LATE_FACTOR * (max(soonest) - now)) if soonest else now + LATE_FLOOR_S
    common["until"] = min(common["until"], modelled_until if coming else common["until"], bound)
    late = replay(snapshot, late_jobs, on_events=False, **common)
    out = {}
    for job_id in watched:
        earliest, latest = early.jobs[job_id].start, late.jobs[job_id].start
        if latest is not None:
            # past the modelled arrivals or the bound, later submissions may go on pushing it back: no bound
            latest = None if latest > common["until"] else latest + interval
        if earliest is not None and latest is not None and earliest > latest:
            earliest, latest = latest, earliest   # the two runs took different paths: keep a true range
        out[job_id] = (earliest, latest)
    return out


