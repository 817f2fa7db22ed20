"""/readyz against the real database and Redis: 200 when all is fine, else 503 naming what fails."""

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from portal import health


@pytest.fixture
def fresh_migration_cache():
    health.migrated_databases.clear()
    yield
    health.migrated_databases.clear()


def test_readyz_is_200_when_database_redis_and_migrations_are_fine(client, db, fresh_migration_cache):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ready", "database": "ok", "redis": "ok", "migrations": "ok",
                               "failing": []}
    assert len(health.migrated_databases) == 1  # the plan is built once, then remembered


def test_readyz_names_redis_when_it_is_unreachable(client, db, settings, fresh_migration_cache):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unready" and body["failing"] == ["redis"]
    assert body["redis"].startswith("error:") and body["database"] == "ok" and body["migrations"] == "ok"
    assert client.get("/healthz").status_code == 200  # liveness does not follow Redis


@pytest.mark.django_db(transaction=True)
def test_readyz_names_migrations_until_the_last_one_is_applied(client, fresh_migration_cache):
    graph = MigrationExecutor(connection).loader.graph
    leaf = next(node for node in graph.leaf_nodes() if node[0] == "portal")
    (parent,) = [p for p in graph.node_map[leaf].parents if p[0] == "portal"]
    call_command("migrate", "portal", parent[1], verbosity=0)
    try:
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["failing"] == ["migrations"] and body["database"] == "ok" and body["redis"] == "ok"
        assert body["migrations"].startswith("pending:") and "portal." in body["migrations"]
        assert not health.migrated_databases  # not remembered while anything is pending
    finally:
        call_command("migrate", verbosity=0)
    assert client.get("/readyz").status_code == 200
    assert health.migrated_databases
