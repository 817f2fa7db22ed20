"""Export benchmark: 1,000,000 ledger lines as FOCUS CSV (streamed) and as Excel (the Celery task's body).

    .venv/bin/python -m bench.export --rows 1000000 [--db /tmp/export-bench.sqlite3] [--keep]

The rows live in a throwaway SQLite database file (migrated from scratch, filled with raw INSERTs),
whatever DATABASE_URL says. Each export runs in a fresh child process so
its peak RSS (getrusage ru_maxrss) is that export's alone: the CSV through the real ASGI view
(`/reports/export.csv`, consumed chunk by chunk from its async iterator), the Excel file through
`billing.reports.tasks.build_excel_export`. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RANGE = {"start": "2026-01-01", "end": "2026-12-31"}


def _setup(db: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{db}"  # never the real database: the rows are throwaway
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def generate(rows: int) -> dict:
    """Migrate, then one workspace, user, queue and 1,000 jobs, then `rows` ledger lines."""
    import random
    from datetime import date, timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction

    from portal.models import Membership, Role, Workspace
    from scheduling.models import Job, Queue

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench-finance", password="x")
    ws = Workspace.objects.create(slug="bench", name="Bench")
    Membership.objects.create(user=user, workspace=ws, role=Role.FINANCE)
    queue = Queue.objects.create(name="bench-q")
    Job.objects.bulk_create([Job(workspace=ws, queue=queue, name=f"job-{i}", job_type="train", spec_text="",
                                 spec={}) for i in range(1000)])
    job_ids = list(Job.objects.filter(workspace=ws).values_list("pk", flat=True))
    rng = random.Random(7)
    start = date(2026, 1, 1)
    sql = ("INSERT INTO billing_chargeline (category, hour, day, period, charge_start, charge_end, workspace_id, "
           "queue, job_id, job_name, submitter, pool, node, vendor, gpu_model, sharing, slice, sku_id, offpeak, spot, "
           "list_unit_price, allocated_gpu_hours, used_gpu_hours, idle_gpu_hours, exclusive_gpu_hours, "
           "cpu_core_hours, memory_gib_hours, exclusive_cost, list_cost, cost, currency, provisional, computed_at, "
           "reason) VALUES (" + ", ".join(["%s"] * 34) + ")")
    t0 = time.perf_counter()
    batch = []
    with transaction.atomic(), connection.cursor() as cursor:
        for i in range(rows):
            job = job_ids[i % len(job_ids)]
            alloc = rng.randint(1, 1000) / 1000
            used = alloc * rng.random()
            cost = round(alloc * 3.04, 2)
            day = start + timedelta(days=(i // 3000) % 365)
            hour = f"{day} {i % 24:02d}:00:00"
            batch.append(("Usage", hour, day, day.replace(day=1), hour, hour, ws.pk, "bench-q", job, f"job-{job}",
                          "bench-finance", "h100", f"node-{i % 977:04d}", "nvidia",
                          "H100-80GB" if i % 3 else "A100-80GB", "exclusive", "1 GPU", "H100-80GB", False, False,
                          "3.0000", f"{alloc:.6f}", f"{used:.6f}", f"{alloc - used:.6f}", f"{alloc:.6f}",
                          f"{alloc:.6f}", f"{alloc * 4:.6f}", f"{cost * 1.2:.2f}", f"{cost:.2f}", f"{cost:.2f}",
                          "USD", False, hour, ""))
            if len(batch) == 20000:
                cursor.executemany(sql, batch)
                batch.clear()
        if batch:
            cursor.executemany(sql, batch)
    return {"generate_s": round(time.perf_counter() - t0, 2)}


def export_csv() -> dict:
    """The real view under the ASGI handler; the body is counted and dropped chunk by chunk."""
    from asgiref.sync import async_to_sync
    from django.contrib.auth import get_user_model
    from django.test import AsyncClient

    client = AsyncClient()
    client.force_login(get_user_model().objects.get(username="bench-finance"))
    before, cpu0 = rss_mb(), cpu_s()

    async def run():
        t0 = time.perf_counter()
        response = await client.get("/reports/export.csv", RANGE)
        size = lines = chunks = 0
        first_byte = None
        async for chunk in response.streaming_content:
            if first_byte is None:
                first_byte = time.perf_counter() - t0
            size += len(chunk)
            lines += chunk.count(b"\n")
            chunks += 1
        return {"status": response.status_code, "seconds": round(time.perf_counter() - t0, 2),
                "first_byte_s": round(first_byte or 0, 3), "bytes": size, "rows": lines - 1, "chunks": chunks}

    result = async_to_sync(run)()
    return {**result, "cpu_s": round(cpu_s() - cpu0, 2), "rss_before_mb": round(before, 1),
            "peak_rss_mb": round(rss_mb(), 1), "export_rss_mb": round(rss_mb() - before, 1)}


def export_excel(out_dir: Path) -> dict:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from billing.models import ReportExport
    from billing.reports.tasks import build_excel_export

    settings.REPORT_EXPORT_DIR = out_dir
    export = ReportExport.objects.create(user=get_user_model().objects.get(username="bench-finance"), filters=RANGE)
    before, cpu0 = rss_mb(), cpu_s()
    t0 = time.perf_counter()
    name = build_excel_export(str(export.pk))
    seconds, cpu = time.perf_counter() - t0, cpu_s() - cpu0
    export.refresh_from_db()
    path = out_dir / name
    return {"seconds": round(seconds, 2), "cpu_s": round(cpu, 2), "rows": export.rows_done,
            "bytes": path.stat().st_size, "rss_before_mb": round(before, 1), "peak_rss_mb": round(rss_mb(), 1),
            "export_rss_mb": round(rss_mb() - before, 1)}


def _child(phase: str, db: Path, out_dir: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.export", "--phase", phase, "--db", str(db),
                           "--out", str(out_dir)], cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{phase} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the database and the files")
    parser.add_argument("--phase", choices=["generate", "csv", "excel"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if args.phase:
        _setup(args.db)
        result = {"generate": lambda: generate(args.rows), "csv": export_csv,
                  "excel": lambda: export_excel(args.out)}[args.phase]()
        print(json.dumps(result))
        return
    work = Path(tempfile.mkdtemp(prefix="export-bench-"))
    db = args.db or work / "bench.sqlite3"
    out = args.out or work
    if db.exists():
        db.unlink()
    proc = subprocess.run([sys.executable, "-m", "bench.export", "--phase", "generate", "--rows", str(args.rows),
                           "--db", str(db), "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    generated = json.loads(proc.stdout.strip().splitlines()[-1])
    csv_result = _child("csv", db, out)
    excel_result = _child("excel", db, out)
    print(json.dumps({
        "rows": args.rows, "database": "sqlite (throwaway file)", "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        **generated,
        "csv": {**csv_result, "target": "< 15 s, < 100 MB peak RSS"},
        "excel": {**excel_result, "target": "< 90 s, < 150 MB peak RSS"},
    }, indent=2))
    if not args.keep:
        for path in work.iterdir():
            path.unlink()
        work.rmdir()


if __name__ == "__main__":
    main()
