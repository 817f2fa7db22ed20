"""LDAP off (no LDAP_AUTH_URL, the default): no LDAP backend, and a local sign-in never reaches for a directory.
The directory itself: tests/identity/test_ldap_sign_in.py."""

import os
import ssl
import subprocess
import sys

import ldap3
from django.conf import settings
from django.test import Client

from portal.identity.ldap import search_filters
from portal.testing import ROOT
from tests.world import PASSWORDS


def no_connection(*args, **kwargs):
    raise AssertionError("an LDAP connection was tried")


def _backends(**env: str) -> list[str]:
    code = ("import django; django.setup(); from django.conf import settings; "
            "print(','.join(settings.AUTHENTICATION_BACKENDS))")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LDAP_")}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**clean, "DJANGO_SETTINGS_MODULE": "portal.settings", **env})
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().split(",")


def test_the_ldap_backend_is_there_only_when_configured():
    assert "portal.identity.ldap.LDAPBackend" not in _backends()
    on = _backends(LDAP_AUTH_URL="ldap://127.0.0.1:1", LDAP_AUTH_SEARCH_BASE="ou=people,dc=example,dc=org")
    # after the local accounts (allauth's backend, for OIDC sign-ins, comes last)
    assert on[-3:-1] == ["django.contrib.auth.backends.ModelBackend", "portal.identity.ldap.LDAPBackend"]


def test_local_sign_in_with_ldap_off_tries_no_connection(tenants, monkeypatch):
    assert "portal.identity.ldap.LDAPBackend" not in settings.AUTHENTICATION_BACKENDS
    monkeypatch.setattr(ldap3, "Connection", no_connection)
    client = Client(REMOTE_ADDR="10.251.0.1")
    assert client.post("/login/", {"username": "alice", "password": "wrong-Password-1"}).status_code == 200
    assert client.post("/login/", {"username": "alice", "password": PASSWORDS["alice"]}).status_code == 302


def test_search_filters_escape_every_special_character():
    assert search_filters({"uid": "*)(uid=*", "objectClass": "inetOrgPerson"}) == [
        r"(uid=\2a\29\28uid=\2a)", "(objectClass=inetOrgPerson)"]


def _settings_start(**env: str) -> subprocess.CompletedProcess:
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "tls = s.LDAP_AUTH_CONNECT_ARGS.get('tls'); "
            "print(s.LDAP_AUTH_USER_SEARCH_FILTER, tls and tls.ca_certs_file, tls and tls.validate, sep='|')")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LDAP_")}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**clean, "DJANGO_SETTINGS_MODULE": "portal.settings",
                               "LDAP_AUTH_SEARCH_BASE": "dc=example,dc=org", **env})


def test_search_then_bind_needs_a_service_account_and_the_name_in_its_filter():
    refused = _settings_start(LDAP_AUTH_URL="ldap://127.0.0.1:1", LDAP_AUTH_USER_SEARCH_FILTER="(uid={username})")
    assert refused.returncode != 0 and "needs LDAP_AUTH_BIND_DN" in refused.stderr
    refused = _settings_start(LDAP_AUTH_URL="ldap://127.0.0.1:1", LDAP_AUTH_USER_SEARCH_FILTER="(uid=x)",
                              LDAP_AUTH_BIND_DN="cn=portal,dc=example,dc=org")
    assert refused.returncode != 0 and "must contain {username}" in refused.stderr
    started = _settings_start(LDAP_AUTH_URL="ldap://127.0.0.1:1", LDAP_AUTH_USER_SEARCH_FILTER="(uid={username})",
                              LDAP_AUTH_BIND_DN="cn=portal,dc=example,dc=org")
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip() == "(uid={username})|None|None"  # ldap://: no TLS unless StartTLS


def test_ldaps_checks_the_certificate_against_the_ca_file(tmp_path):
    missing = _settings_start(LDAP_AUTH_URL="ldaps://ldap.example.org:636", LDAP_AUTH_CA_FILE=str(tmp_path / "no.crt"))
    assert missing.returncode != 0 and "LDAP_AUTH_CA_FILE" in missing.stderr and "no such file" in missing.stderr
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")  # read at connect, not at start
    started = _settings_start(LDAP_AUTH_URL="ldaps://ldap.example.org:636", LDAP_AUTH_CA_FILE=str(tmp_path / "ca.crt"))
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip() == f"|{tmp_path / 'ca.crt'}|{int(ssl.CERT_REQUIRED)}"
