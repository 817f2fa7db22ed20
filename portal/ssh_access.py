"""The SSH gateway's decisions, in the database (portal/ssh_gateway.py is the program around them): whose key it
is, whether that user may reach `<workspace>.<name>[.<replica>]`, the audit of each session, and the rate limit
on refused attempts per source address and per key. Refusals of a target all read the same, so that a caller
who may not reach a workspace learns nothing of what runs there."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F
from django.utils.translation import gettext

from portal.console import audit
from portal.console.models import AuditEntry
from portal.models import SshAuthFailure, SshKey, SshSession, Workspace
from portal.selectors import membership_for
from portal.ssh_keys import fingerprint_of, key_owner
from scheduling.api import Forbidden, SshTarget, clock, get_backend, has_ssh, running_job, ssh_target

TARGET = re.compile(r"^(?P<workspace>[a-z0-9][-a-z0-9]{0,49})\.(?P<name>[a-z0-9][-a-z0-9]{0,62})"
                    r"(?:\.(?P<replica>[a-z0-9][-a-z0-9]{0,79}))?$")
USERNAME_KEPT = 200


@dataclass(frozen=True)
class Decision:
    target: SshTarget | None
    refusal: str = ""   # one line for the user when target is None


# --------------------------------------------------------------------------- the host key

def host_key_path() -> Path:
    return Path(settings.SSH_HOST_KEY_PATH) if settings.SSH_HOST_KEY_PATH else Path(settings.VAR_DIR) / "ssh_host_ed25519_key"


def host_fingerprint() -> str:
    """The gateway's host key fingerprint (SHA256:…), "" before the gateway made its key."""
    try:
        key = serialization.load_ssh_private_key(host_key_path().read_bytes(), password=None)
    except (OSError, ValueError):
        return ""
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return fingerprint_of(base64.b64decode(line.split()[1]))


# --------------------------------------------------------------------------- who and where

def authenticate(fingerprint: str) -> SshKey | None:
    """The live key of an active user, its last use noted; None refuses it."""
    key = key_owner(fingerprint)
    if key is not None:
        SshKey.objects.filter(pk=key.pk).update(last_used=clock.now())
    return key


def refused_target(username: str) -> str:
    return gettext("%(target)s: no running notebook or job by that name that you may reach over SSH "
                   "(use <workspace>.<name>[.<replica>])") % {"target": username[:80]}


def decide(user, username: str) -> Decision:
    """Whether `user` may reach the running replica `username` names: an owner or member of the workspace, SSH
    not turned off there, the job running. Every refusal of the target reads the same."""
    found = TARGET.fullmatch(username or "")
    refusal = Decision(None, refused_target(username or ""))
    if found is None or not user.is_active:
        return refusal
    workspace = Workspace.objects.filter(slug=found["workspace"]).first()
    membership = membership_for(user, workspace) if workspace else None
    if membership is None or not membership.can_submit:
        return refusal
    if not workspace.ssh_enabled:
        return Decision(None, gettext("SSH is turned off in workspace %(workspace)s") % {"workspace": workspace.slug})
    job = running_job(workspace.pk, found["name"])
    if job is None or not has_ssh(job):
        return refusal
    target = ssh_target(job, found["replica"], get_backend())
    if target is None:
        return refusal
    if target.endpoint is None:
        return Decision(None, gettext("%(target)s runs, but its SSH server does not answer yet; try again in a "
                                      "moment") % {"target": username})
    return Decision(target)


# --------------------------------------------------------------------------- the workspace's switch

class NotSshOwner(Forbidden, PermissionDenied):
    """Only an owner of the workspace turns SSH on or off there."""

    field = "ssh_enabled"


def may_switch_ssh(user, workspace: Workspace) -> bool:
    membership = membership_for(user, workspace)
    return membership is not None and membership.can_manage_members


@transaction.atomic
def set_workspace_ssh(user, workspace: Workspace, enabled: bool) -> Workspace:
    """An owner turns SSH into the workspace's notebooks and jobs on or off: from then on the gateway refuses
    new connections there (sessions already open go on until they end). A change is one audit line."""
    if not may_switch_ssh(user, workspace):
        raise NotSshOwner(gettext("only an owner of %(workspace)s turns SSH on or off") % {
            "workspace": workspace.slug})
    workspace = Workspace.objects.select_for_update().get(pk=workspace.pk)
    if workspace.ssh_enabled != enabled:
        audit.record(user, "change", workspace, changes={"ssh_enabled": [workspace.ssh_enabled, enabled]},
                     source=AuditEntry.Source.TENANT)
        workspace.ssh_enabled = enabled
        workspace.save(update_fields=["ssh_enabled"])
    return workspace


# --------------------------------------------------------------------------- the rate limit

def record_failure(source: str, fingerprint: str, username: str, reason: str) -> None:
    SshAuthFailure.objects.create(source=source[:45], fingerprint=fingerprint[:64], username=username[:USERNAME_KEPT],
                                  reason=reason[:64])


def is_limited(source: str, fingerprint: str = "") -> bool:
    """Too many refusals in the window from this address, or with this key: everything is refused until the
    window moves on."""
    since = clock.now() - timedelta(seconds=settings.SSH_AUTH_WINDOW_SECONDS)
    recent = SshAuthFailure.objects.filter(when__gte=since)
    if recent.filter(source=source).count() >= settings.SSH_AUTH_FAILURES_PER_SOURCE:
        return True
    return bool(fingerprint) and recent.filter(fingerprint=fingerprint).count() >= settings.SSH_AUTH_FAILURES_PER_KEY


# --------------------------------------------------------------------------- the audit

def open_session(key: SshKey, target: SshTarget, source: str) -> int:
    now = clock.now()
    return SshSession.objects.create(user_id=key.user_id, key=key, job=target.job, replica=target.replica_name,
                                     source=source[:45], started=now, last_activity=now).pk


def count_bytes(session_id: int, bytes_in: int, bytes_out: int) -> None:
    """Adds what went through since the last call; the session's last activity is now when any did."""
    if bytes_in or bytes_out:
        SshSession.objects.filter(pk=session_id).update(bytes_in=F("bytes_in") + bytes_in,
                                                        bytes_out=F("bytes_out") + bytes_out,
                                                        last_activity=clock.now())


def close_session(session_id: int, bytes_in: int, bytes_out: int) -> None:
    count_bytes(session_id, bytes_in, bytes_out)
    SshSession.objects.filter(pk=session_id, ended__isnull=True).update(ended=clock.now())


def ssh_bytes_by_job(since, until) -> dict[int, int]:
    """The idle rule's SSH signal (billing.idle.signals, registered at start-up): per job with a session open at
    any moment of [since, until), its sessions' bytes when their last byte fell in the span, else 0. Sessions
    keep running totals, so a span with traffic counts the session's whole total: enough to say it was busy."""
    sessions = SshSession.objects.filter(started__lt=until).exclude(ended__lt=since)
    out: dict[int, int] = {}
    for job_id, last, bytes_in, bytes_out in sessions.values_list("job_id", "last_activity", "bytes_in", "bytes_out"):
        out[job_id] = out.get(job_id, 0) + (bytes_in + bytes_out if since <= last < until else 0)
    return out
