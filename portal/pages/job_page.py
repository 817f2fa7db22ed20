"""Tenant job page (`/jobs/<id>/`): state, cost (so far, or final against the estimate at submission),
efficiency, per-replica GPU utilisation and memory charts, events, log and spec. `?partial=cost` is the
cost part alone, `?partial=timing` how long it has waited or run, and `/jobs/<id>/usage/` the charts' data, both re-read by the page while the job runs.
Thin views over billing's reads; the job is fetched through portal.selectors.get_job_for_user."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_safe

from billing.api import array_total, estimate_check, job_cost, job_efficiency, job_totals, job_usage_series
from portal import job_lists, notebook_origin
from portal import selectors as portal_selectors
from scheduling.api import (
    TENSORBOARD_PORT,
    array_children,
    array_detail,
    chain_of,
    clock,
    deadlines,
    get_backend,
    job_life,
    job_summary,
    logs,
    selectors,
    tensorboard_endpoint_of,
    tensorboard_logdir_of,
)
from scheduling.models import Job


def _job_or_console(request, pk, view: str):
    """The caller's job; operators who are not members of its workspace go to the console's page for
    it, tenants get a 404."""
    try:
        return portal_selectors.get_job_for_user(request.user, pk)
    except Http404:
        if request.user.is_staff and view:
            query = request.GET.urlencode()
            return redirect(reverse(view, kwargs={"pk": pk}) + (f"?{query}" if query else ""))
        raise


def _cost_context(job: Job) -> dict[str, Any]:
    return {
        "job": job, "cost_so_far": None if job.is_final or not job.started else job_cost(job),
        "estimate": estimate_check(job), "efficiency": job_efficiency(job),
    }


def usage_data(job: Job) -> dict[str, Any]:
    """What the charts draw. Times are wall times in the viewer's zone: plotly drops a UTC offset and
    would draw UTC."""
    series = job_usage_series(job)
    return {
        "bucket_s": series.bucket_s, "final": job.is_final,
        "has_samples": any(p.times for p in series.placements),
        "placements": [{
            "label": p.label, "node": p.node, "slice": p.slice_label, "mean_util": p.mean_util,
            "times": [timezone.localtime(t).strftime("%Y-%m-%d %H:%M:%S") for t in p.times],
            "util": p.util, "mem_mib": p.mem_mib,
        } for p in series.placements],
    }


@require_safe
@login_required
def job_detail(request, pk):
    job = _job_or_console(request, pk, "" if request.GET.get("partial") else "console-job")
    if not isinstance(job, Job):
        return job  # the operator's redirect
    if request.GET.get("partial") == "cost":
        return render(request, "scheduling/_job_cost.html", _cost_context(job))
    if request.GET.get("partial") == "life":
        return render(request, "scheduling/_job_life.html", {"job": job, "life": job_life(job)})
    if request.GET.get("partial") == "timing":  # "running 12 min": re-read by the page as the job moves on
        (row,) = job_lists.job_rows([job], now=clock.now())
        return render(request, "scheduling/_job_timing.html", {"row": row})
    membership = portal_selectors.my_membership(request, job.workspace)
    (row,) = job_lists.job_rows([job], now=clock.now())
    return render(request, "scheduling/job_detail.html", {
        **_cost_context(job), "row": row, "events": selectors.events_of(job),
        "replicas": job.replicas.select_related("node"),
        # An ended job's log is what was kept; a running one's is polled live by the page.
        "log_text": logs.job_log_text(job, get_backend()) if job.is_final else None,
        "log_retention_days": settings.JOB_LOG_RETENTION_DAYS,
        "may_act": bool(membership and membership.can_submit),  # submit (clone) and cancel
        "usage_data": usage_data(job), "usage_url": reverse("job-usage", args=[job.pk]),
        **_chain_context(job),
        "life": job_life(job),
        "graceful": job_summary(job),   # its grace, checkpoint and what its evictions lost
        **_deadline_context(job),
        "tensorboard": tensorboard_logdir_of(job) if not job.is_final else None,
    })


def _deadline_context(job: Job) -> dict[str, Any]:
    """A deadline job's deadline, latest start and phase (nothing for other jobs)."""
    view = deadlines.view(job, clock.now())
    return {"deadline": view, "deadline_phase": deadlines.phase_text(view.phase) if view else ""}


@require_safe
@login_required
def job_tensorboard(request, pk):
    """The job's TensorBoard: a member goes on to its own host on the notebook origin with a fresh ticket
    (never served from the portal's origin)."""
    job = portal_selectors.get_job_for_user(request.user, pk)
    if tensorboard_logdir_of(job) is None or job.is_final:
        raise Http404(gettext("This job has no TensorBoard"))
    if tensorboard_endpoint_of(job, get_backend()) is None:
        why = gettext("its TensorBoard is starting") if job.state in ("Pending", "Scheduled", "Running") \
            else gettext("it is %(state)s") % {"state": job.state.lower()}
        return render(request, "portal/tensorboard_unavailable.html", {"job": job, "why": why}, status=503)
    response = redirect(notebook_origin.ticket_url(request.user, job, path="/", port=TENSORBOARD_PORT))
    response["Cache-Control"] = "no-store"
    return response


def _chain_context(job: Job) -> dict[str, Any]:
    """What it waits for and what waits for it; an array's counts, total cost and indices."""
    context: dict[str, Any] = {"chain": chain_of(job)}
    array = array_detail(job)
    if array is not None:
        children = array_children(job)
        costs = job_totals(c.pk for c in children)
        context["array"] = {**array, "total_cost": array_total(job.pk),
                            "children": [(c, costs.get(c.pk, (None, ""))[0]) for c in children]}
    return context


@require_safe
@login_required
def job_usage(request, pk):
    """The charts' data as JSON: per replica, utilisation and memory over time."""
    job = portal_selectors.get_job_for_user(request.user, pk)
    return JsonResponse(usage_data(job))
