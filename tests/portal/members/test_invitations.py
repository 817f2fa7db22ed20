"""Invitations: an owner invites an e-mail with a role (Members page or API); the e-mailed link works once and
for seven days of the platform clock; a new person makes a local account on it (the password validators
apply), an existing account joins by signing in, and with LOCAL_LOGIN off the person is sent to the company
sign-in and joins at their first sign-in with that e-mail. Owners list, resend (the old link dies) and revoke;
every write is audited, never with the token. Members are refused (403), another tenant sees nothing (404),
an existing member or a pending address is a 400, and a dead link says why on a styled 4xx page."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import override_settings

from portal.console.models import AuditEntry
from portal.models import Invitation, Membership, Role
from tests.factories import UserFactory

PROBLEM = "application/problem+json"
INVITATIONS = "/api/v1/workspaces/vision-lab/invitations/"
STRONG = "quartz-Lantern-7319"



@pytest.fixture
def invite(api_as, cluster, clock, django_capture_on_commit_callbacks):
    """alice invites `email` over the API; returns (the answer's JSON, the link's path from the e-mail)."""

    def make(email="dave@example.org", role="member"):
        with django_capture_on_commit_callbacks(execute=True):
            answer = api_as(cluster.alice).post(INVITATIONS, {"email": email, "role": role}, format="json")
        assert answer.status_code == 201, answer.content
        return answer.json(), link_in(mail.outbox[-1])

    return make


def link_in(message) -> str:
    found = re.search(r"https?://[^/\s]+(/invitations/[^/\s]+/)", message.body)
    assert found, message.body
    return found[1]


def roles(workspace) -> dict[str, str]:
    return dict(workspace.memberships.values_list("user__username", "role"))


def test_an_invited_person_makes_an_account_and_joins_once(invite, client, cluster, caplog):
    answer, link = invite("Dave@Example.org", "viewer")
    message = mail.outbox[-1]
    assert message.to == ["Dave@Example.org"] and "Vision Lab" in message.subject and "viewer" in message.body
    token = link.split("/")[2]
    assert answer["email"] == "Dave@Example.org" and answer["role"] == "viewer" and token not in str(answer)
    assert Invitation.objects.get().digest != token  # only its hash is kept
    page = client.get(link)
    assert page.status_code == 200 and b'data-mode="new-account"' in page.content
    weak = client.post(link, {"username": "dave", "password": "password", "password2": "password"})
    assert weak.status_code == 400 and b'data-field="password"' in weak.content and "dave" not in roles(cluster.vision)
    odd = client.post(link, {"username": "dave smith!", "password": STRONG, "password2": STRONG})
    assert odd.status_code == 400 and b'data-field="username"' in odd.content
    differ = client.post(link, {"username": "dave", "password": STRONG, "password2": STRONG + "x"})
    assert differ.status_code == 400 and b'data-field="password2"' in differ.content
    taken = client.post(link, {"username": "carol", "password": STRONG, "password2": STRONG})
    assert taken.status_code == 400 and b'data-field="username"' in taken.content
    joined = client.post(link, {"username": "dave", "password": STRONG, "password2": STRONG})
    assert joined.status_code == 302 and joined["Location"] == "/w/vision-lab/"
    assert roles(cluster.vision)["dave"] == Role.VIEWER
    dave = Membership.objects.get(user__username="dave").user
    assert dave.email.lower() == "dave@example.org" and dave.check_password(STRONG)
    assert client.get("/w/vision-lab/").status_code == 200  # signed in as dave
    client.logout()
    again = client.get(link)
    assert again.status_code == 410 and b'data-reason="used"' in again.content and b"already been used" in again.content
    assert client.post(link, {"username": "dave2", "password": STRONG, "password2": STRONG}).status_code == 410
    assert token not in caplog.text and "/invitations/[redacted]/" in caplog.text  # the request log
    actions = list(AuditEntry.objects.filter(target_type="portal.invitation").order_by("id").values_list("action", flat=True))
    assert actions == ["invite", "accept invitation"]
    assert not any(token in str(entry.changes) + entry.message + entry.target_repr for entry in AuditEntry.objects.all())


def test_the_link_expires_after_seven_days_and_a_resend_replaces_it(invite, client, clock, api_as, cluster,
                                                                    django_capture_on_commit_callbacks):
    answer, first = invite()
    clock.advance(7 * 86400 - 60)
    assert client.get(first).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        resent = api_as(cluster.alice).post(f"{INVITATIONS}{answer['id']}/resend/")
    assert resent.status_code == 200, resent.content
    second = link_in(mail.outbox[-1])
    assert second != first and len(mail.outbox) == 2
    gone = client.get(first)
    assert gone.status_code == 404 and b'data-reason="unknown"' in gone.content
    clock.advance(7 * 86400 - 120)
    assert client.get(second).status_code == 200
    clock.advance(180)
    expired = client.get(second)
    assert expired.status_code == 410 and b"expired" in expired.content
    assert api_as(cluster.alice).get(INVITATIONS).json() == []  # no longer pending
    assert "dave" not in roles(cluster.vision)


def test_a_revoked_link_says_so(invite, client, api_as, cluster):
    answer, link = invite()
    assert api_as(cluster.alice).delete(f"{INVITATIONS}{answer['id']}/").status_code == 204
    revoked = client.get(link)
    assert revoked.status_code == 410 and b'data-reason="revoked"' in revoked.content
    assert client.post(link, {"username": "dave", "password": STRONG, "password2": STRONG}).status_code == 410
    assert "dave" not in roles(cluster.vision)
    assert AuditEntry.objects.filter(action="revoke invitation", username="alice").count() == 1


def test_an_existing_account_joins_by_signing_in(invite, client, cluster):
    from tests.world import PASSWORDS

    _, link = invite("bob@example.com", "member")  # bob (owner of nlp-group) has this e-mail
    page = client.get(link)
    assert b'data-mode="sign-in"' in page.content and b"/login/?next=" in page.content
    signed_in = client.post("/login/", {"username": "bob", "password": PASSWORDS["bob"], "next": link})
    assert signed_in.status_code == 302 and signed_in["Location"] == link
    assert roles(cluster.vision)["bob"] == Role.MEMBER  # the sign-in joined him
    back = client.get(link)
    assert back.status_code == 302 and back["Location"] == "/w/vision-lab/"
    assert Invitation.objects.get().accepted_by == cluster.bob


def test_another_account_signed_in_cannot_use_the_link(invite, client, cluster):
    _, link = invite("dave@example.org")
    client.force_login(cluster.bob)  # of another tenant: he learns nothing of vision-lab
    refused = client.get(link)
    assert refused.status_code == 403 and b"Vision Lab" not in refused.content and b"dave@" not in refused.content
    assert client.post(link).status_code == 403
    assert Invitation.objects.get().accepted is None


def test_signed_in_as_the_invited_account_one_button_joins(invite, client, cluster):
    dave = UserFactory(username="dave", email="dave@example.org")
    client.force_login(dave)  # signed in before the invitation was made
    _, link = invite("DAVE@example.org", "finance")
    assert b'data-mode="join"' in client.get(link).content
    assert client.post(link)["Location"] == "/w/vision-lab/"
    assert roles(cluster.vision)["dave"] == Role.FINANCE


@override_settings(LOCAL_LOGIN=False)
def test_without_local_login_the_company_sign_in_adds_the_membership(invite, client, cluster):
    _, link = invite("erin@corp.example", "member")
    page = client.get(link)
    assert b'data-mode="company"' in page.content and b"company sign-in" in page.content
    made = client.post(link, {"username": "erin", "password": STRONG, "password2": STRONG})
    assert made.status_code == 200 and not Membership.objects.filter(user__username="erin").exists()
    erin = UserFactory(username="erin", email="erin@corp.example")  # what the company sign-in makes
    client.force_login(erin)  # its sign-in sends user_logged_in
    assert roles(cluster.vision)["erin"] == Role.MEMBER
    assert Invitation.objects.get().accepted_by == erin


def test_refusals_api(api_as, cluster, invite):
    alice = api_as(cluster.alice)
    member = alice.post(INVITATIONS, {"email": "carol@example.com", "role": "member"}, format="json")
    assert member.status_code == 400 and member["Content-Type"] == PROBLEM
    assert "already a member" in member.json()["errors"][0]["message"]
    bad = alice.post(INVITATIONS, {"email": "not an address", "role": "member"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "email"
    assert alice.post(INVITATIONS, {"email": "x@example.org", "role": "boss"}, format="json").status_code == 400
    answer, _ = invite("dave@example.org")
    twice = alice.post(INVITATIONS, {"email": "DAVE@example.org", "role": "viewer"}, format="json")
    assert twice.status_code == 400 and "already invited" in twice.json()["errors"][0]["message"]
    for user in (cluster.carol, cluster.finance):  # members and finance may not invite
        assert api_as(user).post(INVITATIONS, {"email": "y@example.org"}, format="json").status_code == 403
        assert api_as(user).get(INVITATIONS).status_code == 403
    bob = api_as(cluster.bob)  # another tenant's owner: nothing of vision-lab's
    assert bob.get(INVITATIONS).status_code == 404
    assert bob.delete(f"{INVITATIONS}{answer['id']}/").status_code == 404
    assert bob.delete(f"/api/v1/workspaces/nlp-group/invitations/{answer['id']}/").status_code == 404
    assert bob.post(f"/api/v1/workspaces/nlp-group/invitations/{answer['id']}/resend/").status_code == 404
    assert Invitation.objects.count() == 1 and Invitation.objects.get().revoked is None
    assert [i["email"] for i in alice.get(INVITATIONS).json()] == ["dave@example.org"]


def test_the_members_page_invites_lists_resends_and_revokes(client, cluster, clock, django_capture_on_commit_callbacks):
    client.force_login(cluster.alice)
    with django_capture_on_commit_callbacks(execute=True):
        sent = client.post("/w/vision-lab/members/", {"invite": "1", "email": "dave@example.org", "role": "viewer"})
    assert sent.status_code == 302 and len(mail.outbox) == 1
    page = client.get("/w/vision-lab/members/")
    assert b'data-invitation="dave@example.org"' in page.content
    refused = client.post("/w/vision-lab/members/", {"invite": "1", "email": "carol@example.com", "role": "member"})
    assert refused.status_code == 400 and b"already a member" in refused.content
    invitation = Invitation.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/w/vision-lab/invitations/{invitation.pk}/resend/")
    assert len(mail.outbox) == 2
    client.post(f"/w/vision-lab/invitations/{invitation.pk}/revoke/")
    assert b"data-invitation=" not in client.get("/w/vision-lab/members/").content
    client.force_login(cluster.carol)
    assert b'id="invite-form"' not in client.get("/w/vision-lab/members/").content
    assert client.post("/w/vision-lab/members/", {"invite": "1", "email": "z@example.org"}).status_code == 403
    client.force_login(cluster.bob)
    assert client.post(f"/w/vision-lab/invitations/{invitation.pk}/resend/").status_code == 404
    assert client.post(f"/w/nlp-group/invitations/{invitation.pk}/revoke/").status_code == 404
