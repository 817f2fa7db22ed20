"""`gpuctl secret set|list|rm` and `gpuctl registry add|list|rm` against the real ASGI server: a value read from a
file or standard input (never an argument) and never printed back; refusals are one error line; another tenant
sees none of them."""

from __future__ import annotations

import json

import pytest

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)
VALUE = "hf_s3cr3t-Value-0123456789"


@pytest.fixture
def manage_tokens(cluster) -> dict[str, str]:
    from portal.services import create_api_token

    return {name: create_api_token(getattr(cluster, name), "cli test", scope="manage")[1]
            for name in ("alice", "bob", "carol")}


def test_set_list_replace_and_rm_a_secret(gpuctl, manage_tokens, tmp_path):
    from scheduling import secrets
    from scheduling.models import WorkspaceSecret

    alice = manage_tokens["alice"]
    code, out, err = gpuctl(alice, "secret", "set", "hf-token", "-w", "vision-lab", stdin=VALUE + "\n")
    assert (code, err) == (0, ""), err
    assert out == f"secret hf-token set in vision-lab ({len(VALUE)} bytes)\n"
    assert secrets.decrypt(WorkspaceSecret.objects.get().ciphertext) == VALUE  # the trailing newline dropped

    kaggle = tmp_path / "kaggle.json"
    kaggle.write_text('{"key": "k4ggle-key-987"}\n')
    code, out, _ = gpuctl(alice, "secret", "set", "kaggle", "--from-file", str(kaggle), "-w", "vision-lab",
                          "-o", "json")
    assert code == 0 and json.loads(out)["size"] == len(kaggle.read_text()) and "k4ggle" not in out
    assert secrets.decrypt(WorkspaceSecret.objects.get(name="kaggle").ciphertext) == kaggle.read_text()

    code, out, _ = gpuctl(alice, "secret", "list", "-w", "vision-lab")
    header, *rows = out.splitlines()
    assert code == 0 and header.split() == ["NAME", "SIZE", "CHANGED", "BY"]
    assert [r.split()[0] for r in rows] == ["hf-token", "kaggle"] and all(r.split()[-1] == "alice" for r in rows)
    assert VALUE not in out

    assert gpuctl(alice, "secret", "rm", "hf-token", "kaggle", "-w", "vision-lab")[0] == 0
    assert gpuctl(alice, "secret", "list", "-w", "vision-lab") == (0, "", "no secrets in vision-lab\n")
    code, _, err = gpuctl(alice, "secret", "rm", "hf-token", "-w", "vision-lab")
    assert code == 1 and err.startswith("gpuctl: error:") and "hf-token" in err


def test_refusals_are_one_line_and_store_nothing(gpuctl, manage_tokens):
    from scheduling.models import WorkspaceSecret

    code, _, err = gpuctl(manage_tokens["alice"], "secret", "set", "HF_TOKEN", "-w", "vision-lab", stdin=VALUE)
    assert code != 0 and err.count("\n") == 1 and "name" in err
    code, _, err = gpuctl(manage_tokens["alice"], "secret", "set", "hf-token", "-w", "vision-lab", stdin="")
    assert code != 0 and "empty" in err
    code, _, err = gpuctl(manage_tokens["carol"], "secret", "set", "hf-token", "-w", "vision-lab", stdin=VALUE)
    assert code == 1 and "owner" in err
    assert not WorkspaceSecret.objects.exists()


def test_another_tenant_sees_none(gpuctl, manage_tokens):
    gpuctl(manage_tokens["alice"], "secret", "set", "hf-token", "-w", "vision-lab", stdin=VALUE)
    code, out, err = gpuctl(manage_tokens["bob"], "secret", "list", "-w", "vision-lab")
    assert code == 1 and out == "" and "vision-lab" in err
    assert gpuctl(manage_tokens["bob"], "secret", "list", "-w", "nlp-group") == (0, "", "no secrets in nlp-group\n")


def test_registry_add_list_rm(gpuctl, manage_tokens):
    alice = manage_tokens["alice"]
    code, out, err = gpuctl(alice, "registry", "add", "https://registry.example.com/", "-u", "robot",
                            "--password-stdin", "-w", "vision-lab", stdin="pull-pass-77\n")
    assert (code, err) == (0, "") and out == "credential for registry.example.com set in vision-lab (user robot)\n"
    code, out, _ = gpuctl(alice, "registry", "list", "-w", "vision-lab", "-o", "json")
    listed = json.loads(out)
    assert [(r["server"], r["username"]) for r in listed] == [("registry.example.com", "robot")]
    assert "pull-pass-77" not in out
    assert gpuctl(alice, "registry", "rm", "registry.example.com", "-w", "vision-lab")[0] == 0
    assert gpuctl(alice, "registry", "list", "-w", "vision-lab") == (
        0, "", "no registry credentials in vision-lab\n")
