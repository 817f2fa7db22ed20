"""GET /api/v1/version: the release to anyone; the commit, the schema and the migrations not applied
yet only to a signed-in caller."""

import tomllib

from django.db import connection
from django.db.migrations.loader import MigrationLoader
from rest_framework.test import APIClient

from portal import version
from portal.services import create_api_token
from portal.testing import ROOT

PUBLIC = {"version"}


def pyproject_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def latest_on_disk() -> dict[str, str]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return {app: max(name for label, name in loader.disk_migrations if label == app)
            for app in ("billing", "portal", "scheduling")}


def test_anyone_reads_the_release_and_nothing_else(db):
    answer = APIClient().get("/api/v1/version")
    assert answer.status_code == 200
    assert answer.json() == {"version": pyproject_version()}


def test_a_token_of_any_scope_also_reads_the_commit_and_the_schema(cluster):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_token(cluster.bob, 'v', scope='read')[1]}")
    body = api.get("/api/v1/version").json()
    assert body["version"] == pyproject_version()
    assert body["commit"] is None or len(body["commit"]) == 40
    assert {app: body["schema"][app] for app in ("billing", "portal", "scheduling")} == latest_on_disk()
    assert body["pending_migrations"] == []


def test_a_session_sees_a_migration_not_applied_yet(cluster):
    api = APIClient()
    api.force_login(cluster.alice)
    latest = latest_on_disk()["scheduling"]
    with connection.cursor() as cursor:  # as if the code were newer than the database (rolled back after)
        cursor.execute("DELETE FROM django_migrations WHERE app = %s AND name = %s", ["scheduling", latest])
    body = api.get("/api/v1/version").json()
    assert body["pending_migrations"] == [f"scheduling.{latest}"]
    assert body["schema"]["scheduling"] < latest


def test_a_bad_token_is_refused_not_taken_for_anonymous(db):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Bearer gpt_not-a-token")
    answer = api.get("/api/v1/version")
    assert answer.status_code == 401
    assert answer["Content-Type"].startswith("application/problem+json")


def test_the_version_is_the_source_checkouts_pyproject():
    # the editable install's metadata may lag behind a bumped pyproject until it is installed again
    assert version.version() == pyproject_version()


def test_the_schema_names_the_openapi_fields(db):
    schema = APIClient().get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/version"]["get"]
    assert {} in operation.get("security", [])  # callable without credentials
    body = operation["responses"]["200"]["content"]["application/json"]["schema"]
    fields = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[-1]]
    assert PUBLIC <= set(fields["required"]) and {"commit", "schema", "pending_migrations"} <= set(fields["properties"])


def test_the_project_apps_are_the_projects_own_wherever_the_environment_lives():
    # the development environment (.venv) lies inside the checkout, the image's in /opt/venv: the apps
    # installed into either are not the project's, so the migration walk and the schema do not depend on it
    assert {"billing", "console", "portal", "scheduling"} <= set(version.project_apps())
    assert not {"auth", "contenttypes", "account", "sessions"} & set(version.project_apps())


def test_a_dependencys_migration_not_applied_yet_is_pending_too(cluster):
    # an upgrade that brings a newer Django or allauth brings their migrations: the upgrade check must see
    # them, wherever the environment is installed
    api = APIClient()
    api.force_login(cluster.alice)
    loader = MigrationLoader(None, ignore_no_migrations=True)
    latest = max(name for label, name in loader.disk_migrations if label == "auth")
    with connection.cursor() as cursor:  # rolled back after
        cursor.execute("DELETE FROM django_migrations WHERE app = %s AND name = %s", ["auth", latest])
    body = api.get("/api/v1/version").json()
    assert body["pending_migrations"] == [f"auth.{latest}"]
    assert body["schema"]["auth"] < latest
