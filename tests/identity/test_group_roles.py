"""Groups to roles: what a company directory's groups give, applied at each sign-in or SCIM change, and taken
back when the groups stop giving it; memberships made by hand are never touched."""

from __future__ import annotations

import pytest

from portal.console.models import AuditEntry
from portal.identity.groups import apply_group_roles, wanted
from portal.models import GroupRoleMapping, GroupStaff, Membership, Role
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana():
    return UserFactory(username="dana")


def roles_of(user) -> dict[str, tuple[str, str]]:
    return {m.workspace.slug: (m.role, m.source) for m in Membership.objects.filter(user=user)
            .select_related("workspace")}


def test_a_group_gives_its_role_marked_with_the_source_and_audited(tenants, dana):
    GroupRoleMapping.objects.create(group="ml-vision-owners", workspace=tenants.vision, role=Role.OWNER)
    changes = apply_group_roles(dana, ["ml-vision-owners", "unrelated"], source="oidc:corp")
    assert roles_of(dana) == {"vision-lab": ("owner", "oidc:corp")}
    assert changes.added == ["owner of vision-lab"] and not changes.removed
    entry = AuditEntry.objects.get(action="group role added")
    assert entry.changes == {"role": [None, "owner"]} and "dana" in entry.message and "oidc:corp" in entry.message


def test_the_strongest_role_wins_and_a_later_sign_in_changes_it(tenants, dana):
    GroupRoleMapping.objects.create(group="vision-viewers", workspace=tenants.vision, role=Role.VIEWER)
    GroupRoleMapping.objects.create(group="vision-devs", workspace=tenants.vision, role=Role.MEMBER)
    apply_group_roles(dana, ["vision-viewers", "vision-devs"], source="ldap")
    assert roles_of(dana) == {"vision-lab": ("member", "ldap")}
    changes = apply_group_roles(dana, ["vision-viewers"], source="ldap")
    assert roles_of(dana) == {"vision-lab": ("viewer", "ldap")} and changes.changed == ["viewer of vision-lab"]


def test_a_group_gone_removes_what_it_gave_but_never_a_membership_made_by_hand(tenants, dana):
    GroupRoleMapping.objects.create(group="vision-devs", workspace=tenants.vision, role=Role.MEMBER)
    GroupRoleMapping.objects.create(group="nlp-devs", workspace=tenants.nlp, role=Role.MEMBER)
    Membership.objects.create(user=dana, workspace=tenants.nlp, role=Role.VIEWER)  # by hand
    apply_group_roles(dana, ["vision-devs", "nlp-devs"], source="scim")
    assert roles_of(dana) == {"vision-lab": ("member", "scim"), "nlp-group": ("viewer", "")}
    changes = apply_group_roles(dana, [], source="scim")
    assert roles_of(dana) == {"nlp-group": ("viewer", "")}
    assert changes.removed == ["member of vision-lab"]
    assert AuditEntry.objects.filter(action="group role removed").count() == 1


def test_one_source_never_takes_back_what_another_gave(tenants, dana):
    GroupRoleMapping.objects.create(group="vision-devs", workspace=tenants.vision, role=Role.MEMBER)
    apply_group_roles(dana, ["vision-devs"], source="ldap")
    assert not apply_group_roles(dana, [], source="oidc:corp")
    assert roles_of(dana) == {"vision-lab": ("member", "ldap")}


def test_the_setting_maps_groups_too_and_a_bad_entry_is_left_out(tenants, dana, settings, caplog):
    settings.IDENTITY_GROUP_ROLES = {"ml-nlp": [{"workspace": "nlp-group", "role": "owner"}],
                                     "broken": [{"workspace": "nlp-group", "role": "emperor"}, "text"],
                                     "ghost": [{"workspace": "no-such-workspace", "role": "member"}]}
    apply_group_roles(dana, ["ml-nlp", "broken", "ghost"], source="oidc:corp")
    assert roles_of(dana) == {"nlp-group": ("owner", "oidc:corp")}
    assert "emperor" in caplog.text and "no-such-workspace" in caplog.text


def test_staff_from_a_group_is_given_and_taken_back_but_staff_by_hand_stays(tenants, dana):
    GroupRoleMapping.objects.create(group="platform-admins", staff=True)
    assert apply_group_roles(dana, ["platform-admins"], source="oidc:corp").staff is True
    dana.refresh_from_db()
    assert dana.is_staff and GroupStaff.objects.filter(user=dana, source="oidc:corp").exists()
    assert apply_group_roles(dana, [], source="oidc:corp").staff is False
    dana.refresh_from_db()
    assert not dana.is_staff

    operator = tenants.admin  # staff by hand
    apply_group_roles(operator, ["platform-admins"], source="oidc:corp")
    apply_group_roles(operator, [], source="oidc:corp")
    operator.refresh_from_db()
    assert operator.is_staff


def test_a_second_tenants_groups_give_nothing_in_the_first(tenants, dana):
    GroupRoleMapping.objects.create(group="ml-vision-owners", workspace=tenants.vision, role=Role.OWNER)
    GroupRoleMapping.objects.create(group="ml-nlp-owners", workspace=tenants.nlp, role=Role.OWNER)
    apply_group_roles(dana, ["ml-nlp-owners"], source="oidc:corp")
    assert roles_of(dana) == {"nlp-group": ("owner", "oidc:corp")}
    assert wanted(["ml-nlp-owners"]) == ({tenants.nlp.pk: "owner"}, False)


def test_a_mapping_gives_a_role_in_a_workspace_or_staff(tenants):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        GroupRoleMapping.objects.create(group="nothing")
    with pytest.raises(IntegrityError), transaction.atomic():
        GroupRoleMapping.objects.create(group="no-role", workspace=tenants.vision)


def test_operators_map_groups_on_the_console_and_bad_input_changes_nothing(client, tenants):
    client.force_login(tenants.admin)
    page = client.get("/console/identity/groups/")
    assert page.status_code == 200 and b"group-role-form" in page.content
    answer = client.post("/console/identity/groups/", {"group": "ml-vision-owners", "workspace": "vision-lab",
                                                       "role": "owner"})
    assert answer.status_code == 302
    mapping = GroupRoleMapping.objects.get(group="ml-vision-owners")
    assert (mapping.workspace, mapping.role, mapping.staff) == (tenants.vision, "owner", False)
    assert AuditEntry.objects.filter(action="create", target_type="portal.grouprolemapping").exists()
    for bad in ({"group": "g", "workspace": "vision-lab"}, {"group": "g"}, {"group": "g", "workspace": "nope",
                                                                           "role": "owner"},
                {"group": "g", "role": "emperor", "staff": "on"}):
        refused = client.post("/console/identity/groups/", bad)
        assert refused.status_code == 400 and b"field-errors" in refused.content
    assert GroupRoleMapping.objects.count() == 1
    client.post("/console/identity/groups/", {"delete": mapping.pk})
    assert not GroupRoleMapping.objects.exists()


def test_only_operators_see_the_mapping_page(client, tenants):
    client.force_login(tenants.alice)  # a workspace owner, not staff
    assert client.get("/console/identity/groups/").status_code in (302, 403, 404)
    assert client.post("/console/identity/groups/", {"group": "g", "staff": "on"}).status_code in (302, 403, 404)
    assert not GroupRoleMapping.objects.exists()


def test_a_service_account_is_never_mapped(tenants):
    from portal.service_accounts import create_service_account

    GroupRoleMapping.objects.create(group="ml-nlp-owners", workspace=tenants.nlp, role=Role.OWNER)
    account = create_service_account(tenants.alice, tenants.vision, name="ci", role=Role.MEMBER)
    assert not apply_group_roles(account.user, ["ml-nlp-owners"], source="scim")
    assert roles_of(account.user) == {"vision-lab": ("member", "")}
