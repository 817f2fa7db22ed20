"""Workspace secrets and registry credentials: stored encrypted, written by owners, named by specs, read only
when a replica is launched.

Values are Fernet tokens under SECRETS_KEY (a list: the first key encrypts, every key decrypts, so a new key
goes first and `manage.py rotate_secrets_key` re-encrypts every value under it). Without the setting a
development platform (DEBUG) has a key derived from SECRET_KEY (portal/settings/security.py); production
refuses to store or read a value.

Nothing here returns a value to a page or the API: `values_for_launch` gives the backends what they mount,
`mask` hides every known value of a workspace in the logs it keeps and serves. The portal records the audit
lines (its layer), with names only.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.db import models, transaction
from django.utils.translation import gettext as _

from scheduling import clock
from scheduling.errors import Conflict, DomainError, Forbidden
from scheduling.models import RegistryCredential, WorkspaceBucket, WorkspaceSecret

log = logging.getLogger(__name__)
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
MAX_VALUE_BYTES = 64 * 1024
MASK = "****"
# A registry host as an image reference starts with it: a DNS name or IPv4 address, an optional port.
SERVER_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?(:[0-9]{1,5})?$")
DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = {"index.docker.io", "registry-1.docker.io", "registry.hub.docker.com", DOCKER_HUB}
MAX_USERNAME = 200


class SecretsNotConfigured(ImproperlyConfigured):
    pass


class NoSuchSecret(DomainError):
    status = 404
    title = "Not found"
    field = "name"


class NotSecretsOwner(Forbidden, PermissionDenied):
    """Only an owner of the workspace writes its secrets and registry credentials."""

    field = "workspace"


# --------------------------------------------------------------------------- the key


def configured_keys() -> tuple[str, ...]:
    """SECRETS_KEY as a tuple of keys, the first the one that encrypts (the settings derive one under DEBUG)."""
    raw = getattr(settings, "SECRETS_KEY", None) or ()
    keys = tuple(k.strip() for k in (raw.split(",") if isinstance(raw, str) else raw) if k and k.strip())
    if keys:
        return keys
    raise SecretsNotConfigured("SECRETS_KEY must be set when DEBUG is off: one or more Fernet keys, comma-separated "
                               "(make one with `manage.py rotate_secrets_key --new-key`)")


@lru_cache(maxsize=4)
def _fernet_for(keys: tuple[str, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(k) for k in keys])
    except (ValueError, TypeError) as e:
        raise SecretsNotConfigured(f"SECRETS_KEY holds a key that is not a Fernet key: {e}") from None


def fernet() -> MultiFernet:
    return _fernet_for(configured_keys())


def new_key() -> str:
    return Fernet.generate_key().decode()


def encrypt(value: str) -> str:
    return fernet().encrypt(value.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise SecretsNotConfigured("a stored secret cannot be decrypted with any key of SECRETS_KEY: was a key "
                                   "removed before `rotate_secrets_key` ran?") from None


def rotate_all() -> int:
    """Re-encrypt every secret and registry password under the first key; returns how many rows."""
    f, count = fernet(), 0
    with transaction.atomic():
        for model in (WorkspaceSecret, RegistryCredential):
            rows = list(model.objects.select_for_update().only("pk", "ciphertext"))
            for row in rows:
                try:
                    row.ciphertext = f.rotate(row.ciphertext.encode()).decode()
                except InvalidToken:
                    raise SecretsNotConfigured(f"{model._meta.label} {row.pk} cannot be decrypted with any key of "
                                               "SECRETS_KEY; nothing was changed") from None
            model.objects.bulk_update(rows, ["ciphertext"], batch_size=500)
            count += len(rows)
    return count


# --------------------------------------------------------------------------- who may


def _membership(user, workspace):
    if not getattr(user, "is_authenticated", False):
        return None
    return workspace.memberships.filter(user=user).first()


def may_manage(user, workspace) -> bool:
    membership = _membership(user, workspace)
    return membership is not None and membership.can_manage_secrets


def require_owner(user, workspace) -> None:
    if not may_manage(user, workspace):
        raise NotSecretsOwner(_("only an owner of %(workspace)s manages its secrets and registry credentials") % {
            "workspace": workspace.slug})


# --------------------------------------------------------------------------- secrets


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise DomainError({"name": _("a secret's name is lowercase letters, digits and '-', at most 63, starting "
                                     "and ending with a letter or digit (e.g. hf-token)")})
    return name


def check_value(value: object, field_name: str = "value") -> str:
    if not isinstance(value, str) or value == "":
        raise DomainError({field_name: _("the value is empty")})
    if "\x00" in value:
        raise DomainError({field_name: _("the value holds a NUL character")})
    size = len(value.encode())
    if size > MAX_VALUE_BYTES:
        raise DomainError({field_name: _("the value is %(size)s bytes; at most %(limit)s are stored") % {
            "size": size, "limit": MAX_VALUE_BYTES}})
    return value


def _author(row, user) -> None:
    row.changed = clock.now()
    row.changed_by = user if getattr(user, "pk", None) else None
    row.changed_by_name = getattr(user, "username", "") or ""


@transaction.atomic
def set_secret(user, workspace, name: object, value: object) -> tuple[WorkspaceSecret, bool]:
    """Store a secret, or replace the value of the one of that name; (the row, whether it is new)."""
    require_owner(user, workspace)
    name, value = check_name(name), check_value(value)
    row = WorkspaceSecret.objects.select_for_update().filter(workspace=workspace, name=name).first()
    created = row is None
    if created:
        row = WorkspaceSecret(workspace=workspace, name=name)
    row.ciphertext, row.size = encrypt(value), len(value.encode())
    _author(row, user)
    row.save()
    return row, created


@transaction.atomic
def delete_secret(user, workspace, name: str, *, backend=None) -> None:
    require_owner(user, workspace)
    using = sorted(WorkspaceBucket.objects.filter(workspace=workspace).filter(
        models.Q(access_key_id_secret=name) | models.Q(secret_access_key_secret=name)).values_list("name", flat=True))
    if using:   # a bucket without its credentials could not be read, by jobs or the platform
        raise Conflict(_("secret %(name)s holds credentials of the bucket %(buckets)s: delete the bucket first") % {
            "name": repr(name), "buckets": ", ".join(using)}, field="name")
    deleted, _count = WorkspaceSecret.objects.filter(workspace=workspace, name=name).delete()
    if not deleted:
        raise NoSuchSecret(_("workspace %(workspace)s has no secret %(name)s") % {
            "workspace": workspace.slug, "name": repr(name)})
    _remove_from_cluster(backend, workspace.slug, secret=name)


def _remove_from_cluster(backend, workspace: str, **which: str) -> None:
    """After commit, the cluster's copy goes too (a Kubernetes Secret); a cluster that does not answer keeps it
    until the workspace's next launch of that name, and says so in the log. Replicas running keep theirs."""
    def remove() -> None:
        nonlocal backend
        try:
            if backend is None:
                from scheduling.backends import get_backend

                backend = get_backend()
            if hasattr(backend, "remove_secret"):
                backend.remove_secret(workspace, **which)
        except Exception:
            log.warning("the cluster's copy of %s of workspace %s was not removed", which, workspace, exc_info=True)

    transaction.on_commit(remove)


def secrets_of(workspace):
    """The workspace's secrets, without their values (any member may list the names)."""
    return WorkspaceSecret.objects.filter(workspace=workspace).defer("ciphertext").order_by("name")


def secret_names(workspace) -> list[str]:
    return list(WorkspaceSecret.objects.filter(workspace=workspace).values_list("name", flat=True))


# --------------------------------------------------------------------------- registries


def normalise_server(server: object) -> str:
    """`https://Registry.Example.com/` -> registry.example.com; Docker Hub's names -> docker.io."""
    text = server.strip().lower() if isinstance(server, str) else ""
    text = re.sub(r"^[a-z]+://", "", text).split("/", 1)[0]
    if text in _DOCKER_HUB_ALIASES:
        return DOCKER_HUB
    if not SERVER_RE.fullmatch(text):
        raise DomainError({"server": _("a registry is a host name with an optional port, such as "
                                       "registry.example.com or localhost:5000")})
    return text


def image_registry(image: str) -> str:
    """The registry an image reference pulls from: its first path part when that names a host (it has a dot
    or a port, or is localhost), else Docker Hub."""
    first, slash, _rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return DOCKER_HUB if first.lower() in _DOCKER_HUB_ALIASES else first.lower()
    return DOCKER_HUB


@transaction.atomic
def set_registry(user, workspace, server: object, username: object, password: object
                 ) -> tuple[RegistryCredential, bool]:
    require_owner(user, workspace)
    server = normalise_server(server)
    if not isinstance(username, str) or not username.strip() or len(username) > MAX_USERNAME:
        raise DomainError({"username": _("a user name of 1 to %(limit)s characters") % {"limit": MAX_USERNAME}})
    password = check_value(password, "password")
    row = RegistryCredential.objects.select_for_update().filter(workspace=workspace, server=server).first()
    created = row is None
    if created:
        row = RegistryCredential(workspace=workspace, server=server)
    row.username, row.ciphertext = username.strip(), encrypt(password)
    _author(row, user)
    row.save()
    return row, created


@transaction.atomic
def delete_registry(user, workspace, server: str, *, backend=None) -> str:
    require_owner(user, workspace)
    try:
        server = normalise_server(server)
    except DomainError:
        server = str(server)
    deleted, _count = RegistryCredential.objects.filter(workspace=workspace, server=server).delete()
    if not deleted:
        raise NoSuchSecret(_("workspace %(workspace)s has no credential for %(server)s") % {
            "workspace": workspace.slug, "server": repr(server)}, field="server")
    _remove_from_cluster(backend, workspace.slug, registry=server)
    return server


def registries_of(workspace):
    return RegistryCredential.objects.filter(workspace=workspace).defer("ciphertext").order_by("server")


def registry_for_image(workspace, image: str) -> RegistryCredential | None:
    """The workspace's credential that pulls `image`, if it has one (what the quote and the submit page say)."""
    if not image:
        return None
    return registries_of(workspace).filter(server=image_registry(image)).first()


def image_pulls(workspace, spec) -> list[dict]:
    """Per role of a spec: its image, the registry it pulls from and the workspace's credential that applies
    (None: pulled without one), with a sentence in the active language (the quote and the submit page)."""
    servers = dict(registries_of(workspace).values_list("server", "username"))
    out = []
    for role in spec.roles:
        registry = image_registry(role.image)
        credential = registry if registry in servers else None
        text = (_("%(image)s is pulled from %(registry)s with the workspace's credential (user %(user)s)") % {
                    "image": role.image, "registry": registry, "user": servers[registry]} if credential else
                _("%(image)s is pulled from %(registry)s without a credential: the workspace has none for it") % {
                    "image": role.image, "registry": registry})
        out.append({"role": role.name, "image": role.image, "registry": registry, "credential": credential,
                    "text": text})
    return out


def dockerconfigjson(server: str, username: str, password: str) -> str:
    """The .dockerconfigjson a kubernetes.io/dockerconfigjson Secret holds."""
    host = "https://index.docker.io/v1/" if server == DOCKER_HUB else server
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    return json.dumps({"auths": {host: {"username": username, "password": password, "auth": auth}}},
                      sort_keys=True)


# --------------------------------------------------------------------------- launching


@dataclass(frozen=True)
class PullSecret:
    """A registry credential as a backend makes it: its registry and the .dockerconfigjson (never shown)."""

    server: str
    config: str = field(repr=False)


@dataclass
class LaunchSecrets:
    """What the jobs of one launch batch read: secret values by (workspace id, name), and each workspace's
    registry credentials by server. Read in two queries for the batch."""

    values: dict[tuple[int, str], str] = field(default_factory=dict, repr=False)
    pulls: dict[tuple[int, str], PullSecret] = field(default_factory=dict, repr=False)

    def values_for(self, workspace_id: int, names: Iterable[str]) -> dict[str, str]:
        return {n: self.values[(workspace_id, n)] for n in names if (workspace_id, n) in self.values}

    def pull_for(self, workspace_id: int, image: str) -> PullSecret | None:
        return self.pulls.get((workspace_id, image_registry(image)))


def referenced(role: Mapping) -> set[str]:
    """The secrets a stored role (Job.roles) names."""
    return set((role.get("secret_env") or {}).values()) | {m[0] for m in role.get("secret_mounts") or ()}


def launch_secrets(jobs: Iterable) -> LaunchSecrets:
    jobs = list({job.pk: job for job in jobs}.values())
    wanted: dict[int, set[str]] = defaultdict(set)
    for job in jobs:
        for role in job.roles or ():
            wanted[job.workspace_id] |= referenced(role)
    found = LaunchSecrets()
    names = {n for ns in wanted.values() for n in ns}
    if names:
        for workspace_id, name, token in WorkspaceSecret.objects.filter(
                workspace_id__in=list(wanted), name__in=names).values_list("workspace_id", "name", "ciphertext"):
            if name in wanted[workspace_id]:
                found.values[(workspace_id, name)] = decrypt(token)
    images = {(job.workspace_id, image_registry(role.get("image") or "")) for job in jobs for role in job.roles or ()}
    if images:
        for workspace_id, server, username, token in RegistryCredential.objects.filter(
                workspace_id__in={w for w, _s in images}, server__in={s for _w, s in images}).values_list(
                "workspace_id", "server", "username", "ciphertext"):
            if (workspace_id, server) in images:
                found.pulls[(workspace_id, server)] = PullSecret(server, dockerconfigjson(server, username,
                                                                                          decrypt(token)))
    return found


# --------------------------------------------------------------------------- masking


def known_values(workspace_ids: Iterable[int]) -> dict[int, list[str]]:
    """Every secret value and registry password of these workspaces, longest first (what `mask` hides)."""
    found: dict[int, set[str]] = defaultdict(set)
    ids = list(set(workspace_ids))
    if not ids:
        return {}
    for model in (WorkspaceSecret, RegistryCredential):
        for workspace_id, token in model.objects.filter(workspace_id__in=ids).values_list("workspace_id",
                                                                                           "ciphertext"):
            try:
                found[workspace_id].add(decrypt(token))
            except SecretsNotConfigured:  # a log is still kept and shown: the cycle must not stop on it
                log.error("a value of workspace %s cannot be decrypted: it is not masked in logs", workspace_id)
    return {w: _mask_order(values) for w, values in found.items()}


def _mask_order(values: Iterable[str]) -> list[str]:
    """The values, and the lines of a many-line value (a file's lines are printed one by one), longest first so a
    value that holds another is hidden whole."""
    parts = set()
    for value in values:
        parts.add(value)
        parts.update(line.strip() for line in value.splitlines() if len(line.strip()) >= 8)
    return sorted((p for p in parts if p), key=len, reverse=True)


def mask(text: str, values: Iterable[str]) -> str:
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    return text


def masker_for(workspace_id: int):
    """A function that hides the workspace's known values in a text (read once, used for every section)."""
    values = known_values([workspace_id]).get(workspace_id, [])
    return (lambda text: mask(text, values)) if values else (lambda text: text)
