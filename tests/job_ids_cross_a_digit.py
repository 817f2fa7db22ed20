"""An opt-in check (`-p tests.job_ids_cross_a_digit`, SQLite only) for tests that depend on the job ids the
tests before them left: each database test's first job gets id JOB_ID_FIRST (default 9), so its next ones
cross to two digits, and a test that orders jobs submitted at one instant by id ("10" before "9") fails in
every run instead of in some orders of the workers."""

import os

import pytest


@pytest.fixture(autouse=True)
def job_ids_cross_a_digit(request):
    names = request.fixturenames
    if "db" in names or "transactional_db" in names:
        request.getfixturevalue("transactional_db" if "transactional_db" in names else "db")
        from django.db import connection

        if connection.vendor == "sqlite":
            first = int(os.environ.get("JOB_ID_FIRST", "9"))
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM sqlite_sequence WHERE name = 'scheduling_job'")
                cursor.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('scheduling_job', %s)", [first - 1])
    yield
