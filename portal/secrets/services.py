"""Writes of a workspace's secrets and registry credentials from the portal (its page and API): the scheduling
layer stores them (scheduling.secrets), this writes the audit line, in the same transaction. An audit line names
the secret or registry, never a value."""

from __future__ import annotations

from django.db import transaction

from portal.console import audit
from portal.console.models import AuditEntry
from scheduling.api import buckets, secrets

TENANT = AuditEntry.Source.TENANT
SECRET_TYPE, REGISTRY_TYPE = "scheduling.workspacesecret", "scheduling.registrycredential"
BUCKET_TYPE = "scheduling.workspacebucket"


@transaction.atomic
def set_secret(user, workspace, name, value):
    """Store a secret or replace its value; (the row, whether it is new)."""
    row, created = secrets.set_secret(user, workspace, name, value)
    audit.record(user, "create" if created else "change", target_type_name=SECRET_TYPE, target_id=str(row.pk),
                 target_repr=f"{workspace.slug}/{row.name}", source=TENANT)
    return row, created


@transaction.atomic
def delete_secret(user, workspace, name: str) -> None:
    secrets.delete_secret(user, workspace, name)
    audit.record(user, "delete", target_type_name=SECRET_TYPE, target_repr=f"{workspace.slug}/{name}", source=TENANT)


@transaction.atomic
def set_registry(user, workspace, server, username, password):
    secrets.require_owner(user, workspace)  # a viewer is refused before the input is judged
    before = secrets.registries_of(workspace).filter(server=secrets.normalise_server(server)).first()
    row, created = secrets.set_registry(user, workspace, server, username, password)
    changes = {"username": [before.username if before else None, row.username]}
    audit.record(user, "create" if created else "change", target_type_name=REGISTRY_TYPE, target_id=str(row.pk),
                 target_repr=f"{workspace.slug}/{row.server}", changes=changes, source=TENANT)
    return row, created


@transaction.atomic
def delete_registry(user, workspace, server: str) -> None:
    server = secrets.delete_registry(user, workspace, server)
    audit.record(user, "delete", target_type_name=REGISTRY_TYPE, target_repr=f"{workspace.slug}/{server}",
                 source=TENANT)


@transaction.atomic
def add_bucket(user, workspace, **given):
    """Register a bucket (scheduling.buckets); the audit line names it and the secrets it reads, no value."""
    row = buckets.add_bucket(user, workspace, **given)
    changes = {"endpoint": [None, row.endpoint], "bucket": [None, row.bucket], "prefix": [None, row.prefix],
               "secrets": [None, f"{row.access_key_id_secret}, {row.secret_access_key_secret}"]}
    audit.record(user, "create", target_type_name=BUCKET_TYPE, target_id=str(row.pk),
                 target_repr=f"{workspace.slug}/{row.name}", changes=changes, source=TENANT)
    return row


@transaction.atomic
def delete_bucket(user, workspace, name: str) -> None:
    buckets.delete_bucket(user, workspace, name)
    audit.record(user, "delete", target_type_name=BUCKET_TYPE, target_repr=f"{workspace.slug}/{name}", source=TENANT)
