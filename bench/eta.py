"""How right the expected starts are: the product's forecast asked during a trace replay.

    python -m bench.replay --trace T --mode pool-besteffort --gpus N --eta-accuracy [--eta-asked-until S] --json
    python -m bench.eta --write-synthetic FILE [--teams 6 --hours 6 --gpus 256 --load 1.1 --seed 1]

The replay is run once to learn when every job really starts. It is then run again, identically, and
stopped at each moment a job that waited at least `min_wait_s` was submitted and every `ask_every_s` (10
simulated minutes) after while it waits; there the forecast (`scheduling.core.forecast.forecast_windows`, the
code behind a pending job's `expected_start`) is given what the platform would know at that moment: the
cycle's snapshot of the replay, each unfinished job's declared run time, when its current run began and
the work its checkpoints kept from runs it was stopped in,
each queue's run-time spread from its last finished jobs (`HISTORY_JOBS`), each queue's jobs
submitted in the last `ARRIVAL_WINDOW_S`, and how long submissions have been seen (since the trace's
first, the platform's start). As the product does, every job waiting at such a moment is forecast and its
first answer kept; the answers are calibrated (`calibrate`) with the first answers of the jobs that started
by that moment. Nothing it is given comes from after that moment.

Declared run times: a trace has only the real ones. `declared_noise` 0 declares them exactly; a sigma
above 0 multiplies each by a log-normal draw (median 1), as users who guess.

Figures, over every answer (each re-ask one answer) for jobs that waited at least `min_wait_s`:
`coverage` (the share whose range holds the real start; an open-ended answer, "not before ...", holds
it when the start is not before), the misses by side (`started_before` the earliest, `started_after` the
latest), `median_width_to_wait` and `p90_width_to_wait` (the range's width over
the job's real wait, start less submission; an open-ended or unknown answer is infinitely wide, null
where the quantile is), `median_width_to_remaining_wait` (over the wait left when asked: stricter),
`median_abs_error_s` (of the range's middle, answers with both ends), `open_ended` and `unknown` shares;
each also by queue and by job size (GPUs). `hindsight` (a diagnostic, read by no forecast): per replay,
the narrowest median width any calibration of that replay's answers by constant factors could reach at 90 %
coverage, the factors chosen knowing the real starts (`hindsight_bound`); where even that is above the
target, no calibration of that kind reaches it. `BENCH_ETA_ANSWERS=FILE` writes every answer and the kept
first answers there (`write_answers`); `--score FILE` calibrates them again as the code now does and prints the
figures, so that a change to `calibrate` is scored without replaying.

`--write-synthetic` writes a Philly-format trace: per team, jobs arriving as a Poisson process in
bursts (a rate that changes every hour), sizes 1/2/4/8/16 GPUs as MIX1's mostly small jobs,
log-normal run times (median 10 min), a share best-effort; `--load` sets the offered GPU-hours against
`--gpus` over the span.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import dataclasses
import json
import math
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scheduling.core.forecast import (
    ARRIVAL_WINDOW_S,
    CALIBRATION_FLOOR_S,
    HISTORY_JOBS,
    Arrival,
    JobInput,
    Outcome,
    calibrate,
    forecast_windows,
    runtime_spread,
    surge,
)
from scheduling.core.replay import JobResult, Replay
from scheduling.traces import TraceJob

ASK_EVERY_S = 600.0
MIN_WAIT_S = 60.0
SIZE_BUCKETS = ((1, "1"), (4, "2-4"), (8, "5-8"), (math.inf, ">8"))


@dataclass(frozen=True)
class Answer:
    job_id: str
    queue: str
    gpus: int
    asked: float
    submit: float
    start: float
    earliest: float | None
    latest: float | None
    replay_earliest: float | None = None   # the replays' own answer, before `calibrate`
    replay_latest: float | None = None

    @property
    def covered(self) -> bool:
        return self.earliest is not None and self.earliest <= self.start + 1e-6 and (
            self.latest is None or self.start <= self.latest + 1e-6)

    @property
    def width(self) -> float:
        if self.earliest is None or self.latest is None:
            return math.inf
        return self.latest - self.earliest


def size_bucket(gpus: int) -> str:
    return next(label for top, label in SIZE_BUCKETS if gpus <= top)


def declared_durations(trace: Iterable[TraceJob], noise: float, seed: int) -> dict[str, float]:
    """What each job declares: its real run time, times a log-normal draw of sigma `noise` (0: exact)."""
    rng = random.Random(seed)
    return {j.id: j.duration * (math.exp(rng.gauss(0.0, noise)) if noise > 0 else 1.0) for j in trace}


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    at = ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
    return None if math.isinf(at) else round(at, 3)


def summarise(answers: list[Answer]) -> dict:
    if not answers:
        return {"answers": 0, "jobs": 0, "coverage": None, "started_before": None, "started_after": None,
                "median_width_to_wait": None, "p90_width_to_wait": None,
                "median_width_to_remaining_wait": None, "median_abs_error_s": None, "open_ended": None,
                "unknown": None}
    ratios = [a.width / (a.start - a.submit) for a in answers]
    remaining = [a.width / max(a.start - a.asked, 1.0) for a in answers]
    errors = [abs((a.earliest + a.latest) / 2 - a.start) for a in answers
              if a.earliest is not None and a.latest is not None]
    n = len(answers)
    return {"answers": n, "jobs": len({a.job_id for a in answers}),
            "coverage": round(sum(a.covered for a in answers) / n, 4),
            # the misses by side: the real start before the earliest, or after the latest
            "started_before": round(sum(a.earliest is not None and a.start < a.earliest - 1e-6 for a in answers) / n, 4),
            "started_after": round(sum(a.latest is not None and a.start > a.latest + 1e-6 for a in answers) / n, 4),
            "median_width_to_wait": _quantile(ratios, 0.5), "p90_width_to_wait": _quantile(ratios, 0.9),
            "median_width_to_remaining_wait": _quantile(remaining, 0.5),
            "median_abs_error_s": round(statistics.median(errors), 1) if errors else None,
            "open_ended": round(sum(a.earliest is not None and a.latest is None for a in answers) / n, 4),
            "unknown": round(sum(a.earliest is None for a in answers) / n, 4)}


def hindsight_bound(answers: list[Answer], bound: str, coverage: float = 0.9) -> dict | None:
    """How narrow a calibration of one replay's answer could make the ranges at all: the smallest median width
    over the real wait of ranges `asked + low * w` to `asked + high * w` (w: the replay's wait, `bound`
    "earliest" or "latest", at least CALIBRATION_FLOOR_S) holding `coverage` of the real starts, `low` and
    `high` the same for every answer and chosen knowing those starts. Not a forecast and read by none: a
    limit that no calibration of that replay by constant factors goes below. An answer without that bound is
    a miss, infinitely wide. None where no such pair reaches `coverage`."""
    scaled = []   # (real wait from asking over the replay's, the replay's wait over the job's real wait)
    for a in answers:
        at = getattr(a, f"replay_{bound}")
        if at is not None:
            span = max(at - a.asked, CALIBRATION_FLOOR_S)
            scaled.append(((a.start - a.asked) / span, span / (a.start - a.submit)))
    needed = math.ceil(coverage * len(answers) - 1e-9)
    if not answers or needed > len(scaled):
        return None
    # every width is (high - low) times the answer's scale: the median is (high - low) times the scales' median
    scales = sorted([s for _, s in scaled] + [math.inf] * (len(answers) - len(scaled)))
    scale = scales[max(0, math.ceil(0.5 * len(scales)) - 1)]   # the median as `summarise` takes it
    if math.isinf(scale):
        return None
    ratios = sorted(r for r, _ in scaled)
    # the narrowest pair holding `needed` of the ratios
    low, high = min(((ratios[i], ratios[i + needed - 1]) for i in range(len(ratios) - needed + 1)),
                    key=lambda pair: pair[1] - pair[0])
    return {"median_width_to_wait": round((high - low) * scale, 3), "low": round(low, 3), "high": round(high, 3)}


def eta_figures(answers: list[Answer]) -> dict:
    out = summarise(answers)
    out["hindsight"] = {bound: hindsight_bound(answers, bound) for bound in ("earliest", "latest")}
    by_queue: dict[str, list[Answer]] = defaultdict(list)
    by_size: dict[str, list[Answer]] = defaultdict(list)
    for a in answers:
        by_queue[a.queue].append(a)
        by_size[size_bucket(a.gpus)].append(a)
    out["by_queue"] = {q: summarise(v) for q, v in sorted(by_queue.items())}
    out["by_size"] = {label: summarise(by_size[label]) for _, label in SIZE_BUCKETS if label in by_size}
    return out


class _History:
    """Each queue's finished jobs in the order they ended (from the first replay: the same as the second's),
    so the run-time spread known at a moment is read as the product reads it."""

    def __init__(self, results: dict[str, JobResult], declared: dict[str, float]) -> None:
        ended: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in results.values():
            if r.end is not None and r.start is not None and declared[r.id] > 0:
                ended[r.queue].append((r.end, (r.end - r.start) / declared[r.id]))
        self.ended = {q: sorted(v) for q, v in ended.items()}

    def factors(self, queue: str, at: float) -> tuple[float, float]:
        rows = self.ended.get(queue, [])
        upto = bisect.bisect_right(rows, (at, math.inf))
        return runtime_spread([ratio for _, ratio in rows[max(0, upto - HISTORY_JOBS):upto]])


def measure(engine: Replay, results: dict[str, JobResult], trace: list[TraceJob], declared: dict[str, float], *,
            cycle_s: float, ask_every_s: float = ASK_EVERY_S, min_wait_s: float = MIN_WAIT_S,
            asked_until: float | None = None, log: Callable[[str], None] = lambda _: None,
            first: dict[str, tuple[float, float | None, float | None]] | None = None,
            surges: dict[float, float] | None = None) -> list[Answer]:
    """Run `engine` (a fresh replay of the jobs whose `results` a first replay gave) and ask the forecast as
    the module says. `asked_until`: ask only for jobs submitted before then (a prefix of the trace). `first`,
    filled as it goes: each job's first answer (asked, earliest, latest), the replays' own, as the product keeps;
    `surges`: each asking moment's `surge`."""
    gpus = {j.id: j.gpus for j in trace}
    asks: dict[float, list[str]] = defaultdict(list)
    for jid, r in results.items():
        if r.start is None or r.start - r.submit_time < min_wait_s:
            continue
        if asked_until is not None and r.submit_time >= asked_until:
            continue
        at = r.submit_time
        while at < r.start:
            asks[at].append(jid)
            at += ask_every_s
    history = _History(results, declared)
    submitted = sorted((engine.jobs[j.id].spec.submit_time, j.id) for j in trace if j.id in engine.jobs)
    times = [t for t, _ in submitted]
    first = {} if first is None else first
    surges = {} if surges is None else surges
    answers: list[Answer] = []
    began, asked = time.perf_counter(), 0
    for n, at in enumerate(sorted(asks)):
        engine.run(until=at)
        watch = [jid for jid in asks[at] if engine.jobs[jid].result.start is None]
        if not watch:
            continue
        snapshot = engine._snapshot(at)   # the cluster as the cycle at `at` saw it
        inputs, unseen = [], []
        for jid in engine.active:
            state = engine.jobs[jid]
            placed = bool(state.keys)
            started = (state.run_since if state.run_since is not None else at) if placed else None
            # the work its checkpoints kept from runs before this one, as the platform counts it
            inputs.append(JobInput(state.job, state.job.queue, declared[jid], started, placed, None, False,
                                   saved=state.done))
            if not placed and state.result.start is None and jid not in first and jid not in asks[at]:
                unseen.append(jid)   # the product forecasts every pending job: its first answer is kept too
        for jid in watch:
            if jid not in engine.active:   # submitted since the last cycle (cycles on the beat only)
                job = engine.jobs[jid].job
                inputs.append(JobInput(job, job.queue, declared[jid], None, False, None, True))
        factors = {q: history.factors(q, at) for q in {i.queue for i in inputs}}
        lo = bisect.bisect_right(times, at - ARRIVAL_WINDOW_S)
        hi = bisect.bisect_right(times, at)
        recent = [Arrival(engine.jobs[jid].spec.job, declared[jid], at - t) for t, jid in submitted[lo:hi]]
        for q in {a.job.queue for a in recent} - factors.keys():
            factors[q] = history.factors(q, at)
        # the platform has seen submissions since the trace began
        raw = forecast_windows(snapshot, inputs, factors, at, interval=cycle_s, arrivals=recent,
                               observed_s=at - engine.start, watch=[*watch, *unseen])
        for jid, (earliest, latest) in raw.items():
            if engine.jobs[jid].result.start is None:   # waiting for its first start (not evicted and back)
                first.setdefault(jid, (at, earliest, latest))
        # what the platform has learnt: the first answers of the jobs that started by now
        outcomes = [Outcome(engine.jobs[jid].job.queue, a, e, lt, engine.jobs[jid].result.start)
                    for jid, (a, e, lt) in first.items()
                    if engine.jobs[jid].result.start is not None and engine.jobs[jid].result.start <= at]
        surges[at] = surge(recent, observed_s=at - engine.start)
        windows = calibrate({jid: raw[jid] for jid in watch}, {jid: engine.jobs[jid].job.queue for jid in watch},
                            at, outcomes, surges[at])
        for jid in watch:
            earliest, latest = windows[jid]
            r = results[jid]
            answers.append(Answer(jid, r.queue, gpus[jid], at, r.submit_time, r.start, earliest, latest, *raw[jid]))
        asked += 1
        if asked % 5 == 0:
            log(f"  eta: {asked} forecasts ({n + 1} of {len(asks)} moments), {len(answers)} answers, "
                f"{time.perf_counter() - began:.0f} s")
    # the second replay must be the first: on to the last asked job's start, and compare
    engine.run(until=max((a.start for a in answers), default=engine.time))
    for a in answers:
        if engine.jobs[a.job_id].result.start != a.start:
            raise AssertionError(f"job {a.job_id}: the second replay started it at "
                                 f"{engine.jobs[a.job_id].result.start}, the first at {a.start}")
    return answers


def eta_for_pool(trace: list[TraceJob], mode: str, node_count: int, silo_gpus: dict[str, int], s, results, *,
                 declared_noise: float = 0.0, seed: int = 1, ask_every_s: float = ASK_EVERY_S,
                 asked_until_s: float | None = None, log: Callable[[str], None] = lambda _: None) -> dict:
    """The `eta` figures of a pool replay whose per-job `results` are known (bench.replay's run_pool)."""
    from bench.replay import cluster, pool_queues, replay_jobs

    wall, cpu = time.perf_counter(), time.process_time()
    jobs = replay_jobs(trace, mode, s)
    origin = min((j.submit_time for j in jobs), default=0.0)
    engine = Replay(cluster(node_count, pool_queues(node_count * s.gpus_per_node, silo_gpus, mode), s), jobs,
                    start=origin, cycle_s=s.cycle_s, on_events=s.on_events)
    declared = declared_durations(trace, declared_noise, seed)
    first: dict[str, tuple[float, float | None, float | None]] = {}
    surges: dict[float, float] = {}
    answers = measure(engine, results, trace, declared, cycle_s=s.cycle_s, ask_every_s=ask_every_s,
                      asked_until=None if asked_until_s is None else origin + asked_until_s, log=log, first=first,
                      surges=surges)
    if os.environ.get("BENCH_ETA_ANSWERS"):
        write_answers(os.environ["BENCH_ETA_ANSWERS"], answers, first, results, surges)
    out = eta_figures(answers)
    out["settings"] = {"ask_every_s": ask_every_s, "min_wait_s": MIN_WAIT_S, "declared_noise": declared_noise,
                       "asked_until_s": asked_until_s, "arrival_window_s": ARRIVAL_WINDOW_S}
    out["wall_s"] = round(time.perf_counter() - wall, 1)
    out["cpu_s"] = round(time.process_time() - cpu, 1)
    return out


def write_answers(path: str, answers: list[Answer], first: dict, results: dict[str, JobResult],
                  surges: dict[float, float]) -> None:
    """Every answer, every job's kept first answer with its queue and real start, and each asking moment's
    surge, as JSON: what `calibrate` is given, so that other calibrations can be scored without replaying
    (`read_answers`)."""
    kept = {jid: [*answer, results[jid].queue, results[jid].start] for jid, answer in first.items()}
    with open(path, "w") as f:
        json.dump({"answers": [dataclasses.astuple(a) for a in answers], "first": kept,
                   "surges": [[at, value] for at, value in surges.items()]}, f)


def read_answers(path: str) -> tuple[list[Answer], dict[str, tuple], dict[float, float]]:
    """`write_answers`' file: the answers, job id -> (asked, earliest, latest, queue, start) of first answers, and
    asking moment -> surge."""
    with open(path) as f:
        data = json.load(f)
    return ([Answer(*row) for row in data["answers"]], {jid: tuple(row) for jid, row in data["first"].items()},
            {at: value for at, value in data.get("surges", [])})


def recalibrated(answers: list[Answer], first: dict[str, tuple], surges: dict[float, float] | None = None
                 ) -> list[Answer]:
    """The answers calibrated again from the replays' own (`calibrate` as it is now), each with the kept first
    answers known when it was asked (their jobs' starts read only up to then, as `measure` gives them) and its
    moment's surge (none where not given)."""
    kept = [Outcome(queue, asked, earliest, latest, start) for asked, earliest, latest, queue, start in first.values()
            if start is not None]
    by_moment: dict[float, list[Answer]] = defaultdict(list)
    for a in answers:
        by_moment[a.asked].append(a)
    out = []
    for at, group in sorted(by_moment.items()):
        windows = calibrate({a.job_id: (a.replay_earliest, a.replay_latest) for a in group},
                            {a.job_id: a.queue for a in group}, at, [o for o in kept if o.asked <= at],
                            (surges or {}).get(at, 1.0))
        out += [dataclasses.replace(a, earliest=windows[a.job_id][0], latest=windows[a.job_id][1]) for a in group]
    return out


# --------------------------------------------------------------------------- synthetic load


def synthetic_trace(*, teams: int = 6, hours: float = 6.0, gpus: int = 256, load: float = 1.1, seed: int = 1,
                    best_effort_share: float = 0.3) -> list[dict[str, str]]:
    """Rows of a Philly-format trace (see the module)."""
    rng = random.Random(seed)
    sizes, weights = (1, 2, 4, 8, 16), (0.6, 0.12, 0.12, 0.12, 0.04)
    mean_gpus = sum(s * w for s, w in zip(sizes, weights, strict=True))
    median_s, sigma = 600.0, 1.2
    mean_s = median_s * math.exp(sigma ** 2 / 2)
    span_s = hours * 3600
    rate = load * gpus / (mean_gpus * mean_s)          # jobs per second, all teams
    rows, n = [], 0
    for t in range(teams):
        team = f"team{t}"
        at = 0.0
        while True:
            hour = int(at // 3600)
            burst = random.Random(seed * 1000 + t * 100 + hour).choice((0.3, 0.7, 1.0, 1.3, 1.7))
            at += rng.expovariate(rate / teams * burst)
            if at >= span_s:
                break
            be = rng.random() < best_effort_share
            rows.append({"job_id": str(n), "user": team, "num_gpu": str(rng.choices(sizes, weights)[0]),
                         "submit_time": str(int(at)), "duration": str(max(10, int(rng.lognormvariate(
                             math.log(median_s), sigma)))), "best_effort": str(int(be)),
                         "job_type": "best" if be else "strict"})
            n += 1
    rows.sort(key=lambda r: (int(r["submit_time"]), int(r["job_id"])))
    return rows


def write_trace(rows: list[dict[str, str]], path: str) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["job_id", "user", "num_gpu", "submit_time", "duration",
                                               "best_effort", "job_type"])
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eta", description=__doc__.split("\n\n")[0])
    task = parser.add_mutually_exclusive_group(required=True)
    task.add_argument("--write-synthetic", metavar="FILE", help="write a synthetic trace there")
    task.add_argument("--score", metavar="FILE", help="score the answers a replay wrote (BENCH_ETA_ANSWERS) again, "
                      "calibrated as the code now does, and print the eta figures as JSON")
    parser.add_argument("--teams", type=int, default=6)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--gpus", type=int, default=256, help="the cluster the load is offered to")
    parser.add_argument("--load", type=float, default=1.1, help="offered GPU-hours over the cluster's in the span")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.score:
        print(json.dumps(eta_figures(recalibrated(*read_answers(args.score)))))
        return 0
    rows = synthetic_trace(teams=args.teams, hours=args.hours, gpus=args.gpus, load=args.load, seed=args.seed)
    write_trace(rows, args.write_synthetic)
    print(f"{args.write_synthetic}: {len(rows)} jobs, {args.teams} teams, {args.hours:g} h", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
