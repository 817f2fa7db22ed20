"""The gateway as a platform program: `make run` supervises it on SSH_GATEWAY_PORT, its host key is made once and
kept (the same fingerprint after a restart, readable by its user only), and the portal shows that fingerprint."""

from __future__ import annotations

from pathlib import Path

from portal import run, ssh_access, ssh_gateway


def test_make_run_supervises_the_gateway(tmp_path):
    conf = run.config(8000, tmp_path, only=("web", "ssh"))
    assert "[program:ssh]" in conf and "-m portal.ssh_gateway" in conf


def test_the_host_key_is_made_once_and_kept(tmp_path, settings):
    settings.SSH_HOST_KEY_PATH = str(tmp_path / "keys" / "host")
    assert ssh_access.host_fingerprint() == ""   # not made yet
    first = ssh_gateway.load_host_key(Path(settings.SSH_HOST_KEY_PATH))
    shown = ssh_access.host_fingerprint()
    assert shown == first.get_fingerprint("sha256")
    assert (Path(settings.SSH_HOST_KEY_PATH).stat().st_mode & 0o777) == 0o600
    again = ssh_gateway.load_host_key(Path(settings.SSH_HOST_KEY_PATH))
    assert again.get_fingerprint("sha256") == shown


def test_the_keys_page_shows_the_host_key_fingerprint(tenants, client, tmp_path, settings):
    settings.SSH_HOST_KEY_PATH = str(tmp_path / "host")
    ssh_gateway.load_host_key(Path(settings.SSH_HOST_KEY_PATH))
    client.force_login(tenants.alice)
    assert ssh_access.host_fingerprint() in client.get("/account/ssh-keys/").content.decode()
