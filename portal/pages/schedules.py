"""Tenant schedules (`/schedules/`): one of the caller's workspaces' schedules with their cron line, zone,
concurrency and next fire times (in the reader's zone), and a page per schedule with its runs and latest fire
times, where a member who may submit suspends, resumes, triggers a run now or deletes it. Thin views over
scheduling.schedules; viewers see the pages without controls and are refused (403)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from portal import selectors as portal_selectors
from portal.pages.notebooks import _may_act, _said, _workspace
from scheduling.api import DomainError, schedules

MAX_LISTED = 200
UPCOMING = 3


def _rows(listed) -> list[dict]:
    return [{"schedule": s, "upcoming": schedules.upcoming(s, UPCOMING)} for s in listed]


@require_safe
@login_required
def schedule_list(request):
    workspace = _workspace(request)
    context = {"workspace": workspace, "rows": [], "may_act": False}
    if workspace is not None:
        listed = portal_selectors.schedules_for(request.user, workspace=workspace)[:MAX_LISTED]
        context.update(rows=_rows(listed), may_act=_may_act(request.user, workspace))
    return render(request, "portal/schedules.html", context)


@require_safe
@login_required
def schedule_detail(request, pk):
    schedule = portal_selectors.get_schedule_for_user(request.user, pk)
    return render(
        request,
        "portal/schedule_detail.html",
        {
            "schedule": schedule,
            "upcoming": schedules.upcoming(schedule, 5),
            "runs": schedules.runs_of(schedule),
            "firings": schedules.firings_of(schedule),
            "may_act": _may_act(request.user, schedule.workspace),
        },
    )


def _back(schedule) -> str:
    return reverse("schedule", args=[schedule.pk])


@require_POST
@login_required
def schedule_action(request, pk, action):
    schedule = portal_selectors.get_schedule_for_user(request.user, pk)
    try:
        if action == "suspend":
            schedules.suspend_schedule(user=request.user, schedule=schedule)
            messages.success(
                request,
                _("Schedule %(name)s suspended: no runs until you resume it.") % {"name": schedule.name},
            )
        elif action == "resume":
            schedules.resume_schedule(user=request.user, schedule=schedule)
            messages.success(
                request,
                _("Schedule %(name)s resumed: it runs from its next fire time.") % {"name": schedule.name},
            )
        else:
            job = schedules.trigger_schedule(user=request.user, schedule=schedule)
            messages.success(
                request,
                _("Schedule %(name)s: run #%(job)s submitted.") % {"name": schedule.name, "job": job.pk},
            )
    except DomainError as error:
        if error.status == 403:
            raise
        messages.error(
            request, _("Schedule %(name)s: %(why)s") % {"name": schedule.name, "why": _said(error)}
        )
    return redirect(_back(schedule))


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def schedule_delete(request, pk):
    """GET: what deleting does; POST with confirm=1: delete (its runs stay jobs of the workspace)."""
    schedule = portal_selectors.get_schedule_for_user(request.user, pk)
    if not _may_act(request.user, schedule.workspace):
        schedules.delete_schedule(user=request.user, schedule=schedule)  # raises: 403 with the reason
    if request.method == "POST" and request.POST.get("confirm") == "1":
        schedules.delete_schedule(user=request.user, schedule=schedule)
        messages.success(
            request, _("Schedule %(name)s deleted; its runs stay in the job list.") % {"name": schedule.name}
        )
        return redirect(f"{reverse('schedules')}?workspace={schedule.workspace.slug}")
    return render(request, "portal/schedule_delete.html", {"schedule": schedule, "back": _back(schedule)})
