"""Shared steps of the browser tests."""

import time
from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def login(page, server, username, password):
    page.goto(f"{server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-submit")


def shot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def wait_for(predicate, timeout=20.0):
    """Poll `predicate` (a database read, say) until it holds; AssertionError after `timeout` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")
