"""Keep a notebook alive until a time: the idle rule skips it until then.

The user gives a time of day ("18:00", the next one in their time zone) or a date and time; it may not
reach past the queue's maximum runtime from now (maxRuntime's cap), nor past the run's own deadline.
Setting and clearing are job events (the job's history) and the portal writes them to the audit log.
"""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils.translation import gettext

from billing import history_catalogue as texts
from billing.models import KeepAlive
from scheduling import kinds
from scheduling.api import Conflict, DomainError, format_duration, record_event, said, services
from scheduling.models import Job, JobState

TIME_OF_DAY = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
FIELD = "keep_alive_until"
LIVE = (JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING, JobState.PREEMPTED)


def parse_until(text: str, zone: ZoneInfo, now: datetime) -> datetime:
    """"18:00": the next 18:00 in `zone` (today, else tomorrow); or an ISO date and time (in `zone`
    without an offset)."""
    text = (text or "").strip()
    found = TIME_OF_DAY.fullmatch(text)
    if found:
        local = now.astimezone(zone)
        at = datetime.combine(local.date(), time(int(found[1]), int(found[2])), tzinfo=zone)
        return at if at > local else datetime.combine(local.date() + timedelta(days=1), at.time(), tzinfo=zone)
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise DomainError(gettext("%(text)s is not a time: give HH:MM (in your time zone) or a date and time "
                                  "such as 2026-11-30T18:00") % {"text": repr(text[:40])}, field=FIELD) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=zone)


def limit_for(job: Job, now: datetime) -> tuple[datetime | None, str]:
    """The latest a keep-alive may reach, and why: the queue's maximum runtime from now, or the run's
    own deadline if sooner."""
    most = job.queue.max_runtime_s
    cap, why = (now + timedelta(seconds=most), "queue") if most else (None, "")
    if job.deadline is not None and (cap is None or job.deadline < cap):
        cap, why = job.deadline, "deadline"
    return cap, why


@transaction.atomic
def set_keep_alive(user, job: Job, until: datetime | None, *, now: datetime, zone: ZoneInfo) -> KeepAlive | None:
    """Keep the notebook alive until `until` (None: clear it). Refused for a job that is no live notebook,
    a time not in the future, or one past its cap (with the figures)."""
    services.require_submitter(user, job.workspace)
    job = Job.objects.select_for_update().select_related("queue").get(pk=job.pk)
    kinds.kind_of(job).check_keep_alive(job, FIELD)
    if until is None:
        deleted, _ = KeepAlive.objects.filter(job=job).delete()
        if deleted:
            record_event(job, "keep_alive", reason=said(texts.KEEP_ALIVE_CLEARED, user=user.get_username()),
                         data={"until": None})
        return None
    if job.state not in LIVE:
        raise Conflict(gettext("notebook %(name)s is %(state)s: start it first") % {"name": job.name,
                                                                                   "state": job.state})
    local = until.astimezone(zone)
    if until <= now:
        raise DomainError(gettext("%(until)s is not in the future (now %(now)s)") % {
            "until": f"{local:%Y-%m-%d %H:%M %Z}", "now": f"{now.astimezone(zone):%Y-%m-%d %H:%M %Z}"}, field=FIELD)
    cap, why = limit_for(job, now)
    if cap is not None and until > cap:
        figures = {"until": f"{local:%Y-%m-%d %H:%M %Z}", "asked": format_duration(int((until - now).total_seconds())),
                   "cap": f"{cap.astimezone(zone):%Y-%m-%d %H:%M %Z}", "queue": job.queue.name,
                   "most": format_duration(job.queue.max_runtime_s or 0)}
        if why == "queue":
            message = gettext("keeping it alive until %(until)s is %(asked)s from now; queue '%(queue)s' allows at "
                              "most %(most)s (until %(cap)s)") % figures
        else:
            message = gettext("keeping it alive until %(until)s reaches past its run's maximum runtime, which ends "
                              "at %(cap)s") % figures
        raise DomainError(message, field=FIELD)
    kept, _ = KeepAlive.objects.update_or_create(job=job, defaults={"until": until, "set_by": user, "set_at": now})
    record_event(job, "keep_alive", reason=said(texts.KEEP_ALIVE_SET, until=f"{local:%Y-%m-%d %H:%M %Z}",
                                                user=user.get_username()),
                 data={"until": until.isoformat()})
    return kept


def kept_alive(job_ids, now: datetime) -> dict[int, datetime]:
    """Of these jobs, those kept alive now, and until when."""
    return dict(KeepAlive.objects.filter(job_id__in=list(job_ids), until__gt=now).values_list("job_id", "until"))


def keep_alive_of(job: Job, now: datetime) -> datetime | None:
    return kept_alive([job.pk], now).get(job.pk)
