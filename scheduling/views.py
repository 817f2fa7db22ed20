"""Tenant pages for jobs: submit (with live quotes), list and detail."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.selectors import current_workspace
from scheduling import selectors, services
from scheduling.examples import EXAMPLES
from scheduling.models import JobState
from scheduling.spec import IMAGE_FORM_FIELDS


@login_required
def submit(request):
    workspace = current_workspace(request)
    return render(request, "scheduling/submit.html", {
        "workspace": workspace, "examples": EXAMPLES, "form_fields": list(IMAGE_FORM_FIELDS),
        "queues": selectors.queues_for_workspace(workspace) if workspace else [],
    })


@login_required
def job_list(request):
    workspace = current_workspace(request)
    state = request.GET.get("state") or None
    if state not in JobState.values:
        state = None
    jobs = selectors.jobs_for(request.user, workspace=workspace, state=state) if workspace else []
    return render(request, "scheduling/job_list.html", {
        "workspace": workspace, "jobs": jobs, "states": JobState.values, "state": state,
    })


@login_required
def job_detail(request, pk):
    job = selectors.get_job_for_user(request.user, pk)
    return render(request, "scheduling/job_detail.html", {"job": job, "events": selectors.events_of(job)})


@require_POST
@login_required
def job_cancel(request, pk):
    job = selectors.get_job_for_user(request.user, pk)
    try:
        services.cancel_job(user=request.user, job=job)
        messages.info(request, f"Job {job.name} cancelled.")
    except (PermissionDenied, ValueError) as error:
        messages.error(request, str(error))
    return redirect("job", pk=job.pk)
