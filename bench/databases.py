"""Benchmarks' own PostgreSQL databases: only one of their own, on loopback."""

from __future__ import annotations

from urllib.parse import urlparse


def check_postgres_url(url: str) -> tuple[str, str]:
    """The database's name and the admin URL (the `postgres` database of the same server)."""
    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    if not name or name == "postgres" or parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"--database-url must name a database of its own on loopback, got {url!r}")
    return name, parsed._replace(path="/postgres").geturl()
