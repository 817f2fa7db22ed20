"""Max runtime: the limit a job's run gets at submit (its spec's `maxRuntime`, else its queue's default, never
past its queue's maximum) and the deadline of each run.

The limit is in the job's own time: on the simulated cluster, whose replicas run `clock_scale` simulated
seconds per real second, a run's deadline comes `max_runtime_s / clock_scale` after it started, so a job with
`maxRuntime: 30m` ends about 30 simulated minutes after its start, as its quote and bill count them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils.translation import gettext as _

from scheduling.lifecycle.ends import end_reason_text
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


def attempt_rows(job) -> list[dict]:
    """The job's attempts as the API and gpuctl give them: {number, start, end, class, exit_code, node}."""
    return [{"number": a.number, "start": a.started, "end": a.ended, "class": a.end_class or None,
             "exit_code": a.exit_code, "node": a.node, "memory_mib": a.memory_mib, "counted": a.counted}
            for a in job.attempts.all()]


def job_life(job) -> dict:
    """What the job page shows of the job's life: its limit and deadline, its retry policy, its end, its attempts."""
    retry = (job.spec or {}).get("retry")
    active = job.state in ("Scheduled", "Running")
    return {"max_runtime": format_duration(job.max_runtime_s) if job.max_runtime_s else "",
            "deadline": job.deadline if active else None, "retry": retry,
            "retry_on": ", ".join((retry or {}).get("on") or []), "end_reason_text": end_reason_text(job),
            "attempts": attempt_rows(job)}
