"""Reads, always scoped to what the user may see."""

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import QuerySet
from django.http import Http404

from portal import time_zones
from portal.models import Membership, UserPreference, Workspace
from scheduling import kinds
from scheduling.api import schedules as scheduling_schedules
from scheduling.api import selectors as scheduling_selectors


def workspaces_for(user) -> QuerySet[Workspace]:
    if not user.is_authenticated:
        return Workspace.objects.none()
    return Workspace.objects.filter(memberships__user=user).distinct()


def membership_for(user, workspace: Workspace) -> Membership | None:
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, workspace=workspace).first()


def get_workspace_for_user(user, slug: str) -> Workspace:
    """The one way to fetch a workspace by slug: 404 unless the user is a member."""
    workspace = workspaces_for(user).filter(slug=slug).first()
    if workspace is None:
        raise Http404("No such workspace")
    return workspace


def memberships_of(request) -> list[Membership]:
    """The signed-in user's memberships, each with its workspace, by workspace slug. Read once per request
    (the page's header, its workspace switcher and the view all ask), again if the user changed meanwhile."""
    user = request.user
    kept = getattr(request, "_memberships", None)
    if kept is not None and kept[0] == user.pk:
        return kept[1]
    rows = list(Membership.objects.filter(user=user).select_related("workspace").order_by("workspace__slug")
                ) if user.is_authenticated else []
    request._memberships = (user.pk, rows)
    return rows


def my_workspaces(request) -> list[Workspace]:
    """The signed-in user's workspaces, by slug, from the request's memberships."""
    return [m.workspace for m in memberships_of(request)]


def my_membership(request, workspace: Workspace | None) -> Membership | None:
    """The signed-in user's membership of `workspace`, from the request's memberships."""
    if workspace is None:
        return None
    return next((m for m in memberships_of(request) if m.workspace_id == workspace.pk), None)


def current_workspace(request) -> Workspace | None:
    """The workspace chosen with the switcher, else the user's first one."""
    slug = request.session.get("workspace") if hasattr(request, "session") else None
    mine = my_workspaces(request)
    return (slug and next((w for w in mine if w.slug == slug), None)) or (mine[0] if mine else None)


def jobs_for(user, *, workspace=None, state: str | None = None) -> QuerySet:
    return scheduling_selectors.jobs_in(workspaces_for(user), workspace=workspace, state=state)


def get_job_for_user(user, job_id):
    """The one way to fetch a job by id: 404 unless it belongs to one of the user's workspaces."""
    try:
        return jobs_for(user).get(pk=int(job_id))
    except (ObjectDoesNotExist, ValueError, TypeError):
        raise Http404("No such job") from None


def schedules_for(user, *, workspace=None) -> QuerySet:
    """The schedules of the user's workspaces (or of one of them)."""
    return scheduling_schedules.schedules_in(workspaces_for(user), workspace=workspace)


def get_schedule_for_user(user, schedule_id):
    """The one way to fetch a schedule by id: 404 unless it belongs to one of the user's workspaces."""
    try:
        return schedules_for(user).get(pk=int(schedule_id))
    except (ObjectDoesNotExist, ValueError, TypeError):
        raise Http404("No such schedule") from None


def workloads_for(user, workspace, page: str, *, ended: bool | None = None) -> QuerySet:
    """The workspace's jobs of the kinds a page lists (notebooks, services: the kinds' `listed_on`), newest
    first (404 before this for a workspace that is not the user's); `ended` True: only those that ended,
    False: only the others."""
    from scheduling.models import FINAL_STATES

    jobs = jobs_for(user, workspace=workspace).filter(kind__in=kinds.listed_on(page)).select_related("workspace", "submitted_by", "queue")
    if ended is True:
        return jobs.filter(state__in=FINAL_STATES)
    if ended is False:
        return jobs.exclude(state__in=FINAL_STATES)
    return jobs


def get_workload_for_user(user, job_id, page: str, noun: str):
    """A job of a kind that page lists, by id: 404 unless it is one of the user's workspaces' jobs of such a kind."""
    job = get_job_for_user(user, job_id)
    if job.kind not in kinds.listed_on(page):
        raise Http404(f"No such {noun}")
    return job


def chosen_time_zone(user) -> str:
    """The zone the user chose, or "" for the platform's."""
    chosen = UserPreference.objects.filter(user=user).values_list("time_zone", flat=True).first()
    return chosen or ""


def chosen_language(user) -> str:
    """The interface language the user chose, or "" for the browser's (Accept-Language)."""
    chosen = UserPreference.objects.filter(user=user).values_list("language", flat=True).first()
    return chosen if chosen in dict(settings.LANGUAGES) else ""


def page_preferences(user) -> tuple[str, str]:
    """The zone and language the user chose ("" each: none) for the page middlewares: one query for
    both, kept on the request's user object (it lives one request). Pages that change them read
    chosen_time_zone / chosen_language afresh."""
    kept = getattr(user, "_page_preferences", None)
    if kept is None:
        row = UserPreference.objects.filter(user=user).values_list("time_zone", "language").first()
        kept = user._page_preferences = (row[0] or "", row[1] or "") if row else ("", "")
    return kept


def page_language(user) -> str:
    """chosen_language, read through page_preferences."""
    chosen = page_preferences(user)[1]
    return chosen if chosen in dict(settings.LANGUAGES) else ""


def time_zone_for(user) -> str:
    """The zone the user's pages show times in: their choice, else the platform's. One query, shared
    with page_language."""
    chosen = page_preferences(user)[0]
    # A zone the zone database no longer has (tzdata update) falls back rather than break pages.
    return chosen if time_zones.is_known(chosen) else settings.TIME_ZONE
