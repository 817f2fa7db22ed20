"""Shared fixtures: the project's Redis, the test world (tests/world.py), the platform clock, and real
server processes.

Imports of Django stay inside fixtures so pure tests (scheduler core, node agent) also run
with `-p no:django`.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from portal.testing import ROOT, child_env, free_port, wait_for_http
from tests.world import Tenants


def _django_configured() -> bool:
    try:
        from django.conf import settings

        return settings.configured
    except ImportError:
        return False


IMAGE_TESTS = "tests/deploy/test_image.py"
_image_build = None  # the thread waiting for `make image`, when this process started it


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """When the image tests are selected, their `make image` starts now, in the background: half of it waits on
    downloads and the disk, and the other tests run meanwhile (tests/deploy/test_image.py).

    Under pytest-xdist (loadscope: a module to one worker, handed out in this order, the Makefile's
    --no-loadscope-reorder) the modules that start slow servers go first, then the slow ones, then the image
    tests (their build has had time), then the rest by size: a long module handed out last would leave the
    other workers idle while it runs. A run in one process keeps the collected order."""
    global _image_build
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    if IMAGE_TESTS in modules and not config.option.collectonly:
        from tests.deploy.test_image import build_in_background

        _image_build = build_in_background()
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def weight(path: str) -> tuple[int, int, int]:
        if path == IMAGE_TESTS:  # after the other slow ones: by then its build has ended
            return 1, 1, 0
        marks = {mark.name for item in modules[path] for mark in item.iter_markers()}
        return (0 if "slow_server" in marks else 1 if "slow" in marks else 2), 0, -len(modules[path])

    items[:] = [item for path in sorted(modules, key=weight) for item in modules[path]]


def pytest_sessionfinish():
    """A build this process started ends before it does: another worker's image tests may be waiting on it."""
    if _image_build is not None:
        _image_build.join()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """A SQLite test database of this run's own (a file: the servers and workers tests start share it),
    so two runs at once never share one."""
    from django.conf import settings

    test = settings.DATABASES["default"].get("TEST") or {}
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3") and test.get("NAME"):
        name = Path(test["NAME"])
        test["NAME"] = str(name.with_name(f"{name.stem}-{os.getpid()}{name.suffix}"))


@pytest.fixture(scope="session", autouse=True)
def redis_server():
    """The embedded Redis for tests (its own socket), or the REDIS_URL one CI provides."""
    if not _django_configured():
        yield None
        return
    from django.conf import settings

    from portal import embedded_redis

    proc = embedded_redis.start(settings.REDIS_URL) if settings.EMBEDDED_REDIS else None
    yield settings.REDIS_URL
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(autouse=True)
def kept_forecasts_forgotten():
    """Each test's expected starts come from its own world, never from a session or forecast kept for
    an identical cluster by an earlier test."""
    yield
    forecast, starts = sys.modules.get("scheduling.forecast"), sys.modules.get("scheduling.starts")
    if forecast is not None:
        forecast.forget_kept()
    if starts is not None:
        starts.forget_session()


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    notebook_origin: str = ""  # its NOTEBOOK_ORIGIN: notebooks' hosts on its own port


# the portal's usual hosts, and one on the same site as the notebooks' hosts (the browser test of the notebook
# origin: `*.nb.localhost` and `portal.nb.localhost` are one site, as `*.nb.example.org` and `gpu.example.org`)
LIVE_HOSTS = "127.0.0.1,localhost,[::1],testserver,portal.nb.localhost"


@contextmanager
def daphne_server(tmp_path_factory, **env: str):
    """The real ASGI server (HTTP + websockets) on the test database, `env` added to its environment."""
    port = free_port()
    notebook_origin = f"http://{{id}}.nb.localhost:{port}"  # the same server, on notebooks' host names
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "portal.asgi:application"],
            # buckets on loopback (the s3_server fixture) are let through; webhooks keep their own setting
            cwd=ROOT, env=child_env(NOTEBOOK_ORIGIN=notebook_origin, ALLOWED_HOSTS=LIVE_HOSTS,
                                    BUCKET_ALLOW_PRIVATE_CIDRS="127.0.0.1/32", **env),
            stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=90, proc=proc)  # slow on a busy machine
        yield Server(url=f"http://127.0.0.1:{port}", proc=proc, notebook_origin=notebook_origin)
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture(scope="session")
def live_daphne(django_db_setup, redis_server, tmp_path_factory):
    """The real ASGI server on the test database. Tests that use it need `transactional_db` so their data
    is committed and visible to it."""
    with daphne_server(tmp_path_factory) as server:
        yield server


@pytest.fixture(scope="session")
def start_live_daphne(django_db_setup, redis_server, tmp_path_factory):
    """For a live server of a test module's own, with more environment (settings read at start):
    `with start_live_daphne(OIDC_PROVIDERS=...) as server:`."""
    return functools.partial(daphne_server, tmp_path_factory)


@pytest.fixture(scope="session")
def live_daphne_with_training_processes(django_db_setup, redis_server, tmp_path_factory):
    """The real ASGI server of a simulated cluster whose training replicas run processes: a job's page shows
    what its process logged (its environment's names, its mounts)."""
    with daphne_server(tmp_path_factory, SIM_TRAINING_PROCESSES="1") as server:
        yield server


@pytest.fixture(scope="session")
def celery_worker_queue(django_db_setup, redis_server, tmp_path_factory):
    """A real Celery worker process consuming a queue of its own; yields the queue name."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    log = tmp_path_factory.mktemp("celery") / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", queue, "--pool", "solo",
             "-n", f"{queue}@%h", "-l", "INFO"],
            cwd=ROOT, env=child_env(), stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        yield queue
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture
def sent_tasks(monkeypatch) -> list[tuple[str, list]]:
    """Tasks the code sends by name (scheduling.broker), caught here instead of reaching the broker:
    (task name, args) in the order sent."""
    from portal.celery import app

    sent: list[tuple[str, list]] = []
    monkeypatch.setattr(app, "send_task", lambda name, args=(), **options: sent.append((name, list(args))))
    return sent


@pytest.fixture
def tenants(db) -> Tenants:
    """The test world's people and workspaces (tests/world.py), never the demo data."""
    from tests.world import make_tenants

    return make_tenants()


@pytest.fixture
def cluster(tenants) -> Tenants:
    """The test world's pools, nodes, GPUs, queues and prices on top of `tenants`."""
    from tests.world import make_cluster

    return make_cluster(tenants)


class Clock:
    """The platform clock, set by the test: starts at noon in the platform's time zone (peak
    hours, no off-peak surprises) whatever the hour on the machine."""

    def __init__(self):
        from django.utils import timezone

        self.now = timezone.localtime().replace(hour=12, minute=0, second=0, microsecond=0)

    def __call__(self):
        return self.now

    def advance(self, seconds):
        from datetime import timedelta

        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    from scheduling import clock as platform_clock

    fixed = Clock()
    with platform_clock.reading(fixed):  # then a module's clock again, if one is set
        yield fixed


@pytest.fixture(scope="module")
def module_clock():
    """The platform clock for data a module loads once (a module-scoped fixture): set as `clock` is, for the
    whole module."""
    from scheduling import clock as platform_clock

    fixed = Clock()
    with platform_clock.reading(fixed):
        yield fixed


@pytest.fixture
def run(django_capture_on_commit_callbacks):
    """Run a scheduling cycle and its after-commit work (backend calls, live events), as a real
    commit would inside the test's transaction."""
    from scheduling.cycle.run import run_scheduling_cycle

    def run_cycle(backend, clock):
        with django_capture_on_commit_callbacks(execute=True):
            return run_scheduling_cycle(backend, now=clock.now)

    return run_cycle


@pytest.fixture(autouse=True)
def language_reset():
    """A request leaves its language active in the thread (LocaleMiddleware activates, nothing
    deactivates; a server's next request activates its own): each test starts in the default."""
    yield
    if not _django_configured():
        return
    from django.utils import translation

    translation.deactivate()


@pytest.fixture(autouse=True)
def kept_cycle_state_forgotten():
    """What the cycle worker keeps between cycles (the snapshot read incrementally, the memo, the pending
    reasons) names rows by primary key; a test's rolled-back rows may reuse another test's keys, so each
    test starts with none kept, as a cold worker does."""
    yield
    if not _django_configured():
        return
    from scheduling.cycle.run import KEPT

    KEPT.__init__()  # the snapshot read incrementally and the memo too: rolled-back rows' keys come back


@pytest.fixture(autouse=True)
def simulated_processes_stopped():
    """The simulated cluster's real processes (notebook servers) a test started, or queued to start, are
    stopped after it, and their folders (homes included) removed: the next test starts from none."""
    yield
    if not _django_configured():
        return
    import shutil

    from django.conf import settings

    from scheduling.backends.simulated.processes import STARTS, ProcessRuntime

    # Starts a cycle queued and nobody waited for would otherwise run during the next test, and a replica key
    # it reuses (the same job id) would find that process's record instead of starting its own.
    STARTS.wait()
    if settings.SIM_RUNTIME_DIR.exists():
        ProcessRuntime(settings.SIM_RUNTIME_DIR).stop_all()
        shutil.rmtree(settings.SIM_RUNTIME_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 API on loopback (moto in server mode) for the object-storage tests; yields its URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def api_as():
    """A REST client signed in as the given user: `api_as(cluster.alice).get(...)`."""
    from rest_framework.test import APIClient

    def make(user):
        api = APIClient()
        api.force_authenticate(user)
        return api

    return make
