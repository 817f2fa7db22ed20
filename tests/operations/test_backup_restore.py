"""manage.py backup and restore: the demo data round-trips through one archive (the costs API, job counts
and a job's logs answer the same after a wipe and a restore), on SQLite and on PostgreSQL; and a restore
refuses what it cannot take (a newer schema, another SECRET_KEY) without changing anything."""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from portal.backup import database, manifest, services
from portal.demo.usage import load_demo_usage
from portal.management.commands.load_demo import quiet_cycles
from scheduling import clock, logs
from scheduling.models import Job, Replica, ReplicaLog

USAGE_DAYS = 2
WEEKDAY_EVENING = datetime(2026, 11, 25, 21, 0, tzinfo=UTC)  # a Wednesday: Monday and Tuesday were office days
DEMO_TENANTS = {"alice": "vision-lab", "bob": "nlp-group"}


@pytest.fixture
def trees(settings, tmp_path):
    """The file trees in folders of the test's own (never the developer's var/)."""
    settings.NOTEBOOK_HOME_DIR = tmp_path / "homes"
    settings.REPORT_EXPORT_DIR = tmp_path / "exports"
    home = settings.NOTEBOOK_HOME_DIR / "vision-lab" / "scratch"
    home.mkdir(parents=True)
    (home / "notes.ipynb").write_text('{"cells": []}')
    settings.REPORT_EXPORT_DIR.mkdir()
    (settings.REPORT_EXPORT_DIR / "costs-1.csv").write_text("day,cost\n2026-11-01,1.00\n")
    settings.VOLUMES_DIR, settings.DATASETS_DIR = tmp_path / "volumes", tmp_path / "datasets"
    (settings.VOLUMES_DIR / "vision-lab" / "imagenet").mkdir(parents=True)
    (settings.VOLUMES_DIR / "vision-lab" / "imagenet" / "train.csv").write_text("path,label\n")
    (settings.DATASETS_DIR / "vision-lab" / "imagenet" / "v1").mkdir(parents=True)
    (settings.DATASETS_DIR / "vision-lab" / "imagenet" / "v1" / "train.csv").write_text("path,label\n")
    return settings


def _api(username):
    api = APIClient()
    api.force_authenticate(get_user_model().objects.get(username=username))
    return api


def _tenant_answers(log_job_id: int) -> dict:
    """What the tenants see through the API: their costs over the demo month, job counts, one job's logs."""
    today = clock.now().date()
    answers = {}
    for username, slug in DEMO_TENANTS.items():
        api = _api(username)
        costs = api.get("/api/v1/costs/", {"start": str(today - timedelta(days=40)), "end": str(today + timedelta(days=1)),
                                          "group_by": "workspace"})
        jobs = api.get("/api/v1/jobs/", {"workspace": slug, "limit": 1})
        assert costs.status_code == 200 and jobs.status_code == 200, (costs.content, jobs.content)
        answers[username] = {"totals": costs.json()["totals"], "rows": costs.json()["rows"],
                             "jobs": jobs.json()["count"]}
    job_logs = _api("alice").get(f"/api/v1/jobs/{log_job_id}/logs/")
    assert job_logs.status_code == 200, job_logs.content
    answers["logs"] = job_logs.content.decode()
    return answers


def _a_job_with_logs() -> int:
    """One of alice's demo jobs with a kept log (the demo month keeps some; else one is kept here, as the
    cycle keeps it when a replica ends)."""
    kept = ReplicaLog.objects.filter(job__workspace__slug="vision-lab").order_by("id").first()
    if kept is not None:
        return kept.job_id
    replica = Replica.objects.filter(job__workspace__slug="vision-lab").order_by("id").first()
    logs.store_replica_log(replica, "epoch 1 loss 0.91\nepoch 2 loss 0.42\n")
    return replica.job_id


def _wipe(settings) -> None:
    connection.close()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA foreign_keys = OFF")
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"DROP TABLE IF EXISTS {connection.ops.quote_name(table)}"
                           + (" CASCADE" if connection.vendor == "postgresql" else ""))
    import shutil

    for folder in (settings.NOTEBOOK_HOME_DIR, settings.REPORT_EXPORT_DIR, settings.VOLUMES_DIR, settings.DATASETS_DIR):
        shutil.rmtree(folder)


@pytest.mark.slow_server
@pytest.mark.django_db(transaction=True)
def test_the_demo_data_survives_a_backup_a_wipe_and_a_restore(trees, tmp_path, clock):
    clock.now = WEEKDAY_EVENING  # the demo's teams submit little at weekends: the shortened month must hold work
    call_command("load_demo", "--no-history", stdout=io.StringIO())
    started = time.perf_counter()
    with quiet_cycles():
        made = load_demo_usage(days=USAGE_DAYS)  # the demo's month, shortened: a day costs ~15 s of cycles
    usage_s = time.perf_counter() - started
    log_job = _a_job_with_logs()
    before = _tenant_answers(log_job)
    assert Job.objects.count() > 0 and any(a["totals"] for k, a in before.items() if k != "logs")

    archive = tmp_path / "backups" / "gpu-platform-20261128T210000.tar.gz"
    archive.parent.mkdir()
    started = time.perf_counter()
    call_command("backup", str(archive), stdout=io.StringIO())
    backup_s = time.perf_counter() - started
    saved = services.read_manifest(archive)

    _wipe(trees)
    with pytest.raises(Exception):  # noqa: B017 - the tables are gone, whatever the driver calls it
        Job.objects.count()

    out = io.StringIO()
    started = time.perf_counter()
    call_command("restore", str(archive), "--yes", stdout=out)
    restore_s = time.perf_counter() - started
    after = _tenant_answers(log_job)

    assert after == before
    assert "ledger sums agree" in out.getvalue()
    assert (trees.NOTEBOOK_HOME_DIR / "vision-lab" / "scratch" / "notes.ipynb").read_text() == '{"cells": []}'
    assert (trees.REPORT_EXPORT_DIR / "costs-1.csv").exists()
    assert (trees.VOLUMES_DIR / "vision-lab" / "imagenet" / "train.csv").read_text() == "path,label\n"
    assert (trees.DATASETS_DIR / "vision-lab" / "imagenet" / "v1" / "train.csv").exists()
    assert saved["ledger_sums"] == manifest.ledger_sums() and saved["job_counts"] == manifest.job_counts()
    print(f"\nBACKUP {connection.vendor}: {made} demo jobs of {USAGE_DAYS} days played in {usage_s:.1f} s; archive {archive.stat().st_size} bytes "
          f"(database {saved['database']['bytes']} bytes), {sum(saved['job_counts'].values())} jobs, "
          f"backup {backup_s:.2f} s, restore {restore_s:.2f} s; ledger sums {saved['ledger_sums']}; "
          f"costs API totals {({u: a['totals'] for u, a in after.items() if u != 'logs'})}; "
          f"job counts {saved['job_counts']}; log of job {log_job}: {len(after['logs'])} characters")


# --------------------------------------------------------------------------- refusals, pruning (fast)


def _doctored(archive: Path, change) -> Path:
    """The archive with its manifest changed by `change` (a function of the manifest dict)."""
    out = archive.with_name("doctored-" + archive.name)
    with tarfile.open(archive) as source, tarfile.open(out, "w") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            if member.name == manifest.NAME:
                found = json.loads(data)
                change(found)
                data = json.dumps(found).encode()
                member.size = len(data)
            target.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


@pytest.fixture
def archive(transactional_db, trees, tenants, tmp_path):
    """A backup of the test world (two workspaces) with one ledger line, so a sum is not empty."""
    from billing.models import ChargeLine

    now = clock.now()
    ChargeLine.objects.create(hour=now.replace(minute=0, second=0, microsecond=0), day=now.date(),
                              period=now.date().replace(day=1), charge_start=now, charge_end=now,
                              workspace=tenants.vision, category=ChargeLine.Category.CREDIT, cost="-12.50",
                              currency="USD", computed_at=now, reason="goodwill", provisional=False)
    path = tmp_path / "gpu-platform-1.tar"
    call_command("backup", str(path), stdout=io.StringIO())
    return path


def _state(settings) -> tuple:
    """What a restore would change: the ledger, the people, the notebook homes' files."""
    from billing.models import ChargeLine

    return (ChargeLine.objects.count(), get_user_model().objects.count(),
            sorted(p.name for p in Path(settings.NOTEBOOK_HOME_DIR).rglob("*")))


def test_a_restore_refuses_an_archive_of_a_newer_schema_and_changes_nothing(archive, settings):
    newer = _doctored(archive, lambda m: m["schema"]["applied"].append(["billing", "0999_from_the_future"]))
    from billing.models import ChargeLine

    ChargeLine.objects.all().delete()  # differs from the archive: a restore would bring the line back
    (settings.NOTEBOOK_HOME_DIR / "vision-lab" / "new.txt").write_text("made after the backup")
    before = _state(settings)
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(newer), "--yes")
    assert "schema is newer than this code" in str(refused.value)
    assert "billing.0999_from_the_future" in str(refused.value)
    assert _state(settings) == before and before[0] == 0


def test_a_restore_refuses_a_damaged_database_file_and_changes_nothing(archive, settings):
    damaged = _doctored(archive, lambda m: m["database"].update(sha256="0" * 64))
    from billing.models import ChargeLine

    ChargeLine.objects.all().delete()
    before = _state(settings)
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(damaged), "--yes")
    assert "damaged" in str(refused.value)
    assert _state(settings) == before


def test_a_restore_refuses_another_secret_key_unless_told_to_ignore_it(archive, settings):
    settings.SECRET_KEY = "another key entirely, for this test only"
    from billing.models import ChargeLine

    ChargeLine.objects.all().delete()
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(archive), "--yes")
    assert "different SECRET_KEY" in str(refused.value) and "--ignore-key-mismatch" in str(refused.value)
    assert ChargeLine.objects.count() == 0  # nothing restored

    out = io.StringIO()
    call_command("restore", str(archive), "--yes", "--ignore-key-mismatch", stdout=out)
    assert ChargeLine.objects.count() == 1
    assert "another SECRET_KEY" in out.getvalue()


def test_a_restore_reports_ledger_sums_that_differ_from_the_manifest(archive):
    lied = _doctored(archive, lambda m: m["ledger_sums"]["vision-lab"].update(USD="-99.00"))
    with pytest.raises(CommandError) as mismatch:
        call_command("restore", str(lied), "--yes", stdout=io.StringIO())
    assert "ledger sum of vision-lab: archive {'USD': '-99.00'}, restored {'USD': '-12.50'}" in str(mismatch.value)


def test_the_manifest_holds_figures_and_no_secret(archive, tenants, settings):
    found = services.read_manifest(archive)
    text = archive.read_bytes()
    assert settings.SECRET_KEY.encode() not in text
    assert settings.SECRET_KEY not in json.dumps(found)
    password = connection.settings_dict.get("PASSWORD")
    if password:
        assert str(password) not in json.dumps(found)
    assert found["ledger_sums"]["vision-lab"] == {"USD": "-12.50"}
    assert found["ledger_sums"][tenants.nlp.slug] == {}
    assert found["database"]["vendor"] == connection.vendor
    assert found["schema"]["latest"]["billing"] == max(
        name for app, name in manifest.applied_migrations() if app == "billing")
    assert found["schema"]["number"] == len(manifest.applied_migrations())
    assert len(found["secret_key_fingerprint"]) == 16
    assert found["file_trees"] == {"notebook-homes": 1, "report-exports": 1, "volumes": 1, "datasets": 1}
    names = tarfile.open(archive).getnames()
    assert database.DUMP_FILES[connection.vendor] in {Path(n).name for n in names}
    assert "files/notebook-homes/vision-lab/scratch/notes.ipynb" in names
    assert "files/volumes/vision-lab/imagenet/train.csv" in names


def test_keep_deletes_the_older_archives_named_alike_beyond_the_newest_n(transactional_db, trees, tmp_path):
    folder = tmp_path / "backups"
    folder.mkdir()
    old = []
    for n, day in enumerate(("20261120T0300", "20261121T0300", "20261122T0300")):
        path = folder / f"gpu-platform-{day}.tar"
        path.write_bytes(b"an older backup")
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
        old.append(path)
    other = folder / "something-else.tar"
    other.write_bytes(b"not ours")
    out = io.StringIO()
    call_command("backup", str(folder / "gpu-platform-20261128T0300.tar"), "--keep", "2", stdout=out)
    assert sorted(p.name for p in folder.iterdir()) == [
        "gpu-platform-20261122T0300.tar", "gpu-platform-20261128T0300.tar", "something-else.tar"]
    assert "Deleted the older backup" in out.getvalue()
    with pytest.raises(CommandError):
        call_command("backup", str(folder / "gpu-platform-20261129T0300.tar"), "--keep", "0")


def test_a_restore_upgrades_an_archive_of_an_older_schema(transactional_db, trees, tenants, tmp_path):
    latest = max(name for app, name in manifest.applied_migrations() if app == "billing")
    previous = sorted(name for app, name in manifest.applied_migrations() if app == "billing")[-2]
    call_command("migrate", "billing", previous, verbosity=0)  # the archive of a version one migration older
    try:
        older = tmp_path / "gpu-platform-older.tar"
        call_command("backup", str(older), stdout=io.StringIO())
    finally:
        call_command("migrate", "billing", verbosity=0)
    saved = services.read_manifest(older)
    assert saved["schema"]["latest"]["billing"] == previous

    call_command("restore", str(older), "--yes", stdout=io.StringIO())
    assert ("billing", latest) in manifest.applied_migrations()
    assert manifest.schema()["number"] == saved["schema"]["number"] + 1
    assert manifest.job_counts() == saved["job_counts"]
