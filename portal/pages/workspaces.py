import json
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_POST

from billing.api import one_revision, tenant_dashboard
from portal import health, service_accounts, services, ssh_access
from portal.members.selectors import members_of
from portal.models import ApiToken, Role, ServiceAccount, TokenScope
from portal.pages.workspace_queues import queue_context
from portal.selectors import current_workspace, get_workspace_for_user, my_membership
from scheduling.api import DomainError, clock, workspace_chains
from scheduling.api import by_slack as deadline_jobs_by_slack


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
    return render(request, "portal/workspace_detail.html", _workspace_context(request, workspace))


def _workspace_context(request, workspace, **service_account_form) -> dict:
    membership = my_membership(request, workspace)
    context = {"workspace": workspace, "members": members_of(workspace), "membership": membership,
               **queue_context(workspace), "chains": workspace_chains(workspace),
               "deadline_jobs": deadline_jobs_by_slack(workspace, clock.now())}
    if membership is not None and membership.can_manage_members:
        now = clock.now()
        accounts = list(service_accounts.service_accounts_of(workspace))
        roles = service_accounts.roles_of(accounts)
        tokens: dict[int, list] = {}
        for token in ApiToken.objects.filter(user__in=[a.user_id for a in accounts]).order_by("-created", "-id"):
            tokens.setdefault(token.user_id, []).append((token, token.expired_at(now)))
        context["service_accounts"] = [(a, roles.get(a.user_id, ""), tokens.get(a.user_id, [])) for a in accounts]
        context["sa"] = {"errors": {}, "values": {"role": Role.MEMBER, "scope": TokenScope.SUBMIT,
                                                  "days": str(services.DEFAULT_TOKEN_DAYS)},
                         "roles": [(r, Role(r).label) for r in ServiceAccount.ROLES], "scopes": TokenScope.choices,
                         "lifetimes": [(str(d), now + timedelta(days=d)) for d in services.TOKEN_DAYS],
                         **service_account_form}
    return context


@login_required
@require_POST
def workspace_service_accounts(request, slug):
    """The workspace page's service-account forms (owners): make or delete an account, mint or revoke a
    token. A new token's value is shown on the answer, once; a refusal shows the page again with it (400)."""
    workspace = get_workspace_for_user(request.user, slug)
    service_accounts.require_owner(request.user, workspace)  # a 403 for everyone else
    post = request.POST
    account = post.get("account", "")
    values = {key: post.get(key, "") for key in ("name", "role", "token_name", "scope", "days")}
    new_token, new_raw = None, None
    try:
        if "delete" in post:
            service_accounts.delete_service_account(request.user, workspace, account)
            messages.success(request, gettext("Service account %(name)s deleted; its tokens are revoked.") % {
                "name": account})
        elif "revoke" in post:
            service_accounts.revoke_token(request.user, workspace, account, post["revoke"])
            messages.success(request, gettext("Token revoked: it is refused from now on."))
        elif "token_name" in post:
            new_token, new_raw = service_accounts.create_token(request.user, workspace, account, values["token_name"],
                                                               scope=values["scope"], days=values["days"])
        else:
            created = service_accounts.create_service_account(request.user, workspace, values["name"], values["role"])
            messages.success(request, gettext("Service account %(user)s made: mint it a token below.") % {
                "user": created.user.username})
    except DomainError as error:
        errors = {("token_name" if "token_name" in post and k == "name" else k): v for k, v in error.errors.items()}
        context = _workspace_context(request, workspace, errors=errors, account=account,
                                     values={**values, "days": values["days"] or str(services.DEFAULT_TOKEN_DAYS)})
        return render(request, "portal/workspace_detail.html", context, status=error.status)
    if new_raw is None:
        return redirect(reverse("workspace", args=[workspace.slug]) + "#service-accounts")
    context = _workspace_context(request, workspace, new_token=new_token, new_raw=new_raw, account=account)
    return render(request, "portal/workspace_detail.html", context)


@login_required
@require_POST
def workspace_ssh(request, slug):
    """The workspace page's SSH switch (owners; members get a 403, others a 404)."""
    workspace = get_workspace_for_user(request.user, slug)
    enabled = request.POST.get("ssh_enabled") == "1"
    ssh_access.set_workspace_ssh(request.user, workspace, enabled)
    messages.success(request, gettext("SSH is on in this workspace.") if enabled
                     else gettext("SSH is off in this workspace: the gateway refuses new sessions."))
    return redirect(reverse("workspace", args=[workspace.slug]) + "#ssh")


@require_POST
@login_required
def switch_workspace(request):
    workspace = services.switch_workspace(request, request.POST.get("workspace", ""))
    messages.info(request, f"Switched to {workspace.name}.")
    target = request.POST.get("next") or "dashboard"
    if target != "dashboard" and not url_has_allowed_host_and_scheme(target, {request.get_host()}):
        target = "dashboard"
    return redirect(target)
