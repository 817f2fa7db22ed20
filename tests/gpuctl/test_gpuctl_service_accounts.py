"""`gpuctl service-account create|list|rm` and `gpuctl service-account token create|list|rm` against the real
ASGI server: the minted token is alone on standard output and works against the API in its workspace only;
listings never show a value; refusals are one error line; a member is refused and another tenant sees none."""

from __future__ import annotations

import json

import pytest

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def manage_tokens(cluster) -> dict[str, str]:
    from portal.services import create_api_token

    return {name: create_api_token(getattr(cluster, name), "cli test", scope="manage")[1]
            for name in ("alice", "bob", "carol")}


def test_create_mint_use_list_revoke_and_rm(gpuctl, manage_tokens):
    alice = manage_tokens["alice"]
    code, out, err = gpuctl(alice, "service-account", "create", "ci-pipeline", "--role", "member", "-w", "vision-lab")
    assert (code, err) == (0, ""), err
    assert out == "service account svc:ci-pipeline@vision-lab made in vision-lab (member)\n"
    code, out, err = gpuctl(alice, "service-account", "token", "create", "ci-pipeline", "--name", "github",
                            "--expires-in-days", "30", "-w", "vision-lab")
    raw = out.strip()
    assert code == 0 and raw.startswith("gpt_") and out.count("\n") == 1
    assert "github" in err and "not shown again" in err and raw not in err
    assert gpuctl(raw, "jobs", "-w", "vision-lab")[:2] == (0, "no jobs in vision-lab\n")  # its token, its workspace
    code, _, err = gpuctl(raw, "jobs", "-w", "nlp-group")
    assert code == 1 and "nlp-group" in err
    code, out, _ = gpuctl(alice, "service-account", "list", "-w", "vision-lab")
    header, row = out.splitlines()
    assert header.split()[:3] == ["NAME", "USERNAME", "ROLE"] and row.split()[:3] == [
        "ci-pipeline", "svc:ci-pipeline@vision-lab", "member"]
    code, out, _ = gpuctl(alice, "service-account", "token", "list", "ci-pipeline", "-w", "vision-lab", "-o", "json")
    listed = json.loads(out)
    assert [t["name"] for t in listed] == ["github"] and raw not in out and "token" not in listed[0]
    code, out, _ = gpuctl(alice, "service-account", "token", "rm", "ci-pipeline", str(listed[0]["id"]),
                          "-w", "vision-lab")
    assert code == 0 and out == f"token {listed[0]['id']} of ci-pipeline revoked\n"
    code, _, err = gpuctl(raw, "jobs", "-w", "vision-lab")
    assert code != 0 and "revoked" in err
    assert gpuctl(alice, "service-account", "rm", "ci-pipeline", "-w", "vision-lab")[0] == 0
    assert gpuctl(alice, "service-account", "list", "-w", "vision-lab") == (
        0, "", "no service accounts in vision-lab\n")


def test_refusals_are_one_line_and_make_nothing(gpuctl, manage_tokens):
    from portal.models import ServiceAccount

    code, _, err = gpuctl(manage_tokens["alice"], "service-account", "create", "CI", "-w", "vision-lab")
    assert code != 0 and err.count("\n") == 1 and "name" in err
    code, _, err = gpuctl(manage_tokens["carol"], "service-account", "create", "ci", "-w", "vision-lab")
    assert code == 1 and "owner" in err
    code, _, err = gpuctl(manage_tokens["bob"], "service-account", "list", "-w", "vision-lab")
    assert code == 1 and "vision-lab" in err
    code, _, err = gpuctl(manage_tokens["alice"], "service-account", "token", "create", "nobody", "--name", "t",
                          "-w", "vision-lab")
    assert code == 1 and "nobody" in err
    assert not ServiceAccount.objects.exists()
