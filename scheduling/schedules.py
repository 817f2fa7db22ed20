"""Schedules: a spec with `schedule:` stored as a Schedule, whose runs are ordinary jobs made at its fire times.

- Fire times come from `scheduling.schedule_times` (the cron line in the schedule's zone, DST-correct).
- `fire_due_schedules` (a Celery beat task, billing.tasks.fire_schedules) reads every due schedule in one query,
  the unfinished runs of all of them in one more, records the fire times it skips in one insert and moves every
  schedule's next fire time in one update: its queries grow with the runs it makes, never with the schedules.
- Each fire time is recorded once (`ScheduleFiring`, unique per schedule and time): a second worker firing the
  same schedule finds the row and makes nothing.
- Concurrency: Forbid skips a fire time while a run is unfinished, Replace cancels the unfinished runs first,
  Allow lets runs overlap. A run triggered by hand follows the same rule (Forbid refuses it with a conflict).
- Missed fire times (the platform was down): one that is less than an interval late (the time to the next fire
  time after it) still runs, once; the older ones are recorded as missed. While suspended, nothing fires and
  nothing is caught up on resume.
- keepLast: the schedule lists its unfinished runs and its last `keep_last` finished ones; older runs stay jobs
  of the workspace (its job list, the ledger), only the schedule stops listing them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from scheduling import clock, services
from scheduling.errors import Conflict, DomainError
from scheduling.models import FINAL_STATES, Concurrency, FiringOutcome, Job, Schedule, ScheduleFiring
from scheduling.schedule_times import fires_between, interval_after, next_fire, next_fires
from scheduling.spec import JobSpec, SpecError, SpecIssue, spec_to_dict, spec_to_yaml

# How many due schedules one call fires (the next call takes the rest), and how many skipped fire times of one
# schedule it records after a long outage (older ones are not listed).
FIRE_BATCH = 500
MAX_MISSED_RECORDED = 20
DETAIL_MAX = 2000

# Why a run may not be made for a workspace now (billing's budget block), or None; asked per run.
Refusal = Callable[[Any], str | None]


@dataclass
class FiringReport:
    due: int = 0
    started: list[int] = field(default_factory=list)  # the jobs made
    skipped: int = 0
    missed: int = 0
    refused: int = 0


def _zone(parsed: JobSpec) -> str:
    return parsed.schedule.time_zone or settings.TIME_ZONE


@transaction.atomic
def create_schedule(
    *, user, workspace, spec: str | bytes | Mapping[str, Any], parsed: JobSpec, quote: dict | None = None
) -> Schedule:
    """Store a spec that has a `schedule` block as a Schedule (its runs are made at its fire times)."""
    services.require_submitter(user, workspace)
    if parsed.schedule is None:
        raise SpecError([SpecIssue(None, None, "schedule", _("schedule: the spec has no schedule block"))])
    now, run_spec = clock.now(), replace(parsed, schedule=None)
    # what was submitted, its schedule block included (a JSON object is written as YAML)
    text = (
        spec
        if isinstance(spec, str)
        else (spec.decode() if isinstance(spec, bytes) else spec_to_yaml(parsed))
    )
    taken = Conflict(
        _(
            "workspace %(workspace)s already has a schedule named %(name)s: delete it or name this one differently"
        )
        % {"workspace": workspace.slug, "name": parsed.name},
        field="name",
    )
    if Schedule.objects.filter(workspace=workspace, name=parsed.name).exists():
        raise taken
    try:
        with transaction.atomic():  # two makers of the same name at once: the second is told, as above
            return _create(workspace, user, parsed, text, run_spec, quote, now)
    except IntegrityError:
        raise taken from None


def _create(
    workspace, user, parsed: JobSpec, text: str, run_spec: JobSpec, quote: dict | None, now: datetime
):
    plan, zone = parsed.schedule, _zone(parsed)
    return Schedule.objects.create(
        workspace=workspace,
        name=parsed.name,
        created_by=user,
        cron=plan.cron,
        time_zone=zone,
        concurrency=plan.concurrency,
        keep_last=plan.keep_last,
        suspended=plan.suspend,
        spec_text=text,
        spec=spec_to_dict(run_spec),
        quote=quote,
        next_fire_at=None if plan.suspend else next_fire(plan.cron, zone, now),
    )


def _locked(schedule: Schedule) -> Schedule:
    # of self: PostgreSQL refuses FOR UPDATE on the nullable side of an outer join (created_by)
    return (
        Schedule.objects.select_for_update(of=("self",))
        .select_related("workspace", "created_by")
        .get(pk=schedule.pk)
    )


@transaction.atomic
def suspend_schedule(*, user, schedule: Schedule) -> Schedule:
    """No runs until resumed (runs already made go on)."""
    services.require_submitter(user, schedule.workspace)
    schedule = _locked(schedule)
    schedule.suspended, schedule.next_fire_at = True, None
    schedule.save(update_fields=["suspended", "next_fire_at"])
    return schedule


@transaction.atomic
def resume_schedule(*, user, schedule: Schedule) -> Schedule:
    """Fire again from now on: the fire times that passed while suspended are not caught up."""
    services.require_submitter(user, schedule.workspace)
    schedule = _locked(schedule)
    schedule.suspended = False
    schedule.next_fire_at = next_fire(schedule.cron, schedule.time_zone, clock.now())
    schedule.save(update_fields=["suspended", "next_fire_at"])
    return schedule


@transaction.atomic
def delete_schedule(*, user, schedule: Schedule) -> None:
    """The schedule and its fire times go; its runs stay jobs of the workspace (unlinked), unfinished ones run on."""
    services.require_submitter(user, schedule.workspace)
    _locked(schedule).delete()


@transaction.atomic
def trigger_schedule(*, user, schedule: Schedule) -> Job:
    """A run now, submitted by `user`, outside the fire times (its concurrency applies: Forbid refuses while a
    run is unfinished, Replace cancels it)."""
    services.require_submitter(user, schedule.workspace)
    schedule = _locked(schedule)
    unfinished = list(
        schedule.runs.exclude(state__in=FINAL_STATES).order_by("id").values_list("id", flat=True)
    )
    if unfinished and schedule.concurrency == Concurrency.FORBID:
        raise Conflict(
            _(
                "run #%(job)s of schedule %(name)s is unfinished and its concurrency is Forbid: wait for "
                "it, or cancel it first"
            )
            % {"job": unfinished[-1], "name": schedule.name},
            field="schedule",
        )
    return _make_run(schedule, user, unfinished)


def _make_run(schedule: Schedule, user, unfinished: list[int]) -> Job:
    """Submit the schedule's spec as a job of its workspace (read again: the queues, secrets and volumes it names
    may have changed), with the quote option the schedule froze. Raises DomainError (nothing made)."""
    if schedule.concurrency == Concurrency.REPLACE:
        for job in Job.objects.filter(pk__in=unfinished).exclude(state__in=FINAL_STATES):
            services.cancel_replaced_run(job, schedule.name)
    if user is None:
        raise Conflict(
            _("the schedule's owner is gone: make it again as a member of the workspace"), field="schedule"
        )
    job = services.submit_job(
        user=user, workspace=schedule.workspace, spec=schedule.spec, quote=schedule.quote
    )
    Job.objects.filter(pk=job.pk).update(schedule=schedule)
    job.schedule = schedule
    return job


def fire_due_schedules(now: datetime | None = None, *, refuse: Refusal | None = None) -> FiringReport:
    """Make the runs of every schedule whose next fire time has come (see the module's notes). `refuse` says why a
    workspace may not have a new run now (the budget), recorded as the fire time's refusal."""
    now = now or clock.now()
    report = FiringReport()
    with transaction.atomic():
        # skip_locked: a second worker firing at the same time takes the other schedules, not these
        due = list(
            Schedule.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(suspended=False, next_fire_at__lte=now)
            .select_related("workspace", "created_by")
            .order_by("next_fire_at", "id")[:FIRE_BATCH]
        )
        if not due:
            return report
        report.due = len(due)
        unfinished: dict[int, list[int]] = {}
        for schedule_id, job_id in (
            Job.objects.filter(schedule__in=due)
            .exclude(state__in=FINAL_STATES)
            .order_by("id")
            .values_list("schedule_id", "id")
        ):
            unfinished.setdefault(schedule_id, []).append(job_id)
        skipped: list[ScheduleFiring] = []
        to_run: list[tuple[Schedule, datetime]] = []
        for schedule in due:
            latest, *older = fires_between(
                schedule.cron, schedule.time_zone, schedule.next_fire_at, now, MAX_MISSED_RECORDED + 1
            ) or [None]
            skipped += [
                ScheduleFiring(schedule=schedule, fire_time=at, outcome=FiringOutcome.MISSED, recorded=now)
                for at in older
            ]
            if latest is None:
                pass
            elif now - latest >= interval_after(schedule.cron, schedule.time_zone, latest):
                skipped.append(
                    ScheduleFiring(
                        schedule=schedule, fire_time=latest, outcome=FiringOutcome.MISSED, recorded=now
                    )
                )
            elif unfinished.get(schedule.pk) and schedule.concurrency == Concurrency.FORBID:
                skipped.append(
                    ScheduleFiring(
                        schedule=schedule,
                        fire_time=latest,
                        recorded=now,
                        outcome=FiringOutcome.SKIPPED_RUNNING,
                        job_id=unfinished[schedule.pk][-1],
                    )
                )
            else:
                to_run.append((schedule, latest))
            schedule.next_fire_at = next_fire(schedule.cron, schedule.time_zone, now)
        # a fire time another worker recorded already stays as it recorded it
        ScheduleFiring.objects.bulk_create(skipped, ignore_conflicts=True)
        report.missed = sum(f.outcome == FiringOutcome.MISSED for f in skipped)
        report.skipped = len(skipped) - report.missed
        Schedule.objects.bulk_update(due, ["next_fire_at"])
        for schedule, at in to_run:
            _fire(schedule, at, unfinished.get(schedule.pk, []), refuse, now, report)
    return report


def _fire(
    schedule: Schedule,
    at: datetime,
    unfinished: list[int],
    refuse: Refusal | None,
    now: datetime,
    report: FiringReport,
) -> None:
    try:
        with transaction.atomic():
            firing = ScheduleFiring.objects.create(
                schedule=schedule, fire_time=at, outcome=FiringOutcome.STARTED, recorded=now
            )
    except IntegrityError:
        return  # another worker made this run
    try:
        with transaction.atomic():
            if refuse is not None and (reason := refuse(schedule.workspace)):
                raise Conflict(reason)
            firing.job = _make_run(schedule, schedule.created_by, unfinished)
        firing.save(update_fields=["job"])
        report.started.append(firing.job.pk)
    except DomainError as exc:  # the run is not made; the schedule goes on with its next fire time
        firing.outcome, firing.detail = FiringOutcome.REFUSED, str(exc)[:DETAIL_MAX]
        firing.save(update_fields=["outcome", "detail"])
        report.refused += 1


# --------------------------------------------------------------------------- reads


def schedules_in(workspaces, *, workspace=None):
    """Schedules of the given workspaces (the caller's, as the portal scopes them)."""
    rows = Schedule.objects.filter(workspace__in=workspaces).select_related("workspace", "created_by")
    return rows.filter(workspace=workspace) if workspace is not None else rows


def runs_of(schedule: Schedule) -> list[Job]:
    """What the schedule lists: its unfinished runs, then its last `keep_last` finished ones, newest first."""
    base = Job.objects.filter(schedule=schedule).select_related("queue")
    running = list(base.exclude(state__in=FINAL_STATES).order_by("-created", "-id"))
    finished = list(base.filter(state__in=FINAL_STATES).order_by("-finished", "-id")[: schedule.keep_last])
    return running + finished


def firings_of(schedule: Schedule, limit: int = 20) -> list[ScheduleFiring]:
    """The schedule's latest fire times and what became of each."""
    return list(schedule.firings.order_by("-fire_time", "-id")[:limit])


def upcoming(schedule: Schedule, count: int = 3, now: datetime | None = None) -> list[datetime]:
    """The schedule's next fire times (UTC); none while suspended."""
    if schedule.suspended:
        return []
    return next_fires(schedule.cron, schedule.time_zone, now or clock.now(), count)
