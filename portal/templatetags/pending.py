"""{{ job|pending_reason }}: why the job waits, in the reader's language (scheduling.reasons)."""

from django import template

from scheduling.api import job_reason

register = template.Library()


@register.filter
def pending_reason(job) -> str:
    if job is None or not getattr(job, "pending_reason", "") and not getattr(job, "pending_code", ""):
        return ""
    return job_reason(job)
