"""A workspace's owners manage its members on its Members page: add by username or e-mail with a
role, change roles, remove after a confirmation; the last owner stays; every change is in the
audit log; members, viewers and finance see the list and cannot act; outsiders (bob) get a 404."""

import pytest
from django.core.exceptions import PermissionDenied

from portal.console.models import AuditEntry
from portal.console.services import ConsoleError
from portal.members import services
from portal.models import Membership, Role
from tests.factories import MembershipFactory, UserFactory


@pytest.fixture
def viewer(tenants):
    user = UserFactory(username="victor", email="victor@example.com")
    MembershipFactory(user=user, workspace=tenants.vision, role=Role.VIEWER)
    return user


@pytest.fixture
def dave(db):
    return UserFactory(username="dave", email="Dave.Jones@example.org")


def roles(workspace):
    return dict(workspace.memberships.values_list("user__username", "role"))


# --------------------------------------------------------------------------- services


def test_an_owner_adds_by_username_or_email_and_each_change_is_audited(tenants, dave):
    services.add_member(tenants.alice, tenants.vision, "dave.jones@EXAMPLE.org", Role.VIEWER)
    assert roles(tenants.vision)["dave"] == Role.VIEWER
    membership = tenants.vision.memberships.get(user=dave)
    services.change_role(tenants.alice, membership, Role.FINANCE)
    services.remove_member(tenants.alice, tenants.vision.memberships.get(user=dave))
    assert "dave" not in roles(tenants.vision)
    entries = AuditEntry.objects.filter(target_type="portal.membership").order_by("id")
    assert [(e.username, e.source, e.action, e.changes["role"]) for e in entries] == [
        ("alice", "tenant", "create", [None, "viewer"]),
        ("alice", "tenant", "change", ["viewer", "finance"]),
        ("alice", "tenant", "delete", ["finance", None]),
    ]


def test_unknown_user_role_and_existing_member_are_refused_by_field(tenants, dave):
    with pytest.raises(ConsoleError) as unknown:
        services.add_member(tenants.alice, tenants.vision, "nobody@example.org", Role.MEMBER)
    assert "no user named 'nobody@example.org'" in unknown.value.errors["username"][0]
    with pytest.raises(ConsoleError) as bad_role:
        services.add_member(tenants.alice, tenants.vision, "dave", "admin")
    assert "role" in bad_role.value.errors
    with pytest.raises(ConsoleError) as existing:
        services.add_member(tenants.alice, tenants.vision, "carol", Role.OWNER)
    assert "already member of vision-lab" in existing.value.errors["username"][0]
    assert roles(tenants.vision) == {"alice": "owner", "carol": "member", "finance": "finance"}
    assert not AuditEntry.objects.exists()


def test_the_last_owner_is_neither_demoted_nor_removed(tenants):
    alice = tenants.vision.memberships.get(user=tenants.alice)
    with pytest.raises(ConsoleError, match="last owner"):
        services.change_role(tenants.alice, alice, Role.MEMBER)
    with pytest.raises(ConsoleError, match="last owner"):
        services.remove_member(tenants.alice, alice)
    assert roles(tenants.vision)["alice"] == Role.OWNER
    services.change_role(tenants.alice, tenants.vision.memberships.get(user=tenants.carol), Role.OWNER)
    services.remove_member(tenants.alice, alice)  # carol owns it now
    assert roles(tenants.vision) == {"carol": "owner", "finance": "finance"}


@pytest.mark.parametrize("who", ["carol", "finance", "victor", "bob"])
def test_only_an_owner_of_this_workspace_manages_its_members(tenants, viewer, dave, who):
    user = {"carol": tenants.carol, "finance": tenants.finance, "victor": viewer, "bob": tenants.bob}[who]
    before = roles(tenants.vision)
    with pytest.raises(PermissionDenied):
        services.add_member(user, tenants.vision, "dave", Role.OWNER)
    with pytest.raises(PermissionDenied):
        services.change_role(user, tenants.vision.memberships.get(user=tenants.carol), Role.OWNER)
    with pytest.raises(PermissionDenied):
        services.remove_member(user, tenants.vision.memberships.get(user=tenants.alice))
    assert roles(tenants.vision) == before and not AuditEntry.objects.exists()


def test_bob_owns_his_workspace_and_nothing_of_vision(tenants, dave):
    services.add_member(tenants.bob, tenants.nlp, "dave", Role.MEMBER)
    assert roles(tenants.nlp)["dave"] == "member" and "dave" not in roles(tenants.vision)


# --------------------------------------------------------------------------- pages


def test_the_owner_sees_the_forms_and_adds_a_member(client, tenants, dave):
    client.force_login(tenants.alice)
    page = client.get("/w/vision-lab/members/").content.decode()
    assert 'id="add-member"' in page and 'id="remove-carol"' in page and 'data-member="finance"' in page
    response = client.post("/w/vision-lab/members/", {"username": "dave.jones@example.org", "role": "viewer"},
                           follow=True)
    assert response.redirect_chain[-1][0] == "/w/vision-lab/members/"
    assert "dave added to vision-lab as viewer." in response.content.decode()
    assert roles(tenants.vision)["dave"] == "viewer"


def test_errors_show_beside_their_field_and_change_nothing(client, tenants):
    client.force_login(tenants.alice)
    response = client.post("/w/vision-lab/members/", {"username": "nobody", "role": "member"})
    assert response.status_code == 400
    row = response.content.decode().split('data-field-row="username"')[1].split("</div>")[0]
    assert "no user named &#x27;nobody&#x27;" in row
    response = client.post("/w/vision-lab/members/", {"username": "", "role": "boss"})
    page = response.content.decode()
    assert response.status_code == 400
    assert "This field is required" in page.split('data-field-row="username"')[1].split("</div>")[0]
    assert "not one of the available choices" in page.split('data-field-row="role"')[1].split("</div>")[0]
    assert roles(tenants.vision) == {"alice": "owner", "carol": "member", "finance": "finance"}


def test_changing_a_role_from_the_list(client, tenants):
    client.force_login(tenants.alice)
    carol = tenants.vision.memberships.get(user=tenants.carol)
    response = client.post("/w/vision-lab/members/", {"member": carol.pk, "role": "viewer"}, follow=True)
    assert "carol is now viewer of vision-lab." in response.content.decode()
    alice = tenants.vision.memberships.get(user=tenants.alice)
    refused = client.post("/w/vision-lab/members/", {"member": alice.pk, "role": "member"})
    assert refused.status_code == 400 and "last owner" in refused.content.decode()
    assert roles(tenants.vision) == {"alice": "owner", "carol": "viewer", "finance": "finance"}


def test_removing_asks_first_and_the_last_owner_stays(client, tenants):
    client.force_login(tenants.alice)
    carol = tenants.vision.memberships.get(user=tenants.carol)
    confirm = client.get(f"/w/vision-lab/members/{carol.pk}/remove/").content.decode()
    assert 'id="confirm-remove"' in confirm and "will lose access" in confirm
    assert Membership.objects.filter(pk=carol.pk).exists()  # a GET changes nothing
    done = client.post(f"/w/vision-lab/members/{carol.pk}/remove/", follow=True)
    assert "carol removed from vision-lab." in done.content.decode()
    assert not Membership.objects.filter(pk=carol.pk).exists()
    alice = tenants.vision.memberships.get(user=tenants.alice)
    page = client.get(f"/w/vision-lab/members/{alice.pk}/remove/").content.decode()
    assert 'id="remove-refused"' in page and 'id="confirm-remove"' not in page
    refused = client.post(f"/w/vision-lab/members/{alice.pk}/remove/")
    assert refused.status_code == 400 and "last owner" in refused.content.decode()
    assert Membership.objects.filter(pk=alice.pk).exists()


@pytest.mark.parametrize("who", ["carol", "finance", "victor"])
def test_members_viewers_and_finance_see_the_list_and_cannot_act(client, tenants, viewer, dave, who):
    user = {"carol": tenants.carol, "finance": tenants.finance, "victor": viewer}[who]
    client.force_login(user)
    page = client.get("/w/vision-lab/members/")
    html = page.content.decode()
    assert page.status_code == 200 and 'data-member="alice"' in html and 'id="read-only"' in html
    assert 'id="add-member"' not in html and "/remove/" not in html and 'name="role"' not in html
    carol = tenants.vision.memberships.get(user=tenants.carol)
    before = roles(tenants.vision)
    assert client.post("/w/vision-lab/members/", {"username": "dave", "role": "owner"}).status_code == 403
    assert client.post("/w/vision-lab/members/", {"member": carol.pk, "role": "owner"}).status_code == 403
    assert client.get(f"/w/vision-lab/members/{carol.pk}/remove/").status_code == 403
    assert client.post(f"/w/vision-lab/members/{carol.pk}/remove/").status_code == 403
    assert roles(tenants.vision) == before


def test_an_outsider_gets_404_everywhere_and_changes_nothing(client, tenants, dave):
    client.force_login(tenants.bob)
    carol = tenants.vision.memberships.get(user=tenants.carol)
    assert client.get("/w/vision-lab/members/").status_code == 404
    assert client.post("/w/vision-lab/members/", {"username": "dave", "role": "owner"}).status_code == 404
    assert client.get(f"/w/vision-lab/members/{carol.pk}/remove/").status_code == 404
    assert client.post(f"/w/vision-lab/members/{carol.pk}/remove/").status_code == 404
    # his own workspace's page with a member of vision-lab: not his member, a 404
    assert client.post(f"/w/nlp-group/members/{carol.pk}/remove/").status_code == 404
    assert client.post("/w/nlp-group/members/", {"member": carol.pk, "role": "owner"}).status_code == 404
    assert roles(tenants.vision) == {"alice": "owner", "carol": "member", "finance": "finance"}
    assert not AuditEntry.objects.exists()


def test_the_workspace_page_links_to_the_members_page(client, tenants):
    client.force_login(tenants.carol)
    assert 'href="/w/vision-lab/members/"' in client.get("/w/vision-lab/").content.decode()
