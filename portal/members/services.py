"""Writes: an owner adds a member, changes a role, removes a member. Each goes through the console's
service (one transaction, the workspace locked, the last owner kept, an audit line with source
"tenant")."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext

from portal.console import services as console
from portal.console.models import AuditEntry
from portal.members.selectors import membership_of
from portal.models import Membership, Workspace

TENANT = AuditEntry.Source.TENANT


class NotOwner(PermissionDenied):
    """Only an owner of the workspace manages its members."""


def require_owner(user, workspace: Workspace) -> Membership:
    membership = membership_of(user, workspace)
    if membership is None or not membership.can_manage_members:
        raise NotOwner(gettext("only an owner of %(workspace)s manages its members") % {"workspace": workspace.slug})
    return membership


def add_member(owner, workspace: Workspace, username_or_email: str, role: str) -> Membership:
    """Add an account (by username or e-mail) with `role`; someone already a member is refused
    (their role is changed in the list, on purpose)."""
    require_owner(owner, workspace)
    user = console.find_user(username_or_email)
    existing = workspace.memberships.filter(user=user).first()
    if existing is not None:
        raise console.ConsoleError({"username": gettext("%(user)s is already %(role)s of %(workspace)s: change their "
                                                        "role in the list") % {
            "user": user.username, "role": existing.get_role_display().lower(), "workspace": workspace.slug}})
    return console.set_member(owner, workspace, user.username, role, source=TENANT)


def change_role(owner, membership: Membership, role: str) -> Membership:
    require_owner(owner, membership.workspace)
    return console.set_member(owner, membership.workspace, membership.user.username, role, source=TENANT)


def remove_member(owner, membership: Membership) -> None:
    require_owner(owner, membership.workspace)
    console.remove_member(owner, membership, source=TENANT)
