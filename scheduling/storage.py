"""Workspace volumes and datasets: create, resize, delete, upload, snapshot, share, and what a job mounts.

A volume is a workspace's named, sized storage; a job mounts it by name from its spec (spec/volumes.py).
A dataset is a series of read-only snapshots of a volume (`imagenet@v3`), mountable by its own
workspace and by the workspaces it was granted to. On the simulated cluster a volume is the folder
VOLUMES_DIR/<workspace>/<name> and a version DATASETS_DIR/<workspace>/<name>/v<N>; a replica's process
finds them through `volume_mounts` (its mount path -> the folder). On Kubernetes a volume is a
PersistentVolumeClaim in the workspace's namespace and a version a VolumeSnapshot of it, which a job's claim is
restored from (backends/kubernetes/; a workspace granted the dataset gets a copy of the snapshot in its own
namespace). The `backend` the API and pages pass makes and removes those objects with the rows.

A notebook's home is a volume too (`home_of` names the notebook): made, or grown, when a notebook of that
name is submitted, counted in the quota and billed as any volume, mounted at the notebook's home path, and
kept when the notebook stops or is deleted (its owner deletes it with the notebook, or here, once no live
notebook of that name uses it).

Owners and members manage volumes and datasets; every member reads them; only an owner shares a dataset.
"""

from __future__ import annotations

import hashlib
import math
import os
import posixpath
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from scheduling.errors import Conflict, DomainError, Forbidden
from scheduling.models import (
    FINAL_STATES,
    AccessMode,
    Dataset,
    DatasetGrant,
    DatasetVersion,
    Job,
    StorageQuota,
    Volume,
)
from scheduling.spec.model import JobSpec, SpecError, SpecIssue, VolumeMount
from scheduling.spec.read import DNS_LABEL
from scheduling.spec.volumes import parse_dataset_ref

MAX_VOLUME_GIB = 64 * 1024
HOME_PREFIX = "home-"
STORAGE_CLASS_RE = DNS_LABEL
# What a replica mounts (Mount.kind): a workspace volume or a dataset version.
VOLUME, DATASET = "volume", "dataset"
MANAGING_ROLES = ("owner", "member")   # portal.models.Role values, read through the membership relation
SHARING_ROLES = ("owner",)


class NotFound(DomainError):
    status = 404
    title = "Not found"


class StorageForbidden(Forbidden):
    field = "workspace"


# --------------------------------------------------------------------------- who may


def _role(user, workspace) -> str | None:
    if not getattr(user, "is_authenticated", False):
        return None
    membership = workspace.memberships.filter(user=user).only("role").first()
    return membership.role if membership is not None else None


def can_manage(user, workspace) -> bool:
    return _role(user, workspace) in MANAGING_ROLES


def require_manager(user, workspace) -> None:
    if not can_manage(user, workspace):
        raise StorageForbidden(_("your role in '%(workspace)s' may not change its volumes or datasets") % {
            "workspace": workspace.slug})


def require_owner(user, workspace) -> None:
    if _role(user, workspace) not in SHARING_ROLES:
        raise StorageForbidden(_("only an owner of '%(workspace)s' may share its datasets") % {
            "workspace": workspace.slug})


# --------------------------------------------------------------------------- where (simulated)


def volume_dir(workspace: str, name: str) -> Path:
    _check_part(workspace)
    _check_part(name)
    return Path(settings.VOLUMES_DIR) / workspace / name


def dataset_dir(workspace: str, name: str, number: int) -> Path:
    _check_part(workspace)
    _check_part(name)
    return Path(settings.DATASETS_DIR) / workspace / name / f"v{int(number)}"


def folder_used_bytes(root: Path) -> int:
    """The bytes the files under a volume's or version's folder hold (what storage is billed on); links are
    not followed, and a folder not there holds none."""
    used = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            info = os.lstat(os.path.join(folder, name))
            if stat.S_ISREG(info.st_mode):
                used += info.st_size
    return used


def _check_part(part: str) -> None:
    if not DNS_LABEL.fullmatch(part or ""):
        raise ValueError(f"not a workspace slug or volume name: {part!r}")


# --------------------------------------------------------------------------- quota


def quota_gib(workspace) -> int | None:
    row = StorageQuota.objects.filter(workspace=workspace).first()
    return row.limit_gib if row is not None else None


def used_gib(workspace, *, besides: Volume | None = None) -> int:
    volumes = Volume.objects.filter(workspace=workspace)
    if besides is not None:
        volumes = volumes.exclude(pk=besides.pk)
    return sum(volumes.values_list("size_gib", flat=True))


def _quota_problem(workspace, size_gib: int, *, besides: Volume | None = None) -> str | None:
    limit = quota_gib(workspace)
    if limit is None:
        return None
    used = used_gib(workspace, besides=besides)
    if used + size_gib > limit:
        return _("the workspace's storage quota is %(limit)s GiB: %(used)s GiB are in other volumes, so "
                 "%(size)s GiB more would make %(total)s GiB") % {
            "limit": limit, "used": used, "size": size_gib, "total": used + size_gib}
    return None


def _check_quota(workspace, size_gib: int, *, besides: Volume | None = None) -> None:
    problem = _quota_problem(workspace, size_gib, besides=besides)
    if problem:
        raise Conflict(problem, field="size_gib")


def set_storage_quota(workspace, limit_gib: int | None) -> None:
    """An operator's setting (the console and the admin): None removes the limit."""
    if limit_gib is None:
        StorageQuota.objects.filter(workspace=workspace).delete()
    else:
        StorageQuota.objects.update_or_create(workspace=workspace, defaults={"limit_gib": int(limit_gib)})


# --------------------------------------------------------------------------- volumes


def _size(value, field: str = "size_gib") -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise DomainError(_("the size must be a whole number of GiB"), field=field)
    try:
        size = int(value)
    except ValueError:
        raise DomainError(_("the size must be a whole number of GiB"), field=field) from None
    if not 1 <= size <= MAX_VOLUME_GIB:
        raise DomainError(_("the size must be from 1 to %(most)s GiB") % {"most": MAX_VOLUME_GIB}, field=field)
    return size


def get_volume(workspace, name: str) -> Volume:
    volume = Volume.objects.filter(workspace=workspace, name=name).first()
    if volume is None:
        raise NotFound(_("workspace '%(workspace)s' has no volume '%(name)s'") % {
            "workspace": workspace.slug, "name": name}, field="name")
    return volume


@transaction.atomic
def create_volume(user, workspace, *, name: str, size_gib, storage_class: str = "standard",
                  access_mode: str = AccessMode.READ_WRITE_ONCE) -> Volume:
    require_manager(user, workspace)
    errors: dict[str, list[str]] = {}
    if not isinstance(name, str) or not DNS_LABEL.fullmatch(name):
        errors["name"] = [_("the name must be lowercase letters, digits and '-', at most 63")]
    if not isinstance(storage_class, str) or not STORAGE_CLASS_RE.fullmatch(storage_class):
        errors["storage_class"] = [_("the storage class must be lowercase letters, digits and '-'")]
    if access_mode not in AccessMode.values:
        errors["access_mode"] = [_("the access mode must be one of %(modes)s") % {
            "modes": ", ".join(AccessMode.values)}]
    try:
        size = _size(size_gib)
    except DomainError as exc:
        errors.update(exc.errors)
    if errors:
        raise DomainError(errors)
    # one writer at a time per workspace: two creates cannot both pass the quota
    type(workspace).objects.select_for_update().filter(pk=workspace.pk).first()
    if Volume.objects.filter(workspace=workspace, name=name).exists():
        raise Conflict(_("workspace '%(workspace)s' already has a volume '%(name)s'") % {
            "workspace": workspace.slug, "name": name}, field="name")
    _check_quota(workspace, size)
    try:
        with transaction.atomic():
            return Volume.objects.create(workspace=workspace, name=name, size_gib=size, storage_class=storage_class,
                                         access_mode=access_mode)
    except IntegrityError:
        raise Conflict(_("workspace '%(workspace)s' already has a volume '%(name)s'") % {
            "workspace": workspace.slug, "name": name}, field="name") from None


@transaction.atomic
def resize_volume(user, workspace, name: str, size_gib) -> Volume:
    """Grow a volume (storage classes grow claims in place; none shrinks one without losing data)."""
    require_manager(user, workspace)
    size = _size(size_gib)
    type(workspace).objects.select_for_update().filter(pk=workspace.pk).first()
    volume = get_volume(workspace, name)
    if size < volume.size_gib:
        raise Conflict(_("a volume only grows: '%(name)s' has %(size)s GiB, more than %(asked)s GiB") % {
            "name": name, "size": volume.size_gib, "asked": size}, field="size_gib")
    _check_quota(workspace, size, besides=volume)
    volume.size_gib = size
    volume.save(update_fields=["size_gib"])
    return volume


def _live_jobs(workspaces) -> Iterable[Job]:
    return (Job.objects.filter(workspace__in=workspaces).exclude(state__in=FINAL_STATES)
            .select_related("workspace").only("pk", "name", "state", "spec", "kind", "workspace__slug")
            .order_by("pk"))


def _home_volume(job: Job) -> str | None:
    from scheduling import kinds  # the kinds' registry imports this module

    return kinds.kind_of(job).home_volume(job)


def _spec_mounts(job: Job) -> list[dict]:
    """Every mount entry of a job's stored spec (a role's `volumes`, or a notebook's or service's)."""
    spec = job.spec or {}
    entries = list(spec.get("volumes") or [])
    for role in spec.get("roles") or []:
        entries.extend(role.get("volumes") or [])
    return [e for e in entries if isinstance(e, dict)]


def jobs_mounting_volume(workspace, name: str) -> list[Job]:
    """Live jobs whose spec mounts the volume, and the live notebook whose home it is (a stopped one too)."""
    home_of = Volume.objects.filter(workspace=workspace, name=name).values_list("home_of", flat=True).first()
    return [job for job in _live_jobs([workspace])
            if any(e.get("name") == name for e in _spec_mounts(job))
            or (home_of and _home_volume(job) == home_of)]


def _job_list(jobs: list[Job]) -> str:
    return ", ".join(f"{job.pk} ({job.name}, {job.state})" for job in jobs)


@transaction.atomic
def delete_volume(user, workspace, name: str, *, backend=None) -> None:
    """`backend`: the cluster's (scheduling.backends.get_backend()), whose own object of the volume goes too."""
    require_manager(user, workspace)
    get_volume(workspace, name)
    volume = Volume.objects.select_for_update().get(workspace=workspace, name=name)  # a submit mounting it waits
    jobs = jobs_mounting_volume(workspace, name)
    if jobs:
        raise Conflict(_("volume '%(name)s' is mounted by live jobs: %(jobs)s; wait for them to end or cancel "
                         "them") % {"name": name, "jobs": _job_list(jobs)}, field="name")
    _delete(volume, backend)


def _delete(volume: Volume, backend) -> None:
    """The row, the cluster's own object (Kubernetes: the claim) and, after commit, the folder."""
    workspace, name, home_of = volume.workspace, volume.name, volume.home_of
    volume.delete()
    if backend is not None and home_of:   # a home keeps the claim it had as the notebook's home
        backend.delete_home(workspace.slug, home_of)
    elif backend is not None and hasattr(backend, "delete_volume"):
        backend.delete_volume(workspace.slug, name)
    transaction.on_commit(lambda: shutil.rmtree(volume_dir(workspace.slug, name), ignore_errors=True))


# --------------------------------------------------------------------------- notebook homes


def home_volume_name(notebook: str) -> str:
    """The home volume's name: home-<notebook>, shortened with a hash when that passes 63 characters (the
    same name the notebook's home claim always had on Kubernetes)."""
    name = f"{HOME_PREFIX}{notebook}"
    if len(name) <= 63:
        return name
    return f"{name[:56].rstrip('-')}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def home_gib(home_mib: int) -> int:
    return max(1, math.ceil(home_mib / 1024))


def home_volume(workspace, notebook: str) -> Volume | None:
    return Volume.objects.filter(workspace=workspace, home_of=notebook).first()


def _home_problem(workspace, notebook: str, home_mib: int) -> str | None:
    """Why the notebook's home cannot be made or grown to home_mib: the name is an ordinary volume's, or the
    quota would pass."""
    size = home_gib(home_mib)
    home = home_volume(workspace, notebook)
    if home is None:
        name = home_volume_name(notebook)
        if Volume.objects.filter(workspace=workspace, name=name).exists():
            return _("workspace '%(workspace)s' has a volume '%(name)s' that is not this notebook's home: rename "
                     "the notebook, or delete that volume") % {"workspace": workspace.slug, "name": name}
        return _quota_problem(workspace, size)
    if size > home.size_gib:
        return _quota_problem(workspace, size, besides=home)
    return None


def _home_error(message: str) -> SpecError:
    return SpecError([SpecIssue(line=None, column=None, field="home.size", message=f"home.size: {message}")])


def check_home(workspace, notebook: str, home_mib: int) -> None:
    """SpecError when the notebook's home volume could not be made (or grown) now: a quote's check."""
    problem = _home_problem(workspace, notebook, home_mib)
    if problem:
        raise _home_error(problem)


def ensure_home(workspace, notebook: str, home_mib: int) -> Volume:
    """The notebook's home volume, made at its first submit, grown when a new spec asks for more (a volume
    never shrinks: a smaller size keeps the files and the size). Call inside the submitting transaction."""
    type(workspace).objects.select_for_update().filter(pk=workspace.pk).first()   # the quota, as create_volume
    problem = _home_problem(workspace, notebook, home_mib)
    if problem:
        raise _home_error(problem)
    home = home_volume(workspace, notebook)
    size = home_gib(home_mib)
    if home is None:
        return Volume.objects.create(workspace=workspace, name=home_volume_name(notebook), size_gib=size,
                                     home_of=notebook)
    if size > home.size_gib:
        home.size_gib = size
        home.save(update_fields=["size_gib"])
    return home


def home_mount(job: Job, home_mib: int) -> Mount:
    """The notebook's home as a launch mounts it (its path is the backend's: the image's home). A notebook
    admitted before homes were volumes and lacking its row gets it now, as it was sized then."""
    home = home_volume(job.workspace, job.name)
    if home is None:
        name = home_volume_name(job.name)
        if Volume.objects.filter(workspace=job.workspace, name=name).exists():   # an ordinary volume's name
            name = f"{name[:56].rstrip('-')}-{hashlib.sha1(f'home-of:{job.name}'.encode()).hexdigest()[:6]}"
        home, _made = Volume.objects.get_or_create(workspace=job.workspace, home_of=job.name, defaults={
            "name": name, "size_gib": home_gib(home_mib)})
    return Mount(VOLUME, job.workspace.slug, home.name, 0, "", False, home.size_gib, home.storage_class,
                 home.access_mode, home_of=home.home_of)


def delete_home(workspace, notebook: str, backend) -> None:
    """Delete the notebook's home volume (its owner's explicit ask when deleting the notebook); the caller
    checked that no live notebook of that name uses it. Idempotent: no home, only the cluster's object."""
    home = Volume.objects.select_for_update().filter(workspace=workspace, home_of=notebook).first()
    if home is not None:
        _delete(home, backend)
    else:
        backend.delete_home(workspace.slug, notebook)


def _safe_target(root: Path, path: str) -> Path:
    """`path` inside the volume; refuses what would leave it ('..', absolute tricks, empty names)."""
    if not isinstance(path, str) or not path.strip("/") or "\x00" in path or "\\" in path:
        raise DomainError(_("give a file path inside the volume, such as /data/train.csv"), field="path")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts) or not parts:
        raise DomainError(_("the path %(path)s leaves the volume") % {"path": path}, field="path")
    target = root.joinpath(*parts)
    if os.path.commonpath([root.resolve(), target.resolve()]) != str(root.resolve()):
        raise DomainError(_("the path %(path)s leaves the volume") % {"path": path}, field="path")
    return target


def upload_file(user, workspace, name: str, path: str, data: IO[bytes], size: int) -> str:
    """Write one file into a volume (simulated cluster: its folder). Returns the path written, from the
    volume's root."""
    require_manager(user, workspace)
    get_volume(workspace, name)
    most = settings.VOLUME_UPLOAD_MAX_BYTES
    if size > most:
        raise DomainError(_("the file has %(size)s bytes; at most %(most)s may be uploaded at once") % {
            "size": size, "most": most}, field="file")
    root = volume_dir(workspace.slug, name)
    root.mkdir(parents=True, exist_ok=True)
    target = _safe_target(root, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    tmp = target.with_name(target.name + ".upload")
    tmp.unlink(missing_ok=True)
    # never through a link a job may have left in the volume: the file is made here, or the upload fails
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb") as out:
        for chunk in iter(lambda: data.read(1024 * 1024), b""):
            written += len(chunk)
            if written > most:
                out.close()
                tmp.unlink(missing_ok=True)
                raise DomainError(_("the file is larger than %(most)s bytes") % {"most": most}, field="file")
            out.write(chunk)
    tmp.replace(target)
    return "/" + "/".join(target.relative_to(root).parts)


def volume_files(workspace, name: str, limit: int = 200) -> list[tuple[str, int]]:
    """The files in a volume (simulated cluster), as (path, bytes), the first `limit` by path."""
    root = volume_dir(workspace.slug, name)
    found = []
    if root.is_dir():
        for item in sorted(root.rglob("*")):
            if item.is_file() and not item.is_symlink():
                found.append(("/" + "/".join(item.relative_to(root).parts), item.stat().st_size))
                if len(found) >= limit:
                    break
    return found


# --------------------------------------------------------------------------- datasets


@transaction.atomic
def snapshot(user, workspace, volume_name: str, dataset_name: str | None = None, *, backend=None) -> DatasetVersion:
    """A new read-only version of the dataset (named as the volume unless said) from the volume's files now.
    `backend`: the cluster's, which snapshots its own object of the volume too (Kubernetes: a VolumeSnapshot of
    the claim); a volume no job has mounted there has no claim, and nothing to snapshot (409)."""
    require_manager(user, workspace)
    volume = get_volume(workspace, volume_name)
    name = dataset_name or volume.name
    if not isinstance(name, str) or not DNS_LABEL.fullmatch(name):
        raise DomainError(_("the dataset name must be lowercase letters, digits and '-', at most 63"), field="name")
    dataset, _created = Dataset.objects.get_or_create(workspace=workspace, name=name)
    Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
    last = dataset.versions.order_by("-number").values_list("number", flat=True).first() or 0
    number = last + 1
    source = volume_dir(workspace.slug, volume.name)
    target = dataset_dir(workspace.slug, name, number)
    if target.exists():
        shutil.rmtree(target)  # a left-over of a snapshot whose transaction failed
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        # links are copied as links, never followed: a link a job left cannot copy what lies outside the volume
        shutil.copytree(source, target, symlinks=True)
    else:
        target.mkdir()
    size = _make_read_only(target)
    version = DatasetVersion.objects.create(dataset=dataset, number=number, source_volume=volume.name,
                                            size_bytes=size)
    if backend is not None and hasattr(backend, "snapshot_volume") and not backend.snapshot_volume(
            workspace.slug, volume.name, name, number):
        raise Conflict(_("volume '%(name)s' has never been mounted by a job, so the cluster holds no data of it to "
                         "snapshot; mount it in a job first") % {"name": volume.name}, field="volume")
    return version


def _make_read_only(root: Path) -> int:
    size = 0
    for item in root.rglob("*"):
        if item.is_file() and not item.is_symlink():
            size += item.stat().st_size
            item.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    return size


def _writable_again(root: Path) -> None:
    for item in root.rglob("*"):
        if item.is_file() and not item.is_symlink():
            item.chmod(stat.S_IRUSR | stat.S_IWUSR)


def get_dataset(workspace, name: str) -> Dataset:
    dataset = Dataset.objects.filter(workspace=workspace, name=name).first()
    if dataset is None:
        raise NotFound(_("workspace '%(workspace)s' has no dataset '%(name)s'") % {
            "workspace": workspace.slug, "name": name}, field="name")
    return dataset


def visible_datasets(workspace):
    """The workspace's own datasets and those granted to it."""
    from django.db.models import Q

    return (Dataset.objects.filter(Q(workspace=workspace) | Q(grants__workspace=workspace)).distinct()
            .select_related("workspace").prefetch_related("versions", "grants__workspace"))


def _workspace_by_slug(slug: str):
    workspace_model = Dataset._meta.get_field("workspace").related_model
    found = workspace_model.objects.filter(slug=slug).first()
    if found is None:
        raise NotFound(_("there is no workspace '%(workspace)s'") % {"workspace": slug}, field="workspace")
    return found


def grant(user, workspace, dataset_name: str, grantee_slug: str) -> DatasetGrant:
    require_owner(user, workspace)
    dataset = get_dataset(workspace, dataset_name)
    grantee = _workspace_by_slug(grantee_slug)
    if grantee.pk == workspace.pk:
        raise DomainError(_("a workspace mounts its own datasets without a grant"), field="workspace")
    row, _created = DatasetGrant.objects.get_or_create(dataset=dataset, workspace=grantee)
    return row


@transaction.atomic
def revoke(user, workspace, dataset_name: str, grantee_slug: str, *, backend=None) -> None:
    """`backend`: the cluster's, which removes the grantee's copies of the versions (Kubernetes)."""
    require_owner(user, workspace)
    dataset = get_dataset(workspace, dataset_name)
    deleted, _rows = DatasetGrant.objects.filter(dataset=dataset, workspace__slug=grantee_slug).delete()
    if not deleted:
        raise NotFound(_("dataset '%(name)s' is not shared with '%(workspace)s'") % {
            "name": dataset_name, "workspace": grantee_slug}, field="workspace")
    if backend is not None and hasattr(backend, "revoke_dataset"):
        backend.revoke_dataset(workspace.slug, dataset.name, list(dataset.versions.values_list("number", flat=True)),
                               grantee_slug)


def jobs_mounting_version(version: DatasetVersion) -> list[Job]:
    dataset = version.dataset
    workspaces = [dataset.workspace_id, *dataset.grants.values_list("workspace_id", flat=True)]
    found = []
    for job in _live_jobs(workspaces):
        for entry in _spec_mounts(job):
            ref = entry.get("dataset")
            resolved = _resolve_ref(job.workspace, ref) if isinstance(ref, str) else None
            if resolved is not None and resolved.pk == version.pk:
                found.append(job)
                break
    return found


@transaction.atomic
def delete_version(user, workspace, dataset_name: str, number: int, *, backend=None) -> None:
    """`backend`: the cluster's, whose objects of the version go too (Kubernetes: the VolumeSnapshot, the
    grantees' copies and the claims restored from them)."""
    require_manager(user, workspace)
    dataset = get_dataset(workspace, dataset_name)
    version = dataset.versions.filter(number=number).first()
    if version is None:
        raise NotFound(_("dataset '%(name)s' has no version v%(number)s") % {
            "name": dataset_name, "number": number}, field="version")
    jobs = jobs_mounting_version(version)
    if jobs:
        raise Conflict(_("%(name)s@v%(number)s is mounted by live jobs: %(jobs)s") % {
            "name": dataset_name, "number": number, "jobs": _job_list(jobs)}, field="version")
    grantees = list(dataset.grants.values_list("workspace__slug", flat=True))
    version.delete()
    if backend is not None and hasattr(backend, "delete_dataset_version"):
        backend.delete_dataset_version(workspace.slug, dataset_name, number, grantees)
    path = dataset_dir(workspace.slug, dataset_name, number)

    def remove() -> None:
        if path.exists():
            _writable_again(path)
            shutil.rmtree(path, ignore_errors=True)

    transaction.on_commit(remove)


# --------------------------------------------------------------------------- what a job mounts


def _resolve_ref(workspace, ref: str) -> DatasetVersion | None:
    """`[owner/]name@vN` as seen from `workspace`: its own dataset, or one granted to it."""
    parsed = parse_dataset_ref(ref)
    if parsed is None:
        return None
    owner, name, number = parsed
    versions = DatasetVersion.objects.filter(dataset__name=name, number=number).select_related("dataset__workspace")
    if owner is None or owner == workspace.slug:
        own = versions.filter(dataset__workspace=workspace).first()
        if own is not None or owner is not None:
            return own
        granted = list(versions.filter(dataset__grants__workspace=workspace)[:2])
        return granted[0] if len(granted) == 1 else None
    return versions.filter(dataset__workspace__slug=owner, dataset__grants__workspace=workspace).first()


def _mount_problem(workspace, mount: VolumeMount, lock: bool) -> str | None:
    if mount.volume is not None:
        volumes = Volume.objects.filter(workspace=workspace, name=mount.volume)
        if not (volumes.select_for_update() if lock else volumes).exists():
            return _("workspace '%(workspace)s' has no volume '%(name)s'") % {
                "workspace": workspace.slug, "name": mount.volume}
        return None
    if _resolve_ref(workspace, mount.dataset) is None:
        return _("there is no dataset version %(ref)s that workspace '%(workspace)s' may mount") % {
            "ref": mount.dataset, "workspace": workspace.slug}
    return None


def check_mounts(workspace, spec: JobSpec, *, lock: bool = False) -> None:
    """SpecError (each at its entry's line and column) for a volume the workspace lacks, or a dataset version
    that does not exist or was not granted to it. `lock` (inside the submitting transaction): the volumes'
    rows stay locked until it commits, so a delete waits and then sees the new job."""
    issues = []
    for role in spec.roles:
        for mount in role.volumes:
            problem = _mount_problem(workspace, mount, lock)
            if problem:
                field, line, column = mount.where
                issues.append(SpecIssue(line, column, field, problem if line is not None or not field
                                        else f"{field}: {problem}"))
    if issues:
        raise SpecError(issues)


@dataclass(frozen=True)
class Mount:
    """One mount of a replica, resolved: a volume of the job's workspace, or a dataset version."""

    kind: str   # VOLUME | DATASET
    workspace: str   # the owner's slug
    name: str
    version: int   # 0 for a volume
    mount_path: str
    read_only: bool
    size_gib: int = 0   # a volume's claim (Kubernetes); a version's source volume, if still there
    storage_class: str = ""
    access_mode: str = AccessMode.READ_WRITE_ONCE
    home_of: str = ""   # a notebook's home volume: the notebook's name (its claim is named after it)

    @property
    def of_dataset(self) -> bool:
        """A dataset version: read-only, restored from its snapshot. Else a workspace volume: its own storage,
        made when first mounted, sized and classed as the volume is."""
        return self.kind == DATASET

    @property
    def writable(self) -> bool:
        """Whether the replica writes through it: a volume not mounted read-only."""
        return not self.of_dataset and not self.read_only

    def host_path(self) -> Path:
        if self.of_dataset:
            return dataset_dir(self.workspace, self.name, self.version)
        return volume_dir(self.workspace, self.name)


def role_mounts(job: Job, role_name: str) -> tuple[Mount, ...]:
    """What a replica of the job's role mounts (from the stored spec), resolved now."""
    spec = job.spec or {}
    roles = spec.get("roles")
    entries: list[dict] = []
    if isinstance(roles, list):
        for role in roles:
            if isinstance(role, dict) and role.get("name") == role_name:
                entries = list(role.get("volumes") or [])
    else:
        entries = list(spec.get("volumes") or [])   # a notebook's or a service's one role
    checkpoint = spec.get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("volume") and isinstance(roles, list):
        # a resumable job's checkpoint volume, mounted at checkpoint.path for every role (unless mounted there)
        path = posixpath.normpath(str(checkpoint.get("path") or "/"))
        if all(posixpath.normpath(str(e.get("mountPath") or "/")) != path for e in entries):
            entries.append({"name": checkpoint["volume"], "mountPath": path, "readOnly": False})
    if not entries:
        return ()   # most jobs mount nothing: no query in the cycle's launches
    mounts = []
    volumes = {v.name: v for v in Volume.objects.filter(workspace=job.workspace,
                                                        name__in=[e.get("name") for e in entries if e.get("name")])}
    for entry in entries:
        path = posixpath.normpath(str(entry.get("mountPath") or "/"))
        volume = volumes.get(entry.get("name"))
        if volume is not None:   # a volume deleted since: nothing to mount (refused while live)
            mounts.append(Mount(VOLUME, job.workspace.slug, volume.name, 0, path, bool(entry.get("readOnly")),
                                volume.size_gib, volume.storage_class, volume.access_mode, volume.home_of))
        elif entry.get("dataset"):
            version = _resolve_ref(job.workspace, entry["dataset"])
            if version is not None:   # a version deleted since: nothing to mount (refused while live)
                source = Volume.objects.filter(workspace=version.dataset.workspace, name=version.source_volume)
                mounts.append(Mount(DATASET, version.dataset.workspace.slug, version.dataset.name, version.number,
                                    path, True, source.values_list("size_gib", flat=True).first() or 0))
    return tuple(mounts)


def volume_mounts(job: Job, role_name: str) -> dict[str, str]:
    """The simulated cluster's mapping for a replica of the job's role: its mount path -> the folder on this
    machine. Passed to its process as SIM_MOUNTS (JSON)."""
    return host_mapping(role_mounts(job, role_name))


def host_mapping(mounts: Iterable[Mount]) -> dict[str, str]:
    """Mount path -> folder on this machine, for a launch's resolved mounts (a volume's folder is made when
    first mounted)."""
    mapping = {}
    for mount in mounts:
        host = mount.host_path()
        if not mount.of_dataset:
            host.mkdir(parents=True, exist_ok=True)
        mapping[mount.mount_path] = str(host)
    return mapping
