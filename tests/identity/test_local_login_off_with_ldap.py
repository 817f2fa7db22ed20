"""LOCAL_LOGIN=0 with LDAP on: the password form stays for directory accounts, and refuses local ones."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.identity.test_ldap_sign_in import (  # noqa: F401 - the directory and its settings
    LDAP_PASSWORDS,
    client,
    ldap_on,
    slapd,
)
from tests.world import PASSWORDS

pytestmark = [pytest.mark.django_db, pytest.mark.slow_server]


@pytest.fixture
def local_login_off(ldap_on):  # noqa: F811
    # inside ldap_on's override and undone before it: an override made before it and undone after it
    # (pytest-django's `settings` listed first) would bring ldap_on's settings back for the rest of the run
    with override_settings(LOCAL_LOGIN=False, LDAP_ENABLED=True):
        yield


def test_the_form_signs_in_directory_accounts_only(local_login_off, client, tenants):  # noqa: F811
    page = client.get("/login/").content.decode()
    assert 'id="id_password"' in page and 'id="forgot-password"' not in page
    refused = client.post("/login/", {"username": "alice", "password": PASSWORDS["alice"]})
    assert refused.status_code == 403 and not client.get("/").wsgi_request.user.is_authenticated
    signed_in = client.post("/login/", {"username": "alice-ldap", "password": LDAP_PASSWORDS["alice-ldap"]})
    assert signed_in.status_code == 302 and client.get("/").wsgi_request.user.username == "alice-ldap"
