"""Tenant notebooks (`/notebooks/`): one of the caller's workspaces' notebooks with Open, Stop, Start and
Delete, their slice, idle time, cost so far and the cost of their idle hours. Thin views over
portal.notebooks (reads) and scheduling.services (stop_workload, start_workload, delete_notebook).
Owners and members act; viewers see the list without controls and are refused (403)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.timezone import localtime
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from portal import notebooks
from portal import selectors as portal_selectors
from scheduling.api import Conflict, DomainError, Forbidden, clock, get_backend, services

MAX_PARAMETER_LENGTH = 200


def _workspace(request):
    slug = request.GET.get("workspace")
    if slug:
        return portal_selectors.get_workspace_for_user(request.user, slug[:MAX_PARAMETER_LENGTH])
    return portal_selectors.current_workspace(request)


def _may_act(user, workspace) -> bool:
    membership = portal_selectors.membership_for(user, workspace)
    return bool(membership and membership.can_submit)


def _said(error: Conflict) -> str:
    return "; ".join(m for ms in error.errors.values() for m in ms)


def _back(job) -> str:
    return f"{reverse('notebooks')}?workspace={job.workspace.slug}"


@require_safe
@login_required
def notebook_list(request):
    workspace = _workspace(request)
    context = {"workspace": workspace, "rows": [], "may_act": False}
    if workspace is not None:
        now = clock.now()
        live = notebooks.notebooks_for(request.user, workspace, ended=False)[:notebooks.MAX_LISTED]
        ended = notebooks.notebooks_for(request.user, workspace, ended=True)[:notebooks.MAX_ENDED]
        context.update(rows=notebooks.notebook_rows(live, backend=get_backend(), now=now),
                       ended=notebooks.notebook_rows(ended, now=now), may_act=_may_act(request.user, workspace))
    return render(request, "portal/notebooks.html", context)


@require_POST
@login_required
def notebook_stop(request, pk):
    job = notebooks.get_notebook_for_user(request.user, pk)
    try:
        services.stop_workload(request.user, job, "from the notebooks page")
        messages.success(request, gettext("Notebook %(name)s stopped: its GPU is free, its home is kept.") % {
            "name": job.name})
    except Conflict as error:
        messages.error(request, gettext("Notebook %(name)s was not stopped: %(why)s") % {
            "name": job.name, "why": _said(error)})
    return redirect(_back(job))


@require_POST
@login_required
def notebook_start(request, pk):
    job = notebooks.get_notebook_for_user(request.user, pk)
    try:
        services.start_workload(request.user, job)
        messages.success(request, gettext("Notebook %(name)s starts: it waits in queue %(queue)s for a GPU.") % {
            "name": job.name, "queue": job.queue.name})
    except Conflict as error:
        messages.error(request, gettext("Notebook %(name)s was not started: %(why)s") % {
            "name": job.name, "why": _said(error)})
    return redirect(_back(job))


@require_POST
@login_required
def notebook_keep_alive(request, pk):
    """Keep a notebook alive until a time of day in the user's zone (`until`, HH:MM), or clear it (`clear`)."""
    job = notebooks.get_notebook_for_user(request.user, pk)
    text = "" if request.POST.get("clear") == "1" else request.POST.get("until", "")[:MAX_PARAMETER_LENGTH]
    if not text and request.POST.get("clear") != "1":
        messages.error(request, gettext("Notebook %(name)s: give a time to keep it alive until.") % {"name": job.name})
        return redirect(_back(job))
    try:
        kept = notebooks.keep_alive(request.user, job, text)
    except Forbidden:
        raise  # a viewer: 403, not a message
    except DomainError as error:
        messages.error(request, gettext("Notebook %(name)s was not kept alive: %(why)s") % {
            "name": job.name, "why": _said(error)})
        return redirect(_back(job))
    if kept is None:
        messages.success(request, gettext("Notebook %(name)s: keep-alive cleared; the idle rule applies again.") % {
            "name": job.name})
    else:
        messages.success(request, gettext("Notebook %(name)s is kept alive until %(until)s: the idle rule skips it "
                                          "until then.") % {"name": job.name,
                                                            "until": date_format(localtime(kept.until), "DATETIME_FORMAT")})
    return redirect(_back(job))


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def notebook_delete(request, pk):
    """GET: what deleting does; POST with confirm=1: delete (cancel), and the home volume with home=1."""
    job = notebooks.get_notebook_for_user(request.user, pk)
    if not _may_act(request.user, job.workspace):
        services.require_submitter(request.user, job.workspace)  # raises: 403 with the reason
    if request.method == "POST" and request.POST.get("confirm") == "1":
        delete_home = request.POST.get("home") == "1"
        try:
            services.delete_notebook(request.user, job, delete_home=delete_home)
            said = (gettext("Notebook %(name)s deleted with its home volume.") if delete_home
                    else gettext("Notebook %(name)s deleted; its home volume is kept."))
            messages.success(request, said % {"name": job.name})
        except Conflict as error:
            messages.error(request, gettext("Notebook %(name)s was not deleted: %(why)s") % {
                "name": job.name, "why": _said(error)})
        return redirect(_back(job))
    return render(request, "portal/notebook_delete.html", {"job": job, "back": _back(job)})
