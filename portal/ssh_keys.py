"""Users' SSH public keys for the gateway: add (ed25519, or RSA of at least 3,072 bits), list, delete; staff
revoke any user's key. A key of a deactivated user is refused by `key_owner` at once, as a revoked one is."""

from __future__ import annotations

import base64
import binascii
import hashlib

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from django.db import IntegrityError, transaction
from django.utils.translation import gettext

from portal.models import SshKey
from scheduling.api import DomainError, clock

MIN_RSA_BITS = 3072
MAX_KEYS = 50  # per user
MAX_KEY_TEXT = 16 * 1024


class KeyRefused(DomainError):
    """A key (or its name) the platform will not take: well-formed as a request, not as an SSH key."""

    status = 422
    title = "The key was refused"


def fingerprint_of(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint of a key's wire form (`ssh-keygen -l`)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def parse_public_key(text: str) -> tuple[str, str]:
    """(the key as one OpenSSH line without its comment, its fingerprint), or DomainError on `public_key`."""
    text = (text or "").strip()
    if not text:
        raise KeyRefused(gettext("paste a public key: the one line of ~/.ssh/id_ed25519.pub"), field="public_key")
    if len(text) > MAX_KEY_TEXT or "\x00" in text or "\n" in text:
        raise KeyRefused(gettext("one public key on one line, as ~/.ssh/id_ed25519.pub holds it"), field="public_key")
    if "PRIVATE KEY" in text:
        raise KeyRefused(gettext("this is a private key: paste the public one (the .pub file) and keep this "
                                  "one secret"), field="public_key")
    parts = text.split()
    if len(parts) < 2:
        raise KeyRefused(gettext("not an OpenSSH public key: expected 'ssh-ed25519 AAAA…' or 'ssh-rsa AAAA…'"),
                          field="public_key")
    kind, data = parts[0], parts[1]
    if kind not in ("ssh-ed25519", "ssh-rsa"):
        raise KeyRefused(gettext("%(type)s keys are not accepted: use ed25519 (ssh-keygen -t ed25519) or RSA of "
                                  "at least %(bits)s bits") % {"type": kind[:40], "bits": MIN_RSA_BITS},
                          field="public_key")
    try:
        blob = base64.b64decode(data, validate=True)
        key = load_ssh_public_key(f"{kind} {data}".encode())
    except (binascii.Error, ValueError, UnsupportedAlgorithm):
        raise KeyRefused(gettext("not an OpenSSH public key: its data cannot be read"), field="public_key") from None
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise KeyRefused(gettext("an RSA key of %(size)s bits is too weak: at least %(bits)s bits, or use "
                                      "ed25519") % {"size": key.key_size, "bits": MIN_RSA_BITS}, field="public_key")
    elif not isinstance(key, ed25519.Ed25519PublicKey):
        raise KeyRefused(gettext("not an OpenSSH public key: its data cannot be read"), field="public_key")
    return f"{kind} {data}", fingerprint_of(blob)


def add_key(user, name: str, public_key: str) -> SshKey:
    errors: dict[str, list[str]] = {}
    name = (name or "").strip()
    line = fingerprint = ""
    if not name:
        errors["name"] = [gettext("a key needs a name, e.g. the machine it lives on")]
    elif "\x00" in name or len(name) > 100:
        errors["name"] = [gettext("at most 100 characters, no NUL")]
    try:
        line, fingerprint = parse_public_key(public_key)
    except DomainError as error:
        errors.update(error.errors)
    if not errors and SshKey.objects.filter(user=user, revoked__isnull=True).count() >= MAX_KEYS:
        errors["public_key"] = [gettext("at most %(count)s keys: delete one first") % {"count": MAX_KEYS}]
    if errors:
        raise KeyRefused(errors)
    try:
        with transaction.atomic():
            return SshKey.objects.create(user=user, name=name, public_key=line, fingerprint=fingerprint)
    except IntegrityError:
        # never say whose: a key names one user only
        raise DomainError(gettext("this key is already registered; make a new key for this account"),
                          field="public_key") from None


def keys_of(user) -> list[SshKey]:
    return list(SshKey.objects.filter(user=user, revoked__isnull=True))


def _key_id(key_id) -> int:
    """The key's number; 0 (no key has it) for anything that is not one, so it reads as no such key."""
    try:
        number = int(key_id)
    except (TypeError, ValueError):
        return 0
    return number if 0 < number < 2**63 else 0


def delete_key(user, key_id) -> bool:
    """The user's own key goes (its sessions' audit rows keep their times). False: no such key of theirs."""
    deleted, _ = SshKey.objects.filter(user=user, pk=_key_id(key_id)).delete()
    return bool(deleted)


def revoke_key(staff, key_id) -> SshKey:
    """Staff refuse any user's key from now on; the row stays, with who revoked it."""
    if not (staff.is_active and staff.is_staff):
        raise DomainError(gettext("only staff revoke another user's key"))
    key = SshKey.objects.filter(pk=_key_id(key_id)).first()
    if key is None:
        raise DomainError(gettext("no such key"), field="id")
    if key.revoked is None:
        SshKey.objects.filter(pk=key.pk, revoked__isnull=True).update(revoked=clock.now(), revoked_by=staff)
        key.refresh_from_db()
    return key


def public_keys_by_user(user_ids: set[int]) -> dict[int, list[str]]:
    """The live keys of these users, when active (scheduling's reader: a Kubernetes pod's SSH sidecar gets them)."""
    found: dict[int, list[str]] = {}
    for user_id, line in (SshKey.objects.filter(user_id__in=user_ids, revoked__isnull=True, user__is_active=True)
                          .order_by("id").values_list("user_id", "public_key")):
        found.setdefault(user_id, []).append(line)
    return found


def key_owner(fingerprint: str) -> SshKey | None:
    """The live key with this fingerprint, of an active user; None refuses it."""
    return (SshKey.objects.select_related("user")
            .filter(fingerprint=fingerprint, revoked__isnull=True, user__is_active=True).first())
