"""Tenant job list (`/jobs/`): one of the caller's workspaces, with filters, search, sorting and pages on
the server, and cancelling several jobs at once after a confirmation page. Thin views over
portal.job_lists (shared with the operators' list) and scheduling.services.cancel_job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_safe

from portal import job_lists
from portal import selectors as portal_selectors
from portal.pages.job_filters import WorkspaceJobFilterForm
from scheduling.api import DomainError, clock, services
from scheduling.models import Job

MAX_PARAMETER_LENGTH = 200
MAX_BULK = job_lists.MAX_PAGE_SIZE  # one page's jobs at most
JOB_ID_DIGITS = 18


def _workspace(request, slug: str | None):
    """The listed workspace: the one asked for (404 unless the caller is a member), else the current."""
    if slug:
        return portal_selectors.get_workspace_for_user(request.user, slug[:MAX_PARAMETER_LENGTH])
    return portal_selectors.current_workspace(request)


def _may_cancel(request, workspace) -> bool:
    membership = portal_selectors.my_membership(request, workspace)
    return bool(membership and membership.can_submit)


@require_safe
@login_required
def job_list(request):
    slug = request.GET.get("workspace")
    if not slug and request.user.is_staff and portal_selectors.current_workspace(request) is None:
        return redirect("console-jobs")  # an operator of no workspace: every workspace's jobs
    workspace = _workspace(request, slug)
    template = "scheduling/_job_table.html" if request.GET.get("partial") else "scheduling/job_list.html"
    context: dict[str, Any] = {"workspace": workspace, "operator": request.user.is_staff, "rows": [], "page": None}
    if workspace is None:
        return render(request, template, context)
    data = request.GET.copy()
    data.setdefault("workspace", workspace.slug)
    form = WorkspaceJobFilterForm(data, workspace=workspace, workspaces=portal_selectors.my_workspaces(request))
    context.update(form=form, may_cancel=_may_cancel(request, workspace))
    if not form.is_valid():
        return render(request, template, context, status=400)
    filters = form.filters()
    number, size = form.paging()
    # the rows' placements come in one query for the page (job_rows), not per job
    jobs = portal_selectors.jobs_for(request.user, workspace=workspace).select_related("submitted_by")
    jobs = jobs.prefetch_related(None).defer(*job_lists.NOT_LISTED)
    page = Paginator(job_lists.filter_jobs(jobs, filters), size).get_page(number)
    here = request.path + (f"?{query}" if (query := job_lists.list_query(request.GET, drop=("partial",))) else "")
    context.update(
        page=page, rows=job_lists.job_rows(page.object_list, now=clock.now()), sort=filters.sort,
        sort_links=job_lists.sort_links(request.GET, filters.sort), page_query=job_lists.list_query(request.GET),
        live_src=f"{request.path}?{job_lists.list_query(request.GET, drop=('partial',), partial='1')}", here=here,
        filtered=any(v for k, v in request.GET.items() if k not in ("workspace", "page", "page_size", "sort", "partial")),
    )
    return render(request, template, context)


# --------------------------------------------------------------------------- cancel several


@dataclass
class Selected:
    """One job id the caller selected, and why it cannot be cancelled ("" when it can)."""

    id: int
    job: Job | None
    refusal: str


def _selected_ids(values: list[str]) -> list[int]:
    """The `job` parameters as ids, each once, in order; a clear error for anything else."""
    if not values:
        raise DomainError(gettext("select at least one job to cancel"), field="job")
    if len(values) > MAX_BULK:
        raise DomainError(gettext("at most %(jobs)s jobs at once") % {"jobs": MAX_BULK}, field="job")
    ids: list[int] = []
    for value in values:
        text = value.strip().removeprefix("#")
        if not text.isdigit() or len(text) > JOB_ID_DIGITS:
            raise DomainError(gettext("%(value)s is not a job number") % {"value": value[:40]}, field="job")
        if int(text) not in ids:
            ids.append(int(text))
    return ids


def _selection(user, workspace, ids: list[int]) -> list[Selected]:
    found = portal_selectors.jobs_for(user, workspace=workspace).in_bulk(ids)
    out = []
    for pk in ids:
        job = found.get(pk)
        if job is None:
            out.append(Selected(pk, None, gettext("no job #%(job)s in %(workspace)s") % {"job": pk, "workspace": workspace.slug}))
        elif job.is_final:
            out.append(Selected(pk, job, gettext("already %(state)s") % {"state": job.state}))
        else:
            out.append(Selected(pk, job, ""))
    return out


def _back(request, workspace) -> str:
    """Back to the list the caller came from (its filters and page), else the workspace's list."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target.startswith("/jobs/") and len(target) <= 2000 and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return f"{reverse('jobs')}?workspace={workspace.slug}"


def _said(error: Exception) -> str:
    """A refusal's messages without their field names."""
    if isinstance(error, DomainError):
        return "; ".join(m for ms in error.errors.values() for m in ms)
    return str(error)


def _cancel_each(request, selection: list[Selected]) -> None:
    """Each job on its own (one that cannot be cancelled does not stop the others); one message for
    what was done and one for what was not."""
    done, refused = [], []
    for item in selection:
        if item.refusal:
            refused.append(f"#{item.id} ({item.refusal})")
            continue
        try:
            job = services.cancel_job(user=request.user, job=item.job)
            done.append(f"{job.name} #{job.pk}")
        except (DomainError, PermissionDenied) as error:
            refused.append(f"{item.job.name} #{item.id} ({_said(error)})")
    if done:
        messages.success(request, (gettext("Cancelled %(count)s jobs: %(jobs)s.") if len(done) > 1
                                   else gettext("Cancelled %(count)s job: %(jobs)s.")) % {
            "count": len(done), "jobs": ", ".join(done)})
    if refused:
        messages.error(request, gettext("Not cancelled: %(jobs)s.") % {"jobs": "; ".join(refused)})


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def job_bulk_cancel(request):
    """GET (or a POST without `confirm=1`): what would be cancelled; POST with `confirm=1`: cancel."""
    params = request.POST if request.method == "POST" else request.GET
    workspace = _workspace(request, params.get("workspace"))
    if workspace is None:
        raise PermissionDenied(gettext("you are a member of no workspace"))
    if not _may_cancel(request, workspace):
        raise PermissionDenied(
            gettext("your role in '%(workspace)s' may not submit or cancel jobs") % {"workspace": workspace.slug})
    context: dict[str, Any] = {"workspace": workspace, "next": _back(request, workspace), "selection": [],
                               "errors": []}
    try:
        ids = _selected_ids(params.getlist("job"))
    except DomainError as error:
        context["errors"] = [_said(error)]
        return render(request, "scheduling/job_bulk_cancel.html", context, status=400)
    selection = _selection(request.user, workspace, ids)
    if request.method == "POST" and params.get("confirm") == "1":
        _cancel_each(request, selection)
        return redirect(context["next"])
    context.update(selection=selection, cancellable=[s for s in selection if not s.refusal])
    return render(request, "scheduling/job_bulk_cancel.html", context)
