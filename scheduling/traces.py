"""Job traces for replays: reading the Philly format, turning trace jobs into the replay engine's jobs,
and the figures of a replay per group of jobs (a team, a queue).

Pure Python, no Django: `bench/replay.py` and the console's capacity planner share it.

Philly format (Microsoft's Philly trace as the MIX1 file carries it): a CSV with a header naming at
least `user` (the team), `num_gpu`, `submit_time` and `duration` (seconds), and either `best_effort`
(1 or 0) or `job_type` (`best`, `strict` or `soft`); `job_id` names a job (else its line number). A `soft`
job has a deadline: the first entry of its `expect_time_list` (entries separated by `-`), in seconds from
its submission. Other columns are ignored.

`soften` turns a share of a trace's strict jobs into deadline jobs (`python -m bench.traces --soften`).
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from scheduling.core.replay import JobResult

PHILLY_REQUIRED = ("user", "num_gpu", "submit_time", "duration")
MAX_TRACE_GPUS = 4096          # one job's GPUs; more is a broken line, not a job
MAX_TRACE_SECONDS = 10 * 365 * 86400.0


class TraceError(ValueError):
    """A trace that cannot be read; the message names the line and the column."""


@dataclass(frozen=True)
class TraceJob:
    id: str
    team: str
    gpus: int
    submit: float              # seconds from the trace's origin
    duration: float            # seconds of work
    best_effort: bool = False
    deadline: float | None = None   # a soft job's: seconds from its submission to when it must be done

    @property
    def kind(self) -> str:
        """best, soft (a deadline job) or strict."""
        return "best" if self.best_effort else "soft" if self.deadline is not None else "strict"


def _number(text: str, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"line {line}: {column} is not a number: {text[:40]!r}") from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(f"line {line}: {column} must be a finite number >= 0, got {text[:40]!r}")
    return value


def _kind(row: dict[str, str], line: int) -> tuple[bool, float | None]:
    """(best effort, deadline in seconds from submission) of a row."""
    job_type = (row.get("job_type") or "").strip().lower()
    if job_type == "soft":
        first = (row.get("expect_time_list") or "").strip().split("-")[0].strip()
        if not first:
            raise TraceError(f"line {line}: a soft job needs an expect_time_list (its deadline)")
        deadline = _number(first, line, "expect_time_list")
        if deadline <= 0:
            raise TraceError(f"line {line}: expect_time_list must be > 0 seconds")
        return False, deadline
    flag = (row.get("best_effort") or "").strip()
    if flag:
        if flag not in ("0", "1"):
            raise TraceError(f"line {line}: best_effort must be 0 or 1, got {flag[:20]!r}")
        return flag == "1", None
    if job_type not in ("best", "strict"):
        raise TraceError(f"line {line}: job_type must be best, strict or soft, got {job_type[:20]!r}")
    return job_type == "best", None


def read_philly(lines: Iterable[str], *, max_jobs: int | None = None) -> list[TraceJob]:
    """The trace's jobs in submission order (then id). Raises TraceError on the first bad line."""
    reader = csv.DictReader(lines)
    columns = set(reader.fieldnames or ())
    missing = [c for c in PHILLY_REQUIRED if c not in columns]
    if missing:
        raise TraceError(f"the header lacks column(s) {', '.join(missing)} (a Philly trace names "
                         f"{', '.join(PHILLY_REQUIRED)} and best_effort or job_type)")
    if not ({"best_effort", "job_type"} & columns):
        raise TraceError("the header needs a best_effort or a job_type column")
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    try:
        for row in reader:
            line = reader.line_num
            if None in row:
                raise TraceError(f"line {line}: more fields than the header names")
            if max_jobs is not None and len(jobs) >= max_jobs:
                raise TraceError(f"more than {max_jobs} jobs")
            job_id = (row.get("job_id") or "").strip() or str(line)
            if job_id in seen:
                raise TraceError(f"line {line}: job_id {job_id[:40]!r} appears twice")
            seen.add(job_id)
            team = (row.get("user") or "").strip()
            if not team:
                raise TraceError(f"line {line}: user (the team) is empty")
            gpus = _number((row.get("num_gpu") or "").strip(), line, "num_gpu")
            if gpus != int(gpus) or gpus > MAX_TRACE_GPUS:
                raise TraceError(f"line {line}: num_gpu must be a whole number up to {MAX_TRACE_GPUS}")
            submit = _number((row.get("submit_time") or "").strip(), line, "submit_time")
            duration = _number((row.get("duration") or "").strip(), line, "duration")
            if submit > MAX_TRACE_SECONDS or duration > MAX_TRACE_SECONDS:
                raise TraceError(f"line {line}: submit_time and duration must be under ten years of seconds")
            best_effort, deadline = _kind(row, line)
            if deadline is not None and deadline > MAX_TRACE_SECONDS:
                raise TraceError(f"line {line}: expect_time_list must be under ten years of seconds")
            jobs.append(TraceJob(job_id[:64], team[:64], int(gpus), submit, duration, best_effort, deadline))
    except csv.Error as error:
        raise TraceError(f"line {reader.line_num}: not CSV: {error}") from None
    jobs.sort(key=lambda j: (j.submit, j.id))
    return jobs


def read_philly_file(path: str | Path) -> list[TraceJob]:
    with open(path, newline="", encoding="utf-8") as f:
        return read_philly(f)


def deadline_ratios(rows: list[dict[str, str]]) -> list[float]:
    """What soft jobs' deadlines are, as multiples of their run times: of the trace's soft jobs, or, when it
    has none, of its strict jobs' own `expect_time_list` (the Philly-derived traces give every job one)."""
    def ratios(kind: str) -> list[float]:
        out = []
        for row in rows:
            first = (row.get("expect_time_list") or "").strip().split("-")[0].strip()
            duration = float(row.get("duration") or 0)
            if (row.get("job_type") or "").strip().lower() == kind and first and duration > 0:
                out.append(float(first) / duration)
        return out

    return ratios("soft") or ratios("strict")


def soften(rows: list[dict[str, str]], fraction: float, seed: int) -> list[dict[str, str]]:
    """A Philly trace's rows (as csv.DictReader reads them) with `fraction` of its strict jobs made soft:
    which ones, and each one's deadline (its run time times a ratio drawn from `deadline_ratios`), drawn
    with `seed`. The same rows, fraction and seed always give the same trace."""
    if not 0 <= fraction <= 1:
        raise TraceError(f"the fraction to soften must be within 0..1, got {fraction}")
    if "job_type" not in (rows[0] if rows else {}):
        raise TraceError("softening needs a job_type column")
    strict = [i for i, row in enumerate(rows) if (row.get("job_type") or "").strip().lower() == "strict"
              and (row.get("best_effort") or "0").strip() != "1"]
    pool = sorted(deadline_ratios(rows))
    if strict and fraction and not pool:
        raise TraceError("the trace has no expect_time_list to draw deadlines like")
    rng = random.Random(seed)
    chosen = sorted(rng.sample(strict, round(fraction * len(strict))))
    out = [dict(row) for row in rows]
    for i in chosen:
        row = out[i]
        ratio = pool[rng.randrange(len(pool))]
        row["job_type"] = "soft"
        row["expect_time_list"] = str(max(1, math.ceil(float(row["duration"]) * ratio)))
    return out


def gang(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """A job of `gpus` GPUs as (GPUs per replica, replicas): on one node when it fits, else a gang of
    the fewest identical replicas that each fit a node (16 on 8-GPU nodes: 2 x 8; 12: 2 x 6)."""
    if gpus <= gpus_per_node:
        return gpus, 1
    per = next(d for d in range(gpus_per_node, 0, -1) if gpus % d == 0)
    return per, gpus // per


def span(jobs: Iterable[TraceJob]) -> tuple[float, float]:
    """(origin, span): the first submission, and how long the trace lasts were every job to start the
    moment it is submitted (to its last end)."""
    jobs = list(jobs)
    if not jobs:
        return 0.0, 0.0
    origin = min(j.submit for j in jobs)
    return origin, max(j.submit + j.duration for j in jobs) - origin


def peak_demand(jobs: Iterable[TraceJob]) -> int:
    """The most GPUs the trace asks for at one moment, every job running from its submission."""
    events = []
    for j in jobs:
        if j.gpus and j.duration > 0:
            events += [(j.submit, j.gpus), (j.submit + j.duration, -j.gpus)]
    events.sort(key=lambda e: (e[0], e[1]))     # an end before a start at the same second
    peak = now = 0
    for _, delta in events:
        now += delta
        peak = max(peak, now)
    return peak


# --------------------------------------------------------------------------- figures


def percentile(values: list[float], p: float) -> float | None:
    """Nearest rank: the smallest value with at least p % of the values at or below it (None: no values;
    inf when it falls on a job that never started)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def late_allowed(count: int, p: float = 95) -> int:
    """How many of `count` values may exceed a bound while the p-th percentile stays within it."""
    return count - math.ceil(p / 100 * count) if count else 0


@dataclass
class Figures:
    """One group's figures. Waits and completion times (submission to end) in seconds, of the jobs
    that count for the wait target (`strict`); best-effort jobs' completion apart. GPU-hours are what
    the jobs held: their work plus the work preemptions made them do again."""

    jobs: int = 0
    strict_jobs: int = 0
    best_effort_jobs: int = 0
    unfinished: int = 0
    never_started: int = 0
    wait_p50_s: float | None = None
    wait_p95_s: float | None = None
    jct_p50_s: float | None = None
    jct_p95_s: float | None = None
    capacity_gpus: float = 0.0
    gpu_hours: float = 0.0
    utilisation: float | None = None         # GPU-hours held over capacity x makespan
    makespan_s: float = 0.0                  # first submission to last end
    preemptions: int = 0
    lost_gpu_hours: float = 0.0
    best_effort_jct_p50_s: float | None = None
    best_effort_jct_p95_s: float | None = None
    best_effort_done_s: float | None = None  # the last best-effort end, from the trace's origin
    deadline_jobs: int = 0
    deadline_met: int = 0                    # deadline jobs done by their deadlines
    deadline_met_share: float | None = None

    def as_dict(self) -> dict:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = None if not math.isfinite(value) else round(value, 4)
        return out


def figures(results: Iterable[JobResult], gpus: Mapping[str, float], durations: Mapping[str, float], *,
            best_effort: Iterable[str] = (), capacity_gpus: float = 0.0, origin: float = 0.0,
            deadlines: Mapping[str, float] | None = None) -> Figures:
    """Figures of a group of replayed jobs. `gpus`: each job's GPUs; `durations`: its seconds of work;
    `deadlines`: the deadline jobs' deadlines, seconds from submission (their waits count for no target:
    whether they end by their deadline does)."""
    be = set(best_effort)
    out = Figures(capacity_gpus=capacity_gpus)
    waits, jcts, be_jcts = [], [], []
    first_submit, last_end = math.inf, -math.inf
    held = lost = 0.0
    soft = dict(deadlines or {})
    for r in results:
        out.jobs += 1
        first_submit = min(first_submit, r.submit_time)
        is_be = r.id in be
        deadline = soft.get(r.id)
        out.best_effort_jobs += is_be
        out.strict_jobs += not is_be and deadline is None
        out.preemptions += r.evictions
        lost += r.lost_s * gpus[r.id]
        if r.start is None:
            out.never_started += 1
        if r.end is None:
            out.unfinished += 1
            jct = math.inf
        else:
            jct = r.end - r.submit_time
            last_end = max(last_end, r.end)
            held += (durations[r.id] + r.lost_s) * gpus[r.id]
        if deadline is not None:
            out.deadline_jobs += 1
            out.deadline_met += r.end is not None and r.end <= r.submit_time + deadline
        elif is_be:
            be_jcts.append(jct)
            if r.end is not None:
                out.best_effort_done_s = max(out.best_effort_done_s or 0.0, r.end - origin)
            else:
                out.best_effort_done_s = math.inf
        else:
            waits.append(math.inf if r.wait_s is None else r.wait_s)
            jcts.append(jct)
    out.wait_p50_s, out.wait_p95_s = percentile(waits, 50), percentile(waits, 95)
    out.jct_p50_s, out.jct_p95_s = percentile(jcts, 50), percentile(jcts, 95)
    out.best_effort_jct_p50_s, out.best_effort_jct_p95_s = percentile(be_jcts, 50), percentile(be_jcts, 95)
    if out.deadline_jobs:
        out.deadline_met_share = out.deadline_met / out.deadline_jobs
    out.gpu_hours = held / 3600
    out.lost_gpu_hours = lost / 3600
    if out.jobs and last_end > -math.inf:
        out.makespan_s = last_end - first_submit
    if capacity_gpus and out.makespan_s:
        out.utilisation = held / (capacity_gpus * out.makespan_s)
    return out


__all__ = ["Figures", "TraceError", "TraceJob", "figures", "gang", "late_allowed", "peak_demand", "percentile",
           "read_philly", "read_philly_file", "soften", "span"]
