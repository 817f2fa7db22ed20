"""The workspace page's service-account section: owners see the accounts and their tokens, make one, mint a
token (its value shown on that answer only), revoke and delete; members see no section and their posts are
refused (403); another tenant gets 404. Bad input shows the page again (400) with nothing made. The Django
admin mints no personal token and hands none to another user."""

from __future__ import annotations

from portal.models import ApiToken, Membership, ServiceAccount
from tests.factories import UserFactory

PAGE, FORMS = "/w/vision-lab/", "/w/vision-lab/service-accounts/"


def test_an_owner_makes_an_account_mints_revokes_and_deletes_on_the_page(client, cluster, clock):
    client.force_login(cluster.alice)
    assert 'id="service-accounts"' in client.get(PAGE).content.decode()
    made = client.post(FORMS, {"name": "ci-pipeline", "role": "member"})
    assert made.status_code == 302 and made["Location"].endswith("#service-accounts")
    page = client.get(PAGE).content.decode()
    assert "svc:ci-pipeline@vision-lab" in page
    minted = client.post(FORMS, {"account": "ci-pipeline", "token_name": "github", "scope": "submit", "days": "30"})
    assert minted.status_code == 200
    token = ApiToken.objects.get()
    raw = minted.content.decode().split('id="new-service-token"')[1].split("<code>")[1].split("</code>")[0]
    assert raw.startswith(token.hint) and len(raw) > 30
    again = client.get(PAGE).content.decode()
    assert token.hint in again and raw not in again
    assert client.post(FORMS, {"account": "ci-pipeline", "revoke": token.pk}).status_code == 302
    assert ApiToken.objects.get().revoked is not None
    assert client.post(FORMS, {"account": "ci-pipeline", "delete": "1"}).status_code == 302
    assert ServiceAccount.objects.get().deleted is not None
    assert "svc:ci-pipeline@vision-lab" not in client.get(PAGE).content.decode()


def test_bad_input_shows_the_page_again_and_makes_nothing(client, cluster, clock):
    client.force_login(cluster.alice)
    refused = client.post(FORMS, {"name": "ci-pipeline", "role": "owner"})
    assert refused.status_code == 400 and "not a role for a service account" in refused.content.decode()
    assert not ServiceAccount.objects.exists()
    client.post(FORMS, {"name": "ci-pipeline", "role": "member"})
    refused = client.post(FORMS, {"account": "ci-pipeline", "token_name": "github", "scope": "submit", "days": "3"})
    assert refused.status_code == 400 and not ApiToken.objects.exists()
    refused = client.post(FORMS, {"account": "ci-pipeline", "token_name": "", "scope": "submit", "days": "30"})
    assert refused.status_code == 400 and "a token needs a name" in refused.content.decode()
    assert not ApiToken.objects.exists()


def test_members_see_no_section_and_are_refused_and_another_tenant_gets_404(client, cluster, clock):
    viewer = UserFactory(username="victor")
    Membership.objects.create(user=viewer, workspace=cluster.vision, role="viewer")
    for user in (cluster.carol, cluster.finance, viewer):
        client.force_login(user)
        assert 'id="service-accounts"' not in client.get(PAGE).content.decode()
        assert client.post(FORMS, {"name": "mine", "role": "member"}).status_code == 403
    client.force_login(cluster.bob)
    assert client.post(FORMS, {"name": "mine", "role": "member"}).status_code == 404
    assert not ServiceAccount.objects.exists()


def test_the_admin_mints_no_token_and_gives_none_to_another_user(client, cluster, clock):
    client.force_login(cluster.admin)
    assert client.get("/admin/portal/apitoken/add/").status_code == 403
    assert client.post("/admin/portal/apitoken/add/", {"user": cluster.bob.pk, "name": "for bob", "digest": "x" * 64,
                                                       "hint": "gpt_x", "scope": "manage"}).status_code == 403
    assert not ApiToken.objects.exists()
    token = ApiToken.objects.create(user=cluster.alice, name="own", digest="d" * 64, hint="gpt_own")
    change = f"/admin/portal/apitoken/{token.pk}/change/"
    assert client.get(change).status_code == 200
    client.post(change, {"user": cluster.bob.pk, "name": "own", "scope": "manage", "revoked_0": "", "revoked_1": ""})
    token.refresh_from_db()
    assert token.user == cluster.alice and token.scope == "submit"


def test_the_admin_cannot_make_a_service_account_an_owner(client, cluster, clock):
    from portal import service_accounts

    account = service_accounts.create_service_account(cluster.alice, cluster.vision, "ci-pipeline", "member")
    membership = Membership.objects.get(user=account.user)
    client.force_login(cluster.admin)
    refused = client.post(f"/admin/portal/membership/{membership.pk}/change/",
                          {"user": account.user.pk, "workspace": cluster.vision.pk, "role": "owner"})
    assert refused.status_code == 200 and "is a service account of vision-lab" in refused.content.decode()
    refused = client.post("/admin/portal/membership/add/",
                          {"user": account.user.pk, "workspace": cluster.nlp.pk, "role": "member"})
    assert refused.status_code == 200 and "is a service account of vision-lab" in refused.content.decode()
    assert list(Membership.objects.filter(user=account.user).values_list("workspace__slug", "role")) == [
        ("vision-lab", "member")]
