"""A job's deadline (pure; no Django models):

    completeBy: 2026-12-01T08:00:00+08:00     # an instant, ISO 8601 with its offset
    completeWithin: 12h                        # or a duration from submission

One of the two. The checks that need the time of submission (long enough for the job's expectedDuration and
one scheduling interval, at most MAX_AHEAD_S ahead) are `scheduling.deadlines.check_submit`'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _

from scheduling.spec.model import DeadlineSpec
from scheduling.spec.read import MISSING, Reader, show
from scheduling.spec.units import format_duration, parse_duration

DEADLINE_KEYS = ("completeBy", "completeWithin")
MAX_AHEAD_S = 30 * 86400


def parse_instant(value: Any) -> datetime:
    """ISO 8601 with an offset (Z or +08:00) -> an aware datetime; ValueError (said in the active language)."""
    if not isinstance(value, str):
        raise ValueError(_("is not a time; write e.g. 2026-12-01T08:00:00+08:00"))
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise ValueError(_("is not a time; write e.g. 2026-12-01T08:00:00+08:00")) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(_("has no offset; write e.g. 2026-12-01T08:00:00+08:00 or ...Z"))
    return moment


def read_deadline(r: Reader, doc: dict[str, Any]) -> Any:
    """`completeBy` or `completeWithin`: a DeadlineSpec, None when neither is given, MISSING when wrong (an issue
    said)."""
    by, within = doc.get("completeBy"), doc.get("completeWithin")
    if by is None and within is None:
        return None
    if by is not None and within is not None:
        r.error(("completeWithin",), _("give completeBy or completeWithin, not both"), key=True)
        return MISSING
    if by is not None:
        try:
            moment = parse_instant(by)
        except ValueError as exc:
            r.error(("completeBy",), f"{r.namer(('completeBy',))} {show(by)} {exc}")
            return MISSING
        return DeadlineSpec(at=moment.isoformat())
    seconds = r.quantity(doc, (), "completeWithin", parse_duration, None)
    if seconds is None:
        return MISSING
    if seconds > MAX_AHEAD_S:
        r.error(("completeWithin",), _("%(name)s (%(value)s) is more than %(most)s ahead") % {
            "name": r.namer(("completeWithin",)), "value": format_duration(seconds),
            "most": format_duration(MAX_AHEAD_S)})
        return MISSING
    return DeadlineSpec(within_s=seconds)


def deadline_to_dict(deadline: DeadlineSpec) -> tuple[str, Any]:
    """The clean-form field of a deadline, as it was given."""
    if deadline.at is not None:
        return "completeBy", deadline.at
    return "completeWithin", format_duration(deadline.within_s or 0)
