"""{{ job|pending_reason }}: why the job waits, in the reader's language (scheduling.reasons); {{ job.state|state_text }}
its state in the reader's language (scheduling.formats)."""

import json

from django import template

from scheduling.api import formats, job_reason

register = template.Library()


@register.filter
def pending_reason(job) -> str:
    if job is None or not getattr(job, "pending_reason", "") and not getattr(job, "pending_code", ""):
        return ""
    return job_reason(job)


@register.filter
def state_text(state) -> str:
    """{{ job.state|state_text }}: Running -> 运行中 for a Chinese reader; the value stays in attributes."""
    return formats.state_text(str(state or ""))


@register.simple_tag
def state_words_json() -> str:
    """Every job state's word in the reader's language as JSON, for a page's script (data-state-words)."""
    return json.dumps(formats.state_words(), ensure_ascii=False)
