"""Writing, checking and restoring backup archives (`manage.py backup`, `manage.py restore`).

An archive is one tar file (gzip'd when its name ends in .gz or .tgz):

    manifest.json              what was saved (portal.backup.manifest)
    database/<dump>            pg_dump --format=custom, or a SQLite copy
    files/<tree name>/...      each of portal.backup.trees.FILE_TREES
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command

from portal.backup import database, manifest
from portal.backup.trees import FILE_TREES

DATABASE_DIR, FILES_DIR = "database", "files"


class BackupRefused(Exception):
    """The archive cannot be restored here; nothing was changed."""


@dataclass
class BackupResult:
    path: Path
    bytes: int
    manifest: dict
    pruned: list[Path] = field(default_factory=list)


@dataclass
class RestoreResult:
    manifest: dict
    mismatches: list[str]  # figures that differ from the manifest's after the restore; empty: all agree
    key_differs: bool


# --------------------------------------------------------------------------- backup


def _tar_mode(path: Path, write: bool) -> str:
    compressed = path.name.endswith((".gz", ".tgz"))
    return ("w:gz" if compressed else "w") if write else ("r:gz" if compressed else "r")


def default_name(created_at: str) -> str:
    stamp = re.sub(r"[^0-9]", "", created_at[:19])  # 2026-11-28T21:00:00 -> 20261128210000
    return f"gpu-platform-{stamp}.tar"


def backup(out: Path, *, keep: int | None = None) -> BackupResult:
    """Write one archive to `out` (a folder: a file named by the time in it), then, with `keep`, delete
    the older archives named like it in its folder beyond the `keep` newest."""
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="gpu-platform-backup-") as work:
        dump_file = Path(work) / database.DUMP_FILES[database.vendor()]
        figures = database.dump(dump_file, lambda: manifest.build(trees={}, database={}))
        if out.is_dir():
            out = out / default_name(figures["created_at"])
        figures["database"] = {"vendor": database.vendor(), "file": f"{DATABASE_DIR}/{dump_file.name}",
                               "bytes": dump_file.stat().st_size, "sha256": _sha256(dump_file)}
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, _tar_mode(out, write=True)) as tar:
            tar.add(dump_file, arcname=figures["database"]["file"])
            for tree in FILE_TREES:
                figures["file_trees"][tree.name] = _add_tree(tar, tree.path, f"{FILES_DIR}/{tree.name}")
            data = json.dumps(figures, indent=2, sort_keys=True).encode()
            info = tarfile.TarInfo(manifest.NAME)
            info.size, info.mtime = len(data), int(os.path.getmtime(dump_file))
            tar.addfile(info, io.BytesIO(data))
        os.replace(partial, out)
    result = BackupResult(path=out, bytes=out.stat().st_size, manifest=figures)
    if keep is not None:
        result.pruned = prune(out, keep)
    return result


def _add_tree(tar: tarfile.TarFile, path: Path, arcname: str) -> int:
    """Add the folder's files (a missing folder: none); returns how many."""
    count = 0
    if path.is_dir():
        for item in sorted(path.rglob("*")):
            if item.is_symlink() or not (item.is_file() or item.is_dir()):
                continue  # a link could point out of the tree on restore; sockets and pipes are not data
            tar.add(item, arcname=f"{arcname}/{item.relative_to(path).as_posix()}", recursive=False)
            count += item.is_file()
    return count


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def archive_pattern(name: str) -> re.Pattern:
    """Names like `name` but for their numbers: gpu-platform-20261128T2100.tar matches its siblings."""
    return re.compile("".join(r"\d+" if part.isdigit() else re.escape(part)
                              for part in re.split(r"(\d+)", name) if part))


def prune(newest: Path, keep: int) -> list[Path]:
    """Delete the archives named like `newest` in its folder beyond the `keep` newest (by modification
    time); returns what was deleted."""
    if keep < 1:
        raise ValueError("keep at least one archive")
    pattern = archive_pattern(newest.name)
    found = [p for p in newest.parent.iterdir() if p.is_file() and pattern.fullmatch(p.name)]
    found.sort(key=lambda p: (p.stat().st_mtime, p.name), reverse=True)
    old = [p for p in found[keep:] if p != newest]
    for path in old:
        path.unlink()
    return old


# --------------------------------------------------------------------------- restore


def read_manifest(path: Path) -> dict:
    try:
        with tarfile.open(path, _tar_mode(Path(path), write=False)) as tar:
            member = tar.extractfile(manifest.NAME)
            return json.load(member)
    except (tarfile.TarError, KeyError, OSError, ValueError) as error:
        raise BackupRefused(f"{path} is not a backup archive of this platform: {error}") from error


def refusals(found: dict, *, ignore_key_mismatch: bool = False) -> list[str]:
    """Why the archive cannot be restored here (empty: it can)."""
    reasons = []
    if found.get("format") != manifest.FORMAT:
        reasons.append(f"the archive's format {found.get('format')!r} is not {manifest.FORMAT}, the one this "
                       f"version ({manifest.project_version()}) reads")
        return reasons
    unknown = manifest.unknown_migrations(found["schema"]["applied"])
    if unknown:
        reasons.append(
            f"the archive's schema is newer than this code: it was made by version {found['project_version']} "
            f"with migrations this version ({manifest.project_version()}) does not have: {', '.join(unknown)}. "
            "Restore it with that version or a later one.")
    if found["database"]["vendor"] != database.vendor():
        reasons.append(f"the archive holds a {found['database']['vendor']} database; this install is configured "
                       f"for {database.vendor()}")
    if found["secret_key_fingerprint"] != manifest.key_fingerprint() and not ignore_key_mismatch:
        reasons.append(
            "the archive was made with a different SECRET_KEY: what was signed or encrypted with the key "
            "(sessions, password-reset links, any encrypted values) needs the same SECRET_KEY. Set it as it "
            "was, or pass --ignore-key-mismatch to restore anyway.")
    return reasons


def restore(path: Path, *, ignore_key_mismatch: bool = False) -> RestoreResult:
    """Restore the archive's database and file trees over this install's, bring the schema up to this
    code's (migrate), then check the ledger sums and job counts against the manifest. Refused (nothing
    changed) when `refusals` says so."""
    path = Path(path)
    found = read_manifest(path)
    reasons = refusals(found, ignore_key_mismatch=ignore_key_mismatch)
    if reasons:
        raise BackupRefused("\n".join(reasons))
    with tempfile.TemporaryDirectory(prefix="gpu-platform-restore-") as work:
        staging = Path(work)
        with tarfile.open(path, _tar_mode(path, write=False)) as tar:
            tar.extractall(staging, filter="data")  # no absolute paths, links out or device files
        dump_file = staging / found["database"]["file"]
        if _sha256(dump_file) != found["database"]["sha256"]:
            raise BackupRefused(f"the archive's database file is damaged (its checksum differs): {path}")
        database.load(dump_file)
        for tree in FILE_TREES:
            _replace_tree(staging / FILES_DIR / tree.name, tree.path)
    ContentType.objects.clear_cache()  # ids this process cached may name other rows now
    call_command("migrate", interactive=False, verbosity=0)
    return RestoreResult(manifest=found, mismatches=compare(found),
                         key_differs=found["secret_key_fingerprint"] != manifest.key_fingerprint())


def _replace_tree(source: Path, target: Path) -> None:
    """The tree becomes the archive's: files made since the backup go (an archive without the tree
    empties it)."""
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.move(source, target)
    else:
        target.mkdir()


def compare(found: dict) -> list[str]:
    """The manifest's ledger sums and job counts against the database's now, one line per difference."""
    lines = []
    for label, saved, now in (("ledger sum", found["ledger_sums"], manifest.ledger_sums()),
                              ("job count", found["job_counts"], manifest.job_counts())):
        for workspace in sorted(set(saved) | set(now)):
            if saved.get(workspace) != now.get(workspace):
                lines.append(f"{label} of {workspace}: archive {saved.get(workspace)}, restored {now.get(workspace)}")
    return lines
