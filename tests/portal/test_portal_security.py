"""Security baseline: deploy checks, login throttling, CSRF (the demo data: tests/portal/demo)."""

import os
import secrets
import subprocess
import sys

from django.test import Client
from django.urls import reverse

from tests.world import PASSWORDS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update({"DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(60),
           "ALLOWED_HOSTS": "gpu.example.com", "VAR_DIR": str(tmp_path)})
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(DEBUG="0", VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_repeated_failed_logins_are_locked_out(tenants):
    client = Client()
    for _ in range(4):
        response = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
        assert response.status_code == 200  # the form again, with an error
    assert client.post(reverse("login"), {"username": "alice", "password": "wrong"}).status_code == 429
    locked = client.post(reverse("login"), {"username": "alice", "password": PASSWORDS["alice"]})
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content


def test_password_logs_in(tenants):
    client = Client()
    response = client.post(reverse("login"), {"username": "alice", "password": PASSWORDS["alice"]})
    assert response.status_code == 302
    assert client.get(reverse("dashboard")).status_code == 200


def test_forms_require_csrf(tenants):
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenants.alice)
    assert client.post(reverse("switch-workspace"), {"workspace": "vision-lab"}).status_code == 403
    assert client.post(reverse("logout")).status_code == 403
