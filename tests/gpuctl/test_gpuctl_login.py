"""`gpuctl login` against the real ASGI server: it shows the code and the page, polls while the person approves
at /device/ (the portal's page, signed in as them), saves the token in the config file's profile, and the
saved token then works as that person with the chosen scope; a denial is one error line and saves nothing.
Only the wait between polls is the test's: the person acts during it."""

from __future__ import annotations

import json
import re
import time

import pytest

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def person(monkeypatch, capsys):
    """Replaces gpuctl's wait between polls: on the wait number `at`, the person reads the code gpuctl showed
    and decides at /device/ as `user`; every wait after the first lasts as long as the server asked."""
    import gpuctl.login

    seen = {"waits": [], "shown": ""}

    def acting(user, decision="approve", at=2):
        from django.test import Client

        def wait(seconds):
            seen["waits"].append(seconds)
            if len(seen["waits"]) == at:
                shown = capsys.readouterr()
                seen["shown"] = shown.err
                print(shown.out, end="")  # leave stdout to the command's own capture
                code = re.search(r"type the code ([A-Z]{4}-[A-Z]{4})", shown.err)[1]
                browser = Client()
                browser.force_login(user)
                page = browser.post("/device/", {"user_code": code, "decision": decision})
                state = {"approve": "approved", "deny": "denied"}[decision]
                assert page.status_code == 200 and f'data-state="{state}"'.encode() in page.content
            if len(seen["waits"]) > 1:
                time.sleep(seconds)

        monkeypatch.setattr(gpuctl.login, "sleep", wait)
        return seen

    return acting


def test_login_polls_saves_the_token_and_it_works_as_the_approver(gpuctl, person, cluster, tmp_path, live_daphne):
    from portal.models import ApiToken

    seen = person(cluster.carol)
    code, out, err = gpuctl("", "login", "--scope", "read", "--profile", "lab")
    assert (code, err) == (0, ""), err
    assert f"Open {live_daphne.url}/device/ and type the code" in seen["shown"]
    assert f"{live_daphne.url}/device/?user_code=" in seen["shown"] and seen["waits"] == [5, 5]
    config = tmp_path / ".config" / "gpuctl" / "config.toml"
    assert out == (f"signed in to {live_daphne.url} as carol (scope read); token saved in profile lab of "
                   f"{config}\n")
    saved = config.read_text()
    token = ApiToken.objects.get(user=cluster.carol)
    assert token.scope == "read" and 'default_profile = "lab"' in saved and f'url = "{live_daphne.url}"' in saved
    raw = re.search(r'token = "(gpt_[^"]+)"', saved)[1]
    assert raw.startswith(token.hint) and raw not in out
    env = {"GPUCTL_URL": ""}  # from now on everything comes from the file
    code, out, _ = gpuctl("", "get", "workspaces", "-o", "json", env=env)
    assert code == 0 and [w["slug"] for w in json.loads(out)] == ["vision-lab"]  # carol's
    code, _, err = gpuctl("", "cancel", "1", env=env)
    assert code == 1 and "scope 'read'" in err  # the scope chosen


def test_a_denial_is_one_error_line_and_saves_nothing(gpuctl, person, cluster, tmp_path):
    from portal.models import ApiToken

    person(cluster.alice, "deny", at=1)
    code, out, err = gpuctl("", "login")
    assert code == 1 and out == "" and err == "gpuctl: error: the sign-in was denied in the browser\n"
    assert not ApiToken.objects.exists() and not (tmp_path / ".config" / "gpuctl" / "config.toml").exists()
