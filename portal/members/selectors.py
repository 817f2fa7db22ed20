"""Reads: a workspace's members, for its members only."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from portal.models import Membership, Role, Workspace


def membership_of(user, workspace: Workspace) -> Membership | None:
    if not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, workspace=workspace).first()


def members_of(workspace: Workspace) -> QuerySet[Membership]:
    """People only: its service accounts are listed on the workspace page."""
    return (workspace.memberships.filter(user__service_account__isnull=True).select_related("user")
            .order_by("user__username"))


def get_member(workspace: Workspace, member_id) -> Membership:
    """A membership of this workspace (already checked to be the caller's), else 404."""
    try:
        return workspace.memberships.select_related("user", "workspace").get(pk=int(member_id))
    except (Membership.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such member") from None


def is_last_owner(membership: Membership) -> bool:
    return membership.role == Role.OWNER and not membership.workspace.memberships.filter(
        role=Role.OWNER).exclude(pk=membership.pk).exists()
