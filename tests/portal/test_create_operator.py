"""`manage.py create_operator`: the first operator of an install, idempotent, the password never printed."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from portal.console.models import AuditEntry
from tests.factories import UserFactory

PASSWORD = "Lamp-Orbit-7-Quartz"
OTHER = "Rivet-Meadow-3-Cobalt"


def run(*args, env_password: str | None = None, monkeypatch=None) -> str:
    if monkeypatch is not None:
        if env_password is None:
            monkeypatch.delenv("OPERATOR_PASSWORD", raising=False)
        else:
            monkeypatch.setenv("OPERATOR_PASSWORD", env_password)
    out, err = StringIO(), StringIO()
    call_command("create_operator", *args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


@pytest.fixture
def password_file(tmp_path):
    path = tmp_path / "password"
    path.write_text(PASSWORD + "\n")
    return path


def test_creates_an_operator_from_a_password_file_and_can_run_again(db, password_file, monkeypatch):
    output = run("--username", "ops", "--email", "ops@example.com", "--password-file", str(password_file),
                 monkeypatch=monkeypatch)
    user = get_user_model().objects.get(username="ops")
    assert user.is_staff and user.is_superuser and user.is_active and user.email == "ops@example.com"
    assert user.check_password(PASSWORD)
    assert "created" in output and PASSWORD not in output
    entry = AuditEntry.objects.get(target_id=str(user.pk), action="create")
    assert entry.username == "system" and PASSWORD not in str(entry.changes) + entry.message
    again = run("--username", "ops", "--email", "ops@example.com", "--password-file", str(password_file),
                monkeypatch=monkeypatch)
    assert "nothing changed" in again
    assert get_user_model().objects.filter(username__iexact="ops").count() == 1
    assert AuditEntry.objects.filter(target_id=str(user.pk)).count() == 1


def test_password_from_the_environment_and_update_resets_it(db, monkeypatch):
    run("--username", "ops", "--email", "ops@example.com", env_password=PASSWORD, monkeypatch=monkeypatch)
    with pytest.raises(CommandError, match="another password; --update resets it") as refused:
        run("--username", "ops", "--email", "ops@example.com", env_password=OTHER, monkeypatch=monkeypatch)
    assert OTHER not in str(refused.value)
    output = run("--username", "ops", "--email", "new@example.com", "--update", env_password=OTHER,
                 monkeypatch=monkeypatch)
    user = get_user_model().objects.get(username="ops")
    assert "updated" in output and OTHER not in output
    assert user.check_password(OTHER) and not user.check_password(PASSWORD) and user.email == "new@example.com"


def test_an_existing_tenant_user_is_promoted_only_with_update(db, password_file, monkeypatch):
    alice = UserFactory(username="alice", is_active=False)
    with pytest.raises(CommandError, match="exists and is not an active operator; --update"):
        run("--username", "ALICE", "--email", "a@example.com", "--password-file", str(password_file),
            monkeypatch=monkeypatch)
    alice.refresh_from_db()
    assert not alice.is_staff and not alice.is_active
    run("--username", "alice", "--email", "a@example.com", "--password-file", str(password_file), "--update",
        monkeypatch=monkeypatch)
    alice.refresh_from_db()
    assert alice.is_staff and alice.is_superuser and alice.is_active and alice.check_password(PASSWORD)
    entry = AuditEntry.objects.get(target_id=str(alice.pk), action="update")
    assert entry.changes["is_staff"] == [False, True] and entry.changes["is_active"] == [False, True]


@pytest.mark.parametrize(("args", "env", "message"), [
    (["--email", "ops@example.com"], PASSWORD, "--username"),
    (["--username", "ops", "--email", "not-an-address"], PASSWORD, "is not an email address"),
    (["--username", "ops", "--email", "ops@example.com"], None, "no password: OPERATOR_PASSWORD is empty"),
    (["--username", "ops", "--email", "ops@example.com", "--password-file", "/nonexistent/pw"], None,
     "cannot read --password-file /nonexistent/pw"),
    (["--username", "ops", "--email", "ops@example.com"], "ops", "the password is refused"),
])
def test_bad_input_is_a_clear_error_and_creates_nothing(db, monkeypatch, args, env, message):
    with pytest.raises(CommandError, match=message) as refused:
        run(*args, env_password=env, monkeypatch=monkeypatch)
    assert not get_user_model().objects.filter(username="ops").exists()
    if env:
        assert f"'{env}'" not in str(refused.value)
