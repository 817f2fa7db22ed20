"""Workspace secrets and registry credentials in the scheduling layer: encrypted at rest, written by owners only,
refused when bad (nothing stored), re-encrypted by `rotate_secrets_key`, masked in text, and which registry an
image pulls from."""

from __future__ import annotations

import base64
import io
import json

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from portal.models import Membership, Role
from scheduling import secrets
from scheduling.errors import DomainError
from scheduling.models import RegistryCredential, WorkspaceSecret
from tests.factories import UserFactory

VALUE = "hf_s3cr3t-Value-0123456789"


def raw_rows(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 - a fixed table name
        return repr(cursor.fetchall())


def test_a_value_is_stored_encrypted_and_read_back_only_by_key(tenants):
    row, created = secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)
    assert created and row.size == len(VALUE)
    assert VALUE not in raw_rows(WorkspaceSecret._meta.db_table)
    assert secrets.decrypt(WorkspaceSecret.objects.get(pk=row.pk).ciphertext) == VALUE
    assert row.changed_by == tenants.alice and row.changed_by_name == "alice"


def test_setting_a_name_again_replaces_its_value(tenants):
    first, _ = secrets.set_secret(tenants.alice, tenants.vision, "hf-token", "old-value")
    again, created = secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)
    assert not created and again.pk == first.pk
    assert WorkspaceSecret.objects.filter(workspace=tenants.vision).count() == 1
    assert secrets.decrypt(WorkspaceSecret.objects.get(pk=first.pk).ciphertext) == VALUE


@pytest.mark.parametrize(("name", "value", "field"), [
    ("HF_TOKEN", VALUE, "name"), ("-token", VALUE, "name"), ("a" * 64, VALUE, "name"), ("", VALUE, "name"),
    ("hf-token", "", "value"), ("hf-token", "x" * (64 * 1024 + 1), "value"), ("hf-token", "a\x00b", "value"),
])
def test_bad_input_is_refused_by_field_and_nothing_is_stored(tenants, name, value, field):
    with pytest.raises(DomainError) as refused:
        secrets.set_secret(tenants.alice, tenants.vision, name, value)
    assert refused.value.status == 400 and list(refused.value.errors) == [field]
    assert not WorkspaceSecret.objects.exists()


def test_a_value_of_exactly_64_kib_is_taken(tenants):
    row, _ = secrets.set_secret(tenants.alice, tenants.vision, "big", "x" * (64 * 1024))
    assert row.size == 64 * 1024


@pytest.mark.parametrize("who", ["carol", "finance", "bob"])
def test_only_an_owner_of_the_workspace_writes_its_secrets(tenants, who):
    with pytest.raises(secrets.NotSecretsOwner):
        secrets.set_secret(getattr(tenants, who), tenants.vision, "hf-token", VALUE)
    secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)
    with pytest.raises(secrets.NotSecretsOwner):
        secrets.delete_secret(getattr(tenants, who), tenants.vision, "hf-token")
    assert secrets.secret_names(tenants.vision) == ["hf-token"]


def test_a_viewer_is_no_owner(tenants):
    viewer = UserFactory(username="victor")
    Membership.objects.create(user=viewer, workspace=tenants.vision, role=Role.VIEWER)
    assert not secrets.may_manage(viewer, tenants.vision) and secrets.may_manage(tenants.alice, tenants.vision)


def test_deleting_removes_one_secret_and_an_unknown_name_is_a_404(tenants):
    secrets.set_secret(tenants.alice, tenants.vision, "a", "1111")
    secrets.set_secret(tenants.alice, tenants.vision, "b", "2222")
    secrets.delete_secret(tenants.alice, tenants.vision, "a")
    assert secrets.secret_names(tenants.vision) == ["b"]
    with pytest.raises(secrets.NoSuchSecret) as missing:
        secrets.delete_secret(tenants.alice, tenants.vision, "a")
    assert missing.value.status == 404


def test_production_without_a_key_refuses_to_store(settings, tenants):
    settings.SECRETS_KEY = []  # as production without the setting (DEBUG off)
    with pytest.raises(secrets.SecretsNotConfigured, match="SECRETS_KEY must be set"):
        secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)


def test_rotation_re_encrypts_every_value_under_the_first_key(settings, tenants):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRETS_KEY = [old]
    secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)
    secrets.set_registry(tenants.alice, tenants.vision, "registry.example.com", "robot", "pull-pass-77")
    settings.SECRETS_KEY = [new, old]
    out = io.StringIO()
    call_command("rotate_secrets_key", stdout=out)
    assert "re-encrypted 2 values" in out.getvalue()
    settings.SECRETS_KEY = [new]  # the old key is gone: every value still reads
    assert secrets.decrypt(WorkspaceSecret.objects.get().ciphertext) == VALUE
    assert secrets.decrypt(RegistryCredential.objects.get().ciphertext) == "pull-pass-77"
    Fernet(new).decrypt(WorkspaceSecret.objects.get().ciphertext.encode())


def test_rotation_without_the_old_key_changes_nothing_and_says_why(settings, tenants):
    settings.SECRETS_KEY = [Fernet.generate_key().decode()]
    secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)
    before = WorkspaceSecret.objects.get().ciphertext
    settings.SECRETS_KEY = [Fernet.generate_key().decode()]
    with pytest.raises(CommandError, match="cannot be decrypted"):
        call_command("rotate_secrets_key", stdout=io.StringIO())
    assert WorkspaceSecret.objects.get().ciphertext == before


def test_new_key_prints_a_fernet_key():
    out = io.StringIO()
    call_command("rotate_secrets_key", "--new-key", stdout=out)
    Fernet(out.getvalue().strip().encode())  # a valid key, or this raises


def test_mask_hides_each_value_and_the_lines_of_a_file():
    kaggle = '{"username": "alice",\n "key": "0123456789abcdef"}'
    values = secrets._mask_order([VALUE, kaggle, "ab"])
    text = f"token={VALUE}\nloaded key: \"key\": \"0123456789abcdef\"}}\nab ok\n"
    masked = secrets.mask(text, values)
    assert VALUE not in masked and "0123456789abcdef" not in masked
    assert masked.startswith("token=****\n") and "**** ok" in masked


def test_known_values_are_the_workspaces_own(tenants):
    secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)
    secrets.set_secret(tenants.bob, tenants.nlp, "other", "nlp-only-value")
    known = secrets.known_values([tenants.vision.pk])
    assert known == {tenants.vision.pk: [VALUE]}


@pytest.mark.parametrize(("image", "registry"), [
    ("busybox", "docker.io"), ("pytorch/pytorch:2.4", "docker.io"), ("docker.io/library/ubuntu", "docker.io"),
    ("registry.example.com/team/train:1", "registry.example.com"), ("localhost:5000/x", "localhost:5000"),
    ("localhost/x", "localhost"), ("ghcr.io/org/img@sha256:abc", "ghcr.io"), ("Quay.IO/a/b", "quay.io"),
])
def test_the_registry_of_an_image(image, registry):
    assert secrets.image_registry(image) == registry


@pytest.mark.parametrize(("given", "server"), [
    ("https://Registry.Example.com/", "registry.example.com"), ("index.docker.io", "docker.io"),
    ("https://index.docker.io/v1/", "docker.io"), ("localhost:5000", "localhost:5000"),
])
def test_a_registry_server_is_normalised(given, server):
    assert secrets.normalise_server(given) == server


@pytest.mark.parametrize("bad", ["", "has space.com", "-bad.com", "a" * 300])
def test_a_bad_registry_server_is_refused(tenants, bad):
    with pytest.raises(DomainError) as refused:
        secrets.set_registry(tenants.alice, tenants.vision, bad, "robot", "pw")
    assert list(refused.value.errors) == ["server"] and not RegistryCredential.objects.exists()


def test_registry_credential_replaced_by_server_and_its_dockerconfigjson(tenants):
    secrets.set_registry(tenants.alice, tenants.vision, "registry.example.com", "robot", "first")
    row, created = secrets.set_registry(tenants.alice, tenants.vision, "https://registry.example.com", "robot2",
                                        "pull-pass-77")
    assert not created and RegistryCredential.objects.count() == 1 and row.username == "robot2"
    assert "pull-pass-77" not in raw_rows(RegistryCredential._meta.db_table)
    config = json.loads(secrets.dockerconfigjson("registry.example.com", "robot2", "pull-pass-77"))
    auth = config["auths"]["registry.example.com"]
    assert base64.b64decode(auth["auth"]).decode() == "robot2:pull-pass-77"


def test_launch_secrets_read_only_what_the_jobs_name(tenants):
    from tests.factories import JobFactory

    secrets.set_secret(tenants.alice, tenants.vision, "hf-token", VALUE)
    secrets.set_secret(tenants.alice, tenants.vision, "unused", "unused-value")
    secrets.set_registry(tenants.alice, tenants.vision, "registry.example.com", "robot", "pull-pass-77")
    job = JobFactory(workspace=tenants.vision, roles=[{"name": "main", "image": "registry.example.com/t/x:1",
                                                       "secret_env": {"HF_TOKEN": "hf-token"}, "secret_mounts": []}])
    found = secrets.launch_secrets([job])
    assert found.values_for(tenants.vision.pk, ["hf-token", "unused"]) == {"hf-token": VALUE}
    assert found.pull_for(tenants.vision.pk, "registry.example.com/t/x:1").server == "registry.example.com"
    assert found.pull_for(tenants.vision.pk, "busybox") is None
    assert VALUE not in repr(found) and "pull-pass-77" not in repr(found)
