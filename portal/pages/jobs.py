"""Tenant pages for jobs: a job's log and cancel, the cluster map. The list and the job page are
portal/pages/job_list.py and job_page.py; Submit is portal/pages/submit.py."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from portal import selectors as portal_selectors
from portal.console.views import operator_required
from scheduling.api import get_backend, logs, selectors, services


def _to_console(request, view: str, **kwargs):
    """Operators who are not members of the job's workspace are sent to the console's page for it;
    tenants keep their 404."""
    if request.user.is_staff:
        query = request.GET.urlencode()
        return redirect(reverse(view, kwargs=kwargs) + (f"?{query}" if query else ""))
    raise Http404("No such job")


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


@operator_required  # a tenant gets the styled 403 (not the admin's sign-in page), a stranger the sign-in page
def cluster(request):
    template = "scheduling/_cluster_map.html" if request.GET.get("partial") else "scheduling/cluster.html"
    return render(request, template, {"pools": selectors.cluster_view()})


@require_POST
@login_required
def job_cancel(request, pk):
    job = portal_selectors.get_job_for_user(request.user, pk)
    index = request.POST.get("index", "").strip()
    try:
        if index:   # one index of an array
            if not index.isdigit():
                raise ValueError(gettext("index %(index)s is not a whole number") % {"index": index})
            services.cancel_array_index(user=request.user, job=job, index=int(index))
            messages.info(request, gettext("Index %(index)s of %(name)s cancelled.") % {"index": index,
                                                                                      "name": job.name})
        else:
            services.cancel_job(user=request.user, job=job)
            messages.info(request, f"Job {job.name} cancelled.")
    except (PermissionDenied, ValueError) as error:
        messages.error(request, str(error))
    return redirect("job", pk=job.pk)
