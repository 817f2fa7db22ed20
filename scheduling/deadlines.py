"""Work with a deadline (`completeBy` / `completeWithin`): its checks at submit, its latest start, and the
report that it can no longer be met.

- At submit (`check_submit`): the deadline must leave room for the job's expectedDuration and one scheduling
  interval, and be at most MAX_AHEAD_S ahead; each refusal gives its figures.
- Latest start (`latest_start_for`): the deadline, less the remaining expected run time, less a safety margin:
  settings.DEADLINE_SAFETY_MARGIN of the run time, widened by the queue's measured run-time spread (the high
  factor of `forecast.runtime_factors`, a 1.3 widens it by 0.3 of the run time). Stored on `Job.latest_start`
  and kept current each cycle (`refresh`), before the snapshot reads it into the core's `Job.latest_start`.
- Unmeetable (`report_unmeetable`, after each cycle's decisions): a pending job past its latest start, or an
  active one whose expected finish (its queue's high estimate) is past the deadline, gets a `deadline_missed`
  event at once (its notification follows, portal/notifications) and `Job.deadline_missed`, shown on its page.
  Reported once per job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max, Q
from django.utils.translation import gettext as _

from scheduling import forecast
from scheduling import history_catalogue as texts
from scheduling.history_texts import Said, said
from scheduling.models import ACTIVE_STATES, FINAL_STATES, Job, JobState
from scheduling.spec.deadline import MAX_AHEAD_S, parse_instant
from scheduling.spec.model import JobSpec, SpecError, SpecIssue
from scheduling.spec.units import format_duration

MISSED_EVENT = "deadline_missed"


def complete_by(spec: JobSpec, submitted: datetime) -> datetime | None:
    """The instant a spec's deadline names, for a job submitted at `submitted`."""
    deadline = spec.deadline
    if deadline is None:
        return None
    if deadline.at is not None:
        return parse_instant(deadline.at)
    return submitted + timedelta(seconds=deadline.within_s or 0)


def _field(spec: JobSpec) -> str:
    return "completeBy" if spec.deadline is not None and spec.deadline.at is not None else "completeWithin"


def check_submit(spec: JobSpec, now: datetime) -> None:
    """SpecError, with the figures, for a deadline too close for the job's run or too far ahead."""
    when = complete_by(spec, now)
    if when is None:
        return
    field = _field(spec)
    left = (when - now).total_seconds()
    interval = int(settings.SCHEDULER_INTERVAL_S + 0.999)
    needed = spec.expected_duration_s + interval
    if left < needed:
        message = _("%(field)s leaves %(left)s, less than expectedDuration %(duration)s plus one scheduling "
                    "interval %(interval)s (%(needed)s)") % {
            "field": field, "left": format_duration(max(int(left), 0)), "duration": format_duration(
                spec.expected_duration_s), "interval": format_duration(interval), "needed": format_duration(needed)}
        raise SpecError([SpecIssue(None, None, field, message)])
    if left > MAX_AHEAD_S:
        message = _("%(field)s is %(ahead)s ahead, more than %(most)s") % {
            "field": field, "ahead": format_duration(int(left)), "most": format_duration(MAX_AHEAD_S)}
        raise SpecError([SpecIssue(None, None, field, message)])


def margin_s(run_s: float, high: float = 1.0) -> float:
    """The safety margin of a run of `run_s` seconds in a queue whose run times spread up to `high` x."""
    return run_s * (settings.DEADLINE_SAFETY_MARGIN + max(high - 1.0, 0.0))


def latest_start_for(deadline: datetime, remaining_s: float, high: float = 1.0) -> datetime:
    return deadline - timedelta(seconds=remaining_s + margin_s(remaining_s, high))


def latest_start_at_submit(spec: JobSpec, complete: datetime | None, spread: Callable[[], float]) -> datetime | None:
    """A new job's latest start, with its queue's run-time spread (`spread()`, read only for a deadline job)."""
    if complete is None:
        return None
    return latest_start_for(complete, spec.expected_duration_s, spread())


def runtime_spread(queue_name: str) -> float:
    """The queue's run-time spread as the forecast reads it now (the high factor of its run times)."""
    return forecast.runtime_factors([queue_name])[queue_name][1]


Factors = dict[str, tuple[float, float]]   # queue -> (low, high) run-time factors, as `forecast.runtime_factors`


def runtime_factors(queues: Iterable[str], known: Factors | None = None) -> Factors:
    """The queues' run-time factors. With `known` (a cycle's, shared by `refresh` and `report_unmeetable`), only
    the queues it lacks are read, and kept in it: the finished jobs they come from do not change in between."""
    if known is None:
        return forecast.runtime_factors(queues)
    missing = set(queues) - known.keys()
    if missing:
        known.update(forecast.runtime_factors(missing))
    return known


def refresh(now: datetime, factors: Factors | None = None) -> int:
    """Pending deadline jobs' latest start, as their queues' spread reads now; returns how many changed.
    `factors`: the cycle's run-time factors, read here where missing (`runtime_factors`)."""
    jobs = list(Job.objects.filter(state=JobState.PENDING, complete_by__isnull=False).select_related("queue")
                .only("pk", "complete_by", "latest_start", "expected_duration_s", "queue__name"))
    if not jobs:
        return 0
    factors = runtime_factors((j.queue.name for j in jobs), factors)
    changed = []
    for job in jobs:
        latest = latest_start_for(job.complete_by, job.expected_duration_s, factors[job.queue.name][1])
        if latest != job.latest_start:
            job.latest_start = latest
            changed.append(job)
    Job.objects.bulk_update(changed, ["latest_start"])
    return len(changed)


def _at(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M %Z}"


def report_unmeetable(now: datetime, factors: Factors | None = None) -> list[tuple[Job, str, Said, None]]:
    """Deadline jobs found unmeetable now, each marked; their events, for the caller to record (reported once).
    `factors`: the cycle's run-time factors, as `refresh` read them."""
    open_jobs = Job.objects.filter(complete_by__isnull=False, deadline_missed__isnull=True)
    late = list(open_jobs.filter(state=JobState.PENDING, latest_start__lt=now))
    active = list(open_jobs.filter(state__in=ACTIVE_STATES, started__isnull=False).select_related("queue")
                  .annotate(scale=Max("replicas__clock_scale")))
    factors = runtime_factors((j.queue.name for j in active), factors) if active else {}
    items = [(job, MISSED_EVENT, said(texts.DEADLINE_NOT_STARTED, deadline=_at(job.complete_by),
                                      latest_start=_at(job.latest_start)), None) for job in late]
    for job in active:
        finish = expected_finish(job, factors[job.queue.name][1], job.scale)
        if finish > job.complete_by:
            late.append(job)
            items.append((job, MISSED_EVENT, said(texts.DEADLINE_FINISHES_LATE, deadline=_at(job.complete_by),
                                                  finish=_at(finish)), None))
    for job in late:
        job.deadline_missed = now
    Job.objects.bulk_update(late, ["deadline_missed"])
    return items


def expected_finish(job: Job, high: float, scale: float | None) -> datetime:
    """An active job's finish on its queue's high run-time estimate (platform seconds over the clock scale)."""
    return job.started + timedelta(seconds=job.expected_duration_s * high / (scale or 1.0))


# --------------------------------------------------------------------------- read


@dataclass(frozen=True)
class DeadlineView:
    """What a page shows of a deadline job: the deadline, the latest start, the phase and the slack (seconds
    from now to the latest start; negative: past it)."""

    complete_by: datetime
    latest_start: datetime | None
    phase: str
    slack_s: float | None
    missed: datetime | None


def phase_text(phase: str) -> str:
    """The phase as the job page says it, in the reader's language."""
    return {
        "gaps": _("waits for idle GPUs until its latest start, then starts for sure"),
        "strict": _("past its latest start: scheduled as strict work"),
        "running": _("running"),
        "done": _("done"),
        "missed": _("can no longer finish by its deadline"),
    }[phase]


def phase_of(job: Job, now: datetime) -> str:
    if job.deadline_missed is not None:
        return "missed"
    if job.state in FINAL_STATES:
        return "done"
    if job.state in ACTIVE_STATES:
        return "running"
    if job.latest_start is not None and now >= job.latest_start:
        return "strict"
    return "gaps"


def view(job: Job, now: datetime) -> DeadlineView | None:
    if job.complete_by is None:
        return None
    slack = (job.latest_start - now).total_seconds() if job.latest_start is not None else None
    return DeadlineView(job.complete_by, job.latest_start, phase_of(job, now), slack, job.deadline_missed)


AT_RISK_S = 3600  # a pending deadline job this close to its latest start is at risk on the operator's dashboard
LISTED = 100


@dataclass(frozen=True)
class DeadlineRow:
    """One unfinished deadline job on a list: the job, its view, its slack as text and its phase's words."""

    job: Job
    view: DeadlineView
    slack: str
    phase: str


def _rows(jobs, now: datetime) -> list[DeadlineRow]:
    rows = []
    for job in jobs:
        seen = view(job, now)
        slack = "" if seen.slack_s is None else (
            format_duration(int(seen.slack_s)) if seen.slack_s >= 0 else "-" + format_duration(int(-seen.slack_s)))
        rows.append(DeadlineRow(job, seen, slack, phase_text(seen.phase)))
    return sorted(rows, key=lambda r: (r.view.slack_s is None, r.view.slack_s or 0.0, r.job.pk))


def _open_deadline_jobs():
    return (Job.objects.filter(complete_by__isnull=False).exclude(state__in=FINAL_STATES)
            .select_related("workspace", "queue"))


def by_slack(workspace, now: datetime) -> list[DeadlineRow]:
    """A workspace's unfinished deadline jobs, least slack first (one query)."""
    return _rows(_open_deadline_jobs().filter(workspace=workspace).order_by("latest_start", "pk")[:LISTED], now)


def at_risk(now: datetime) -> list[DeadlineRow]:
    """Every workspace's deadline jobs at risk (the operator's): reported unmeetable, or still waiting with less
    than AT_RISK_S to their latest start (one query)."""
    soon = now + timedelta(seconds=AT_RISK_S)
    risky = _open_deadline_jobs().filter(
        Q(deadline_missed__isnull=False) | Q(state=JobState.PENDING, latest_start__lte=soon))
    return _rows(risky.order_by("latest_start", "pk")[:LISTED], now)
