"""Object storage for jobs: a workspace registers S3-compatible buckets by name; a spec's `buckets` gives a
role's replicas one as environment; the platform lists its objects.

A bucket is an endpoint (http or https, reachable by the platform's outbound rules: no inside address unless
the operator's BUCKET_ALLOW_PRIVATE_CIDRS names its range), a bucket name, an optional key prefix and a region.
Its credentials are two of the workspace's secrets (scheduling/secrets.py), named by the bucket: the values are
stored once, encrypted, replaced where secrets are replaced, masked in logs, and reach a replica only as
secret environment (a Kubernetes Secret read through secretKeyRef; the simulated process's environment).

When a job is submitted, each role that names a bucket gets the bucket's variables in its stored request
(Job.roles: `env` for the address, `secret_env` for the two credentials, by secret name): a job runs with the
bucket as it was registered when it was submitted. A bucket read by a live job cannot be deleted.

Only an owner registers or deletes a bucket (it points credentials at a store); every member lists them.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from scheduling import outbound, secrets, sigv4
from scheduling.backends.base import BucketMount
from scheduling.errors import Conflict, DomainError
from scheduling.models import FINAL_STATES, Job, NodePool, WorkspaceBucket
from scheduling.spec.buckets import PLAIN_VARIABLES, mount_path_of
from scheduling.spec.model import JobSpec, SpecError, SpecIssue
from scheduling.spec.read import DNS_LABEL

# S3's rules for a bucket name: 3 to 63 lowercase letters, digits, '.' and '-', starting and ending with a letter
# or digit
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
REGION_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
DEFAULT_REGION = "us-east-1"
MAX_PREFIX = 1024
MAX_ENDPOINT = 2048
MAX_LISTED = 1000   # one ListObjectsV2 page: S3's own most
LIST_MAX_BYTES = 4 << 20
# where the API, the page and gpuctl take the two secrets' names: credentials: {accessKeyId: {secret: name}, ...}
ACCESS_KEY_FIELD = "credentials.accessKeyId"
SECRET_KEY_FIELD = "credentials.secretAccessKey"
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class NoSuchBucket(DomainError):
    status = 404
    title = "Not found"
    field = "name"


class StoreUnreachable(DomainError):
    """The store did not answer, refused the request, or answered what is not a listing."""

    status = 502
    title = "The object store did not answer as expected"
    field = "endpoint"


# --------------------------------------------------------------------------- checking what is given


def _endpoint_problem(endpoint: object) -> str | None:
    if not isinstance(endpoint, str) or not endpoint.strip():
        return _("give the store's URL, such as https://s3.example.com")
    if len(endpoint) > MAX_ENDPOINT or "\x00" in endpoint:
        return _("the URL is at most %(most)s characters, without NUL") % {"most": MAX_ENDPOINT}
    try:
        parts = urlsplit(endpoint.strip())
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return _("%(value)s is not a URL") % {"value": endpoint}
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return _("the endpoint must be an http or https URL with a host, such as https://s3.example.com")
    if parts.username or parts.password:
        return _("the endpoint must not hold a user or password: the credentials are secrets")
    if parts.path.strip("/") or parts.query or parts.fragment:
        return _("the endpoint is the store's address alone (no path, query or fragment); the bucket and prefix "
                 "are fields of their own")
    try:
        outbound.check_url(endpoint.strip(), outbound.BUCKETS)
    except outbound.Refused:
        return _("the platform does not call %(host)s: it is an inside address or does not resolve (an operator "
                 "lets a range through with BUCKET_ALLOW_PRIVATE_CIDRS)") % {"host": parts.hostname}
    return None


def _secret_ref(value: object, known: set[str]) -> tuple[str | None, str | None]:
    """(secret name, problem) of `{secret: name}` or a bare name."""
    name = value.get("secret") if isinstance(value, Mapping) and set(value) == {"secret"} else value
    if not isinstance(name, str) or not DNS_LABEL.fullmatch(name):
        return None, _("name one of the workspace's secrets, as {secret: s3-key-id}")
    if name not in known:
        return None, _("the workspace has no secret '%(name)s': add it first (gpuctl secret set %(name)s)") % {
            "name": name}
    return name, None


def check(workspace, *, name: object, endpoint: object, bucket: object, prefix: object = "",
          region: object = DEFAULT_REGION, access_key_id: object = None, secret_access_key: object = None
          ) -> dict[str, str]:
    """The bucket's fields, checked and normalised; DomainError naming every bad field."""
    errors: dict[str, str] = {}
    if not isinstance(name, str) or not DNS_LABEL.fullmatch(name):
        errors["name"] = _("the name must be lowercase letters, digits and '-', at most 63")
    problem = _endpoint_problem(endpoint)
    if problem:
        errors["endpoint"] = problem
    if not isinstance(bucket, str) or not BUCKET_RE.fullmatch(bucket) or ".." in bucket:
        errors["bucket"] = _("a bucket name is 3 to 63 lowercase letters, digits, '.' and '-', starting and "
                             "ending with a letter or digit")
    prefix = "" if prefix is None else prefix
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX or any(ord(c) < 32 for c in prefix):
        errors["prefix"] = _("the prefix is text of at most %(most)s characters, without control characters") % {
            "most": MAX_PREFIX}
    region = region or DEFAULT_REGION
    if not isinstance(region, str) or not REGION_RE.fullmatch(region):
        errors["region"] = _("a region is lowercase letters, digits and '-', such as us-east-1")
    known = set(secrets.secret_names(workspace))
    key_id, problem = _secret_ref(access_key_id, known)
    if problem:
        errors[ACCESS_KEY_FIELD] = problem
    secret_key, problem = _secret_ref(secret_access_key, known)
    if problem:
        errors[SECRET_KEY_FIELD] = problem
    if errors:
        raise DomainError(errors)
    return {"name": name, "endpoint": endpoint.strip().rstrip("/"), "bucket": bucket,
            "prefix": prefix.lstrip("/"), "region": region, "access_key_id_secret": key_id,
            "secret_access_key_secret": secret_key}


# --------------------------------------------------------------------------- register, list, delete


def buckets_of(workspace):
    return WorkspaceBucket.objects.filter(workspace=workspace).order_by("name")


def get_bucket(workspace, name: str) -> WorkspaceBucket:
    row = buckets_of(workspace).filter(name=name).first()
    if row is None:
        raise NoSuchBucket(_("workspace '%(workspace)s' has no bucket '%(name)s'") % {
            "workspace": workspace.slug, "name": name})
    return row


@transaction.atomic
def add_bucket(user, workspace, **given) -> WorkspaceBucket:
    secrets.require_owner(user, workspace)
    fields = check(workspace, **given)
    if buckets_of(workspace).filter(name=fields["name"]).exists():
        raise Conflict(_("workspace '%(workspace)s' already has a bucket '%(name)s'") % {
            "workspace": workspace.slug, "name": fields["name"]}, field="name")
    try:
        with transaction.atomic():
            return WorkspaceBucket.objects.create(workspace=workspace, created_by_name=user.username, **fields)
    except IntegrityError:
        raise Conflict(_("workspace '%(workspace)s' already has a bucket '%(name)s'") % {
            "workspace": workspace.slug, "name": fields["name"]}, field="name") from None


def jobs_reading(workspace, name: str) -> list[Job]:
    return [job for job in Job.objects.filter(workspace=workspace).exclude(state__in=FINAL_STATES)
            .only("pk", "name", "state", "roles").order_by("pk")
            if any(name in (role.get("buckets") or ()) for role in job.roles or ())]


@transaction.atomic
def delete_bucket(user, workspace, name: str) -> None:
    secrets.require_owner(user, workspace)
    row = get_bucket(workspace, name)
    WorkspaceBucket.objects.select_for_update().filter(pk=row.pk).first()   # a submit naming it waits
    jobs = jobs_reading(workspace, name)
    if jobs:
        raise Conflict(_("bucket '%(name)s' is read by live jobs: %(jobs)s; wait for them to end or cancel them")
                       % {"name": name, "jobs": ", ".join(f"{j.pk} ({j.name}, {j.state})" for j in jobs)},
                       field="name")
    row.delete()


# --------------------------------------------------------------------------- what a job reads


def check_spec(workspace, spec: JobSpec, *, lock: bool = False) -> None:
    """SpecError at each `buckets` entry naming a bucket the workspace has not registered. `lock`: inside the
    submitting transaction, the rows stay locked until it commits (a delete waits, then sees the job)."""
    names = {use.name for role in spec.roles for use in role.buckets}
    if not names:
        return
    rows = WorkspaceBucket.objects.filter(workspace=workspace, name__in=names)
    found = set((rows.select_for_update() if lock else rows).values_list("name", flat=True))
    issues = []
    for role in spec.roles:
        for use in role.buckets:
            if use.name not in found:
                field, line, column = use.where
                problem = _("workspace '%(workspace)s' has no bucket '%(name)s'") % {
                    "workspace": workspace.slug, "name": use.name}
                issues.append(SpecIssue(line, column, field, problem if line is not None or not field
                                        else f"{field}: {problem}"))
    if issues:
        raise SpecError(issues)


def environment(row: WorkspaceBucket) -> tuple[dict[str, str], dict[str, str]]:
    """(plain variables, variables from secrets by secret name) a replica reading the bucket gets."""
    plain = dict(zip(PLAIN_VARIABLES, (row.endpoint, row.endpoint, row.region, row.region, row.bucket,
                                       row.prefix), strict=True))
    return plain, {"AWS_ACCESS_KEY_ID": row.access_key_id_secret,
                   "AWS_SECRET_ACCESS_KEY": row.secret_access_key_secret}


def apply_to_roles(workspace, spec: JobSpec, roles: list[dict]) -> list[dict]:
    """The stored requests (Job.roles) with each role's bucket given as environment (see the module)."""
    wanted = {use.name for role in spec.roles for use in role.buckets}
    if not wanted:
        return roles
    rows = {row.name: row for row in buckets_of(workspace).filter(name__in=wanted)}
    uses = {role.name: [use for use in role.buckets if use.name in rows] for role in spec.roles}
    for stored in roles:
        role_uses = uses.get(stored["name"], ())
        for use in role_uses:
            plain, from_secrets = environment(rows[use.name])
            stored["env"] = {**stored.get("env", {}), **plain}
            stored["secret_env"] = {**stored.get("secret_env", {}), **from_secrets}
        if role_uses:
            stored["buckets"] = [use.name for use in role_uses]
            stored["bucket_mounts"] = [mount_fields(rows[use.name], use.mount_path) for use in role_uses]
    return roles


def mount_fields(row: WorkspaceBucket, mount_path: str) -> dict[str, str]:
    """What a pool with a bucket CSI driver mounts (BucketMount without the driver), frozen at submit."""
    return {"name": row.name, "bucket": row.bucket, "endpoint": row.endpoint, "region": row.region,
            "prefix": row.prefix, "access_key_id_secret": row.access_key_id_secret,
            "secret_access_key_secret": row.secret_access_key_secret,
            "mount_path": mount_path_of(row.name, mount_path)}


def launch_mounts(role: dict, pool_id: int) -> tuple[BucketMount, ...]:
    """A replica's bucket mounts on its pool: none unless the pool names a bucket CSI driver (one query, only
    for a role that reads a bucket)."""
    entries = role.get("bucket_mounts") or ()
    if not entries:
        return ()
    driver = NodePool.objects.filter(pk=pool_id).values_list("bucket_csi_driver", flat=True).first()
    if not driver:
        return ()
    return tuple(BucketMount(driver=driver, **entry) for entry in entries)


# --------------------------------------------------------------------------- the platform lists objects


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    last_modified: str


def _credentials(row: WorkspaceBucket) -> tuple[str, str]:
    values = {name: secrets.decrypt(token) for name, token in secrets.WorkspaceSecret.objects.filter(
        workspace_id=row.workspace_id, name__in=[row.access_key_id_secret, row.secret_access_key_secret])
        .values_list("name", "ciphertext")}
    missing = [n for n in (row.access_key_id_secret, row.secret_access_key_secret) if n not in values]
    if missing:
        raise Conflict(_("the bucket's secret '%(name)s' was deleted: add it again") % {"name": missing[0]},
                       field="name")
    return values[row.access_key_id_secret], values[row.secret_access_key_secret]


def list_objects(workspace, name: str, prefix: object = "", limit: int = MAX_LISTED) -> list[StoredObject]:
    """The objects under the bucket's prefix (and `prefix` within it), the first `limit` by key. Keys are given
    from the bucket's root, as a job's client sees them."""
    row = get_bucket(workspace, name)
    if not isinstance(prefix, str) or len(prefix) > MAX_PREFIX or any(ord(c) < 32 for c in prefix):
        raise DomainError(_("the prefix is text of at most %(most)s characters, without control characters") % {
            "most": MAX_PREFIX}, field="prefix")
    key_id, secret_key = _credentials(row)
    url = sigv4.object_url(row.endpoint, row.bucket)
    params = {"list-type": "2", "prefix": row.prefix + prefix.lstrip("/"), "max-keys": str(min(limit, MAX_LISTED))}
    # signed with the wall clock, not the platform's (tests set that): a store refuses a skewed signature
    headers = sigv4.sign("GET", url, params=params, access_key=key_id, secret_key=secret_key, region=row.region,
                         now=datetime.now(UTC))
    try:
        status, body = outbound.get(url, params=params, headers=headers, allow=outbound.BUCKETS,
                                    max_bytes=LIST_MAX_BYTES)
    except outbound.Refused:
        raise StoreUnreachable(_("the platform no longer calls %(endpoint)s: it is an inside address or does "
                                 "not resolve") % {"endpoint": row.endpoint}) from None
    except httpx.HTTPError as error:
        raise StoreUnreachable(_("the store at %(endpoint)s did not answer: %(error)s") % {
            "endpoint": row.endpoint, "error": type(error).__name__}) from None
    if status != 200:
        raise StoreUnreachable(_("the store answered %(status)s%(code)s") % {
            "status": status, "code": f" ({_error_code(body)})" if _error_code(body) else ""})
    return _parse_listing(body)


def _error_code(body: bytes) -> str:
    match = re.search(rb"<Code>([A-Za-z0-9.]{1,64})</Code>", body)
    return match.group(1).decode() if match else ""


def _parse_listing(body: bytes) -> list[StoredObject]:
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:   # a listing never declares entities: no expansion here
        raise StoreUnreachable(_("the store's answer is not an object listing"))
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        raise StoreUnreachable(_("the store's answer is not an object listing")) from None
    ns = S3_NS if root.tag.startswith(S3_NS) else ""
    found = []
    for item in root.iter(f"{ns}Contents"):
        size = item.findtext(f"{ns}Size") or "0"
        found.append(StoredObject(item.findtext(f"{ns}Key") or "", int(size) if size.isdigit() else 0,
                                  item.findtext(f"{ns}LastModified") or ""))
    return found
