"""`gpuctl ssh-key add|list|rm`, `gpuctl ssh`, `gpuctl ssh-config` and `gpuctl port-forward` against the real
ASGI server; the ssh program is a stand-in ($GPUCTL_SSH) that records how it was called (the gateway's own
tests drive the real OpenSSH client)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.portal.conftest import running_notebook as notebook_running  # noqa: F401  (a fixture)

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake_ssh(tmp_path):
    said = tmp_path / "argv.json"
    script = tmp_path / "fake-ssh"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {said}\nexit 7\n")
    script.chmod(0o755)
    return script, said


def test_ssh_key_add_list_rm(gpuctl, tokens, tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "me@laptop", "-f",
                    str(tmp_path / "id_ed25519")], check=True)
    (tmp_path / ".ssh").mkdir()
    (tmp_path / "id_ed25519.pub").rename(tmp_path / ".ssh" / "id_ed25519.pub")
    code, out, err = gpuctl(tokens["alice"], "ssh-key", "add")   # ~/.ssh/id_ed25519.pub by default
    assert code == 0, err
    assert out.startswith("SSH key me@laptop added (SHA256:")
    code, out, _ = gpuctl(tokens["alice"], "ssh-key", "list", "-o", "json")
    keys = json.loads(out)
    assert [k["name"] for k in keys] == ["me@laptop"]
    assert gpuctl(tokens["bob"], "ssh-key", "list", "-o", "json")[1].strip() == "[]"
    weak = tmp_path / "weak.pub"
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(tmp_path / "weak")], check=True)
    code, _, err = gpuctl(tokens["alice"], "ssh-key", "add", str(weak))
    assert code != 0 and "too weak" in err and len(err.strip().splitlines()) == 1
    code, _, err = gpuctl(tokens["bob"], "ssh-key", "rm", str(keys[0]["id"]))
    assert code != 0 and f"no SSH key {keys[0]['id']}" in err
    code, out, _ = gpuctl(tokens["alice"], "ssh-key", "rm", str(keys[0]["id"]))
    assert code == 0 and out == f"SSH key {keys[0]['id']} deleted\n"


@pytest.mark.usefixtures("notebook_running")
def test_ssh_config_and_port_forward_name_the_gateway(gpuctl, tokens, fake_ssh):
    script, said = fake_ssh
    code, out, err = gpuctl(tokens["alice"], "ssh-config")
    assert code == 0, err
    assert out.startswith("Host vision-lab.lab\n") and "    Port 2222\n" in out and "    User vision-lab.lab\n" in out
    assert gpuctl(tokens["bob"], "ssh-config")[1] == ""   # another tenant's notebook is not listed

    code, _, err = gpuctl(tokens["alice"], "ssh", "lab", "--replica", "notebook-0", "--", "echo", "hi",
                          env={"GPUCTL_SSH": str(script)})
    assert code == 7, err   # ssh's own exit code
    assert said.read_text().split("\n")[:-1] == ["-p", "2222", "vision-lab.lab.notebook-0@127.0.0.1", "echo", "hi"]
    code, _, err = gpuctl(tokens["alice"], "port-forward", "lab", "6006:8888", env={"GPUCTL_SSH": str(script)})
    assert code == 7 and "forwarding localhost:6006 to port 8888 of vision-lab.lab" in err
    assert "6006:localhost:8888" in said.read_text() and "-N" in said.read_text()
    code, _, err = gpuctl(tokens["alice"], "port-forward", "lab", "70000", env={"GPUCTL_SSH": str(script)})
    assert code != 0 and "is not a port" in err
    code, _, err = gpuctl(tokens["bob"], "ssh", "lab", env={"GPUCTL_SSH": str(script)})
    assert code != 0 and "no running notebook or job named lab" in err
