"""The embedded SQLite database runs in WAL mode with a busy timeout."""

import pytest
from django.db import connection


@pytest.mark.django_db
def test_sqlite_connection_is_in_wal_mode_with_a_busy_timeout():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] >= 20_000
