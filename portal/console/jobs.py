"""Operators' job pages (staff only): every workspace's jobs (filters, search, sort, pages, CSV), one
job's page, and the actions on it (cancel, requeue, priority, move), each confirmed and audited.
Thin views over portal.console.job_selectors, job_forms and job_services."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from billing.api import billed_priority, exports, job_cost
from portal.console import job_selectors, job_services
from portal.console.job_forms import JobFilterForm, MoveForm, PriorityForm, ReasonForm
from portal.console.services import ConsoleError
from portal.console.views import _chart_times, operator_required
from portal.job_lists import list_query as _query
from portal.job_lists import sort_links as _sort_links
from scheduling.api import DomainError, get_backend, job_life, logs, selectors
from scheduling.models import ACTIVE_STATES, Job, JobState

LIST_ONLY = ("page", "partial")  # parameters the CSV and the sort links leave out


def _with_query(path: str, query: str) -> str:
    return f"{path}?{query}" if query else path


@operator_required
def job_list(request):
    form = JobFilterForm(request.GET)
    template = "console/jobs/_table.html" if request.GET.get("partial") else "console/jobs/list.html"
    context: dict[str, Any] = {"section": "jobs", "form": form, "rows": [], "page": None}
    if not form.is_valid():
        return render(request, template, context, status=400)
    filters = form.filters()
    number, size = form.paging()
    page = Paginator(job_selectors.operator_jobs(filters), size).get_page(number)
    context.update(
        page=page, rows=job_selectors.job_rows(page.object_list), sort=filters.sort,
        sort_links=_sort_links(request.GET, filters.sort), page_query=_query(request.GET),
        csv_query=_query(request.GET, drop=(*LIST_ONLY, "page_size", "sort"), sort=filters.sort),
        live_src=f"{request.path}?{_query(request.GET, drop=('partial',), partial='1')}",
        here=_with_query(request.path, _query(request.GET, drop=("partial",))),
    )
    return render(request, template, context)


def _csv_source(params):
    form = JobFilterForm(params)
    if not form.is_valid():
        raise ConsoleError.of_form(form)  # a 400 page, before the first byte
    return job_selectors.csv_rows(job_selectors.operator_jobs(form.filters()))


async def job_csv(request):
    """Every matching job (no paging), streamed: rows are read in chunks, memory stays flat."""
    user = await request.auser()
    if not user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not user.is_staff:
        raise PermissionDenied(gettext("the operator console is for operators (staff) only"))
    rows = await sync_to_async(_csv_source)(request.GET)
    response = StreamingHttpResponse(exports.csv_chunks(exports.aiter_rows(rows), header=job_selectors.CSV_HEADER,
                                                        numbers=job_selectors.CSV_NUMBER_COLUMNS),
                                     content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="jobs.csv"'
    return response


# --------------------------------------------------------------------------- one job


def _detail_context(job: Job) -> dict[str, Any]:
    usage = job_selectors.job_usage(job)
    return {
        "section": "jobs", "job": job, "events": selectors.events_of(job), "replicas": job_selectors.job_replicas(job),
        "cost_so_far": None if job.is_final or not job.started else job_cost(job),
        "log_text": logs.job_log_text(job, get_backend()), "log_url": reverse("console-job-log", args=[job.pk]),
        "log_retention_days": settings.JOB_LOG_RETENTION_DAYS, "billed_priority": billed_priority(job),
        "usage": usage, "usage_json": json.dumps([{"pool": u.pool, "hours": _chart_times(u.hours),
                                                   "allocated": u.allocated, "used": u.used} for u in usage]),
        "actions": {name: action.blocked(job) for name, action in ACTIONS.items()},
        "life": job_life(job),
    }


@operator_required
def job_detail(request, pk):
    job = job_selectors.get_job_for_operator(request.user, pk)
    if request.GET.get("partial"):
        return render(request, "console/jobs/_job.html", _detail_context(job))
    return render(request, "console/jobs/detail.html", _detail_context(job))


@operator_required
def job_log(request, pk):
    """The job's replica logs (live while a replica runs, the kept copy after); `?download=1` as a file."""
    job = job_selectors.get_job_for_operator(request.user, pk)
    text = logs.job_log_text(job, get_backend())
    response = HttpResponse(text or "No log yet.\n", content_type=logs.TEXT_PLAIN)
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="job-{job.pk}-logs.txt"'
    return response


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Action:
    name: str
    title: str  # "Cancel", as a verb on a button
    form: type
    confirm_step: bool  # the form page asks for values, a second page confirms them
    states: tuple[str, ...]  # the job states it applies to

    def blocked(self, job: Job) -> str:
        """Why the action cannot apply to the job now ("" when it can)."""
        if job.state not in self.states:
            return BLOCKED[self.name] % {"pk": job.pk, "state": job.state, "states": ", ".join(self.states)}
        if self.name == "move" and not job_selectors.move_targets(job).exists():
            return gettext("workspace %(workspace)s may use no other queue") % {"workspace": job.workspace.slug}
        return ""

    def make_form(self, job: Job, data=None):
        kwargs = {} if self.form is ReasonForm else {"job": job}
        initial = {"priority": job.priority} if self.name == "priority" else None
        return self.form(data, initial=initial, **kwargs)


NOT_FINAL = (JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING, JobState.PREEMPTED)
ACTIONS = {
    "cancel": Action("cancel", _("Cancel"), ReasonForm, False, NOT_FINAL),
    "requeue": Action("requeue", _("Requeue"), ReasonForm, False, ACTIVE_STATES),
    "priority": Action("priority", _("Change priority"), PriorityForm, True, NOT_FINAL),
    "move": Action("move", _("Move"), MoveForm, True, (JobState.PENDING,)),
}
BLOCKED = {
    "cancel": _("job %(pk)s is %(state)s: cancel applies to %(states)s jobs"),
    "requeue": _("job %(pk)s is %(state)s: requeue applies to %(states)s jobs"),
    "priority": _("job %(pk)s is %(state)s: priority applies to %(states)s jobs"),
    "move": _("job %(pk)s is %(state)s: move applies to %(states)s jobs"),
}


def _do(action: Action, operator, job: Job, data: dict) -> str:
    """Carry the action out; the message that says what was done."""
    reason = data.get("reason", "")
    where = ", ".join(sorted({r.node.name for r in job_selectors.job_replicas(job) if r.is_active and r.node}))
    if action.name == "cancel":
        job = job_services.cancel(operator, job, reason=reason)
        said = {"name": job.name, "pk": job.pk, "nodes": where}
        return (gettext("Job %(name)s #%(pk)s cancelled; its replicas on %(nodes)s are stopped.") if where
                else gettext("Job %(name)s #%(pk)s cancelled.")) % said
    if action.name == "requeue":
        job = job_services.requeue(operator, job, reason=reason)
        said = {"name": job.name, "pk": job.pk, "nodes": where, "queue": job.queue.name}
        return (gettext("Job %(name)s #%(pk)s requeued: its replicas on %(nodes)s are stopped and it waits in queue "
                        "%(queue)s for the next cycle.") if where else
                gettext("Job %(name)s #%(pk)s requeued: its replicas on no node are stopped and it waits in queue "
                        "%(queue)s for the next cycle.")) % said
    if action.name == "priority":
        old = job.priority
        job = job_services.change_priority(operator, job, data["priority"], reason=reason)
        return gettext("Job %(name)s #%(pk)s: priority %(old)s → %(new)s.") % {
            "name": job.name, "pk": job.pk, "old": old, "new": job.priority}
    old = job.queue.name
    job = job_services.move(operator, job, data["queue"], reason=reason)
    return gettext("Job %(name)s #%(pk)s moved from queue %(old)s to %(new)s.") % {
        "name": job.name, "pk": job.pk, "old": old, "new": job.queue.name}


def _next_url(request, job: Job) -> str:
    """Back where the operator came from (a console jobs page), else the job's page."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target.startswith("/console/jobs/") and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return reverse("console-job", args=[job.pk])


def _action_page(request, pk, name: str):
    action = ACTIONS[name]
    job = job_selectors.get_job_for_operator(request.user, pk)
    form, confirming, errors, status = action.make_form(job), False, {}, 200
    if request.method == "POST":
        form = action.make_form(job, request.POST)
        if not form.is_valid():
            status = 400
        elif action.confirm_step and request.POST.get("confirm") != "1":
            confirming = True
        else:
            try:
                messages.success(request, _do(action, request.user, job, form.cleaned_data))
                return redirect(_next_url(request, job))
            except DomainError as error:
                errors, status = error.errors, error.status
                job.refresh_from_db()
    return render(request, "console/jobs/action.html", {
        "section": "jobs", "job": job, "action": action, "form": form, "confirming": confirming, "errors": errors,
        "blocked": action.blocked(job), "next": _next_url(request, job), "billed_priority": billed_priority(job),
        "replicas": [r for r in job_selectors.job_replicas(job) if r.is_active],
        "cleaned": form.cleaned_data if confirming else {},
    }, status=status)


@operator_required
def job_cancel(request, pk):
    return _action_page(request, pk, "cancel")


@operator_required
def job_requeue(request, pk):
    return _action_page(request, pk, "requeue")


@operator_required
def job_priority(request, pk):
    return _action_page(request, pk, "priority")


@operator_required
def job_move(request, pk):
    return _action_page(request, pk, "move")
