"""LOCAL_LOGIN=0: the sign-in page offers only the providers and no password sign-in gets in, on /login/ or
/admin/login/; on (the default) nothing changes for local accounts."""

from __future__ import annotations

import pytest

from portal.settings.identity import oidc_providers, socialaccount_providers
from tests.world import PASSWORDS

pytestmark = pytest.mark.django_db


@pytest.fixture
def local_login_off(settings):
    settings.LOCAL_LOGIN = False
    settings.OIDC_PROVIDERS = [{"id": "corp", "name": "Corp", "issuer": "http://127.0.0.1:9/", "client_id": "c"}]
    settings.SOCIALACCOUNT_PROVIDERS = socialaccount_providers(settings.OIDC_PROVIDERS)


def test_the_form_is_gone_and_its_post_refused(local_login_off, tenants, client):
    page = client.get("/login/").content.decode()
    assert 'id="oidc-corp"' in page and 'id="id_password"' not in page
    response = client.post("/login/", {"username": "alice", "password": PASSWORDS["alice"]})
    assert response.status_code == 403 and "Password sign-in is turned off" in response.content.decode()
    assert not client.get("/").wsgi_request.user.is_authenticated


def test_the_admin_password_form_is_refused_too(local_login_off, tenants, client):
    response = client.post("/admin/login/", {"username": "admin", "password": PASSWORDS["admin"]})
    assert response.status_code == 403
    assert not client.get("/").wsgi_request.user.is_authenticated


def test_local_sign_in_works_as_ever_when_on(tenants, client):
    response = client.post("/login/", {"username": "alice", "password": PASSWORDS["alice"]})
    assert response.status_code == 302 and client.get("/").wsgi_request.user == tenants.alice
    client.post("/logout/")
    page = client.get("/login/").content.decode()
    assert 'id="id_password"' in page and 'id="oidc-' not in page  # no providers configured


@pytest.mark.parametrize(("raw", "error"), [
    ("{", "not JSON"), ('{"id": "x"}', "JSON list"), ('[{"id": "corp", "client_id": "c"}]', "issuer is required"),
    ('[{"id": "Corp!", "issuer": "https://i", "client_id": "c"}]', "lower-case slug"),
    ('[{"id": "a", "issuer": "https://i", "client_id": "c"}, {"id": "a", "issuer": "https://j", "client_id": "d"}]',
     "unique"),
])
def test_a_mistake_in_the_providers_stops_the_start_naming_it(raw, error):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=error):
        oidc_providers(raw)


def test_each_provider_becomes_an_allauth_app_with_pkce():
    providers = oidc_providers('[{"id": "corp", "name": "Corp", "issuer": "https://idp.example/realms/x/", '
                               '"client_id": "portal", "secret": "s", "scopes": "openid email groups"}]')
    apps = socialaccount_providers(providers)["openid_connect"]
    assert apps["OAUTH_PKCE_ENABLED"] is True
    assert apps["APPS"] == [{"provider_id": "corp", "name": "Corp", "client_id": "portal", "secret": "s",
                             "settings": {"server_url": "https://idp.example/realms/x", "oauth_pkce_enabled": True,
                                          "scope": ["openid", "email", "groups"]}}]


def test_a_providers_secret_comes_from_its_own_variable_when_the_json_has_none(monkeypatch):
    """Kubernetes: OIDC_PROVIDERS in a ConfigMap, each client secret from a Secret (the Helm chart's way)."""
    monkeypatch.setenv("OIDC_SECRET_CORP_SSO", "from-a-secret")
    providers = oidc_providers('[{"id": "corp-sso", "issuer": "https://i", "client_id": "c"}, '
                               '{"id": "other", "issuer": "https://j", "client_id": "d", "secret": "inline"}]')
    apps = socialaccount_providers(providers)["openid_connect"]["APPS"]
    assert [app["secret"] for app in apps] == ["from-a-secret", "inline"]
    monkeypatch.delenv("OIDC_SECRET_CORP_SSO")
    assert socialaccount_providers(providers)["openid_connect"]["APPS"][0]["secret"] == ""  # a public client


def test_a_providers_secret_is_hidden_from_the_error_report(settings):
    from django.views.debug import SafeExceptionReporterFilter

    settings.OIDC_PROVIDERS = oidc_providers('[{"id": "corp", "issuer": "https://i", "client_id": "c", '
                                             '"secret": "oidc-client-secret-42"}]')
    settings.SOCIALACCOUNT_PROVIDERS = socialaccount_providers(settings.OIDC_PROVIDERS)
    shown = SafeExceptionReporterFilter().get_safe_settings()
    assert "oidc-client-secret-42" not in repr(shown["OIDC_PROVIDERS"]) + repr(shown["SOCIALACCOUNT_PROVIDERS"])
