"""Rate limits count the credential's identity, never the header's spelling; the client address is
read from X-Forwarded-For only when the direct peer is a configured proxy."""

import uuid

import pytest
from django.conf import settings
from django.test import RequestFactory, override_settings

from portal.services import create_api_token


def _ip() -> str:
    """A client address of its own: the counters live in the shared Redis."""
    return f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"


def _spellings(secret: str) -> list[dict]:
    """The same token, presented every way authentication accepts it."""
    return [{"HTTP_AUTHORIZATION": f"Bearer {secret}"}, {"HTTP_AUTHORIZATION": f"bearer {secret}"},
            {"HTTP_AUTHORIZATION": f"BEARER {secret}"}, {"HTTP_AUTHORIZATION": f"Token {secret}"},
            {"HTTP_AUTHORIZATION": f"Bearer  {secret}"}, {"HTTP_AUTHORIZATION": f" Bearer\t{secret} "},
            {"HTTP_API_KEY": secret}]


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "api_token": "7/60"})
@pytest.mark.django_db
def test_every_spelling_of_one_token_shares_one_budget(client, tenants):
    _, secret = create_api_token(tenants.alice, "ci")
    codes = [client.get("/api/v1/workspaces/", **headers).status_code for headers in _spellings(secret)]
    assert codes == [200] * 7  # each spelling authenticates...
    for headers in _spellings(secret):  # ...and each is then over the one budget
        refused = client.get("/api/v1/workspaces/", **headers)
        assert refused.status_code == 429, headers
        assert refused["Content-Type"] == "application/problem+json" and int(refused["Retry-After"]) >= 1


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "api_token": "2/60"})
@pytest.mark.django_db
def test_tokens_and_tenants_have_budgets_of_their_own(client, tenants):
    _, first = create_api_token(tenants.alice, "first")
    _, second = create_api_token(tenants.alice, "second")
    _, other_tenant = create_api_token(tenants.bob, "bob's")
    for _ in range(2):
        assert client.get("/api/v1/workspaces/", HTTP_AUTHORIZATION=f"Bearer {first}").status_code == 200
    assert client.get("/api/v1/workspaces/", HTTP_AUTHORIZATION=f"bearer {first}").status_code == 429
    assert client.get("/api/v1/workspaces/", HTTP_AUTHORIZATION=f"Bearer {second}").status_code == 200
    assert client.get("/api/v1/workspaces/", HTTP_AUTHORIZATION=f"Bearer {other_tenant}").status_code == 200


# A window no other test uses: user ids repeat after rollbacks, and the counters live in the shared Redis.
@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "api_token": "2/57"})
@pytest.mark.django_db
def test_a_signed_in_user_is_counted_by_user_id(client, tenants):
    client.force_login(tenants.alice)
    assert [client.get("/api/v1/workspaces/").status_code for _ in range(3)] == [200, 200, 429]
    client.force_login(tenants.bob)  # another tenant's budget is untouched
    assert client.get("/api/v1/workspaces/").status_code == 200


@override_settings(TRUSTED_PROXIES=["10.9.0.0/16", "fd00::/8"])
def test_forwarded_for_is_read_only_from_a_trusted_proxy():
    from portal.ratelimit import client_address

    rf = RequestFactory()
    untrusted = rf.get("/", REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert client_address(untrusted) == "203.0.113.7"  # anyone may send the header: ignored
    proxied = rf.get("/", REMOTE_ADDR="10.9.0.5", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.1, 10.9.3.3")
    # the right-most address that is not a trusted proxy: the one the ingress saw; 1.2.3.4 is the client's own claim
    assert client_address(proxied) == "198.51.100.1"
    assert client_address(rf.get("/", REMOTE_ADDR="10.9.0.5")) == "10.9.0.5"
    assert client_address(rf.get("/", REMOTE_ADDR="fd00::1", HTTP_X_FORWARDED_FOR="2001:db8::9")) == "2001:db8::9"
    garbled = rf.get("/", REMOTE_ADDR="10.9.0.5", HTTP_X_FORWARDED_FOR="not-an-address")
    assert client_address(garbled) == "10.9.0.5"


@override_settings(TRUSTED_PROXIES=[])
def test_without_trusted_proxies_the_peer_is_the_client():
    from portal.ratelimit import client_address

    request = RequestFactory().get("/", REMOTE_ADDR="10.9.0.5", HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert client_address(request) == "10.9.0.5"


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "login": "2/60"}, TRUSTED_PROXIES=["10.9.0.0/16"])
@pytest.mark.django_db
def test_login_limit_counts_the_forwarded_client_behind_a_trusted_proxy(client):
    ingress, behind = "10.9.1.1", _ip().replace("10.", "192.", 1)
    for _ in range(2):
        client.post("/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=ingress,
                    HTTP_X_FORWARDED_FOR=behind)
    assert client.post("/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=ingress,
                       HTTP_X_FORWARDED_FOR=behind).status_code == 429
    # another client behind the same ingress is not refused with it
    assert client.post("/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=ingress,
                       HTTP_X_FORWARDED_FOR=_ip().replace("10.", "192.", 1)).status_code != 429


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "login": "2/60"}, TRUSTED_PROXIES=[])
@pytest.mark.django_db
def test_forwarded_for_from_an_untrusted_peer_does_not_buy_a_fresh_budget(client):
    ip = _ip()
    codes = [client.post("/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=ip,
                         HTTP_X_FORWARDED_FOR=f"192.0.2.{n}").status_code for n in range(3)]
    assert codes[2] == 429


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "login": "3/60"})
@pytest.mark.django_db
def test_admin_login_is_under_the_login_limit(client):
    ip = _ip()
    codes = [client.post("/admin/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=ip).status_code
             for _ in range(4)]
    assert 429 not in codes[:3] and codes[3] == 429
    # one budget for both sign-in forms
    assert client.post("/login/", {"username": "nobody", "password": "x"}, REMOTE_ADDR=ip).status_code == 429
