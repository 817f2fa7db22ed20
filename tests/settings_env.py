"""What the tests need from the settings, as environment variables set before Django reads them.

Loaded as a pytest plugin (`-p tests.settings_env` in pyproject's addopts): pytest-django loads the
settings before any conftest.py, so no conftest can set these. Each test run (process) gets its own
embedded Redis socket and simulated-cluster folders, so runs never touch a `make run` or each other,
and passwords are hashed fast. The per-run test database is named in tests/conftest.py.
"""

import os
from pathlib import Path

VAR_DIR = Path(os.environ.get("VAR_DIR") or Path(__file__).resolve().parents[1] / "var")
_RUNTIME = VAR_DIR / f"sim-runtime-test-{os.getpid()}"
FOR_THE_SETTINGS = {
    "EMBEDDED_REDIS_SOCKET": str(VAR_DIR / f"redis-test-{os.getpid()}.sock"),
    "SIM_RUNTIME_DIR": str(_RUNTIME),
    "NOTEBOOK_HOME_DIR": str(_RUNTIME / "homes"),
    "TEST_FAST_PASSWORD_HASHER": "1",
}
SET_HERE = {name: value for name, value in FOR_THE_SETTINGS.items() if name not in os.environ}
os.environ.update(SET_HERE)


def pytest_configure(config):
    """The settings are read: take the variables back, so a process a test starts as a platform of its
    own (its own VAR_DIR) does not inherit them. The servers and workers that share the test database get
    the settings' values from `portal.testing.child_env`."""
    for name in SET_HERE:
        os.environ.pop(name, None)
