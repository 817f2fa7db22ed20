"""Groups to roles: a company directory's groups give workspace roles and staff.

Mappings are `GroupRoleMapping` rows (the console's page) and the setting IDENTITY_GROUP_ROLES
(`{"ml-vision-owners": [{"workspace": "vision-lab", "role": "owner"}], "admins": [{"staff": true}]}`).
`apply_group_roles` runs at each sign-in (OIDC, LDAP) and each SCIM change with the person's groups. A
membership it makes is marked with its source and removed when that source's groups stop giving it; a
membership made by hand, or by another source, is never touched. Where several groups give roles in one
workspace, the strongest wins.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from portal.console import audit
from portal.models import GroupRoleMapping, GroupStaff, Membership, Role, ServiceAccount, Workspace

log = logging.getLogger(__name__)

STRENGTH = {Role.OWNER: 3, Role.MEMBER: 2, Role.FINANCE: 1, Role.VIEWER: 0}


@dataclass
class GroupChanges:
    added: list[str] = field(default_factory=list)     # "role of slug"
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    staff: bool | None = None                            # True: made staff, False: no longer, None: as it was

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed or self.staff is not None)


def _setting_mappings() -> list[tuple[str, str | None, str, bool]]:
    """(group, workspace slug, role, staff) from IDENTITY_GROUP_ROLES; a malformed entry is logged and left out."""
    found = []
    for group, entries in (getattr(settings, "IDENTITY_GROUP_ROLES", None) or {}).items():
        for entry in entries if isinstance(entries, list) else [entries]:
            if not isinstance(entry, dict):
                log.warning("IDENTITY_GROUP_ROLES[%r]: %r is not a mapping", group, entry)
                continue
            slug, role, staff = entry.get("workspace"), entry.get("role") or "", bool(entry.get("staff"))
            if (slug and role not in Role.values) or (not slug and not staff):
                log.warning("IDENTITY_GROUP_ROLES[%r]: %r needs a workspace and one of the roles %s, or staff",
                            group, entry, ", ".join(Role.values))
                continue
            found.append((str(group), slug, role, staff))
    return found


def wanted(groups: Iterable[str]) -> tuple[dict[int, str], bool]:
    """What these groups give: {workspace id: strongest role} and whether staff."""
    names = {str(g) for g in groups}
    roles: dict[int, str] = {}
    staff = False

    def give(workspace_id: int, role: str) -> None:
        if STRENGTH[role] > STRENGTH.get(roles.get(workspace_id), -1):
            roles[workspace_id] = role

    for workspace_id, role, is_staff in GroupRoleMapping.objects.filter(group__in=names).values_list(
            "workspace_id", "role", "staff"):
        staff |= is_staff
        if workspace_id and role:
            give(workspace_id, role)
    configured = [m for m in _setting_mappings() if m[0] in names]
    slugs = dict(Workspace.objects.filter(slug__in={m[1] for m in configured if m[1]}).values_list("slug", "id"))
    for _group, slug, role, is_staff in configured:
        staff |= is_staff
        if slug in slugs:
            give(slugs[slug], role)
        elif slug:
            log.warning("IDENTITY_GROUP_ROLES names workspace %r, which does not exist", slug)
    return roles, staff


@transaction.atomic
def apply_group_roles(user, groups: Iterable[str], *, source: str) -> GroupChanges:
    """Make `user`'s memberships (and staff) from `source` what `groups` give now; audited."""
    changes = GroupChanges()
    if ServiceAccount.objects.filter(user_id=user.pk).exists():
        return changes  # a service account's one membership is its workspace's to set
    roles, staff = wanted(groups)
    slugs = dict(Workspace.objects.filter(pk__in=roles).values_list("id", "slug"))
    held = {m.workspace_id: m for m in Membership.objects.select_for_update().filter(user=user)
            .select_related("workspace")}
    for workspace_id, role in roles.items():
        membership = held.get(workspace_id)
        if membership is None:
            membership = Membership.objects.create(user=user, workspace_id=workspace_id, role=role, source=source)
            changes.added.append(f"{role} of {slugs[workspace_id]}")
            _audit(user, "group role added", membership, source, {"role": [None, role]})
        elif membership.source == source and membership.role != role:
            before, membership.role = membership.role, role
            membership.save(update_fields=["role"])
            changes.changed.append(f"{role} of {slugs[workspace_id]}")
            _audit(user, "group role changed", membership, source, {"role": [before, role]})
    for workspace_id, membership in held.items():
        if membership.source == source and workspace_id not in roles:
            _audit(user, "group role removed", membership, source, {"role": [membership.role, None]})
            changes.removed.append(f"{membership.role} of {membership.workspace.slug}")
            membership.delete()
    marked = GroupStaff.objects.filter(user=user, source=source)
    if staff and not user.is_staff:  # marked only when the groups made it: staff given by hand stays
        GroupStaff.objects.get_or_create(user=user, source=source)
        user.is_staff = True
        user.save(update_fields=["is_staff"])
        changes.staff = True
        _audit(user, "group staff added", user, source, {"is_staff": [False, True]})
    elif not staff and marked.exists():
        marked.delete()
        if user.is_staff and not GroupStaff.objects.filter(user=user).exists():
            user.is_staff = False
            user.save(update_fields=["is_staff"])
            changes.staff = False
            _audit(user, "group staff removed", user, source, {"is_staff": [True, False]})
    return changes


def _audit(user, action: str, target, source: str, changes: dict) -> None:
    audit.record(None, action, target, changes=changes, source=audit.AuditEntry.Source.SIGN_IN,
                 message=f"{user.username}: from the groups of {source}")
