"""Two-factor authentication for local accounts (allauth.mfa): a user enrols an authenticator app from the
account pages with a real code, sign-in then asks for a code after the password, a wrong code changes
nothing, a recovery code works once, MFA_REQUIRED_FOR_STAFF sends operators to enrol before the console, API
tokens never ask for a code, and one user can neither see nor turn off another's. The codes are computed
here (RFC 6238) from the platform clock, which allauth is made to read."""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import itertools
import re
import struct
from datetime import timedelta
from types import SimpleNamespace

import pytest
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal import auth as allauth_totp
from django.test import Client
from rest_framework.test import APIClient

from portal.console.models import AuditEntry
from portal.services import create_api_token
from tests.factories import UserFactory
from tests.world import PASSWORDS

pytestmark = pytest.mark.django_db

AUTHENTICATE = "/accounts/2fa/authenticate/"
ACTIVATE = "/accounts/2fa/totp/activate/"
DEACTIVATE = "/accounts/2fa/totp/deactivate/"


ADDRESSES = itertools.count(1)


def fresh_client() -> Client:
    """A browser at an address of its own: the sign-in rate limit counts per address in the shared cache, and
    these tests sign in often enough to spend 127.0.0.1's budget for the tests after them."""
    return Client(REMOTE_ADDR=f"198.51.100.{next(ADDRESSES) % 250 + 1}")


@pytest.fixture
def client():
    return fresh_client()


@pytest.fixture
def commits(django_capture_on_commit_callbacks):
    """allauth announces a change once its transaction commits (the audit lines): run those callbacks."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture(autouse=True)
def hermetic(settings, clock, monkeypatch):
    """allauth checks codes against time.time(): here it reads the platform clock the codes are made from.
    Its rate limits count in the shared cache: other tests' must not spend this one's."""
    settings.ACCOUNT_RATE_LIMITS = False
    monkeypatch.setattr(allauth_totp, "time", SimpleNamespace(time=lambda: clock.now.timestamp()))


def totp(secret: str, at) -> str:
    """RFC 6238: HMAC-SHA1 of the 30-second step, dynamically truncated to six digits."""
    digest = hmac.new(
        base64.b32decode(secret, casefold=True), struct.pack(">Q", int(at.timestamp()) // 30), hashlib.sha1
    ).digest()
    offset = digest[-1] & 0x0F
    return f"{(struct.unpack('>I', digest[offset : offset + 4])[0] & 0x7FFFFFFF) % 10**6:06d}"


def sign_in(client: Client, user, next_url: str = ""):
    data = {"username": user.username, "password": PASSWORDS.get(user.username, f"{user.username}-test")}
    return client.post("/login/" + (f"?next={next_url}" if next_url else ""), data)


def signed_in_as(client: Client):
    user = client.get("/account/preferences/").wsgi_request.user
    return user if user.is_authenticated else None


def activate_page(client: Client, user):
    """The set-up page, after confirming the password (allauth asks again before a change of this kind)."""
    asked = client.get(ACTIVATE)
    assert asked.status_code == 302 and asked["Location"].startswith("/accounts/reauthenticate/")
    confirm = client.get(asked["Location"])
    assert confirm.status_code == 200 and b'href="/static/portal/site.css"' in confirm.content
    wrong = client.post(asked["Location"], {"password": "not-it"})
    assert wrong.status_code == 200 and client.get(ACTIVATE).status_code == 302
    done = client.post(
        asked["Location"],
        {"password": PASSWORDS.get(user.username, f"{user.username}-test"), "next": ACTIVATE},
    )
    assert done.status_code == 302 and done["Location"] == ACTIVATE
    page = client.get(ACTIVATE)
    assert page.status_code == 200 and b'id="mfa-qr"' in page.content
    return page


def enrol(client: Client, user, clock, commits) -> tuple[str, list[str]]:
    """Sign in, set up the app with a code it shows, read the recovery codes; signed out after. The secret
    and the codes. The clock moves on past the code used, which works once."""
    assert sign_in(client, user).status_code == 302
    page = activate_page(client, user)
    secret = re.search(r'id="mfa-secret" value="([A-Z2-7]+)"', page.content.decode())[1]
    with commits():
        done = client.post(ACTIVATE, {"code": totp(secret, clock.now)})
    assert done.status_code == 302 and done["Location"] == "/accounts/2fa/recovery-codes/"
    codes = re.search(
        r'<pre class="spec" id="recovery-codes">(.*?)</pre>',
        client.get(done["Location"]).content.decode(),
        re.S,
    )[1].split()
    assert len(codes) == 10
    client.post("/logout/")
    clock.advance(90)
    return secret, codes


def test_enrolling_turns_on_a_code_after_the_password(tenants, client, clock, commits):
    preferences = (sign_in(client, tenants.alice), client.get("/account/preferences/"))[1].content.decode()
    assert 'id="link-mfa"' in preferences and "Two-factor authentication (off)" in preferences
    assert b'id="link-mfa"' in client.get("/account/sessions/").content
    client.post("/logout/")
    secret, _ = enrol(client, tenants.alice, clock, commits)
    assert Authenticator.objects.filter(user=tenants.alice, type=Authenticator.Type.TOTP).count() == 1
    assert AuditEntry.objects.filter(
        user=tenants.alice, action="enable 2fa", source=AuditEntry.Source.SIGN_IN
    ).exists()

    password_only = sign_in(client, tenants.alice, "/account/tokens/")
    assert password_only.status_code == 302 and password_only["Location"] == AUTHENTICATE
    assert signed_in_as(client) is None  # the password alone is not a session
    page = client.get(AUTHENTICATE)
    assert (
        page.status_code == 200
        and b'name="code"' in page.content
        and b'href="/static/portal/site.css"' in page.content
    )
    done = client.post(AUTHENTICATE, {"code": totp(secret, clock.now)})
    assert done.status_code == 302 and done["Location"] == "/account/tokens/"
    assert signed_in_as(client) == tenants.alice
    assert "Two-factor authentication (on)" in client.get("/account/preferences/").content.decode()


def test_a_wrong_code_is_refused_and_changes_nothing(tenants, client, clock, commits):
    assert sign_in(client, tenants.alice).status_code == 302
    page = activate_page(client, tenants.alice).content.decode()
    secret = re.search(r'id="mfa-secret" value="([A-Z2-7]+)"', page)[1]
    wrong = client.post(ACTIVATE, {"code": totp(secret, clock.now - timedelta(minutes=2))})  # not this one's
    assert wrong.status_code == 200 and b'id="mfa-code-error"' in wrong.content
    assert client.post(ACTIVATE, {"code": "abc"}).status_code == 200
    assert not Authenticator.objects.filter(user=tenants.alice).exists()
    assert not AuditEntry.objects.filter(action="enable 2fa").exists()
    client.post("/logout/")

    secret, _ = enrol(client, tenants.alice, clock, commits)
    sign_in(client, tenants.alice)
    for code in (
        "000000" if totp(secret, clock.now) != "000000" else "111111",
        totp(secret, clock.now - timedelta(minutes=5)),
    ):
        refused = client.post(AUTHENTICATE, {"code": code})
        assert refused.status_code == 200 and b'id="mfa-code-error"' in refused.content
        assert signed_in_as(client) is None
    assert AuditEntry.objects.filter(user=tenants.alice, action="2fa code refused").count() == 2
    assert (
        Authenticator.objects.filter(user=tenants.alice).count() == 2
    )  # the app and the recovery codes, as they were


def test_a_recovery_code_signs_in_once(tenants, client, clock, commits):
    _, codes = enrol(client, tenants.alice, clock, commits)
    sign_in(client, tenants.alice)
    assert client.post(AUTHENTICATE, {"code": codes[0]}).status_code == 302
    assert signed_in_as(client) == tenants.alice
    entry = AuditEntry.objects.get(user=tenants.alice, action="use recovery code")
    assert "9 left" in entry.message and codes[0] not in entry.message + entry.target_repr
    assert codes[0] not in client.get("/accounts/2fa/recovery-codes/").content.decode()
    client.post("/logout/")

    sign_in(client, tenants.alice)
    again = client.post(AUTHENTICATE, {"code": codes[0]})
    assert again.status_code == 200 and b'id="mfa-code-error"' in again.content
    assert signed_in_as(client) is None
    assert client.post(AUTHENTICATE, {"code": codes[1]}).status_code == 302  # another still works


def test_new_recovery_codes_replace_the_old_and_turning_off_ends_the_second_step(
    tenants, client, clock, commits
):
    secret, codes = enrol(client, tenants.alice, clock, commits)
    sign_in(client, tenants.alice)
    client.post(AUTHENTICATE, {"code": totp(secret, clock.now)})
    asked = client.post("/accounts/2fa/recovery-codes/generate/")
    assert asked["Location"].startswith("/accounts/reauthenticate/")  # a new session: the password again
    client.post("/accounts/reauthenticate/", {"password": PASSWORDS["alice"]})
    assert not AuditEntry.objects.filter(action="regenerate recovery codes").exists()
    with commits():
        assert client.post("/accounts/2fa/recovery-codes/generate/").status_code == 302
    assert AuditEntry.objects.filter(user=tenants.alice, action="regenerate recovery codes").exists()
    fresh = re.search(
        r'id="recovery-codes">(.*?)</pre>', client.get("/accounts/2fa/recovery-codes/").content.decode(), re.S
    )[1].split()
    assert not set(fresh) & set(codes)
    assert client.get(DEACTIVATE).status_code == 200
    with commits():
        assert client.post(DEACTIVATE).status_code == 302
    assert not Authenticator.objects.filter(user=tenants.alice).exists()
    assert AuditEntry.objects.filter(user=tenants.alice, action="disable 2fa").exists()
    client.post("/logout/")
    assert sign_in(client, tenants.alice)["Location"] == "/"  # the password is enough again
    assert signed_in_as(client) == tenants.alice


def test_staff_must_enrol_before_the_console_when_required(tenants, client, clock, commits, settings):
    assert sign_in(client, tenants.admin)["Location"] == "/"
    assert client.get("/console/").status_code == 200  # off by default
    client.post("/logout/")

    settings.MFA_REQUIRED_FOR_STAFF = True
    assert sign_in(client, tenants.admin, "/console/")["Location"] == ACTIVATE
    for path in ("/console/", "/admin/"):
        refused = client.get(path)
        assert refused.status_code == 302 and refused["Location"] == ACTIVATE
    assert client.get("/account/preferences/").status_code == 200  # their own pages stay open
    client.post("/logout/")
    secret, _ = enrol(client, tenants.admin, clock, commits)
    sign_in(client, tenants.admin)
    client.post(AUTHENTICATE, {"code": totp(secret, clock.now)})
    assert client.get("/console/").status_code == 200

    tenant = fresh_client()  # not staff: never asked
    assert sign_in(tenant, tenants.alice)["Location"] == "/"
    company = UserFactory(username="sso-operator", is_staff=True)  # a company account: its provider's 2FA
    company.set_unusable_password()
    company.save()
    tenant.force_login(company)
    assert tenant.get("/console/").status_code == 200


def test_an_api_token_needs_no_code(tenants, client, clock, commits):
    enrol(client, tenants.alice, clock, commits)
    _, raw = create_api_token(tenants.alice, "laptop")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    answer = api.get("/api/v1/workspaces/")
    assert answer.status_code == 200 and "vision-lab" in answer.content.decode()


def test_the_admin_form_does_not_skip_the_code(tenants, client, clock, commits):
    secret, _ = enrol(client, tenants.admin, clock, commits)
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "admin", "password": PASSWORDS["admin"], "next": "/admin/"}
    )
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert signed_in_as(client) is None
    sign_in(client, tenants.admin, "/admin/")
    assert client.post(AUTHENTICATE, {"code": totp(secret, clock.now)})["Location"] == "/admin/"


def test_one_user_cannot_see_or_turn_off_anothers(tenants, client, clock, commits):
    enrol(client, tenants.alice, clock, commits)
    alices = set(Authenticator.objects.filter(user=tenants.alice).values_list("pk", flat=True))
    assert sign_in(client, tenants.bob)["Location"] == "/"  # bob: no code asked
    page = client.get("/accounts/2fa/").content.decode()
    assert (
        'id="mfa-activate"' in page
        and 'id="mfa-deactivate"' not in page
        and 'id="mfa-recovery-codes"' not in page
    )
    assert client.post(DEACTIVATE).status_code == 404  # bob has none; alice's is not his to reach
    assert client.get("/accounts/2fa/recovery-codes/").status_code in (302, 404)
    assert client.post("/accounts/2fa/recovery-codes/generate/").status_code in (302, 404)
    assert set(Authenticator.objects.filter(user=tenants.alice).values_list("pk", flat=True)) == alices
    assert not Authenticator.objects.filter(user=tenants.bob).exists()


def test_a_company_account_has_no_two_factor_pages_here(tenants, client):
    dora = UserFactory(username="dora")
    dora.set_unusable_password()
    dora.save()
    client.force_login(dora)
    for path in ("/accounts/2fa/", ACTIVATE):
        assert client.get(path).status_code == 403
    assert b'id="link-mfa"' not in client.get("/account/preferences/").content


def test_the_secret_is_stored_encrypted_and_survives_a_key_rotation(
    tenants, client, clock, commits, settings
):
    from cryptography.fernet import Fernet
    from django.core.management import call_command

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRETS_KEY = [old]
    secret, codes = enrol(client, tenants.alice, clock, commits)
    stored = Authenticator.objects.get(user=tenants.alice, type=Authenticator.Type.TOTP).data["secret"]
    assert secret not in stored and Fernet(old).decrypt(stored.encode()).decode() == secret
    settings.SECRETS_KEY = [new, old]
    call_command("rotate_secrets_key", stdout=io.StringIO())
    settings.SECRETS_KEY = [new]  # the old key is gone: the app's codes and the recovery codes still work
    sign_in(client, tenants.alice)
    assert client.post(AUTHENTICATE, {"code": totp(secret, clock.now)}).status_code == 302
    client.post("/logout/")
    sign_in(client, tenants.alice)
    assert client.post(AUTHENTICATE, {"code": codes[0]}).status_code == 302


def test_with_two_factor_on_the_address_stays_as_it_is(tenants, client, clock, commits):
    """allauth refuses a new, unconfirmed address on an account with two-factor authentication: the page says
    so and nothing is sent or changed (turn it off, change the address, turn it on again)."""
    from allauth.account.models import EmailAddress
    from django.core import mail

    secret, _ = enrol(client, tenants.alice, clock, commits)
    sign_in(client, tenants.alice)
    client.post(AUTHENTICATE, {"code": totp(secret, clock.now)})
    refused = client.post("/accounts/email/", {"action_add": "", "email": "alice.new@example.org"})
    assert refused.status_code == 200 and b'id="email-error"' in refused.content
    assert not mail.outbox and not EmailAddress.objects.filter(email="alice.new@example.org").exists()
