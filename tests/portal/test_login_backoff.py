"""Failed sign-ins slow an account down (exponential back-off, capped, reset by a success) instead of
locking it for a quarter of an hour, and every failure is audited without the password.

Times come from the platform clock the tests set: no sleeps."""

import pytest
from django.test import Client, override_settings

from portal.console.models import AuditEntry
from tests.world import PASSWORDS

BACKOFF = {"LOGIN_BACKOFF_FREE_FAILURES": 5, "LOGIN_BACKOFF_BASE_S": 2, "LOGIN_BACKOFF_MAX_S": 60,
           "LOGIN_BACKOFF_RESET_S": 900}
WRONG = "wrong-Password-123"


def _login(client, username, password, path="/login/"):
    return client.post(path, {"username": username, "password": password})


@pytest.fixture
def client():  # a fresh client address per test: the sign-in rate limit is counted in the shared Redis
    import uuid

    return Client(REMOTE_ADDR=f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}")


@override_settings(**BACKOFF)
def test_back_off_doubles_is_capped_and_a_success_resets_it(client, tenants, clock):
    assert [_login(client, "alice", WRONG).status_code for _ in range(4)] == [200] * 4
    waits = []
    for _ in range(7):
        refused = _login(client, "alice", WRONG)
        assert refused.status_code == 429
        waits.append(int(refused["Retry-After"]))
        clock.advance(waits[-1])
    assert waits == [2, 4, 8, 16, 32, 60, 60]
    # the owner, from anywhere, gets in once the short window is over; the success forgets the failures
    assert _login(Client(), "alice", PASSWORDS["alice"]).status_code == 302
    assert [_login(client, "alice", WRONG).status_code for _ in range(4)] == [200] * 4


@override_settings(**BACKOFF)
def test_within_the_window_even_the_right_password_waits_and_tries_do_not_extend_it(client, tenants, clock):
    for _ in range(5):
        _login(client, "alice", WRONG)
    clock.advance(1)
    for password in (WRONG, WRONG, PASSWORDS["alice"]):  # refused unread: they neither count nor extend
        refused = _login(client, "alice", password)
        assert refused.status_code == 429 and refused["Retry-After"] == "1"
        assert b"Too many failed logins" in refused.content
    clock.advance(1)
    assert _login(client, "alice", PASSWORDS["alice"]).status_code == 302


@override_settings(**BACKOFF)
def test_back_off_is_per_account_and_failures_are_forgotten(client, tenants, clock):
    for _ in range(5):
        _login(client, "alice", WRONG)
    assert _login(Client(), "bob", PASSWORDS["bob"]).status_code == 302  # another tenant's user is not slowed
    clock.advance(900)
    assert [_login(client, "alice", WRONG).status_code for _ in range(4)] == [200] * 4  # a fresh start


@override_settings(**BACKOFF)
def test_admin_login_is_under_the_same_back_off(client, tenants, clock):
    for _ in range(5):
        _login(client, "admin", WRONG, "/admin/login/")
    assert _login(client, "admin", PASSWORDS["admin"], "/admin/login/").status_code == 429
    clock.advance(2)
    assert _login(client, "admin", PASSWORDS["admin"], "/admin/login/").status_code == 302


@override_settings(**BACKOFF)
def test_failed_logins_are_audited_without_the_password(client, tenants, clock):
    _login(client, "alice", WRONG)
    _login(client, "nobody-here", "another-Secret-456")
    _login(client, "bob", PASSWORDS["bob"])
    entries = list(AuditEntry.objects.filter(action="login failed").order_by("id"))
    assert [(e.username, e.target_repr, e.user_id) for e in entries] == [
        ("alice", "alice", tenants.alice.pk), ("nobody-here", "nobody-here", None)]
    assert entries[0].source == AuditEntry.Source.SIGN_IN
    assert client_address_in(entries[0].message, client)
    for entry in AuditEntry.objects.all():
        text = " ".join(str(v) for v in (entry.message, entry.said, entry.changes, entry.target_repr))
        assert WRONG not in text and "another-Secret-456" not in text and PASSWORDS["bob"] not in text


def client_address_in(message: str, client) -> bool:
    return client.defaults["REMOTE_ADDR"] in message


@override_settings(**BACKOFF)
def test_names_tried_long_ago_are_dropped(client, tenants, clock):
    from portal.models import LoginBackoff

    _login(client, "ghost", WRONG)
    clock.advance(901)
    _login(client, "alice", WRONG)
    assert list(LoginBackoff.objects.values_list("username", flat=True)) == ["alice"]
