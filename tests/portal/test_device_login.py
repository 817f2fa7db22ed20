"""`gpuctl login`'s device authorization grant (RFC 8628) on the server: a code pair without credentials; the
person approves or denies at /device/ (signed in), seeing the client and scope; the poll answers the RFC's
errors until then, a token of the approving user with the chosen scope once, and invalid_grant after; the
device code dies after 600 s of the platform clock; polling faster than the interval is slow_down; a wrong
code is a form error; approvals are audited and the endpoints rate-limited."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client, override_settings

from portal.console.models import AuditEntry
from portal.models import ApiToken, DeviceAuthorization

START, TOKEN = "/api/v1/auth/device/", "/api/v1/auth/device/token/"
GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@pytest.fixture
def start(client, clock, db):
    def make(scope="submit") -> dict:
        answer = client.post(START, {"client_id": "gpuctl", "scope": scope}, content_type="application/json")
        assert answer.status_code == 200, answer.content
        return answer.json()

    return make


def poll(client, codes: dict, grant_type: str = GRANT):
    return client.post(TOKEN, {"device_code": codes["device_code"], "grant_type": grant_type},
                       content_type="application/json")


def error(response) -> str:
    assert response.status_code == 400, response.content
    return response.json()["error"]


def decide(user, user_code: str, decision: str | None = "approve"):
    browser = Client()
    browser.force_login(user)
    return browser.post("/device/", {"user_code": user_code, **({"decision": decision} if decision else {})})


def test_approved_once_yields_a_token_of_the_approving_user(start, client, clock, cluster):
    codes = start("read")
    assert re.fullmatch(r"[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}", codes["user_code"])
    assert codes["verification_uri"] == "http://testserver/device/" and codes["expires_in"] == 600
    assert codes["verification_uri_complete"] == f"http://testserver/device/?user_code={codes['user_code']}"
    assert codes["interval"] == 5 and codes["device_code"] not in str(DeviceAuthorization.objects.values())
    assert error(poll(client, codes)) == "authorization_pending"
    browser = Client()
    browser.force_login(cluster.carol)
    shown = browser.get("/device/", {"user_code": codes["user_code"]})  # the complete link
    assert shown.status_code == 200 and b'data-step="confirm"' in shown.content
    assert b"gpuctl" in shown.content and b"Read: GET requests only" in shown.content and b"carol" in shown.content
    done = decide(cluster.carol, codes["user_code"].lower().replace("-", " "))  # typed loosely
    assert b'data-state="approved"' in done.content
    clock.advance(5)
    answer = poll(client, codes)
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    body = answer.json()
    assert body["token_type"] == "Bearer" and body["scope"] == "read" and body["username"] == "carol"
    assert body["expires_in"] == 90 * 86400
    token = ApiToken.objects.get(user=cluster.carol)
    assert token.scope == "read" and token.hint == body["access_token"][:10]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {body['access_token']}")
    assert [w["slug"] for w in api.get("/api/v1/workspaces/").json()["results"]] == ["vision-lab"]  # carol's
    assert api.post("/api/v1/jobs/", {}, content_type="application/json").status_code == 403  # read only
    clock.advance(5)
    assert error(poll(client, codes)) == "invalid_grant"  # once
    assert ApiToken.objects.count() == 1
    entry = AuditEntry.objects.get(action="approve device login")
    assert entry.username == "carol" and entry.changes["scope"] == [None, "read"]
    assert body["access_token"] not in str(list(AuditEntry.objects.values()))


def test_denied_is_access_denied_and_a_code_is_decided_once(start, client, cluster, clock):
    codes = start()
    assert b'data-state="denied"' in decide(cluster.alice, codes["user_code"], "deny").content
    assert error(poll(client, codes)) == "access_denied"
    again = decide(cluster.alice, codes["user_code"])
    assert again.status_code == 400 and b"no sign-in waits for the code" in again.content
    assert not ApiToken.objects.exists()
    assert AuditEntry.objects.filter(action="deny device login", username="alice").count() == 1


def test_the_codes_expire_after_ten_minutes(start, client, cluster, clock):
    codes = start()
    clock.advance(601)
    late = decide(cluster.alice, codes["user_code"])
    assert late.status_code == 400 and b'data-field="user_code"' in late.content
    assert error(poll(client, codes)) == "expired_token"
    fresh = start()
    decide(cluster.alice, fresh["user_code"])
    clock.advance(601)  # approved, but not fetched in time
    assert error(poll(client, fresh)) == "expired_token" and not ApiToken.objects.exists()
    clock.advance(86400)
    start()  # a day after they expired, the old requests are gone
    assert DeviceAuthorization.objects.count() == 1


def test_polling_faster_than_the_interval_is_slow_down(start, client, clock):
    codes = start()
    assert error(poll(client, codes)) == "authorization_pending"
    clock.advance(2)
    assert error(poll(client, codes)) == "slow_down"
    clock.advance(6)  # the interval is now 10 s
    assert error(poll(client, codes)) == "slow_down"
    assert DeviceAuthorization.objects.get().interval == 15
    clock.advance(15)
    assert error(poll(client, codes)) == "authorization_pending"


def test_bad_requests(start, client, cluster, clock):
    codes = start()
    assert error(poll(client, codes, "password")) == "unsupported_grant_type"
    assert error(poll(client, {"device_code": "gpd-guess"})) == "invalid_grant"
    refused = client.post(START, {"scope": "root"}, content_type="application/json")
    assert refused.status_code == 400 and refused["Content-Type"] == "application/problem+json"
    browser = Client()
    assert browser.get("/device/")["Location"].startswith("/login/")  # signed in only
    browser.force_login(cluster.alice)
    for typed in ("WDJB-MJHX", "", "x" * 30):
        wrong = browser.post("/device/", {"user_code": typed, "decision": "approve"})
        assert wrong.status_code == 400 and b'data-field="user_code"' in wrong.content, typed
    assert DeviceAuthorization.objects.get().state == "pending"


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "device": "3/59"})
def test_the_device_endpoints_are_rate_limited_by_address(client, db):
    address = {"REMOTE_ADDR": "10.98.76.54"}
    codes = [client.post(START, {}, content_type="application/json", **address).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    assert client.post(TOKEN, {}, content_type="application/json", **address).status_code == 429
