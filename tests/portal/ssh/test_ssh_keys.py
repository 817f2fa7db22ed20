"""SSH keys: ed25519 or RSA of at least 3,072 bits, each with its SHA256 fingerprint (as ssh-keygen shows it);
bad input is refused by field with nothing stored, on the page and in the API (problem details); a user sees and
deletes only their own; staff revoke anyone's; a deactivated user's key is refused at once."""

from __future__ import annotations

import subprocess

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from portal import ssh_keys
from portal.models import SshKey
from scheduling.api import DomainError

KEYS = "/api/v1/account/ssh-keys/"


def openssh(private) -> str:
    return private.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                             serialization.PublicFormat.OpenSSH).decode()


def ed25519_line() -> str:
    return openssh(ed25519.Ed25519PrivateKey.generate())


def rsa_line(bits: int) -> str:
    return openssh(rsa.generate_private_key(public_exponent=65537, key_size=bits))


def test_the_fingerprint_is_the_one_ssh_keygen_shows(tmp_path):
    line = ed25519_line() + " me@laptop"
    (tmp_path / "k.pub").write_text(line + "\n")
    shown = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(tmp_path / "k.pub")], capture_output=True,
                           text=True, check=True).stdout.split()[1]
    stored, fingerprint = ssh_keys.parse_public_key(line)
    assert fingerprint == shown and stored == " ".join(line.split()[:2])   # the comment is not kept


@pytest.mark.parametrize(("text", "says"), [
    ("", "paste a public key"),
    ("ssh-ed25519", "not an OpenSSH public key"),
    ("ssh-ed25519 not-base64!!", "cannot be read"),
    ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "ssh-dss keys are not accepted"),
    ("-----BEGIN OPENSSH PRIVATE KEY----- abc", "this is a private key"),
])
def test_a_bad_key_is_refused_on_its_field(tenants, text, says):
    with pytest.raises(DomainError) as refused:
        ssh_keys.add_key(tenants.alice, "laptop", text)
    assert says in " ".join(refused.value.errors["public_key"])
    assert not SshKey.objects.exists()


def test_a_weak_rsa_key_is_refused_and_a_strong_one_taken(tenants):
    with pytest.raises(DomainError) as refused:
        ssh_keys.add_key(tenants.alice, "old", rsa_line(2048))
    assert "RSA key of 2048 bits is too weak: at least 3072 bits" in refused.value.errors["public_key"][0]
    key = ssh_keys.add_key(tenants.alice, "new", rsa_line(3072))
    assert key.key_type == "ssh-rsa" and key.fingerprint.startswith("SHA256:")


def test_one_key_names_one_user_only(tenants):
    line = ed25519_line()
    ssh_keys.add_key(tenants.alice, "laptop", line)
    with pytest.raises(DomainError) as refused:
        ssh_keys.add_key(tenants.bob, "laptop", line)
    assert "already registered" in refused.value.errors["public_key"][0]
    assert "alice" not in str(refused.value)


def test_staff_revoke_any_key_and_a_deactivated_users_key_is_refused(tenants):
    key = ssh_keys.add_key(tenants.alice, "laptop", ed25519_line())
    assert ssh_keys.key_owner(key.fingerprint) == key
    with pytest.raises(DomainError):
        ssh_keys.revoke_key(tenants.bob, key.pk)   # not staff
    revoked = ssh_keys.revoke_key(tenants.admin, key.pk)
    assert revoked.revoked is not None and revoked.revoked_by == tenants.admin
    assert ssh_keys.key_owner(key.fingerprint) is None
    other = ssh_keys.add_key(tenants.carol, "desk", ed25519_line())
    tenants.carol.is_active = False
    tenants.carol.save()
    assert ssh_keys.key_owner(other.fingerprint) is None


def test_the_admin_revokes_with_its_action(tenants, client):
    key = ssh_keys.add_key(tenants.alice, "laptop", ed25519_line())
    client.force_login(tenants.admin)
    answer = client.post("/admin/portal/sshkey/", {"action": "revoke", "_selected_action": [key.pk]})
    assert answer.status_code == 302
    key.refresh_from_db()
    assert key.revoked is not None and key.revoked_by == tenants.admin


def test_the_api_adds_lists_and_deletes_and_refuses_bad_input_with_a_problem(tenants, api_as):
    alice, bob = api_as(tenants.alice), api_as(tenants.bob)
    made = alice.post(KEYS, {"name": "laptop", "public_key": ed25519_line() + " me@laptop"}, format="json")
    assert made.status_code == 201, made.content
    assert set(made.json()) == {"id", "name", "type", "public_key", "fingerprint", "created", "last_used"}
    weak = alice.post(KEYS, {"name": "old", "public_key": rsa_line(2048)}, format="json")
    assert weak.status_code == 422 and weak["Content-Type"] == "application/problem+json"
    assert [e["field"] for e in weak.json()["errors"]] == ["public_key"]
    assert [k["name"] for k in alice.get(KEYS).json()] == ["laptop"]
    assert bob.get(KEYS).json() == []   # another tenant sees none of them
    assert bob.delete(f"{KEYS}{made.json()['id']}/").status_code == 404
    assert alice.delete(f"{KEYS}{made.json()['id']}/").status_code == 204
    assert not SshKey.objects.exists()


def test_the_page_adds_shows_and_deletes(tenants, client):
    client.force_login(tenants.alice)
    page = client.get("/account/ssh-keys/")
    assert page.status_code == 200 and "ssh -p 2222" in page.content.decode()
    bad = client.post("/account/ssh-keys/", {"name": "laptop", "public_key": "ssh-rsa nope"})
    assert bad.status_code == 400 and "cannot be read" in bad.content.decode()
    line = ed25519_line()
    assert client.post("/account/ssh-keys/", {"name": "laptop", "public_key": line}).status_code == 302
    key = SshKey.objects.get()
    assert key.fingerprint in client.get("/account/ssh-keys/").content.decode()
    client.force_login(tenants.bob)
    client.post("/account/ssh-keys/", {"delete": key.pk})   # not bob's: nothing happens
    assert SshKey.objects.filter(pk=key.pk).exists()
    client.force_login(tenants.alice)
    client.post("/account/ssh-keys/", {"delete": key.pk})
    assert not SshKey.objects.exists()
