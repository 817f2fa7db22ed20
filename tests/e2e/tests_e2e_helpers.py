"""Shared steps of the browser tests."""

from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def login(page, server, username, password):
    page.goto(f"{server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-submit")
