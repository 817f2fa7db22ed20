"""The console's users page and workspace members: staff only, every error beside its field (status 400,
nothing changed), confirmation before deactivating, resetting a password or removing a member, a success
message after each change, an audit entry for each, and a workspace never left without an owner."""

import pytest

from tests.world import PASSWORDS

STRONG = "violet-harbour-19"


def can_log_in(username, password):
    """Through the login page, in a browser of its own (the login throttle needs a request)."""
    from django.test import Client

    return Client().post("/login/", {"username": username, "password": password}).status_code == 302


def audit_actions(target_repr_part=""):
    from portal.console.models import AuditEntry

    entries = AuditEntry.objects.filter(target_repr__contains=target_repr_part).order_by("pk")
    return list(entries.values_list("action", flat=True))


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/console/users/", "/console/users/alice/deactivate/",
                                 "/console/users/alice/reactivate/", "/console/users/alice/password/",
                                 "/console/workspaces/vision-lab/members/1/remove/"])
def test_user_pages_are_for_operators_only(client, tenants, url):
    assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(tenants.bob)
    assert client.get(url).status_code == 403
    assert client.post(url, {"username": "eve", "password": STRONG}).status_code == 403


@pytest.mark.django_db
def test_a_tenant_cannot_create_deactivate_or_reset(client, tenants):
    from django.contrib.auth import get_user_model

    client.force_login(tenants.alice)
    client.post("/console/users/", {"username": "eve", "password": STRONG})
    client.post("/console/users/bob/deactivate/")
    client.post("/console/users/bob/password/", {"password": STRONG})
    assert not get_user_model().objects.filter(username="eve").exists()
    tenants.bob.refresh_from_db()
    assert tenants.bob.is_active and tenants.bob.check_password(PASSWORDS["bob"])
    assert audit_actions() == []


@pytest.mark.django_db
def test_the_list_shows_every_user_with_workspaces_roles_and_flags(admin_client, tenants):
    page = admin_client.get("/console/users/").content.decode()
    finance = page.split('data-user="finance"')[1].split("</tr>")[0]
    assert "nlp-group</a> (finance)" in finance and "vision-lab</a> (finance)" in finance
    admin = page.split('data-user="admin"')[1].split("</tr>")[0]
    assert '<td data-field="staff">yes</td>' in admin and "Deactivate" not in admin  # not oneself
    bob = page.split('data-user="bob"')[1].split("</tr>")[0]
    assert '<td data-field="staff">no</td>' in bob and "never" in bob and "Deactivate" in bob
    assert 'id="nav-console-users"' in page
    assert "Initial password" in page and "id_password_helptext" in page  # labels and help, not field names


@pytest.mark.django_db
def test_operator_creates_a_user_who_can_log_in(admin_client, tenants):
    from django.contrib.auth import get_user_model

    response = admin_client.post("/console/users/", {"username": "dave", "email": "dave@example.org",
                                                     "password": STRONG}, follow=True)
    assert "User dave created." in response.content.decode()
    dave = get_user_model().objects.get(username="dave")
    assert dave.is_active and not dave.is_staff and dave.email == "dave@example.org"
    assert audit_actions("dave") == ["create"]
    from portal.console.models import AuditEntry
    entry = AuditEntry.objects.get(target_repr="dave")
    assert entry.username == "admin" and "password" not in entry.changes  # never the password
    assert can_log_in("dave", STRONG)


@pytest.mark.django_db
def test_bad_new_user_shows_every_error_beside_its_field_and_creates_nothing(admin_client, tenants):
    from django.contrib.auth import get_user_model

    before = get_user_model().objects.count()
    response = admin_client.post("/console/users/", {"username": "Alice", "email": "not-an-email",
                                                     "password": "123"})
    assert response.status_code == 400
    page = response.content.decode()
    username = page.split('data-field-row="username"')[1].split("</div>")[0]
    assert "a user named &#x27;Alice&#x27; exists" in username
    email = page.split('data-field-row="email"')[1].split("</div>")[0]
    assert 'data-field="email"' in email
    password = page.split('data-field-row="password"')[1].split("</div>")[0]
    assert "too short" in password and "entirely numeric" in password  # every validator's message
    assert "password: " not in page and "username: " not in page  # no internal field names
    assert 'value="123"' not in page  # the password is not echoed back
    assert get_user_model().objects.count() == before and audit_actions() == []


@pytest.mark.django_db
def test_a_password_like_the_username_is_refused(admin_client, tenants):
    response = admin_client.post("/console/users/", {"username": "margaretta", "password": "margaretta1"})
    assert response.status_code == 400 and "too similar to the username" in response.content.decode()


@pytest.mark.django_db
def test_deactivation_asks_first_keeps_history_and_can_be_undone(admin_client, tenants):
    from portal.models import Membership

    confirm = admin_client.get("/console/users/carol/deactivate/").content.decode()
    assert 'id="confirm-active"' in confirm and "vision-lab (member)" in confirm
    tenants.carol.refresh_from_db()
    assert tenants.carol.is_active  # asking changed nothing
    done = admin_client.post("/console/users/carol/deactivate/", follow=True).content.decode()
    assert "User carol deactivated." in done
    tenants.carol.refresh_from_db()
    assert not tenants.carol.is_active
    assert Membership.objects.filter(user=tenants.carol, workspace=tenants.vision).exists()  # history kept
    assert not can_log_in("carol", PASSWORDS["carol"])
    admin_client.post("/console/users/carol/reactivate/")
    assert can_log_in("carol", PASSWORDS["carol"])
    assert audit_actions("carol") == ["deactivate", "login failed", "reactivate"]  # the refused sign-in too


@pytest.mark.django_db
def test_an_operator_cannot_deactivate_themselves(admin_client, tenants):
    operator = tenants.admin
    assert admin_client.get("/console/users/admin/deactivate/").status_code == 400
    response = admin_client.post("/console/users/admin/deactivate/")
    assert response.status_code == 400 and "cannot deactivate your own account" in response.content.decode()
    operator.refresh_from_db()
    assert operator.is_active and audit_actions() == []


@pytest.mark.django_db
def test_password_reset_asks_first_and_checks_the_validators(admin_client, tenants):
    page = admin_client.get("/console/users/bob/password/").content.decode()
    assert "current password stops working" in page and 'id="confirm-password"' in page
    weak = admin_client.post("/console/users/bob/password/", {"password": "password"})
    assert weak.status_code == 400 and "too common" in weak.content.decode().split('data-field-row="password"')[1]
    tenants.bob.refresh_from_db()
    assert tenants.bob.check_password(PASSWORDS["bob"]) and audit_actions() == []
    done = admin_client.post("/console/users/bob/password/", {"password": STRONG}, follow=True)
    assert "Password of bob reset." in done.content.decode()
    assert can_log_in("bob", STRONG)
    assert not can_log_in("bob", PASSWORDS["bob"])
    assert audit_actions("bob") == ["reset password", "login failed"]  # the old password's refused sign-in too


# --------------------------------------------------------------------------- workspace members


@pytest.mark.django_db
def test_removing_a_member_asks_first(admin_client, tenants):
    from portal.models import Membership

    carol = Membership.objects.get(user=tenants.carol, workspace=tenants.vision)
    # the old one-click remove now only leads to the question
    response = admin_client.post("/console/workspaces/vision-lab/", {"remove": carol.pk})
    assert response.status_code == 302 and response.url.endswith(f"/members/{carol.pk}/remove/")
    question = admin_client.get(response.url).content.decode()
    assert 'id="confirm-remove"' in question and "carol" in question
    assert Membership.objects.filter(pk=carol.pk).exists()
    done = admin_client.post(response.url, follow=True).content.decode()
    assert "carol removed from vision-lab." in done
    assert not Membership.objects.filter(pk=carol.pk).exists()
    assert audit_actions("carol") == ["delete"]


@pytest.mark.django_db
def test_a_member_of_another_workspace_cannot_be_removed_through_this_one(admin_client, tenants):
    from portal.models import Membership

    bob = Membership.objects.get(user=tenants.bob, workspace=tenants.nlp)
    assert admin_client.post(f"/console/workspaces/vision-lab/members/{bob.pk}/remove/").status_code == 404
    assert admin_client.post("/console/workspaces/vision-lab/", {"remove": bob.pk}).status_code == 404
    assert Membership.objects.filter(pk=bob.pk).exists()


@pytest.mark.django_db
def test_the_last_owner_cannot_be_removed_or_demoted(admin_client, tenants):
    from portal.models import Membership, Role

    alice = Membership.objects.get(user=tenants.alice, workspace=tenants.vision)
    assert "last owner" in admin_client.get(f"/console/workspaces/vision-lab/members/{alice.pk}/remove/"
                                            ).content.decode()
    refused = admin_client.post(f"/console/workspaces/vision-lab/members/{alice.pk}/remove/")
    assert refused.status_code == 400 and "last owner of vision-lab" in refused.content.decode()
    demoted = admin_client.post("/console/workspaces/vision-lab/", {"username": "alice", "role": "member"})
    assert demoted.status_code == 400
    role_row = demoted.content.decode().split('data-field-row="role"')[1].split("</div>")[0]
    assert "last owner of vision-lab" in role_row
    alice.refresh_from_db()
    assert alice.role == Role.OWNER and audit_actions() == []
    # with a second owner both are allowed
    admin_client.post("/console/workspaces/vision-lab/", {"username": "carol", "role": "owner"})
    admin_client.post("/console/workspaces/vision-lab/", {"username": "alice", "role": "member"})
    alice.refresh_from_db()
    assert alice.role == Role.MEMBER
    # bob, owner of the other workspace, is untouched
    assert Membership.objects.get(user=tenants.bob, workspace=tenants.nlp).role == Role.OWNER


@pytest.mark.django_db
def test_adding_a_member_confirms_and_errors_sit_beside_their_fields(admin_client, tenants):
    from portal.models import Membership

    unknown = admin_client.post("/console/workspaces/vision-lab/", {"username": "nobody", "role": "owner"})
    assert unknown.status_code == 400
    page = unknown.content.decode()
    assert "no user named" in page.split('data-field-row="username"')[1].split("</div>")[0]
    bad_role = admin_client.post("/console/workspaces/vision-lab/", {"username": "bob", "role": "emperor"})
    assert bad_role.status_code == 400 and 'data-field="role"' in bad_role.content.decode()
    assert not Membership.objects.filter(user=tenants.bob, workspace=tenants.vision).exists()
    added = admin_client.post("/console/workspaces/vision-lab/", {"username": "bob", "role": "viewer"}, follow=True)
    assert "bob added to vision-lab as viewer." in added.content.decode()
    changed = admin_client.post("/console/workspaces/vision-lab/", {"username": "bob", "role": "member"}, follow=True)
    assert "bob is now member of vision-lab." in changed.content.decode()
    assert Membership.objects.get(user=tenants.bob, workspace=tenants.vision).role == "member"
