"""The chart's identity values (identity.*): OIDC providers, local sign-in, accounts made at first sign-in,
group roles, LDAP and SCIM become the environment the settings read, in the ConfigMap, while every secret
(an OIDC client's, the LDAP service account's password) comes from a Secret the operator made and never from
values. Checked the whole way: the rendered environment is given to a Python that loads the settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import kubernetes_validate
import pytest

from portal.testing import ROOT
from tests.deploy.gotemplate import TemplateError
from tests.deploy.test_chart import K8S_VERSION, named, render, values_for

GROUP_ROLES = {
    "ml-vision-owners": [{"workspace": "vision-lab", "role": "owner"}],
    "platform-admins": [{"staff": True}],
}
IDENTITY = {
    "identity": {
        "localLogin": False,
        "oidcCreateUsers": False,
        "groupRoles": GROUP_ROLES,
        "oidc": {
            "providers": [
                {
                    "id": "corp-sso",
                    "name": "Corp",
                    "issuer": "https://keycloak.example.com/realms/corp",
                    "client_id": "gpu-portal",
                    "scopes": ["openid", "email", "profile", "groups"],
                    "groups_claim": "groups",
                },
                {
                    "id": "partners",
                    "issuer": "https://login.microsoftonline.com/tenant-id/v2.0",
                    "client_id": "app-id",
                },
            ],
            "clientSecrets": [
                {"provider": "corp-sso", "secretName": "oidc-corp", "key": "client-secret"},
                {"provider": "partners", "secretName": "oidc-partners", "key": "secret"},
            ],
        },
        "ldap": {
            "enabled": True,
            "url": "ldaps://ldap.example.org:636",
            "searchBase": "dc=example,dc=org",
            "usernameAttribute": "sAMAccountName",
            "objectClass": "user",
            "userSearchFilter": "(sAMAccountName={username})",
            "bindDn": "cn=portal,dc=example,dc=org",
            "bindPasswordSecret": "ldap-bind",
            "caConfigMap": "corp-ca",
            "caKey": "corp-ca.pem",
            "userGroupsAttribute": "memberOf",
        },
        "scim": {"enabled": False},
    }
}
# what the Secrets named above hold, for the settings' side of the check
SECRETS = {
    ("oidc-corp", "client-secret"): "corp-secret",
    ("oidc-partners", "secret"): "partners-secret",
    ("ldap-bind", "password"): "bind-password",
}
IDENTITY_VARIABLES = ("LOCAL_LOGIN", "OIDC_", "IDENTITY_GROUP_ROLES", "LDAP_", "SCIM_ENABLED")


def _portal(docs: list[dict]) -> dict:
    return named(docs, "Deployment", "gpu-portal")["spec"]["template"]["spec"]


def _identity_config(docs: list[dict]) -> dict[str, str]:
    data = named(docs, "ConfigMap", "gpu-config")["data"]
    return {name: value for name, value in data.items() if name.startswith(IDENTITY_VARIABLES)}


def _loaded_settings(env: dict[str, str]) -> dict:
    """The identity settings a portal started with `env` reads."""
    code = """import json, django
django.setup()
from django.conf import settings as s
tls = s.LDAP_AUTH_CONNECT_ARGS.get("tls")
print(json.dumps({
    "LOCAL_LOGIN": s.LOCAL_LOGIN, "OIDC_CREATE_USERS": s.OIDC_CREATE_USERS, "SCIM_ENABLED": s.SCIM_ENABLED,
    "IDENTITY_GROUP_ROLES": s.IDENTITY_GROUP_ROLES, "OIDC_PROVIDERS": s.OIDC_PROVIDERS,
    "secrets": {a["provider_id"]: a["secret"] for a in s.SOCIALACCOUNT_PROVIDERS["openid_connect"]["APPS"]},
    "LDAP_AUTH_URL": s.LDAP_AUTH_URL, "LDAP_AUTH_SEARCH_BASE": s.LDAP_AUTH_SEARCH_BASE,
    "LDAP_AUTH_USER_FIELDS": s.LDAP_AUTH_USER_FIELDS, "LDAP_AUTH_OBJECT_CLASS": s.LDAP_AUTH_OBJECT_CLASS,
    "LDAP_AUTH_USER_SEARCH_FILTER": s.LDAP_AUTH_USER_SEARCH_FILTER,
    "LDAP_AUTH_CONNECTION_USERNAME": s.LDAP_AUTH_CONNECTION_USERNAME,
    "LDAP_AUTH_CONNECTION_PASSWORD": s.LDAP_AUTH_CONNECTION_PASSWORD,
    "LDAP_USER_GROUPS_ATTRIBUTE": s.LDAP_USER_GROUPS_ATTRIBUTE, "ca": tls and tls.ca_certs_file,
    "backends": s.AUTHENTICATION_BACKENDS}))
"""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(IDENTITY_VARIABLES)}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "DJANGO_SETTINGS_MODULE": "portal.settings", **env},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_by_default_local_sign_in_only_with_scim_on_and_no_secrets_asked_for():
    docs = render(values_for("values.yaml"))
    assert _identity_config(docs) == {
        "LOCAL_LOGIN": "true",
        "OIDC_CREATE_USERS": "true",
        "IDENTITY_GROUP_ROLES": "{}",
        "OIDC_PROVIDERS": "[]",
        "SCIM_ENABLED": "true",
    }
    portal = _portal(docs)
    assert "env" not in portal["containers"][0]
    assert "ldap-ca" not in {v["name"] for v in portal["volumes"]}


def test_identity_values_become_the_settings_with_secrets_from_secrets_only(tmp_path):
    docs = render(values_for("values.yaml", IDENTITY))
    for doc in docs:
        if doc["kind"] in ("ConfigMap", "Deployment"):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    config = _identity_config(docs)
    rendered = json.dumps(docs)
    assert not [secret for secret in SECRETS.values() if secret in rendered]
    assert "secret" not in json.loads(config["OIDC_PROVIDERS"])[0]

    portal = _portal(docs)
    container = portal["containers"][0]
    refs = {
        e["name"]: (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in container["env"]
    }
    assert refs == {
        "OIDC_SECRET_CORP_SSO": ("oidc-corp", "client-secret"),
        "OIDC_SECRET_PARTNERS": ("oidc-partners", "secret"),
        "LDAP_AUTH_BIND_PASSWORD": ("ldap-bind", "password"),
    }
    for name in ("gpu-worker", "gpu-beat"):  # only the portal signs people in: only it holds these secrets
        other = named(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
        assert not [e for e in other.get("env", []) if "OIDC_SECRET" in e["name"] or "LDAP" in e["name"]]
    # the CA bundle from the operator's ConfigMap, where LDAP_AUTH_CA_FILE says
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "ldap-ca"]
    (volume,) = [v for v in portal["volumes"] if v["name"] == "ldap-ca"]
    assert volume["configMap"] == {
        "name": "corp-ca",
        "items": [{"key": "corp-ca.pem", "path": "corp-ca.pem"}],
    }
    assert config["LDAP_AUTH_CA_FILE"] == f"{mount['mountPath']}/corp-ca.pem" and mount["readOnly"] is True

    # the portal pod's environment, the Secrets' keys filled in and the CA where this machine has it
    (tmp_path / "corp-ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    env = {
        **config,
        "LDAP_AUTH_CA_FILE": str(tmp_path / "corp-ca.pem"),
        **{name: SECRETS[ref] for name, ref in refs.items()},
    }
    loaded = _loaded_settings(env)
    assert (loaded["LOCAL_LOGIN"], loaded["OIDC_CREATE_USERS"], loaded["SCIM_ENABLED"]) == (
        False,
        False,
        False,
    )
    assert loaded["IDENTITY_GROUP_ROLES"] == GROUP_ROLES
    assert loaded["OIDC_PROVIDERS"] == IDENTITY["identity"]["oidc"]["providers"]
    assert loaded["secrets"] == {"corp-sso": "corp-secret", "partners": "partners-secret"}
    assert loaded["LDAP_AUTH_URL"] == ["ldaps://ldap.example.org:636"]
    assert (
        loaded["LDAP_AUTH_SEARCH_BASE"] == "dc=example,dc=org" and loaded["LDAP_AUTH_OBJECT_CLASS"] == "user"
    )
    assert loaded["LDAP_AUTH_USER_FIELDS"]["username"] == "sAMAccountName"
    assert loaded["LDAP_AUTH_USER_SEARCH_FILTER"] == "(sAMAccountName={username})"
    assert loaded["LDAP_AUTH_CONNECTION_USERNAME"] == "cn=portal,dc=example,dc=org"
    assert loaded["LDAP_AUTH_CONNECTION_PASSWORD"] == "bind-password"
    assert loaded["LDAP_USER_GROUPS_ATTRIBUTE"] == "memberOf"
    assert loaded["ca"] == str(tmp_path / "corp-ca.pem")  # ldaps:// checked against it
    assert "portal.identity.ldap.LDAPBackend" in loaded["backends"]


def test_a_ca_from_a_secret_and_direct_bind_without_a_service_account():
    values = {
        "identity": {
            "ldap": {
                "enabled": True,
                "url": "ldap://ldap.example.org:389",
                "startTls": True,
                "searchBase": "ou=people,dc=example,dc=org",
                "caSecret": "ldap-ca",
                "bindTemplate": "uid={username},ou=people,dc=example,dc=org",
            }
        }
    }
    docs = render(values_for("values.yaml", values))
    config = _identity_config(docs)
    assert (
        config["LDAP_AUTH_USE_TLS"] == "true"
        and config["LDAP_AUTH_CA_FILE"] == "/etc/gpu-platform/ldap-ca/ca.crt"
    )
    assert config["LDAP_AUTH_BIND_TEMPLATE"] == "uid={username},ou=people,dc=example,dc=org"
    assert "LDAP_AUTH_BIND_DN" not in config and "LDAP_AUTH_USER_SEARCH_FILTER" not in config
    portal = _portal(docs)
    assert "env" not in portal["containers"][0]  # no service account: no password to read
    (volume,) = [v for v in portal["volumes"] if v["name"] == "ldap-ca"]
    assert volume["secret"] == {"secretName": "ldap-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}


@pytest.mark.parametrize(
    ("identity", "error"),
    [
        (
            {
                "oidc": {
                    "providers": [{"id": "corp", "issuer": "https://i", "client_id": "c", "secret": "inline"}]
                }
            },
            "never goes in values",
        ),
        ({"oidc": {"clientSecrets": [{"provider": "corp", "key": "k"}]}}, "secretName"),
        ({"ldap": {"enabled": True, "searchBase": "dc=x"}}, "identity.ldap.url"),
        ({"ldap": {"enabled": True, "url": "ldap://x"}}, "identity.ldap.searchBase"),
        (
            {"ldap": {"enabled": True, "url": "ldap://x", "searchBase": "dc=x", "bindDn": "cn=portal,dc=x"}},
            "bindPasswordSecret",
        ),
    ],
)
def test_a_secret_in_values_or_a_missing_ldap_setting_is_refused_at_render_time(identity, error):
    with pytest.raises(TemplateError, match=error):
        render(values_for("values.yaml", {"identity": identity}))
