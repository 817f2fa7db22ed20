"""A real OpenID Connect provider (tests/identity/idp.mjs, panva's oidc-provider on Node) for the sign-in tests,
and a browser's side of its sign-in: the provider's pages through requests, the portal's through Django's
test client."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import requests

from portal.testing import free_port, stop_processes, wait_for_http

HERE = Path(__file__).resolve().parent
PORTAL = "http://testserver"  # Django's test client
PROVIDERS = ("corp", "other")  # two providers on the one server: two clients of it
SECRET = "client-secret-not-logged"  # noqa: S105 - a test client's secret

# sub: claims. Passwords are not checked (the provider's development sign-in form).
ACCOUNTS = {
    "dora": {"email": "dora@example.com", "email_verified": True, "groups": ["vision-owners"], "name": "Dora Dev"},
    "erin": {"email": "erin@example.com", "email_verified": True, "groups": ["nlp-members"]},
    "carol-idp": {"email": "Carol@example.com", "email_verified": True, "groups": []},
    "mallory": {"email": "alice@example.com", "email_verified": False, "groups": ["vision-owners"]},
    "newbie": {"email": "newbie@example.com", "email_verified": False, "groups": []},
}


@dataclass
class Idp:
    issuer: str
    proc: subprocess.Popen

    def provider(self, provider_id: str, **extra) -> dict:
        """An OIDC_PROVIDERS entry for the client `provider_id` of this server."""
        return {"id": provider_id, "name": f"Corp {provider_id}", "issuer": self.issuer, "client_id": provider_id,
                "secret": SECRET, "scopes": ["openid", "profile", "email", "groups"], **extra}


def idp_config(port: int, portal: str = PORTAL, providers: tuple[str, ...] = PROVIDERS) -> dict:
    """The provider's configuration: one client per provider id, whose redirect and sign-out addresses are
    on `portal` (the test client's host, or a live server's URL)."""
    issuer = f"http://127.0.0.1:{port}"
    return {
        "port": port, "issuer": issuer, "accounts": ACCOUNTS,
        "clients": [{"client_id": pid, "client_secret": SECRET,
                     "redirect_uris": [f"{portal}/accounts/oidc/{pid}/login/callback/"],
                     "post_logout_redirect_uris": [f"{portal}/login/"]} for pid in providers],
    }


@contextmanager
def running_idp(tmp_path_factory, portal: str = PORTAL, port: int | None = None,
                providers: tuple[str, ...] = PROVIDERS) -> Iterator[Idp]:
    """The provider (idp.mjs) on `port` (a free one if None) for a portal at `portal`; skips the test where
    node or oidc-provider is missing. A live server is given the issuer before the provider starts: it reads
    the discovery document only at the first sign-in."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the OIDC tests need it (apt install nodejs npm)")
    if not (HERE / "node_modules" / "oidc-provider").is_dir():
        pytest.skip("oidc-provider is not installed: run `npm ci` in tests/identity")
    port = port or free_port()
    config = tmp_path_factory.mktemp("idp") / "idp.json"
    config.write_text(json.dumps(idp_config(port, portal, providers)))
    log = config.with_name("idp.log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(["node", str(HERE / "idp.mjs"), str(config)], cwd=HERE, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/.well-known/openid-configuration", timeout=30, proc=proc)
        yield Idp(issuer=f"http://127.0.0.1:{port}", proc=proc)
    finally:
        stop_processes([proc])


@pytest.fixture(scope="session")
def oidc_idp(tmp_path_factory):
    with running_idp(tmp_path_factory) as idp:
        yield idp


def at_provider(browser: requests.Session, url: str, account: str, portal: str = PORTAL) -> str:
    """Sign in at the provider as `account` from its authorization URL; the callback URL (on `portal`) it sends
    back."""
    while True:
        response = browser.get(url, allow_redirects=False, timeout=10)
        if response.status_code in (302, 303):
            url = urljoin(url, response.headers["Location"])
            if url.startswith(portal):
                return url
            continue
        assert response.status_code == 200, response.text[:500]
        interaction = urlsplit(url).path  # /interaction/<uid>: the development sign-in form
        answer = browser.post(urljoin(url, interaction), data={"prompt": "login", "login": account,
                                                                "password": "any"}, allow_redirects=False, timeout=10)
        assert answer.status_code in (302, 303), answer.text[:500]
        url = urljoin(url, answer.headers["Location"])


def start_sign_in(client, provider_id: str):
    """The portal's side of pressing the provider's button: the authorization URL it sends the browser to."""
    response = client.post(f"/accounts/oidc/{provider_id}/login/", {"process": "login"})
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def callback_path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
