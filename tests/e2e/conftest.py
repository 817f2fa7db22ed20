"""Browser tests: Debian's Chromium driven by Playwright against the real Daphne server.

A missing browser fails these tests (it never skips them): CI must really run them.

The live server is a process of its own, where no test sets the platform clock: it reads the system's. Data the
server judges by its own time (last week, the last hour's samples) is written at `scheduling.clock.now()`, which
reads the same there and here while no `clock` fixture is set.
"""

import os
import shutil

import pytest
from playwright.sync_api import expect

CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("Chromium is not installed: `apt-get install -y chromium` (never download a browser)")
    return path


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
    # between browser steps are still plain synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, tmp_path):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    expect.set_options(timeout=15000)  # assertions wait as long as actions: CI machines are loaded
    yield page
    context.close()


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def scheduler_running():
    """The scheduling cycle on the simulated cluster every 0.3 s in a background thread (what
    Celery beat does in `make run`), with a fast clock: a 1 h job runs 2 s."""
    import threading

    from django.db import connection

    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.cycle.run import run_scheduling_cycle

    stop = threading.Event()
    errors = []

    def loop():
        backend = SimulatedBackend(speedup=1800, failure_rate=0)
        try:
            while not stop.wait(0.3):
                run_scheduling_cycle(backend)
        except Exception as error:  # surfaced by the test below
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=10)
    assert not errors, errors
