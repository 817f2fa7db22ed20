"""Upgrade from the last release: a PostgreSQL database made by the release's own code (its migrations
and its demo month, in its own environment) is migrated by this tree, and nothing it held changes.

The figures are read with SQL through psycopg, from tables both schemas have: neither the release's
code nor this tree's ORM reads them, since the schema is what changes. Then this tree's portal must
serve the upgraded database (a sign-in with the release's password, pages, the API), and its
migrations reversed back to the release's schema must keep the figures too (and satisfy the release).

Caches, so that a second run takes a minute, not ten: the release's environment under
var/upgrade-cache/<commit>/venv, and the release's database as a PostgreSQL template
upgrade_release_<commit> (each run migrates a copy of it; drop the template to build it again).
Skipped unless DATABASE_URL is PostgreSQL and git has the release's commit.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.upgrade.releases import last_release

pytestmark = [pytest.mark.slow_server, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "var" / "upgrade-cache"
DEMO_OWNER = ("alice", "alice-demo")  # the release's demo password: its hash must still sign her in

# What the upgrade must keep, from tables both schemas have (names checked in both trees).
FIGURES = {
    "ledger per workspace (lines, cost, list cost, allocated GPU-h)":
        "SELECT w.slug, count(*), sum(c.cost), sum(c.list_cost), sum(c.allocated_gpu_hours) "
        "FROM billing_chargeline c JOIN portal_workspace w ON w.id = c.workspace_id GROUP BY w.slug ORDER BY w.slug",
    "jobs per workspace and state (count, final cost)":
        "SELECT w.slug, j.state, count(*), sum(j.final_cost) "
        "FROM scheduling_job j JOIN portal_workspace w ON w.id = j.workspace_id GROUP BY 1, 2 ORDER BY 1, 2",
    "jobs per kind": "SELECT kind, count(*) FROM scheduling_job GROUP BY 1 ORDER BY 1",
    "job events per kind": "SELECT kind, count(*) FROM scheduling_jobevent GROUP BY 1 ORDER BY 1",
    "job logs (replica logs, bytes, lines)":
        "SELECT count(*), coalesce(sum(size), 0), "
        "coalesce(sum(length(text) - length(replace(text, E'\\n', ''))), 0) FROM scheduling_replicalog",
    "usage samples": "SELECT count(*) FROM billing_usagesample",
    "replicas per state": "SELECT state, count(*) FROM scheduling_replica GROUP BY 1 ORDER BY 1",
    "price tables (currency, from, off-peak windows)":
        "SELECT currency, effective_from, offpeak_windows FROM billing_pricetable ORDER BY 1, 2",
    "users, memberships, workspaces": "SELECT (SELECT count(*) FROM auth_user), "
        "(SELECT count(*) FROM portal_membership), (SELECT count(*) FROM portal_workspace)",
}

# This tree's checks on the upgraded database, run in a process of its own (its settings, its code).
SERVE_CHECK = """
import json, os
import django
django.setup()
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()
client, out = Client(), {}
out["login_page"] = client.get("/login/").status_code
anonymous = client.get("/api/v1/version")
out["version_anonymous"] = [anonymous.status_code, anonymous.json()]
signed_in = client.post("/login/", {"username": USER, "password": PASSWORD})
out["sign_in"] = [signed_in.status_code, signed_in.get("Location")]
out["dashboard"] = client.get("/").status_code
version = client.get("/api/v1/version")
out["version_signed_in"] = [version.status_code, version.json()]
jobs = client.get("/api/v1/jobs/")
out["api_jobs"] = [jobs.status_code, jobs.json().get("count")]
print("SERVE-CHECK " + json.dumps(out))
"""


def _postgres_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if urlsplit(url).scheme in ("postgres", "postgresql") else None


def _with_database(url: str, name: str) -> str:
    return urlsplit(url)._replace(path=f"/{name}").geturl()


def _full_commit(commit: str) -> str | None:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def _run(argv, *, cwd, env, what: str, timeout: float = 1800) -> tuple[str, float]:
    """Run a step; fail the test with its output if it fails. Returns its output and wall seconds."""
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    took = time.monotonic() - started
    print(f"  {what}: {took:.1f} s")
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout, took


def _admin(url: str):
    import psycopg

    return psycopg.connect(_with_database(url, "postgres"), autocommit=True)


def _database_exists(url: str, name: str) -> bool:
    with _admin(url) as admin:
        return admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def _drop(url: str, name: str) -> None:
    with _admin(url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def figures(url: str) -> dict[str, list[list[str]]]:
    import psycopg

    with psycopg.connect(url) as connection:
        return {label: [[str(value) for value in row] for row in connection.execute(sql).fetchall()]
                for label, sql in FIGURES.items()}


def _release_env(var_dir: Path, database_url: str) -> dict[str, str]:
    """Only what the release's settings need: its own VAR_DIR, its own embedded Redis (no REDIS_URL, so
    no cache entry of another run can reach its demo month), the database."""
    keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TZ") if name in os.environ}
    return {**keep, "DATABASE_URL": database_url, "VAR_DIR": str(var_dir), "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1"}


def _release_python(checkout: Path, commit: str) -> Path:
    """The release's own environment, built from its pyproject.toml (it predates uv.lock), kept per commit;
    the release is installed editable from this run's checkout."""
    venv = CACHE / commit[:12] / "venv"
    python = venv / "bin" / "python"
    stamp = venv / ".dependencies-installed"
    if not stamp.exists():
        shutil.rmtree(venv, ignore_errors=True)
        base = shutil.which("python3.11") or sys.executable
        _run([base, "-m", "venv", str(venv)], cwd=ROOT, env=os.environ.copy(), what="release venv")
    uv = ROOT / ".tools" / "bin" / "uv"
    uv = str(uv) if uv.exists() else shutil.which("uv")
    if uv:
        install = [uv, "pip", "install", "--python", str(python), "-e", str(checkout)]
    else:
        install = [str(python), "-m", "pip", "install", "-q", "-e", str(checkout)]
    if stamp.exists():
        install.append("--no-deps")  # only point the editable install at this run's checkout
    _run(install, cwd=ROOT, env=os.environ.copy(), what="release install" + (" (cached)" if stamp.exists() else ""))
    stamp.touch()
    return python


HISTORY_DAYS = 4
RELEASE_HISTORY = (
    "from portal.management.commands.load_demo import quiet_cycles, redis_for_the_load\n"
    "from portal.demo.usage import load_demo_usage\n"
    "with redis_for_the_load(), quiet_cycles():\n"
    f"    print('demo jobs', load_demo_usage(days={HISTORY_DAYS}))\n"
)


def _release_database(url: str, checkout: Path, python: Path, commit: str, var_dir: Path) -> str:
    """The template database the release made (migrate, then its demo month), built once per commit."""
    template = f"upgrade_release_{commit[:12]}_d{HISTORY_DAYS}"
    if _database_exists(url, template):
        print(f"  release database: template {template} (cached)")
        return template
    building = f"upgrade_build_{secrets.token_hex(4)}"
    with _admin(url) as admin:
        admin.execute(f'CREATE DATABASE "{building}"')
    try:
        env = _release_env(var_dir, _with_database(url, building))
        _run([str(python), "manage.py", "migrate", "--noinput"], cwd=checkout, env=env, what="release migrate")
        # The demo tenants, cluster and prices, then a few days of jobs played through the release's own
        # services (cycle, agents' ingest, ledger): every table the upgrade must keep has rows, in minutes
        # rather than the quarter hour the whole month takes on a 2-core machine.
        _run([str(python), "manage.py", "load_demo", "--no-history"], cwd=checkout, env=env,
             what="release load_demo --no-history")
        _run([str(python), "manage.py", "shell", "-c", RELEASE_HISTORY], cwd=checkout, env=env,
             what=f"release demo history ({HISTORY_DAYS} days)")
        with _admin(url) as admin:  # complete: only now does it get the name a later run looks for
            admin.execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')
    finally:
        _drop(url, building)
    return template


@pytest.fixture
def release_checkout(tmp_path):
    url = _postgres_url()
    if url is None:
        pytest.skip("the upgrade test needs PostgreSQL (DATABASE_URL postgres://...)")
    commit, version = last_release()
    full = _full_commit(commit)
    if full is None:
        pytest.skip(f"git history lacks release {version}'s commit {commit}")
    checkout = tmp_path / "release"
    # the release needs no ../shared: only bench/ of its code reads it
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout), full],
                   check=True, capture_output=True)
    try:
        yield url, full, version, checkout
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)],
                       check=False, capture_output=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False, capture_output=True)


def _latest_migrations(url: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(url) as connection:
        return dict(connection.execute("SELECT app, max(name) FROM django_migrations GROUP BY app").fetchall())


def _print_figures(title: str, values: dict) -> None:
    print(title)
    for label, rows in values.items():
        print(f"  {label}: " + "; ".join(" ".join(row) for row in rows))


def test_upgrade_from_the_last_release_keeps_the_data_and_serves(release_checkout, tmp_path):
    from portal.testing import child_env

    url, commit, version, checkout = release_checkout
    started = time.monotonic()
    print(f"\nupgrade from {version} ({commit[:12]}) to this tree")
    python = _release_python(checkout, commit)
    template = _release_database(url, checkout, python, commit, tmp_path / "release-var")
    database = f"upgrade_{secrets.token_hex(4)}"
    with _admin(url) as admin:
        admin.execute(f'CREATE DATABASE "{database}" TEMPLATE "{template}"')
    upgraded = _with_database(url, database)
    try:
        before = figures(upgraded)
        release_schema = _latest_migrations(upgraded)
        assert int(before["usage samples"][0][0]) > 0 and before["job logs (replica logs, bytes, lines)"][0][0] != "0"
        assert before["ledger per workspace (lines, cost, list cost, allocated GPU-h)"], "the release made no ledger"

        env = child_env(DATABASE_URL=upgraded, VAR_DIR=str(tmp_path / "tree-var"))
        migrated, _ = _run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                           what="this tree's migrate")
        print("  applied: " + ", ".join(line.split()[1] for line in migrated.splitlines() if "Applying" in line))
        _run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, what="manage.py check")

        after = figures(upgraded)
        _print_figures("figures before the upgrade (the release's database):", before)
        changed = {label: (before[label], after[label]) for label in FIGURES if before[label] != after[label]}
        assert changed == {}, f"the upgrade changed: {changed}"
        print("figures after the upgrade: equal, all of them")

        import psycopg

        with psycopg.connect(upgraded) as connection:  # the calendars the data migration wrote
            calendars = connection.execute("SELECT (SELECT count(*) FROM scheduling_offpeakcalendar), "
                                           "(SELECT count(*) FROM billing_pricetable), "
                                           "(SELECT count(*) FROM scheduling_workspacecalendar), "
                                           "(SELECT count(*) FROM billing_workspacecurrency)").fetchone()
        print(f"  off-peak calendars {calendars[0]} for {calendars[1]} price tables; "
              f"workspace calendars {calendars[2]} for {calendars[3]} workspace currencies")
        assert calendars[0] == calendars[1] > 0 and calendars[2] == calendars[3]

        script = f"USER, PASSWORD = {DEMO_OWNER!r}\n" + SERVE_CHECK
        out, _ = _run([sys.executable, "-c", script], cwd=ROOT, env=env, what="this tree serves")
        served = json.loads(out.split("SERVE-CHECK ", 1)[1])
        print(f"  served: {served}")
        assert served["login_page"] == 200
        assert served["version_anonymous"][0] == 200 and set(served["version_anonymous"][1]) == {"version"}
        assert served["sign_in"][0] == 302, "the release's password no longer signs in"
        assert served["dashboard"] == 200
        status, body = served["version_signed_in"]
        assert status == 200 and body["pending_migrations"] == []
        assert body["version"] != version, "this tree still claims the release's version"
        assert served["api_jobs"][0] == 200 and served["api_jobs"][1] > 0

        # Back down: this tree's migrations reversed to the release's schema, which the release accepts; apps
        # the release did not have first (theirs may depend on the others' newer migrations)
        for app in sorted(set(_latest_migrations(upgraded)) - set(release_schema)):
            _run([sys.executable, "manage.py", "migrate", app, "zero", "--noinput"], cwd=ROOT, env=env,
                 what=f"this tree's migrate back to no {app}")
        for app, migration in sorted(release_schema.items()):
            if _latest_migrations(upgraded).get(app) != migration:
                _run([sys.executable, "manage.py", "migrate", app, migration, "--noinput"], cwd=ROOT, env=env,
                     what=f"this tree's migrate back to {app}.{migration}")
        assert _latest_migrations(upgraded) == release_schema
        assert figures(upgraded) == before, "reversing the migrations changed the figures"
        print("figures after migrating back to the release's schema: equal, all of them")
        _run([str(python), "manage.py", "migrate", "--check"], cwd=checkout,
             env=_release_env(tmp_path / "release-var", upgraded), what="the release's migrate --check")
    finally:
        _drop(url, database)
    assert not _database_exists(url, database)
    print(f"upgrade test: {time.monotonic() - started:.1f} s wall")
