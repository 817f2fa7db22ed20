"""A spec's `schedule` block: a cron line in a time zone that makes runs of the job (scheduling.schedules).

    schedule: {cron: "0 2 * * *", timeZone: Asia/Shanghai, concurrency: Forbid, keepLast: 10, suspend: false}

Read from the loaded document before the job itself is read (the job's readers never see the block), with
errors at its fields' lines and columns. Pure: no Django model.
"""

from __future__ import annotations

import zoneinfo
from typing import Any

from croniter import croniter
from django.utils.translation import gettext as _

from scheduling.spec.cluster import did_you_mean
from scheduling.spec.model import ALLOW, DEFAULT_KEEP_LAST, FORBID, REPLACE, ScheduleSpec
from scheduling.spec.read import Reader

SCHEDULE_KEY = "schedule"
SCHEDULE_KEYS = ("cron", "timeZone", "concurrency", "keepLast", "suspend")
CONCURRENCY = (FORBID, REPLACE, ALLOW)
MAX_KEEP_LAST = 100
# Five fields (minute hour day month weekday) or a nickname; croniter's optional seconds field is not cron's.
CRON_NICKNAMES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def cron_problem(cron: str) -> str | None:
    """Why `cron` is not a cron line (in the active language), or None."""
    words = cron.split()
    if len(words) == 1 and words[0].startswith("@"):
        if words[0].lower() in CRON_NICKNAMES:
            return None
        return _("%(value)s is not one of %(choices)s") % {
            "value": words[0],
            "choices": ", ".join(CRON_NICKNAMES),
        }
    if len(words) != 5:
        return _(
            "has %(count)s fields; a cron line has five: minute hour day-of-month month day-of-week "
            '(e.g. "0 2 * * *")'
        ) % {"count": len(words)}
    if not croniter.is_valid(" ".join(words)):
        return _(
            "is not a valid cron line: each field is a number, a range, a list, * or */step within "
            "minute 0-59, hour 0-23, day 1-31, month 1-12, day-of-week 0-7"
        )
    return None


def zone_problem(name: str) -> str | None:
    """Why `name` is not an IANA time zone (in the active language), or None."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        hint = did_you_mean(name, zoneinfo.available_timezones())
        return _("is not a time zone such as Asia/Shanghai or Europe/Berlin%(hint)s") % {"hint": hint}
    return None


def read_schedule(r: Reader, value: Any) -> ScheduleSpec | None:
    """The `schedule` mapping (its problems recorded on `r`), or None when it has any."""
    path = (SCHEDULE_KEY,)
    block = r.mapping(value, path, _("cron, timeZone, concurrency, keepLast and suspend"))
    if block is None:
        return None
    before = len(r.issues)
    r.check_keys(block, path, SCHEDULE_KEYS, where="schedule")
    cron = r.text(block, path, "cron", required=True)
    if isinstance(cron, str) and (problem := cron_problem(cron.strip())):
        r.error((*path, "cron"), f"{r.namer((*path, 'cron'))} {cron!r} {problem}")
    zone = r.text(block, path, "timeZone")
    if isinstance(zone, str) and (problem := zone_problem(zone.strip())):
        r.error((*path, "timeZone"), f"{r.namer((*path, 'timeZone'))} {zone!r} {problem}")
    concurrency = r.choice(block, path, "concurrency", CONCURRENCY, default=FORBID, fold_case=True)
    keep_last = r.integer(block, path, "keepLast", lo=0, hi=MAX_KEEP_LAST, default=DEFAULT_KEEP_LAST)
    suspend = r.boolean(block, path, "suspend", default=False)
    if len(r.issues) > before:
        return None
    return ScheduleSpec(
        cron=" ".join(cron.split()),
        time_zone=zone.strip() if zone else None,
        concurrency=concurrency,
        keep_last=keep_last,
        suspend=suspend,
    )
