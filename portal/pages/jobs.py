"""Tenant pages for jobs: submit (with live quotes), list and detail."""

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from billing.ledger.jobs import job_cost
from portal import selectors as portal_selectors
from portal.selectors import current_workspace
from scheduling import logs, selectors, services
from scheduling.backends import get_backend
from scheduling.models import JobState
from scheduling.spec import IMAGE_FORM_FIELDS
from scheduling.spec.examples import EXAMPLES


@login_required
def submit(request):
    workspace = current_workspace(request)
    return render(request, "scheduling/submit.html", {
        "workspace": workspace, "examples": EXAMPLES, "form_fields": list(IMAGE_FORM_FIELDS),
        "queues": selectors.queues_for_workspace(workspace) if workspace else [],
    })


def _to_console(request, view: str, **kwargs):
    """Operators who are not members of the job's workspace are sent to the console's page for it;
    tenants keep their 404."""
    if request.user.is_staff:
        query = request.GET.urlencode()
        return redirect(reverse(view, kwargs=kwargs) + (f"?{query}" if query else ""))
    raise Http404("No such job")


@login_required
def job_list(request):
    workspace = current_workspace(request)
    if workspace is None and request.user.is_staff:
        return redirect("console-jobs")  # an operator of no workspace: every workspace's jobs
    state = request.GET.get("state") or None
    if state not in JobState.values:
        state = None
    jobs = portal_selectors.jobs_for(request.user, workspace=workspace, state=state) if workspace else []
    return render(request, "scheduling/job_list.html", {
        "workspace": workspace, "jobs": jobs, "states": JobState.values, "state": state,
        "operator": request.user.is_staff,
    })


@login_required
def job_detail(request, pk):
    try:
        job = portal_selectors.get_job_for_user(request.user, pk)
    except Http404:
        return _to_console(request, "console-job", pk=pk)
    cost_so_far = None if job.is_final or not job.started else job_cost(job)
    # An ended job's log is what was kept; a running one's is polled live by the page.
    log_text = logs.job_log_text(job, get_backend()) if job.is_final else None
    membership = job.workspace.memberships.filter(user=request.user).first()
    return render(request, "scheduling/job_detail.html", {"job": job, "events": selectors.events_of(job),
                                                          "replicas": job.replicas.select_related("node"),
                                                          "cost_so_far": cost_so_far, "log_text": log_text,
                                                          "can_cancel": bool(membership and membership.can_submit),
                                                          "log_retention_days": settings.JOB_LOG_RETENTION_DAYS})


@login_required
def job_log(request, pk):
    """The job's replica logs: live from the cluster while a replica runs, the kept copy after it ended;
    `?download=1` as a file."""
    try:
        job = portal_selectors.get_job_for_user(request.user, pk)
    except Http404:
        return _to_console(request, "console-job-log", pk=pk)
    text = logs.job_log_text(job, get_backend())
    if request.GET.get("download"):
        response = HttpResponse(text, content_type=logs.TEXT_PLAIN)
        response["Content-Disposition"] = f'attachment; filename="job-{job.pk}-logs.txt"'
        return response
    return HttpResponse(text or "waiting for replicas to start", content_type=logs.TEXT_PLAIN)


@staff_member_required
def cluster(request):
    template = "scheduling/_cluster_map.html" if request.GET.get("partial") else "scheduling/cluster.html"
    return render(request, template, {"pools": selectors.cluster_view()})


@require_POST
@login_required
def job_cancel(request, pk):
    job = portal_selectors.get_job_for_user(request.user, pk)
    try:
        services.cancel_job(user=request.user, job=job)
        messages.info(request, f"Job {job.name} cancelled.")
    except (PermissionDenied, ValueError) as error:
        messages.error(request, str(error))
    return redirect("job", pk=job.pk)
