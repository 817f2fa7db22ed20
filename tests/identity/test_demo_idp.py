"""`make idp` and `make run-idp` agree: the portal's provider settings in the Makefile name the demo provider's
client, its redirect URI is the one the demo provider allows, and alice's groups make her vision-lab's owner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from portal.identity.groups import wanted
from portal.settings.identity import oidc_providers

ROOT = Path(__file__).resolve().parents[2]


def run_idp_setting(name: str) -> str:
    match = re.search(rf"^run-idp: export {name} := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert match, f"make run-idp sets no {name}"
    return match[1]


def test_the_portals_demo_provider_is_the_demo_idps_client():
    idp = json.loads((ROOT / "tests/identity/demo-idp.json").read_text())
    [provider] = oidc_providers(run_idp_setting("OIDC_PROVIDERS"))
    [client] = [c for c in idp["clients"] if c["client_id"] == provider["client_id"]]
    assert provider["issuer"] == idp["issuer"] and provider["secret"] == client["client_secret"]
    assert f"http://127.0.0.1:8000/accounts/oidc/{provider['id']}/login/callback/" in client["redirect_uris"]
    assert "http://127.0.0.1:8000/login/" in client["post_logout_redirect_uris"]


@pytest.mark.django_db
def test_alices_demo_groups_make_her_vision_labs_owner(tenants, settings):
    idp = json.loads((ROOT / "tests/identity/demo-idp.json").read_text())
    settings.IDENTITY_GROUP_ROLES = json.loads(run_idp_setting("IDENTITY_GROUP_ROLES"))
    assert wanted(idp["accounts"]["alice"]["groups"]) == ({tenants.vision.pk: "owner"}, False)
    assert wanted(idp["accounts"]["ops"]["groups"]) == ({}, True)
