"""Signing in and out at a company provider is a form post that the portal answers with a redirect to the
provider, and browsers hold that redirect to the page's CSP form-action: the providers' origins are in it.
(The browser test tests/e2e/test_e2e_sso.py is where a missing origin shows; this pins the rule.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def form_action(**env) -> list[str]:
    code = ("import django; django.setup(); from django.conf import settings; import json; "
            "print(json.dumps(settings.CONTENT_SECURITY_POLICY['DIRECTIVES']['form-action']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", **env}, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_forms_post_to_the_portal_and_to_each_providers_origin_only():
    assert form_action(OIDC_PROVIDERS="") == ["'self'"]
    providers = [{"id": "corp", "name": "Corp", "issuer": "https://login.example.com/realms/corp/",
                  "client_id": "gpu", "secret": "s"},
                 {"id": "entra", "name": "Entra", "issuer": "https://login.microsoftonline.com/tenant-id/v2.0",
                  "client_id": "gpu", "secret": "s"}]
    assert form_action(OIDC_PROVIDERS=json.dumps(providers)) == [
        "'self'", "https://login.example.com", "https://login.microsoftonline.com"]
