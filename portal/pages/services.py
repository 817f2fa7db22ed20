"""Tenant inference services (`/services/`): a workspace's services with their replicas, traffic, latency and
cost, and a page per service with live charts, its endpoint and an example `curl`, where a member who may
submit changes its replica range, stops, starts or deletes it. Thin views over portal.serving (reads),
scheduling.inference (set_range) and scheduling.services (stop, start, cancel)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from portal import service_keys, serving
from portal.pages.notebooks import _may_act, _said, _workspace
from scheduling.api import DomainError, clock, inference, service_revisions, services


def _back(job) -> str:
    return reverse("service", args=[job.pk])


@require_safe
@login_required
def service_list(request):
    workspace = _workspace(request)
    context = {"workspace": workspace, "rows": [], "may_act": False}
    if workspace is not None:
        now = clock.now()
        context.update(
            rows=serving.service_rows(serving.services_for(request.user, workspace, ended=False)[:serving.MAX_LISTED],
                                      now=now),
            ended=serving.service_rows(serving.services_for(request.user, workspace, ended=True)[:20], now=now),
            may_act=_may_act(request.user, workspace))
    return render(request, "portal/services.html", context)


@require_safe
@login_required
def service_detail(request, pk):
    return render_detail(request, serving.get_service_for_user(request.user, pk))


def render_detail(request, job, **extra):
    """The service's page (`extra`: what a form just did, e.g. a new key shown once)."""
    [row] = serving.service_rows([job])
    portal_url = settings.PORTAL_URL or request.build_absolute_uri("/").rstrip("/")
    return render(request, "portal/service_detail.html", {
        "job": job, "r": row, "may_act": _may_act(request.user, job.workspace),
        "url": portal_url + row.endpoint, "model": (inference.inference_spec(job) or None),
        "series": serving.service_series(job), "max_replicas": inference.MAX_REPLICAS,
        "revisions": serving.revision_rows(job, row.row.cost),
        **service_keys.key_section(job), **extra,
    })


@require_safe
@login_required
def service_series(request, pk):
    """The charts' data, polled by the page every few seconds."""
    job = serving.get_service_for_user(request.user, pk)
    [row] = serving.service_rows([job])
    return JsonResponse({**serving.service_series(job), "state": job.state, "running": row.running,
                         "desired": row.desired, "requests": row.requests,
                         "cost_per_1000": None if row.cost_per_1000 is None else str(row.cost_per_1000),
                         "gpu_seconds_per_request": row.gpu_seconds_per_request})


def _replicas(value: str | None, name: str) -> int:
    try:
        return int(value or "")
    except ValueError:
        raise DomainError(_("%(name)s must be a whole number of replicas") % {"name": name}, field=name) from None


@require_POST
@login_required
def service_scale(request, pk):
    job = serving.get_service_for_user(request.user, pk)
    try:
        low, high = _replicas(request.POST.get("min"), "min"), _replicas(request.POST.get("max"), "max")
        inference.set_range(request.user, job, low, high)
        messages.success(request, _("Service %(name)s now runs %(low)d to %(high)d replicas.")
                         % {"name": job.name, "low": low, "high": high})
    except DomainError as error:
        if error.status == 403:
            raise
        messages.error(request, _("The replica range was not changed: %(why)s") % {"why": _said(error)})
    return redirect(_back(job))


@require_POST
@login_required
def service_action(request, pk, action):
    job = serving.get_service_for_user(request.user, pk)
    try:
        if action == "stop":
            services.stop_workload(request.user, job, "from the service page")
            messages.success(request, _("Service %(name)s stopped: its GPUs are free.") % {"name": job.name})
        elif action == "start":
            services.start_workload(request.user, job)
            messages.success(request, _("Service %(name)s starts: it waits in its queue for GPUs.")
                             % {"name": job.name})
        else:
            services.cancel_job(user=request.user, job=job)
            messages.success(request, _("Service %(name)s deleted.") % {"name": job.name})
    except DomainError as error:
        if error.status == 403:
            raise
        messages.error(request, _("Service %(name)s: %(why)s") % {"name": job.name, "why": _said(error)})
    return redirect(_back(job))


def _revision_change(request, job, action: str) -> str:
    """Apply one revision form of the page; the message to show."""
    if action == "promote":
        number = _replicas(request.POST.get("revision"), "revision")
        service_revisions.promote(request.user, job, number)
        return _("Revision %(number)d of %(name)s takes all the traffic.") % {"number": number, "name": job.name}
    if action == "rollback":
        scale = service_revisions.rollback(request.user, job)
        return _("%(name)s rolled back to revision %(number)d.") % {"number": scale.revision, "name": job.name}
    if action == "traffic":
        number = _replicas(request.POST.get("revision"), "revision")
        percent = _replicas(request.POST.get("percent"), "percent")
        current = service_revisions.current_revision(job.pk)
        split = [{"revision": number, "percent": percent}]
        if number != current:
            split.append({"revision": current, "percent": 100 - percent})
        service_revisions.set_traffic(request.user, job, split)
        return _("%(percent)d %% of the requests go to revision %(number)d.") % {"percent": percent, "number": number}
    changes = {}
    if image := (request.POST.get("image") or "").strip():
        changes["image"] = image
    if registry := (request.POST.get("registry") or "").strip():
        changes["model"] = {**(job.spec.get("model") or {}), "registry": registry}
        changes["model"].pop("path", None)
    if not changes:
        raise DomainError(_("give the new image or model"), field="image")
    revision = service_revisions.create_revision(request.user, job, changes)
    return _("Revision %(number)d made: the current one serves until it is ready.") % {"number": revision.number}


@require_POST
@login_required
def service_revision(request, pk, action):
    """The page's revision forms: promote, roll back, split the traffic, make a new revision."""
    job = serving.get_service_for_user(request.user, pk)
    try:
        messages.success(request, _revision_change(request, job, action))
    except DomainError as error:
        if error.status == 403:
            raise
        messages.error(request, _("The revisions were not changed: %(why)s") % {"why": _said(error)})
    return redirect(_back(job))
