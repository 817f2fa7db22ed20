"""Operator console pages (staff only) for node health, idle GPUs and capacity: thin views over
scheduling.selectors.node_health, billing.idle and billing.reports.capacity."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext

from billing.api import capacity as capacity_reports
from billing.api import idle_placements, parse_filters, platform_tz
from portal.console import health_services
from portal.console.services import ConsoleError
from portal.console.views import operator_required
from portal.models import Workspace
from scheduling.api import clock, node_health
from scheduling.models import IdleAction, NodePool


@operator_required
def health(request):
    """Nodes and GPUs as their agents report them, the idle slices, and each pool's idle policy."""
    now = clock.now()
    pools = node_health(now)
    nodes = [n for p in pools for n in p["nodes"]]
    context = {
        "section": "health", "pools": pools, "idle": idle_placements(), "now": now,
        "not_ready_after": int(settings.NODE_NOT_READY_AFTER_S),
        "not_ready": [n for n in nodes if n.state == "NotReady"],
        "late": [n for n in nodes if n.late],
        "gpu_errors": sum(1 for n in nodes for g in n.gpus if g["errors"]),
        "other_model": sum(1 for n in nodes for g in n.gpus if g["other_model"]),
        "policies": NodePool.objects.order_by("name"),
    }
    template = "console/_health.html" if request.GET.get("partial") else "console/health.html"
    return render(request, template, context)


IDLE_VALUE_FIELDS = health_services.IDLE_FIELDS


@operator_required
def idle_policy(request, name):
    pool = get_object_or_404(NodePool, name=name)
    errors = {}
    if request.method == "POST":
        try:
            health_services.save_idle_policy(request.user, pool, request.POST)
            messages.success(request, gettext("Idle policy of pool %(pool)s saved.") % {"pool": pool.name})
            return redirect(reverse("console-health") + "#idle-policies")
        except ConsoleError as error:
            errors = error.errors
        values = request.POST
    else:
        values = {f: getattr(pool, f) for f in IDLE_VALUE_FIELDS}
    return render(request, "console/idle_policy.html", {
        "section": "health", "pool": pool, "values": values, "errors": errors, "actions": IdleAction.choices,
    }, status=400 if errors else 200)


@operator_required
def capacity(request):
    """Idle allocated GPU-hours and their cost, unallocated capacity at list price, usage by submitter
    within a workspace, and each workspace's month-end forecast beside its budget."""
    now = clock.now()
    filters = parse_filters(request.GET, today=now.astimezone(platform_tz()).date())  # FilterError: a 400 page
    workspace = None
    if filters.workspace:
        workspace = Workspace.objects.filter(slug=filters.workspace).first()
        if workspace is None:
            raise Http404(gettext("No such workspace"))
    workspaces = list(Workspace.objects.order_by("slug"))
    idle = capacity_reports.idle_by_workspace_pool_day(filters.start, filters.end)
    unallocated = capacity_reports.unallocated_by_pool_day(filters.start, filters.end, now=now)
    return render(request, "console/capacity.html", {
        "section": "capacity", "filters": filters, "workspaces": workspaces, "workspace": workspace,
        "idle": idle, "idle_totals": capacity_reports.totals_by_currency(idle, "idle_gpu_hours", "idle_cost"),
        "idle_people": capacity_reports.idle_by_person(filters.start, filters.end),
        "unallocated": unallocated,
        "unallocated_totals": capacity_reports.totals_by_currency(unallocated, "unallocated_gpu_hours", "list_cost"),
        "submitters": capacity_reports.usage_by_submitter(workspace, filters.start, filters.end) if workspace else None,
        "forecasts": [capacity_reports.forecast(ws, now=now) for ws in workspaces],
    })
