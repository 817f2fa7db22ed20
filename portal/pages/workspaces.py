import json
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from billing.api import one_revision, tenant_dashboard
from portal import health, services
from portal.pages.workspace_queues import queue_context
from portal.selectors import current_workspace, get_workspace_for_user, membership_for


@require_GET
def healthz(request):
    """Liveness: the process answers; no dependency is checked (an outage must not restart pods)."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request):
    """Readiness: 503 naming the failing dependencies (database, redis, migrations) until all are fine."""
    ready, checks = health.readiness()
    return JsonResponse({"status": "ready" if ready else "unready", **checks}, status=200 if ready else 503)


@login_required
@one_revision()  # the page's kept ledger figures share one read of the ledger's revision
def dashboard(request):
    """The tenant dashboard for the current workspace: this month's spend against the budget,
    GPU-hours by day, jobs by state, efficiency with the jobs that wasted most, and the savings."""
    workspace = current_workspace(request)
    context = {}
    if workspace is not None:
        data = tenant_dashboard(request.user, workspace)
        per_day = {row["day"]: row for row in data.by_day}
        days = [data.month_start + timedelta(days=n) for n in range((data.today - data.month_start).days + 1)]
        chart = {"days": [d.isoformat() for d in days],
                 "allocated": [float((per_day.get(d) or {}).get("allocated_gpu_hours") or 0) for d in days],
                 "used": [float((per_day.get(d) or {}).get("used_gpu_hours") or 0) for d in days]}
        context = {"data": data, "chart": json.dumps(chart), "report_query": urlencode(data.filters(workspace.slug))}
    return render(request, "portal/dashboard.html", context)


@login_required
def workspace_detail(request, slug):
    workspace = get_workspace_for_user(request.user, slug)
    members = workspace.memberships.select_related("user").order_by("user__username")
    return render(
        request,
        "portal/workspace_detail.html",
        {"workspace": workspace, "members": members, "membership": membership_for(request.user, workspace),
         **queue_context(workspace)},
    )


@require_POST
@login_required
def switch_workspace(request):
    workspace = services.switch_workspace(request, request.POST.get("workspace", ""))
    messages.info(request, f"Switched to {workspace.name}.")
    target = request.POST.get("next") or "dashboard"
    if target != "dashboard" and not url_has_allowed_host_and_scheme(target, {request.get_host()}):
        target = "dashboard"
    return redirect(target)
