"""Max runtime: the limit a job's run gets at submit (its spec's `maxRuntime`, else its queue's default, never
past its queue's maximum) and the deadline of each run.

The limit is in the job's own time: on the simulated cluster, whose replicas run `clock_scale` simulated
seconds per real second, a run's deadline comes `max_runtime_s / clock_scale` after it started, so a job with
`maxRuntime: 30m` ends about 30 simulated minutes after its start, as its quote and bill count them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils.translation import gettext as _

from scheduling.spec.model import SpecError, SpecIssue
from scheduling.spec.units import format_duration


def max_runtime_for(spec, queue) -> int | None:
    """The run's limit in seconds (None: none). SpecError when the spec asks for more than the queue allows."""
    asked = spec.max_runtime_s
    most = queue.max_runtime_s
    if asked is not None and most is not None and asked > most:
        raise SpecError(
            [
                SpecIssue(
                    line=None,
                    column=None,
                    field="maxRuntime",
                    message=_("maxRuntime %(asked)s is more than queue '%(queue)s' allows (%(most)s)")
                    % {"asked": format_duration(asked), "queue": queue.name, "most": format_duration(most)},
                )
            ]
        )
    if asked is not None:
        return asked
    default = queue.default_max_runtime_s
    if default is not None and most is not None:
        return min(default, most)
    return default if default is not None else most


def deadline_for(job, started: datetime, clock_scale: float) -> datetime | None:
    if not job.max_runtime_s:
        return None
    return started + timedelta(seconds=job.max_runtime_s / max(clock_scale or 1.0, 1e-9))
