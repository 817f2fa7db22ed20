"""A user sees where they are signed in and ends any of those sessions; an operator ends all of a user's.
Ending a session takes it out of the session store: that browser's next request is anonymous. The index's
last_seen is touched at most once a minute, so a busy session writes nothing on most requests."""

import uuid

import pytest
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.console.models import AuditEntry
from portal.models import UserSession
from portal.user_sessions import device
from tests.world import PASSWORDS

FIREFOX_LINUX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
SAFARI_IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
                 "Version/17.5 Mobile/15E148 Safari/604.1")


def signed_in(username, user_agent=FIREFOX_LINUX, **extra) -> Client:
    """A browser of its own (its own address: the sign-in rate limit counts per address) signed in by the form."""
    address = f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"
    client = Client(REMOTE_ADDR=address, HTTP_USER_AGENT=user_agent, **extra)
    assert client.post("/login/", {"username": username, "password": PASSWORDS[username]}).status_code == 302
    return client


def listed(client) -> dict[int, str]:
    page = client.get("/account/sessions/")
    assert page.status_code == 200
    return {row.pk: row.device for row in page.context["rows"]}


def goes_to_login(response) -> bool:
    return response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize(("user_agent", "name"), [
    (FIREFOX_LINUX, "Firefox on Linux"), (SAFARI_IPHONE, "Safari on iOS"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36 "
     "Edg/126.0", "Edge on Windows"),
    ("Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36",
     "Chrome on Android"),
    ("curl/8.5.0", "curl"), ("", "Unknown device"),
])
def test_the_device_is_read_simply_from_the_user_agent(user_agent, name):
    assert device(user_agent) == name


def test_two_sign_ins_are_two_sessions_and_ending_one_signs_out_that_browser_only(tenants, clock):
    laptop = signed_in("alice")
    clock.advance(300)
    phone = signed_in("alice", SAFARI_IPHONE)
    rows = listed(laptop)
    assert sorted(rows.values()) == ["Firefox on Linux", "Safari on iOS"]
    phone_row = UserSession.objects.get(user=tenants.alice, user_agent=SAFARI_IPHONE)
    assert phone_row.created == clock.now and phone_row.ip == phone.defaults["REMOTE_ADDR"]
    page = laptop.get("/account/sessions/").content.decode()
    assert phone_row.session_key not in page  # the store's key is never shown

    ended = laptop.post(f"/account/sessions/{phone_row.pk}/end/")
    assert ended.status_code == 302 and ended["Location"] == "/account/sessions/"
    assert goes_to_login(phone.get("/account/sessions/"))
    assert not Session.objects.filter(session_key=phone_row.session_key).exists()
    assert list(listed(laptop).values()) == ["Firefox on Linux"]


def test_ending_the_current_session_signs_out(tenants, clock):
    laptop = signed_in("alice")
    (row,) = UserSession.objects.filter(user=tenants.alice)
    assert goes_to_login(laptop.post(f"/account/sessions/{row.pk}/end/"))
    assert goes_to_login(laptop.get("/account/sessions/"))
    assert not UserSession.objects.exists()


def test_another_users_sessions_are_never_listed_nor_ended(tenants, clock):
    alice = signed_in("alice")
    bob = signed_in("bob")
    alices = UserSession.objects.get(user=tenants.alice)
    assert list(listed(bob)) == [UserSession.objects.get(user=tenants.bob).pk]
    assert bob.post(f"/account/sessions/{alices.pk}/end/").status_code == 404
    assert bob.post("/account/sessions/999999/end/").status_code == 404
    assert list(listed(alice)) == [alices.pk]  # still signed in


def test_ending_needs_a_post_with_the_csrf_token(tenants, clock):
    browser = Client(enforce_csrf_checks=True, HTTP_USER_AGENT=FIREFOX_LINUX)
    browser.cookies = signed_in("alice").cookies  # the same session, now checked as a browser is
    (row,) = UserSession.objects.filter(user=tenants.alice)
    assert browser.get(f"/account/sessions/{row.pk}/end/").status_code == 405
    assert browser.post(f"/account/sessions/{row.pk}/end/").status_code == 403
    assert listed(browser) == {row.pk: "Firefox on Linux"}


def test_signing_out_and_a_cleared_session_leave_the_list(tenants, clock):
    laptop, phone = signed_in("alice"), signed_in("alice", SAFARI_IPHONE)
    assert laptop.post("/logout/").status_code == 302
    assert UserSession.objects.filter(user=tenants.alice).count() == 1
    desktop = signed_in("alice")
    Session.objects.filter(session_key=UserSession.objects.get(user_agent=SAFARI_IPHONE).session_key).delete()
    assert list(listed(desktop).values()) == ["Firefox on Linux"]
    assert goes_to_login(phone.get("/"))


def test_a_session_unseen_for_longer_than_a_session_lives_leaves_the_list(tenants, clock, settings):
    laptop, _ = signed_in("alice"), signed_in("alice", SAFARI_IPHONE)
    clock.advance(settings.SESSION_COOKIE_AGE + 2 * 60)
    assert list(listed(laptop).values()) == ["Firefox on Linux"]  # this one was just seen
    assert not UserSession.objects.filter(user_agent=SAFARI_IPHONE).exists()


def _writes(queries) -> list[str]:
    return [q["sql"] for q in queries
            if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE")) and
            ("usersession" in q["sql"] or "django_session" in q["sql"])]


def test_last_seen_is_written_at_most_once_a_minute(tenants, clock):
    browser = signed_in("alice")
    (row,) = UserSession.objects.filter(user=tenants.alice)
    signed_in_at = row.last_seen
    with CaptureQueriesContext(connection) as busy_minute:
        for _ in range(5):
            clock.advance(10)
            assert browser.get("/account/preferences/").status_code == 200
    assert _writes(busy_minute.captured_queries) == []
    row.refresh_from_db()
    assert row.last_seen == signed_in_at
    clock.advance(11)  # 61 s since sign-in
    with CaptureQueriesContext(connection) as next_minute:
        browser.get("/account/preferences/")
        browser.get("/account/preferences/")
    writes = _writes(next_minute.captured_queries)
    assert len([w for w in writes if "usersession" in w]) == 1 and len(writes) == 2  # the row, the session's note
    row.refresh_from_db()
    assert row.last_seen == clock.now


def test_an_operator_ends_all_of_a_users_sessions_audited(tenants, clock):
    laptop, phone = signed_in("alice"), signed_in("alice", SAFARI_IPHONE)
    bob = signed_in("bob")
    operator = signed_in("admin")
    page = operator.get("/console/users/alice/sessions/")
    assert page.status_code == 200 and b"Safari on iOS" in page.content and b"Firefox on Linux" in page.content
    assert tenants.alice.username in operator.get("/console/users/").content.decode()
    done = operator.post("/console/users/alice/sessions/")
    assert done.status_code == 302
    assert goes_to_login(laptop.get("/")) and goes_to_login(phone.get("/"))
    assert listed(bob) and not UserSession.objects.filter(user=tenants.alice).exists()
    entry = AuditEntry.objects.get(action="end sessions")
    assert (entry.user, entry.target_type, entry.target_id) == (tenants.admin, "auth.user", str(tenants.alice.pk))
    assert entry.message == "ended 2 sessions of alice"
    # a tenant cannot
    assert bob.post("/console/users/alice/sessions/").status_code in (302, 403)
    assert not AuditEntry.objects.filter(action="end sessions").exclude(pk=entry.pk).exists()
