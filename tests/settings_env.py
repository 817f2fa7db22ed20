"""What the tests need from the settings, as environment variables set before Django reads them.

Loaded as a pytest plugin (`-p tests.settings_env` in pyproject's addopts): pytest-django loads the
settings before any conftest.py, so no conftest can set these. Each test run (process) gets its own
embedded Redis socket and simulated-cluster folders, so runs never touch a `make run` or each other,
and passwords are hashed fast. The per-run test database is named in tests/conftest.py.

Under pytest-xdist (`make test` runs one worker per core) each worker is such a process. A REDIS_URL
given to the run (one Redis server for all workers) gets a database number per worker, so no worker
sees another's keys, queues or cycle lock; the channel layer names its pub/sub channels after that
number (portal/settings/redis.py), since pub/sub ignores it.
"""

import os
from pathlib import Path

VAR_DIR = Path(os.environ.get("VAR_DIR") or Path(__file__).resolve().parents[1] / "var")
_RUNTIME = VAR_DIR / f"sim-runtime-test-{os.getpid()}"
FOR_THE_SETTINGS = {
    "EMBEDDED_REDIS_SOCKET": str(VAR_DIR / f"redis-test-{os.getpid()}.sock"),
    "SIM_RUNTIME_DIR": str(_RUNTIME),
    "NOTEBOOK_HOME_DIR": str(_RUNTIME / "homes"),
    "VOLUMES_DIR": str(_RUNTIME / "volumes"),
    "DATASETS_DIR": str(_RUNTIME / "datasets"),
    "TEST_FAST_PASSWORD_HASHER": "1",
    # training replicas run without a process (a process each would slow the suite); the tests of that
    # feature give their backend training_processes=True
    "SIM_TRAINING_PROCESSES": "0",
}
SET_HERE = {name: value for name, value in FOR_THE_SETTINGS.items() if name not in os.environ}
os.environ.update(SET_HERE)

REDIS_DATABASES = 16  # a Redis server's default number of databases


def redis_url_for_worker(url: str, worker: str) -> str:
    """`url` with database (its own + the worker's index) modulo 16: gw0 keeps the given one. The forms
    are portal.redis_urls' (not imported here: this runs before Django is set up)."""
    from urllib.parse import parse_qs, urlencode, urlsplit

    parts = urlsplit(url)
    index = int(worker.removeprefix("gw"))
    if parts.scheme == "unix":
        query = parse_qs(parts.query)
        query["db"] = [str((int(query.get("db", ["0"])[0]) + index) % REDIS_DATABASES)]
        return f"unix://{parts.path}?{urlencode(query, doseq=True)}"
    given = parts.path.strip("/")
    return parts._replace(path=f"/{(int(given or 0) + index) % REDIS_DATABASES}").geturl()


# Kept in the environment (not taken back below): a process a test starts from os.environ must not reach
# the shared database number either.
if os.environ.get("REDIS_URL") and os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["REDIS_URL"] = redis_url_for_worker(os.environ["REDIS_URL"], os.environ["PYTEST_XDIST_WORKER"])


def pytest_configure(config):
    """The settings are read: take the variables back, so a process a test starts as a platform of its
    own (its own VAR_DIR) does not inherit them. The servers and workers that share the test database get
    the settings' values from `portal.testing.child_env`."""
    for name in SET_HERE:
        os.environ.pop(name, None)
