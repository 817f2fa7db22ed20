"""`{% job_idle_badge job %}`: the job's idle spell on its page; `{% workspace_forecast workspace %}`:
the month-end forecast beside a workspace's budget. The caller has already checked that the user may
see the job or workspace (a page's own scoping): these only read what they are given."""

from django import template

from billing.api import forecast, job_idle
from scheduling.api import clock

register = template.Library()


@register.inclusion_tag("portal/_idle_badge.html")
def job_idle_badge(job):
    return {"idle": None if job.is_final else job_idle(job)}


@register.inclusion_tag("portal/_forecast.html")
def workspace_forecast(workspace):
    return {"f": forecast(workspace, now=clock.now())}
